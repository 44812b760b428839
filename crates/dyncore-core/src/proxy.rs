//! Processor proxies (Chameleon §3.1, §4.1): while a CPU is offline (or
//! borrowed into a fused execution object), whatever is addressed to it —
//! interrupts, IPIs, remote calls — is handled by an online CPU, its *proxy*,
//! running the handler with the offline CPU's per-CPU state.
//!
//! `ProxyTable` is the bookkeeping only: `proxied_by[cpu]` and
//! `proxying_for[proxy]`, the two directions Chameleon keeps in each CPU's
//! per-CPU area. Backends decide *when* to install and remove; the simulator
//! counts messages routed through proxies, the runtime executes them.
//!
//! Invariants (checked by [`ProxyTable::check`] and asserted on every change):
//! 1. A proxied CPU has exactly one proxy: `proxied_by[c] == Some(p)` iff
//!    `c ∈ proxying_for[p]`.
//! 2. No chains: a proxy is not itself proxied, and no CPU proxies for itself.

use crate::{CpuId, CpuSet};

/// Why a proxy change was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyError {
    /// The CPU already has a proxy.
    AlreadyProxied { cpu: CpuId, proxy: CpuId },
    /// The chosen proxy is itself proxied (offline), or is the CPU itself.
    BadProxy { cpu: CpuId, proxy: CpuId },
}

impl std::fmt::Display for ProxyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyError::AlreadyProxied { cpu, proxy } => {
                write!(f, "CPU {cpu} is already proxied by CPU {proxy}")
            }
            ProxyError::BadProxy { cpu, proxy } => {
                write!(f, "CPU {proxy} cannot proxy for CPU {cpu}: it is the same CPU or is itself proxied")
            }
        }
    }
}

impl std::error::Error for ProxyError {}

/// Who proxies for whom.
#[derive(Debug, Clone, Default)]
pub struct ProxyTable {
    proxied_by: Vec<Option<CpuId>>,
    proxying_for: Vec<CpuSet>,
}

impl ProxyTable {
    pub fn new(ncpus: usize) -> Self {
        ProxyTable { proxied_by: vec![None; ncpus], proxying_for: vec![CpuSet::new(); ncpus] }
    }

    fn grow(&mut self, cpu: CpuId) {
        if cpu >= self.proxied_by.len() {
            self.proxied_by.resize(cpu + 1, None);
            self.proxying_for.resize(cpu + 1, CpuSet::new());
        }
    }

    /// The proxy handling messages for `cpu`, if it has one.
    pub fn proxied_by(&self, cpu: CpuId) -> Option<CpuId> {
        self.proxied_by.get(cpu).copied().flatten()
    }

    /// The CPUs `proxy` handles messages for.
    pub fn proxying_for(&self, proxy: CpuId) -> CpuSet {
        self.proxying_for.get(proxy).cloned().unwrap_or_default()
    }

    /// The CPU that actually handles a message addressed to `cpu`.
    pub fn route(&self, cpu: CpuId) -> CpuId {
        self.proxied_by(cpu).unwrap_or(cpu)
    }

    pub fn is_proxied(&self, cpu: CpuId) -> bool {
        self.proxied_by(cpu).is_some()
    }

    /// Makes `proxy` handle what is addressed to `cpu`.
    pub fn install(&mut self, cpu: CpuId, proxy: CpuId) -> Result<(), ProxyError> {
        self.grow(cpu.max(proxy));
        if let Some(p) = self.proxied_by[cpu] {
            return Err(ProxyError::AlreadyProxied { cpu, proxy: p });
        }
        if proxy == cpu || self.proxied_by[proxy].is_some() {
            return Err(ProxyError::BadProxy { cpu, proxy });
        }
        // A CPU that proxies for others cannot itself be proxied (no chains):
        // hand its charges to the new proxy first.
        let charges = std::mem::take(&mut self.proxying_for[cpu]);
        for c in charges.iter() {
            self.proxied_by[c] = Some(proxy);
            self.proxying_for[proxy].insert(c);
        }
        self.proxied_by[cpu] = Some(proxy);
        self.proxying_for[proxy].insert(cpu);
        debug_assert_eq!(self.check(), Ok(()));
        Ok(())
    }

    /// Removes `cpu`'s proxy (the CPU is back); returns the proxy it had.
    pub fn remove(&mut self, cpu: CpuId) -> Option<CpuId> {
        let p = self.proxied_by.get_mut(cpu)?.take()?;
        self.proxying_for[p].remove(cpu);
        debug_assert_eq!(self.check(), Ok(()));
        Some(p)
    }

    /// Checks both invariants; returns a description of the first violation.
    pub fn check(&self) -> Result<(), String> {
        for (c, p) in self.proxied_by.iter().enumerate() {
            if let Some(p) = *p {
                if p == c {
                    return Err(format!("CPU {c} proxies for itself"));
                }
                if !self.proxying_for[p].contains(c) {
                    return Err(format!("CPU {c} says proxy {p}, but {p} does not list it"));
                }
                if self.proxied_by[p].is_some() {
                    return Err(format!("proxy {p} of CPU {c} is itself proxied"));
                }
            }
        }
        for (p, set) in self.proxying_for.iter().enumerate() {
            for c in set.iter() {
                if self.proxied_by.get(c).copied().flatten() != Some(p) {
                    return Err(format!("CPU {p} lists {c}, which names another proxy"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_goes_through_the_proxy_and_back() {
        let mut t = ProxyTable::new(4);
        assert_eq!(t.route(2), 2);
        t.install(2, 0).unwrap();
        assert_eq!(t.route(2), 0);
        assert_eq!(t.proxying_for(0), CpuSet::single(2));
        assert_eq!(t.remove(2), Some(0));
        assert_eq!(t.route(2), 2);
        assert_eq!(t.remove(2), None);
    }

    #[test]
    fn refuses_double_proxy_self_proxy_and_chains() {
        let mut t = ProxyTable::new(4);
        t.install(1, 0).unwrap();
        assert_eq!(t.install(1, 2), Err(ProxyError::AlreadyProxied { cpu: 1, proxy: 0 }));
        assert_eq!(t.install(3, 3), Err(ProxyError::BadProxy { cpu: 3, proxy: 3 }));
        assert_eq!(t.install(3, 1), Err(ProxyError::BadProxy { cpu: 3, proxy: 1 }));
    }

    #[test]
    fn a_proxy_going_offline_hands_over_its_charges() {
        let mut t = ProxyTable::new(4);
        t.install(1, 0).unwrap();
        t.install(2, 0).unwrap();
        // CPU 0 now leaves too, proxied by 3: 1 and 2 must move to 3, no chain.
        t.install(0, 3).unwrap();
        assert_eq!(t.proxying_for(3), "0-2".parse().unwrap());
        assert_eq!(t.route(1), 3);
        assert_eq!(t.check(), Ok(()));
    }
}
