//! dyncore-sim: a deterministic discrete-event simulator of dynamic multicore
//! processors, driving the policies of `dyncore-core` in virtual time.
//!
//! Determinism: virtual nanoseconds only (no wall clock), one event queue
//! ordered by (time, sequence number), one seeded ChaCha generator. The same
//! scenario and seed give the same bytes out.

pub mod cost;
pub mod engine;
pub mod machine;
mod profiles;
pub mod reconfigure;
pub mod result;
pub mod scenario;
pub mod workload;

pub use result::{
    AllocSample, CpuStats, PolicyTrace, ProgramResult, ReconfigStats, RunResult, ScenarioResult, TraceEvent,
};
pub use scenario::{Scenario, ScenarioError};

/// Runs every run of `scenario` in order, calling `progress(done, total)`
/// after each. The scenario must have passed [`Scenario::validate`].
pub fn run_scenario(scenario: &Scenario, progress: &mut dyn FnMut(usize, usize)) -> ScenarioResult {
    let total = scenario.runs.len();
    let mut runs = Vec::with_capacity(total);
    for i in 0..total {
        runs.push(run_one(scenario, i));
        progress(i + 1, total);
    }
    ScenarioResult { name: scenario.name.clone(), title: scenario.title.clone(), seed: scenario.seed, runs }
}

/// Runs run `index` of `scenario`.
pub fn run_one(scenario: &Scenario, index: usize) -> RunResult {
    engine::run(scenario, index)
}
