//! `dyncore topology`: what the live backend finds on this machine — the
//! CPUs this process may use, how they group into cores, packages and NUMA
//! nodes, their kinds and capacities, what sysfs did not say, and whether
//! a fused pair can be a real SMT core (Chameleon §5.5) or is throttled.

use std::path::PathBuf;

use anyhow::{Context, Result};
use dyncore_core::CpuSet;
use dyncore_core::topology::CoreKind;
use dyncore_runtime::machine::Machine;
use dyncore_runtime::machine::fuse::{FuseMechanism, decide};

use dyncore_report::table::Table;

#[derive(Debug, clap::Args)]
pub struct TopologyArgs {
    /// The sysfs mount to read (another folder shaped like it, such as a
    /// fixture tree, for testing).
    #[arg(long, default_value = "/sys", value_parser = sysfs_root)]
    sysfs: PathBuf,
    /// The CPUs to treat as allowed, e.g. `0-3,8` (default: this process's
    /// affinity mask).
    #[arg(long, value_parser = cpu_list)]
    allowed: Option<CpuSet>,
}

fn sysfs_root(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    let possible = p.join("devices/system/cpu/possible");
    if possible.is_file() {
        Ok(p)
    } else {
        Err(format!("{} has no devices/system/cpu/possible: not a sysfs mount", p.display()))
    }
}

fn cpu_list(s: &str) -> Result<CpuSet, String> {
    let set: CpuSet = s.parse().map_err(|e| format!("{e}"))?;
    if set.is_empty() {
        return Err("an empty CPU list: name at least one CPU, e.g. `0-3,8`".into());
    }
    Ok(set)
}

pub fn run(a: &TopologyArgs) -> Result<()> {
    let allowed = match &a.allowed {
        Some(s) => s.clone(),
        None => dyncore_runtime::affinity::allowed_cpus().context("reading this process's affinity mask")?,
    };
    let m = Machine::read(&a.sysfs, &allowed).with_context(|| format!("reading {}", a.sysfs.display()))?;
    print!("{}", render(&m));
    Ok(())
}

/// The whole report, as printed.
fn render(m: &Machine) -> String {
    let mut s = format!(
        "Machine (sysfs at {}): possible CPUs {}, online {}, allowed {} -> usable {}\n",
        m.root.display(),
        m.possible,
        m.online,
        m.allowed,
        m.usable()
    );
    let smt = match m.smt_active {
        Some(true) => "SMT active",
        Some(false) => "SMT not active",
        None => "SMT state not reported (no cpu/smt/active)",
    };
    s += &format!("{smt}; {} usable CPU(s) in {} package(s)\n\n", m.topology.ncpus(), m.topology.nnodes());
    s += &cpu_table(m).to_terminal();
    s += "\n";
    let nodes: Vec<String> = m.numa_nodes.iter().map(|(n, c)| format!("node {n}: {c}")).collect();
    s += &format!("NUMA nodes: {}\n", if nodes.is_empty() { "unknown".into() } else { nodes.join("; ") });
    let left_out: Vec<String> = m
        .cpus
        .iter()
        .filter(|c| !(c.online && c.allowed))
        .map(|c| format!("{} ({})", c.cpu, if c.online { "not allowed" } else { "offline" }))
        .collect();
    if !left_out.is_empty() {
        s += &format!("Not in the topology: CPU {}\n", left_out.join(", "));
    }
    if !m.missing.is_empty() {
        s += "Missing from sysfs:\n";
        for line in &m.missing {
            s += &format!("  - {line}\n");
        }
    }
    s + &fuse_summary(m)
}

fn cpu_table(m: &Machine) -> Table {
    let t = &m.topology;
    let mut table = Table::new(
        "Usable CPUs, in the live backend's (logical) order",
        &["logical", "OS CPU", "package", "NUMA node", "core (logical)", "kind", "capacity", "max freq"],
    );
    for c in 0..t.ncpus() {
        let desc = m.cpus.iter().find(|o| o.cpu == t.os_cpu(c)).and_then(|o| o.desc.clone());
        let opt = |v: Option<String>| v.unwrap_or_else(|| "–".into());
        table.row(vec![
            c.to_string(),
            t.os_cpu(c).to_string(),
            opt(desc.as_ref().map(|d| d.package.to_string())),
            opt(t.numa_node(c).map(|n| n.to_string())),
            t.core_cpus(c).to_string(),
            match t.kind(c) {
                CoreKind::Big => "big".into(),
                CoreKind::Little => "little".into(),
            },
            opt(t.capacity(c).map(|v| v.to_string())),
            opt(desc.and_then(|d| d.max_freq_khz).map(|f| format!("{:.2} GHz", f as f64 / 1e6))),
        ]);
    }
    table
}

/// Chameleon §5.5: which aligned pairs are real cores, with one runtime
/// CPU per logical CPU.
fn fuse_summary(m: &Machine) -> String {
    let t = &m.topology;
    let real: Vec<usize> = (0..t.ncpus()).map(|c| t.os_cpu(c)).collect();
    let (mut cores, mut throttled) = (Vec::new(), 0);
    for node in 0..t.nnodes() {
        for pair in t.fusable_blocks(node, 2) {
            match decide(t, &real, &pair) {
                FuseMechanism::SmtCore { core, .. } => cores.push(format!("{pair} (OS CPUs {core})")),
                FuseMechanism::Throttle(_) => throttled += 1,
            }
        }
    }
    let mut s = String::from("Fused pairs (Chameleon 5.5), one runtime CPU per usable CPU: ");
    if cores.is_empty() {
        s += &format!(
            "no SMT core here; every fused pair ({throttled} aligned pair(s)) is emulated by throttling \
             (the representative's duty cycle)\n"
        );
    } else {
        s += &format!(
            "{} pair(s) are real cores (the sibling's runtime CPU parks): {}; {throttled} other pair(s) are \
             throttled\n",
            cores.len(),
            cores.join(", ")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn fixture(name: &str) -> Machine {
        let root =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../dyncore-runtime/tests/fixtures/sysfs").join(name);
        Machine::read(&root, &"0-31".parse().unwrap()).unwrap()
    }

    #[test]
    fn prints_cpus_kinds_nodes_what_is_missing_and_the_fuse_mechanism() {
        let hybrid = render(&fixture("hybrid"));
        assert!(hybrid.contains("usable 0-19"), "{hybrid}");
        assert!(
            hybrid.contains("big") && hybrid.contains("little") && hybrid.contains("4.90 GHz"),
            "{hybrid}"
        );
        assert!(hybrid.contains("8 pair(s) are real cores"), "{hybrid}");
        assert!(hybrid.contains("2 other pair(s) are throttled"), "{hybrid}");
        let two = render(&fixture("two-socket"));
        assert!(two.contains("Not in the topology: CPU 15 (offline)"), "{two}");
        assert!(two.contains("NUMA nodes: node 0: 0-3,8-11; node 1: 4-7,12-15"), "{two}");
        assert!(two.contains("0-1 (OS CPUs 0,8)"), "{two}");
        let small = render(&fixture("two-cpu"));
        assert!(
            small.contains("no SMT core here; every fused pair (1 aligned pair(s)) is emulated"),
            "{small}"
        );
        assert!(small.contains("Missing from sysfs:\n  - cpu_capacity"), "{small}");
    }

    #[test]
    fn refuses_a_folder_that_is_not_sysfs_and_a_bad_cpu_list() {
        assert!(sysfs_root("/nonexistent").unwrap_err().contains("not a sysfs mount"));
        assert!(cpu_list("0-x").is_err());
        assert_eq!(cpu_list("0-2,5").unwrap().to_string(), "0-2,5");
    }
}
