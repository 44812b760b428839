//! `dyncore bench …`: benchmarks that report ratios against baselines measured
//! in the same run (these machines are shared and noisy), measured in
//! interleaved rounds ([`stats`]), and write a report (tables + plots) into
//! the report folder. `--strict` turns a goal's unexpected verdict into a
//! failing exit status ([`goal`]).

use std::path::Path;

use anyhow::Result;
use clap::Subcommand;

pub mod arbiter;
pub mod chart;
pub mod goal;
pub mod newtos;
pub mod reconfig;
pub mod sidecall;
pub mod sim;
pub mod stack;
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
pub fn run(cmd: &BenchCmd, out: &Path) -> Result<()> {
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
            (Some(dyncore::interrupt::CleanExit::install()), folder)
        }
        _ => (None, None),
    };
    let (name, gate, goals) = match cmd {
        BenchCmd::Sim(a) => ("sim", a.gate, sim::run(a, out)?),
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

/// Today's date (UTC) as YYYY-MM-DD, for reports and profiles.
pub fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date of a count of days since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`; no date crate is among the allowed
/// dependencies).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The first lines of every bench report: title, machine, date, command.
pub fn report_header(title: &str, machine: &str) -> String {
    format!("# {title}\n\nMachine: {machine}. Date: {}. Command: `{}`.\n\n", today(), command_line())
}

/// The command line that ran this process, for reports ("dyncore bench …").
pub fn command_line() -> String {
    let mut args = std::env::args();
    let exe = args
        .next()
        .map(|a| Path::new(&a).file_name().map_or(a.clone(), |f| f.to_string_lossy().into_owned()));
    exe.into_iter().chain(args).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(today().len(), 10);
    }
}
