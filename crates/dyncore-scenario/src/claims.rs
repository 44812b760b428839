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
//!   it) or `≈` (within [`ABOUT_BAND`] = 25% of it, the band the reports
//!   have always flagged differences at). A paper's bound ("IP below 40%")
//!   is a `<` check, not a point it must come near;
//! * **another figure** of the same scenario with a relation: "busy.ip of
//!   600/200 > busy.tcp of 600/200"; `≈` means within 25% of the other;
//! * **a relative change** from another figure, in percent, with a
//!   tolerance in percentage points: "mbps of 1600 is 9% below mbps of
//!   2267, ± 3 points" holds when the change lies in [-12%, -6%].
//!
//! Every check compares **medians over the seeds**; the range over seeds is
//! shown beside it. An ordering between two figures (`<` or `>`) must also
//! hold **in every seed**, compared seed by seed, and differ by more than
//! [`TIE_BAND`] (0.1%): a difference smaller than what the seeds move, or
//! than the tables show, is no ordering. A check whose figure does not exist
//! (a typo) or has no value (the program never finished) is *not
//! evaluated*, never held.
//!
//! # Claims
//!
//! A claim is one statement of the paper — a scenario's `expect` line with
//! a `claim` id — checked by every `[[paper]]` entry that names that id; it
//! **holds when all its checks hold**. A `[[paper]]` entry without a claim
//! id is a claim of its own (a figure the paper states). An `expect` line
//! that cannot be checked against the figures is marked `prose`, with the
//! reason.
//!
//! The *figures compared* of the summary are the `≈` checks against a
//! paper's value (the reports' long-standing count); the *claims held* and
//! *claims failed* count every claim.

use serde::{Deserialize, Serialize};

/// `≈` means within this relative distance (of the value, or of the other
/// figure).
pub const ABOUT_BAND: f64 = 0.25;

/// Two figures whose medians differ by less than this fraction of the
/// larger are tied: no ordering between them holds (the tables print three
/// significant digits; a difference below them is no difference a reader
/// could see).
pub const TIE_BAND: f64 = 0.001;

/// Tolerance of a relative-change check when the entry gives none, in
/// percentage points (the issue's "Table 2's relative drops, within 3
/// points", used for every change check of the shipped scenarios).
pub const DEFAULT_TOLERANCE_PTS: f64 = 3.0;

/// How a figure relates to its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Relation {
    /// Below the target.
    #[serde(rename = "<")]
    Below,
    /// Above the target.
    #[serde(rename = ">")]
    Above,
    /// Within [`ABOUT_BAND`] of the target (`"≈"`, or `"~"` to type).
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

    /// Whether `x` relates to `target` this way.
    pub fn holds(self, x: f64, target: f64) -> bool {
        match self {
            Relation::Below => x < target,
            Relation::Above => x > target,
            Relation::About => {
                target != 0.0 && ((x - target) / target).abs() <= ABOUT_BAND || target == 0.0 && x == 0.0
            }
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

/// An `expect` line that is a claim (`claim`: the id its checks name) or
/// prose (`prose`: why the figures cannot check it). Exactly one is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectLine {
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
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
    let text = format!("{p}");
    let decimals = text.split_once('.').map_or(0, |(_, d)| d.len()) as i32;
    0.5 * 10f64.powi(-decimals)
}

/// A figure a check names: how a reader calls it, and what the runs gave
/// (or why nothing).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Operand {
    /// E.g. "busy.ip of 600/200", "speedup of gcc on DYN-4".
    pub label: String,
    pub observed: Result<Observed, String>,
}

/// What a check's subject is held against.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// A value the paper states.
    Value { relation: Relation, value: f64 },
    /// Another figure of the scenario.
    Figure { relation: Relation, other: Operand },
    /// A relative change from another figure, percent, ± points.
    Change { from: Operand, pct: f64, tolerance_pts: f64 },
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
        matches!(self.spec.target, Target::Value { relation: Relation::About, value } if value != 0.0)
    }

    /// The relative difference of a figure check: (median - paper) / paper.
    pub fn rel_diff(&self) -> Option<f64> {
        match (&self.spec.target, &self.spec.subject.observed) {
            (Target::Value { relation: Relation::About, value }, Ok(o)) if *value != 0.0 => {
                Some((o.median - value) / value)
            }
            _ => None,
        }
    }
}

/// One claim of the paper and the checks that test it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Claim {
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

/// What a scenario's (or a whole run's) claims came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// `≈` checks against a paper value that were made.
    pub compared: usize,
    /// Of those, medians more than [`ABOUT_BAND`] from the paper.
    pub differing: usize,
    /// Of those, paper values inside the range over seeds.
    pub in_range: usize,
    /// `≈` checks against a paper value that could not be made.
    pub unmatched: usize,
    pub claims_held: usize,
    pub claims_failed: usize,
    pub claims_not_evaluated: usize,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.compared += o.compared;
        self.differing += o.differing;
        self.in_range += o.in_range;
        self.unmatched += o.unmatched;
        self.claims_held += o.claims_held;
        self.claims_failed += o.claims_failed;
        self.claims_not_evaluated += o.claims_not_evaluated;
    }
}

impl Counts {
    pub fn claims(&self) -> usize {
        self.claims_held + self.claims_failed + self.claims_not_evaluated
    }
}

impl Claims {
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for claim in &self.claims {
            match claim.verdict {
                Verdict::Held => c.claims_held += 1,
                Verdict::Failed => c.claims_failed += 1,
                Verdict::NotEvaluated => c.claims_not_evaluated += 1,
            }
            for k in claim.checks.iter().filter(|k| k.is_figure()) {
                match k.rel_diff() {
                    Some(d) => {
                        c.compared += 1;
                        c.differing += usize::from(d.abs() > ABOUT_BAND);
                        c.in_range += usize::from(k.paper_in_range == Some(true));
                    }
                    None => c.unmatched += 1,
                }
            }
        }
        c
    }
}

/// A number as the claim tables print it.
pub fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 || a == 0.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// "9", "12.3": a percentage as the paper would write it.
fn fmt_pct(p: f64) -> String {
    if p == p.round() { format!("{p:.0}") } else { format!("{p:.1}") }
}

fn fmt_observed(o: &Observed) -> String {
    let (lo, hi) = (fmt_num(o.min), fmt_num(o.max));
    if lo == hi { fmt_num(o.median) } else { format!("{} [{lo}–{hi}]", fmt_num(o.median)) }
}

impl Check {
    /// The check in words: "mbps of 1600 ≈ 7840 (±25%)".
    pub fn describe(&self) -> String {
        let s = &self.subject.label;
        match &self.target {
            Target::Value { relation: Relation::About, value } => {
                format!("{s} ≈ {} (±{:.0}%)", fmt_num(*value), ABOUT_BAND * 100.0)
            }
            Target::Value { relation, value } => format!("{s} {} {}", relation.symbol(), fmt_num(*value)),
            Target::Figure { relation: Relation::About, other } => {
                format!("{s} ≈ {} (±{:.0}%)", other.label, ABOUT_BAND * 100.0)
            }
            Target::Figure { relation, other } => format!("{s} {} {}", relation.symbol(), other.label),
            Target::Change { from, pct, tolerance_pts } if *pct == 0.0 => {
                format!("{s} equal to {} (±{tolerance_pts:.0} points)", from.label)
            }
            Target::Change { from, pct, tolerance_pts } => {
                let dir = if *pct < 0.0 { "below" } else { "above" };
                format!("{s} {}% {dir} {} (±{tolerance_pts:.0} points)", fmt_pct(pct.abs()), from.label)
            }
        }
    }
}

/// Evaluates one check (pure: what the operands observed decides).
pub fn evaluate_check(check: &Check) -> CheckOutcome {
    let out = |verdict, measured: String, value, reason, paper_in_range| CheckOutcome {
        check: check.describe(),
        verdict,
        measured,
        value,
        reason,
        paper_in_range,
        spec: check.clone(),
    };
    let missing = |why: &str| out(Verdict::NotEvaluated, "–".into(), None, Some(why.to_string()), None);
    let subject = match &check.subject.observed {
        Ok(o) => o.clone(),
        Err(why) => return missing(&format!("{}: {why}", check.subject.label)),
    };
    let x = subject.median;
    let verdict = |ok: bool| if ok { Verdict::Held } else { Verdict::Failed };
    match &check.target {
        Target::Value { relation, value } => {
            let in_range = (*relation == Relation::About).then(|| {
                let h = printed_half_unit(*value);
                subject.max >= value - h && subject.min <= value + h
            });
            let measured = match relation {
                Relation::About if *value != 0.0 => {
                    format!("{} ({:+.0}%)", fmt_observed(&subject), (x - value) / value * 100.0)
                }
                _ => fmt_observed(&subject),
            };
            out(verdict(relation.holds(x, *value)), measured, Some(x), None, in_range)
        }
        Target::Figure { relation, other } => match &other.observed {
            Ok(o) => {
                let ordering = *relation != Relation::About;
                let every = !ordering || subject.holds_in_every_seed(*relation, o);
                let tied = ordering && (x - o.median).abs() <= TIE_BAND * x.abs().max(o.median.abs());
                let mut measured = format!("{} against {}", fmt_observed(&subject), fmt_observed(o));
                if relation.holds(x, o.median) && tied {
                    measured += " (tied: within 0.1%)";
                } else if relation.holds(x, o.median) && !every {
                    measured += " (not in every seed)";
                }
                out(verdict(relation.holds(x, o.median) && every && !tied), measured, Some(x), None, None)
            }
            Err(why) => missing(&format!("{}: {why}", other.label)),
        },
        Target::Change { from, pct, tolerance_pts } => match &from.observed {
            Ok(o) if o.median != 0.0 => {
                let change = (x - o.median) / o.median * 100.0;
                let measured =
                    format!("{change:+.1}% ({} against {})", fmt_num(subject.median), fmt_num(o.median));
                let ok = (change - pct).abs() <= *tolerance_pts;
                out(verdict(ok), measured, Some(change), None, None)
            }
            Ok(_) => missing(&format!("{}: zero, no relative change can be taken from it", from.label)),
            Err(why) => missing(&format!("{}: {why}", from.label)),
        },
    }
}

/// Evaluates a claim: held when every check holds; failed when one fails;
/// otherwise (a check could not be made) not evaluated.
pub fn evaluate(claim: &Claim) -> ClaimOutcome {
    let checks: Vec<CheckOutcome> = claim.checks.iter().map(evaluate_check).collect();
    let verdict = if checks.iter().any(|c| c.verdict == Verdict::Failed) {
        Verdict::Failed
    } else if checks.iter().any(|c| c.verdict == Verdict::NotEvaluated) || checks.is_empty() {
        Verdict::NotEvaluated
    } else {
        Verdict::Held
    };
    ClaimOutcome {
        claim: claim.text.clone(),
        source: claim.source.clone(),
        note: claim.note.clone(),
        verdict,
        checks,
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
    pub tolerance_pts: Option<f64>,
    pub from: Option<Operand>,
    pub claim: Option<String>,
    pub source: String,
    pub note: String,
}

impl Entry {
    fn check(self) -> Check {
        let relation = self.relation.unwrap_or_default();
        let target = match (self.value, self.than, self.change_pct, self.from) {
            (Some(value), _, _, _) => Target::Value { relation, value },
            (None, Some(other), _, _) => Target::Figure { relation, other },
            (None, None, Some(pct), Some(from)) => Target::Change {
                from,
                pct,
                tolerance_pts: self.tolerance_pts.unwrap_or(DEFAULT_TOLERANCE_PTS),
            },
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
/// `[[paper]]` entries, evaluated: one claim per `expect` line with a claim
/// id (in the file's order, its checks in theirs), then one per entry
/// without a claim id.
pub fn assemble(expect: &[Expect], entries: Vec<Entry>) -> Claims {
    let mut out = Claims::default();
    let mut grouped: Vec<(String, Vec<Entry>)> = Vec::new();
    let mut alone = Vec::new();
    for e in entries {
        match e.claim.clone() {
            Some(id) => match grouped.iter_mut().find(|(g, _)| *g == id) {
                Some((_, v)) => v.push(e),
                None => grouped.push((id, vec![e])),
            },
            None => alone.push(e),
        }
    }
    for line in expect {
        match (line.claim_id(), line.prose()) {
            (Some(id), _) => {
                let entries = grouped.iter().position(|(g, _)| g == id).map(|i| grouped.remove(i).1);
                let entries = entries.unwrap_or_default();
                let claim = Claim {
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
    for e in alone {
        let (source, note) = (e.source.clone(), e.note.clone());
        let check = e.check();
        let claim = Claim { text: check.describe(), source, note, checks: vec![check] };
        out.claims.push(evaluate(&claim));
    }
    out
}

/// Checks the shape a `[[paper]]` entry shares across scenario kinds:
/// exactly one of a value, a figure (`than`) or a change (`change_pct` with
/// `from`); finite numbers; a `≈` value non-zero (differences are relative
/// to it); a tolerance only on a change, and no relation there. Returns the
/// field at fault and the message.
#[allow(clippy::too_many_arguments)]
pub fn check_form(
    relation: Option<Relation>,
    value: Option<f64>,
    than: bool,
    change_pct: Option<f64>,
    tolerance_pts: Option<f64>,
    from: bool,
) -> Result<(), (&'static str, String)> {
    let forms = usize::from(value.is_some()) + usize::from(than) + usize::from(change_pct.is_some());
    if forms != 1 {
        let field = if value.is_some() {
            "value"
        } else if than {
            "than"
        } else {
            "change_pct"
        };
        return Err((
            field,
            format!(
                "expected exactly one of `value`, `than` (another figure) or `change_pct` (with `from`); found {forms}"
            ),
        ));
    }
    if let Some(v) = value {
        let about = relation.unwrap_or_default() == Relation::About;
        if !v.is_finite() || about && v == 0.0 {
            return Err((
                "value",
                format!(
                    "expected a finite{} number; found {v}",
                    if about { ", non-zero (a `≈` difference is relative to it)" } else { "" }
                ),
            ));
        }
    }
    if let Some(p) = change_pct {
        if !p.is_finite() {
            return Err(("change_pct", format!("expected a finite number of percent; found {p}")));
        }
        if !from {
            return Err(("from", "a `change_pct` needs `from`: the figure it changes from".into()));
        }
        if relation.is_some() {
            return Err((
                "relation",
                "a change is checked within `tolerance_pts`; it takes no relation".into(),
            ));
        }
    } else if from {
        return Err(("from", "`from` is for a `change_pct`".into()));
    }
    if let Some(t) = tolerance_pts {
        if change_pct.is_none() {
            return Err(("tolerance_pts", "`tolerance_pts` is for a `change_pct`".into()));
        }
        if !(t.is_finite() && t >= 0.0) {
            return Err(("tolerance_pts", format!("expected a finite number of points >= 0; found {t}")));
        }
    }
    Ok(())
}

/// Checks `expect` and the claim ids the `[[paper]]` entries name: every
/// line one line of text, marked at most one of `claim` or `prose`, claim
/// ids unique, each named by at least one entry, and every entry's id that
/// of a line. Returns the path (`["expect", "2", "claim"]`) and the message.
pub fn check_expect<'a>(
    expect: &[Expect],
    entry_claims: impl Iterator<Item = Option<&'a str>>,
) -> Result<(), (Vec<String>, String)> {
    let at = |i: usize, k: &str| {
        let mut p = vec!["expect".to_string(), i.to_string()];
        if !k.is_empty() {
            p.push(k.to_string());
        }
        p
    };
    let mut ids: Vec<&str> = Vec::new();
    for (i, e) in expect.iter().enumerate() {
        if let Some(c) = e.text().chars().find(|c| c.is_control()) {
            return Err((at(i, ""), format!("expected one line of text; found a string containing {c:?}")));
        }
        if let Expect::Line(l) = e {
            if l.text.trim().is_empty() {
                return Err((at(i, "text"), "expected the paper's statement; found an empty string".into()));
            }
            match (&l.claim, &l.prose) {
                (Some(_), Some(_)) => {
                    return Err((
                        at(i, "prose"),
                        "a line is a claim (`claim`) or prose (`prose`), not both".into(),
                    ));
                }
                (None, None) => {
                    return Err((
                        at(i, "text"),
                        "a line needs `claim` (the id its [[paper]] checks name) or `prose` (why it cannot be checked)"
                            .into(),
                    ));
                }
                (Some(id), None) => {
                    if id.is_empty() || id.chars().any(|c| c.is_control() || c.is_whitespace()) {
                        return Err((at(i, "claim"), format!("expected an id without spaces; found {id:?}")));
                    }
                    if ids.contains(&id.as_str()) {
                        return Err((at(i, "claim"), format!("a second line with the claim id `{id}`")));
                    }
                    ids.push(id);
                }
                (None, Some(why)) => {
                    if why.trim().is_empty() || why.chars().any(char::is_control) {
                        return Err((
                            at(i, "prose"),
                            "expected one line saying why it cannot be checked".into(),
                        ));
                    }
                }
            }
        }
    }
    let mut used = vec![false; ids.len()];
    for (j, c) in entry_claims.enumerate() {
        if let Some(c) = c {
            match ids.iter().position(|id| *id == c) {
                Some(i) => used[i] = true,
                None => {
                    return Err((
                        vec!["paper".into(), j.to_string(), "claim".into()],
                        format!("no `expect` line has the claim id `{c}`"),
                    ));
                }
            }
        }
    }
    if let Some(i) = used.iter().position(|u| !u) {
        let line = expect.iter().position(|e| e.claim_id() == Some(ids[i])).expect("an id of a line");
        return Err((at(line, "claim"), format!("no [[paper]] entry checks the claim `{}`", ids[i])));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
