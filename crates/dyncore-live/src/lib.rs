//! dyncore-live: a scenario's runs on runtime CPUs of this machine, driven
//! by the policy the simulator runs (from the registry), each run turned
//! into a `RunResult` by the record both backends share, and every live
//! figure set beside the simulator's prediction.
//!
//! * [`fit`]: where a run's CPUs go on the real ones, and whether they fit;
//! * [`kernels`]: the Table 3 programs as calibrated compute kernels;
//! * [`run`]: one run live: runtime, calibration, the executor, the programs;
//! * [`result`]: a live run as a `RunResult`;
//! * [`scale`]: a scenario made shorter or longer (`--time-scale`);
//! * [`compare`] and [`report`]: the side-by-side table and the report;
//! * [`actuation`]: what each run really executed, the actuation delays;
//! * [`commands`] and [`commands_report`]: runs whose workloads name real
//!   programs (`command = [...]`), under the arbiter, and their report.

pub mod actuation;
pub mod commands;
pub mod commands_report;
pub mod commands_scenario;
pub mod compare;
pub mod fit;
pub mod fused;
pub mod kernels;
pub mod report;
pub mod result;
pub mod run;
pub mod scale;
#[cfg(test)]
mod tests;
