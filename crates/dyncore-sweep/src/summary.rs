//! A sweep's summary: `report.md` (which the page `out/index.html` shows as a
//! section, as it shows the benches') and one plot per swept axis (a
//! `[zip]`'s paired fields share one): x the axis's values in file order;
//! a panel per plotted figure and series; a line per combination of the
//! other axes' values (its median over the seeds, its min–max band), or,
//! past 8 combinations, one line over all of them (the band then spans the
//! other axes too, and the subtitle says so).
//!
//! **Invariants:** everything here is computed from the table's rows (the
//! same rows give the same report); a median and its range come from the
//! same values.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use dyncore_report::plot::band::{BandChart, BandLine, BandPanel};

use super::exec::{Row, figures};
use super::table::value_text;
use super::{Kind, Sweep};

/// Most lines in one panel before the other axes are pooled.
const MAX_LINES: usize = 8;

/// The figures plotted by default.
pub fn default_plot(kind: Kind) -> Vec<String> {
    match kind {
        Kind::Sim => vec!["speedup".into()],
        Kind::Net => vec!["mbps".into(), "nj_per_bit".into()],
    }
}

/// What a figure's axis says.
pub fn figure_title(name: &str) -> String {
    match name {
        "speedup" => "speedup (× one baseline CPU)".into(),
        "relative_time" => "time relative to alone on a baseline CPU".into(),
        "completion_s" => "completion (s)".into(),
        "fused_share" => "share of the time on a fused object".into(),
        "finished_share" => "share of programs that finished".into(),
        "run_energy_j" => "run's modelled energy (J)".into(),
        "run_mean_w" => "run's mean modelled power (W)".into(),
        "mbps" => "bitrate (Mbit/s)".into(),
        "power_w" => "modelled power of the cores in use (W)".into(),
        "nj_per_bit" => "energy per bit (nJ, modelled)".into(),
        "energy_j" => "energy (J, modelled)".into(),
        other => other.replace('_', " "),
    }
}

fn spread(v: &mut [f64]) -> Option<(f64, f64, f64)> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
    Some((median, v[0], v[n - 1]))
}

fn short(x: f64) -> String {
    dyncore_report::figure::fmt_value(x)
}

/// One table row, flattened: the point's axis coordinates, its series key, its figures.
struct Flat<'a> {
    coords: Vec<usize>,
    series: String,
    figures: &'a [Option<f64>],
}

/// The plot and the markdown section of axis `a`.
fn axis_section(
    sweep: &Sweep,
    a: usize,
    flat: &[Flat<'_>],
    plot: &[(usize, String)],
    dir: &Path,
    md: &mut String,
) -> Result<()> {
    let spec = &sweep.spec;
    let axis = &spec.axes[a];
    let names: Vec<&str> = axis.fields.iter().map(|f| f.path.as_str()).collect();
    let short_names: Vec<&str> = names.iter().map(|n| n.rsplit('.').next().unwrap_or(n)).collect();
    let x_labels: Vec<String> = (0..axis.len())
        .map(|i| axis.fields.iter().map(|f| value_text(&f.values[i])).collect::<Vec<_>>().join(" / "))
        .collect();
    let others: Vec<usize> = (0..spec.axes.len()).filter(|&b| b != a).collect();
    let combos: usize = others.iter().map(|&b| spec.axes[b].len()).product();
    let pooled = combos > MAX_LINES;
    let mut series: Vec<&str> = Vec::new();
    for r in flat {
        if !series.contains(&r.series.as_str()) {
            series.push(&r.series);
        }
    }
    // The lines: each combination of the other axes' values, or one pooled.
    let line_keys: Vec<Vec<usize>> = if pooled {
        vec![Vec::new()]
    } else {
        (0..combos)
            .map(|mut k| {
                let mut c = vec![0; others.len()];
                for (j, &b) in others.iter().enumerate().rev() {
                    c[j] = k % spec.axes[b].len();
                    k /= spec.axes[b].len();
                }
                c
            })
            .collect()
    };
    let line_label = |key: &[usize]| -> String {
        if key.is_empty() {
            return if others.is_empty() { "median".into() } else { "all other values".into() };
        }
        others
            .iter()
            .zip(key)
            .map(|(&b, &c)| {
                let ax = &spec.axes[b];
                let n: Vec<&str> =
                    ax.fields.iter().map(|f| f.path.rsplit('.').next().unwrap_or(&f.path)).collect();
                let v: Vec<String> = ax.fields.iter().map(|f| value_text(&f.values[c])).collect();
                format!("{} = {}", n.join(" / "), v.join(" / "))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut panels = Vec::new();
    let _ = writeln!(
        md,
        "\n## By {}\n",
        names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(" and ")
    );
    let stem = format!("by-{a}");
    let _ = writeln!(md, "![{}]({stem}.png)\n", names.join(" and "));
    for (k, fig) in plot {
        for s in &series {
            let mut lines = Vec::new();
            for key in &line_keys {
                let mut l = BandLine { label: line_label(key), median: vec![], lo: vec![], hi: vec![] };
                for x in 0..axis.len() {
                    let mut v: Vec<f64> = flat
                        .iter()
                        .filter(|r| r.series == *s && r.coords[a] == x)
                        .filter(|r| pooled || others.iter().zip(key).all(|(&b, &c)| r.coords[b] == c))
                        .filter_map(|r| r.figures[*k])
                        .collect();
                    let sp = spread(&mut v);
                    l.median.push(sp.map(|t| t.0));
                    l.lo.push(sp.map(|t| t.1));
                    l.hi.push(sp.map(|t| t.2));
                }
                lines.push(l);
            }
            let title =
                if series.len() > 1 { format!("{s}: {}", figure_title(fig)) } else { figure_title(fig) };
            let zero = lines.iter().all(|l| l.lo.iter().chain(&l.hi).all(|v| v.is_none_or(|x| x == 0.0)));
            if zero {
                // A panel of zeros says one thing; the text says it.
                let _ = writeln!(md, "{title}: 0 at every point and seed (not plotted).\n");
                continue;
            }
            table_md(md, &title, &names.join(" / "), &x_labels, &lines);
            panels.push(BandPanel { y_title: title, lines });
        }
    }
    let band = if pooled {
        "band: min–max over the seeds and every value of the other axes".to_string()
    } else {
        format!("band: min–max over the {} seeds", sweep.seeds.len())
    };
    let chart = BandChart {
        title: format!("{}: by {}", spec.title, short_names.join(" / ")),
        subtitle: format!(
            "median over {} seeds{}; simulated (deterministic)",
            sweep.seeds.len(),
            if pooled { format!(" and the {combos} combinations of the other axes") } else { String::new() }
        ),
        x_title: names.join(" / "),
        x_labels,
        panels,
        band_label: band,
    };
    dyncore_report::plot::write_chart(&dir.join(&stem), &chart)
}

/// A panel's numbers as a markdown table: a row per x value, a column per line.
fn table_md(md: &mut String, title: &str, x_name: &str, xs: &[String], lines: &[BandLine]) {
    let _ = writeln!(md, "{title}, median [min–max]:\n");
    let _ = writeln!(
        md,
        "| {x_name} | {} |",
        lines.iter().map(|l| l.label.as_str()).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(md, "|---|{}", "---:|".repeat(lines.len()));
    for (i, x) in xs.iter().enumerate() {
        let cells: Vec<String> = lines
            .iter()
            .map(|l| match (l.median[i], l.lo[i], l.hi[i]) {
                (Some(m), Some(lo), Some(hi)) => format!("{} [{}–{}]", short(m), short(lo), short(hi)),
                _ => "–".into(),
            })
            .collect();
        let _ = writeln!(md, "| {x} | {} |", cells.join(" | "));
    }
    md.push('\n');
}

/// Writes `report.md` and the plots into `dir`; `command` is the line that ran it.
pub fn write(sweep: &Sweep, units: &[(usize, u64, Vec<Row>)], dir: &Path, command: &str) -> Result<()> {
    let spec = &sweep.spec;
    let names = figures(sweep.kind);
    let wanted = spec
        .plot
        .as_ref()
        .map_or_else(|| default_plot(sweep.kind), |p| p.iter().map(|(s, _)| s.clone()).collect());
    let plot: Vec<(usize, String)> =
        wanted.into_iter().filter_map(|w| names.iter().position(|n| *n == w).map(|k| (k, w))).collect();
    let runs: std::collections::BTreeSet<&str> =
        units.iter().flat_map(|u| u.2.iter().map(|r| r.run.as_str())).collect();
    let flat: Vec<Flat<'_>> = units
        .iter()
        .flat_map(|(p, _, rows)| {
            let coords = spec.coords(*p);
            let several = runs.len() > 1;
            rows.iter().map(move |r: &Row| Flat {
                coords: coords.clone(),
                series: if several { format!("{} · {}", r.run, r.series) } else { r.series.clone() },
                figures: &r.figures,
            })
        })
        .collect();
    let rows: usize = units.iter().map(|u| u.2.len()).sum();
    let mut md = format!("# Sweep `{}`: {}\n\n", spec.name, spec.title);
    if !spec.description.trim().is_empty() {
        let _ = writeln!(md, "{}\n", spec.description.trim());
    }
    let axes: Vec<String> = spec
        .axes
        .iter()
        .map(|a| {
            let f: Vec<String> = a.fields.iter().map(|f| format!("`{}`", f.path)).collect();
            format!("{} ({} values)", f.join(" paired with "), a.len())
        })
        .collect();
    let _ = writeln!(
        md,
        "Command: `{command}`. Base: `{}`{}. {} points ({}) × {} seeds ({}–{}) = {} runs of the simulator \
         (deterministic: the same sweep gives the same bytes).\n",
        spec.base.display(),
        spec.runs.as_ref().map_or(String::new(), |r| format!(
            ", runs {}",
            r.iter().map(|(l, _)| format!("\"{l}\"")).collect::<Vec<_>>().join(", ")
        )),
        sweep.points.len(),
        axes.join(" × "),
        sweep.seeds.len(),
        sweep.seeds[0],
        sweep.seeds[sweep.seeds.len() - 1],
        sweep.points.len() * sweep.seeds.len(),
    );
    let _ = writeln!(
        md,
        "The table: [results.parquet](results.parquet) and [results.csv](results.csv), {rows} rows, one per point × \
         seed × run × series; columns `point`, `seed`, `run`, `series`, one per swept field, and the figures {}.\n",
        names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
    );
    for a in 0..spec.axes.len() {
        axis_section(sweep, a, &flat, &plot, dir, &mut md)?;
    }
    dyncore_report::report::write_file(&dir.join("report.md"), md.as_bytes())
}
