//! `dyncore bench reconfig`: runtime CPUs taken offline and brought back
//! online, naive (hotplug's way) against Bolt, for 1, 2, 4 and all-but-one
//! CPUs, plus Bolt's entry and exit latencies, against the kernel's own
//! mechanisms on the same machine in the same run (see `baselines.rs`).
//!
//! Two layouts of runtime CPUs on the real ones, each measured: `--cpus`
//! runtime CPUs (default 8: on a 2-CPU machine, oversubscribed 4 per core,
//! where a naive stop-the-world barrier mostly measures the workers waiting
//! for a core), and one runtime CPU per real CPU (no oversubscription; the
//! machine profile comes from this one). What is timed: see `measure.rs`.
//!
//! Every round measures every row of every layout and every baseline once,
//! in an order that changes from round to round (see
//! [`crate::stats`]); a fresh runtime is started per layout per
//! round. Goals are ratios computed within each round.
//!
//! Writes `<out>/bench-reconfig/{report.md, results.json, offline.{png,svg},
//! online.{png,svg}}`, and with `--write-profile PATH` the machine profile.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, ensure};
use dyncore_core::{CpuId, CpuSet};
use dyncore_runtime::affinity::{allowed_cpus, pin_current_thread};
use dyncore_runtime::cpu::{Mode, Runtime, RuntimeConfig};

use super::{Gate, Goal, round_order};

mod baselines;
mod measure;
mod profile;
mod report;

use baselines::Baseline;
use measure::{ColdOnline, EntryExit, PerRound, Sweep};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Timed offline/online pairs per configuration, over all rounds (default 200; quick 20).
    #[arg(long)]
    pub repeats: Option<usize>,
    /// Interleaved rounds: every configuration is measured once per round.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// A run of a few seconds: 20 repeats, 3 hotplug cycles (at least one per round).
    #[arg(long)]
    pub quick: bool,
    /// Also measure Linux sysfs CPU hotplug: takes a real CPU other than 0
    /// offline and back (restored on every exit path, Ctrl-C included).
    #[arg(long)]
    pub allow_hotplug: bool,
    /// Runtime CPUs of the first layout, dealt round-robin over the allowed
    /// real CPUs (default 8); a second layout always has one per real CPU.
    #[arg(long, default_value_t = 8)]
    pub cpus: usize,
    /// Write the machine profile (per-step costs, from the one-per-core
    /// layout) as TOML to this file, for the simulator's `runtime` mechanism.
    #[arg(long, value_name = "PATH")]
    pub write_profile: Option<PathBuf>,
    #[command(flatten)]
    pub gate: Gate,
}

const MODES: [Mode; 2] = [Mode::Naive, Mode::Bolt];

/// Runtime CPUs over real ones, and what was measured on them.
pub struct Layout {
    pub real_cpus: CpuSet,
    /// Runtime CPU `i` runs on real CPU `mapping[i]`.
    pub mapping: Vec<CpuId>,
    pub sweeps: Vec<Sweep>,
    pub entry_exit: Vec<EntryExit>,
    /// Bolt's cold online (the profile layout only).
    pub cold: Option<ColdOnline>,
}

impl Layout {
    fn new(real: &CpuSet, runtime_cpus: usize, cold: bool) -> Layout {
        let sweeps =
            MODES.iter().flat_map(|&m| sizes(runtime_cpus).into_iter().map(move |k| Sweep::new(m, k)));
        Layout {
            real_cpus: real.clone(),
            mapping: RuntimeConfig::over(real, runtime_cpus).real_cpus,
            sweeps: sweeps.collect(),
            entry_exit: MODES.iter().map(|&m| EntryExit::new(m)).collect(),
            cold: cold.then(ColdOnline::default),
        }
    }

    pub fn runtime_cpus(&self) -> usize {
        self.mapping.len()
    }

    /// "oversubscribed 4 per core", "one per core", …
    pub fn label(&self) -> String {
        let (n, r) = (self.runtime_cpus(), self.real_cpus.len());
        match n.cmp(&r) {
            std::cmp::Ordering::Greater if n % r == 0 => format!("oversubscribed {} per core", n / r),
            std::cmp::Ordering::Greater => format!("oversubscribed {n} on {r} cores"),
            std::cmp::Ordering::Equal => "one per core".into(),
            std::cmp::Ordering::Less => format!("{n} runtime CPUs on {r} cores"),
        }
    }

    /// "8 on 2".
    pub fn short(&self) -> String {
        format!("{} on {}", self.runtime_cpus(), self.real_cpus.len())
    }

    fn rows(&self) -> usize {
        self.sweeps.len() + self.entry_exit.len() + usize::from(self.cold.is_some())
    }

    /// One round: a fresh runtime, every row once in this round's order.
    fn measure_round(&mut self, n: PerRound, round: usize, bar: &indicatif::ProgressBar) -> Result<()> {
        let mut cfg = RuntimeConfig::over(&self.real_cpus, self.runtime_cpus());
        // Keep the kept caches for the whole run (no timer reclaim mid-measure).
        cfg.cache_keep = None;
        let rt = Runtime::new(cfg).context("starting the runtime")?;
        // The measuring thread runs on the real CPU of runtime CPU 0 (never
        // taken offline), away from the CPUs being reconfigured where it can.
        pin_current_thread(self.mapping[0])?;
        let (ns, ne, short) = (self.sweeps.len(), self.entry_exit.len(), self.short());
        for i in round_order(self.rows(), round) {
            if i < ns {
                bar.set_message(format!("{short}: {} ×{}", self.sweeps[i].mode, self.sweeps[i].cpus));
                self.sweeps[i].measure_round(&rt, n)?;
            } else if i < ns + ne {
                bar.set_message(format!("{short}: {} entry/exit", self.entry_exit[i - ns].mode));
                self.entry_exit[i - ns].measure_round(&rt, n)?;
            } else if let Some(c) = &mut self.cold {
                bar.set_message(format!("{short}: bolt cold online"));
                c.measure_round(&rt, n)?;
            }
            bar.inc(1);
        }
        ensure!(rt.check().is_ok(), "runtime invariants broken after a round: {:?}", rt.check());
        drop(rt);
        baselines::unpin(&self.real_cpus);
        Ok(())
    }
}

/// 1, 2, 4 and all-but-one CPUs (fewer when the runtime is small).
fn sizes(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = [1, 2, 4, n - 1].into_iter().filter(|&k| k >= 1 && k < n).collect();
    v.dedup();
    v
}

/// How much a run measures.
pub struct Plan {
    pub machine: String,
    pub rounds: usize,
    pub per_round: PerRound,
    /// Hotplug cycles per round.
    pub hotplug_per_round: usize,
    /// Layouts that could not be measured, and why.
    pub skipped: Vec<String>,
}

/// What a run measured.
pub struct Measured {
    pub layouts: Vec<Layout>,
    pub base: Vec<Baseline>,
}

/// The most runtime CPUs `--cpus` lays over the real ones.
const MAX_RUNTIME_CPUS: usize = 4096;

fn plan(args: &Args, real: usize) -> Result<(Plan, Vec<usize>)> {
    let bad = |m: String| -> anyhow::Error { crate::stack_cmd::BadArgs(m).into() };
    if !(2..=MAX_RUNTIME_CPUS).contains(&args.cpus) {
        return Err(bad(format!(
            "--cpus {}: expected 2 to {MAX_RUNTIME_CPUS} runtime CPUs (one always stays online)",
            args.cpus
        )));
    }
    if args.rounds == 0 {
        return Err(bad("--rounds must be at least 1".into()));
    }
    if args.repeats == Some(0) {
        return Err(bad("--repeats must be at least 1".into()));
    }
    let rounds = args.rounds;
    let repeats = args.repeats.unwrap_or(if args.quick { 20 } else { 200 }).max(1);
    let hotplug = if args.quick { 3 } else { repeats.min(20) };
    let per = |n: usize| n.div_ceil(rounds).max(1);
    let mut layouts = vec![args.cpus];
    let mut skipped = Vec::new();
    if args.cpus != real && real >= 2 {
        layouts.push(real);
    } else if real < 2 {
        skipped.push(format!("one runtime CPU per real CPU: needs 2 real CPUs, {real} allowed"));
    }
    let p = Plan {
        machine: super::machine_description(),
        rounds,
        per_round: PerRound {
            pairs: per(repeats),
            breakdown: per(repeats.min(50)),
            cold: per(repeats.min(50)),
        },
        hotplug_per_round: per(hotplug),
        skipped,
    };
    Ok((p, layouts))
}

pub fn run(args: &Args, out: &Path) -> Result<Vec<Goal>> {
    let allowed = allowed_cpus()?;
    // The arguments first: a refused bench creates nothing.
    let (plan, sizes) = plan(args, allowed.len())?;
    if let Some(p) = &args.write_profile {
        dyncore_report::outdir::check_writable_creating("--write-profile", p)
            .map_err(crate::stack_cmd::BadArgs)?;
    }
    let dir = out.join("bench-reconfig");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // A CPU that a killed run of this bench left offline comes back first.
    baselines::recover_leftovers();
    let mut layouts: Vec<Layout> =
        sizes.iter().map(|&n| Layout::new(&allowed, n, n == allowed.len())).collect();
    say!("dyncore bench reconfig — {}", plan.machine);
    for l in &layouts {
        say!(
            "layout {}: {} runtime CPUs on real CPUs {allowed} ({})",
            l.label(),
            l.runtime_cpus(),
            l.short()
        );
    }
    say!(
        "{} rounds × {} offline/online pairs per configuration{}",
        plan.rounds,
        plan.per_round.pairs,
        if args.allow_hotplug {
            format!(", {} hotplug cycles per round", plan.hotplug_per_round)
        } else {
            String::new()
        }
    );
    let mut base = Baseline::all(args.allow_hotplug);
    measure_rounds(&plan, &allowed, &mut layouts, &mut base)?;
    let m = Measured { layouts, base };
    let goals = report::write(&dir, &plan, &allowed, &m)?;
    if let Some(path) = &args.write_profile {
        write_profile(path, &plan, &m)?;
    }
    say!("report written to {}", dir.join("report.md").display());
    Ok(goals)
}

/// Every layout's rows and every baseline, once per round, in an order
/// that changes per round.
fn measure_rounds(
    plan: &Plan,
    allowed: &CpuSet,
    layouts: &mut [Layout],
    base: &mut [Baseline],
) -> Result<()> {
    let units = layouts.len() + base.len();
    let steps = plan.rounds * (layouts.iter().map(Layout::rows).sum::<usize>() + base.len());
    let bar = indicatif::ProgressBar::new(steps as u64).with_style(
        indicatif::ProgressStyle::with_template("round {prefix} {msg:30} {bar:40} {pos}/{len} [{elapsed}]")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    for round in 0..plan.rounds {
        bar.set_prefix(format!("{}/{}", round + 1, plan.rounds));
        for u in round_order(units, round) {
            if let Some(l) = layouts.get_mut(u) {
                l.measure_round(plan.per_round, round, &bar)?;
                continue;
            }
            let b = &mut base[u - layouts.len()];
            bar.set_message(format!("baseline {}", b.key()));
            let n = if b.kind == baselines::Kind::Hotplug {
                plan.hotplug_per_round
            } else {
                plan.per_round.pairs
            };
            b.measure_round(allowed, n, round);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(())
}

fn write_profile(path: &Path, plan: &Plan, m: &Measured) -> Result<()> {
    let layout = m.layouts.iter().find(|l| l.cold.is_some()).context(
        "no profile: the one-runtime-CPU-per-real-CPU layout was not measured (needs 2 real CPUs)",
    )?;
    let p = profile::build(layout, &plan.machine, &super::command_line(), &super::today())
        .context("no profile: a one-CPU configuration was not measured")?;
    profile::write(path, &p)?;
    say!("machine profile ({}) written to {}", layout.label(), path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_one_two_four_and_all_but_one() {
        assert_eq!(sizes(8), [1, 2, 4, 7]);
        assert_eq!(sizes(5), [1, 2, 4]);
        assert_eq!(sizes(3), [1, 2]);
        assert_eq!(sizes(2), [1]);
    }

    #[test]
    fn layouts_are_labelled_by_how_they_share_the_cores() {
        let real = CpuSet::range(0, 2);
        assert_eq!(Layout::new(&real, 8, false).label(), "oversubscribed 4 per core");
        assert_eq!(Layout::new(&real, 2, true).label(), "one per core");
        assert_eq!(Layout::new(&real, 3, false).label(), "oversubscribed 3 on 2 cores");
        assert_eq!(Layout::new(&CpuSet::range(0, 4), 2, false).label(), "2 runtime CPUs on 4 cores");
    }

    #[test]
    fn tiny_run_writes_a_report_and_a_profile_that_reads_back() {
        let _cpus = dyncore_runtime::testing::real_cpus();
        let dir = std::env::temp_dir().join(format!("dyncore-bench-reconfig-{}", std::process::id()));
        let profile_path = dir.join("profiles").join("test.toml");
        let args = Args {
            repeats: Some(3),
            rounds: 2,
            quick: true,
            allow_hotplug: false,
            cpus: 4,
            write_profile: Some(profile_path.clone()),
            gate: Gate::default(),
        };
        let real = allowed_cpus().unwrap().len();
        let goals = run(&args, &dir).unwrap();
        let d = dir.join("bench-reconfig");
        let md = std::fs::read_to_string(d.join("report.md")).unwrap();
        assert!(md.contains("## Goals") && md.contains("## Baselines"), "{md}");
        assert!(md.contains("hotplug: not requested"), "hotplug is skipped with a reason: {md}");
        assert!(md.contains("hotplug: skipped"), "the run says what it really ran: {md}");
        assert!(goals.iter().any(|g| g.goal.contains("4 CPUs") && g.pass.is_none()), "{goals:?}");
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("results.json")).unwrap()).unwrap();
        let layouts = j["layouts"].as_array().unwrap();
        // 2 modes × sizes 1, 2, 3 (all but one of 4).
        assert_eq!(layouts[0]["sweeps"].as_array().unwrap().len(), 6);
        assert_eq!(layouts[0]["runtime_cpus"], 4);
        let s = &layouts[0]["sweeps"][0]["offline"];
        assert_eq!((s["rounds"].as_u64(), s["samples"].as_u64()), (Some(2), Some(4)), "{s}");
        assert!(s["median_ns"].as_f64().unwrap() > 0.0);
        assert_eq!(j["baselines"].as_array().unwrap().len(), 3);
        for f in ["offline.png", "offline.svg", "online.png"] {
            assert!(d.join(f).metadata().unwrap().len() > 0, "{f}");
        }
        if real >= 2 {
            assert_eq!(layouts.len(), if real == 4 { 1 } else { 2 });
            let text = std::fs::read_to_string(&profile_path).unwrap();
            let p: dyncore_core::profile::MachineProfile = toml::from_str(&text).unwrap();
            assert_eq!((p.runtime_cpus, p.real_cpus), (real, real));
            for costs in [&p.bolt.offline, &p.bolt.online, &p.naive.offline, &p.naive.online] {
                assert!(!costs.step_ns.is_empty(), "{text}");
            }
            // The profile prices the plans the simulator will execute.
            use dyncore_core::reconfig::{ReconfigState, plan_offline};
            let state = ReconfigState::all_online(4);
            for mode in MODES {
                let plan = plan_offline(mode, &CpuSet::range(2, 4), &state).unwrap();
                assert!(p.critical_ns(&plan).is_ok(), "{mode}: {text}");
            }
            assert!(p.bolt.online.step_ns.contains_key("create-cache"), "{text}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
