//! Duty-cycle speed emulation in software (Chameleon §5.1 did it with the
//! clock-modulation MSR; dyncore has no MSRs, so the worker throttles
//! itself).
//!
//! Each runtime CPU has a [`Duty`] in (0, 100%], in per-mille (62.5% is
//! exactly 625‰). The worker keeps its *busy time* — time spent in task
//! steps — at duty × elapsed, measured over fixed periods of
//! [`super::RuntimeConfig::throttle_period`] (default 1 ms) on a grid that
//! starts when the worker starts:
//!
//! * In each period the worker may be busy for `duty × period`. Before each
//!   step it checks the period's busy time plus any debt; when that has
//!   reached the budget it runs no more steps until the period ends (it
//!   still serves its mailbox, barriers and offline requests).
//! * A step that runs past the budget (steps are not interrupted) leaves
//!   the excess as debt for the next periods, so the long-run busy time is
//!   duty × elapsed to within one step, whatever the step length.
//! * Unused budget is not banked: a CPU idle for lack of work does not earn
//!   a burst later (clock modulation does not either).
//!
//! Why 1 ms: the error of one period is at most one step (kernels keep
//! steps ≤ 50 µs, so ≤ 5% of a period), and the debt carries it into the
//! next, so over a scheduler tick (4 ms) or quantum (16 ms) the speed is
//! right to within one step; a shorter period would make the idle gaps
//! shorter than the sleep latency of this machine, a longer one would let
//! a throttled CPU run at full speed for longer stretches.
//!
//! Idling is a sleep (a futex wait with a deadline, on worker threads whose
//! timer slack is set to 1 µs), not a spin: several runtime CPUs may share
//! one real CPU, and a throttled one must give the real CPU to the others,
//! as a clock-modulated core leaves the package's power to its neighbours.
//! Gaps shorter than [`SPIN_BELOW_NS`] are spun instead: a sleep that short
//! would overshoot.
//!
//! The error is measured, not assumed: over every period in which the CPU
//! had work from start to end at one duty ("loaded"), the worker adds up
//! the busy time and duty × period; [`DutyReport`] gives both.
//!
//! There is one throttle: the runtime's workers use it for task steps, and
//! the network stack's hosts (`dyncore_net::hosting`) use the same
//! [`Throttle`] and [`ThrottleCounters`] for their rounds of component
//! polls, whose "busy time" is the time a round ran (a polling core runs).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use dyncore_core::CpuId;
pub use dyncore_core::speed::{Duty, DutyError};

/// Throttle gaps shorter than this are spun, not slept.
pub const SPIN_BELOW_NS: u64 = 30_000;

/// What the throttle publishes per CPU: the duty (set by anyone, read by
/// the worker before each step) and the worker's time accounting.
#[derive(Debug)]
pub struct ThrottleCounters {
    duty_permille: AtomicU32,
    /// Time in task steps, in total.
    pub(crate) busy_ns: AtomicU64,
    /// Time the worker idled because of the throttle.
    pub(crate) throttled_ns: AtomicU64,
    /// Loaded periods (see the module docs) and their sums.
    pub(crate) loaded_periods: AtomicU64,
    pub(crate) loaded_busy_ns: AtomicU64,
    pub(crate) loaded_entitled_ns: AtomicU64,
}

impl Default for ThrottleCounters {
    fn default() -> Self {
        ThrottleCounters {
            duty_permille: AtomicU32::new(u32::from(Duty::FULL.per_mille())),
            busy_ns: AtomicU64::new(0),
            throttled_ns: AtomicU64::new(0),
            loaded_periods: AtomicU64::new(0),
            loaded_busy_ns: AtomicU64::new(0),
            loaded_entitled_ns: AtomicU64::new(0),
        }
    }
}

impl ThrottleCounters {
    pub fn duty(&self) -> Duty {
        Duty::from_per_mille(self.duty_permille.load(Ordering::Relaxed))
            .expect("only valid duties are stored")
    }

    /// Takes effect at the worker's next step (no wake-up needed: a
    /// throttled worker re-reads it when its period ends, at most one
    /// period later).
    pub fn set_duty(&self, d: Duty) {
        self.duty_permille.store(u32::from(d.per_mille()), Ordering::Relaxed);
    }

    /// Only the worker writes the time counters: no read-modify-write.
    fn add(counter: &AtomicU64, ns: u64) {
        counter.store(counter.load(Ordering::Relaxed).wrapping_add(ns), Ordering::Relaxed);
    }

    /// Busy time so far (time the worker ran what the duty limits).
    pub fn busy_ns(&self) -> u64 {
        self.busy_ns.load(Ordering::Relaxed)
    }

    /// Time idled because of the throttle so far.
    pub fn throttled_ns(&self) -> u64 {
        self.throttled_ns.load(Ordering::Relaxed)
    }

    pub fn report(&self, cpu: CpuId, period_ns: u64) -> DutyReport {
        let loaded_periods = self.loaded_periods.load(Ordering::Relaxed);
        DutyReport {
            cpu,
            duty: self.duty(),
            period_ns,
            busy_ns: self.busy_ns.load(Ordering::Relaxed),
            throttled_ns: self.throttled_ns.load(Ordering::Relaxed),
            loaded_periods,
            loaded_ns: loaded_periods.saturating_mul(period_ns),
            loaded_busy_ns: self.loaded_busy_ns.load(Ordering::Relaxed),
            loaded_entitled_ns: self.loaded_entitled_ns.load(Ordering::Relaxed),
        }
    }
}

/// How well one CPU kept its duty cycle (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct DutyReport {
    pub cpu: CpuId,
    /// The duty now.
    pub duty: Duty,
    pub period_ns: u64,
    /// Time in task steps, and time idled by the throttle, over the run.
    pub busy_ns: u64,
    pub throttled_ns: u64,
    /// Periods in which the CPU had work throughout, at one duty; their
    /// length, the busy time in them, and duty × length summed over them.
    pub loaded_periods: u64,
    pub loaded_ns: u64,
    pub loaded_busy_ns: u64,
    pub loaded_entitled_ns: u64,
}

impl DutyReport {
    /// Busy / elapsed over the loaded periods (`None`: none yet).
    pub fn measured(&self) -> Option<f64> {
        (self.loaded_ns > 0).then(|| self.loaded_busy_ns as f64 / self.loaded_ns as f64)
    }

    /// The duty those periods were entitled to (the set duty, averaged
    /// over them if it changed between periods).
    pub fn entitled(&self) -> Option<f64> {
        (self.loaded_ns > 0).then(|| self.loaded_entitled_ns as f64 / self.loaded_ns as f64)
    }

    /// Measured minus entitled, in percentage points.
    pub fn error_points(&self) -> Option<f64> {
        Some((self.measured()? - self.entitled()?) * 100.0)
    }
}

/// The worker's side: where it is in the current period.
#[derive(Debug)]
pub struct Throttle {
    period_ns: u64,
    period_start_ns: u64,
    busy_in_period_ns: u64,
    debt_ns: u64,
    /// The CPU has had work since the current period started.
    loaded: bool,
    /// The CPU has had work since the last [`Throttle::admit`].
    working: bool,
    /// The duty when the period started (a change makes it not count).
    duty: Duty,
}

impl Throttle {
    pub fn new(period_ns: u64, now_ns: u64) -> Throttle {
        assert!(period_ns > 0, "the throttle period must be positive");
        Throttle {
            period_ns,
            period_start_ns: now_ns,
            busy_in_period_ns: 0,
            debt_ns: 0,
            loaded: false,
            working: false,
            duty: Duty::FULL,
        }
    }

    /// Before a step at `now_ns` (the worker has work): `None` to run it
    /// now, `Some(t)` to idle until `t` (the end of the period).
    pub fn admit(&mut self, now_ns: u64, duty: Duty, out: &ThrottleCounters) -> Option<u64> {
        self.roll(now_ns, duty, out);
        self.working = true;
        if duty != self.duty {
            // Changed mid-period: takes effect now, the period does not count.
            self.duty = duty;
            self.loaded = false;
        }
        if duty == Duty::FULL {
            return None;
        }
        let budget = duty.of(self.period_ns);
        (self.busy_in_period_ns + self.debt_ns >= budget).then_some(self.period_start_ns + self.period_ns)
    }

    /// After a step of `busy_ns`.
    pub fn charge(&mut self, busy_ns: u64, out: &ThrottleCounters) {
        self.busy_in_period_ns += busy_ns;
        ThrottleCounters::add(&out.busy_ns, busy_ns);
    }

    /// After idling `ns` because of the throttle.
    pub fn throttled(&mut self, ns: u64, out: &ThrottleCounters) {
        ThrottleCounters::add(&out.throttled_ns, ns);
    }

    /// The worker waits for another reason (no work, offline, a barrier):
    /// the current period is not a loaded one.
    pub fn interrupted(&mut self) {
        self.loaded = false;
        self.working = false;
    }

    /// Closes the periods that ended by `now_ns` and starts the current one.
    fn roll(&mut self, now_ns: u64, duty: Duty, out: &ThrottleCounters) {
        let elapsed = now_ns.saturating_sub(self.period_start_ns);
        if elapsed < self.period_ns {
            return;
        }
        // Several periods pass at once after an idle spell, or under one
        // long step (then they were all worked, and count together).
        let periods = elapsed / self.period_ns;
        let budget = self.duty.of(self.period_ns).saturating_mul(periods);
        if self.loaded {
            ThrottleCounters::add(&out.loaded_periods, periods);
            ThrottleCounters::add(&out.loaded_busy_ns, self.busy_in_period_ns);
            ThrottleCounters::add(&out.loaded_entitled_ns, budget);
        }
        // Busy beyond the budget of the periods that passed is debt.
        self.debt_ns = (self.debt_ns + self.busy_in_period_ns).saturating_sub(budget);
        self.busy_in_period_ns = 0;
        self.period_start_ns += periods * self.period_ns;
        // Working without a break since the last admit, which was in an
        // earlier period: the new period started during the work.
        self.loaded = self.working;
        self.duty = duty;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 1_000_000;

    #[test]
    fn duty_accepts_table_2_and_refuses_the_rest() {
        for (pct, pm) in [(50.0, 500), (62.5, 625), (75.0, 750), (87.5, 875), (100.0, 1000)] {
            assert_eq!(Duty::from_percent(pct).unwrap().per_mille(), pm);
        }
        for bad in [0.0, -5.0, 100.5, f64::NAN, f64::INFINITY, 33.33] {
            assert!(Duty::from_percent(bad).is_err(), "{bad}");
        }
        assert!(Duty::from_per_mille(0).is_err() && Duty::from_per_mille(1001).is_err());
        assert_eq!(Duty::from_percent(62.5).unwrap().to_string(), "62.5%");
        assert_eq!(Duty::BASELINE.of(P), P / 2);
    }

    /// Drives the throttle like a worker that always has work, with steps
    /// of `step_ns` and exact sleeps; returns (busy, elapsed).
    fn simulate(duty: Duty, step_ns: u64, total_ns: u64) -> (u64, u64, ThrottleCounters) {
        let out = ThrottleCounters::default();
        let mut t = Throttle::new(P, 0);
        let (mut now, mut busy) = (0, 0);
        while now < total_ns {
            match t.admit(now, duty, &out) {
                None => {
                    now += step_ns;
                    busy += step_ns;
                    t.charge(step_ns, &out);
                }
                Some(until) => {
                    assert!(until > now, "idle until a future time");
                    t.throttled(until - now, &out);
                    now = until;
                }
            }
        }
        (busy, now, out)
    }

    #[test]
    fn busy_time_is_duty_times_elapsed_to_within_one_step() {
        for pm in [500, 625, 750, 875, 1000] {
            let duty = Duty::from_per_mille(pm).unwrap();
            for step in [7_000, 50_000, 333_000, 2_500_000] {
                let total = 200 * P;
                let (busy, elapsed, out) = simulate(duty, step, total);
                let want = duty.of(elapsed);
                assert!(busy.abs_diff(want) <= step, "{duty} step {step}: busy {busy}, want {want}");
                let r = out.report(0, P);
                if step < P {
                    assert!(r.loaded_periods > 150, "{duty} step {step}: {r:?}");
                    // Per-period sums are off by the debt of the last one.
                    assert!(r.loaded_busy_ns.abs_diff(r.loaded_entitled_ns) <= step, "{r:?}");
                    let (m, e) = (r.measured().unwrap(), r.entitled().unwrap());
                    assert_eq!(e, duty.percent() / 100.0, "{r:?}");
                    assert!((m - e).abs() * r.loaded_ns as f64 <= step as f64, "{r:?}");
                    assert!((r.error_points().unwrap() - (m - e) * 100.0).abs() < 1e-9);
                }
            }
        }
    }

    #[test]
    fn a_duty_change_takes_effect_at_the_next_step_and_voids_the_period() {
        let out = ThrottleCounters::default();
        let mut t = Throttle::new(P, 0);
        assert_eq!(t.admit(0, Duty::FULL, &out), None);
        t.charge(P / 2, &out);
        // Now at half a period, busy for all of it: at 50% it must idle.
        assert_eq!(t.admit(P / 2, Duty::BASELINE, &out), Some(P));
        assert_eq!(t.admit(P, Duty::BASELINE, &out), None);
        assert_eq!(out.loaded_periods.load(Ordering::Relaxed), 0, "the changed period does not count");
    }

    #[test]
    fn idle_periods_do_not_bank_budget_or_count() {
        let out = ThrottleCounters::default();
        let mut t = Throttle::new(P, 0);
        t.interrupted();
        // Ten idle periods, then work at 50%: the budget is one period's.
        assert_eq!(t.admit(10 * P + 1, Duty::BASELINE, &out), None);
        t.charge(P / 2, &out);
        assert_eq!(t.admit(10 * P + P / 2 + 1, Duty::BASELINE, &out), Some(11 * P));
        assert_eq!(out.loaded_periods.load(Ordering::Relaxed), 0);
    }
}
