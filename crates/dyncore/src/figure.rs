//! A scenario's figure as numbers: the x categories, the series, dyncore's
//! value and the paper's value (where the scenario states one) for every
//! cell. The terminal table, `report.md` and the bar plot are all drawn from
//! this one structure, so they cannot disagree.

use std::collections::BTreeMap;

use dyncore_sim::ScenarioResult;
use dyncore_sim::scenario::{GroupBy, Metric, Scenario};

/// A relative difference above this is flagged as "differs from the paper".
pub const DIFF_FLAG: f64 = 0.25;

/// One figure: `values[s][x]` and `paper[s][x]` for series `s`, category `x`.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub metric: Metric,
    pub x_name: &'static str,
    pub categories: Vec<String>,
    pub series: Vec<String>,
    pub values: Vec<Vec<Option<f64>>>,
    pub paper: Vec<Vec<Option<f64>>>,
}

/// One cell with a value, flattened for tables.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub x: String,
    pub series: String,
    pub value: f64,
    pub paper: Option<f64>,
}

impl Cell {
    /// Relative difference from the paper's figure, if it has one.
    pub fn rel_diff(&self) -> Option<f64> {
        self.paper.filter(|p| *p != 0.0).map(|p| (self.value - p) / p)
    }

    /// True when the paper has a figure and dyncore's differs by more than [`DIFF_FLAG`].
    pub fn differs(&self) -> bool {
        self.rel_diff().is_some_and(|d| d.abs() > DIFF_FLAG)
    }
}

pub fn metric_name(m: Metric) -> &'static str {
    match m {
        Metric::Speedup => "speedup vs one baseline CPU",
        Metric::RelativeTime => "completion time relative to running alone",
        Metric::CompletionS => "completion time (s)",
    }
}

pub fn metric_short(m: Metric) -> &'static str {
    match m {
        Metric::Speedup => "speedup",
        Metric::RelativeTime => "relative time",
        Metric::CompletionS => "completion (s)",
    }
}

fn push_unique(v: &mut Vec<String>, s: &str) -> usize {
    match v.iter().position(|x| x == s) {
        Some(i) => i,
        None => {
            v.push(s.to_string());
            v.len() - 1
        }
    }
}

impl Figure {
    /// Builds the figure of `result` as `scenario.report` asks. Programs with
    /// the same label in a run are averaged; a program that did not finish
    /// contributes no value.
    pub fn build(scenario: &Scenario, result: &ScenarioResult) -> Figure {
        let metric = scenario.report.metric;
        let group_by = scenario.report.group_by;
        let mut categories = Vec::new();
        let mut series = Vec::new();
        // (series index, category index) -> (sum, count)
        let mut acc: BTreeMap<(usize, usize), (f64, u32)> = BTreeMap::new();
        for run in &result.runs {
            for p in &run.programs {
                let v = match metric {
                    Metric::Speedup => p.speedup,
                    Metric::RelativeTime => p.relative_time,
                    Metric::CompletionS => p.completion_ns.map(|c| c as f64 / 1e9),
                };
                let (x, s) = match group_by {
                    GroupBy::Program => (p.label.as_str(), run.series.as_str()),
                    GroupBy::Run => (run.label.as_str(), p.label.as_str()),
                };
                let xi = push_unique(&mut categories, x);
                let si = push_unique(&mut series, s);
                if let Some(v) = v {
                    let e = acc.entry((si, xi)).or_default();
                    e.0 += v;
                    e.1 += 1;
                }
            }
        }
        let mut values = vec![vec![None; categories.len()]; series.len()];
        for ((si, xi), (sum, n)) in acc {
            values[si][xi] = Some(sum / f64::from(n));
        }
        let mut paper = vec![vec![None; categories.len()]; series.len()];
        for f in &scenario.paper {
            let xi = categories.iter().position(|c| *c == f.x);
            let si = series.iter().position(|s| *s == f.series);
            if let (Some(xi), Some(si)) = (xi, si) {
                paper[si][xi] = Some(f.value);
            }
        }
        let x_name = match group_by {
            GroupBy::Program => "program",
            GroupBy::Run => "run",
        };
        Figure { metric, x_name, categories, series, values, paper }
    }

    /// Every cell that has a dyncore value, category-major.
    pub fn cells(&self) -> Vec<Cell> {
        let mut out = Vec::new();
        for (xi, x) in self.categories.iter().enumerate() {
            for (si, s) in self.series.iter().enumerate() {
                if let Some(v) = self.values[si][xi] {
                    out.push(Cell { x: x.clone(), series: s.clone(), value: v, paper: self.paper[si][xi] });
                }
            }
        }
        out
    }

    /// Paper figures that matched no cell (a typo in the scenario's `[[paper]]`).
    pub fn unmatched_paper<'a>(&self, scenario: &'a Scenario) -> Vec<&'a dyncore_sim::scenario::PaperFigure> {
        scenario
            .paper
            .iter()
            .filter(|f| !self.categories.contains(&f.x) || !self.series.contains(&f.series))
            .collect()
    }

    pub fn has_paper(&self) -> bool {
        self.paper.iter().flatten().any(Option::is_some)
    }

    /// (cells compared with a paper figure, cells that differ from it by
    /// more than [`DIFF_FLAG`]). Only comparisons made are counted.
    pub fn paper_counts(&self) -> (usize, usize) {
        let cells = self.cells();
        (
            cells.iter().filter(|c| c.rel_diff().is_some()).count(),
            cells.iter().filter(|c| c.differs()).count(),
        )
    }
}

/// `1.234` style formatting used in every table.
pub fn fmt_value(v: f64) -> String {
    if v.abs() >= 100.0 { format!("{v:.1}") } else { format!("{v:.3}") }
}

/// The comparison table: x, series, dyncore, paper, difference.
pub fn comparison_table(title: &str, fig: &Figure) -> crate::table::Table {
    let has_paper = fig.has_paper();
    let metric = metric_short(fig.metric);
    let mut headers = vec![fig.x_name, "series", metric];
    if has_paper {
        headers.extend(["paper", "difference"]);
    }
    let mut t = crate::table::Table::new(title, &headers);
    for c in fig.cells() {
        let mut row = vec![c.x.clone(), c.series.clone(), fmt_value(c.value)];
        if has_paper {
            row.push(c.paper.map(fmt_value).unwrap_or_else(|| "-".into()));
            row.push(match c.rel_diff() {
                Some(d) if c.differs() => format!("{:+.0}% (differs)", d * 100.0),
                Some(d) => format!("{:+.0}%", d * 100.0),
                None => "-".into(),
            });
        }
        t.row(row);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(text: &str) -> Scenario {
        let s = Scenario::from_toml(text).unwrap();
        s.validate().unwrap();
        s
    }

    const TWO_RUNS: &str = r#"
name = "t"
title = "t"
[report]
metric = "relative_time"
group_by = "program"
[[paper]]
x = "A"
series = "fast"
value = 2.0
[[paper]]
x = "nope"
series = "fast"
value = 1.0
[[run]]
label = "fast"
machine = "cmp"
policy = "linux"
[[run.workload]]
program = "gcc"
label = "A"
work_ms = 10
count = 2
[[run]]
label = "slow"
machine = "cmp"
policy = "linux"
[[run.workload]]
program = "gcc"
label = "A"
work_ms = 10
"#;

    #[test]
    fn same_label_instances_are_averaged_and_paper_matched() {
        let sc = scenario(TWO_RUNS);
        let res = dyncore_sim::run_quietly(&sc).expect("within the event budget");
        let fig = Figure::build(&sc, &res);
        assert_eq!(fig.categories, vec!["A"]);
        assert_eq!(fig.series, vec!["fast", "slow"]);
        // Two gcc instances on 24 idle CPUs each run alone: relative time 1
        // (CMP CPUs are the baseline), so their average is 1 too.
        let v = fig.values[0][0].unwrap();
        let mean: f64 = res.runs[0].programs.iter().map(|p| p.relative_time.unwrap()).sum::<f64>() / 2.0;
        assert!((v - mean).abs() < 1e-12);
        assert_eq!(fig.paper[0][0], Some(2.0));
        assert_eq!(fig.paper[1][0], None);
        let cells = fig.cells();
        assert_eq!(cells.len(), 2);
        // |1 - 2| / 2 = 50% > 25%: flagged.
        assert!(cells[0].differs());
        assert_eq!(fig.unmatched_paper(&sc).len(), 1);
    }

    #[test]
    fn group_by_run_swaps_axes() {
        let sc = scenario(&TWO_RUNS.replace("group_by = \"program\"", "group_by = \"run\""));
        let res = dyncore_sim::run_quietly(&sc).expect("within the event budget");
        let fig = Figure::build(&sc, &res);
        assert_eq!(fig.categories, vec!["fast", "slow"]);
        assert_eq!(fig.series, vec!["A"]);
        assert_eq!(fig.x_name, "run");
    }
}
