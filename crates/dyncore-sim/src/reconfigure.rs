//! Executing `Offline` and `Online` actions in virtual time: what each
//! costs under the run's mechanism, and who proxies for the CPUs that are
//! offline.
//!
//! The Chameleon policy asks for reconfigurations in pairs with the object
//! they serve — `Fuse` then the `Offline` of its borrowed CPUs, `Split`
//! then their `Online` (the boundary's contract) — so the Table 4
//! mechanisms charge the paper's fuse latency for the object's size on the
//! offline and its split latency on the online. A policy may also take
//! CPUs offline with no object (to save power): Table 4 then charges the
//! latency of an object of those CPUs and one that stays online (the proxy).
//!
//! The `runtime` mechanism executes what the live runtime executes: it
//! keeps a simulated [`ReconfigState`] (which CPUs are online, which kept
//! their cache, registry entry and helper, who proxies for whom), plans
//! each `Offline`/`Online` with `dyncore_core::reconfig` in the action's
//! mode, charges the plan's critical path from the machine profile
//! ([`MachineProfile::critical_ns`]), and applies the plan to the state,
//! its deferred steps as the runtime's view shows them (a helper asked to
//! park reads parked at once; a kept cache is freed only under memory
//! pressure, which the simulator never has). So a Bolt online after a Bolt
//! offline costs the unpark and no re-creation, as live.
//!
//! Proxies: with proxy-APIC, proxy-logical and free fusion, the object's
//! representative proxies for its borrowed CPUs (Chameleon §4.1: "the CPU
//! that sends this request will be the proxy"); with `runtime`, the plan's
//! `InstallProxy` steps say who (the planner deals them round-robin over
//! the CPUs that stay online); with hotplug nobody does — an offline CPU
//! is out of the kernel's masks and is sent nothing.
//!
//! Invariant (checked by [`Reconfigurer::check`], every engine step in
//! debug builds): the proxy table's own (one proxy per proxied CPU, no
//! chains).

use dyncore_core::profile::MachineProfile;
use dyncore_core::proxy::ProxyTable;
use dyncore_core::reconfig::{Mode, Plan, ReconfigState, plan_offline, plan_online};
use dyncore_core::{CpuId, CpuSet, Nanos};

use crate::cost::{Mechanism, ReconfigCost};

#[derive(Debug)]
enum Model {
    /// Table 4's constants; `proxies` when the mechanism has them.
    Table4 { cost: ReconfigCost, proxies: Option<ProxyTable> },
    /// Real plans on a simulated runtime, costed by a profile.
    Runtime { profile: Box<MachineProfile>, state: ReconfigState },
}

/// The run's reconfiguration mechanism and its state.
#[derive(Debug)]
pub struct Reconfigurer {
    model: Model,
}

impl Reconfigurer {
    /// A Table 4 mechanism, or `runtime` with `profile` (which must cost
    /// every step its plans need: `cost::check_profile`).
    pub fn new(mechanism: Mechanism, ncpus: usize, profile: Option<&MachineProfile>) -> Reconfigurer {
        let model = match ReconfigCost::table4(mechanism) {
            Some(cost) => {
                Model::Table4 { cost, proxies: mechanism.has_proxies().then(|| ProxyTable::new(ncpus)) }
            }
            None => Model::Runtime {
                profile: Box::new(profile.expect("the runtime mechanism has a profile").clone()),
                state: ReconfigState::all_online(ncpus),
            },
        };
        Reconfigurer { model }
    }

    /// Takes `cpus` offline, `proxy` (the representative of the object
    /// they are borrowed into, or a CPU that stays online) handling their
    /// messages under a Table 4 mechanism with proxies; returns the latency
    /// of the critical path.
    pub fn offline(&mut self, cpus: &CpuSet, mode: Mode, proxy: CpuId) -> Nanos {
        assert!(!cpus.contains(proxy), "CPU {proxy} cannot proxy for itself ({cpus})");
        match &mut self.model {
            Model::Table4 { cost, proxies } => {
                if let Some(proxies) = proxies {
                    for c in cpus.iter() {
                        // Installed before the CPU stops taking IPIs.
                        proxies.install(c, proxy).expect("a fresh proxy");
                    }
                }
                cost.fuse_ns(cpus.len() + 1)
            }
            Model::Runtime { profile, state } => {
                let plan = plan_offline(mode, cpus, state).unwrap_or_else(|e| panic!("offline {cpus}: {e}"));
                execute(profile, state, &plan)
            }
        }
    }

    /// Brings `cpus` back online; returns the latency of the critical path.
    pub fn online(&mut self, cpus: &CpuSet, mode: Mode) -> Nanos {
        match &mut self.model {
            Model::Table4 { cost, proxies } => {
                if let Some(proxies) = proxies {
                    for c in cpus.iter() {
                        proxies.remove(c);
                    }
                }
                cost.split_ns(cpus.len() + 1)
            }
            Model::Runtime { profile, state } => {
                let plan = plan_online(mode, cpus, state).unwrap_or_else(|e| panic!("online {cpus}: {e}"));
                execute(profile, state, &plan)
            }
        }
    }

    /// Whether a message addressed to `cpu` is handled by a proxy.
    pub fn is_proxied(&self, cpu: CpuId) -> bool {
        match &self.model {
            Model::Table4 { proxies, .. } => proxies.as_ref().is_some_and(|p| p.is_proxied(cpu)),
            Model::Runtime { state, .. } => state.proxies.is_proxied(cpu),
        }
    }

    pub fn check(&self) -> Result<(), String> {
        match &self.model {
            Model::Table4 { proxies, .. } => proxies.as_ref().map_or(Ok(()), ProxyTable::check),
            Model::Runtime { state, .. } => state.proxies.check(),
        }
    }
}

/// Charges `plan`'s critical path and applies it to `state`.
fn execute(profile: &MachineProfile, state: &mut ReconfigState, plan: &Plan) -> Nanos {
    let ns = profile.critical_ns(plan).unwrap_or_else(|e| panic!("unvalidated profile: {e}"));
    state.apply(plan);
    ns
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::default_profile;
    use dyncore_core::exec::ExecObject;

    fn quad() -> ExecObject {
        ExecObject::new(&"4-7".parse().unwrap())
    }

    #[test]
    fn runtime_charges_the_bolt_plan_and_keeps_the_state() {
        let profile = default_profile().1;
        let mut r = Reconfigurer::new(Mechanism::Runtime, 8, Some(profile));
        let q = quad();
        // Offline of 5-7 from all online: the plan the runtime would run.
        let plan = plan_offline(Mode::Bolt, &q.borrowed, &ReconfigState::all_online(8)).unwrap();
        let want = profile.critical_ns(&plan).unwrap();
        assert_eq!(r.offline(&q.borrowed, Mode::Bolt, q.representative), want);
        // The planner dealt proxies over the CPUs that stay online.
        assert!(q.borrowed.iter().all(|c| r.is_proxied(c)) && !r.is_proxied(4));
        // Online: helpers were parked (deferred, applied), so the plan
        // unparks them; the kept caches need no re-creation.
        let Model::Runtime { state, .. } = &r.model else { unreachable!() };
        let on = plan_online(Mode::Bolt, &q.borrowed, state).unwrap();
        assert!(on.steps.iter().any(|s| s.step.name() == "unpark-helper"));
        assert!(!on.steps.iter().any(|s| s.step.name() == "create-cache"));
        assert_eq!(r.online(&q.borrowed, Mode::Bolt), profile.critical_ns(&on).unwrap());
        assert!(!r.is_proxied(5));
        r.check().unwrap();
    }

    #[test]
    fn hotplug_has_no_proxies_and_the_proxy_mechanisms_proxy_on_the_representative() {
        let q = quad();
        let mut h = Reconfigurer::new(Mechanism::Hotplug, 8, None);
        assert_eq!(h.offline(&q.borrowed, Mode::Bolt, q.representative), 430_000_000);
        assert!(!h.is_proxied(5));
        let mut a = Reconfigurer::new(Mechanism::ProxyApic, 8, None);
        assert_eq!(a.offline(&q.borrowed, Mode::Bolt, q.representative), 375_000);
        assert!(a.is_proxied(5));
        assert_eq!(a.online(&q.borrowed, Mode::Bolt), 60_000);
        assert!(!a.is_proxied(5));
    }
}
