//! Execution objects (Chameleon §3.2, §4.2) and the cost of reconfiguring.
//!
//! An execution object is a possible execution context: one native CPU, or a
//! *fused* set of CPUs that runs one thread faster. Its representative CPU
//! is the lowest CPU of the set — the CPU whose run queue holds the thread and
//! to which interrupts go while the object is active. Activating a fused
//! object borrows the other CPUs (they run nothing else and are proxied);
//! deactivating returns them.
//!
//! The only property implemented, as in the paper, is `sequential` with a
//! level: log2 of the number of CPUs. A thread asks for a level and gives the
//! property a weight (how much it benefits), which node managers use to
//! decide who gets CPUs under contention.

use serde::{Deserialize, Serialize};

use crate::{CpuId, CpuSet, Nanos};

/// Property identifier of `sequential`.
pub const SEQUENTIAL: u32 = 0;

/// A requested or offered property: an id, a level and a weight.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Property {
    pub id: u32,
    /// For `sequential`: log2 of the CPUs in the object.
    pub level: u32,
    /// Importance to the requesting thread (e.g. its speedup).
    pub weight: f64,
}

impl Property {
    /// `sequential` at `level` (2^level CPUs).
    pub fn sequential(level: u32, weight: f64) -> Property {
        Property { id: SEQUENTIAL, level, weight }
    }

    /// CPUs an object with this property has.
    pub fn cpus(&self) -> usize {
        1 << self.level
    }
}

/// The sequential level of an object of `cpus` CPUs (log2).
pub fn level_of(cpus: usize) -> u32 {
    debug_assert!(cpus.is_power_of_two());
    cpus.trailing_zeros()
}

/// An execution object: a set of CPUs that runs one thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecObject {
    pub cpus: CpuSet,
}

impl ExecObject {
    pub fn new(cpus: CpuSet) -> ExecObject {
        assert!(!cpus.is_empty(), "an execution object has at least one CPU");
        ExecObject { cpus }
    }

    /// The lowest CPU of the set.
    pub fn representative(&self) -> CpuId {
        self.cpus.first().expect("non-empty")
    }

    /// The CPUs activation borrows (all but the representative).
    pub fn borrowed(&self) -> CpuSet {
        let mut b = self.cpus.clone();
        b.remove(self.representative());
        b
    }

    pub fn is_fused(&self) -> bool {
        self.cpus.len() > 1
    }

    pub fn property(&self, weight: f64) -> Property {
        Property::sequential(level_of(self.cpus.len()), weight)
    }
}

/// How fused objects are formed and split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// Linux hotplug: offline every borrowed CPU, online it again.
    Hotplug,
    /// Processor proxies, reprogramming the IOAPIC.
    ProxyApic,
    /// Processor proxies with APIC logical-address renaming.
    ProxyLogical,
    /// An ideal processor: no cost.
    Free,
}

impl Mechanism {
    /// The name scenario files and reports use (the serde name).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Hotplug => "hotplug",
            Mechanism::ProxyApic => "proxy-apic",
            Mechanism::ProxyLogical => "proxy-logical",
            Mechanism::Free => "free",
        }
    }
}

/// Reconfiguration latencies (Chameleon Table 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconfigCost {
    pub fuse2_ns: Nanos,
    pub fuse4_ns: Nanos,
    pub split2_ns: Nanos,
    pub split4_ns: Nanos,
}

impl ReconfigCost {
    /// Reconfiguration that takes no time.
    pub const FREE: ReconfigCost = ReconfigCost { fuse2_ns: 0, fuse4_ns: 0, split2_ns: 0, split4_ns: 0 };

    /// Table 4 of the paper:
    ///
    /// | operation | hotplug | proxy-APIC | proxy-logical |
    /// |---|---|---|---|
    /// | fuse 2 | 150 ms | 250 µs | 2 µs |
    /// | fuse 4 | 430 ms | 375 µs | 8 µs |
    /// | split 2 | 220 ms | 20 µs | 1.5 µs |
    /// | split 4 | 640 ms | 60 µs | 4.2 µs |
    pub fn table4(m: Mechanism) -> ReconfigCost {
        const US: Nanos = 1_000;
        const MS: Nanos = 1_000_000;
        match m {
            Mechanism::Hotplug => ReconfigCost {
                fuse2_ns: 150 * MS,
                fuse4_ns: 430 * MS,
                split2_ns: 220 * MS,
                split4_ns: 640 * MS,
            },
            Mechanism::ProxyApic => ReconfigCost {
                fuse2_ns: 250 * US,
                fuse4_ns: 375 * US,
                split2_ns: 20 * US,
                split4_ns: 60 * US,
            },
            Mechanism::ProxyLogical => {
                ReconfigCost { fuse2_ns: 2 * US, fuse4_ns: 8 * US, split2_ns: 1_500, split4_ns: 4_200 }
            }
            Mechanism::Free => ReconfigCost::FREE,
        }
    }

    /// Latency of fusing an object of `cpus` CPUs.
    pub fn fuse_ns(&self, cpus: usize) -> Nanos {
        if cpus >= 4 { self.fuse4_ns } else { self.fuse2_ns }
    }

    /// Latency of splitting an object of `cpus` CPUs.
    pub fn split_ns(&self, cpus: usize) -> Nanos {
        if cpus >= 4 { self.split4_ns } else { self.split2_ns }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn representative_is_lowest_cpu() {
        let o = ExecObject::new("4-7".parse().unwrap());
        assert_eq!(o.representative(), 4);
        assert_eq!(o.borrowed().to_string(), "5-7");
        assert!(o.is_fused());
        // 4 CPUs = sequential level log2(4) = 2.
        assert_eq!(o.property(1.0).level, 2);
        assert!(!ExecObject::new(CpuSet::single(3)).is_fused());
    }

    #[test]
    fn table4_costs() {
        let h = ReconfigCost::table4(Mechanism::Hotplug);
        let l = ReconfigCost::table4(Mechanism::ProxyLogical);
        // Fusing 2 CPUs: 150 ms by hotplug vs 2 µs with logical proxies = 75,000x.
        assert_eq!(h.fuse_ns(2) / l.fuse_ns(2), 75_000);
        assert_eq!(ReconfigCost::table4(Mechanism::ProxyApic).split_ns(4), 60_000);
        assert_eq!(ReconfigCost::table4(Mechanism::Free).fuse_ns(4), 0);
    }
}
