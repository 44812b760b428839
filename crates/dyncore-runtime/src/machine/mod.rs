//! The real machine: which CPUs exist, which this process may use, how
//! they are grouped into cores, packages and NUMA nodes, and how fast each
//! is — read from sysfs into `dyncore_core::topology::Topology`.
//!
//! [`Machine::read`] takes the sysfs mount (normally `/sys`; the tests pass
//! fixture trees) and the process's allowed CPUs (normally its affinity
//! mask, [`Machine::detect`]). It reads, under `devices/system/`:
//!
//! * `cpu/possible`, `cpu/present`, `cpu/online` and each `cpuN/online`;
//! * each online CPU's `topology/{physical_package_id, core_id,
//!   thread_siblings_list}` (an offline CPU has none);
//! * `cpuN/cpu_capacity` (asymmetric machines) and
//!   `cpuN/cpufreq/cpuinfo_max_freq` (where a frequency driver runs);
//! * `cpu/smt/active`, and `node/nodeN/cpulist` for NUMA nodes.
//!
//! Everything but `cpu/possible` may be missing: what is missing, and what
//! that means for the topology, is listed in [`Machine::missing`] rather
//! than being an error. The topology covers the *usable* CPUs: online and
//! allowed. [`fuse`] decides, for a fused pair, between a real SMT core and
//! duty-cycle throttling (Chameleon §5.5).

use std::io;
use std::path::{Path, PathBuf};

use dyncore_core::topology::{CpuDesc, Topology};
use dyncore_core::{CpuId, CpuSet};

pub mod fuse;

/// One CPU the kernel could have (`cpu/possible`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsCpu {
    pub cpu: CpuId,
    pub online: bool,
    /// In this process's affinity mask.
    pub allowed: bool,
    /// What sysfs says about it (`None`: offline, no topology to read).
    pub desc: Option<CpuDesc>,
    /// `thread_siblings_list`: the hardware threads of its core (itself
    /// included), as the kernel numbers them.
    pub thread_siblings: CpuSet,
}

/// What sysfs says about the machine, and the topology of its usable CPUs.
#[derive(Debug, Clone)]
pub struct Machine {
    /// The sysfs mount read.
    pub root: PathBuf,
    pub cpus: Vec<OsCpu>,
    pub possible: CpuSet,
    pub online: CpuSet,
    pub allowed: CpuSet,
    /// `cpu/smt/active`, where the kernel has it.
    pub smt_active: Option<bool>,
    /// NUMA node number and its CPUs.
    pub numa_nodes: Vec<(usize, CpuSet)>,
    /// The usable CPUs (online and allowed), logically numbered (see
    /// `dyncore_core::topology`).
    pub topology: Topology,
    /// What was not there, and what follows from it.
    pub missing: Vec<String>,
}

fn read(path: &Path) -> io::Result<String> {
    std::fs::read_to_string(path).map(|s| s.trim().to_string())
}

fn parse<T: std::str::FromStr>(path: &Path) -> io::Result<T>
where
    T::Err: std::fmt::Display,
{
    let text = read(path)?;
    text.parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: `{text}`: {e}", path.display())))
}

/// `Ok(None)` when the file does not exist; other errors are errors.
fn optional<T>(r: io::Result<T>) -> io::Result<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl Machine {
    /// This machine, for this process.
    pub fn detect() -> io::Result<Machine> {
        Machine::read(Path::new("/sys"), &crate::affinity::allowed_cpus()?)
    }

    /// Reads the sysfs mounted at `root` (see the module docs); `allowed`
    /// is the process's affinity mask.
    pub fn read(root: &Path, allowed: &CpuSet) -> io::Result<Machine> {
        let sys = root.join("devices/system");
        let cpu_dir = sys.join("cpu");
        let possible: CpuSet = parse(&cpu_dir.join("possible")).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("{}: {e} (is this a sysfs mount?)", cpu_dir.join("possible").display()),
            )
        })?;
        let mut missing = Vec::new();
        let online_list: Option<CpuSet> = optional(parse(&cpu_dir.join("online")))?;
        if online_list.is_none() {
            missing.push("cpu/online: absent; each CPU's own `online` file decides".into());
        }
        let numa_nodes = read_numa_nodes(&sys.join("node"), &mut missing)?;
        let mut cpus = Vec::with_capacity(possible.len());
        for cpu in possible.iter() {
            cpus.push(read_cpu(&cpu_dir, cpu, online_list.as_ref(), allowed, &numa_nodes)?);
        }
        note_missing(&cpus, &mut missing);
        let smt_active = optional(read(&cpu_dir.join("smt/active")))?.map(|s| s == "1");
        let online: CpuSet = cpus.iter().filter(|c| c.online).map(|c| c.cpu).collect();
        let usable: Vec<CpuDesc> =
            cpus.iter().filter(|c| c.online && c.allowed).filter_map(|c| c.desc.clone()).collect();
        let topology = Topology::from_machine(&usable).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: no usable topology: {e} (online {online}, allowed {allowed})", root.display()),
            )
        })?;
        Ok(Machine {
            root: root.to_path_buf(),
            cpus,
            possible,
            online,
            allowed: allowed.clone(),
            smt_active,
            numa_nodes,
            topology,
            missing,
        })
    }

    /// Online CPUs this process may use (the topology's CPUs).
    pub fn usable(&self) -> CpuSet {
        self.cpus.iter().filter(|c| c.online && c.allowed).map(|c| c.cpu).collect()
    }

    /// Whether any usable core has more than one usable hardware thread.
    pub fn has_smt(&self) -> bool {
        (0..self.topology.ncpus()).any(|c| self.topology.core_cpus(c).len() > 1)
    }
}

fn read_numa_nodes(node_dir: &Path, missing: &mut Vec<String>) -> io::Result<Vec<(usize, CpuSet)>> {
    let entries = match std::fs::read_dir(node_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            missing.push("node: absent (a kernel without NUMA): NUMA nodes unknown".into());
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    let mut nodes = Vec::new();
    for e in entries {
        let name = e?.file_name().to_string_lossy().into_owned();
        if let Some(n) = name.strip_prefix("node").and_then(|n| n.parse::<usize>().ok()) {
            nodes.push((n, parse(&node_dir.join(&name).join("cpulist"))?));
        }
    }
    nodes.sort();
    Ok(nodes)
}

fn read_cpu(
    cpu_dir: &Path,
    cpu: CpuId,
    online_list: Option<&CpuSet>,
    allowed: &CpuSet,
    numa_nodes: &[(usize, CpuSet)],
) -> io::Result<OsCpu> {
    let dir = cpu_dir.join(format!("cpu{cpu}"));
    // `cpu0` usually has no `online` file: it cannot go offline.
    let own: Option<u8> = optional(parse(&dir.join("online")))?;
    let online = online_list.map_or(own != Some(0), |l| l.contains(cpu));
    let topo = dir.join("topology");
    let siblings: Option<CpuSet> = optional(parse(&topo.join("thread_siblings_list")))?;
    let desc = match (online, siblings.is_some()) {
        (true, true) => Some(CpuDesc {
            os_cpu: cpu,
            package: optional(parse(&topo.join("physical_package_id")))?.unwrap_or(0),
            // Without core_id, each CPU is its own core.
            core_id: optional(parse(&topo.join("core_id")))?.unwrap_or(usize::MAX - cpu),
            numa_node: numa_nodes.iter().find(|(_, s)| s.contains(cpu)).map(|&(n, _)| n),
            capacity: optional(parse(&dir.join("cpu_capacity")))?,
            max_freq_khz: optional(parse(&dir.join("cpufreq/cpuinfo_max_freq")))?,
        }),
        _ => None,
    };
    Ok(OsCpu {
        cpu,
        online,
        allowed: allowed.contains(cpu),
        desc,
        thread_siblings: siblings.unwrap_or_else(|| [cpu].into_iter().collect()),
    })
}

/// Adds to `missing` what the online CPUs lack, once per kind.
fn note_missing(cpus: &[OsCpu], missing: &mut Vec<String>) {
    let online: Vec<&OsCpu> = cpus.iter().filter(|c| c.online).collect();
    let lacking = |f: &dyn Fn(&CpuDesc) -> bool| -> CpuSet {
        online.iter().filter(|c| c.desc.as_ref().is_none_or(|d| !f(d))).map(|c| c.cpu).collect()
    };
    let no_topology: CpuSet = online.iter().filter(|c| c.desc.is_none()).map(|c| c.cpu).collect();
    if !no_topology.is_empty() {
        missing.push(format!(
            "topology: not readable for online CPU(s) {no_topology}; left out of the topology"
        ));
    }
    let no_capacity = lacking(&|d| d.capacity.is_some());
    let no_freq = lacking(&|d| d.max_freq_khz.is_some());
    if !no_capacity.is_empty() {
        let then =
            if no_freq.is_empty() { "capacities from the maximum frequencies" } else { "capacities unknown" };
        missing.push(format!(
            "cpu_capacity: absent for CPU(s) {no_capacity} (the kernel gives it on asymmetric machines): {then}"
        ));
    }
    if !no_freq.is_empty() {
        missing.push(format!(
            "cpufreq/cpuinfo_max_freq: absent for CPU(s) {no_freq} (no frequency driver, as under most hypervisors)"
        ));
    }
    let offline: CpuSet = cpus.iter().filter(|c| !c.online).map(|c| c.cpu).collect();
    if !offline.is_empty() {
        missing.push(format!("CPU(s) {offline}: offline, so not in the topology"));
    }
}

#[cfg(all(test, not(dyncore_loom)))]
mod tests;
