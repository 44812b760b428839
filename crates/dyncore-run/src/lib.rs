//! dyncore's runs as a library: scenario files run on the simulator, live,
//! or with a policy as the kernel's scheduler (sched_ext), and their report
//! folders written ([`runner`]); one unmodified command run under a policy
//! on real CPUs ([`exec`]). The `dyncore` crate re-exports this API and
//! adds the command line; the sweep engine (`dyncore-sweep`) and the
//! benches (`dyncore-bench`) build on it.
//!
//! A run walks down one path: [`Runner`] loads and checks the scenario
//! files, runs each on its backend (`dyncore_sim`, `dyncore_live`, or the
//! `dyncore-scx` binary), and writes the report folder through
//! `dyncore_report`.

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

pub mod exec;
pub mod interrupt;
pub mod runner;
pub mod scx_binary;

pub use dyncore_core::policies::{Params, PolicyEntry, PolicyInfo, Registry, RunContext};
pub use dyncore_core::policy::{Action, Event, Policy};
pub use runner::{Backend, BadInput, Interrupted, NothingFinished, RunArgs, Runner};
