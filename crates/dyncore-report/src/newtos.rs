//! NewtOS scenarios (`scenarios/newtos/*.toml`, `dyncore_sim::netstack`):
//! loading with file:line:col errors, running every run over the seeds,
//! and the report folder of each — `report.md` (dyncore beside the paper),
//! `results.json`, `trace.json` (the placement decisions of policy runs),
//! and `plot.{png,svg}`: bars (modelled power, resources or utilisation)
//! under a line of the bitrate with the paper's values as diamonds.
//!
//! Every figure is the median over the seeds with its min-max range; a
//! comparison with the paper is flagged when the median differs by more
//! than 25%.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Result;
use dyncore_core::placement::ComponentKind;
use dyncore_sim::claims::{Claims, Observed, Relation};
use dyncore_sim::netstack::run::{RunRow, run_scenario, seeds_of};
use dyncore_sim::netstack::scenario::NetScenario;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Serialize;

use crate::plot::{Chart, PALETTE, write_chart};
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
    let chart = NetChart { sc, rows: &rows };
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

/// Bars (the scenario's `report.bars`) under the bitrate as a line, the
/// paper's bitrates as diamonds.
struct NetChart<'a> {
    sc: &'a NetScenario,
    rows: &'a [RunRow],
}

impl NetChart<'_> {
    /// The bars the scenario asks for: their axis title and each series.
    fn bar_series(&self) -> (&'static str, Vec<(String, Vec<f64>)>) {
        let kinds: Vec<ComponentKind> = ComponentKind::ALL
            .into_iter()
            .filter(|k| self.rows.iter().any(|r| r.busy.iter().any(|(c, _)| c == k)))
            .collect();
        match self.sc.report.bars.as_str() {
            "utilisation" if !kinds.is_empty() => (
                "busy fraction of its CPU",
                kinds
                    .iter()
                    .map(|k| (k.name().to_string(), self.rows.iter().map(|r| r.busy_of(*k)).collect()))
                    .collect(),
            ),
            "resources" => (
                "resources (% of 3 × 1600 MHz)",
                vec![("resources".into(), self.rows.iter().map(|r| r.resources * 100.0).collect())],
            ),
            _ => {
                ("W (modelled)", vec![("power".into(), self.rows.iter().map(|r| r.power_w.median).collect())])
            }
        }
    }
}

impl NetChart<'_> {
    /// The paper's bitrates (a value it states, Gbit/s) at each run's index.
    fn paper_gbps(&self) -> Vec<(usize, f64)> {
        self.sc
            .paper
            .iter()
            .filter(|p| p.metric == "mbps" && p.relation.unwrap_or_default() == Relation::About)
            .filter_map(|p| {
                let v = p.value?;
                self.rows.iter().position(|r| r.label == p.run).map(|i| (i, v / 1000.0))
            })
            .collect()
    }
}

impl Chart for NetChart<'_> {
    fn size(&self) -> (u32, u32) {
        // Wide enough that the x labels (about 7 px a character) do not run
        // into each other.
        let longest = self.rows.iter().map(|r| r.label.chars().count()).max().unwrap_or(0) as u32;
        ((self.rows.len() as u32 * (longest * 7 + 16)).clamp(1000, 2000), 700)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let e = |x| anyhow::anyhow!("{x:?}");
        root.fill(&WHITE).map_err(e)?;
        let (top, bottom) = root.split_vertically(340);
        let n = self.rows.len();
        let labels: Vec<String> = self.rows.iter().map(|r| r.label.clone()).collect();
        let xr = -0.5..(n as f64 - 0.5);
        let fmt_x = |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
                labels[i as usize].clone()
            } else {
                String::new()
            }
        };
        // Bitrate.
        let paper = self.paper_gbps();
        let ymax = self
            .rows
            .iter()
            .map(|r| r.mbps.max / 1000.0)
            .chain(paper.iter().map(|p| p.1))
            .fold(1.0, f64::max)
            * 1.15;
        let mut c = ChartBuilder::on(&top)
            .caption(&self.sc.title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(20)
            .y_label_area_size(60)
            .build_cartesian_2d(xr.clone(), 0.0..ymax)
            .map_err(e)?;
        c.configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .x_labels(n.max(2))
            .x_label_formatter(&|_| String::new())
            .y_desc("Gbit/s (line: dyncore median, bars: range; ◆ paper)")
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(e)?;
        let line: Vec<(f64, f64)> =
            self.rows.iter().enumerate().map(|(i, r)| (i as f64, r.mbps.median / 1000.0)).collect();
        // One line per group of runs (a cluster, a governor) when the runs
        // are grouped; one line through all of them when every group is a
        // single run.
        let grouped = self.rows.windows(2).any(|w| w[0].group == w[1].group);
        let mut start = 0;
        for i in 1..=self.rows.len() {
            if i == self.rows.len() || (grouped && self.rows[i].group != self.rows[i - 1].group) {
                c.draw_series(LineSeries::new(line[start..i].to_vec(), PALETTE[0].stroke_width(2)))
                    .map_err(e)?;
                start = i;
            }
        }
        c.draw_series(line.iter().map(|&p| Circle::new(p, 4, PALETTE[0].filled()))).map_err(e)?;
        c.draw_series(self.rows.iter().enumerate().map(|(i, r)| {
            PathElement::new(
                vec![(i as f64, r.mbps.min / 1000.0), (i as f64, r.mbps.max / 1000.0)],
                PALETTE[0],
            )
        }))
        .map_err(e)?;
        let d = 0.08;
        let dy = ymax * 0.025;
        c.draw_series(paper.iter().map(|&(i, v)| {
            let x = i as f64;
            Polygon::new(vec![(x - d, v), (x, v + dy), (x + d, v), (x, v - dy)], PALETTE[7].filled())
        }))
        .map_err(e)?;
        // Bars.
        let (desc, series) = self.bar_series();
        // Headroom above the bars for the legend.
        let bmax = series.iter().flat_map(|(_, v)| v.iter().copied()).fold(0.1, f64::max) * 1.45;
        let mut b = ChartBuilder::on(&bottom)
            .margin(10)
            .x_label_area_size(70)
            .y_label_area_size(60)
            .build_cartesian_2d(xr, 0.0..bmax)
            .map_err(e)?;
        b.configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .x_labels(n.max(2))
            .x_label_formatter(&fmt_x)
            .x_desc(&self.sc.report.x_title)
            .y_desc(desc)
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(e)?;
        let k = series.len() as f64;
        let w = 0.7 / k;
        for (j, (name, v)) in series.iter().enumerate() {
            let col = PALETTE[(j + 1) % PALETTE.len()];
            b.draw_series(v.iter().enumerate().map(|(i, &y)| {
                let x0 = i as f64 - 0.35 + j as f64 * w;
                Rectangle::new([(x0, 0.0), (x0 + w * 0.95, y)], col.filled())
            }))
            .map_err(e)?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], col.filled()));
        }
        b.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(e)?;
        Ok(())
    }
}
