//! `dyncore run --backend live|both` on a scenario whose workloads name
//! commands, as one call from the runner: [`check`] refuses bad input
//! before anything starts (a command not found, a run with more CPUs than
//! there are real ones, `--time-scale`: exit 2 in the runner), and [`run`]
//! takes the steps of [`crate::commands`] in order (each command alone,
//! each mix's Linux baseline, the runs under the arbiter, each command
//! alone again), builds the live result and writes the report
//! ([`crate::commands_report`]), returning what the terminal shows.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::Result;
use dyncore_core::CpuSet;
use dyncore_report::report::Written;
use dyncore_scenario::load::{self as scenarios, LoadError};
use dyncore_sim::{Scenario, ScenarioResult};

use crate::commands::{self, CommandOptions, CommandRunOutput};
use crate::commands_report::{self, AloneTimes, CommandReport, OsRun};
use crate::run::Outcome;

/// Refuses, before anything starts, what a scenario of commands cannot run
/// with (located in the file where it is the file's).
pub fn check(
    path: &Path,
    text: &str,
    sc: &Scenario,
    real: &CpuSet,
    time_scale: Option<f64>,
) -> Result<(), LoadError> {
    if let Err(e) = commands::check_commands(sc) {
        return Err(scenarios::error_in(path, text, &e.path, e.message));
    }
    if time_scale.is_some_and(|x| x != 1.0) {
        return Err(LoadError::new(
            path,
            "--time-scale: a scenario of commands cannot be scaled (a real program takes the time it takes); \
             leave the flag out",
        ));
    }
    if let Some(i) = sc.runs.iter().position(|r| !r.has_commands()) {
        let at = ["run".to_string(), i.to_string()];
        let m = "a scenario whose runs name commands runs all its runs under the arbiter: every run's workloads \
                 are commands (put the built-in programs in a scenario of their own)";
        return Err(scenarios::error_in(path, text, &at, m.into()));
    }
    for i in 0..sc.runs.len() {
        commands::real_for(sc, i, real).map_err(|m| LoadError::new(path, m))?;
    }
    Ok(())
}

/// Every distinct argv of a scenario of commands, in order of first use
/// (each is measured alone once).
pub fn distinct_commands(sc: &Scenario) -> Vec<Vec<String>> {
    let mut distinct: Vec<Vec<String>> = Vec::new();
    for w in sc.runs.iter().flat_map(|r| &r.workloads) {
        let argv = w.command.clone().expect("checked: commands");
        if !distinct.contains(&argv) {
            distinct.push(argv);
        }
    }
    distinct
}

/// What one scenario of commands gave.
pub struct Ran {
    pub written: Written,
    pub interrupted: bool,
    /// The programs table, for the terminal.
    pub table: String,
    /// Why the report is incomplete, and the commands whose time alone
    /// moved (one line each: `INCOMPLETE: …`, `UNSTEADY: …`).
    pub warnings: Vec<String>,
}

/// Runs scenario `sc` of commands live and writes its report; `tell`
/// hears each step as it starts (the runner's progress line).
#[allow(clippy::too_many_arguments)]
pub fn run(
    out: &Path,
    path: &PathBuf,
    sc: &Scenario,
    predicted: Option<&ScenarioResult>,
    opts: &CommandOptions,
    backend: &str,
    stop: &AtomicBool,
    tell: &dyn Fn(String),
) -> Result<Ran> {
    let first_cpu = opts.real.first().expect("checked: at least one real CPU");
    let distinct = distinct_commands(sc);
    let mut alone: Vec<AloneTimes> = Vec::new();
    let mut incomplete = None;
    for argv in &distinct {
        tell(format!("`{}` alone", argv.join(" ")));
        match commands::measure_alone(sc, argv, first_cpu, opts, stop).map_err(anyhow::Error::msg)? {
            Some(ns) => alone.push(AloneTimes { argv: argv.clone(), before_ns: ns, after_ns: None }),
            None => {
                incomplete =
                    Some("interrupted (Ctrl-C or SIGTERM) while measuring the commands alone".to_string());
                break;
            }
        }
    }
    let mut live: Vec<CommandRunOutput> = Vec::new();
    let mut os: Vec<OsRun> = Vec::new();
    if incomplete.is_none() {
        incomplete = run_all(sc, opts, stop, tell, &mut live, &mut os)?;
    }
    if incomplete.is_none() {
        for a in &mut alone {
            tell(format!("`{}` alone, again", a.argv.join(" ")));
            a.after_ns =
                commands::measure_alone(sc, &a.argv, first_cpu, opts, stop).map_err(anyhow::Error::msg)?;
        }
    }
    let live_result = ScenarioResult {
        name: sc.name.clone(),
        title: sc.title.clone(),
        seed: sc.seed,
        runs: live
            .iter()
            .map(|o| {
                let work: Vec<f64> = o
                    .programs
                    .iter()
                    .map(|p| {
                        let argv = p.command.as_ref().expect("commands");
                        alone.iter().find(|a| &a.argv == argv).map_or(0.0, AloneTimes::work_ns)
                    })
                    .collect();
                commands::run_result(sc, o, &work)
            })
            .collect(),
    };
    let interrupted = live.iter().any(|o| o.outcome == Outcome::Interrupted) || incomplete.is_some();
    let r = CommandReport {
        source: path,
        scenario: sc,
        machine: dyncore_report::machine::machine_description(),
        alone: &alone,
        live: &live,
        live_result: &live_result,
        os: &os,
        predicted,
        incomplete,
        backend,
    };
    let written = commands_report::write(out, &r)?;
    let mut warnings: Vec<String> = r.incomplete.iter().map(|why| format!("INCOMPLETE: {why}")).collect();
    warnings.extend(alone.iter().filter(|a| a.unsteady()).map(|a| {
        format!(
            "UNSTEADY: `{}` alone took {:.0} ms before the runs and {:.0} ms after; run it again",
            a.argv.join(" "),
            a.before_ns as f64 / 1e6,
            a.after_ns.unwrap_or_default() as f64 / 1e6
        )
    }));
    let table = commands_report::programs_table(&r).to_terminal();
    Ok(Ran { written, interrupted, table, warnings })
}

/// Every run, each mix's Linux baseline before its first run; why the
/// report is incomplete, if it is.
fn run_all(
    sc: &Scenario,
    opts: &CommandOptions,
    stop: &AtomicBool,
    tell: &dyn Fn(String),
    live: &mut Vec<CommandRunOutput>,
    os: &mut Vec<OsRun>,
) -> Result<Option<String>> {
    for i in 0..sc.runs.len() {
        let label = &sc.runs[i].label;
        let mix = commands::mix_of(sc, i);
        if !os.iter().any(|b| commands::mix_of(sc, b.index) == mix) {
            tell(format!("run `{label}`'s commands with no dyncore"));
            match commands::os_baseline(sc, i, opts, stop).map_err(anyhow::Error::msg)? {
                (Some(runs), notes) => os.push(OsRun { index: i, runs, notes }),
                (None, _) => {
                    return Ok(Some(format!(
                        "interrupted (Ctrl-C or SIGTERM) during the Linux baseline of `{label}`"
                    )));
                }
            }
        }
        let o = commands::run(sc, i, opts, stop, tell).map_err(anyhow::Error::msg)?;
        let stopped = match &o.outcome {
            Outcome::Interrupted => Some(format!("interrupted (Ctrl-C or SIGTERM) during run `{label}`")),
            Outcome::Failed(e) => Some(format!("run `{label}` failed: {e}")),
            Outcome::Finished | Outcome::TimedOut => None,
        };
        live.push(o);
        if stopped.is_some() {
            return Ok(stopped);
        }
    }
    Ok(None)
}
