//! How a scenario's figure is drawn: which quantities get panels of their
//! own, which reference line each panel gets, and the axis titles. The
//! rules are decided here, in code, from the numbers, never per scenario:
//!
//! * **Panels.** Series whose largest values differ by more than
//!   [`SCALE_SPLIT`]× are put on panels of their own, stacked (Figure 7:
//!   N-Queen's speedup of 1-2 and the parallel program's 10-24 on one linear
//!   axis would make N-Queen's bars a few pixels tall). Failing that,
//!   categories are split the same way, side by side.
//! * **Reference lines.** Relative time: 1 (running alone). Speedup of
//!   sequential programs: 1 (one baseline CPU). Speedup of parallel
//!   programs: the ideal, one thread per CPU at baseline speed (the largest
//!   `min(threads, CPUs)` of the panel's runs: 24 in Figure 4). A panel that
//!   mixes sequential and parallel programs gets none.
//! * **Spread.** Bars are medians over seeds, whiskers the min-max range.

use dyncore_sim::scenario::{GroupBy, Metric, Scenario};
use dyncore_sim::{RunResult, ScenarioResult};

use crate::events::TimelineRow;
use crate::figure::{Figure, metric_axis};
use crate::plot::bars::{BarFigure, BarValue, Layout, Panel, Reference};
use crate::plot::timeline::Timeline;

/// Series (or categories) whose peaks differ by more than this go on
/// separate panels.
pub const SCALE_SPLIT: f64 = 4.0;

/// "5 seeds (1–5)" or "seed 3".
pub fn seeds_phrase(seeds: &[u64]) -> String {
    match seeds {
        [one] => format!("seed {one}"),
        [first, .., last] => format!("{} seeds ({first}–{last})", seeds.len()),
        [] => "no seeds".into(),
    }
}

/// Groups of indices whose peaks are within [`SCALE_SPLIT`] of each other,
/// in index order within and between groups (ordered by first member).
fn split_by_scale(peaks: &[Option<f64>]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..peaks.len()).filter(|&i| peaks[i].is_some_and(|p| p > 0.0)).collect();
    order.sort_by(|&a, &b| peaks[a].unwrap_or(0.0).total_cmp(&peaks[b].unwrap_or(0.0)));
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut floor = f64::NAN;
    for i in order {
        let p = peaks[i].unwrap_or(0.0);
        match groups.last_mut() {
            Some(g) if p <= floor * SCALE_SPLIT => g.push(i),
            _ => {
                groups.push(vec![i]);
                floor = p;
            }
        }
    }
    // Indices with no positive value join the first group.
    let empty: Vec<usize> = (0..peaks.len()).filter(|&i| !peaks[i].is_some_and(|p| p > 0.0)).collect();
    match groups.first_mut() {
        Some(g) => g.extend(empty),
        None => groups.push(empty),
    }
    for g in &mut groups {
        g.sort_unstable();
    }
    groups.sort_by_key(|g| g.first().copied());
    groups
}

/// The largest mark a cell draws: its max over seeds, or the paper's value.
fn cell_peak(fig: &Figure, s: usize, c: usize) -> Option<f64> {
    let v = fig.values[s][c].map(|v| v.max.abs());
    let p = fig.paper[s][c].filter(|p| p.is_finite()).map(f64::abs);
    v.into_iter().chain(p).reduce(f64::max)
}

fn peaks(fig: &Figure, by_series: bool) -> Vec<Option<f64>> {
    let (outer, inner) = if by_series {
        (fig.series.len(), fig.categories.len())
    } else {
        (fig.categories.len(), fig.series.len())
    };
    (0..outer)
        .map(|o| {
            (0..inner)
                .filter_map(|i| if by_series { cell_peak(fig, o, i) } else { cell_peak(fig, i, o) })
                .reduce(f64::max)
        })
        .collect()
}

/// The programs of a panel (first seed): those whose cell the panel shows.
fn panel_programs<'a>(
    scenario: &Scenario,
    fig: &Figure,
    runs: &'a [RunResult],
    p: &Panel,
) -> Vec<(&'a RunResult, &'a dyncore_sim::ProgramResult)> {
    let shows = |x: &str, s: &str| {
        p.categories.iter().any(|&c| fig.categories[c] == x) && p.series.iter().any(|&i| fig.series[i] == s)
    };
    let mut out = Vec::new();
    for r in runs {
        for prog in &r.programs {
            let (x, s) = match scenario.report.group_by {
                GroupBy::Program => (prog.label.as_str(), r.series.as_str()),
                GroupBy::Run => (r.label.as_str(), prog.label.as_str()),
            };
            if shows(x, s) {
                out.push((r, prog));
            }
        }
    }
    out
}

fn reference(
    metric: Metric,
    programs: &[(&RunResult, &dyncore_sim::ProgramResult)],
    by_category: &[(usize, Vec<(&RunResult, &dyncore_sim::ProgramResult)>)],
) -> Option<Reference> {
    let line = |value: f64, label: &str| Some(Reference { value, label: label.into(), over: Vec::new() });
    match metric {
        Metric::RelativeTime => line(1.0, "1 = running alone"),
        Metric::CompletionS | Metric::EnergyJ => None,
        Metric::Speedup if programs.is_empty() => None,
        Metric::Speedup if programs.iter().all(|(_, p)| p.threads == 1) => line(1.0, "1 = one baseline CPU"),
        Metric::Speedup if programs.iter().all(|(_, p)| p.threads > 1) => {
            // The ideal of each category's runs: a run of 15 CPUs cannot
            // reach the 24 of a 24-CPU one, so each gets its own segment
            // when they differ.
            let ideal = |ps: &[(&RunResult, &dyncore_sim::ProgramResult)]| {
                ps.iter().map(|(r, p)| (p.threads as usize).min(r.cpus)).max().unwrap_or(1) as f64
            };
            let over: Vec<(usize, f64)> =
                by_category.iter().filter(|(_, ps)| !ps.is_empty()).map(|(c, ps)| (*c, ideal(ps))).collect();
            let all = ideal(programs);
            let same = over.iter().all(|&(_, v)| v == all);
            Some(Reference {
                value: all,
                label: "ideal: one thread per CPU at baseline speed".into(),
                over: if same { Vec::new() } else { over },
            })
        }
        Metric::Speedup => None,
    }
}

/// The bar figure of a scenario (see the module doc for the rules).
pub fn bar_figure(scenario: &Scenario, results: &[ScenarioResult], fig: &Figure) -> BarFigure {
    let all_series: Vec<usize> = (0..fig.series.len()).collect();
    let all_cats: Vec<usize> = (0..fig.categories.len()).collect();
    let by_series = split_by_scale(&peaks(fig, true));
    let (layout, mut panels): (Layout, Vec<Panel>) = if by_series.len() > 1 {
        let panels = by_series
            .into_iter()
            .map(|series| Panel {
                title: series.iter().map(|&s| fig.series[s].as_str()).collect::<Vec<_>>().join(", "),
                categories: all_cats.clone(),
                series,
                reference: None,
                y_label: None,
            })
            .collect();
        (Layout::Rows, panels)
    } else {
        let by_cat = split_by_scale(&peaks(fig, false));
        let titled = by_cat.len() > 1;
        let panels = by_cat
            .into_iter()
            .map(|categories| Panel {
                title: if titled {
                    format!(
                        "{} {}",
                        fig.x_name,
                        categories.iter().map(|&c| fig.categories[c].as_str()).collect::<Vec<_>>().join(", ")
                    )
                } else {
                    String::new()
                },
                categories,
                series: all_series.clone(),
                reference: None,
                y_label: None,
            })
            .collect();
        (Layout::Columns, panels)
    };
    let runs = results.first().map_or(&[][..], |r| &r.runs[..]);
    for p in &mut panels {
        let by_category: Vec<_> = p
            .categories
            .iter()
            .map(|&c| {
                let one = Panel { categories: vec![c], ..p.clone() };
                (c, panel_programs(scenario, fig, runs, &one))
            })
            .collect();
        p.reference = reference(fig.metric, &panel_programs(scenario, fig, runs, p), &by_category);
    }
    let values = fig
        .values
        .iter()
        .map(|row| {
            row.iter().map(|v| v.map(|s| BarValue { value: s.median, low: s.min, high: s.max })).collect()
        })
        .collect();
    let several = fig.seeds.len() > 1;
    BarFigure {
        title: scenario.title.clone(),
        subtitle: format!(
            "dyncore-sim, {}{}",
            seeds_phrase(&fig.seeds),
            if several { "; bars are medians" } else { "" }
        ),
        x_label: fig.x_name.to_string(),
        y_label: metric_axis(fig.metric).to_string(),
        categories: fig.categories.clone(),
        series: fig.series.clone(),
        values,
        paper: fig.paper.clone(),
        spread_label: several.then(|| format!("min–max over {} seeds", fig.seeds.len())),
        panels,
        layout,
    }
}

/// CPUs per program over time for the report's timeline run (first seed),
/// with the events that changed the allocation.
pub fn timeline(scenario: &Scenario, run: &RunResult, rows: &[TimelineRow], seed: u64) -> Timeline {
    let mut names: Vec<String> = Vec::new();
    for s in &run.allocation {
        for (p, _) in &s.cpus_by_program {
            if !names.iter().any(|n| **n == **p) {
                names.push(p.to_string());
            }
        }
    }
    let secs = |t: u64| t as f64 / 1e9;
    let mut xs: Vec<f64> = run.allocation.iter().map(|s| secs(s.t_ns)).collect();
    xs.push(secs(run.end_ns.max(run.allocation.last().map_or(0, |s| s.t_ns))));
    let series = names
        .iter()
        .map(|name| {
            let vals = run
                .allocation
                .iter()
                .map(|s| {
                    s.cpus_by_program.iter().find(|(p, _)| **p == **name).map_or(0.0, |(_, c)| f64::from(*c))
                })
                .collect();
            (name.clone(), vals)
        })
        .collect();
    // Starts at time 0 are the left edge of the plot, not events on it.
    let events = rows
        .iter()
        .filter(|r| r.t_ns > 0)
        .flat_map(|r| r.events.iter().map(move |e| (secs(r.t_ns), e.short())))
        .collect();
    Timeline {
        title: format!("{} ({})", scenario.title, run.label),
        subtitle: format!("dyncore-sim, seed {seed} (the first seed)"),
        x_label: "time (virtual s)".into(),
        y_label: "CPUs in each program's execution object".into(),
        xs,
        series,
        capacity: Some((run.cpus as f64, format!("CPUs in the node ({})", run.cpus))),
        events,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_more_than_4x_apart_are_split() {
        // N-Queen about 2, the parallel program about 20: two groups.
        assert_eq!(split_by_scale(&[Some(21.0), Some(2.0)]), vec![vec![0], vec![1]]);
        // Figure 3's two tasks (1.7 and 1.0) share an axis.
        assert_eq!(split_by_scale(&[Some(1.7), Some(1.0)]), vec![vec![0, 1]]);
        // Chains are cut where the ratio to the group's smallest passes 4.
        assert_eq!(
            split_by_scale(&[Some(1.0), Some(3.0), Some(5.0), Some(20.0)]),
            vec![vec![0, 1], vec![2, 3]]
        );
        // No value: joins the first group.
        assert_eq!(split_by_scale(&[None, Some(2.0), Some(30.0)]), vec![vec![0, 1], vec![2]]);
        assert_eq!(split_by_scale(&[None]), vec![vec![0]]);
    }

    fn shipped(name: &str) -> (Scenario, Vec<ScenarioResult>, Figure) {
        let path = dyncore_scenario::load::default_dir().join(format!("{name}.toml"));
        let sc = Scenario::from_toml(&std::fs::read_to_string(path).unwrap()).unwrap();
        let results = vec![dyncore_sim::run_quietly(&sc).expect("within the event budget")];
        let fig = Figure::build(&sc, &results);
        (sc, results, fig)
    }

    /// The rules on the shipped figures: Figure 7's two programs get panels
    /// of their own, with 1 and the ideal 24 as references; Figure 4 is one
    /// panel read against 24; Figure 3 against 1 (running alone).
    #[test]
    fn shipped_figures_get_their_panels_and_references() {
        let (sc, res, fig) = shipped("fig7-underprovisioned");
        let b = bar_figure(&sc, &res, &fig);
        assert_eq!(b.layout, Layout::Rows);
        let panels: Vec<(&str, Option<f64>)> =
            b.panels.iter().map(|p| (p.title.as_str(), p.reference.as_ref().map(|r| r.value))).collect();
        assert_eq!(panels, vec![("parallel", Some(24.0)), ("N-Queen", Some(1.0))]);
        assert!(b.paper.iter().flatten().filter(|p| p.is_some()).count() == 8);

        let (sc, res, fig) = shipped("fig4-parallel");
        let b = bar_figure(&sc, &res, &fig);
        assert_eq!(b.panels.len(), 1);
        assert_eq!(b.panels[0].reference.as_ref().map(|r| r.value), Some(24.0));

        let (sc, res, fig) = shipped("fig3-taxation");
        let b = bar_figure(&sc, &res, &fig);
        assert_eq!(b.panels.len(), 1);
        assert_eq!(
            b.panels[0].reference.as_ref().map(|r| (r.value, r.label.as_str())),
            Some((1.0, "1 = running alone"))
        );
        assert!(b.spread_label.is_none(), "one seed: no whiskers");
    }

    #[test]
    fn seeds_phrase_names_the_range() {
        assert_eq!(seeds_phrase(&[1, 2, 3, 4, 5]), "5 seeds (1–5)");
        assert_eq!(seeds_phrase(&[7]), "seed 7");
    }
}
