//! The report of a live run (`--backend live`) or of both backends side by
//! side (`--backend both`), in the same folder layout as the simulator's:
//! `report.md`, `results.json`, `plot.png`/`.svg`, `trace.json`, plus the
//! policy traffic of every live run (`live-<run>-events.jsonl`,
//! `live-<run>-actions.jsonl`, the boundary's trace format, which
//! `dyncore_core::policy::trace::replay` reads back).
//!
//! `both` plots and traces every run twice, live and simulated (each run's
//! label and series get ` (live)` or ` (simulator)`); `live` plots and
//! traces the live runs only. Both reports carry the side-by-side table.
//! A run labelled OVERSUBSCRIBED, or CONTENDED (a runtime CPU lost more
//! than the runtime's threshold of its stepping time to other threads or
//! the host, or got less CPU time than its duty: `DutyReport::contended`),
//! says so at the top and beside every one of its figures; a run stopped by Ctrl-C or an error makes the report
//! INCOMPLETE, said at the top.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use dyncore_sim::claims::Claims;
use dyncore_sim::scenario::{GroupBy, PaperFigure, Scenario};
use dyncore_sim::{RunResult, ScenarioResult};
use serde::Serialize;

use crate::compare::{Diag, Side, agreement_sentence, diag_table, fmt_ns, side_by_side, side_table};
use crate::run::{LiveRunOutput, Outcome};
use dyncore_report::figure::{Figure, metric_name};
use dyncore_report::html::Ran;
use dyncore_report::model::{Model, Options};
use dyncore_report::outdir::Staged;
use dyncore_report::report::{ENERGY_NOTE, Plot, Written, render_plots, write_file};

/// Which live backend wrote the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Live,
    Both,
}

/// Everything a live report is made of.
pub struct LiveReport<'a> {
    pub kind: Kind,
    /// The scenario file, and the scenario as run (scaled).
    pub source: &'a Path,
    pub scenario: &'a Scenario,
    pub time_scale: f64,
    /// The machine, as `bench::machine_description` says.
    pub machine: String,
    /// The runs that ran live, in order (fewer than the scenario's when
    /// stopped), and their results.
    pub live: &'a [LiveRunOutput],
    pub live_result: &'a ScenarioResult,
    /// The simulator's prediction of every run.
    pub predicted: &'a ScenarioResult,
    /// Why the report is incomplete, if it is.
    pub incomplete: Option<String>,
    /// Extra words on what the prediction used (the mechanism it charged).
    pub prediction_note: String,
}

const LIVE: &str = "live";
const SIM: &str = "simulator";

fn tagged(s: &str, which: &str) -> String {
    format!("{s} ({which})")
}

/// How [`combined`] marks which backend a result comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// Every run's label and series (the trace, the runs and programs
    /// tables: each run is its own process, row, ...).
    Runs,
    /// What the figure tells apart: the series when the x axis is the
    /// program, the program labels when it is the run — so that a run's
    /// live and simulated bars stand side by side in two colours.
    Figure,
}

/// The scenario and result with every run twice, live then simulated,
/// marked ` (live)` or ` (simulator)` as `mark` says, for `--backend both`.
fn combined(
    s: &Scenario,
    live: &ScenarioResult,
    sim: &ScenarioResult,
    mark: Mark,
) -> (Scenario, ScenarioResult) {
    let by_program = mark == Mark::Figure && s.report.group_by == GroupBy::Run;
    let mut sc = s.clone();
    sc.runs.clear();
    let mut runs = Vec::new();
    for (i, spec) in s.runs.iter().enumerate() {
        let sims = std::iter::once((SIM, sim.runs.get(i)));
        for (which, r) in std::iter::once((LIVE, live.runs.get(i))).chain(sims) {
            let Some(r) = r else { continue };
            let mut spec = spec.clone();
            let mut r = r.clone();
            if by_program {
                for w in &mut spec.workloads {
                    w.label = Some(tagged(w.label.as_deref().unwrap_or(&w.program), which));
                }
                for p in &mut r.programs {
                    p.label = tagged(&p.label, which);
                }
            } else {
                let series = spec.series.clone().unwrap_or_else(|| spec.label.clone());
                spec.label = tagged(&spec.label, which);
                spec.series = Some(tagged(&series, which));
                (r.label, r.series) = (tagged(&r.label, which), tagged(&r.series, which));
            }
            sc.runs.push(spec);
            runs.push(r);
        }
    }
    sc.paper = s
        .paper
        .iter()
        .flat_map(|p| [LIVE, SIM].map(|which| PaperFigure { series: tagged(&p.series, which), ..p.clone() }))
        .collect();
    if !by_program {
        sc.report.timeline_run = s.report.timeline_run.as_ref().map(|l| tagged(l, LIVE));
    }
    (sc, ScenarioResult { runs, ..live.clone() })
}

#[derive(Serialize)]
struct SideJson<'a> {
    x: &'a str,
    series: &'a str,
    live: Option<f64>,
    simulator: Option<f64>,
    /// (live − simulator) / simulator.
    difference: Option<f64>,
    oversubscribed: bool,
    agrees: bool,
    /// False in a TCG guest: the figure is shown, not held against the
    /// prediction (`verdict` says so).
    compared: bool,
    verdict: String,
    mechanism: Option<&'a str>,
}

#[derive(Serialize)]
struct LiveRunJson<'a> {
    label: &'a str,
    outcome: String,
    real_cpus: &'a [usize],
    oversubscribed: bool,
    realtime_priority: Option<u8>,
    throttle_period_ns: u64,
    baseline_duty_per_mille: u16,
    calibrations: Vec<CalibrationJson>,
    duty_error_points: Vec<Option<f64>>,
    /// Per runtime CPU: wall time minus the worker's CPU time in its runs
    /// of steps, that as a share of those runs, and how much less CPU time
    /// than its duty it got over its loaded periods (relative).
    stolen_ns: Vec<u64>,
    stolen_share: Vec<f64>,
    /// Per runtime CPU: how late, in all, its worker woke from its throttle
    /// sleeps (time lost outside its runs of steps).
    woke_late_ns: Vec<u64>,
    duty_shortfall: Vec<Option<f64>>,
    contended: bool,
    /// What the backend really executed, the actuation delays (p50, p99,
    /// max per kind of action), and what the checkers cost.
    execution: crate::actuation::ExecutionJson<'a>,
    fuse_mechanisms: Vec<String>,
    /// Every fused object: its sibling CPUs, the Bolt offline and online
    /// of the borrowed ones, and where its thread really ran
    /// (`crate::fused`).
    fused_objects: Vec<crate::fused::FusedObject>,
    tick_late_mean_ns: f64,
    ticks_missed: u64,
    controller_cpu_ns: u64,
}

#[derive(Serialize)]
struct CalibrationJson {
    kernel: &'static str,
    /// Before the run (the work was sized with it), after it, and the
    /// mean the speedups are measured against.
    units_per_s_before: f64,
    units_per_s_after: Option<f64>,
    units_per_s: f64,
}

#[derive(Serialize)]
struct ResultsJson<'a> {
    scenario: &'a str,
    title: &'a str,
    backend: &'static str,
    seed: u64,
    time_scale: f64,
    machine: &'a str,
    incomplete: Option<&'a str>,
    metric: &'static str,
    agreement: String,
    side_by_side: Vec<SideJson<'a>>,
    live_runs: Vec<LiveRunJson<'a>>,
    /// The paper's claims, checked against the live runs.
    claims: &'a Claims,
    /// Every live run's full result, and the prediction's.
    live: &'a [RunResult],
    simulator: &'a [RunResult],
    /// The scenario as run (scaled).
    input: &'a Scenario,
}

fn live_run_json<'a>(o: &'a LiveRunOutput, label: &'a str) -> LiveRunJson<'a> {
    LiveRunJson {
        label,
        outcome: outcome_words(&o.outcome),
        real_cpus: &o.fit.real,
        oversubscribed: o.fit.oversubscribed,
        realtime_priority: o.realtime.as_ref().ok().copied(),
        throttle_period_ns: o.throttle_period_ns,
        baseline_duty_per_mille: o.baseline.per_mille(),
        calibrations: o
            .rates
            .iter()
            .map(|r| CalibrationJson {
                kernel: r.kernel,
                units_per_s_before: r.sizing_units_per_s(),
                units_per_s_after: r.after.as_ref().map(|a| a.units_per_s()),
                units_per_s: r.units_per_s(),
            })
            .collect(),
        duty_error_points: o.run.duty.iter().map(|d| d.error_points()).collect(),
        stolen_ns: o.run.duty.iter().map(|d| d.stolen_ns).collect(),
        stolen_share: o.run.duty.iter().map(|d| d.stolen_share()).collect(),
        woke_late_ns: o.run.duty.iter().map(|d| d.woke_late_ns).collect(),
        duty_shortfall: o.run.duty.iter().map(|d| d.shortfall()).collect(),
        contended: o.run.duty.iter().any(|d| d.contended()),
        execution: crate::actuation::json(o),
        fuse_mechanisms: o.run.log.fuses.iter().map(|f| f.mechanism.to_string()).collect(),
        fused_objects: crate::fused::objects(&o.run, &o.fit.real),
        tick_late_mean_ns: o.run.log.ticks.mean_late_ns(),
        ticks_missed: o.run.log.ticks.missed,
        controller_cpu_ns: o.run.log.controller_cpu_ns,
    }
}

pub fn outcome_words(o: &Outcome) -> String {
    match o {
        Outcome::Finished => "finished".into(),
        Outcome::TimedOut => "stopped at max_time_ns before every program finished".into(),
        Outcome::Interrupted => "INTERRUPTED (Ctrl-C)".into(),
        Outcome::Failed(e) => format!("FAILED: {e}"),
    }
}

/// The live figure, each of its cells beside the prediction, and each
/// live run's measurements (by run index).
pub fn comparison(r: &LiveReport<'_>) -> (Figure, Vec<Side>, Vec<Option<Diag>>) {
    let sc = r.scenario;
    let live_fig = Figure::build(sc, std::slice::from_ref(r.live_result));
    let sim_fig = Figure::build(sc, std::slice::from_ref(r.predicted));
    let mut diags: Vec<Option<Diag>> = vec![None; sc.runs.len()];
    for o in r.live {
        diags[o.index] = Some(Diag::of(sc, o, &r.predicted.runs[o.index]));
    }
    let sides = side_by_side(sc, &live_fig, &sim_fig, &diags);
    (live_fig, sides, diags)
}

/// Writes the report folder; returns what the index needs.
pub fn write(out: &Path, r: &LiveReport<'_>) -> Result<Written> {
    let sc = r.scenario;
    // Written aside and renamed into place whole (`outdir`).
    let staged = dyncore_report::outdir::stage(out, &sc.name)?;
    let dir = staged.path().to_path_buf();
    let (live_fig, sides, diags) = comparison(r);
    // A TCG guest's speedups are not timings: no paper claim is held
    // against them (the report says so, `crate::compare::NOT_COMPARED`).
    let claims = if dyncore_report::machine::timings_are_real() {
        dyncore_sim::scenario::claims::check(sc, std::slice::from_ref(r.live_result))
    } else {
        Claims::default()
    };

    // The plot, the trace and the figure the page shows: both backends or
    // live only (`shown` marks each run, `drawn` what the figure tells apart).
    let ((_, shown), (mut drawn_sc, drawn)) = match r.kind {
        Kind::Both => (
            combined(sc, r.live_result, r.predicted, Mark::Runs),
            combined(sc, r.live_result, r.predicted, Mark::Figure),
        ),
        Kind::Live => ((sc.clone(), r.live_result.clone()), (sc.clone(), r.live_result.clone())),
    };
    if !dyncore_report::machine::timings_are_real() {
        // Nor is any figure of a TCG guest held against the paper's.
        drawn_sc.paper.clear();
    }
    let shown = std::slice::from_ref(&shown);
    let drawn = std::slice::from_ref(&drawn);
    let drawn_fig = Figure::build(&drawn_sc, drawn);
    let subtitle = {
        let crowded = match (
            r.live.iter().any(|o| o.fit.oversubscribed),
            r.live.iter().any(|o| o.run.duty.iter().any(|d| d.contended())),
        ) {
            (true, _) => "; OVERSUBSCRIBED live runs",
            (false, true) => "; CONTENDED live runs",
            (false, false) => "",
        };
        match r.kind {
            Kind::Both => format!(
                "live on this machine and dyncore-sim's prediction, seed {}, time scale {}{crowded}",
                sc.seed, r.time_scale
            ),
            Kind::Live => {
                format!("live on this machine, seed {}, time scale {}{crowded}", sc.seed, r.time_scale)
            }
        }
    };
    // One model of what the page and report.md show: the figure and charts
    // of what is drawn, the tables of every run as shown.
    let opts = Options { subtitle: Some(&subtitle), tables_of: Some(&shown[0]) };
    let m = Model::build(&drawn_sc, drawn, &drawn_fig, &claims, opts);
    let plots = render_plots(&dir, &m)?;
    dyncore_report::trace::write_chrome_trace(&dir.join("trace.json"), &shown[0])?;
    write_traffic(&dir, r.live.iter().map(|o| (o.index, &o.run.events, &o.run.actions)))?;
    let json = ResultsJson {
        scenario: &sc.name,
        title: &sc.title,
        backend: if r.kind == Kind::Both { "both" } else { "live" },
        seed: sc.seed,
        time_scale: r.time_scale,
        machine: &r.machine,
        incomplete: r.incomplete.as_deref(),
        metric: metric_name(sc.report.metric),
        agreement: agreement_sentence(&sides),
        side_by_side: sides
            .iter()
            .map(|s| SideJson {
                x: &s.x,
                series: &s.series,
                live: s.live,
                simulator: s.sim,
                difference: s.difference(),
                oversubscribed: s.oversubscribed,
                agrees: s.agrees(),
                compared: !s.functional_only,
                verdict: s.verdict(),
                mechanism: s.mechanism.as_deref(),
            })
            .collect(),
        live_runs: r.live.iter().map(|o| live_run_json(o, &sc.runs[o.index].label)).collect(),
        claims: &claims,
        live: &r.live_result.runs,
        simulator: &r.predicted.runs,
        input: sc,
    };
    let mut text = serde_json::to_string_pretty(&json)?;
    text.push('\n');
    write_file(&dir.join("results.json"), text.as_bytes())?;

    let diag_list: Vec<Diag> = diags.into_iter().flatten().collect();
    let md = report_md(r, &live_fig, &sides, &diag_list, &m, &plots);
    write_file(&dir.join("report.md"), md.as_bytes())?;

    let lead = lead_html(r, &live_fig, &sides, &diag_list);
    let ran = if r.kind == Kind::Both { "live and simulated" } else { "live" };
    let section = Section {
        claims: &claims,
        model: &m,
        plots: &plots,
        ran: Ran { ran, lead: &lead },
        all_finished: r.incomplete.is_none() && r.live_result.runs.iter().all(|x| x.finished),
    };
    commit(staged, sc, section)
}

/// Each live run's policy traffic into `dir`, as `live-<run>-events.jsonl`
/// and `live-<run>-actions.jsonl`; `runs`: (run index, events, actions).
pub(crate) fn write_traffic<'a>(
    dir: &Path,
    runs: impl IntoIterator<Item = (usize, &'a String, &'a String)>,
) -> Result<()> {
    for (index, events, actions) in runs {
        write_file(&dir.join(format!("live-{index}-events.jsonl")), events.as_bytes())?;
        write_file(&dir.join(format!("live-{index}-actions.jsonl")), actions.as_bytes())?;
    }
    Ok(())
}

/// What a live report, of kernels ([`write`]) or of commands
/// ([`crate::commands_report::write`]), shows on the index page.
pub(crate) struct Section<'a> {
    pub claims: &'a Claims,
    pub model: &'a Model<'a>,
    pub plots: &'a [Plot],
    /// How the runs ran, and the section's lead.
    pub ran: Ran<'a>,
    /// No run was cut short, and every run finished.
    pub all_finished: bool,
}

/// A live report's last step: the staged `out/<name>/` of `sc` renamed
/// into place, and its section of the index page.
pub(crate) fn commit(staged: Staged, sc: &Scenario, s: Section<'_>) -> Result<Written> {
    staged.commit()?;
    Ok(Written {
        name: sc.name.clone(),
        title: sc.title.clone(),
        seeds: vec![sc.seed],
        counts: s.claims.counts(),
        lock: dyncore_report::report::lock_lines(&sc.name, s.claims),
        all_finished: s.all_finished,
        html: dyncore_report::html::scenario_section(s.model, s.plots, s.ran),
    })
}

/// The warnings that go at the top of the report: INCOMPLETE,
/// OVERSUBSCRIBED, not real-time.
fn banners(r: &LiveReport<'_>) -> Vec<String> {
    let mut out = Vec::new();
    if !dyncore_report::machine::timings_are_real() {
        out.push(format!(
            "**{}**: this ran in a dyncore vm guest under TCG (emulated CPUs). Its times and speedups are \
             shown, never held against the simulator's prediction, the paper or any timing goal; the \
             placements, counts, orderings, fused objects and the execution check are functional results.",
            crate::compare::NOT_COMPARED
        ));
    }
    if let Some(why) = &r.incomplete {
        out.push(format!("**INCOMPLETE**: {why}. The figures below are of what ran before that."));
    }
    let over: Vec<String> = r
        .live
        .iter()
        .filter(|o| o.fit.oversubscribed)
        .map(|o| {
            let hint = o.fit_hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default();
            format!("run `{}`: {}{hint}", r.scenario.runs[o.index].label, o.fit.crowded())
        })
        .collect();
    if !over.is_empty() {
        out.push(format!(
            "**OVERSUBSCRIBED**: {} — so their duty cycles are not what the policy set, and these figures are \
             never counted as agreeing with the simulator.",
            over.join("; ")
        ));
    }
    let contended: Vec<String> = r
        .live
        .iter()
        .filter_map(|o| {
            let cpus = crate::compare::contended_cpus(&o.run.duty)?;
            Some(format!("run `{}`: {cpus}", r.scenario.runs[o.index].label))
        })
        .collect();
    if !contended.is_empty() {
        out.push(format!(
            "**CONTENDED**: {} — other threads or the host took time from these runtime CPUs while they had \
             work. The throttle charges CPU time, so the work at each duty was delivered in CPU time where it \
             could be made up, but later in wall time; the figures are counted, and a miss names the \
             contention when it is the largest effect.",
            contended.join("; ")
        ));
    }
    let limit: Vec<String> = r
        .live
        .iter()
        .flat_map(|o| {
            o.fit.over_limit().into_iter().map(move |(real, p)| {
                format!(
                    "`{}`: real CPU {real} can be asked for {:.1}%",
                    r.scenario.runs[o.index].label,
                    p * 100.0
                )
            })
        })
        .collect();
    if let Some(o) = r.live.first().filter(|_| !limit.is_empty()) {
        out.push(format!(
            "**DUTY ABOVE THE REAL-TIME LIMIT**: {} — real-time threads may use {:.0}% of a real CPU, so such a \
             duty is cut short (the duty error below measures it); `--baseline-duty 45` keeps every duty under it.",
            limit.join("; "),
            o.fit.capacity * 100.0
        ));
    }
    let not_rt: Vec<String> = r
        .live
        .iter()
        .filter_map(|o| {
            o.realtime.as_ref().err().map(|e| format!("`{}`: {e}", r.scenario.runs[o.index].label))
        })
        .collect();
    if !not_rt.is_empty() {
        out.push(format!(
            "**NOT REAL-TIME**: the workers ran at normal priority ({}); other processes took real CPU time from \
             them, so duty cycles are not what the policy set.",
            not_rt.join("; ")
        ));
    }
    out
}

fn report_md(
    r: &LiveReport<'_>,
    live_fig: &Figure,
    sides: &[Side],
    diags: &[Diag],
    m: &Model<'_>,
    plots: &[dyncore_report::report::Plot],
) -> String {
    let sc = r.scenario;
    let mut s = String::new();
    let which = if r.kind == Kind::Both { "live and on the simulator" } else { "live" };
    let _ = writeln!(s, "# {} — {which}\n", sc.title);
    for b in banners(r) {
        let _ = writeln!(s, "{b}\n");
    }
    if !sc.description.trim().is_empty() {
        let _ = writeln!(s, "{}\n", sc.description.trim());
    }
    let backend = if r.kind == Kind::Both { "both" } else { "live" };
    let _ = writeln!(
        s,
        "Scenario `{}`, seed {}, run live on runtime CPUs with real threads and real kernels on {} — time scale \
         {} (every duration of the scenario multiplied by it: work, start times, tick, minimum granularity, \
         safety stop). Beside every live figure is the simulator's prediction for the same scaled scenario and \
         seed{} — the same scaled scenario, so that the tick and the minimum granularity keep the proportion \
         to the work that they have live. Reproduce with `cargo run --release -- run --backend {backend} --time-scale {} {}`.\n",
        sc.name,
        sc.seed,
        r.machine,
        r.time_scale,
        r.prediction_note,
        r.time_scale,
        r.source.display()
    );
    for p in plots {
        let _ = writeln!(s, "![{}]({}.png)\n", p.file, p.file);
    }
    let _ = writeln!(s, "## Live beside the simulator: {}\n", metric_name(sc.report.metric));
    s += &side_table(live_fig.x_name, sides).to_markdown();
    let _ = writeln!(s, "\n{}.\n", agreement_sentence(sides));
    if !dyncore_report::machine::timings_are_real() {
        let _ = writeln!(
            s,
            "## Beside the paper\n\n{}: the paper's figures and claims are timings, and a TCG guest's are \
             not; placements, counts, orderings and the execution check are below.\n",
            crate::compare::NOT_COMPARED
        );
    } else if m.figure.has_paper() {
        let _ = writeln!(s, "## Beside the paper\n");
        s += &m.comparison.to_markdown();
        let _ = writeln!(s, "\n{}\n", m.verdict);
    }
    s += &dyncore_report::claims_view::markdown(m.claims);
    let _ = writeln!(s, "## How the live runs went\n");
    s += &live_runs_md(r);
    let _ = writeln!(s, "\n### What the backend really executed: actuation delay\n");
    s += &crate::actuation::table(r.live, |i| sc.runs[i].label.clone()).to_markdown();
    let _ = writeln!(s, "\n{}", crate::actuation::NOTE);
    if let Some(t) = crate::fused::table(r.live, |i| sc.runs[i].label.clone()) {
        let _ =
            writeln!(s, "\n### Fused objects: where they ran, and the borrowed CPUs' offline and online\n");
        s += &t.to_markdown();
        let _ = writeln!(s, "\n{}", crate::fused::NOTE);
    }
    let _ = writeln!(s, "\n### What could make them differ from the simulator\n");
    s += &diag_table(diags).to_markdown();
    let _ = writeln!(
        s,
        "\nDuty error: the largest relative difference between a runtime CPU's busy time (the CPU time its \
         worker got in task steps) and its duty, over the throttle periods it had work throughout. Stolen: the \
         largest share of a CPU's stepping time that other threads or the host took (wall time minus the \
         worker's CPU time), and the largest shortfall of a CPU's CPU time below its duty; above {:.0}% stolen \
         or {:.0}% short the run is CONTENDED. Work error: the largest relative difference between the \
         units a thread did and the units its live schedule promised at its duties (each slice's length × \
         duty / 50% × its kernel's calibrated rate): what the real CPUs delivered, whatever took it. Machine drift: how much a kernel's rate alone at the \
         baseline duty changed between the calibrations before and after the run. Reconfigurations: what the \
         runtime's critical paths took live against what the simulator charged for the same plans. Tick \
         lateness: how late the controller fed each round of ticks. A figure outside {:.0}% names the largest \
         of these for its runs.\n",
        dyncore_runtime::cpu::CONTENDED_STOLEN_SHARE * 100.0,
        dyncore_runtime::cpu::DELIVERY_TOLERANCE * 100.0,
        crate::compare::AGREEMENT * 100.0
    );
    let _ = writeln!(s, "## Runs\n");
    s += &m.runs.to_markdown();
    let _ = writeln!(s, "\n## Energy and wake-ups (modelled)\n");
    s += &m.energy.to_markdown();
    let _ = writeln!(s, "\n{ENERGY_NOTE}");
    let _ = writeln!(s, "\n## Programs\n");
    s += &m.programs.to_markdown();
    let _ = writeln!(
        s,
        "\n## Traces\n\n`trace.json`: open it at <https://ui.perfetto.dev> (Open trace file) or in \
         `chrome://tracing`: one process per run{}, CPUs as lanes (with a reconfiguration lane under each CPU \
         that fused or split), threads as slices, fused execution objects as spans on their own lanes; live \
         runs in wall-clock time from their start. `live-<run>-events.jsonl` and `live-<run>-actions.jsonl` are \
         each live run's policy traffic (run numbers from 0, in scenario order): replaying the events through \
         the policy gives the actions byte for byte.",
        if r.kind == Kind::Both { " (live and simulated)" } else { "" }
    );
    s
}

/// Per live run: where it ran, at what priority, the calibrations, the
/// duty error, the fuses and how they were carried out.
fn live_runs_md(r: &LiveReport<'_>) -> String {
    let mut s = String::new();
    for o in r.live {
        let label = &r.scenario.runs[o.index].label;
        let log = &o.run.log;
        let _ = writeln!(s, "* **{label}** — {}.", outcome_words(&o.outcome));
        let _ = writeln!(s, "  * {}.", o.fit.describe());
        let prio = match &o.realtime {
            Ok(p) => format!("workers SCHED_FIFO {p}, controller {}", p + 1),
            Err(e) => format!("workers at normal priority ({e})"),
        };
        let _ = writeln!(
            s,
            "  * {prio}; throttle period {}; baseline duty {}; controller CPU {} ({:.1}% of the run).",
            fmt_ns(o.throttle_period_ns),
            o.baseline,
            fmt_ns(log.controller_cpu_ns),
            log.controller_cpu_ns as f64 / o.run.end_ns.max(1) as f64 * 100.0
        );
        for rate in &o.rates {
            let after = match (rate.after.as_ref(), rate.drift()) {
                (Some(a), Some(d)) => format!(", {:.4e} after the run ({:+.2}%)", a.units_per_s(), d * 100.0),
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "  * calibration: {} alone on runtime CPU 0 at {}: {:.4e} units/s{after}; speedups against \
                 their mean; longest step {}.",
                rate.kernel,
                o.baseline,
                rate.sizing_units_per_s(),
                fmt_ns(rate.before.max_step_ns)
            );
        }
        let duty: Vec<String> = o
            .run
            .duty
            .iter()
            .filter_map(|d| Some(format!("CPU {}: {:+.3} points", d.cpu, d.error_points()?)))
            .collect();
        if !duty.is_empty() {
            let _ = writeln!(
                s,
                "  * duty error (busy CPU time − duty over loaded periods): {}.",
                duty.join(", ")
            );
        }
        let stolen: Vec<String> = o
            .run
            .duty
            .iter()
            .filter(|d| d.stepping_ns > 0)
            .map(|d| {
                format!(
                    "CPU {}: {} ({:.1}%; woke {} late per loaded period)",
                    d.cpu,
                    fmt_ns(d.stolen_ns),
                    d.stolen_share() * 100.0,
                    fmt_ns(d.woke_late_ns / d.loaded_periods.max(1))
                )
            })
            .collect();
        if !stolen.is_empty() {
            let _ = writeln!(
                s,
                "  * stolen (wall − CPU time while stepping), and how late the worker woke from its throttle \
                 sleeps on average: {}{}.",
                stolen.join(", "),
                if o.run.duty.iter().any(|d| d.contended()) { " — CONTENDED" } else { "" }
            );
        }
        if !log.fuses.is_empty() {
            let mut kinds: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
            for f in &log.fuses {
                *kinds.entry(f.mechanism.to_string()).or_default() += 1;
            }
            let kinds: Vec<String> = kinds.into_iter().map(|(k, n)| format!("{n} by {k}")).collect();
            let crit: Vec<u64> = log.reconfigs.iter().map(|x| x.critical_ns).collect();
            let _ = writeln!(
                s,
                "  * {} fuse(s): {}; {} reconfiguration(s) (Bolt offline/online of the borrowed CPUs, proxies \
                 installed), critical path median {}, longest {}; {}.",
                log.fuses.len(),
                kinds.join("; "),
                crit.len(),
                fmt_ns(median(&crit)),
                fmt_ns(crit.iter().copied().max().unwrap_or(0)),
                step_medians(&log.reconfigs)
            );
        }
        let t = &log.ticks;
        let _ = writeln!(
            s,
            "  * ticks every {}: {} round(s), {} missed, late by {} on average, {} at the 99th percentile; {} \
             thread(s) displaced by an offline.",
            fmt_ns(t.tick_ns),
            t.rounds,
            t.missed,
            fmt_ns(t.mean_late_ns() as u64),
            fmt_ns(t.late_quantile_ns(0.99)),
            log.displaced
        );
    }
    s
}

/// "medians: await-stopped 9.8 µs, install-proxy 0.3 µs, ..., the rest
/// (lock, planning, timing) 2.1 µs": where the critical paths went.
fn step_medians(reconfigs: &[dyncore_runtime::backend::ReconfigRecord]) -> String {
    let mut by_step: std::collections::BTreeMap<&str, Vec<u64>> = std::collections::BTreeMap::new();
    for r in reconfigs {
        for (name, ns) in &r.steps_ns {
            by_step.entry(name).or_default().push(*ns);
        }
    }
    let rest: Vec<u64> = reconfigs
        .iter()
        .map(|r| r.critical_ns.saturating_sub(r.steps_ns.iter().map(|s| s.1).sum()))
        .collect();
    let mut steps: Vec<(&str, u64)> = by_step.into_iter().map(|(n, v)| (n, median(&v))).collect();
    steps.sort_by_key(|s| std::cmp::Reverse(s.1));
    let parts: Vec<String> = steps.iter().map(|(n, ns)| format!("{n} {}", fmt_ns(*ns))).collect();
    format!(
        "step medians: {}; the rest of the call (lock, planning) {}",
        parts.join(", "),
        fmt_ns(median(&rest))
    )
}

fn median(v: &[u64]) -> u64 {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// The side-by-side block of the page.
fn lead_html(r: &LiveReport<'_>, live_fig: &Figure, sides: &[Side], diags: &[Diag]) -> String {
    let mut s = String::new();
    for b in banners(r) {
        s += &dyncore_report::markdown::to_html(&b, 0, "");
    }
    let _ = writeln!(
        s,
        "<h3>Live beside the simulator (time scale {})</h3>\n<div class=\"table-wrap\">",
        r.time_scale
    );
    s += &side_table(live_fig.x_name, sides).to_html(|i| (!sides[i].agrees()).then_some("differs"));
    s += "</div>\n";
    s += &dyncore_report::markdown::to_html(&format!("{}.", agreement_sentence(sides)), 0, "");
    s += "<div class=\"table-wrap\">\n";
    s += &diag_table(diags).to_html(|_| None);
    s += "</div>\n<h3>What the backend really executed: actuation delay</h3>\n<div class=\"table-wrap\">\n";
    let actuation = crate::actuation::table(r.live, |i| r.scenario.runs[i].label.clone());
    s += &actuation.to_html(|i| (!r.live[i].run.execution.ok()).then_some("differs"));
    s += "</div>\n";
    s += &dyncore_report::markdown::to_html(crate::actuation::NOTE, 0, "");
    if let Some(t) = crate::fused::table(r.live, |i| r.scenario.runs[i].label.clone()) {
        s += "<h3>Fused objects: where they ran, and the borrowed CPUs' offline and online</h3>\n";
        s += "<div class=\"table-wrap\">\n";
        s += &t.to_html(|_| None);
        s += "</div>\n";
        s += &dyncore_report::markdown::to_html(crate::fused::NOTE, 0, "");
    }
    s
}
