//! NewtOS scenarios (`scenarios/newtos/*.toml`, `dyncore_sim::netstack`):
//! loading with file:line:col errors, running every run over the seeds,
//! and the report folder of each — `report.md` (dyncore beside the paper),
//! `results.json`, `trace.json` (the placement decisions of policy runs),
//! and `plot.{png,svg}`: the bitrate over bars of modelled power, resources
//! or utilisation, drawn by the Chameleon figures' builder (one legend,
//! whiskers for the seeds' range, the paper's values as hollow diamonds).
//!
//! Every figure is the median over the seeds with its min-max range; a
//! comparison with the paper is flagged when the paper's value lies
//! outside its band (its printed precision, plus the seeds' range).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Result;
use dyncore_core::placement::ComponentKind;
use dyncore_sim::claims::{Claims, Observed, Relation};
use dyncore_sim::netstack::run::{RunRow, run_scenario, seeds_of};
use dyncore_sim::netstack::scenario::NetScenario;
use serde::Serialize;

use crate::plot::bars::{BarFigure, BarValue, Layout, Panel};
use crate::plot::write_chart;
use crate::report::{Written, paper_verdict, write_file};
use crate::table::{Table, escape_html};
use dyncore_scenario::load::{LoadError, error_in, read_text, syntax_error_with};

/// The shipped NewtOS scenarios' folder.
pub fn default_dir() -> PathBuf {
    dyncore_scenario::load::default_dir().join("newtos")
}

/// Reads, parses and validates a network-stack scenario.
pub fn load(path: &Path) -> Result<NetScenario, LoadError> {
    parse(path, &read_text(path)?)
}

/// Parses and validates network-stack scenario text (`path` names the file
/// in errors).
pub fn parse(path: &Path, text: &str) -> Result<NetScenario, LoadError> {
    // Its own schema: Chameleon's table of accepted values does not apply.
    let sc = NetScenario::from_toml(text).map_err(|e| syntax_error_with(path, text, &e, &|_| None))?;
    sc.validate().map_err(|e| error_in(path, text, &e.path, e.message))?;
    Ok(sc)
}

#[derive(Serialize)]
struct ResultsJson<'a> {
    scenario: &'a str,
    title: &'a str,
    seeds: Vec<u64>,
    runs: &'a [RunRow],
    /// Every claim of the paper with its checks and verdicts.
    claims: &'a Claims,
}

/// What a scenario's report shows, for the terminal.
pub struct NetReport {
    pub rows: Vec<RunRow>,
    pub claims: Claims,
}

/// Runs `sc` and writes `<out>/<name>/`.
pub fn write_scenario(out: &Path, path: &Path, sc: &NetScenario) -> Result<(Written, NetReport)> {
    let seeds = seeds_of(sc);
    let rows = run_scenario(sc, &seeds);
    let claims = dyncore_sim::netstack::claims::check(sc, &rows);
    // Written aside and renamed into place whole (`outdir`).
    let staged = crate::outdir::stage(out, &sc.name)?;
    let dir = staged.path().to_path_buf();
    let json = ResultsJson {
        scenario: &sc.name,
        title: &sc.title,
        seeds: seeds.clone(),
        runs: &rows,
        claims: &claims,
    };
    write_file(&dir.join("results.json"), serde_json::to_string_pretty(&json)?.as_bytes())?;
    let trace: Vec<_> = rows
        .iter()
        .filter(|r| !r.decisions.is_empty())
        .map(|r| serde_json::json!({"run": r.label, "decisions": r.decisions}))
        .collect();
    write_file(&dir.join("trace.json"), serde_json::to_string_pretty(&trace)?.as_bytes())?;
    let chart = net_figure(sc, &rows, seeds.len());
    write_chart(&dir.join("plot"), &chart)?;
    let md = report_md(path, sc, &rows, &claims, &seeds);
    write_file(&dir.join("report.md"), md.as_bytes())?;
    let k = claims.counts();
    let html = format!(
        "<section id=\"{n}\">\n<h2>{t}</h2>\n<p class=\"meta\"><code>{n}</code> · simulated (NewtOS model), {s} seeds · \
         <a href=\"{n}/report.md\">report.md</a> · <a href=\"{n}/results.json\">results.json</a></p>\n<p>{d}</p>\n\
         <figure><img src=\"{n}/plot.png\" width=\"{w}\" height=\"{h}\" alt=\"{t}\"></figure>\n{tab}{verdict}{claims}</section>\n",
        n = escape_html(&sc.name),
        t = escape_html(&sc.title),
        s = seeds.len(),
        d = escape_html(sc.description.trim()),
        w = chart.size().0,
        h = chart.size().1,
        tab = runs_table(&rows).to_html(|_| None),
        verdict = crate::markdown::to_html(&paper_verdict(&k, seeds.len() > 1), 0, ""),
        claims = crate::claims_view::html(&claims),
    );
    staged.commit()?;
    let w = Written {
        name: sc.name.clone(),
        title: sc.title.clone(),
        seeds,
        counts: k,
        lock: crate::report::lock_lines(&sc.name, &claims),
        all_finished: true,
        html,
    };
    Ok((w, NetReport { rows, claims }))
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn spread_text(s: &Observed, digits: usize) -> String {
    // Ends that print alike are no range ("where they differ" as printed).
    let (lo, hi) = (format!("{:.digits$}", s.min), format!("{:.digits$}", s.max));
    if lo == hi { format!("{:.digits$}", s.median) } else { format!("{:.digits$} [{lo}–{hi}]", s.median) }
}

fn runs_table(rows: &[RunRow]) -> Table {
    let policy = rows.iter().any(|r| r.energy_j.is_some());
    let mut h = vec!["run", "layout (components@MHz)", "Mbps", "W (modelled)"];
    if policy {
        h.extend(["energy J", "reaction ms"]);
    } else {
        h.extend(["resources", "utilisation", "asleep (idle state: share of the time)", "governor"]);
    }
    let mut t = Table::new("", &h);
    for r in rows {
        let mut cells =
            vec![r.label.clone(), r.layout.clone(), spread_text(&r.mbps, 0), spread_text(&r.power_w, 1)];
        if policy {
            cells.push(r.energy_j.as_ref().map_or("–".into(), |e| spread_text(e, 3)));
            let re: Vec<String> =
                r.reactions_ms.iter().map(|x| x.map_or("never".into(), |v| format!("{v:.1}"))).collect();
            cells.push(if re.is_empty() { "–".into() } else { re.join(", ") });
        } else {
            cells.push(pct(r.resources));
            let b: Vec<String> = r.busy.iter().map(|(k, b)| format!("{k} {}", pct(b.median))).collect();
            cells.push(b.join(", "));
            let names = dyncore_sim::netstack::idle::state_names();
            let asleep: Vec<String> = r
                .idle
                .iter()
                .map(|(comps, res)| {
                    let states: Vec<String> = names
                        .iter()
                        .zip(res)
                        .filter(|(_, f)| **f >= 0.005)
                        .map(|(n, f)| format!("{n} {}", pct(*f)))
                        .collect();
                    let states = if states.is_empty() { "–".to_string() } else { states.join(" ") };
                    format!("{comps}: {states}")
                })
                .collect();
            cells.push(asleep.join(", "));
            cells.push(r.governor.to_string());
        }
        t.row(cells);
    }
    t
}

fn report_md(path: &Path, sc: &NetScenario, rows: &[RunRow], claims: &Claims, seeds: &[u64]) -> String {
    let mut s = format!("# {}\n\n", sc.title);
    let _ = writeln!(
        s,
        "Scenario `{}` ({}), simulated by the NewtOS model (`dyncore_sim::netstack`), seeds {}–{}; \
         each figure is the median over the seeds, [min–max] where they differ. Power is **modelled** \
         (`dyncore_core::power`, fitted to Table 2's 80 and 34 W), per idle state (C6 power-gated). A sleeping \
         core enters the Nehalem idle state its governor picks (`dyncore_core::idle`: `menu` picks the deepest \
         state whose target residency fits the predicted idle period) and pays its exit latency to wake. \
         Reproduce with `cargo run --release -- run {} --seed {} --seeds {}`.\n",
        sc.name,
        path.display(),
        seeds[0],
        seeds[seeds.len() - 1],
        path.display(),
        seeds[0],
        seeds.len()
    );
    if !sc.description.trim().is_empty() {
        let _ = writeln!(s, "{}\n", sc.description.trim());
    }
    s += "![plot](plot.png)\n\n## Runs\n\n";
    s += &runs_table(rows).to_markdown();
    let _ = writeln!(s, "\n{}\n", paper_verdict(&claims.counts(), seeds.len() > 1));
    s += &crate::claims_view::markdown(claims);
    let with_decisions: Vec<&RunRow> = rows.iter().filter(|r| !r.decisions.is_empty()).collect();
    if !with_decisions.is_empty() {
        s += "\n## Placement decisions (first seed)\n\n";
        for r in with_decisions {
            let _ = writeln!(s, "**{}** ({} decisions):\n", r.label, r.decisions.len());
            for (t, d) in r.decisions.iter().take(12) {
                let _ = writeln!(s, "* {t:.1} ms: {d}");
            }
            if r.decisions.len() > 12 {
                let _ = writeln!(s, "* ... {} more in trace.json", r.decisions.len() - 12);
            }
            s += "\n";
        }
    }
    s
}

/// The scenario's figure, drawn by the same builder as the Chameleon
/// figures ([`BarFigure`]): the bitrate in the top panel, the scenario's
/// `report.bars` (utilisation per component, resources, or modelled power)
/// in the bottom one; bars are medians over the seeds, whiskers the min–max
/// range, hollow diamonds the paper's bitrates, with one legend above.
fn net_figure(sc: &NetScenario, rows: &[RunRow], seeds: usize) -> BarFigure {
    let same = |v: f64| Some(BarValue { value: v, low: v, high: v });
    let spread =
        |o: &Observed, k: f64| Some(BarValue { value: o.median * k, low: o.min * k, high: o.max * k });
    let kinds: Vec<ComponentKind> = ComponentKind::ALL
        .into_iter()
        .filter(|k| rows.iter().any(|r| r.busy.iter().any(|(c, _)| c == k)))
        .collect();
    type Bars = Vec<(String, Vec<Option<BarValue>>)>;
    let (what, unit, bars): (&str, &str, Bars) = match sc.report.bars.as_str() {
        "utilisation" if !kinds.is_empty() => (
            "utilisation: each component's busy fraction of its CPU",
            "busy fraction",
            kinds
                .iter()
                .map(|k| {
                    let v = rows
                        .iter()
                        .map(|r| r.busy.iter().find(|(c, _)| c == k).and_then(|(_, o)| spread(o, 1.0)))
                        .collect();
                    (format!("{} busy", k.name()), v)
                })
                .collect(),
        ),
        "resources" => (
            "resources used",
            "% of 3 × 1600 MHz",
            vec![("resources (%)".into(), rows.iter().map(|r| same(r.resources * 100.0)).collect())],
        ),
        _ => (
            "power (modelled)",
            "W",
            vec![("power (W)".into(), rows.iter().map(|r| spread(&r.power_w, 1.0)).collect())],
        ),
    };
    let mut series = vec!["bitrate (Gbit/s)".to_string()];
    let mut values = vec![rows.iter().map(|r| spread(&r.mbps, 1e-3)).collect::<Vec<_>>()];
    let mut paper = vec![vec![None; rows.len()]];
    for p in
        sc.paper.iter().filter(|p| p.metric == "mbps" && p.relation.unwrap_or_default() == Relation::About)
    {
        if let (Some(v), Some(i)) = (p.value, rows.iter().position(|r| r.label == p.run)) {
            paper[0][i] = Some(v / 1000.0);
        }
    }
    for (name, v) in bars {
        series.push(name);
        values.push(v);
        paper.push(vec![None; rows.len()]);
    }
    let all: Vec<usize> = (0..rows.len()).collect();
    let panel = |title: &str, unit: &str, series: Vec<usize>| Panel {
        title: title.to_string(),
        categories: all.clone(),
        series,
        reference: None,
        y_label: Some(unit.to_string()),
    };
    BarFigure {
        title: sc.title.clone(),
        subtitle: format!(
            "dyncore-sim (NewtOS model), {seeds} seed{}{}",
            if seeds == 1 { "" } else { "s" },
            if seeds > 1 { "; bars are medians" } else { "" }
        ),
        x_label: sc.report.x_title.clone(),
        y_label: "Gbit/s".into(),
        categories: rows.iter().map(|r| r.label.clone()).collect(),
        panels: vec![panel("bitrate", "Gbit/s", vec![0]), panel(what, unit, (1..series.len()).collect())],
        series,
        values,
        paper,
        spread_label: (seeds > 1).then(|| format!("min–max over {seeds} seeds")),
        layout: Layout::Rows,
    }
}
