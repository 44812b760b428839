//! The report folder: per scenario `report.md`, `results.json`, `plot.png` /
//! `plot.svg` (shaped like the paper's figure, with the paper's values and
//! the spread over seeds) and `trace.json` (Perfetto / chrome://tracing, the
//! first seed); and `index.md` and `index.html` over all scenarios.
//!
//! Everything written here is a function of the scenarios and their results
//! only (no dates, no host names), so the same scenarios and seeds give the
//! same bytes. A scenario's results become one [`Model`] (figure,
//! comparison, claims, tables, charts), built once; `results.json`, the
//! plots, `report.md` and the page's section are each rendered from it in
//! one pass.

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use dyncore_sim::ScenarioResult;
use dyncore_sim::claims::Claims;
use dyncore_sim::scenario::Scenario;
use serde::Serialize;

use crate::events::TimelineRow;
use crate::figure::{Figure, PaperCounts, Spread, fmt_value, metric_name, summary_sentence};
use crate::figure_plot::seeds_phrase;
use crate::model::{ChartKind, Model, Options};
use crate::plot::write_chart;
use crate::table::Table;

/// What a scenario's report folder holds, for the index.
#[derive(Debug, Clone)]
pub struct Written {
    pub name: String,
    pub title: String,
    pub seeds: Vec<u64>,
    pub counts: PaperCounts,
    /// Every claim's line of `claims.lock` ([`lock_lines`]).
    pub lock: Vec<String>,
    pub all_finished: bool,
    /// The scenario's section of `index.html`.
    pub html: String,
}

#[derive(Serialize)]
struct ResultsJson<'a> {
    scenario: &'a str,
    title: &'a str,
    /// Every run was run once per seed: `seeds[0]`, `seeds[0] + 1`, ...
    seeds: Vec<u64>,
    metric: &'static str,
    figure: FigureJson<'a>,
    comparisons: Vec<ComparisonJson>,
    /// Every claim of the paper with its checks and verdicts.
    claims: &'a Claims,
    /// Per seed, every run's full result.
    results: Vec<SeedJson<'a>>,
    /// The scenario as read (after defaults), so a result can be re-run.
    input: &'a Scenario,
}

#[derive(Serialize)]
struct FigureJson<'a> {
    x: &'static str,
    categories: &'a [String],
    series: &'a [String],
    /// `median[series][category]` over seeds, and the range.
    median: Vec<Vec<Option<f64>>>,
    min: Vec<Vec<Option<f64>>>,
    max: Vec<Vec<Option<f64>>>,
    /// `per_seed[seed][series][category]`.
    per_seed: &'a [Vec<Vec<Option<f64>>>],
    paper: &'a [Vec<Option<f64>>],
}

#[derive(Serialize)]
struct ComparisonJson {
    x: String,
    series: String,
    median: f64,
    min: f64,
    max: f64,
    paper: f64,
    /// (median - paper) / paper.
    difference: f64,
    differs: bool,
    paper_in_range: bool,
}

#[derive(Serialize)]
struct SeedJson<'a> {
    seed: u64,
    runs: &'a [dyncore_sim::RunResult],
}

/// The model's results as deterministic JSON text.
pub fn results_json(m: &Model<'_>) -> Result<String> {
    let (scenario, results, fig, claims) = (m.scenario, m.results, m.figure, m.claims);
    let pick = |f: fn(&Spread) -> f64| -> Vec<Vec<Option<f64>>> {
        fig.values.iter().map(|row| row.iter().map(|v| v.as_ref().map(f)).collect()).collect()
    };
    let comparisons = fig
        .cells()
        .into_iter()
        .filter_map(|c| {
            let d = c.rel_diff()?;
            Some(ComparisonJson {
                differs: c.differs(),
                paper_in_range: c.paper_in_range() == Some(true),
                x: c.x,
                series: c.series,
                median: c.spread.median,
                min: c.spread.min,
                max: c.spread.max,
                paper: c.paper?,
                difference: d,
            })
        })
        .collect();
    let doc = ResultsJson {
        scenario: &scenario.name,
        title: &scenario.title,
        seeds: fig.seeds.clone(),
        metric: metric_name(fig.metric),
        figure: FigureJson {
            x: fig.x_name,
            categories: &fig.categories,
            series: &fig.series,
            median: pick(|s| s.median),
            min: pick(|s| s.min),
            max: pick(|s| s.max),
            per_seed: &fig.per_seed,
            paper: &fig.paper,
        },
        comparisons,
        claims,
        results: results.iter().map(|r| SeedJson { seed: r.seed, runs: &r.runs }).collect(),
        input: scenario,
    };
    let mut s = serde_json::to_string_pretty(&doc)?;
    s.push('\n');
    Ok(s)
}

/// Writes `out/<name>/…` for one scenario read from `source`, whose
/// results (one per seed, in order; at least one) give the figure `fig`
/// and the `claims` (built once by the caller, who also prints them).
pub fn write_scenario(
    out: &Path,
    source: &Path,
    scenario: &Scenario,
    results: &[ScenarioResult],
    fig: &Figure,
    claims: &Claims,
) -> Result<Written> {
    // Written aside and renamed into place whole (`outdir`).
    let staged = crate::outdir::stage(out, &scenario.name)?;
    let dir = staged.path().to_path_buf();
    let m = Model::build(scenario, results, fig, claims, Options::default());

    write_file(&dir.join("results.json"), results_json(&m)?.as_bytes())?;
    let plots = render_plots(&dir, &m)?;
    crate::trace::write_chrome_trace(&dir.join("trace.json"), &results[0])?;
    write_file(&dir.join("report.md"), report_md(source, &m, &plots).as_bytes())?;

    staged.commit()?;
    Ok(Written {
        name: scenario.name.clone(),
        title: scenario.title.clone(),
        seeds: fig.seeds.clone(),
        counts: claims.counts(),
        lock: lock_lines(&scenario.name, claims),
        all_finished: m.all_finished(),
        html: crate::html::scenario_section(&m, &plots, crate::html::Ran::SIMULATED),
    })
}

/// Draws the model's charts into `dir`, each as `<file>.png` and `.svg`.
pub fn render_plots(dir: &Path, m: &Model<'_>) -> Result<Vec<Plot>> {
    m.charts
        .iter()
        .map(|c| {
            let stem = dir.join(c.file);
            let size = match &c.chart {
                ChartKind::Bars(b) => {
                    write_chart(&stem, b)?;
                    crate::plot::Chart::size(b)
                }
                ChartKind::Timeline(t) => {
                    write_chart(&stem, t)?;
                    crate::plot::Chart::size(t)
                }
            };
            Ok(Plot { file: c.file, size })
        })
        .collect()
}

/// `out/<name>`, checked here as well as in validation, so that no field or
/// caller can make a report land outside `out`: the name must be exactly one
/// plain path component, of the characters and not among the reserved names
/// that [`check_name`](dyncore_sim::scenario::limits::check_name) allows.
pub fn report_dir(out: &Path, name: &str) -> Result<PathBuf> {
    use std::path::Component;
    let mut parts = Path::new(name).components();
    let single = matches!((parts.next(), parts.next()), (Some(Component::Normal(c)), None) if c == name);
    dyncore_sim::scenario::limits::check_name(name)
        .ok()
        .filter(|()| single)
        .map(|()| out.join(name))
        .with_context(|| {
            format!("refusing to write a report for the scenario name {name:?}: not one safe folder name")
        })
}

/// A plot written beside a report: its file stem and pixel size.
#[derive(Debug, Clone, Copy)]
pub struct Plot {
    pub file: &'static str,
    pub size: (u32, u32),
}

/// `path` with `.tmp` added to its name: where [`write_atomic`] writes first.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Streams `fill`'s output into a temporary file next to `path`, syncs it
/// and renames it over `path`, so an interrupted run never leaves a
/// half-written file. On failure the temporary file is removed too.
pub fn write_atomic(path: &Path, fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
    write_renamed(path, true, fill)
}

/// [`write_atomic`] of a byte string.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic(path, |w| w.write_all(bytes))
}

/// [`write_file`] without the sync before the rename, for files that are
/// checked when read back and made again when they do not read back whole
/// (a sweep's parts): a process that dies still leaves each whole or
/// absent; a power cut may leave one empty or missing, never another
/// file's bytes, and it is made again. Saves an fsync per file (measured:
/// about 15% of a 320-unit sweep's wall time on this project's CI machine).
pub fn write_file_unsynced(path: &Path, bytes: &[u8]) -> Result<()> {
    write_renamed(path, false, |w| w.write_all(bytes))
}

fn write_renamed(
    path: &Path,
    sync: bool,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let tmp = tmp_path(path);
    let _unfinished = crate::outdir::InProgress::unfinished(&tmp);
    let f = std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let written = (|| {
        let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
        fill(&mut w).with_context(|| format!("writing {}", tmp.display()))?;
        let f = w
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("writing {}", tmp.display()))?;
        if sync {
            f.sync_all().ok();
        }
        std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// `report.md`: what the paper shows, the comparison over seeds, and the
/// first seed's runs, programs and (for Figure 8) timeline in detail.
fn report_md(source: &Path, m: &Model<'_>, plots: &[Plot]) -> String {
    let (scenario, fig) = (m.scenario, m.figure);
    let mut s = String::new();
    let first = &m.results[0];
    let _ = writeln!(s, "# {}\n", scenario.title);
    if !scenario.description.trim().is_empty() {
        let _ = writeln!(s, "{}\n", scenario.description.trim());
    }
    let _ = writeln!(
        s,
        "Scenario `{}`, simulated by dyncore-sim (virtual time; deterministic) with {}: every run is run once \
         per seed, and each figure is the median over the seeds with its min–max range. \
         Reproduce with `cargo run --release -- run {} --seed {} --seeds {}`.\n",
        scenario.name,
        seeds_phrase(&fig.seeds),
        source.display(),
        first.seed,
        fig.seeds.len()
    );
    for p in plots {
        let _ = writeln!(s, "![{}]({}.png)\n", p.file, p.file);
    }
    let _ = writeln!(s, "## Results: {}\n", metric_name(fig.metric));
    s += &m.comparison.to_markdown();
    s.push('\n');
    let _ = writeln!(s, "{}\n", m.verdict);
    s += &crate::claims_view::markdown(m.claims);
    let _ = writeln!(s, "## Runs (seed {})\n", first.seed);
    s += &m.runs.to_markdown();
    s.push('\n');
    let _ = writeln!(s, "## Energy and wake-ups (seed {}, modelled)\n", first.seed);
    s += &m.energy.to_markdown();
    let _ = writeln!(s, "\n{}\n", ENERGY_NOTE);
    let _ = writeln!(s, "## Programs (seed {})\n", first.seed);
    s += &m.programs.to_markdown();
    s.push('\n');
    if let Some(t) = &m.timeline {
        let _ = writeln!(s, "## CPU allocation timeline ({}, seed {})\n", t.label, first.seed);
        s += &t.table.to_markdown();
        s.push('\n');
    }
    let _ = writeln!(s, "## Trace\n\n{}", trace_hint(first.seed));
    s
}

/// What the comparison with the paper came to, as one or two sentences.
pub fn paper_verdict(c: &PaperCounts, several: bool) -> String {
    if c.compared == 0 && c.unmatched == 0 {
        return "The paper states no number of this figure's metric; its claims are checked below.".into();
    }
    let range = if several && c.compared > 0 {
        format!(
            " The paper's value lies inside dyncore's range over seeds for {} of {}.",
            c.in_range, c.compared
        )
    } else {
        String::new()
    };
    let main = if c.compared == 0 {
        "No figure the paper states could be compared (see the claims below).".to_string()
    } else if c.differing == 0 {
        format!(
            "Every one of the {} paper values compared (of every kind) lies within its band (the paper's printed \
             precision, plus the seeds' range).",
            c.compared
        )
    } else {
        format!(
            "**{} of {} paper values compared (of every kind) lie outside their band** (the paper's printed \
             precision, plus the seeds' range); docs/results.md explains why.",
            c.differing, c.compared
        )
    };
    format!("{main}{range}")
}

/// One line per claim for `claims.lock`: scenario, claim id, kind and
/// verdict, tab-separated.
pub fn lock_lines(scenario: &str, claims: &Claims) -> Vec<String> {
    claims
        .claims
        .iter()
        .map(|c| {
            let verdict = match c.verdict {
                dyncore_sim::claims::Verdict::Held => "holds",
                dyncore_sim::claims::Verdict::Failed => "fails",
                dyncore_sim::claims::Verdict::NotEvaluated => "not-evaluated",
            };
            format!("{scenario}\t{}\t{}\t{verdict}", c.id, c.kind.word())
        })
        .collect()
}

/// `claims.lock`: a header with the summary line, then every claim's line
/// ([`lock_lines`]) in the order the scenarios ran. The shipped
/// `scenarios/claims.lock` is this file of the default run; the
/// `claims_lock` test compares the two.
pub fn lock_file(written: &[Written]) -> String {
    let mut total = PaperCounts::default();
    for w in written {
        total += w.counts;
    }
    let mut s = String::from(
        "# Every claim's verdict (issue 33): scenario, claim id, kind, verdict. Only predictions are counted.\n\
         # Regenerate after a change that moves a verdict: DYNCORE_BLESS=1 cargo test -p dyncore --test claims_lock\n",
    );
    let _ = writeln!(s, "# {}", total.sentence());
    for w in written {
        for l in &w.lock {
            s += l;
            s.push('\n');
        }
    }
    s
}

/// How to open a trace, for report.md and the page.
pub fn trace_hint(seed: u64) -> String {
    format!(
        "`trace.json` holds the first seed ({seed}) only: one trace per scenario. Open it at \
         <https://ui.perfetto.dev> (Open trace file) or in `chrome://tracing`: one process per run, \
         CPUs as lanes (with a reconfiguration lane under each CPU that fused or split), threads as \
         slices, fused execution objects as spans on their own lanes."
    )
}

pub fn runs_table(result: &ScenarioResult) -> Table {
    let mut t = Table::new(
        "",
        &[
            "run",
            "machine",
            "policy",
            "mechanism",
            "CPUs",
            "end (ms)",
            "finished",
            "mean util",
            "fuses",
            "splits",
            "reconfig (ms)",
            "fused (ms)",
            "proxy IPIs",
            "migrations",
            "events",
        ],
    );
    for r in &result.runs {
        let util = r.per_cpu.iter().map(|c| c.utilisation).sum::<f64>() / r.per_cpu.len().max(1) as f64;
        t.row(vec![
            r.label.clone(),
            r.machine.clone(),
            r.policy.clone(),
            r.reconfig_mechanism.clone(),
            r.cpus.to_string(),
            fmt_value(r.end_ns as f64 / 1e6),
            if r.finished { "yes".into() } else { "NO (hit max_time)".into() },
            format!("{:.1}%", util * 100.0),
            r.reconfig.fuses.to_string(),
            r.reconfig.splits.to_string(),
            fmt_value(r.reconfig.time_ns as f64 / 1e6),
            fmt_value(r.reconfig.fused_ns as f64 / 1e6),
            r.proxy_ipis.to_string(),
            r.migrations.to_string(),
            r.events.to_string(),
        ]);
    }
    t
}

/// What the energy table's figures are, under it.
pub const ENERGY_NOTE: &str = "Energy is modelled, not measured: each CPU's state over time (from the policy's \
     actions) priced by the power model (NewtOS Table 2): running at its duty, idle and online 2.27 W, parked \
     offline 0 W, reconfiguring or borrowed as a busy baseline core. Parks: standalone `Offline`s (CPUs \
     taken); wake-ups: standalone `Online`s, their latency from the request to the `ReconfigDone`; stalled: \
     thread time spent dispatched on a CPU that was reconfiguring (what fuses, splits and wake-ups cost the \
     threads).";

/// Each run's modelled energy and what parking CPUs cost.
pub fn energy_table(result: &ScenarioResult) -> Table {
    let mut t = Table::new(
        "",
        &[
            "run",
            "policy",
            "energy (J)",
            "mean power (W)",
            "idle online (ms)",
            "parked (ms)",
            "parks (CPUs)",
            "wake-ups",
            "wake-up mean (µs)",
            "wake-up max (µs)",
            "stalled (ms)",
        ],
    );
    for r in &result.runs {
        let e = &r.energy;
        let mean_us = if e.wakeups == 0 { 0.0 } else { e.wakeup_ns as f64 / e.wakeups as f64 / 1e3 };
        t.row(vec![
            r.label.clone(),
            r.policy.clone(),
            fmt_value(e.joules),
            fmt_value(e.mean_w),
            fmt_value(e.idle_ns as f64 / 1e6),
            fmt_value(e.offline_ns as f64 / 1e6),
            format!("{} ({})", e.parks, e.parked_cpus),
            e.wakeups.to_string(),
            fmt_value(mean_us),
            fmt_value(e.wakeup_max_ns as f64 / 1e3),
            fmt_value(e.stalled_ns as f64 / 1e6),
        ]);
    }
    t
}

pub fn programs_table(result: &ScenarioResult) -> Table {
    let mut t = Table::new(
        "",
        &[
            "run",
            "program",
            "instance",
            "threads",
            "start (ms)",
            "completion (ms, from its start)",
            "end (ms)",
            "speedup",
            "relative time",
            "fused (ms)",
        ],
    );
    let opt = |v: Option<f64>| v.map(fmt_value).unwrap_or_else(|| "-".into());
    for r in &result.runs {
        for p in &r.programs {
            t.row(vec![
                r.label.clone(),
                p.label.clone(),
                p.instance.to_string(),
                p.threads.to_string(),
                fmt_value(p.start_ns as f64 / 1e6),
                opt(p.completion_ns.map(|c| c as f64 / 1e6)),
                // The run's clock, as the timeline and the trace use.
                opt(p.finish_ns.map(|f| f as f64 / 1e6)),
                opt(p.speedup),
                opt(p.relative_time),
                fmt_value(p.fused_ns as f64 / 1e6),
            ]);
        }
    }
    t
}

/// The allocation timeline with its events and the paper's events.
pub fn timeline_table(rows: &[TimelineRow]) -> Table {
    let mut t = Table::new("", &["t (ms)", "event", "paper's event", "CPUs per program from then on"]);
    for r in rows {
        let what: Vec<String> = r.events.iter().map(|e| e.what.clone()).collect();
        let paper: Vec<String> =
            r.events.iter().filter_map(|e| e.paper.as_ref().map(|p| p.1.clone())).collect();
        let what = if what.is_empty() { "CPUs reallocated".into() } else { what.join("; ") };
        t.row(vec![fmt_value(r.t_ns as f64 / 1e6), what, paper.join(" "), r.cpus.clone()]);
    }
    t
}

/// The index table: one row per scenario.
pub fn index_table(written: &[Written], link: impl Fn(&Written) -> String) -> Table {
    let mut t = Table::new(
        "",
        &[
            "scenario",
            "title",
            "seeds",
            "paper values compared",
            "outside their band",
            "paper value in seed range",
            "not compared",
            "predictions held",
            "predictions failed",
            "fitted (not counted)",
            "inputs (not counted)",
            "all runs finished",
        ],
    );
    for w in written {
        t.row(vec![
            link(w),
            w.title.clone(),
            w.seeds.len().to_string(),
            w.counts.compared.to_string(),
            w.counts.differing.to_string(),
            w.counts.in_range.to_string(),
            w.counts.unmatched.to_string(),
            w.counts.predictions_held.to_string(),
            w.counts.predictions_failed.to_string(),
            w.counts.fitted.to_string(),
            w.counts.inputs.to_string(),
            if w.all_finished { "yes".into() } else { "NO".into() },
        ]);
    }
    t
}

/// `out/index.md` and `out/index.html` over the scenarios just run (and,
/// in the page, the bench reports found in `out/bench-*/`).
/// `what_ran` is one sentence saying what this invocation ran.
pub fn write_index(out: &Path, written: &[Written], what_ran: &str) -> Result<()> {
    let mut s = String::from("# dyncore report\n\n");
    let _ = writeln!(
        s,
        "{what_ran} Each figure is the median over the seeds, with its range. Open `index.html` for the page \
         with every plot.\n"
    );
    s += &index_table(written, |w| format!("[{}]({}/report.md)", w.name, w.name)).to_markdown();
    let mut total = PaperCounts::default();
    for w in written {
        total += w.counts;
    }
    let several = written.iter().any(|w| w.seeds.len() > 1);
    let _ = writeln!(s, "\n{}.", summary_sentence(&total, several));
    s += "\nWhere dyncore differs from the paper, docs/results.md explains why.\n";
    write_file(&out.join("index.md"), s.as_bytes())?;
    write_file(&out.join("claims.lock"), lock_file(written).as_bytes())?;
    write_file(&out.join("index.html"), crate::html::page(out, written, &total, what_ran)?.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writing side refuses what validation refuses, so a caller that
    /// skipped validation still cannot write outside `out`.
    #[test]
    fn report_dir_is_always_a_folder_directly_inside_out() {
        let out = Path::new("/some/out");
        for bad in ["../escape", "/tmp/abs", "..", ".", "", "a/b", "index.md", "a\nb", "x.tmp"] {
            assert!(report_dir(out, bad).is_err(), "{bad:?}");
        }
        assert_eq!(report_dir(out, "fig3-taxation").unwrap(), out.join("fig3-taxation"));
    }

    #[test]
    fn a_failed_atomic_write_leaves_no_tmp_file() {
        let d = tempfile::tempdir().unwrap();
        // The target is a folder: the rename fails after the file was written.
        let target = d.path().join("index.md");
        std::fs::create_dir(&target).unwrap();
        assert!(write_file(&target, b"x").is_err());
        assert!(!tmp_path(&target).exists());
        let ok = d.path().join("ok.md");
        write_file(&ok, b"y").unwrap();
        assert_eq!(std::fs::read(&ok).unwrap(), b"y");
        assert!(!tmp_path(&ok).exists());
    }
}
