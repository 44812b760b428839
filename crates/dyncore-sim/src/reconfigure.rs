//! Executing `Offline` and `Online` actions in virtual time: what each
//! costs under the run's mechanism, and who proxies for the CPUs that are
//! offline.
//!
//! The Chameleon policy asks for reconfigurations in pairs with the object
//! they serve — `Fuse` then the `Offline` of its borrowed CPUs, `Split`
//! then their `Online` (the boundary's contract) — so the Table 4
//! mechanisms charge the paper's fuse latency for the object's size on the
//! offline and its split latency on the online.
//!
//! Proxies: with proxy-APIC, proxy-logical and free fusion, the object's
//! representative proxies for its borrowed CPUs (Chameleon §4.1: "the CPU
//! that sends this request will be the proxy"); with hotplug nobody does —
//! an offline CPU is out of the kernel's masks and is sent nothing.
//!
//! Invariant (checked by [`Reconfigurer::check`], every engine step in
//! debug builds): the proxy table's own (one proxy per proxied CPU, no
//! chains).

use dyncore_core::exec::ExecObject;
use dyncore_core::proxy::ProxyTable;
use dyncore_core::reconfig::Mode;
use dyncore_core::{CpuId, CpuSet, Nanos};

use crate::cost::{Mechanism, ReconfigCost};

/// The run's reconfiguration mechanism and its state.
#[derive(Debug)]
pub struct Reconfigurer {
    mechanism: Mechanism,
    cost: ReconfigCost,
    proxies: ProxyTable,
}

impl Reconfigurer {
    pub fn new(mechanism: Mechanism, ncpus: usize) -> Reconfigurer {
        Reconfigurer { mechanism, cost: ReconfigCost::table4(mechanism), proxies: ProxyTable::new(ncpus) }
    }

    /// Takes `cpus` — the borrowed CPUs of `object` — offline; returns the
    /// latency of the critical path.
    pub fn offline(&mut self, cpus: &CpuSet, _mode: Mode, object: &ExecObject) -> Nanos {
        assert_eq!(cpus, &object.borrowed, "an Offline takes exactly the borrowed CPUs of its Fuse");
        if self.mechanism.has_proxies() {
            for c in cpus.iter() {
                // Installed before the CPU stops taking IPIs.
                self.proxies.install(c, object.representative).expect("a fresh proxy");
            }
        }
        self.cost.fuse_ns(object.len())
    }

    /// Brings `cpus` — the borrowed CPUs of `object` — back online; returns
    /// the latency of the critical path.
    pub fn online(&mut self, cpus: &CpuSet, _mode: Mode, object: &ExecObject) -> Nanos {
        assert_eq!(cpus, &object.borrowed, "an Online returns exactly the borrowed CPUs of its Split");
        for c in cpus.iter() {
            self.proxies.remove(c);
        }
        self.cost.split_ns(object.len())
    }

    /// Whether a message addressed to `cpu` is handled by a proxy.
    pub fn is_proxied(&self, cpu: CpuId) -> bool {
        self.proxies.is_proxied(cpu)
    }

    pub fn check(&self) -> Result<(), String> {
        self.proxies.check()
    }
}
