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
use dyncore_sim::netstack::policy::simulate_policy;
use dyncore_sim::netstack::scenario::{NetRun, NetScenario};
use dyncore_sim::netstack::{RunInput, simulate};
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::Serialize;

use crate::figure::{DIFF_FLAG, PaperCounts};
use crate::plot::{Chart, PALETTE, write_chart};
use crate::report::{Written, write_file};
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

/// A number over the seeds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    fn of(mut v: Vec<f64>) -> Spread {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) };
        Spread { median, min: v[0], max: v[n - 1] }
    }
    /// `x` to the precision it is printed with lies in the range.
    fn contains(&self, x: f64) -> bool {
        let h = crate::figure::printed_half_unit(x);
        self.min <= x + h && x - h <= self.max
    }
}

/// One run's results over the seeds.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    pub label: String,
    pub group: String,
    pub layout: String,
    pub mbps: Spread,
    pub power_w: Spread,
    pub resources: f64,
    /// Median busy fraction of each component.
    pub busy: Vec<(ComponentKind, f64)>,
    /// Policy runs: energy (J) and reaction times (ms, first seed).
    pub energy_j: Option<Spread>,
    pub reactions_ms: Vec<Option<f64>>,
    /// Policy runs: the decisions of the first seed.
    pub decisions: Vec<(f64, String)>,
    pub packets: u64,
}

fn layout_text(r: &NetRun) -> String {
    if let Some(p) = r.policy {
        return format!("{} on {} CPUs", p.name(), r.policy_cpus.unwrap_or(3));
    }
    r.cpus
        .iter()
        .map(|c| {
            let names: Vec<&str> = c.components.iter().map(|k| k.name()).collect();
            let ht = c.core.map(|k| format!(" (core {k})")).unwrap_or_default();
            format!("{}@{}{ht}", names.join("+"), c.mhz)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs every run of `sc` over its seeds.
pub fn run_scenario(sc: &NetScenario) -> Vec<RunRow> {
    let seeds: Vec<u64> = (0..u64::from(sc.seeds)).map(|i| sc.seed + i).collect();
    let mut rows = Vec::new();
    for r in &sc.runs {
        let mut mbps = Vec::new();
        let mut power = Vec::new();
        let mut energy = Vec::new();
        let mut busy: Vec<Vec<f64>> = vec![Vec::new(); ComponentKind::ALL.len()];
        let mut reactions = Vec::new();
        let mut decisions = Vec::new();
        let mut resources = 0.0;
        let mut packets = 0;
        for (i, &seed) in seeds.iter().enumerate() {
            if r.policy.is_some() {
                let o = simulate_policy(&sc.stack, &sc.net, r, seed);
                mbps.push(o.mbps);
                power.push(o.power_w);
                energy.push(o.energy_j);
                packets += o.packets;
                if i == 0 {
                    reactions = o.reactions_ms;
                    decisions = o.decisions;
                }
            } else {
                let o = simulate(&RunInput {
                    costs: &sc.stack,
                    net: &sc.net,
                    cpus: &r.cpus,
                    load: &r.load,
                    seed,
                    beside: Default::default(),
                });
                mbps.push(o.mbps);
                power.push(o.power_w);
                resources = o.resources;
                packets += o.packets;
                for (k, v) in &o.components {
                    let idx = ComponentKind::ALL.iter().position(|x| x == k).expect("a known component");
                    busy[idx].push(v.busy);
                }
            }
        }
        let busy = ComponentKind::ALL
            .iter()
            .zip(busy)
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (*k, Spread::of(v).median))
            .collect();
        rows.push(RunRow {
            label: r.label.clone(),
            group: r.group.clone().unwrap_or_else(|| r.label.clone()),
            layout: layout_text(r),
            mbps: Spread::of(mbps),
            power_w: Spread::of(power),
            resources,
            busy,
            energy_j: (!energy.is_empty()).then(|| Spread::of(energy)),
            reactions_ms: reactions,
            decisions,
            packets,
        });
    }
    rows
}

/// A `[[paper]]` comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Compared {
    pub run: String,
    pub metric: String,
    pub paper: f64,
    pub dyncore: Spread,
    pub source: String,
}

impl Compared {
    fn rel(&self) -> f64 {
        (self.dyncore.median - self.paper) / self.paper
    }
}

fn compare(sc: &NetScenario, rows: &[RunRow]) -> Vec<Compared> {
    let row = |l: &str| rows.iter().find(|r| r.label == l).expect("validated: the run exists");
    sc.paper
        .iter()
        .map(|p| {
            let r = row(&p.run);
            let one = |v: f64| Spread { median: v, min: v, max: v };
            let dyncore = match p.metric.as_str() {
                "mbps" => r.mbps,
                "power_w" => r.power_w,
                "resources" => one(r.resources),
                "relative_mbps" => {
                    let base = row(p.of.as_deref().expect("validated")).mbps.median;
                    Spread { median: r.mbps.median / base, min: r.mbps.min / base, max: r.mbps.max / base }
                }
                m => {
                    let k: ComponentKind = m.trim_start_matches("busy.").parse().expect("validated");
                    one(r.busy.iter().find(|(c, _)| *c == k).map_or(0.0, |(_, b)| *b))
                }
            };
            Compared {
                run: p.run.clone(),
                metric: p.metric.clone(),
                paper: p.value,
                dyncore,
                source: p.source.clone(),
            }
        })
        .collect()
}

fn counts(c: &[Compared]) -> PaperCounts {
    let mut k = PaperCounts::default();
    for x in c {
        if x.paper == 0.0 || !x.paper.is_finite() {
            k.unmatched += 1;
            continue;
        }
        k.compared += 1;
        if x.rel().abs() > DIFF_FLAG {
            k.differing += 1;
        }
        if x.dyncore.contains(x.paper) {
            k.in_range += 1;
        }
    }
    k
}

#[derive(Serialize)]
struct ResultsJson<'a> {
    scenario: &'a str,
    title: &'a str,
    seeds: Vec<u64>,
    runs: &'a [RunRow],
    paper: &'a [Compared],
}

/// Runs `sc` and writes `<out>/<name>/`.
pub fn write_scenario(out: &Path, path: &Path, sc: &NetScenario) -> Result<(Written, Vec<RunRow>)> {
    let rows = run_scenario(sc);
    let compared = compare(sc, &rows);
    // Written aside and renamed into place whole (`outdir`).
    let staged = crate::outdir::stage(out, &sc.name)?;
    let dir = staged.path().to_path_buf();
    let seeds: Vec<u64> = (0..u64::from(sc.seeds)).map(|i| sc.seed + i).collect();
    let json = ResultsJson {
        scenario: &sc.name,
        title: &sc.title,
        seeds: seeds.clone(),
        runs: &rows,
        paper: &compared,
    };
    write_file(&dir.join("results.json"), serde_json::to_string_pretty(&json)?.as_bytes())?;
    let trace: Vec<_> = rows
        .iter()
        .filter(|r| !r.decisions.is_empty())
        .map(|r| serde_json::json!({"run": r.label, "decisions": r.decisions}))
        .collect();
    write_file(&dir.join("trace.json"), serde_json::to_string_pretty(&trace)?.as_bytes())?;
    let chart = NetChart { sc, rows: &rows, compared: &compared };
    write_chart(&dir.join("plot"), &chart)?;
    let md = report_md(path, sc, &rows, &compared, &seeds);
    write_file(&dir.join("report.md"), md.as_bytes())?;
    let k = counts(&compared);
    let html = format!(
        "<section id=\"{n}\">\n<h2>{t}</h2>\n<p class=\"meta\"><code>{n}</code> · simulated (NewtOS model), {s} seeds · \
         <a href=\"{n}/report.md\">report.md</a> · <a href=\"{n}/results.json\">results.json</a></p>\n<p>{d}</p>\n\
         <figure><img src=\"{n}/plot.png\" width=\"{w}\" height=\"{h}\" alt=\"{t}\"></figure>\n{tab}</section>\n",
        n = escape_html(&sc.name),
        t = escape_html(&sc.title),
        s = seeds.len(),
        d = escape_html(sc.description.trim()),
        w = chart.size().0,
        h = chart.size().1,
        tab = runs_table(&rows).to_html(|_| None),
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
    Ok((w, rows))
}

fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn spread_text(s: &Spread, digits: usize) -> String {
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
        h.extend(["resources", "utilisation"]);
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
            let b: Vec<String> = r.busy.iter().map(|(k, b)| format!("{k} {}", pct(*b))).collect();
            cells.push(b.join(", "));
        }
        t.row(cells);
    }
    t
}

fn report_md(path: &Path, sc: &NetScenario, rows: &[RunRow], compared: &[Compared], seeds: &[u64]) -> String {
    let mut s = format!("# {}\n\n", sc.title);
    let _ = writeln!(
        s,
        "Scenario `{}` ({}), simulated by the NewtOS model (`dyncore_sim::netstack`), seeds {}–{}; \
         each figure is the median over the seeds, [min–max] where they differ. Power is **modelled** \
         (`dyncore_core::power`, fitted to Table 2's 80 and 34 W).\n",
        sc.name,
        path.display(),
        seeds[0],
        seeds[seeds.len() - 1]
    );
    if !sc.description.trim().is_empty() {
        let _ = writeln!(s, "{}\n", sc.description.trim());
    }
    if !sc.expect.is_empty() {
        s += "What the paper shows:\n\n";
        for e in &sc.expect {
            let _ = writeln!(s, "* {e}");
        }
        s += "\n";
    }
    s += "![plot](plot.png)\n\n## Runs\n\n";
    s += &runs_table(rows).to_markdown();
    if !compared.is_empty() {
        s += "\n## Against the paper\n\n";
        let mut t = Table::new(
            "",
            &["run", "metric", "paper", "dyncore", "difference", "paper in seed range", "source"],
        );
        for c in compared {
            let flag = if c.rel().abs() > DIFF_FLAG { " **(>25%)**" } else { "" };
            t.row(vec![
                c.run.clone(),
                c.metric.clone(),
                format!("{}", c.paper),
                spread_text(&c.dyncore, if c.paper.abs() < 10.0 { 2 } else { 0 }),
                format!("{:+.0}%{flag}", c.rel() * 100.0),
                if c.dyncore.contains(c.paper) { "yes".into() } else { "no".into() },
                c.source.clone(),
            ]);
        }
        s += &t.to_markdown();
        let k = counts(compared);
        let _ = writeln!(
            s,
            "\n{} paper figures compared, {} differ by more than 25% (docs/results.md says why).",
            k.compared, k.differing
        );
    }
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
    compared: &'a [Compared],
}

impl Chart for NetChart<'_> {
    fn size(&self) -> (u32, u32) {
        (1000, 700)
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
        let paper: Vec<(usize, f64)> = self
            .compared
            .iter()
            .filter(|c| c.metric == "mbps")
            .filter_map(|c| self.rows.iter().position(|r| r.label == c.run).map(|i| (i, c.paper / 1000.0)))
            .collect();
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
        c.draw_series(LineSeries::new(line.clone(), PALETTE[0].stroke_width(2))).map_err(e)?;
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
        let bars = self.sc.report.bars.as_str();
        let kinds: Vec<ComponentKind> = ComponentKind::ALL
            .into_iter()
            .filter(|k| self.rows.iter().any(|r| r.busy.iter().any(|(c, _)| c == k)))
            .collect();
        let (desc, series): (&str, Vec<(String, Vec<f64>)>) = match bars {
            "utilisation" if !kinds.is_empty() => (
                "busy fraction of its CPU",
                kinds
                    .iter()
                    .map(|k| {
                        let v = self
                            .rows
                            .iter()
                            .map(|r| r.busy.iter().find(|(c, _)| c == k).map_or(0.0, |(_, b)| *b))
                            .collect();
                        (k.name().to_string(), v)
                    })
                    .collect(),
            ),
            "resources" => (
                "resources (% of 3 × 1600 MHz)",
                vec![("resources".into(), self.rows.iter().map(|r| r.resources * 100.0).collect())],
            ),
            _ => {
                ("W (modelled)", vec![("power".into(), self.rows.iter().map(|r| r.power_w.median).collect())])
            }
        };
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
