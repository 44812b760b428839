//! The energy a run's CPUs drew, **modelled** ([`MODELLED`]): each CPU's
//! power state over time, from the policy's traffic, priced by the power
//! model of `dyncore_core::power` (fitted to NewtOS Table 2). No backend
//! measures power here (no RAPL); every figure is the model's, and is
//! labelled so.
//!
//! A CPU is, at every moment, in exactly one of these states, in this
//! order of precedence:
//!
//! | state | from the traffic | power |
//! |---|---|---|
//! | reconfiguring | from an `Offline`/`Online` that charges it (the object's CPUs after a `Fuse`/`Split`, else the action's) to the `ReconfigDone` that answers it, queued time included | a busy baseline core, [`PowerModel::duty_w`] at 50% (11.13 W): it runs the critical path |
//! | offline | parked by a standalone `Offline` (once that is done), until the standalone `Online` that brings it back is asked | [`PowerModel::offline_w`]: power-gated, 0 W |
//! | running | its last `Dispatch` runs a thread | [`PowerModel::duty_w`] at its last `SetSpeed` |
//! | borrowed | its last `Dispatch` lends it to a fused object | a busy baseline core: it lends its hardware to the object |
//! | idle | otherwise | [`PowerModel::idle_w`]: asleep, clock stopped (2.265 W) |
//!
//! A thread dispatched on a reconfiguring CPU makes no progress (the
//! backend's promise 5): that time is counted as **stalled** — what the
//! reconfigurations cost the threads, a fused object's fuse and a parked
//! CPU's wake-up alike.
//!
//! Invariant: a CPU's states partition the run: their times sum to its
//! length (asserted by [`PowerLedger::finish`]).

use dyncore_core::Nanos;
use dyncore_core::power::{MODELLED, PowerModel};
use dyncore_core::speed::Duty;

/// What a CPU's last `Dispatch` says it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Activity {
    Idle,
    Running,
    Borrowed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Reconfiguring,
    Offline,
    Running,
    Borrowed,
    Idle,
}

/// One CPU's power state and what it has drawn.
#[derive(Debug, Clone)]
struct CpuPower {
    activity: Activity,
    /// The duty its last `SetSpeed` set (the baseline until one does).
    duty: Duty,
    parked: bool,
    /// Reconfigurations asked for it and not yet answered.
    reconfiguring: u32,
    since: Nanos,
    /// Time in each [`State`], in its order.
    ns: [Nanos; 5],
    stalled_ns: Nanos,
    joules: f64,
}

/// One CPU's energy over a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct CpuEnergy {
    pub joules: f64,
    pub offline_ns: Nanos,
    pub idle_ns: Nanos,
    pub stalled_ns: Nanos,
}

/// Every CPU's power state over time; see the module doc.
#[derive(Debug, Clone)]
pub(super) struct PowerLedger {
    model: PowerModel,
    cpus: Vec<CpuPower>,
}

/// The model and the label the results carry.
pub fn model_label() -> String {
    format!(
        "{MODELLED}: a busy core at duty d draws 2.265 + d x 17.735 W (the baseline, 50%: 11.13 W; \
         reconfiguring and borrowed cores as busy baseline cores), an idle one 2.265 W, an offline \
         (power-gated) one 0 W"
    )
}

impl PowerLedger {
    pub fn new(ncpus: usize) -> PowerLedger {
        let cpu = CpuPower {
            activity: Activity::Idle,
            duty: Duty::BASELINE,
            parked: false,
            reconfiguring: 0,
            since: 0,
            ns: [0; 5],
            stalled_ns: 0,
            joules: 0.0,
        };
        PowerLedger { model: PowerModel::newtos(), cpus: vec![cpu; ncpus] }
    }

    fn state(c: &CpuPower) -> State {
        if c.reconfiguring > 0 {
            State::Reconfiguring
        } else if c.parked {
            State::Offline
        } else {
            match c.activity {
                Activity::Running => State::Running,
                Activity::Borrowed => State::Borrowed,
                Activity::Idle => State::Idle,
            }
        }
    }

    fn watts(&self, c: &CpuPower) -> f64 {
        match Self::state(c) {
            State::Reconfiguring | State::Borrowed => self.model.duty_w(Duty::BASELINE),
            State::Offline => self.model.offline_w(),
            State::Running => self.model.duty_w(c.duty),
            State::Idle => self.model.idle_w(),
        }
    }

    /// Charges `cpu`'s state from its last change to `now`.
    fn advance(&mut self, cpu: usize, now: Nanos) {
        let w = self.watts(&self.cpus[cpu]);
        let c = &mut self.cpus[cpu];
        let dt = now.saturating_sub(c.since);
        let state = Self::state(c);
        c.ns[state as usize] += dt;
        if state == State::Reconfiguring && c.activity == Activity::Running {
            c.stalled_ns += dt;
        }
        c.joules += w * dt as f64 / 1e9;
        c.since = c.since.max(now);
    }

    pub fn activity(&mut self, cpu: usize, now: Nanos, a: Activity) {
        self.advance(cpu, now);
        self.cpus[cpu].activity = a;
    }

    pub fn duty(&mut self, cpu: usize, now: Nanos, d: Duty) {
        self.advance(cpu, now);
        self.cpus[cpu].duty = d;
    }

    pub fn reconfig_begin(&mut self, cpu: usize, now: Nanos) {
        self.advance(cpu, now);
        self.cpus[cpu].reconfiguring += 1;
    }

    pub fn reconfig_end(&mut self, cpu: usize, now: Nanos) {
        self.advance(cpu, now);
        let c = &mut self.cpus[cpu];
        c.reconfiguring = c.reconfiguring.checked_sub(1).expect("a reconfiguration ends after it begins");
    }

    pub fn park(&mut self, cpu: usize, now: Nanos, parked: bool) {
        self.advance(cpu, now);
        self.cpus[cpu].parked = parked;
    }

    /// Every CPU's energy over a run of `end_ns`.
    pub fn finish(mut self, end_ns: Nanos) -> Vec<CpuEnergy> {
        for cpu in 0..self.cpus.len() {
            self.advance(cpu, end_ns);
        }
        self.cpus
            .iter()
            .enumerate()
            .map(|(cpu, c)| {
                let total: Nanos = c.ns.iter().sum();
                assert_eq!(total, end_ns, "CPU {cpu}: its power states cover {total} ns of {end_ns}");
                CpuEnergy {
                    joules: c.joules,
                    offline_ns: c.ns[State::Offline as usize],
                    idle_ns: c.ns[State::Idle as usize],
                    stalled_ns: c.stalled_ns,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_cpu_draws_busy_power_while_it_reconfigures_and_nothing_offline() {
        let mut l = PowerLedger::new(2);
        let ms = 1_000_000;
        // CPU 0 runs a thread at 50% for 10 ms: 11.1325 W x 10 ms.
        l.activity(0, 0, Activity::Running);
        l.activity(0, 10 * ms, Activity::Idle);
        // CPU 1: idle 2 ms, offline asked at 2 ms and done at 3 ms, parked
        // until 8 ms, online asked then and done at 9 ms, a thread
        // dispatched at 8 ms (stalled until 9 ms) runs until 10 ms.
        l.reconfig_begin(1, 2 * ms);
        l.park(1, 2 * ms, true);
        l.reconfig_end(1, 3 * ms);
        l.park(1, 8 * ms, false);
        l.reconfig_begin(1, 8 * ms);
        l.activity(1, 8 * ms, Activity::Running);
        l.reconfig_end(1, 9 * ms);
        let e = l.finish(10 * ms);
        let busy = 2.265 + 0.5 * 17.735;
        assert!((e[0].joules - busy * 0.010).abs() < 1e-5, "{}", e[0].joules);
        // CPU 1: idle 2 ms (2.265 W), reconfiguring 1 + 1 ms (busy), offline
        // 5 ms (0 W), running 1 ms (busy).
        let want = 2.265 * 0.002 + busy * 0.002 + busy * 0.001;
        assert!((e[1].joules - want).abs() < 1e-5, "{} vs {want}", e[1].joules);
        // The rest of its 10 ms: 2 ms reconfiguring, 1 ms running.
        assert_eq!((e[1].offline_ns, e[1].idle_ns), (5 * ms, 2 * ms));
        assert_eq!(e[1].stalled_ns, ms, "the thread waited for the online");
        assert!(model_label().contains("modelled"));
    }

    #[test]
    fn duties_and_borrowed_cpus_are_priced() {
        let mut l = PowerLedger::new(2);
        l.duty(0, 0, Duty::new(750).unwrap());
        l.activity(0, 0, Activity::Running);
        l.activity(1, 0, Activity::Borrowed);
        let e = l.finish(1_000_000_000);
        // A fused pair for one second: 15.566 J on the representative at
        // 75%, 11.13 J on the borrowed CPU.
        assert!((e[0].joules - 15.566).abs() < 1e-3 && (e[1].joules - 11.1325).abs() < 1e-3, "{e:?}");
    }
}
