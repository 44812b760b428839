//! The report folder: per scenario `report.md`, `results.json`, `plot.png` /
//! `plot.svg` (shaped like the paper's figure) and `trace.json` (Perfetto /
//! chrome://tracing); and `index.md` over all scenarios.
//!
//! Everything written here is a function of the scenario and its result
//! only (no dates, no host names), so the same scenario and seed give the
//! same bytes.

use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use dyncore_sim::ScenarioResult;
use dyncore_sim::scenario::{PlotKind, Scenario};
use serde::Serialize;

use crate::figure::{Figure, comparison_table, fmt_value, metric_name};
use crate::plot::{BarChart, Series, StackedChart, write_bar_chart, write_chart};
use crate::table::Table;

/// What a scenario's report folder holds, for the index.
#[derive(Debug, Clone)]
pub struct Written {
    pub name: String,
    pub title: String,
    /// Cells with a paper figure, and how many of them differ by more than 25%.
    pub compared: usize,
    pub differing: usize,
    pub all_finished: bool,
}

#[derive(Serialize)]
struct ResultsJson<'a> {
    scenario: &'a str,
    title: &'a str,
    seed: u64,
    metric: &'static str,
    figure: FigureJson<'a>,
    runs: &'a [dyncore_sim::RunResult],
    /// The scenario as read (after defaults), so a result can be re-run.
    input: &'a Scenario,
}

#[derive(Serialize)]
struct FigureJson<'a> {
    x: &'static str,
    categories: &'a [String],
    series: &'a [String],
    values: &'a [Vec<Option<f64>>],
    paper: &'a [Vec<Option<f64>>],
}

/// The results as deterministic JSON text.
pub fn results_json(scenario: &Scenario, result: &ScenarioResult, fig: &Figure) -> Result<String> {
    let doc = ResultsJson {
        scenario: &result.name,
        title: &result.title,
        seed: result.seed,
        metric: metric_name(fig.metric),
        figure: FigureJson {
            x: fig.x_name,
            categories: &fig.categories,
            series: &fig.series,
            values: &fig.values,
            paper: &fig.paper,
        },
        runs: &result.runs,
        input: scenario,
    };
    let mut s = serde_json::to_string_pretty(&doc)?;
    s.push('\n');
    Ok(s)
}

/// Writes `out/<name>/…` for one scenario read from `source`, whose figure
/// is `fig` (built once by the caller, who also prints it).
pub fn write_scenario(
    out: &Path,
    source: &Path,
    scenario: &Scenario,
    result: &ScenarioResult,
    fig: &Figure,
) -> Result<Written> {
    let dir = report_dir(out, &scenario.name)?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;

    write_file(&dir.join("results.json"), results_json(scenario, result, fig)?.as_bytes())?;

    let bars = bar_chart(scenario, fig);
    let plots = match scenario.report.kind {
        PlotKind::Bars => {
            write_bar_chart(&dir.join("plot"), &bars)?;
            vec!["plot.png"]
        }
        PlotKind::Allocation => {
            write_chart(&dir.join("plot"), &allocation_chart(scenario, result))?;
            write_bar_chart(&dir.join("plot-bars"), &bars)?;
            vec!["plot.png", "plot-bars.png"]
        }
    };

    crate::trace::write_chrome_trace(&dir.join("trace.json"), result)?;
    write_file(&dir.join("report.md"), report_md(source, scenario, result, fig, &plots).as_bytes())?;

    let (compared, differing) = fig.paper_counts();
    Ok(Written {
        name: scenario.name.clone(),
        title: scenario.title.clone(),
        compared,
        differing,
        all_finished: result.runs.iter().all(|r| r.finished),
    })
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

/// `path` with `.tmp` added to its name: where [`write_atomic`] writes first.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Streams `fill`'s output into a temporary file next to `path` and renames
/// it over `path`, so an interrupted run never leaves a half-written file.
/// On failure the temporary file is removed too.
pub fn write_atomic(path: &Path, fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<()> {
    let tmp = tmp_path(path);
    let f = std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let written = (|| {
        let mut w = std::io::BufWriter::with_capacity(1 << 16, f);
        fill(&mut w).with_context(|| format!("writing {}", tmp.display()))?;
        let f = w
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(|| format!("writing {}", tmp.display()))?;
        f.sync_all().ok();
        std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// [`write_atomic`] of a byte string.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic(path, |w| w.write_all(bytes))
}

fn bar_chart(scenario: &Scenario, fig: &Figure) -> BarChart {
    BarChart {
        title: scenario.title.clone(),
        y_label: metric_name(fig.metric).to_string(),
        categories: fig.categories.clone(),
        series: fig
            .series
            .iter()
            .enumerate()
            .map(|(si, name)| Series {
                name: name.clone(),
                values: fig.values[si].iter().map(|v| v.unwrap_or(f64::NAN)).collect(),
            })
            .collect(),
        log_y: false,
    }
}

/// The run whose allocation timeline the report shows.
fn timeline_run<'a>(scenario: &Scenario, result: &'a ScenarioResult) -> &'a dyncore_sim::RunResult {
    scenario
        .report
        .timeline_run
        .as_ref()
        .and_then(|l| result.runs.iter().find(|r| &r.label == l))
        .unwrap_or(&result.runs[0])
}

/// CPUs per program over time, stacked, for the report's timeline run.
fn allocation_chart(scenario: &Scenario, result: &ScenarioResult) -> StackedChart {
    let run = timeline_run(scenario, result);
    let mut names: Vec<String> = Vec::new();
    for s in &run.allocation {
        for (p, _) in &s.cpus_by_program {
            if !names.contains(p) {
                names.push(p.clone());
            }
        }
    }
    let ms = |t: u64| t as f64 / 1e6;
    let mut xs: Vec<f64> = run.allocation.iter().map(|s| ms(s.t_ns)).collect();
    xs.push(ms(run.end_ns.max(run.allocation.last().map_or(0, |s| s.t_ns))));
    let series = names
        .iter()
        .map(|name| {
            let vals = run
                .allocation
                .iter()
                .map(|s| {
                    s.cpus_by_program.iter().find(|(p, _)| p == name).map_or(0.0, |(_, c)| f64::from(*c))
                })
                .collect();
            (name.clone(), vals)
        })
        .collect();
    StackedChart {
        title: format!("{} ({})", scenario.title, run.label),
        x_label: "time (virtual ms)".into(),
        y_label: "CPUs in each program's execution object".into(),
        xs,
        series,
        capacity: Some(run.cpus as f64),
    }
}

fn report_md(
    source: &Path,
    scenario: &Scenario,
    result: &ScenarioResult,
    fig: &Figure,
    plots: &[&str],
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {}\n", scenario.title);
    if !scenario.description.trim().is_empty() {
        let _ = writeln!(s, "{}\n", scenario.description.trim());
    }
    let _ = writeln!(
        s,
        "Scenario `{}`, seed {}, simulated by dyncore-sim (virtual time; deterministic). \
         Reproduce with `cargo run --release -- run {} --seed {}`.\n",
        scenario.name,
        result.seed,
        source.display(),
        result.seed
    );
    for p in plots {
        let _ = writeln!(s, "![{}]({p})\n", p.trim_end_matches(".png"));
    }
    if !scenario.expect.is_empty() {
        let _ = writeln!(s, "## What the paper shows\n");
        for e in &scenario.expect {
            let _ = writeln!(s, "* {e}");
        }
        s.push('\n');
    }
    let _ = writeln!(s, "## Results: {}\n", metric_name(fig.metric));
    s += &comparison_table("", fig).to_markdown();
    s.push('\n');
    if fig.has_paper() {
        let (compared, differing) = fig.paper_counts();
        if compared == 0 {
            let _ = writeln!(
                s,
                "No figure the paper states could be compared: dyncore has no value where the paper has one.\n"
            );
        } else if differing == 0 {
            let _ = writeln!(s, "Every figure the paper states is within 25% of dyncore's.\n");
        } else {
            let _ = writeln!(
                s,
                "**{differing} of {compared} figures the paper states differ from dyncore's by more than 25%**; \
                 docs/results.md explains why.\n",
            );
        }
        for f in fig.unmatched_paper(scenario) {
            let _ = writeln!(
                s,
                "Note: the paper figure for x = `{}`, series = `{}` matches no result.\n",
                f.x, f.series
            );
        }
    } else {
        let _ = writeln!(
            s,
            "The paper gives this figure as a plot only; compare the shape with the list above.\n"
        );
    }

    let _ = writeln!(s, "## Runs\n");
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
    s += &t.to_markdown();
    s.push('\n');

    let _ = writeln!(s, "## Programs\n");
    let mut t = Table::new(
        "",
        &[
            "run",
            "program",
            "instance",
            "threads",
            "start (ms)",
            "completion (ms)",
            "speedup",
            "relative time",
            "fused (ms)",
        ],
    );
    for r in &result.runs {
        for p in &r.programs {
            let opt = |v: Option<f64>| v.map(fmt_value).unwrap_or_else(|| "-".into());
            t.row(vec![
                r.label.clone(),
                p.label.clone(),
                p.instance.to_string(),
                p.threads.to_string(),
                fmt_value(p.start_ns as f64 / 1e6),
                opt(p.completion_ns.map(|c| c as f64 / 1e6)),
                opt(p.speedup),
                opt(p.relative_time),
                fmt_value(p.fused_ns as f64 / 1e6),
            ]);
        }
    }
    s += &t.to_markdown();
    s.push('\n');
    if scenario.report.kind == PlotKind::Allocation {
        let run = timeline_run(scenario, result);
        let _ = writeln!(s, "## CPU allocation timeline ({})\n", run.label);
        let mut t = Table::new("", &["t (ms)", "CPUs per program"]);
        for a in &run.allocation {
            let cells: Vec<String> = a.cpus_by_program.iter().map(|(p, c)| format!("{p}: {c}")).collect();
            t.row(vec![fmt_value(a.t_ns as f64 / 1e6), cells.join(", ")]);
        }
        s += &t.to_markdown();
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "`trace.json` opens in <https://ui.perfetto.dev> or `chrome://tracing`: one process per run, \
         CPUs as lanes (with a reconfiguration lane under each CPU that fused or split), threads as slices, fused execution objects as spans on their own lanes."
    );
    s
}

/// `out/index.md`: what was run (`what_ran`, one sentence), then one line
/// per scenario.
pub fn write_index(out: &Path, written: &[Written], what_ran: &str) -> Result<()> {
    let mut s = format!("# dyncore report\n\n{what_ran}\n\n");
    let mut t = Table::new(
        "",
        &["scenario", "title", "paper figures compared", "differ by >25%", "all runs finished"],
    );
    for w in written {
        t.row(vec![
            format!("[{}]({}/report.md)", w.name, w.name),
            w.title.clone(),
            w.compared.to_string(),
            w.differing.to_string(),
            if w.all_finished { "yes".into() } else { "NO".into() },
        ]);
    }
    s += &t.to_markdown();
    s += "\nWhere dyncore differs from the paper, docs/results.md explains why.\n";
    write_file(&out.join("index.md"), s.as_bytes())
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
