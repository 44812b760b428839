//! `dyncore run --backend live|both`: the scenario's runs on runtime CPUs,
//! driven by the same policy the simulator runs, every live figure beside
//! the simulator's prediction for the same scenario and seed.
//!
//! For each scenario:
//!
//! 1. scale it (`--time-scale`, `dyncore_live::scale`) and check the options — the
//!    real CPUs (`--real-cpus`, [`fit`]), the baseline duty
//!    (`--baseline-duty`: every duty the run's machine can ask for must
//!    stay in (0, 100%]) — refusing bad input before anything starts
//!    (exit status 2);
//! 2. predict it: the simulator runs the same scaled scenario and seed,
//!    charging every fuse and split the Bolt plans the live runtime
//!    executes (`reconfig = "runtime"`, from the machine profile),
//!    whatever mechanism the scenario names — the live backend has only
//!    that one;
//! 3. run each run live ([`run`]): runtime CPUs over the real ones,
//!    kernels calibrated, the policy driven by the live executor
//!    (`dyncore_runtime::backend`);
//! 4. turn every live run into a `RunResult` ([`result`]) and write the
//!    report ([`report`]) with the side-by-side table ([`compare`]).
//!
//! Ctrl-C, SIGTERM (as `timeout` or a service manager sends) and SIGHUP
//! alike stop the run in progress: every worker is stopped and joined, the
//! controller thread is put back under the normal scheduler, the report of
//! what ran is written marked INCOMPLETE, the index too, and the command
//! exits with status 128 + the signal (130, 143, 129). A live run creates
//! nothing outside its `--out` folder but threads; a SIGKILLed run's
//! half-written scenario folders are removed by the next run into it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use dyncore_core::speed::{Duty, SpeedClass};
use dyncore_core::topology::CoreKind;
use dyncore_runtime::arbiter::{Signals, interrupt_name};
use dyncore_runtime::backend::DutyScale;
use dyncore_runtime::machine::Machine;
use dyncore_sim::cost::Mechanism;
use dyncore_sim::machine::MachineSpec;
use dyncore_sim::{Scenario, ScenarioResult};
use indicatif::{ProgressBar, ProgressStyle};

use dyncore_live::commands::CommandOptions;
use dyncore_live::run::{self, LiveOptions, Outcome};
use dyncore_live::{compare, fit, report, result, scale};
use dyncore_scenario::load as scenarios;

pub use dyncore_live::report::Kind;

use super::{BadInput, RunArgs, Runner};

/// A run on real CPUs — a live run of a scenario, or the network stack
/// (`dyncore stack`) — was stopped by a signal (SIGINT, SIGTERM or SIGHUP),
/// after what `after` says was done (every worker stopped and joined and the
/// reports written; the streams closed, what the run created removed):
/// exit status 128 + the signal (130 for Ctrl-C, 143 for SIGTERM), as a
/// shell reports it.
#[derive(Debug)]
pub struct Interrupted {
    pub signal: i32,
    /// What was done before the exit, for the message.
    pub after: &'static str,
}

impl Interrupted {
    /// The exit status.
    pub fn status(&self) -> u8 {
        dyncore_runtime::arbiter::signal_status(self.signal)
    }
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted by {}: {}", dyncore_runtime::arbiter::interrupt_name(self.signal), self.after)
    }
}

impl std::error::Error for Interrupted {}

fn bad(file: &Path, message: impl Into<String>) -> anyhow::Error {
    BadInput(vec![scenarios::LoadError::new(file, message)]).into()
}

fn bad_option(message: String) -> anyhow::Error {
    bad(Path::new("dyncore run"), message)
}

/// The baseline duty of `--baseline-duty` (percent), checked against every
/// duty the scenarios' machines can ask for.
fn duty_scale(percent: Option<f64>, loaded: &[(PathBuf, Scenario)]) -> Result<DutyScale> {
    let Some(p) = percent else { return Ok(DutyScale::default()) };
    let baseline = Duty::from_percent(p)
        .map_err(|e| bad_option(format!("--baseline-duty {p}: {e} (a duty cycle is in (0, 100]%)")))?;
    let scale = DutyScale { baseline };
    for (path, s) in loaded {
        for (i, spec) in s.runs.iter().enumerate() {
            let m = MachineSpec::build(spec).expect("validated");
            for kind in [CoreKind::Little, CoreKind::Big] {
                for size in [1, 2, 4].into_iter().filter(|&k| k <= m.max_fuse) {
                    for class in [SpeedClass::Low, SpeedClass::Medium, SpeedClass::High] {
                        let d = m.speed.duty(kind, size, class);
                        if scale.apply(d).is_err() {
                            let pm = u32::from(d.per_mille()) * u32::from(baseline.per_mille()) / 500;
                            return Err(bad(
                                path,
                                format!(
                                    "--baseline-duty {p}: run[{i}] (`{}`) can ask for a {d} duty ({} \
                                     speed class on {size} CPU(s)), which becomes {:.1}%, outside (0, 100]%",
                                    spec.label,
                                    format!("{class:?}").to_lowercase(),
                                    f64::from(pm) / 10.0
                                ),
                            ));
                        }
                    }
                }
            }
        }
    }
    Ok(scale)
}

/// The scenario the simulator predicts a backend's run with: the same,
/// but every run reconfigures by `mechanism`, the one the backend has —
/// the live runtime's Bolt plans (`Runtime`, charged from the machine
/// profile), or the sched_ext backend's empty CPUs (`Free`: no hotplug).
pub(super) fn prediction_scenario(s: &Scenario, mechanism: Mechanism) -> Scenario {
    let mut p = s.clone();
    p.sim.reconfig = mechanism;
    for r in &mut p.runs {
        r.sim.reconfig = None;
    }
    p
}

/// What the prediction charged, in the report's words.
fn prediction_note(s: &Scenario) -> String {
    let named: Vec<&str> = std::iter::once(s.sim.reconfig)
        .chain(s.runs.iter().filter_map(|r| r.sim.reconfig))
        .filter(|m| *m != Mechanism::Runtime)
        .map(Mechanism::name)
        .collect();
    let mut note = String::from(
        " (its fuses and splits charged as the runtime's own Bolt plans, `reconfig = \"runtime\"`, from the \
         machine profile: the mechanism the live backend executes",
    );
    if !named.is_empty() {
        let mut named = named;
        named.dedup();
        note += &format!("; the scenario's `{}` is not available live", named.join("`, `"));
    }
    note.push(')');
    note
}

/// Scales every scenario by `--time-scale X` (see [`scale`]); bad input
/// (exit status 2) names the file when X cannot be used for it.
pub fn apply_time_scale(loaded: &mut [(PathBuf, Scenario)], x: Option<f64>) -> Result<()> {
    let Some(x) = x else { return Ok(()) };
    for (path, s) in loaded {
        *s = scale::scaled(s, x).map_err(|e| bad(path, e))?;
    }
    Ok(())
}

/// `dyncore run --backend live|both`.
pub fn run(runner: &Runner, args: &RunArgs, kind: Kind) -> Result<()> {
    let out = runner.out();
    if args.seeds.is_some_and(|n| n > 1) {
        return Err(bad_option(
            "--seeds: a live run is run with one seed (the scenario's, or --seed N); run it again with another \
             --seed for more"
                .into(),
        ));
    }
    let x = args.time_scale.unwrap_or(1.0);
    let mut inputs = super::load_inputs(runner.registry(), &args.files)?;
    if !args.files.is_empty() {
        super::refuse_for_nets(args, &inputs)?;
    } else if !inputs.nets.is_empty() {
        eprintln!(
            "note: the {} network-stack scenarios run on the simulator only and are left out (their live \
             counterpart is `dyncore stack`)",
            inputs.nets.len()
        );
    }
    let mut scaled = std::mem::take(&mut inputs.sims);
    for (_, s) in &mut scaled {
        if let Some(seed) = args.seed {
            s.seed = seed;
        }
    }
    apply_time_scale(&mut scaled, Some(x))?;
    let allowed =
        dyncore_runtime::affinity::allowed_cpus().context("reading this process's affinity mask")?;
    let real = fit::real_cpus(args.real_cpus.as_deref(), &allowed).map_err(bad_option)?;
    let duty_scale = duty_scale(args.baseline_duty, &scaled)?;
    let machine = Machine::detect().context("reading the machine's topology from /sys")?;
    for (path, sc) in scaled.iter().filter(|(_, s)| s.has_commands()) {
        dyncore_live::commands_scenario::check(path, inputs.text(path), sc, &real, args.time_scale)
            .map_err(|e| BadInput(vec![e]))?;
    }
    let command_opts =
        CommandOptions { real: real.clone(), duty_scale, weight: dyncore_live::commands::COMMAND_WEIGHT };
    let opts = LiveOptions { real, duty_scale, machine: machine.topology };
    // SIGINT, SIGTERM and SIGHUP alike stop the run in progress.
    let signals = Signals::install().context("installing the signal handlers")?;
    let _held = super::open_out(out)?;
    let description = dyncore_report::machine::machine_description();
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}").expect("static template"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let mut written = Vec::new();
    let mut interrupted = false;
    for (path, sc) in &scaled {
        let modelled = sc.unmodelled_command().is_none();
        let predicted = if modelled {
            Some(
                dyncore_sim::run_quietly(&prediction_scenario(sc, Mechanism::Runtime))
                    .map_err(|e| super::budget_error(path, inputs.text(path), &e, &written))?,
            )
        } else {
            None
        };
        if sc.has_commands() {
            let backend = if kind == Kind::Both { "both" } else { "live" };
            let ran = run_commands(
                out,
                (path, sc),
                predicted.as_ref(),
                &command_opts,
                backend,
                args.quiet,
                &signals,
                &bar,
            )?;
            written.push(ran.written);
            if ran.interrupted {
                interrupted = true;
                break;
            }
            continue;
        }
        let predicted = predicted.expect("a scenario of built-in programs is simulated");
        let (live, incomplete) = run_live(sc, &opts, &signals, &bar)?;
        let live_result = ScenarioResult {
            name: sc.name.clone(),
            title: sc.title.clone(),
            seed: sc.seed,
            runs: live.iter().map(|o| result::run_result(sc, o)).collect(),
        };
        interrupted |= live.iter().any(|o| o.outcome == Outcome::Interrupted);
        let r = report::LiveReport {
            kind,
            source: path,
            scenario: sc,
            time_scale: x,
            machine: description.clone(),
            live: &live,
            live_result: &live_result,
            predicted: &predicted,
            incomplete,
            prediction_note: prediction_note(sc),
        };
        let w = report::write(out, &r).with_context(|| format!("writing the report of {}", sc.name))?;
        if !args.quiet {
            bar.suspend(|| print_scenario(&r));
        }
        written.push(w);
        if interrupted {
            break;
        }
    }
    bar.finish_and_clear();
    dyncore_report::report::write_index(out, &written, &what_ran(args, kind, out))?;
    say!("Report: {} (and index.md)", out.join("index.html").display());
    if interrupted {
        let signal = signals.received().map_or(libc::SIGINT, |r| r.signal);
        let after = "every worker stopped; the report of what ran is marked INCOMPLETE";
        return Err(Interrupted { signal, after }.into());
    }
    Ok(())
}

/// A scenario of commands, live (`dyncore_live::commands_scenario`: one
/// call), its table and warnings printed unless `quiet`.
#[allow(clippy::too_many_arguments)]
fn run_commands(
    out: &Path,
    (path, sc): (&PathBuf, &Scenario),
    predicted: Option<&ScenarioResult>,
    opts: &CommandOptions,
    backend: &str,
    quiet: bool,
    signals: &Signals,
    bar: &ProgressBar,
) -> Result<dyncore_live::commands_scenario::Ran> {
    let tell = |m: String| bar.set_message(format!("{} live — {m}", sc.name));
    let ran = dyncore_live::commands_scenario::run(
        out,
        path,
        sc,
        predicted,
        opts,
        backend,
        signals.stop_flag(),
        &tell,
    )?;
    if !quiet {
        bar.suspend(|| {
            say!("\n{}", ran.table);
            for w in &ran.warnings {
                say!("{w}");
            }
        });
    }
    Ok(ran)
}

/// Every run of `sc` live, in order, until one is stopped by a signal or
/// an error; and why the report is incomplete, if it is.
fn run_live(
    sc: &Scenario,
    opts: &LiveOptions,
    signals: &Signals,
    bar: &ProgressBar,
) -> Result<(Vec<run::LiveRunOutput>, Option<String>)> {
    let mut live = Vec::new();
    for i in 0..sc.runs.len() {
        let tell = |m: String| bar.set_message(format!("{} live — {m}", sc.name));
        let o = run::run(sc, i, opts, signals.stop_flag(), &tell).map_err(anyhow::Error::msg)?;
        let stopped = match &o.outcome {
            Outcome::Interrupted => {
                let by = signals.received().map_or(libc::SIGINT, |r| r.signal);
                Some(format!("interrupted by {} during run `{}`", interrupt_name(by), sc.runs[i].label))
            }
            Outcome::Failed(e) => Some(format!("run `{}` failed: {e}", sc.runs[i].label)),
            Outcome::Finished | Outcome::TimedOut => None,
        };
        live.push(o);
        if let Some(why) = stopped {
            let left = sc.runs.len() - i - 1;
            let why = if left > 0 { format!("{why}; the {left} run(s) after it did not run") } else { why };
            return Ok((live, Some(why)));
        }
    }
    Ok((live, None))
}

fn print_scenario(r: &report::LiveReport<'_>) {
    let sc = r.scenario;
    let (live_fig, sides, _) = report::comparison(r);
    let mut table = compare::side_table(live_fig.x_name, &sides);
    table.title = format!("{} — {} (live, time scale {}, seed {})", sc.name, sc.title, r.time_scale, sc.seed);
    say!("\n{}", table.to_terminal());
    say!("{}.", compare::agreement_sentence(&sides));
    if let Some(why) = &r.incomplete {
        say!("INCOMPLETE: {why}");
    }
    for o in r.live.iter().filter(|o| o.fit.oversubscribed) {
        say!("OVERSUBSCRIBED: run `{}`: {}", sc.runs[o.index].label, o.fit.crowded());
    }
    for o in r.live {
        if let Some(cpus) = compare::contended_cpus(&o.run.duty) {
            say!("CONTENDED: run `{}`: {cpus}", sc.runs[o.index].label);
        }
    }
}

/// The first line of index.md.
fn what_ran(args: &RunArgs, kind: Kind, out: &Path) -> String {
    let mut files: Vec<String> = args.files.iter().map(|f| format!(" {}", f.display())).collect();
    if out != Path::new("out") {
        files.push(format!(" --out {}", out.display()));
    }
    let backend = if kind == Kind::Both { "both" } else { "live" };
    let scale = args.time_scale.map(|x| format!(" --time-scale {x}")).unwrap_or_default();
    let which = if args.files.is_empty() { "Every shipped scenario" } else { "Scenarios" };
    format!(
        "{which} run live on this machine's runtime CPUs, beside the simulator's prediction (`cargo run \
         --release -- run --backend {backend}{scale}{}`).",
        files.concat()
    )
}
