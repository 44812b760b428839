//! What a reconfiguration costs in the simulator: the mechanisms a scenario
//! can name (`[sim] reconfig`) and their latencies — Table 4's constants,
//! or, for `runtime`, the cost of the real Bolt plan from a machine profile.
//!
//! The policy never sees these numbers: it asks for `Offline`/`Online` and
//! learns from `ReconfigDone` when they finished. The simulator stalls the
//! object's CPUs for the mechanism's latency and answers then.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use dyncore_core::CpuSet;
use dyncore_core::Nanos;
use dyncore_core::profile::MachineProfile;
use dyncore_core::reconfig::{Mode, ReconfigState, plan_offline, plan_online};

mod default_profile {
    include!(concat!(env!("OUT_DIR"), "/default_profile.rs"));
}

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
    /// The runtime's own reconfiguration: the Bolt plan that
    /// `dyncore_core::reconfig` makes, its critical path charged from a
    /// machine profile (`[sim] profile`, default `profiles/reference.toml`).
    Runtime,
}

impl Mechanism {
    /// The name scenario files and reports use (the serde name).
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Hotplug => "hotplug",
            Mechanism::ProxyApic => "proxy-apic",
            Mechanism::ProxyLogical => "proxy-logical",
            Mechanism::Free => "free",
            Mechanism::Runtime => "runtime",
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

    /// Table 4 of the paper (`None` for `runtime`, whose costs come from a
    /// profile):
    ///
    /// | operation | hotplug | proxy-APIC | proxy-logical |
    /// |---|---|---|---|
    /// | fuse 2 | 150 ms | 250 µs | 2 µs |
    /// | fuse 4 | 430 ms | 375 µs | 8 µs |
    /// | split 2 | 220 ms | 20 µs | 1.5 µs |
    /// | split 4 | 640 ms | 60 µs | 4.2 µs |
    pub fn table4(m: Mechanism) -> Option<ReconfigCost> {
        const US: Nanos = 1_000;
        const MS: Nanos = 1_000_000;
        Some(match m {
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
            Mechanism::Runtime => return None,
        })
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

/// The built-in default profile and where it came from. Panics if the
/// embedded file does not parse (a build from a broken tree).
pub fn default_profile() -> (&'static str, &'static MachineProfile) {
    static PROFILE: OnceLock<MachineProfile> = OnceLock::new();
    let p = PROFILE.get_or_init(|| {
        toml::from_str(default_profile::DEFAULT_PROFILE_TOML).unwrap_or_else(|e| {
            panic!(
                "the built-in machine profile ({}) does not parse: {e}",
                default_profile::DEFAULT_PROFILE_SOURCE
            )
        })
    });
    (default_profile::DEFAULT_PROFILE_SOURCE, p)
}

/// Checks that `profile` costs every step of the plans a run with `mode`
/// makes (offline of fused CPUs, then their online); the first missing step
/// is the error.
pub fn check_profile(profile: &MachineProfile, mode: Mode) -> Result<(), String> {
    let mut state = ReconfigState::all_online(4);
    let cpus = CpuSet::range(1, 4);
    let off = plan_offline(mode, &cpus, &state).expect("a valid plan");
    profile.critical_ns(&off).map_err(|e| e.to_string())?;
    state.apply(&off);
    let on = plan_online(mode, &cpus, &state).expect("a valid plan");
    profile.critical_ns(&on).map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table4_costs() {
        let table4 = |m| ReconfigCost::table4(m).expect("a Table 4 mechanism");
        let (h, l) = (table4(Mechanism::Hotplug), table4(Mechanism::ProxyLogical));
        // Fusing 2 CPUs: 150 ms by hotplug vs 2 µs with logical proxies = 75,000x.
        assert_eq!(h.fuse_ns(2) / l.fuse_ns(2), 75_000);
        assert_eq!(table4(Mechanism::ProxyApic).split_ns(4), 60_000);
        assert_eq!(table4(Mechanism::Free).fuse_ns(4), 0);
        assert_eq!(ReconfigCost::table4(Mechanism::Runtime), None);
    }

    #[test]
    fn the_built_in_profile_costs_every_bolt_and_naive_step() {
        let (source, p) = default_profile();
        assert!(!source.is_empty());
        check_profile(p, Mode::Bolt).unwrap();
        check_profile(p, Mode::Naive).unwrap();
    }

    #[test]
    fn a_profile_missing_a_step_is_refused_with_its_name() {
        let mut p = default_profile().1.clone();
        p.bolt.online.step_ns.remove("unpark-helper");
        let e = check_profile(&p, Mode::Bolt).unwrap_err();
        assert!(e.contains("unpark-helper") && e.contains("--write-profile"), "{e}");
    }
}
