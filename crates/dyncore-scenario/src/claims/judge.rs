//! Judging: a check in words ([`Check::describe`]), a check's verdict
//! from what its operands observed ([`evaluate_check`]) and a claim's from
//! its checks' ([`evaluate`]), and the numbers as the claim tables print
//! them ([`fmt_num`]). Split from `claims.rs`, which holds the claims and
//! assembles them; the items are re-exported there.

use super::*;

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

/// A band's half-width as a reader wants it: "±43", "±0.05".
fn fmt_pm(h: f64) -> String {
    let t = format!("{h:.4}");
    let t = t.trim_end_matches('0').trim_end_matches('.');
    format!("±{t}")
}

fn fmt_observed(o: &Observed) -> String {
    let (lo, hi) = (fmt_num(o.min), fmt_num(o.max));
    if lo == hi { fmt_num(o.median) } else { format!("{} [{lo}–{hi}]", fmt_num(o.median)) }
}

impl Check {
    /// The check in words: "mbps of 1600 ≈ 7840 (±39, printed)".
    pub fn describe(&self) -> String {
        let s = &self.subject.label;
        match &self.target {
            Target::Value { relation: Relation::About, value, band } => {
                format!("{s} ≈ {} ({}, {})", fmt_num(*value), fmt_pm(band.around(*value)), band.describe())
            }
            Target::Value { relation, value, .. } => format!("{s} {} {}", relation.symbol(), fmt_num(*value)),
            Target::Figure { relation: Relation::About, other, band } => {
                let w = match band {
                    Band::About { width, .. } => format!("±{}%", fmt_pct(width * 100.0)),
                    _ => fmt_pm(0.0),
                };
                format!("{s} ≈ {} ({w}, {})", other.label, band.describe())
            }
            Target::Figure { relation, other, .. } => format!("{s} {} {}", relation.symbol(), other.label),
            Target::Change { from, pct, band } if *pct == 0.0 => {
                format!(
                    "{s} equal to {} ({} points, {})",
                    from.label,
                    fmt_pm(band.around_change()),
                    band.describe()
                )
            }
            Target::Change { from, pct, band } => {
                let dir = if *pct < 0.0 { "below" } else { "above" };
                format!(
                    "{s} {}% {dir} {} ({} points, {})",
                    fmt_pct(pct.abs()),
                    from.label,
                    fmt_pm(band.around_change()),
                    band.describe()
                )
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
        Target::Value { relation, value, band } => {
            let in_range = (*relation == Relation::About).then(|| {
                let h = printed_half_unit(*value);
                subject.max >= value - h && subject.min <= value + h
            });
            let ok = match relation {
                Relation::About => {
                    let b = band.around(*value);
                    *value >= subject.min - b && *value <= subject.max + b
                }
                _ => relation.holds(x, *value),
            };
            let measured = match relation {
                Relation::About if *value != 0.0 => {
                    format!("{} ({:+.1}%)", fmt_observed(&subject), (x - value) / value * 100.0)
                }
                _ => fmt_observed(&subject),
            };
            out(verdict(ok), measured, Some(x), None, in_range)
        }
        Target::Figure { relation, other, band } => match &other.observed {
            Ok(o) => {
                let mut measured = format!("{} against {}", fmt_observed(&subject), fmt_observed(o));
                if *relation == Relation::About {
                    let width = match band {
                        Band::About { width, .. } => *width,
                        _ => 0.0,
                    };
                    let reach =
                        width * o.median.abs() + 0.5 * (subject.max - subject.min) + 0.5 * (o.max - o.min);
                    if o.median != 0.0 {
                        measured += &format!(" ({:+.1}%)", (x - o.median) / o.median * 100.0);
                    }
                    return out(verdict((x - o.median).abs() <= reach), measured, Some(x), None, None);
                }
                let every = subject.holds_in_every_seed(*relation, o);
                let tied = (x - o.median).abs() <= TIE_BAND * x.abs().max(o.median.abs());
                if relation.holds(x, o.median) && tied {
                    measured += " (tied: within 0.1%)";
                } else if relation.holds(x, o.median) && !every {
                    measured += " (not in every seed)";
                }
                out(verdict(relation.holds(x, o.median) && every && !tied), measured, Some(x), None, None)
            }
            Err(why) => missing(&format!("{}: {why}", other.label)),
        },
        Target::Change { from, pct, band } => match &from.observed {
            Ok(o) if o.median != 0.0 => {
                let change = (x - o.median) / o.median * 100.0;
                // Each seed's change, its subject against the same seed's
                // reference: the range the seeds spread.
                let per_seed: Vec<f64> = subject
                    .per_seed
                    .iter()
                    .zip(&o.per_seed)
                    .filter(|(a, b)| a.is_finite() && b.is_finite() && **b != 0.0)
                    .map(|(a, b)| (a - b) / b * 100.0)
                    .collect();
                let lo = per_seed.iter().copied().fold(change, f64::min);
                let hi = per_seed.iter().copied().fold(change, f64::max);
                let mut measured =
                    format!("{change:+.1}% ({} against {})", fmt_num(subject.median), fmt_num(o.median));
                if hi - lo >= 0.05 {
                    measured += &format!(" [seeds {lo:+.1}% to {hi:+.1}%]");
                }
                let b = band.around_change();
                let ok = *pct >= lo - b && *pct <= hi + b;
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
        id: claim.id.clone(),
        kind: claim.kind,
        basis: claim.basis.clone(),
        claim: claim.text.clone(),
        source: claim.source.clone(),
        note: claim.note.clone(),
        verdict,
        checks,
    }
}
