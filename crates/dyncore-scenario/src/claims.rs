//! A paper's claims as checks against a scenario's figures, and their
//! verdicts — for every scenario kind (Chameleon's, NewtOS's) and both
//! backends: the scenario resolves each figure a check names into what the
//! runs measured ([`Observed`], over seeds), and [`evaluate`] decides,
//! purely, whether the claim holds.
//!
//! # What a check says
//!
//! A check has a *subject*, one figure of the scenario (a program's speedup
//! in a run, a component's busy fraction, a bitrate), and one of three
//! targets:
//!
//! * **a value** with a relation: `<` (the subject is below it), `>` (above
//!   it) or `≈` (within the value's [`Band`]). A paper's bound ("IP below
//!   40%") is a `<` check, not a point it must come near;
//! * **another figure** of the same scenario with a relation: "busy.ip of
//!   600/200 > busy.tcp of 600/200"; `≈` between two figures needs the
//!   paper's own word for it ("about", "similar") and a band;
//! * **a relative change** from another figure, in percent, within its band
//!   in percentage points: "mbps of 1600 is 9% below mbps of 2267".
//!
//! # Bands: from what the paper prints, plus what the seeds spread
//!
//! A `≈` is judged to the precision the paper gives the number ([`Band`]):
//!
//! * **printed** (the default): a number printed in the text or a table is
//!   judged to half a unit of its last printed digit, and never tighter than
//!   [`PRINTED_FLOOR`] (0.5%) of it: 8641 Mbps to ±43, 1.8 Gbps to ±0.05,
//!   a change printed as "9%" to ±0.5 points, a "the same" (0%) to ±0.5
//!   points;
//! * **read off a chart** (`tick`): half the chart's tick spacing, which
//!   the entry states in the metric's unit;
//! * **about** (`about` with `band_pct`, or `tolerance_pts` on a change):
//!   only where the paper's own text says "about", "approximately",
//!   "similar"; `about` quotes those words.
//!
//! The **seed range is added**: a `≈` holds when the paper's value lies
//! within the band of dyncore's range over seeds, `[min - band, max +
//! band]` (for a change, of the range of the seeds' changes, each seed's
//! subject against the same seed's reference). A `≈` between two figures
//! holds when their medians differ by at most the band of the reference
//! plus half of each figure's range.
//!
//! An ordering between two figures (`<` or `>`) compares **medians over the
//! seeds** and must also hold **in every seed**, compared seed by seed, and
//! differ by more than [`TIE_BAND`] (0.1%). A check whose figure does not
//! exist (a typo) or has no value (the program never finished) is *not
//! evaluated*, never held.
//!
//! # Claims and their kinds
//!
//! A claim is one statement of the paper — a scenario's `expect` line with
//! a `claim` id — checked by every `[[paper]]` entry that names that id; it
//! **holds when all its checks hold**. A `[[paper]]` entry without a claim
//! id is a claim of its own. An `expect` line that cannot be checked against
//! the figures is marked `prose`, with the reason.
//!
//! Every claim has a [`Kind`], declared in the scenario (`kind` on the
//! `expect` line, or on an entry without a claim id):
//!
//! * **prediction**: dyncore's mechanism produces the figure;
//! * **fitted**: a model parameter was set from this very figure;
//! * **input**: the figure is a scenario or model input, or a closed-form
//!   function of inputs.
//!
//! A fitted or input claim says which parameter or input (`basis`). Only
//! predictions are counted ([`Counts`]); fitted points and inputs are shown
//! apart. The declaration is also checked: every figure a scenario can name
//! carries a [`Provenance`] from the code that computes it, and
//! [`check_kinds`] refuses a `prediction` whose figures all have
//! [`Provenance::Input`].

use serde::{Deserialize, Serialize};

/// A printed value's band is never narrower than this fraction of it: the
/// paper reports single runs of benchmarks without their spread, so a last
/// digit finer than half a percent (8641 Mbps printed to the Mbps) is not a
/// precision its measurement had.
pub const PRINTED_FLOOR: f64 = 0.005;

/// Two figures whose medians differ by less than this fraction of the
/// larger are tied: no ordering between them holds (the tables print three
/// significant digits; a difference below them is no difference a reader
/// could see).
pub const TIE_BAND: f64 = 0.001;

/// What a claim is, for the count (module docs, "Claims and their kinds").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// dyncore's mechanism produces the figure.
    Prediction,
    /// A model parameter was set from this very figure.
    Fitted,
    /// A scenario or model input, or a closed form of inputs.
    Input,
}

impl Kind {
    pub fn word(self) -> &'static str {
        match self {
            Kind::Prediction => "prediction",
            Kind::Fitted => "fitted",
            Kind::Input => "input",
        }
    }

    /// `"prediction"` → the kind.
    pub fn parse(s: &str) -> Option<Kind> {
        [Kind::Prediction, Kind::Fitted, Kind::Input].into_iter().find(|k| k.word() == s)
    }
}

/// Where a figure's number comes from, as the code that computes it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    /// Measured from simulated (or live) runs of the mechanisms.
    #[default]
    Simulated,
    /// Computed from the scenario's inputs alone (a configured number, or a
    /// closed form of configured numbers): no run enters it.
    Input,
}

mod band;
pub use band::*;

/// How a figure relates to its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Relation {
    /// Below the target.
    #[serde(rename = "<")]
    Below,
    /// Above the target.
    #[serde(rename = ">")]
    Above,
    /// Within a [`Band`] of the target (`"≈"`, or `"~"` to type).
    #[default]
    #[serde(rename = "≈", alias = "~")]
    About,
}

impl Relation {
    pub fn symbol(self) -> &'static str {
        match self {
            Relation::Below => "<",
            Relation::Above => ">",
            Relation::About => "≈",
        }
    }

    /// Whether `x` relates to `target` this way (for `≈`: within
    /// [`TIE_BAND`]; a check's `≈` uses its [`Band`] instead).
    pub fn holds(self, x: f64, target: f64) -> bool {
        match self {
            Relation::Below => x < target,
            Relation::Above => x > target,
            Relation::About => (x - target).abs() <= TIE_BAND * x.abs().max(target.abs()),
        }
    }
}

/// One line of a scenario's `expect` list: what the paper says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Expect {
    /// A bare line: neither a claim nor marked as prose (the shipped
    /// scenarios have none; reports say "not checked").
    Text(String),
    /// A line with its classification.
    Line(ExpectLine),
}

/// An `expect` line that is a claim (`claim`: the id its checks name, with
/// its `kind`, and for a fitted or input claim its `basis`) or prose
/// (`prose`: why the figures cannot check it). Exactly one of `claim` and
/// `prose` is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectLine {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Kind>,
    /// For a fitted claim the parameter fitted to it; for an input the
    /// input it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prose: Option<String>,
}

impl Expect {
    pub fn text(&self) -> &str {
        match self {
            Expect::Text(t) => t,
            Expect::Line(l) => &l.text,
        }
    }

    pub fn claim_id(&self) -> Option<&str> {
        match self {
            Expect::Line(l) => l.claim.as_deref(),
            Expect::Text(_) => None,
        }
    }

    pub fn prose(&self) -> Option<&str> {
        match self {
            Expect::Line(l) => l.prose.as_deref(),
            Expect::Text(_) => None,
        }
    }

    /// The claim's kind and basis, for a claim line.
    pub fn kind(&self) -> (Option<Kind>, Option<&str>) {
        match self {
            Expect::Line(l) => (l.kind, l.basis.as_deref()),
            Expect::Text(_) => (None, None),
        }
    }
}

/// A figure over seeds: the median and the range, over the seeds that gave
/// a value, and each seed's value (in seed order; NaN where a seed gave
/// none) for comparisons seed by seed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observed {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub seeds: usize,
    #[serde(skip)]
    pub per_seed: Vec<f64>,
}

impl Observed {
    /// The median (mean of the middle two for an even count) and range of
    /// the finite `values` (one per seed, in seed order; NaN for a seed
    /// without one); `None` if there are none.
    pub fn of(values: &[f64]) -> Option<Observed> {
        let mut v: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) };
        Some(Observed { median, min: v[0], max: v[n - 1], seeds: n, per_seed: values.to_vec() })
    }

    /// One value that did not vary.
    pub fn one(v: f64) -> Observed {
        Observed { median: v, min: v, max: v, seeds: 1, per_seed: vec![v] }
    }

    /// Whether `relation` holds between this figure and `other` in every
    /// seed both have a value for (a paired comparison: the same seed's
    /// random draws on both sides).
    pub fn holds_in_every_seed(&self, relation: Relation, other: &Observed) -> bool {
        self.per_seed
            .iter()
            .zip(&other.per_seed)
            .filter(|(a, b)| a.is_finite() && b.is_finite())
            .all(|(&a, &b)| relation.holds(a, b))
    }

    /// Whether `x` lies in `[min, max]` (to printing precision).
    pub fn contains(&self, x: f64) -> bool {
        let slack = 1e-9 * x.abs().max(1.0);
        x >= self.min - slack && x <= self.max + slack
    }
}

/// Half a unit of the last digit `p` is printed with (its shortest
/// decimal form, as the scenario file states it): 0.005 for 1.25, 0.5 for
/// 8641. A paper value is inside dyncore's range to that precision.
pub fn printed_half_unit(p: f64) -> f64 {
    printed_digits_half_unit(&format!("{p}"))
}

/// A figure a check names: how a reader calls it, and what the runs gave
/// (or why nothing).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Operand {
    /// E.g. "busy.ip of 600/200", "speedup of gcc on DYN-4".
    pub label: String,
    pub observed: Result<Observed, String>,
    /// What the code that computes the figure says it is made from.
    pub provenance: Provenance,
}

/// What a check's subject is held against.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// A value the paper states (`band` for a `≈`).
    Value { relation: Relation, value: f64, band: Band },
    /// Another figure of the scenario (`band` for a `≈`).
    Figure { relation: Relation, other: Operand, band: Band },
    /// A relative change from another figure, percent, within its band.
    Change { from: Operand, pct: f64, band: Band },
}

/// One check (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub subject: Operand,
    pub target: Target,
}

/// The verdict of a check or a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Held,
    Failed,
    /// A figure it names does not exist or has no value.
    NotEvaluated,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Held => "holds",
            Verdict::Failed => "FAILS",
            Verdict::NotEvaluated => "not evaluated",
        }
    }
}

/// A check with its verdict and what dyncore measured for it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckOutcome {
    /// "busy.ip of 600/200 > busy.tcp of 600/200".
    pub check: String,
    pub verdict: Verdict,
    /// What the runs gave: "0.85 against 1.00", "-2.2% (8477 against 8668)".
    pub measured: String,
    /// The compared quantity (a median, or a change in percent).
    pub value: Option<f64>,
    /// Why it was not evaluated.
    pub reason: Option<String>,
    /// For a `≈` check against a paper value: whether the value lies in
    /// the range over seeds.
    pub paper_in_range: Option<bool>,
    #[serde(skip)]
    pub spec: Check,
}

impl CheckOutcome {
    /// A `≈` check against a value the paper states (one of the "figures
    /// compared").
    pub fn is_figure(&self) -> bool {
        matches!(self.spec.target, Target::Value { relation: Relation::About, value, .. } if value != 0.0)
    }

    /// The relative difference of a figure check: (median - paper) / paper.
    pub fn rel_diff(&self) -> Option<f64> {
        match (&self.spec.target, &self.spec.subject.observed) {
            (Target::Value { relation: Relation::About, value, .. }, Ok(o)) if *value != 0.0 => {
                Some((o.median - value) / value)
            }
            _ => None,
        }
    }
}

/// One claim of the paper and the checks that test it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Claim {
    /// The `expect` line's claim id, or `paper.<i>` for an entry without
    /// one (its index in the `[[paper]]` list).
    pub id: String,
    pub kind: Kind,
    /// For a fitted or input claim: what was fitted to it, or which input
    /// it is.
    pub basis: String,
    /// The `expect` line, or the check's own description.
    pub text: String,
    /// Where the paper says it.
    pub source: String,
    /// What the scenario says beside the verdict (e.g. the mechanism that
    /// explains a miss).
    pub note: String,
    pub checks: Vec<Check>,
}

/// A claim with its verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClaimOutcome {
    pub id: String,
    pub kind: Kind,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub basis: String,
    pub claim: String,
    pub source: String,
    pub note: String,
    pub verdict: Verdict,
    pub checks: Vec<CheckOutcome>,
}

/// Every claim of a scenario with its verdict, and the `expect` lines that
/// are not claims.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Claims {
    pub claims: Vec<ClaimOutcome>,
    /// (line, why it cannot be checked).
    pub prose: Vec<(String, String)>,
    /// Lines marked neither claim nor prose.
    pub unclassified: Vec<String>,
}

/// What a scenario's (or a whole run's) claims came to. Only predictions
/// are counted as held or failed; fitted points and inputs are counted
/// apart, whatever their verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// `≈` checks against a paper value that were made (every kind).
    pub compared: usize,
    /// Of those, paper values outside their band around dyncore's range.
    pub differing: usize,
    /// Of those, paper values inside the range over seeds.
    pub in_range: usize,
    /// `≈` checks against a paper value that could not be made.
    pub unmatched: usize,
    pub predictions_held: usize,
    pub predictions_failed: usize,
    pub predictions_not_evaluated: usize,
    /// Fitted claims, shown and not counted.
    pub fitted: usize,
    /// Input claims, shown and not counted.
    pub inputs: usize,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.compared += o.compared;
        self.differing += o.differing;
        self.in_range += o.in_range;
        self.unmatched += o.unmatched;
        self.predictions_held += o.predictions_held;
        self.predictions_failed += o.predictions_failed;
        self.predictions_not_evaluated += o.predictions_not_evaluated;
        self.fitted += o.fitted;
        self.inputs += o.inputs;
    }
}

impl Counts {
    /// Predictions checked.
    pub fn predictions(&self) -> usize {
        self.predictions_held + self.predictions_failed + self.predictions_not_evaluated
    }

    /// Claims of every kind.
    pub fn claims(&self) -> usize {
        self.predictions() + self.fitted + self.inputs
    }

    /// "12 predictions checked: 5 hold, 7 fail; also 3 fitted points and 40
    /// inputs shown, not counted" (the line issue 33 asks for).
    pub fn sentence(&self) -> String {
        let n = |k: usize, what: &str| format!("{k} {what}{}", if k == 1 { "" } else { "s" });
        let mut s = format!(
            "{} checked: {} {}, {} {}",
            n(self.predictions(), "prediction"),
            self.predictions_held,
            if self.predictions_held == 1 { "holds" } else { "hold" },
            self.predictions_failed,
            if self.predictions_failed == 1 { "fails" } else { "fail" }
        );
        if self.predictions_not_evaluated > 0 {
            s += &format!(", {} not evaluated", self.predictions_not_evaluated);
        }
        s += &format!(
            "; also {} and {} shown, not counted",
            n(self.fitted, "fitted point"),
            n(self.inputs, "input")
        );
        s
    }
}

impl Claims {
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for claim in &self.claims {
            match (claim.kind, claim.verdict) {
                (Kind::Fitted, _) => c.fitted += 1,
                (Kind::Input, _) => c.inputs += 1,
                (Kind::Prediction, Verdict::Held) => c.predictions_held += 1,
                (Kind::Prediction, Verdict::Failed) => c.predictions_failed += 1,
                (Kind::Prediction, Verdict::NotEvaluated) => c.predictions_not_evaluated += 1,
            }
            for k in claim.checks.iter().filter(|k| k.is_figure()) {
                match k.rel_diff() {
                    Some(_) => {
                        c.compared += 1;
                        c.differing += usize::from(k.verdict == Verdict::Failed);
                        c.in_range += usize::from(k.paper_in_range == Some(true));
                    }
                    None => c.unmatched += 1,
                }
            }
        }
        c
    }

    /// The claims of one kind, in order.
    pub fn of_kind(&self, kind: Kind) -> impl Iterator<Item = &ClaimOutcome> {
        self.claims.iter().filter(move |c| c.kind == kind)
    }
}

/// A `[[paper]]` entry in the form every scenario kind shares, with its
/// figures already resolved ([`Operand`]s). Exactly one of `value`, `than`
/// and `change_pct` is set (validation guarantees it; see
/// [`check_form`]).
#[derive(Debug, Clone)]
pub struct Entry {
    pub subject: Operand,
    pub relation: Option<Relation>,
    pub value: Option<f64>,
    pub than: Option<Operand>,
    pub change_pct: Option<f64>,
    pub from: Option<Operand>,
    /// The band of a `≈` or a change ([`Band::of`]).
    pub band: Band,
    pub claim: Option<String>,
    /// The entry's own kind and basis (an entry without a claim id).
    pub kind: Option<Kind>,
    pub basis: String,
    pub source: String,
    pub note: String,
}

impl Entry {
    fn check(self) -> Check {
        let relation = self.relation.unwrap_or_default();
        let band = self.band;
        let target = match (self.value, self.than, self.change_pct, self.from) {
            (Some(value), _, _, _) => Target::Value { relation, value, band },
            (None, Some(other), _, _) => Target::Figure { relation, other, band },
            (None, None, Some(pct), Some(from)) => Target::Change { from, pct, band },
            _ => unreachable!("validated: a value, a figure or a change"),
        };
        Check { subject: self.subject, target }
    }
}

/// Joins distinct non-empty strings with "; ".
fn join_distinct(parts: impl Iterator<Item = String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for p in parts.filter(|p| !p.is_empty()) {
        if !seen.contains(&p) {
            seen.push(p);
        }
    }
    seen.join("; ")
}

/// The claims of a scenario from its `expect` lines and its resolved
/// `[[paper]]` entries (in the file's order), evaluated: one claim per
/// `expect` line with a claim id (in the file's order, its checks in
/// theirs), then one per entry without a claim id (id `paper.<i>`).
pub fn assemble(expect: &[Expect], entries: Vec<Entry>) -> Claims {
    let mut out = Claims::default();
    let mut grouped: Vec<(String, Vec<Entry>)> = Vec::new();
    let mut alone = Vec::new();
    for (i, e) in entries.into_iter().enumerate() {
        match e.claim.clone() {
            Some(id) => match grouped.iter_mut().find(|(g, _)| *g == id) {
                Some((_, v)) => v.push(e),
                None => grouped.push((id, vec![e])),
            },
            None => alone.push((i, e)),
        }
    }
    for line in expect {
        match (line.claim_id(), line.prose()) {
            (Some(id), _) => {
                let entries = grouped.iter().position(|(g, _)| g == id).map(|i| grouped.remove(i).1);
                let entries = entries.unwrap_or_default();
                let (kind, basis) = line.kind();
                let claim = Claim {
                    id: id.to_string(),
                    kind: kind.unwrap_or(Kind::Prediction),
                    basis: basis.unwrap_or_default().to_string(),
                    text: line.text().to_string(),
                    source: join_distinct(entries.iter().map(|e| e.source.clone())),
                    note: join_distinct(entries.iter().map(|e| e.note.clone())),
                    checks: entries.into_iter().map(Entry::check).collect(),
                };
                out.claims.push(evaluate(&claim));
            }
            (None, Some(why)) => out.prose.push((line.text().to_string(), why.to_string())),
            (None, None) => out.unclassified.push(line.text().to_string()),
        }
    }
    for (i, e) in alone {
        let (source, note, basis) = (e.source.clone(), e.note.clone(), e.basis.clone());
        let kind = e.kind.unwrap_or(Kind::Prediction);
        let check = e.check();
        let claim = Claim {
            id: format!("paper.{i}"),
            kind,
            basis,
            text: check.describe(),
            source,
            note,
            checks: vec![check],
        };
        out.claims.push(evaluate(&claim));
    }
    out
}

mod judge;
pub use judge::*;

mod validate;
pub use validate::*;

#[cfg(test)]
mod tests;
