//! Machine profiles: what the steps of a reconfiguration plan cost on a real
//! machine, measured there by `dyncore bench reconfig --write-profile PATH`
//! and read by the simulator's `runtime` reconfiguration mechanism, which
//! executes the same [`Plan`]s the live runtime executes and charges each
//! critical step its measured cost.
//!
//! A profile is TOML:
//!
//! ```toml
//! machine = "2 CPUs (0-1), AMD EPYC under a hypervisor, Linux 6.18"
//! measured_on = "2026-11-23"
//! command = "dyncore bench reconfig --write-profile profiles/ci-2cpu.toml"
//! runtime_cpus = 8
//! real_cpus = 2
//!
//! [bolt.offline]
//! call_ns = 400            # taking the control lock, refreshing the view, planning
//! [bolt.offline.step_ns]   # median of each critical step, by `Step::name`
//! deactivate = 40
//! install-proxy = 60
//! # ...
//! ```
//!
//! The cost of a plan's critical path is `call_ns` plus the sum of its
//! critical steps' costs; deferred steps are off the critical path and cost
//! the caller nothing. A step the profile does not name is an error (the
//! profile is from an older planner), never silently free.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Nanos;
use crate::reconfig::{Direction, Kind, Mode, Plan};

/// The measured cost of one direction of one mode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallCosts {
    /// Fixed cost of a call: the control lock, the planner's view, planning.
    pub call_ns: Nanos,
    /// Median cost of each critical step, keyed by [`crate::reconfig::Step::name`].
    pub step_ns: BTreeMap<String, Nanos>,
}

/// Offline and online costs of one mode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModeCosts {
    pub offline: CallCosts,
    pub online: CallCosts,
}

/// A machine's profile. See the module docs for the file format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineProfile {
    /// What the machine was, as the benchmark described it.
    pub machine: String,
    /// When it was measured (a date).
    pub measured_on: String,
    /// The command that measured it.
    pub command: String,
    /// Runtime CPUs the benchmark ran.
    pub runtime_cpus: usize,
    /// Real CPUs they were pinned to.
    pub real_cpus: usize,
    pub bolt: ModeCosts,
    pub naive: ModeCosts,
}

/// Why a plan could not be costed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingStep {
    pub mode: Mode,
    pub direction: Direction,
    pub step: &'static str,
}

impl std::fmt::Display for MissingStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dir = match self.direction {
            Direction::Offline => "offline",
            Direction::Online => "online",
        };
        write!(
            f,
            "the machine profile has no cost for step `{}` of a {} {dir}; re-measure it with \
             `dyncore bench reconfig --write-profile PATH`",
            self.step, self.mode
        )
    }
}

impl std::error::Error for MissingStep {}

impl MachineProfile {
    /// The costs of `mode` in `direction`.
    pub fn costs(&self, mode: Mode, direction: Direction) -> &CallCosts {
        let m = match mode {
            Mode::Bolt => &self.bolt,
            Mode::Naive => &self.naive,
        };
        match direction {
            Direction::Offline => &m.offline,
            Direction::Online => &m.online,
        }
    }

    /// The time from the call to the end of the plan's critical steps. A
    /// no-op plan costs nothing.
    pub fn critical_ns(&self, plan: &Plan) -> Result<Nanos, MissingStep> {
        if plan.is_noop() {
            return Ok(0);
        }
        let costs = self.costs(plan.mode, plan.direction);
        let mut total = costs.call_ns;
        for ps in plan.steps.iter().filter(|s| s.kind == Kind::Critical) {
            let name = ps.step.name();
            let ns = costs.step_ns.get(name).ok_or(MissingStep {
                mode: plan.mode,
                direction: plan.direction,
                step: name,
            })?;
            total += ns;
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuSet;
    use crate::reconfig::{ReconfigState, plan_offline};

    fn profile() -> MachineProfile {
        let steps = |pairs: &[(&str, Nanos)]| pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        MachineProfile {
            machine: "test".into(),
            measured_on: "2026-11-23".into(),
            command: "none".into(),
            runtime_cpus: 4,
            real_cpus: 2,
            bolt: ModeCosts {
                offline: CallCosts {
                    call_ns: 400,
                    step_ns: steps(&[
                        ("deactivate", 40),
                        ("install-proxy", 60),
                        ("stop-dispatch", 20),
                        ("await-stopped", 30),
                        ("migrate-run-queue", 50),
                    ]),
                },
                online: CallCosts::default(),
            },
            naive: ModeCosts::default(),
        }
    }

    #[test]
    fn a_bolt_offline_costs_its_call_plus_its_critical_steps() {
        // Bolt offline of CPUs 2-3 on 4: deactivate once (40), then per CPU
        // install-proxy 60 + stop 20 + await 30 + migrate 50 = 160, twice:
        // 400 + 40 + 320 = 760 ns. Deferred steps (fold, park, free) are free.
        let plan = plan_offline(Mode::Bolt, &CpuSet::range(2, 4), &ReconfigState::all_online(4)).unwrap();
        assert_eq!(profile().critical_ns(&plan), Ok(760));
    }

    #[test]
    fn a_step_the_profile_lacks_is_an_error() {
        let plan = plan_offline(Mode::Naive, &CpuSet::single(1), &ReconfigState::all_online(2)).unwrap();
        let e = profile().critical_ns(&plan).unwrap_err();
        assert_eq!(e.step, "stop-the-world");
        assert!(e.to_string().contains("--write-profile"), "{e}");
    }
}
