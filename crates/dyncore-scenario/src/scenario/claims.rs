//! A Chameleon scenario's claims against its results (one
//! [`ScenarioResult`] per seed): each `[[paper]]` entry's figures resolved
//! from the runs, then evaluated by [`crate::claims`].
//!
//! A figure is `(x, series, metric)` as the report groups them: with
//! `group_by = "program"` the programs labelled `x` in the runs of series
//! `series`; with `group_by = "run"` the programs labelled `series` in the
//! run labelled `x`. Within a seed the matching programs are averaged (as
//! the report's figure does), except `cpus`, which adds up the CPUs the
//! matching programs' objects hold just after the entry's `after` moment
//! (programs `x` and `x#2`, ... of the allocation timeline); over seeds,
//! the median and the range.

use super::{FigureSide, GroupBy, PaperFigure, PaperMetric, Scenario};
use crate::claims::{Band, Claims, Entry, Observed, Operand, Provenance, assemble};
use crate::result::{ProgramResult, RunResult, ScenarioResult};

/// One figure of the scenario.
#[derive(Debug, Clone, PartialEq)]
struct Figure<'a> {
    x: &'a str,
    series: &'a str,
    metric: PaperMetric,
    after: Option<&'a str>,
}

impl Figure<'_> {
    fn label(&self, by: GroupBy) -> String {
        let what = match by {
            GroupBy::Program => format!("{} of {} on {}", self.metric.name(), self.x, self.series),
            GroupBy::Run => format!("{} of {} in `{}`", self.metric.name(), self.series, self.x),
        };
        match self.after {
            Some(a) => format!("{what} after {a}"),
            None => what,
        }
    }
}

impl PaperMetric {
    /// What the code below makes the figure from: every metric of a
    /// Chameleon scenario is measured from the simulated (or live) runs —
    /// a program's times, its fused time, the allocation timeline, the
    /// energy of the run's busy and idle time — so none is an input by its
    /// code. (Whether a simulated figure merely restates an input, as a
    /// lone sequential program's speedup restates its CPU's duty ratio, is
    /// the scenario's declaration: `kind = "input"`.)
    pub fn provenance(self) -> Provenance {
        match self {
            PaperMetric::Speedup
            | PaperMetric::RelativeTime
            | PaperMetric::CompletionS
            | PaperMetric::FusedShare
            | PaperMetric::Cpus
            | PaperMetric::EnergyJ => Provenance::Simulated,
        }
    }
}

fn value_of(metric: PaperMetric, p: &ProgramResult) -> Option<f64> {
    match metric {
        PaperMetric::Speedup => p.speedup,
        PaperMetric::RelativeTime => p.relative_time,
        PaperMetric::CompletionS => p.completion_ns.map(|c| c as f64 / 1e9),
        PaperMetric::FusedShare => p.completion_ns.filter(|&c| c > 0).map(|c| p.fused_ns as f64 / c as f64),
        PaperMetric::Cpus | PaperMetric::EnergyJ => None,
    }
}

/// `"lbm exits"` → the time the first program labelled `lbm` exits (or
/// starts), if it did.
fn moment(run: &RunResult, after: &str) -> Option<u64> {
    let (label, verb) = after.rsplit_once(' ')?;
    let of = run.programs.iter().filter(|p| p.label == label);
    match verb {
        "starts" => of.map(|p| p.start_ns).min(),
        "exits" => of.filter_map(|p| p.finish_ns).min(),
        _ => None,
    }
}

/// CPUs the objects of programs `x` (`x`, `x#2`, ...) hold just after `t`.
fn cpus_at(run: &RunResult, x: &str, t: u64) -> f64 {
    let Some(sample) = run.allocation.iter().rev().find(|s| s.t_ns <= t) else {
        return 0.0;
    };
    let mine = |n: &str| n == x || n.strip_prefix(x).is_some_and(|r| r.starts_with('#'));
    sample.cpus_by_program.iter().filter(|(n, _)| mine(n)).map(|(_, c)| f64::from(*c)).sum()
}

/// The figure's value in one seed: `Ok(None)` when the programs exist but
/// gave no value (did not finish), `Err` when nothing matches.
fn in_seed(by: GroupBy, f: &Figure<'_>, result: &ScenarioResult) -> Result<Option<f64>, String> {
    let runs: Vec<&RunResult> = result
        .runs
        .iter()
        .filter(|r| match by {
            GroupBy::Program => r.series == f.series,
            GroupBy::Run => r.label == f.x,
        })
        .collect();
    let label = match by {
        GroupBy::Program => f.x,
        GroupBy::Run => f.series,
    };
    let (what, name) = match by {
        GroupBy::Program => ("series", f.series),
        GroupBy::Run => ("run", f.x),
    };
    if runs.is_empty() {
        return Err(format!("no {what} `{name}`"));
    }
    let mut values = Vec::new();
    let mut found = false;
    for run in runs {
        let programs: Vec<&ProgramResult> = run.programs.iter().filter(|p| p.label == label).collect();
        if programs.is_empty() {
            continue;
        }
        found = true;
        if f.metric == PaperMetric::EnergyJ {
            if run.finished {
                values.push(run.energy.joules);
            }
        } else if f.metric == PaperMetric::Cpus {
            let after = f.after.ok_or("`cpus` needs `after`")?;
            if let Some(t) = moment(run, after) {
                values.push(cpus_at(run, label, t));
            }
        } else {
            let v: Vec<f64> = programs.iter().filter_map(|p| value_of(f.metric, p)).collect();
            if !v.is_empty() {
                values.push(v.iter().sum::<f64>() / v.len() as f64);
            }
        }
    }
    if !found {
        return Err(format!("no program `{label}` in {what} `{name}`"));
    }
    Ok((!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64))
}

fn observe(by: GroupBy, f: &Figure<'_>, results: &[ScenarioResult]) -> Operand {
    let mut values = Vec::new();
    for r in results {
        match in_seed(by, f, r) {
            Ok(Some(v)) => values.push(v),
            Ok(None) => values.push(f64::NAN),
            Err(e) => {
                return Operand { label: f.label(by), observed: Err(e), provenance: f.metric.provenance() };
            }
        }
    }
    let observed = Observed::of(&values).ok_or_else(|| match f.after {
        Some(a) => format!("`{a}` never happened"),
        None => "no seed gave a value (the program did not finish)".to_string(),
    });
    Operand { label: f.label(by), observed, provenance: f.metric.provenance() }
}

/// Whether `p`'s `than` or `from` is its own figure (empty, or every field
/// it gives the entry's own): the field at fault.
pub(crate) fn self_compared(s: &Scenario, p: &PaperFigure) -> Option<&'static str> {
    let (own, side) = figures(s, p);
    [("than", &p.than), ("from", &p.from)].into_iter().find_map(|(k, o)| {
        let o = o.as_ref()?;
        let empty = o.x.is_none() && o.series.is_none() && o.metric.is_none() && o.after.is_none();
        (empty || side(o) == own).then_some(k)
    })
}

/// When every figure `p` names is computed from inputs alone
/// ([`PaperMetric::provenance`]): the field to blame and why.
pub(crate) fn input_only(s: &Scenario, p: &PaperFigure) -> Option<(&'static str, String)> {
    let (own, side) = figures(s, p);
    let metrics: Vec<PaperMetric> = std::iter::once(own.metric)
        .chain([&p.than, &p.from].into_iter().flatten().map(|o| side(o).metric))
        .collect();
    metrics
        .iter()
        .all(|m| m.provenance() == Provenance::Input)
        .then(|| ("metric", format!("`{}` is computed from the scenario's inputs alone", own.metric.name())))
}

/// The entry's own figure, and another side with the entry's fields
/// wherever it gives none.
fn figures<'a>(s: &'a Scenario, p: &'a PaperFigure) -> (Figure<'a>, impl Fn(&'a FigureSide) -> Figure<'a>) {
    let own = Figure {
        x: &p.x,
        series: &p.series,
        metric: p.metric.unwrap_or(PaperMetric::of_report(s.report.metric)),
        after: p.after.as_deref(),
    };
    let base = own.clone();
    let side = move |o: &'a FigureSide| {
        let metric = o.metric.unwrap_or(base.metric);
        let after = if metric == PaperMetric::Cpus { o.after.as_deref().or(base.after) } else { None };
        Figure {
            x: o.x.as_deref().unwrap_or(base.x),
            series: o.series.as_deref().unwrap_or(base.series),
            metric,
            after,
        }
    };
    (own, side)
}

/// Every claim of `scenario` against `results` (one per seed), evaluated.
pub fn check(scenario: &Scenario, results: &[ScenarioResult]) -> Claims {
    let by = scenario.report.group_by;
    let entries = scenario
        .paper
        .iter()
        .map(|p| {
            let (own, side) = figures(scenario, p);
            Entry {
                subject: observe(by, &own, results),
                relation: p.relation,
                value: p.value,
                than: p.than.as_ref().map(|o| observe(by, &side(o), results)),
                change_pct: p.change_pct,
                from: p.from.as_ref().map(|o| observe(by, &side(o), results)),
                band: Band::of(p.value.or(p.change_pct).unwrap_or(0.0), p.band_fields()),
                claim: p.claim.clone(),
                kind: p.kind,
                basis: p.basis.clone().unwrap_or_default(),
                source: p.source.clone(),
                note: p.note.clone(),
            }
        })
        .collect();
    assemble(&scenario.expect, entries)
}
