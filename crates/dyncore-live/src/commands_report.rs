//! The report of a scenario of commands (`crate::commands`): per program
//! its completion and speedup under each run's policy, beside the Linux
//! baseline (no dyncore) and, where the scenario gives models, the
//! simulator's prediction; each command alone at the baseline duty (the
//! denominator); each run's arbiter summary (mechanism, actuation delays,
//! the execution check). Written aside and renamed into place whole, as
//! every report folder.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use dyncore_report::figure::Figure;
use dyncore_report::html::Ran;
use dyncore_report::model::{Model, Options};
use dyncore_report::report::{Written, render_plots, runs_table, write_file};
use dyncore_report::table::Table;
use dyncore_runtime::arbiter::AloneRun;
use dyncore_scenario::{Scenario, ScenarioResult};
use serde::Serialize;

use crate::commands::CommandRunOutput;
use crate::report::{Section, commit, write_traffic};
use crate::run::Outcome;

/// One command alone at the baseline duty: before and after the runs.
#[derive(Debug, Clone, Serialize)]
pub struct AloneTimes {
    pub argv: Vec<String>,
    pub before_ns: u64,
    pub after_ns: Option<u64>,
}

impl AloneTimes {
    /// Before and after differ by more than a fifth of the shorter: the
    /// machine was not the same for both.
    pub fn unsteady(&self) -> bool {
        self.after_ns.is_some_and(|a| {
            let (lo, hi) = (a.min(self.before_ns), a.max(self.before_ns));
            (hi - lo) * 5 > lo
        })
    }

    /// What the runs are measured against: the mean of the two (or the
    /// one, if the run stopped before the second).
    pub fn work_ns(&self) -> f64 {
        match self.after_ns {
            Some(a) => (self.before_ns + a) as f64 / 2.0,
            None => self.before_ns as f64,
        }
    }
}

/// The Linux baseline of one run's mix (no dyncore), per program.
#[derive(Debug, Clone)]
pub struct OsRun {
    /// The run whose mix it is.
    pub index: usize,
    pub runs: Vec<AloneRun>,
    /// How they ran (their weight, or why not).
    pub notes: Vec<String>,
}

/// Everything a command scenario's report shows.
pub struct CommandReport<'a> {
    pub source: &'a Path,
    pub scenario: &'a Scenario,
    pub machine: String,
    pub alone: &'a [AloneTimes],
    pub live: &'a [CommandRunOutput],
    pub live_result: &'a ScenarioResult,
    /// Per run of `live`: its mix's Linux baseline (`None`: shared with an
    /// earlier run's, or not run).
    pub os: &'a [OsRun],
    /// The simulator's prediction from the models, where every command has
    /// one.
    pub predicted: Option<&'a ScenarioResult>,
    pub incomplete: Option<String>,
    /// `both` or `live`.
    pub backend: &'a str,
}

fn ms(ns: f64) -> String {
    format!("{:.0}", ns / 1e6)
}

fn x(v: Option<f64>) -> String {
    v.map_or("—".into(), |v| format!("{v:.2}"))
}

/// Per program of every run: completion and speedup live, the Linux
/// baseline's, the prediction's.
pub fn programs_table(r: &CommandReport<'_>) -> Table {
    let mut t = Table::new(
        "Programs: completion (ms) and speedup against the command alone at the baseline duty",
        &[
            "run",
            "program",
            "alone (ms)",
            "completion (ms)",
            "speedup",
            "Linux, no dyncore: ms",
            "speedup",
            "simulated speedup",
        ],
    );
    for (o, res) in r.live.iter().zip(&r.live_result.runs) {
        let os = r.os.iter().find(|b| {
            crate::commands::mix_of(r.scenario, b.index) == crate::commands::mix_of(r.scenario, o.index)
        });
        for (p, pr) in res.programs.iter().enumerate() {
            let alone = pr.work_ns as f64;
            let os_run = os.and_then(|b| b.runs.get(p)).filter(|a| a.exit.shell_status() == 0);
            let sim = r
                .predicted
                .and_then(|s| s.runs.get(o.index))
                .and_then(|run| run.programs.get(p))
                .and_then(|q| q.speedup);
            t.row(vec![
                res.label.clone(),
                pr.label.clone(),
                ms(alone),
                pr.completion_ns.map_or("did not finish".into(), |c| ms(c as f64)),
                x(pr.speedup),
                os_run.map_or("—".into(), |a| ms(a.wall_ns as f64)),
                x(os_run.map(|a| (alone / a.wall_ns.max(1) as f64 * 1e4).round() / 1e4)),
                x(sim),
            ]);
        }
    }
    t
}

fn alone_table(alone: &[AloneTimes]) -> Table {
    let mut t = Table::new(
        "Each command alone at the baseline duty (one real CPU, the arbiter with `pinned`)",
        &["command", "before the runs (ms)", "after (ms)", "used (ms)"],
    );
    for a in alone {
        t.row(vec![
            format!("`{}`", a.argv.join(" ")),
            ms(a.before_ns as f64),
            a.after_ns.map_or("—".into(), |v| ms(v as f64)),
            ms(a.work_ns()),
        ]);
    }
    t
}

#[derive(Serialize)]
struct Json<'a> {
    scenario: &'a str,
    backend: &'a str,
    machine: &'a str,
    incomplete: Option<&'a str>,
    alone: &'a [AloneTimes],
    linux_baseline: Vec<LinuxJson>,
    live: &'a [dyncore_scenario::RunResult],
    simulator: Option<&'a [dyncore_scenario::RunResult]>,
    summaries: Vec<String>,
    input: &'a Scenario,
}

#[derive(Serialize)]
struct LinuxJson {
    run: usize,
    wall_ns: Vec<u64>,
    exit: Vec<i32>,
}

/// Writes `out/<name>/` for a scenario of commands.
pub fn write(out: &Path, r: &CommandReport<'_>) -> Result<Written> {
    let sc = r.scenario;
    let staged = dyncore_report::outdir::stage(out, &sc.name)?;
    let dir = staged.path().to_path_buf();
    let claims = dyncore_sim::scenario::claims::check(sc, std::slice::from_ref(r.live_result));
    let subtitle = format!(
        "real programs live on this machine under each policy, and with no dyncore at full speed (Linux), seed {}",
        sc.seed
    );
    // One model of what is drawn (the runs and the Linux baseline beside
    // them), with the tables of the runs as they ran.
    let (drawn_sc, drawn) = with_linux(r);
    let drawn_fig = Figure::build(&drawn_sc, std::slice::from_ref(&drawn));
    let opts = Options { subtitle: Some(&subtitle), tables_of: Some(r.live_result) };
    let m = Model::build(&drawn_sc, std::slice::from_ref(&drawn), &drawn_fig, &claims, opts);
    let plots = if r.live_result.runs.is_empty() { Vec::new() } else { render_plots(&dir, &m)? };
    if let Some(first) = r.live_result.runs.first() {
        let one = ScenarioResult { runs: vec![first.clone()], ..r.live_result.clone() };
        dyncore_report::trace::write_chrome_trace(&dir.join("trace.json"), &one)?;
    }
    write_traffic(&dir, r.live.iter().map(|o| (o.index, &o.run.events, &o.run.actions)))?;
    let json = Json {
        scenario: &sc.name,
        backend: r.backend,
        machine: &r.machine,
        incomplete: r.incomplete.as_deref(),
        alone: r.alone,
        linux_baseline: r
            .os
            .iter()
            .map(|b| LinuxJson {
                run: b.index,
                wall_ns: b.runs.iter().map(|a| a.wall_ns).collect(),
                exit: b.runs.iter().map(|a| a.exit.shell_status()).collect(),
            })
            .collect(),
        live: &r.live_result.runs,
        simulator: r.predicted.map(|p| p.runs.as_slice()),
        summaries: r.live.iter().map(|o| o.run.summary()).collect(),
        input: sc,
    };
    let mut text = serde_json::to_string_pretty(&json)?;
    text.push('\n');
    write_file(&dir.join("results.json"), text.as_bytes())?;
    let md = report_md(r, &plots);
    write_file(&dir.join("report.md"), md.as_bytes())?;
    let lead = lead_html(r);
    let section = Section {
        claims: &claims,
        model: &m,
        plots: &plots,
        ran: Ran { ran: "live (real programs)", lead: &lead },
        all_finished: r.incomplete.is_none() && r.live_result.runs.iter().all(|x| x.finished),
    };
    commit(staged, sc, section)
}

/// The scenario and results the plot draws: the live runs and, for each
/// mix's Linux baseline, a run of its own (`linux, no dyncore`) whose
/// programs' speedups are the baseline's (only the plot shows it as a
/// run: its figures are the commands' wall times, nothing of a policy).
fn with_linux(r: &CommandReport<'_>) -> (Scenario, ScenarioResult) {
    let mut sc = r.scenario.clone();
    let mut res = r.live_result.clone();
    for b in r.os {
        let Some(base) = r.live.iter().position(|o| o.index == b.index) else { continue };
        let label = if r.os.len() > 1 {
            format!("linux, no dyncore ({})", r.scenario.runs[b.index].label)
        } else {
            "linux, no dyncore".to_string()
        };
        let mut spec = r.scenario.runs[b.index].clone();
        spec.label = label.clone();
        spec.series = None;
        let mut run = res.runs[base].clone();
        run.label = label.clone();
        run.series = label;
        run.policy = "none (the kernel's scheduler)".into();
        for (p, a) in run.programs.iter_mut().zip(&b.runs) {
            let ok = a.exit.shell_status() == 0;
            let wall = a.wall_ns.max(1);
            p.completion_ns = ok.then_some(wall);
            p.speedup = ok.then(|| (p.work_ns as f64 / wall as f64 * 1e4).round() / 1e4);
            p.relative_time = ok.then(|| (wall as f64 / (p.work_ns.max(1)) as f64 * 1e4).round() / 1e4);
        }
        sc.runs.push(spec);
        res.runs.push(run);
    }
    (sc, res)
}

/// What the report says first: how it ran, and INCOMPLETE if it did.
fn lead_md(r: &CommandReport<'_>) -> String {
    let mut s = String::new();
    if let Some(why) = &r.incomplete {
        let _ = writeln!(s, "**INCOMPLETE**: {why}. The figures below are of what ran before that.\n");
    }
    for a in r.alone.iter().filter(|a| a.unsteady()) {
        let _ = writeln!(
            s,
            "**UNSTEADY**: `{}` alone took {} ms before the runs and {} ms after: something else took CPU time \
             from one of them, so the speedups measured against their mean are not to be trusted; run it again.\n",
            a.argv.join(" "),
            ms(a.before_ns as f64),
            ms(a.after_ns.unwrap_or_default() as f64)
        );
    }
    let _ = writeln!(
        s,
        "Real programs, unmodified, under each run's policy through the arbiter (cgroups, or CPU affinity \
         where those are missing; each run's summary says which), on {}. Each speedup is the command's time \
         alone at the baseline duty (one real CPU under `pinned`, measured before and after the runs) over \
         its completion (fork to reap). The Linux baseline runs the same commands with no dyncore on the \
         same real CPUs at full speed (no quota): the kernel's own scheduler. Reproduce with `cargo run \
         --release -- run --backend {} {}`.\n",
        r.machine,
        r.backend,
        r.source.display()
    );
    for b in r.os {
        let _ = writeln!(
            s,
            "The Linux baseline of `{}`'s mix ran {}.\n",
            r.scenario.runs[b.index].label,
            b.notes.join("; ")
        );
    }
    if r.predicted.is_none() {
        s += "No simulated prediction: not every command gives a `model`.\n\n";
    }
    s
}

fn report_md(r: &CommandReport<'_>, plots: &[dyncore_report::report::Plot]) -> String {
    let sc = r.scenario;
    let mut s = format!("# {}\n\n", sc.title);
    if !sc.description.trim().is_empty() {
        let _ = writeln!(s, "{}\n", sc.description.trim());
    }
    s += &lead_md(r);
    for p in plots {
        let _ = writeln!(s, "![{}]({}.png)\n", p.file, p.file);
    }
    s += "## Programs\n\n";
    s += &programs_table(r).to_markdown();
    s += "\n## Alone\n\n";
    s += &alone_table(r.alone).to_markdown();
    s += "\n## Runs\n\n";
    s += &runs_table(r.live_result).to_markdown();
    for o in r.live {
        let _ = writeln!(s, "\n## Run `{}`: the arbiter's summary\n", sc.runs[o.index].label);
        if let Outcome::Failed(e) = &o.outcome {
            let _ = writeln!(s, "**FAILED**: {e}\n");
        }
        match &o.controller {
            Ok(()) => {
                let _ = writeln!(
                    s,
                    "The controller ran at SCHED_FIFO priority {} (its CPU time is in the summary).\n",
                    crate::commands::CONTROLLER_PRIORITY
                );
            }
            Err(e) => {
                let _ = writeln!(s, "**NOT REAL-TIME**: the controller ran at normal priority ({e}).\n");
            }
        }
        if let Err(e) = &o.policy_check {
            let _ = writeln!(s, "**POLICY INVARIANT BROKEN**: {e}\n");
        }
        let _ = writeln!(s, "```text\n{}```", o.run.summary());
    }
    s
}

fn lead_html(r: &CommandReport<'_>) -> String {
    let mut s = dyncore_report::markdown::to_html(&lead_md(r), 0, "");
    s += "<div class=\"table-wrap\">\n";
    s += &programs_table(r).to_html(|_| None);
    s += &alone_table(r.alone).to_html(|_| None);
    s += "</div>\n";
    s
}
