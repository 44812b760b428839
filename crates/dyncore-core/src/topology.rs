//! Machine topology: nodes of CPUs, SMT siblings, core kinds.
//!
//! CPUs are numbered `0..ncpus`; each node holds a contiguous range. Fusion
//! constraints (Chameleon §4.2) are expressed on a node's *local* index: a
//! block of `size` CPUs (2 or 4) may fuse when it starts at a local index
//! that is a multiple of `size` ("aligned contiguous pairs and quads"). On
//! SMT machines siblings are numbered adjacently, so an aligned pair is a
//! hyperthread pair — a core.
//!
//! A real machine ([`Topology::from_machine`], from what dyncore-runtime
//! reads in sysfs) is numbered the same way: CPU `i` here is a *logical*
//! CPU, [`Topology::os_cpu`] the kernel's number for it. Nodes are packages
//! (Chameleon's node: "all the CPUs on a socket"); within a node, cores
//! with two hardware threads come first, so that each is an aligned pair,
//! then single-thread cores; the threads of a core are adjacent. Each CPU
//! also carries its NUMA node, its capacity (`cpu_capacity`, or the maximum
//! frequency scaled to 1024) and its core, where the machine says so.
//!
//! Invariants: every CPU is in exactly one node; node ranges are contiguous
//! and in order; `sibling(sibling(c)) == c`; a CPU's sibling is in its
//! core; OS CPU numbers are distinct.

use serde::{Deserialize, Serialize};

use crate::{CpuId, CpuSet};

/// What kind of core a CPU is (scx-style `Big | Little`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum CoreKind {
    /// A baseline core.
    #[default]
    Little,
    /// A statically faster core (ACMP).
    Big,
}

#[derive(Debug, Clone, PartialEq)]
struct CpuInfo {
    node: usize,
    sibling: Option<CpuId>,
    kind: CoreKind,
    /// The first CPU of this CPU's core (its hardware threads are
    /// adjacent, from there).
    core: usize,
    os_cpu: CpuId,
    numa_node: Option<usize>,
    capacity: Option<u32>,
}

/// What the real machine says about one CPU (dyncore-runtime reads it from
/// sysfs; this crate does no I/O).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuDesc {
    /// The kernel's number for the CPU.
    pub os_cpu: CpuId,
    /// `physical_package_id`: the socket.
    pub package: usize,
    /// `core_id` (unique within a package); hardware threads share it.
    pub core_id: usize,
    pub numa_node: Option<usize>,
    /// `cpu_capacity` (1024 for the fastest CPUs), where the kernel gives it.
    pub capacity: Option<u32>,
    /// `cpufreq/cpuinfo_max_freq`, kHz, where there is a frequency driver.
    pub max_freq_khz: Option<u64>,
}

/// The capacity of the fastest CPUs (the kernel's `SCHED_CAPACITY_SCALE`).
pub const CAPACITY_SCALE: u32 = 1024;

/// Nodes of CPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    cpus: Vec<CpuInfo>,
    /// First CPU and CPU count of each node.
    nodes: Vec<(CpuId, usize)>,
}

impl Topology {
    /// `nodes` nodes of `cpus_per_node` CPUs, no SMT.
    pub fn uniform(nodes: usize, cpus_per_node: usize) -> Topology {
        Self::build(nodes, cpus_per_node, false)
    }

    /// `nodes` nodes of `cores_per_node` cores of two hyperthreads each;
    /// CPUs `2k` and `2k+1` are siblings.
    pub fn uniform_smt(nodes: usize, cores_per_node: usize) -> Topology {
        Self::build(nodes, cores_per_node * 2, true)
    }

    fn build(nodes: usize, per_node: usize, smt: bool) -> Topology {
        let mut cpus = Vec::with_capacity(nodes * per_node);
        let mut ranges = Vec::with_capacity(nodes);
        for n in 0..nodes {
            let first = n * per_node;
            ranges.push((first, per_node));
            for i in 0..per_node {
                let cpu = first + i;
                let sibling = smt.then_some(cpu ^ 1);
                // A core is named by its first CPU.
                let core = if smt { cpu & !1 } else { cpu };
                cpus.push(CpuInfo {
                    node: n,
                    sibling,
                    kind: CoreKind::Little,
                    core,
                    os_cpu: cpu,
                    numa_node: None,
                    capacity: None,
                });
            }
        }
        Topology { cpus, nodes: ranges }
    }

    /// The topology of a real machine from what it says about its CPUs
    /// (numbering and kinds: see the module docs). Refuses an empty list
    /// and duplicate OS CPU numbers.
    pub fn from_machine(descs: &[CpuDesc]) -> Result<Topology, String> {
        if descs.is_empty() {
            return Err("no CPU to build a topology from".into());
        }
        let mut seen = CpuSet::new();
        for d in descs {
            if !seen.insert(d.os_cpu) {
                return Err(format!("CPU {} is described twice", d.os_cpu));
            }
        }
        let capacity = capacities(descs);
        let fastest = capacity.iter().flatten().copied().max();
        let asymmetric = capacity.iter().flatten().any(|&c| Some(c) != fastest);
        // Packages in order; in each, cores by (threads > 1 first, NUMA
        // node, lowest OS CPU); threads of a core by OS CPU.
        let mut packages: Vec<usize> = descs.iter().map(|d| d.package).collect();
        packages.sort_unstable();
        packages.dedup();
        let (mut cpus, mut nodes) = (Vec::with_capacity(descs.len()), Vec::with_capacity(packages.len()));
        for (node, &package) in packages.iter().enumerate() {
            let mut cores: Vec<Vec<usize>> = Vec::new();
            for (i, d) in descs.iter().enumerate().filter(|(_, d)| d.package == package) {
                match cores.iter_mut().find(|c| descs[c[0]].core_id == d.core_id) {
                    Some(c) => c.push(i),
                    None => cores.push(vec![i]),
                }
            }
            for c in &mut cores {
                c.sort_by_key(|&i| descs[i].os_cpu);
            }
            cores.sort_by_key(|c| (c.len() < 2, descs[c[0]].numa_node, descs[c[0]].os_cpu));
            nodes.push((cpus.len(), cores.iter().map(Vec::len).sum()));
            for c in cores {
                let first = cpus.len();
                let core = first;
                for (k, &i) in c.iter().enumerate() {
                    let d = &descs[i];
                    let sibling = (c.len() == 2).then_some(first + 1 - k);
                    let kind =
                        if asymmetric && capacity[i] == fastest { CoreKind::Big } else { CoreKind::Little };
                    cpus.push(CpuInfo {
                        node,
                        sibling,
                        kind,
                        core,
                        os_cpu: d.os_cpu,
                        numa_node: d.numa_node,
                        capacity: capacity[i],
                    });
                }
            }
        }
        let t = Topology { cpus, nodes };
        t.check()?;
        Ok(t)
    }

    pub fn ncpus(&self) -> usize {
        self.cpus.len()
    }

    /// The kernel's number for logical CPU `cpu` (itself, for the machines
    /// of [`Topology::uniform`] and [`Topology::uniform_smt`]).
    pub fn os_cpu(&self, cpu: CpuId) -> CpuId {
        self.cpus[cpu].os_cpu
    }

    /// The logical CPU whose kernel number is `os_cpu`, if it is here.
    pub fn logical_cpu(&self, os_cpu: CpuId) -> Option<CpuId> {
        self.cpus.iter().position(|c| c.os_cpu == os_cpu)
    }

    /// The NUMA node of `cpu`, where the machine says.
    pub fn numa_node(&self, cpu: CpuId) -> Option<usize> {
        self.cpus[cpu].numa_node
    }

    /// The capacity of `cpu` (`CAPACITY_SCALE` for the fastest), where the
    /// machine gives `cpu_capacity` or maximum frequencies.
    pub fn capacity(&self, cpu: CpuId) -> Option<u32> {
        self.cpus[cpu].capacity
    }

    /// The hardware threads of `cpu`'s core, `cpu` included.
    pub fn core_cpus(&self, cpu: CpuId) -> CpuSet {
        let core = self.cpus[cpu].core;
        let n = self.cpus[core..].iter().take_while(|c| c.core == core).count();
        CpuSet::range(core, core + n)
    }

    pub fn nnodes(&self) -> usize {
        self.nodes.len()
    }

    pub fn node_of(&self, cpu: CpuId) -> usize {
        self.cpus[cpu].node
    }

    /// First CPU and number of CPUs of `node`.
    pub fn node_range(&self, node: usize) -> (CpuId, usize) {
        self.nodes[node]
    }

    pub fn node_cpus(&self, node: usize) -> CpuSet {
        let (first, n) = self.nodes[node];
        if n == 0 { CpuSet::new() } else { CpuSet::range(first, first + n) }
    }

    pub fn sibling(&self, cpu: CpuId) -> Option<CpuId> {
        self.cpus[cpu].sibling
    }

    pub fn kind(&self, cpu: CpuId) -> CoreKind {
        self.cpus[cpu].kind
    }

    pub fn set_kind(&mut self, cpu: CpuId, kind: CoreKind) {
        self.cpus[cpu].kind = kind;
    }

    /// CPUs of a given kind.
    pub fn cpus_of_kind(&self, kind: CoreKind) -> CpuSet {
        let mut s = CpuSet::new();
        for (c, info) in self.cpus.iter().enumerate() {
            if info.kind == kind {
                s.insert(c);
            }
        }
        s
    }

    /// The aligned blocks of `size` CPUs that may fuse in `node`, in order.
    /// `size` 1 gives every CPU.
    pub fn fusable_blocks(&self, node: usize, size: usize) -> Vec<CpuSet> {
        assert!(size.is_power_of_two(), "fuse sizes are powers of two");
        let (first, n) = self.nodes[node];
        aligned_blocks(first, n, size).collect()
    }

    /// The aligned block of `size` CPUs containing `cpu`, if it fits its node.
    pub fn block_of(&self, cpu: CpuId, size: usize) -> Option<CpuSet> {
        let (first, n) = self.nodes[self.node_of(cpu)];
        aligned_block(first, n, cpu, size)
    }

    /// The first CPU of [`Topology::block_of`]'s block (which is that CPU
    /// and the `size - 1` after it), without building the set.
    pub fn block_start(&self, cpu: CpuId, size: usize) -> Option<CpuId> {
        let (first, n) = self.nodes[self.node_of(cpu)];
        aligned_start(first, n, cpu, size)
    }

    /// Checks the invariants in the module doc.
    pub fn check(&self) -> Result<(), String> {
        let mut next = 0;
        for (n, &(first, len)) in self.nodes.iter().enumerate() {
            if first != next {
                return Err(format!("node {n} starts at {first}, expected {next}"));
            }
            for c in first..first + len {
                if self.cpus[c].node != n {
                    return Err(format!("CPU {c} claims node {}, is in node {n}", self.cpus[c].node));
                }
            }
            next = first + len;
        }
        if next != self.cpus.len() {
            return Err("CPUs outside every node".into());
        }
        let mut os = CpuSet::new();
        for (c, info) in self.cpus.iter().enumerate() {
            if let Some(s) = info.sibling
                && self.cpus.get(s).and_then(|i| i.sibling) != Some(c)
            {
                return Err(format!("CPU {c}'s sibling {s} does not point back"));
            }
            if let Some(s) = info.sibling
                && self.cpus[s].core != info.core
            {
                return Err(format!("CPU {c}'s sibling {s} is in another core"));
            }
            if info.core > c || self.cpus[info.core].core != info.core {
                return Err(format!("CPU {c}'s core does not start at CPU {}", info.core));
            }
            if !os.insert(info.os_cpu) {
                return Err(format!("OS CPU {} appears twice", info.os_cpu));
            }
        }
        Ok(())
    }
}

/// Each CPU's capacity: `cpu_capacity` where every CPU has it, else the
/// maximum frequency scaled to [`CAPACITY_SCALE`] where every CPU has one,
/// else unknown. (Mixing the two would compare unlike numbers.)
fn capacities(descs: &[CpuDesc]) -> Vec<Option<u32>> {
    if descs.iter().all(|d| d.capacity.is_some()) {
        return descs.iter().map(|d| d.capacity).collect();
    }
    let fastest =
        descs.iter().map(|d| d.max_freq_khz).collect::<Option<Vec<u64>>>().and_then(|f| f.into_iter().max());
    match fastest {
        Some(top) if top > 0 => descs
            .iter()
            .map(|d| {
                d.max_freq_khz.map(|f| u32::try_from(f * u64::from(CAPACITY_SCALE) / top).unwrap_or(u32::MAX))
            })
            .collect(),
        _ => vec![None; descs.len()],
    }
}

/// The aligned blocks of `size` CPUs of the node of `len` CPUs starting at
/// `first`, in order.
pub(crate) fn aligned_blocks(first: CpuId, len: usize, size: usize) -> impl Iterator<Item = CpuSet> {
    (0..len / size).map(move |b| CpuSet::range(first + b * size, first + b * size + size))
}

/// The aligned block of `size` CPUs containing `cpu` (a CPU of the node of
/// `len` CPUs starting at `first`), if it fits the node.
pub(crate) fn aligned_block(first: CpuId, len: usize, cpu: CpuId, size: usize) -> Option<CpuSet> {
    aligned_start(first, len, cpu, size).map(|s| CpuSet::range(s, s + size))
}

/// The first CPU of [`aligned_block`]'s block.
fn aligned_start(first: CpuId, len: usize, cpu: CpuId, size: usize) -> Option<CpuId> {
    let local = cpu - first;
    let start = local - local % size;
    (start + size <= len).then_some(first + start)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_numbers_nodes_contiguously() {
        // 2 nodes x 12 CPUs: node 1 is CPUs 12..=23.
        let t = Topology::uniform(2, 12);
        t.check().unwrap();
        assert_eq!(t.ncpus(), 24);
        assert_eq!(t.node_of(11), 0);
        assert_eq!(t.node_of(12), 1);
        assert_eq!(t.node_cpus(1).to_string(), "12-23");
        assert_eq!(t.sibling(3), None);
    }

    #[test]
    fn fusable_blocks_are_aligned_within_a_node() {
        // A 10-CPU node has quads 0-3, 4-7 (8-9 is only a pair) and 5 pairs.
        let t = Topology::uniform(1, 10);
        let quads: Vec<String> = t.fusable_blocks(0, 4).iter().map(|s| s.to_string()).collect();
        assert_eq!(quads, ["0-3", "4-7"]);
        assert_eq!(t.fusable_blocks(0, 2).len(), 5);
        assert_eq!(t.block_of(9, 4), None);
        assert_eq!(t.block_of(9, 2).unwrap().to_string(), "8-9");
        // Node 1 of 2x6: local index of CPU 9 is 3, its quad is local 0-3 = CPUs 6-9.
        let t = Topology::uniform(2, 6);
        assert_eq!(t.block_of(9, 4).unwrap().to_string(), "6-9");
        assert_eq!(t.block_of(10, 4), None);
    }

    #[test]
    fn smt_siblings_pair_up() {
        // 1 node x 4 cores: CPUs 0..8, siblings (0,1) (2,3) ...
        let t = Topology::uniform_smt(1, 4);
        t.check().unwrap();
        assert_eq!(t.ncpus(), 8);
        assert_eq!(t.sibling(4), Some(5));
        assert_eq!(t.sibling(5), Some(4));
        assert_eq!(t.block_of(5, 2).unwrap().to_string(), "4-5");
    }

    #[test]
    fn handles_1024_cpus() {
        let t = Topology::uniform(64, 16);
        t.check().unwrap();
        assert_eq!(t.ncpus(), 1024);
        assert_eq!(t.node_cpus(63).to_string(), "1008-1023");
        assert_eq!(t.fusable_blocks(63, 4).len(), 4);
    }

    fn desc(os_cpu: CpuId, package: usize, core_id: usize) -> CpuDesc {
        CpuDesc { os_cpu, package, core_id, numa_node: Some(package), capacity: None, max_freq_khz: None }
    }

    #[test]
    fn a_two_socket_machine_is_renumbered_so_that_siblings_are_adjacent_pairs() {
        // Intel numbering: socket 0 has cores 0-3 as CPUs 0-3 and 8-11,
        // socket 1 cores 0-3 as CPUs 4-7 and 12-15; CPU 15 is not usable.
        let descs: Vec<CpuDesc> = (0..15).map(|c| desc(c, (c / 4) % 2, c % 4)).collect();
        let t = Topology::from_machine(&descs).unwrap();
        assert_eq!((t.ncpus(), t.nnodes()), (15, 2));
        assert_eq!(t.node_cpus(0).to_string(), "0-7");
        let os: Vec<CpuId> = (0..8).map(|c| t.os_cpu(c)).collect();
        assert_eq!(os, [0, 8, 1, 9, 2, 10, 3, 11]);
        // Socket 1: three 2-thread cores first, then the core whose second
        // thread (CPU 15) is missing.
        let os: Vec<CpuId> = (8..15).map(|c| t.os_cpu(c)).collect();
        assert_eq!(os, [4, 12, 5, 13, 6, 14, 7]);
        assert_eq!((t.sibling(8), t.sibling(9), t.sibling(14)), (Some(9), Some(8), None));
        assert_eq!(t.core_cpus(3).to_string(), "2-3");
        assert_eq!(t.block_of(3, 2), Some(t.core_cpus(3)), "an aligned pair is a core");
        assert_eq!((t.numa_node(9), t.logical_cpu(12), t.logical_cpu(15)), (Some(1), Some(9), None));
        assert_eq!(t.cpus_of_kind(CoreKind::Big), CpuSet::new(), "a symmetric machine has no big CPUs");
    }

    #[test]
    fn a_hybrid_machine_marks_its_fastest_cores_big() {
        // Four 2-thread P-cores (capacity 1024) and four E-cores (600).
        let mut descs: Vec<CpuDesc> = (0..8).map(|c| desc(c, 0, 4 * (c / 2))).collect();
        descs.extend((8..12).map(|c| desc(c, 0, 32 + c)));
        for d in &mut descs {
            d.capacity = Some(if d.os_cpu < 8 { 1024 } else { 600 });
        }
        let t = Topology::from_machine(&descs).unwrap();
        assert_eq!(t.cpus_of_kind(CoreKind::Big).to_string(), "0-7");
        assert_eq!((t.capacity(9), t.sibling(9), t.core_cpus(9).len()), (Some(600), None, 1));
        // Without cpu_capacity, the maximum frequencies decide.
        for d in &mut descs {
            d.capacity = None;
            d.max_freq_khz = Some(if d.os_cpu < 8 { 4_900_000 } else { 3_600_000 });
        }
        let t = Topology::from_machine(&descs).unwrap();
        assert_eq!((t.capacity(0), t.capacity(8)), (Some(1024), Some(752)));
        assert_eq!(t.cpus_of_kind(CoreKind::Big).to_string(), "0-7");
    }

    #[test]
    fn from_machine_refuses_nonsense() {
        assert!(Topology::from_machine(&[]).is_err());
        let err = Topology::from_machine(&[desc(3, 0, 0), desc(3, 0, 1)]).unwrap_err();
        assert!(err.contains("CPU 3 is described twice"), "{err}");
    }

    #[test]
    fn kinds_mark_fast_cpus() {
        let mut t = Topology::uniform(1, 15);
        for c in 12..15 {
            t.set_kind(c, CoreKind::Big);
        }
        assert_eq!(t.cpus_of_kind(CoreKind::Big).to_string(), "12-14");
    }
}
