//! dyncore as a library: run scenarios with the built-in policies and your
//! own, on the simulator and live, and write the reports — what the
//! `dyncore` command does, for a program of its own.
//!
//! The small public API:
//!
//! * [`cli::main`]: the whole `dyncore` command (run, check, exec, sweep,
//!   bench, stack, policies, topology, vm) with the policies of a
//!   [`Registry`]. An out-of-tree crate that defines a policy builds its
//!   own full `dyncore` with one line, as scx users build their own
//!   scheduler binary: `fn main() -> ExitCode { dyncore::cli::main(Registry::builtin().with(&MINE)) }`;
//! * [`Runner`]: runs scenario files on a backend ([`Backend`]) with the
//!   policies of a [`Registry`], and writes the report folder;
//! * [`Registry`] (with [`PolicyEntry`], [`PolicyInfo`], [`RunContext`],
//!   [`Params`]): the policies a scenario may name;
//! * [`Policy`] and its [`Event`]s and [`Action`]s: the one seam between a
//!   policy and the backends;
//! * [`sweep`]: design-space sweeps over a grid of a scenario's fields
//!   (`dyncore sweep`), their table as Arrow, Parquet and CSV.
//!
//! `examples/custom-policy/` is a crate of its own that defines a policy,
//! registers it, runs a scenario on both backends through this API, and
//! builds a full `dyncore` with its policy in it; docs/writing-a-policy.md
//! walks through it.
//!
//! The work is done by library crates this one re-exports:
//! `dyncore-run` ([`runner`], [`exec`]), `dyncore-sweep` ([`sweep`]) and
//! `dyncore-bench` ([`bench`](mod@bench)); and below them [`core`] (policies and
//! mechanisms), [`scenario`] (scenario files, the workload plan, the run
//! record), [`sim`] (the simulator), [`live`] (the live backend),
//! [`report`]. This crate is only the command line.

pub mod cli;

#[doc(hidden)]
pub use dyncore_run::say;

pub use dyncore_bench as bench;
pub use dyncore_core as core;
pub use dyncore_core::policies::{Params, PolicyEntry, PolicyInfo, Registry, RunContext};
pub use dyncore_core::policy::{Action, Event, Policy};
pub use dyncore_live as live;
pub use dyncore_report as report;
pub use dyncore_run::{Backend, BadInput, Interrupted, NothingFinished, RunArgs, Runner};
pub use dyncore_run::{exec, interrupt, runner, scx_binary};
pub use dyncore_runtime as runtime;
pub use dyncore_scenario as scenario;
pub use dyncore_sim as sim;
pub use dyncore_sweep as sweep;
