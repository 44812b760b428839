//! A scenario's figure as numbers: the x categories, the series, and for
//! every cell dyncore's value in each seed, their median and min-max range,
//! and the paper's value where the scenario states one. The terminal table,
//! `report.md`, `results.json`, the page and the plot are all drawn from
//! this one structure, so they cannot disagree.
//!
//! A comparison with the paper uses the median over seeds and says whether
//! the paper's value lies inside the seeds' range. The figure carries the
//! `[[paper]]` entries that are `≈` values of its metric (the plot's
//! diamonds); every entry, with its verdict, is a claim
//! (`dyncore_sim::scenario::claims`), and the counts come from there.

use std::collections::BTreeMap;

use dyncore_sim::ScenarioResult;
use dyncore_sim::scenario::{GroupBy, Metric, Scenario};
use serde::Serialize;

/// One cell over seeds: the median (the mean of the middle two for an even
/// count) and the range, over the seeds that produced a value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Seeds that produced a value (a run that did not finish gives none).
    pub seeds: usize,
}

impl Spread {
    /// The spread of `values`, or `None` if there are none.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(Spread { median, min: v[0], max: v[n - 1], seeds: n })
    }

    /// True when `x` lies in `[min, max]` (to printing precision).
    pub fn contains(&self, x: f64) -> bool {
        let slack = 1e-9 * x.abs().max(1.0);
        x >= self.min - slack && x <= self.max + slack
    }
}

/// One figure: `values[s][x]` and `paper[s][x]` for series `s`, category `x`.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub metric: Metric,
    pub x_name: &'static str,
    pub categories: Vec<String>,
    pub series: Vec<String>,
    /// The seeds, in the order of `per_seed`.
    pub seeds: Vec<u64>,
    /// `per_seed[k][s][x]`: the cell's value in seed `k`.
    pub per_seed: Vec<Vec<Vec<Option<f64>>>>,
    pub values: Vec<Vec<Option<Spread>>>,
    pub paper: Vec<Vec<Option<f64>>>,
    /// `band[s][x]`: the half-width the paper's value is judged to (its
    /// entry's [`dyncore_sim::claims::Band`]).
    pub band: Vec<Vec<Option<f64>>>,
}

/// One cell with a value, flattened for tables.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub x: String,
    pub series: String,
    pub spread: Spread,
    pub paper: Option<f64>,
    /// The half-width the paper's value is judged to.
    pub band: Option<f64>,
}

impl Cell {
    /// Relative difference of the median from the paper's figure, where a
    /// comparison can be made (a finite, non-zero paper value).
    pub fn rel_diff(&self) -> Option<f64> {
        self.paper.filter(|p| p.is_finite() && *p != 0.0).map(|p| (self.spread.median - p) / p)
    }

    /// True when the comparison was made and the paper's value lies
    /// outside its band around the seeds' range (the claim's `≈` fails).
    pub fn differs(&self) -> bool {
        match (self.rel_diff(), self.paper) {
            (Some(_), Some(p)) => {
                let b = self.band.unwrap_or_else(|| Band::of(p, Default::default()).around(p));
                p < self.spread.min - b || p > self.spread.max + b
            }
            _ => false,
        }
    }

    /// Whether the paper's value, to the precision it is printed with,
    /// lies in the seeds' range (if compared): 1.25 stands for [1.245,
    /// 1.255], 8641 for [8640.5, 8641.5]. A median of 1.2499 over five
    /// identical seeds is in range of the paper's 1.25.
    pub fn paper_in_range(&self) -> Option<bool> {
        self.rel_diff().and(self.paper).map(|p| {
            let h = printed_half_unit(p);
            self.spread.max >= p - h && self.spread.min <= p + h
        })
    }
}

use dyncore_sim::claims::Band;
pub use dyncore_sim::claims::printed_half_unit;

/// What the comparison with the paper came to: figures compared and claims
/// held ([`dyncore_sim::claims::Counts`]).
pub use dyncore_sim::claims::Counts as PaperCounts;

pub fn metric_name(m: Metric) -> &'static str {
    match m {
        Metric::Speedup => "speedup vs one baseline CPU",
        Metric::RelativeTime => "completion time relative to running alone",
        Metric::CompletionS => "completion time (s)",
        Metric::EnergyJ => "modelled energy of the run (J)",
    }
}

/// The metric as an axis title: quantity and unit.
pub fn metric_axis(m: Metric) -> &'static str {
    match m {
        Metric::Speedup => "speedup vs one baseline CPU (×)",
        Metric::RelativeTime => "completion time relative to running alone (×)",
        Metric::CompletionS => "completion time (s)",
        Metric::EnergyJ => "modelled energy of the run (J)",
    }
}

pub fn metric_short(m: Metric) -> &'static str {
    match m {
        Metric::Speedup => "speedup",
        Metric::RelativeTime => "relative time",
        Metric::CompletionS => "completion (s)",
        Metric::EnergyJ => "energy (J)",
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

/// A program's value of `metric`, if it finished (the energy is its run's,
/// if the run finished).
fn metric_of(metric: Metric, run: &dyncore_sim::RunResult, p: &dyncore_sim::ProgramResult) -> Option<f64> {
    match metric {
        Metric::Speedup => p.speedup,
        Metric::RelativeTime => p.relative_time,
        Metric::CompletionS => p.completion_ns.map(|c| c as f64 / 1e9),
        Metric::EnergyJ => run.finished.then_some(run.energy.joules),
    }
}

impl Figure {
    /// Builds the figure of `results` (one per seed, in seed order) as
    /// `scenario.report` asks. Programs with the same label in a run are
    /// averaged within a seed; a program that did not finish contributes no
    /// value.
    pub fn build(scenario: &Scenario, results: &[ScenarioResult]) -> Figure {
        let metric = scenario.report.metric;
        let mut categories = Vec::new();
        let mut series = Vec::new();
        // (seed, series, category) -> (sum, count)
        let mut acc: BTreeMap<(usize, usize, usize), (f64, u32)> = BTreeMap::new();
        for (k, result) in results.iter().enumerate() {
            for run in &result.runs {
                for p in &run.programs {
                    let (x, s) = match scenario.report.group_by {
                        GroupBy::Program => (p.label.as_str(), run.series.as_str()),
                        GroupBy::Run => (run.label.as_str(), p.label.as_str()),
                    };
                    let (xi, si) = (push_unique(&mut categories, x), push_unique(&mut series, s));
                    if let Some(v) = metric_of(metric, run, p) {
                        let e = acc.entry((k, si, xi)).or_default();
                        e.0 += v;
                        e.1 += 1;
                    }
                }
            }
        }
        let mut per_seed = vec![vec![vec![None; categories.len()]; series.len()]; results.len()];
        for ((k, si, xi), (sum, n)) in acc {
            per_seed[k][si][xi] = Some(sum / f64::from(n));
        }
        let values = (0..series.len())
            .map(|si| {
                (0..categories.len())
                    .map(|xi| {
                        Spread::of(&per_seed.iter().filter_map(|seed| seed[si][xi]).collect::<Vec<_>>())
                    })
                    .collect()
            })
            .collect();
        let mut paper = vec![vec![None; categories.len()]; series.len()];
        let mut band = vec![vec![None; categories.len()]; series.len()];
        for f in scenario.paper.iter().filter(|f| f.is_point(metric)) {
            let xi = categories.iter().position(|c| *c == f.x);
            let si = series.iter().position(|s| *s == f.series);
            if let (Some(xi), Some(si), Some(v)) = (xi, si, f.value) {
                paper[si][xi] = Some(v);
                band[si][xi] = Some(Band::of(v, f.band_fields()).around(v));
            }
        }
        let x_name = match scenario.report.group_by {
            GroupBy::Program => "program",
            GroupBy::Run => "run",
        };
        Figure {
            metric,
            x_name,
            categories,
            series,
            seeds: results.iter().map(|r| r.seed).collect(),
            per_seed,
            values,
            paper,
            band,
        }
    }

    /// Every cell that has a dyncore value, category-major.
    pub fn cells(&self) -> Vec<Cell> {
        let mut out = Vec::new();
        for (xi, x) in self.categories.iter().enumerate() {
            for (si, s) in self.series.iter().enumerate() {
                if let Some(spread) = self.values[si][xi] {
                    out.push(Cell {
                        x: x.clone(),
                        series: s.clone(),
                        spread,
                        paper: self.paper[si][xi],
                        band: self.band[si][xi],
                    });
                }
            }
        }
        out
    }

    pub fn has_paper(&self) -> bool {
        self.paper.iter().flatten().any(Option::is_some)
    }
}

/// `1.234` style formatting used in every table.
pub fn fmt_value(v: f64) -> String {
    if v.abs() >= 100.0 { format!("{v:.1}") } else { format!("{v:.3}") }
}

/// `1.970–1.982`, or the one value when every seed agrees to print precision.
pub fn fmt_range(s: &Spread) -> String {
    let (lo, hi) = (fmt_value(s.min), fmt_value(s.max));
    if lo == hi { lo } else { format!("{lo}–{hi}") }
}

/// The comparison table: x, series, dyncore's median, its range over seeds
/// (when there are several), paper, difference, and whether the paper's
/// value lies in the range.
pub fn comparison_table(title: &str, fig: &Figure) -> crate::table::Table {
    let has_paper = fig.has_paper();
    let seeds = fig.seeds.len();
    let metric = metric_short(fig.metric);
    let median = format!("{metric} (median)");
    let range = format!("range over {seeds} seeds");
    let mut headers = vec![fig.x_name, if seeds > 1 { median.as_str() } else { metric }];
    headers.insert(1, "series");
    if seeds > 1 {
        headers.push(&range);
    }
    if has_paper {
        headers.extend(["paper", "difference"]);
        if seeds > 1 {
            headers.push("paper in range");
        }
    }
    let mut t = crate::table::Table::new(title, &headers);
    for c in fig.cells() {
        let mut row = vec![c.x.clone(), c.series.clone(), fmt_value(c.spread.median)];
        if seeds > 1 {
            let partial = if c.spread.seeds < seeds {
                format!(" ({} of {seeds} seeds)", c.spread.seeds)
            } else {
                String::new()
            };
            row.push(format!("{}{partial}", fmt_range(&c.spread)));
        }
        if has_paper {
            row.push(c.paper.map(fmt_value).unwrap_or_else(|| "-".into()));
            row.push(match c.rel_diff() {
                Some(d) if c.differs() => format!("{:+.0}% (differs)", d * 100.0),
                Some(d) => format!("{:+.0}%", d * 100.0),
                None if c.paper.is_some() => "not compared".into(),
                None => "-".into(),
            });
            if seeds > 1 {
                row.push(match c.paper_in_range() {
                    Some(true) => "yes".into(),
                    Some(false) => "no".into(),
                    None => "-".into(),
                });
            }
        }
        t.row(row);
    }
    t
}

/// One sentence on the comparison with the paper: the count of predictions
/// (issue 33's line), then the `≈` values of every kind and how many lie
/// inside dyncore's range over seeds, e.g. "12 predictions checked: 5 hold,
/// 7 fail; also 3 fitted points and 40 inputs shown, not counted".
pub fn summary_sentence(c: &PaperCounts, seeds: bool) -> String {
    let n = |k: usize, what: &str| format!("{k} {what}{}", if k == 1 { "" } else { "s" });
    let mut s = c.sentence();
    if c.compared > 0 {
        s += &format!(
            " ({} of every kind compared, {} outside {} band",
            n(c.compared, "paper value"),
            c.differing,
            if c.compared == 1 { "its" } else { "their" }
        );
        if seeds {
            s += &format!(", {} inside dyncore's range over seeds", c.in_range);
        }
        s += ")";
    }
    if c.unmatched > 0 {
        s += &format!("; {} could not be compared (unmatched)", n(c.unmatched, "paper figure"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paper_value_is_in_range_to_its_printed_precision() {
        let cell = |lo: f64, hi: f64, paper: f64| Cell {
            x: "x".into(),
            series: "s".into(),
            spread: Spread { median: lo, min: lo, max: hi, seeds: 5 },
            paper: Some(paper),
            band: None,
        };
        assert_eq!(cell(1.2499, 1.2499, 1.25).paper_in_range(), Some(true), "Figure 5's DYN-2");
        assert_eq!(cell(1.2449, 1.2449, 1.25).paper_in_range(), Some(false));
        assert_eq!(cell(8640.6, 8640.6, 8641.0).paper_in_range(), Some(true));
        assert_eq!(cell(8639.0, 8640.4, 8641.0).paper_in_range(), Some(false));
        assert_eq!(printed_half_unit(0.1), 0.05);
        // A row is flagged when the paper's value lies outside its band (at
        // least 0.5% of it) around the seeds' range: 8641 ± 43.
        assert!(!cell(8600.0, 8600.0, 8641.0).differs());
        assert!(cell(8597.0, 8597.0, 8641.0).differs());
        assert!(!cell(9400.0, 9420.0, 9416.0).differs());
    }

    fn scenario(text: &str) -> Scenario {
        let s = Scenario::from_toml(text).unwrap();
        s.validate().unwrap();
        s
    }

    fn run_seeds(sc: &Scenario, seeds: &[u64]) -> Vec<ScenarioResult> {
        seeds
            .iter()
            .map(|&seed| {
                let mut s = sc.clone();
                s.seed = seed;
                dyncore_sim::run_quietly(&s).expect("within the event budget")
            })
            .collect()
    }

    const TWO_RUNS: &str = r#"
name = "t"
title = "t"
[report]
metric = "relative_time"
group_by = "program"
[[paper]]
kind = "prediction"
x = "A"
series = "fast"
value = 2.0
[[paper]]
kind = "prediction"
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
        let res = run_seeds(&sc, &[1]);
        let fig = Figure::build(&sc, &res);
        assert_eq!(fig.categories, vec!["A"]);
        assert_eq!(fig.series, vec!["fast", "slow"]);
        // Two gcc instances on 24 idle CPUs each run alone: relative time 1
        // (CMP CPUs are the baseline), so their average is 1 too.
        let v = fig.values[0][0].unwrap().median;
        let mean: f64 = res[0].runs[0].programs.iter().map(|p| p.relative_time.unwrap()).sum::<f64>() / 2.0;
        assert!((v - mean).abs() < 1e-12);
        assert_eq!(fig.paper[0][0], Some(2.0));
        assert_eq!(fig.paper[1][0], None);
        let cells = fig.cells();
        assert_eq!(cells.len(), 2);
        // 2 is outside its band (±0.5 printed) around the range [1, 1]: flagged.
        assert!(cells[0].differs());
        assert_eq!(cells[0].paper_in_range(), Some(false));
        // The claims: the first entry fails (50% off), the second names no
        // result and is not evaluated (never held).
        let claims = dyncore_sim::scenario::claims::check(&sc, &res);
        let c = claims.counts();
        assert_eq!((c.compared, c.differing, c.in_range, c.unmatched), (1, 1, 0, 1));
        assert_eq!((c.predictions_held, c.predictions_failed, c.predictions_not_evaluated), (0, 1, 1));
        assert!(claims.claims[1].checks[0].reason.as_ref().unwrap().contains("no program `nope`"));
    }

    #[test]
    fn group_by_run_swaps_axes() {
        let sc = scenario(&TWO_RUNS.replace("group_by = \"program\"", "group_by = \"run\""));
        let fig = Figure::build(&sc, &run_seeds(&sc, &[1]));
        assert_eq!(fig.categories, vec!["fast", "slow"]);
        assert_eq!(fig.series, vec!["A"]);
        assert_eq!(fig.x_name, "run");
    }

    #[test]
    fn spread_is_median_min_max_over_seeds() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.seeds), (2.0, 1.0, 3.0, 3));
        // Even count: the mean of the middle two.
        assert_eq!(Spread::of(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert_eq!(Spread::of(&[]), None);
        assert!(s.contains(1.0) && s.contains(3.0) && !s.contains(3.1));
    }

    /// A dynamic program's task lengths come from the seed: several seeds
    /// give a range, and the table and counts use the median.
    #[test]
    fn several_seeds_give_a_range_and_the_median_is_compared() {
        let text = r#"
name = "t"
title = "t"
[[paper]]
kind = "prediction"
x = "pmake"
series = "CMP"
value = 1.0
[[run]]
label = "CMP"
machine = "cmp"
policy = "linux"
[[run.workload]]
program = "pmake"
work_ms = 400
"#;
        let sc = scenario(text);
        let res = run_seeds(&sc, &[1, 2, 3, 4, 5]);
        let fig = Figure::build(&sc, &res);
        assert_eq!(fig.seeds, vec![1, 2, 3, 4, 5]);
        let s = fig.values[0][0].unwrap();
        let mut each: Vec<f64> = fig.per_seed.iter().map(|k| k[0][0].unwrap()).collect();
        each.sort_by(f64::total_cmp);
        assert_eq!((s.min, s.median, s.max), (each[0], each[2], each[4]));
        assert!(s.max > s.min, "pmake's job lengths are random: seeds must differ ({each:?})");
        // The claim compares the median, as the table does.
        let claims = dyncore_sim::scenario::claims::check(&sc, &res);
        assert_eq!(claims.claims[0].checks[0].value, Some(s.median));
        let c = claims.counts();
        assert_eq!((c.compared, c.unmatched), (1, 0), "{c:?}");
        let t = comparison_table("", &fig);
        assert!(t.headers.contains(&"range over 5 seeds".to_string()), "{:?}", t.headers);
        assert_eq!(t.rows[0][2], fmt_value(s.median));
        let words = summary_sentence(&c, true);
        assert!(
            words.contains("1 paper value of every kind compared") && words.contains("1 prediction checked"),
            "{words}"
        );
    }
}
