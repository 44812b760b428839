//! What a reconfiguration costs in the simulator: the mechanisms a scenario
//! can name (`[sim] reconfig`) and their latencies.
//!
//! The policy never sees these numbers: it asks for `Offline`/`Online` and
//! learns from `ReconfigDone` when they finished. The simulator stalls the
//! object's CPUs for the mechanism's latency and answers then.

use serde::{Deserialize, Serialize};

use dyncore_core::Nanos;

/// How fused objects are formed and split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// Linux hotplug: offline every borrowed CPU, online it again. No
    /// proxies: an offline CPU is out of the kernel's masks and is sent no
    /// IPIs at all.
    Hotplug,
    /// Processor proxies, reprogramming the IOAPIC.
    ProxyApic,
    /// Processor proxies with APIC logical-address renaming.
    ProxyLogical,
    /// An ideal processor: proxies at no cost.
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

    /// Whether an offline CPU's messages go to a proxy (Chameleon §3.1).
    pub fn has_proxies(self) -> bool {
        self != Mechanism::Hotplug
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
    fn table4_costs() {
        let h = ReconfigCost::table4(Mechanism::Hotplug);
        let l = ReconfigCost::table4(Mechanism::ProxyLogical);
        // Fusing 2 CPUs: 150 ms by hotplug vs 2 µs with logical proxies = 75,000x.
        assert_eq!(h.fuse_ns(2) / l.fuse_ns(2), 75_000);
        assert_eq!(ReconfigCost::table4(Mechanism::ProxyApic).split_ns(4), 60_000);
        assert_eq!(ReconfigCost::table4(Mechanism::Free).fuse_ns(4), 0);
    }
}
