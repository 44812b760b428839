//! dyncore's benchmarks (`dyncore bench …`) and the `stack` command
//! ([`stack_cmd`]), as a library the command line calls.
//!
//! `dyncore bench …`: benchmarks that report ratios against baselines measured
//! in the same run (these machines are shared and noisy), measured in
//! interleaved rounds ([`stats`]), and write a report (tables + plots) into
//! the report folder. `--strict` turns a goal's unexpected verdict into a
//! failing exit status ([`goal`]).

use std::path::Path;

use anyhow::Result;
use clap::Subcommand;
use dyncore_core::policies::Registry;

#[macro_use]
extern crate dyncore_run;

pub mod arbiter;
pub mod chart;
pub mod goal;
pub mod newtos;
pub mod reconfig;
pub mod sidecall;
pub mod sim;
pub mod stack;
pub mod stack_cmd;
pub mod stats;

pub use goal::{Gate, Goal, goals_table};
pub use stats::{RoundSamples, RoundSpread, Spread, ns, percentile, round_order};

#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// Simulator speed: events and scheduler decisions per second.
    Sim(sim::Args),
    /// Sidecalls against traps, futexes, pipes and peer queues, on this machine.
    Sidecall(sidecall::Args),
    /// Runtime CPU offline/online (naive vs Bolt) against Linux hotplug, cpusets, affinity.
    Reconfig(reconfig::Args),
    /// TCP streams: Linux loopback (B0) and the monolithic smoltcp stack (B1), in interleaved rounds.
    Stack(stack::Args),
    /// NewtOS at scale in the simulator: 64 stacks, 1024 CPUs, a diurnal load; energy and simulator speed.
    Newtos(newtos::Args),
    /// The arbiter's cost to a real program (overhead at 100% duty against alone), actuation delays, discovery.
    Arbiter(arbiter::Args),
}

/// Runs a bench; with `--strict`, fails when a goal's verdict is not the
/// expected one (after the report is written, so nothing is lost).
pub fn run(cmd: &BenchCmd, out: &Path, registry: &Registry) -> Result<()> {
    // A signal ends a bench that has nothing to restore at once, removing
    // what it was writing and its folder if still empty (module
    // `interrupt`); reconfig restores offlined CPUs itself, and the
    // arbiter's runs are ended by their wardens.
    let (_clean_exit, _folder) = match cmd {
        BenchCmd::Sim(_) | BenchCmd::Sidecall(_) | BenchCmd::Stack(_) | BenchCmd::Newtos(_) => {
            let name = match cmd {
                BenchCmd::Sim(_) => "sim",
                BenchCmd::Sidecall(_) => "sidecall",
                BenchCmd::Stack(_) => "stack",
                _ => "newtos",
            };
            let dir = out.join(format!("bench-{name}"));
            let folder = (!dir.exists()).then(|| dyncore_report::outdir::InProgress::empty_folder(&dir));
            (Some(dyncore_run::interrupt::CleanExit::install()), folder)
        }
        _ => (None, None),
    };
    let (name, gate, goals) = match cmd {
        BenchCmd::Sim(a) => ("sim", a.gate, sim::run(a, out, registry)?),
        BenchCmd::Sidecall(a) => ("sidecall", a.gate, sidecall::run(a, out)?),
        BenchCmd::Reconfig(a) => ("reconfig", a.gate, reconfig::run(a, out)?),
        BenchCmd::Stack(a) => ("stack", a.gate, stack::run(a, out)?),
        BenchCmd::Newtos(a) => ("newtos", a.gate, newtos::run(a, out)?),
        BenchCmd::Arbiter(a) => ("arbiter", a.gate, arbiter::run(a, out)?),
    };
    if gate.strict { goal::strict_check(name, &goals) } else { Ok(()) }
}

pub use dyncore_report::machine::{cpu_has_flag, machine_description};

/// A count of at least 1 (`--rounds`): anything else is refused by the
/// argument parser, exit 2, before any folder is made.
pub(crate) fn at_least_one(s: &str) -> Result<usize, String> {
    crate::stack_cmd::whole::<1, { u64::MAX }>(s).map(|n| n as usize)
}

pub use dyncore_report::machine::{command_line, report_header, today};
