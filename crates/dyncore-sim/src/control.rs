//! What a caller controls and sees of a run while it goes: progress reports
//! every so many events, and the event budget (`[sim] max_events`) that stops
//! a run which would otherwise go on for hours.
//!
//! Progress is for people watching (a progress bar on stderr); nothing of it
//! reaches the results, so results stay a function of scenario and seed.

use std::fmt;

use dyncore_core::Nanos;

/// A snapshot of the run in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunProgress {
    /// Which run of the scenario, from 0, and how many it has.
    pub run: usize,
    pub runs: usize,
    /// Virtual time reached, and where the run stops at the latest.
    pub now_ns: Nanos,
    pub max_time_ns: Nanos,
    /// Events processed, and the budget.
    pub events: u64,
    pub max_events: u64,
    /// The run is over (a last report is sent when it ends).
    pub done: bool,
}

/// How often to report progress, and to whom.
pub struct Watch<'a> {
    /// Report every `every_events` events (a power of two keeps the check a
    /// mask; 0 = only when a run ends).
    pub every_events: u64,
    pub report: &'a mut dyn FnMut(&RunProgress),
}

impl Watch<'_> {
    /// Events between reports when a progress bar is shown: about a hundred
    /// reports per wall second at the simulator's speed, few enough to cost
    /// nothing measurable.
    pub const EVERY: u64 = 1 << 16;
}

impl fmt::Debug for Watch<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch").field("every_events", &self.every_events).finish_non_exhaustive()
    }
}

/// A run stopped at its event budget. Nothing of it is reported: a run cut
/// short there is not a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventBudgetExceeded {
    /// Index and label of the run.
    pub run: usize,
    pub label: String,
    /// The budget, and the virtual time the run had reached.
    pub max_events: u64,
    pub now_ns: Nanos,
    pub max_time_ns: Nanos,
    /// The run sets its own budget in `[run.sim]` (else `[sim]`'s applies).
    pub run_overrides: bool,
}

impl EventBudgetExceeded {
    /// The field to change: the run's own `[run.sim] max_events` if it sets
    /// one, else the scenario's `[sim] max_events`.
    pub fn field(&self) -> Vec<String> {
        if self.run_overrides {
            vec!["run".into(), self.run.to_string(), "sim".into(), "max_events".into()]
        } else {
            vec!["sim".into(), "max_events".into()]
        }
    }
}

impl fmt::Display for EventBudgetExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "run[{}] `{}` stopped at its event budget of {} events, at virtual time {:.3} s of at most {:.3} s; \
             raise `max_events` in [sim] (or in the run's [run.sim]), or shorten the run \
             (max_time_ns, work_ms, count, tick_ns, ipi_rate_per_cpu_s)",
            self.run,
            self.label,
            self.max_events,
            self.now_ns as f64 / 1e9,
            self.max_time_ns as f64 / 1e9,
        )
    }
}

impl std::error::Error for EventBudgetExceeded {}
