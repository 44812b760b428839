//! dyncore-sim: a deterministic discrete-event simulator of dynamic multicore
//! processors, driving the policies of `dyncore-core` in virtual time.
//!
//! Determinism: virtual nanoseconds only (no wall clock), one event queue
//! ordered by (time, sequence number), one seeded ChaCha generator. The same
//! scenario and seed give the same bytes out.

pub mod control;
pub mod engine;
pub mod executed;
pub mod large_mix;
pub mod memory;
pub mod netstack;
mod queue;
pub mod reconfigure;
pub mod seeds;

// What the simulator shares with the live backend lives below both, in
// dyncore-scenario; re-exported under its old paths.
pub use dyncore_scenario::{claims, cost, machine, programs, result, scenario, workload};

pub use control::{EventBudgetExceeded, RunProgress, Watch};
pub use dyncore_scenario::{
    AllocSample, CpuStats, PolicyTrace, ProgramResult, ReconfigStats, RunResult, Scenario, ScenarioError,
    ScenarioResult, TraceEvent,
};

/// Runs every run of `scenario` in order, reporting progress to `watch`
/// (within each run, and once as each run ends). The scenario must have
/// passed [`Scenario::validate`]. Stops at the first run that exceeds its
/// event budget.
pub fn run_scenario(
    scenario: &Scenario,
    watch: &mut Watch<'_>,
) -> Result<ScenarioResult, EventBudgetExceeded> {
    let total = scenario.runs.len();
    let mut runs = Vec::with_capacity(total);
    for i in 0..total {
        runs.push(engine::run(scenario, i, watch)?);
    }
    Ok(ScenarioResult {
        name: scenario.name.clone(),
        title: scenario.title.clone(),
        seed: scenario.seed,
        runs,
    })
}

/// Runs run `index` of `scenario`, without progress reports.
pub fn run_one(scenario: &Scenario, index: usize) -> Result<RunResult, EventBudgetExceeded> {
    engine::run(scenario, index, &mut Watch { every_events: 0, report: &mut |_| {} })
}

/// [`run_scenario`] without progress reports.
/// Runs run `index` with its policy traffic recorded and what it executed
/// held against it (`engine::run_checked`).
pub fn run_checked(
    scenario: &Scenario,
    index: usize,
) -> Result<(RunResult, dyncore_core::policy::execution::Verdict), EventBudgetExceeded> {
    engine::run_checked(scenario, index)
}

pub fn run_quietly(scenario: &Scenario) -> Result<ScenarioResult, EventBudgetExceeded> {
    run_scenario(scenario, &mut Watch { every_events: 0, report: &mut |_| {} })
}
