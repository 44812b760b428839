//! dyncore-scenario: what every backend needs from a scenario, below both
//! the simulator (`dyncore-sim`) and the live runtime (`dyncore-live`).
//!
//! * [`scenario`]: scenario files, their validation with errors that name
//!   the field by path, and their limits; [`load`]: finding and reading
//!   them, with errors that name the file, the line and column;
//! * [`machine`]: the machines a run names (topology, speed model, fusion);
//! * [`workload`] and [`programs`]: the Table 3 programs and the plan of a
//!   run's program instances (when, how much work, which [`ThreadSpec`]);
//! * [`policy`]: a run's policy from the registry, and what its declared
//!   capabilities say about the run;
//! * [`cost`]: the reconfiguration mechanisms and their costs;
//! * [`record`] and [`result`]: what a run produces, whichever backend ran
//!   it, built from the policy's events and actions alone;
//! * [`claims`]: the paper's claims as checks against a scenario's figures,
//!   and their verdicts, for every scenario kind and both backends.
//!
//! [`ThreadSpec`]: dyncore_core::policy::ThreadSpec

pub mod claims;
pub mod cost;
pub mod load;
pub mod machine;
pub mod policy;
mod profiles;
pub mod programs;
pub mod record;
pub mod result;
pub mod scenario;
pub mod workload;

pub use result::{
    AllocSample, CpuStats, EnergyStats, PolicyTrace, ProgramResult, ReconfigStats, RunResult, ScenarioResult,
    TraceEvent,
};
pub use scenario::{Scenario, ScenarioError};
