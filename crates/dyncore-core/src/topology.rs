//! Machine topology: nodes of CPUs, SMT siblings, core kinds.
//!
//! CPUs are numbered `0..ncpus`; each node holds a contiguous range. Fusion
//! constraints (Chameleon §4.2) are expressed on a node's *local* index: a
//! block of `size` CPUs (2 or 4) may fuse when it starts at a local index
//! that is a multiple of `size` ("aligned contiguous pairs and quads"). On
//! SMT machines siblings are numbered adjacently, so an aligned pair is a
//! hyperthread pair — a core.
//!
//! Invariants: every CPU is in exactly one node; node ranges are contiguous
//! and in order; `sibling(sibling(c)) == c`.

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
}

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
                cpus.push(CpuInfo { node: n, sibling, kind: CoreKind::Little });
            }
        }
        Topology { cpus, nodes: ranges }
    }

    pub fn ncpus(&self) -> usize {
        self.cpus.len()
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
        for (c, info) in self.cpus.iter().enumerate() {
            if let Some(s) = info.sibling
                && self.cpus.get(s).and_then(|i| i.sibling) != Some(c)
            {
                return Err(format!("CPU {c}'s sibling {s} does not point back"));
            }
        }
        Ok(())
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
    let local = cpu - first;
    let start = local - local % size;
    (start + size <= len).then(|| CpuSet::range(first + start, first + start + size))
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

    #[test]
    fn kinds_mark_fast_cpus() {
        let mut t = Topology::uniform(1, 15);
        for c in 12..15 {
            t.set_kind(c, CoreKind::Big);
        }
        assert_eq!(t.cpus_of_kind(CoreKind::Big).to_string(), "12-14");
    }
}
