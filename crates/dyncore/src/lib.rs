//! dyncore as a library: run scenarios with the built-in policies and your
//! own, on the simulator and live, and write the reports — what the
//! `dyncore` command does, for a program of its own.
//!
//! The small public API:
//!
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
//! registers it and runs a scenario on both backends through this API;
//! docs/writing-a-policy.md walks through it. The crates below are
//! re-exported for everything else: [`core`] (policies and mechanisms),
//! [`scenario`] (scenario files, the workload plan, the run record),
//! [`sim`] (the simulator), [`live`] (the live backend), [`report`].

/// `println!` that never panics: when stdout is a closed pipe (`dyncore run |
/// head`), the line is dropped and the work goes on, so reports are still
/// written whole. (`println!` panics on a broken pipe.)
#[doc(hidden)]
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

pub mod interrupt;
pub mod runner;
pub mod scx_binary;
pub mod sweep;

pub use dyncore_core as core;
pub use dyncore_core::policies::{Params, PolicyEntry, PolicyInfo, Registry, RunContext};
pub use dyncore_core::policy::{Action, Event, Policy};
pub use dyncore_live as live;
pub use dyncore_report as report;
pub use dyncore_runtime as runtime;
pub use dyncore_scenario as scenario;
pub use dyncore_sim as sim;
pub use runner::{Backend, BadInput, Interrupted, NothingFinished, RunArgs, Runner};
