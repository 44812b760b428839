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
//!
//! # The network stack's costs (`[stack]`, optional)
//!
//! `dyncore bench stack --write-profile PATH` measures what the split
//! network stack's components cost on this machine ([`StackCosts`]); the
//! simulator's NewtOS model (`dyncore_sim::netstack`) reads them to predict
//! the live configurations. A profile without the section still parses.
//!
//! ```toml
//! [stack]
//! cpu_mhz = 2100                # the clock the cycles were counted at
//! channel_cycles_per_msg = 120  # one message through a channel, both ends
//! wakeup_ns = 4000              # a sleeping component's wake-up
//! [stack.tcp]
//! cycles_per_packet = 900
//! cycles_per_byte = 0.9         # the payload copy
//! [stack.ip]
//! cycles_per_packet = 300
//! cycles_per_byte = 0.0
//! # [stack.syscall], [stack.filter], [stack.driver] alike
//! ```
//!
//! Invariant ([`StackCosts::validate`]): every cost is finite and `>= 0`,
//! and the clock is `> 0`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Nanos;
use crate::placement::ComponentKind;
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
    /// The network stack's per-component costs, if measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<StackCosts>,
}

/// What one component of the split network stack costs: a fixed part per
/// packet (headers, bookkeeping, its share of the event loop) and a part per
/// payload byte (copies and checksums).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentCost {
    pub cycles_per_packet: f64,
    pub cycles_per_byte: f64,
}

impl ComponentCost {
    /// Cycles to process one packet carrying `bytes` of payload.
    pub fn cycles(&self, bytes: u64) -> f64 {
        self.cycles_per_packet + self.cycles_per_byte * bytes as f64
    }
}

/// The split network stack's costs on one machine (module docs, `[stack]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackCosts {
    /// The CPU clock (MHz) the cycles were counted at; time = cycles / clock.
    pub cpu_mhz: f64,
    /// One message through a channel (enqueue and dequeue), cycles.
    pub channel_cycles_per_msg: f64,
    /// Waking a component that slept (notification to running), ns.
    pub wakeup_ns: f64,
    pub syscall: ComponentCost,
    pub tcp: ComponentCost,
    pub ip: ComponentCost,
    pub filter: ComponentCost,
    pub driver: ComponentCost,
}

/// A stack cost that cannot be: outside its field's range
/// ([`StackCosts::range`]), which also refuses what is not finite.
#[derive(Debug, Clone, PartialEq)]
pub struct BadStackCost {
    /// The field's path under `[stack]`, e.g. `tcp.cycles_per_byte`.
    pub field: String,
    pub value: f64,
}

impl BadStackCost {
    /// What the field accepts, in words: "expected 1 to 1000000 MHz".
    pub fn expected(&self) -> String {
        let (lo, hi, unit) = StackCosts::range(&self.field);
        format!("expected {lo} to {hi} {unit}")
    }
}

impl std::fmt::Display for BadStackCost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stack.{} = {}: {}", self.field, self.value, self.expected())
    }
}

impl std::error::Error for BadStackCost {}

impl StackCosts {
    /// These costs with every cycle count (per packet, per byte, per
    /// channel message) times `factor`; the clock and the wake-up latency
    /// are kept. One place for the two uses: calibrating the work's scale,
    /// and recounting cycles at another clock.
    pub fn with_cycles_times(&self, factor: f64) -> StackCosts {
        let s = |c: ComponentCost| ComponentCost {
            cycles_per_packet: c.cycles_per_packet * factor,
            cycles_per_byte: c.cycles_per_byte * factor,
        };
        StackCosts {
            channel_cycles_per_msg: self.channel_cycles_per_msg * factor,
            syscall: s(self.syscall),
            tcp: s(self.tcp),
            ip: s(self.ip),
            filter: s(self.filter),
            driver: s(self.driver),
            ..self.clone()
        }
    }

    /// The cost of one component.
    pub fn component(&self, kind: ComponentKind) -> &ComponentCost {
        match kind {
            ComponentKind::Syscall => &self.syscall,
            ComponentKind::Tcp => &self.tcp,
            ComponentKind::Ip => &self.ip,
            ComponentKind::Filter => &self.filter,
            ComponentKind::Driver => &self.driver,
        }
    }

    /// Every named number with its field path, for validation and reports.
    pub fn fields(&self) -> Vec<(String, f64)> {
        let mut v = vec![
            ("cpu_mhz".to_string(), self.cpu_mhz),
            ("channel_cycles_per_msg".to_string(), self.channel_cycles_per_msg),
            ("wakeup_ns".to_string(), self.wakeup_ns),
        ];
        for k in ComponentKind::ALL {
            let c = self.component(k);
            v.push((format!("{k}.cycles_per_packet"), c.cycles_per_packet));
            v.push((format!("{k}.cycles_per_byte"), c.cycles_per_byte));
        }
        v
    }

    /// The range a field accepts, with its unit: the clock 1 MHz to 1 THz,
    /// a count of cycles per packet or message at most 10^9 (a second of a
    /// 1 GHz core), per byte at most 10^6, a wake-up at most 1 s. Wider
    /// values describe no machine, and the limits keep every job's time
    /// well inside virtual time's 584 years.
    pub fn range(field: &str) -> (f64, f64, &'static str) {
        match field {
            "cpu_mhz" => (1.0, 1e6, "MHz"),
            "wakeup_ns" => (0.0, 1e9, "ns"),
            f if f.ends_with("cycles_per_byte") => (0.0, 1e6, "cycles"),
            _ => (0.0, 1e9, "cycles"),
        }
    }

    /// Checks the module's invariant; the first bad field is the error.
    pub fn validate(&self) -> Result<(), BadStackCost> {
        for (field, value) in self.fields() {
            let (lo, hi, _) = Self::range(&field);
            let ok = value.is_finite() && (lo..=hi).contains(&value);
            if !ok {
                return Err(BadStackCost { field, value });
            }
        }
        Ok(())
    }
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
            stack: None,
        }
    }

    fn stack() -> StackCosts {
        let c = |p, b| ComponentCost { cycles_per_packet: p, cycles_per_byte: b };
        StackCosts {
            cpu_mhz: 2000.0,
            channel_cycles_per_msg: 100.0,
            wakeup_ns: 3000.0,
            syscall: c(200.0, 0.0),
            tcp: c(900.0, 0.9),
            ip: c(300.0, 0.0),
            filter: c(100.0, 0.0),
            driver: c(400.0, 0.1),
        }
    }

    #[test]
    fn a_profile_without_a_stack_section_still_parses_and_one_with_it_round_trips() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../profiles/reference.toml"))
                .unwrap();
        let p: MachineProfile = toml::from_str(&text).unwrap();
        assert_eq!(p.stack, None);
        let with = MachineProfile { stack: Some(stack()), ..p };
        let body = toml::to_string_pretty(&with).unwrap();
        assert!(body.contains("[stack.tcp]"), "{body}");
        let back: MachineProfile = toml::from_str(&body).unwrap();
        assert_eq!(back, with);
        // 1460 bytes through TCP: 900 + 0.9 * 1460 cycles.
        assert!((with.stack.unwrap().component(ComponentKind::Tcp).cycles(1460) - 2214.0).abs() < 1e-9);
    }

    #[test]
    fn a_negative_or_non_finite_stack_cost_is_named() {
        assert_eq!(stack().validate(), Ok(()));
        let mut s = stack();
        s.ip.cycles_per_byte = -1.0;
        let e = s.validate().unwrap_err();
        assert_eq!(e.field, "ip.cycles_per_byte");
        assert!(e.to_string().contains("stack.ip.cycles_per_byte = -1"), "{e}");
        let mut s = stack();
        s.cpu_mhz = 0.0;
        assert_eq!(s.validate().unwrap_err().field, "cpu_mhz");
        let mut s = stack();
        s.wakeup_ns = f64::NAN;
        assert_eq!(s.validate().unwrap_err().field, "wakeup_ns");
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
