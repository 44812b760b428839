//! Checking a scenario's `[[paper]]` entries before anything runs: their
//! form ([`check_form`]), their declared kinds against the provenance of the
//! figures they name ([`check_kinds`]), and self-comparisons
//! ([`self_comparison`], [`check_expect`]). Split from `claims.rs`, which
//! holds and assembles the claims (`judge.rs` judges them); the items are
//! re-exported there.

use super::*;

/// A `[[paper]]` entry's form, as every scenario kind has it (the fields
/// [`check_form`] judges).
#[derive(Debug, Clone, Copy, Default)]
pub struct Form<'a> {
    pub relation: Option<Relation>,
    pub value: Option<f64>,
    pub than: bool,
    pub change_pct: Option<f64>,
    pub tolerance_pts: Option<f64>,
    pub from: bool,
    pub tick: Option<f64>,
    pub about: Option<&'a str>,
    pub band_pct: Option<f64>,
    pub printed: Option<&'a str>,
    pub derived: Option<&'a str>,
}

/// Checks the shape a `[[paper]]` entry shares across scenario kinds:
/// exactly one of a value, a figure (`than`) or a change (`change_pct` with
/// `from`); finite numbers; a `≈` value non-zero (differences are relative
/// to it); no relation on a change; and the band (module docs, "Bands"):
/// `tick` only on a `≈` value; `about` (the paper's words) exactly with
/// `band_pct` (a `≈` value or figure) or `tolerance_pts` (a change), and
/// required on a `≈` between two figures. Returns the field at fault and
/// the message.
pub fn check_form(f: Form<'_>) -> Result<(), (&'static str, String)> {
    check_derived(&f)?;
    check_printed(&f)?;
    check_target(&f)?;
    check_change(&f)?;
    check_tick(&f)?;
    check_band_pct(&f)?;
    check_about(&f)
}

/// A fault in a `[[paper]]` entry's form: the field at fault and the
/// message.
type Fault = (&'static str, String);

impl Form<'_> {
    /// Whether the relation is `≈` (the default).
    fn about_rel(&self) -> bool {
        self.relation.unwrap_or_default() == Relation::About
    }
}

/// `derived`: one line of printed values, on a change with its
/// `tolerance_pts` and without `about`.
fn check_derived(f: &Form<'_>) -> Result<(), Fault> {
    let Some(d) = f.derived else { return Ok(()) };
    if d.trim().is_empty() || d.chars().any(char::is_control) {
        return Err(("derived", "expected the printed values the change is computed from, one line".into()));
    }
    if f.change_pct.is_none() || f.tolerance_pts.is_none() || f.about.is_some() {
        return Err((
            "derived",
            "`derived` (the printed values a change is computed from) goes with a `change_pct` and its \
             `tolerance_pts`, without `about`"
                .into(),
        ));
    }
    Ok(())
}

/// `printed`: the paper's digits for a `≈` value or a change, the same
/// number in another unit (a power of ten apart), with no other band.
fn check_printed(f: &Form<'_>) -> Result<(), Fault> {
    let Some(p) = f.printed else { return Ok(()) };
    let target = f.value.filter(|_| f.about_rel()).or(f.change_pct);
    let parsed = p.trim().parse::<f64>().ok().filter(|v| v.is_finite());
    let ok = match (target, parsed) {
        (Some(t), Some(0.0)) => t == 0.0,
        (Some(t), Some(v)) => {
            let r = (t / v).abs().log10();
            (r - r.round()).abs() < 1e-9
        }
        _ => false,
    };
    if !ok || f.tick.is_some() || f.about.is_some() || f.derived.is_some() {
        return Err((
            "printed",
            format!(
                "expected the paper's digits for a `≈` value or a change, the value itself in another unit (a \
                 power of ten apart), with no other band; found {p:?}"
            ),
        ));
    }
    Ok(())
}

/// Exactly one target (a value, a figure or a change), and a value finite
/// (non-zero for a `≈`: differences are relative to it).
fn check_target(f: &Form<'_>) -> Result<(), Fault> {
    let Form { value, than, change_pct, .. } = *f;
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
    let about_rel = f.about_rel();
    if let Some(v) = value
        && (!v.is_finite() || about_rel && v == 0.0)
    {
        return Err((
            "value",
            format!(
                "expected a finite{} number; found {v}",
                if about_rel { ", non-zero (a `≈` difference is relative to it)" } else { "" }
            ),
        ));
    }
    Ok(())
}

/// A change: finite, with `from` and no relation (`from` only on a
/// change); its `tolerance_pts` finite, non-negative, and given by
/// `about` or `derived`.
fn check_change(f: &Form<'_>) -> Result<(), Fault> {
    let Form { relation, change_pct, tolerance_pts, from, about, derived, .. } = *f;
    if let Some(p) = change_pct {
        if !p.is_finite() {
            return Err(("change_pct", format!("expected a finite number of percent; found {p}")));
        }
        if !from {
            return Err(("from", "a `change_pct` needs `from`: the figure it changes from".into()));
        }
        if relation.is_some() {
            return Err(("relation", "a change is checked within its band; it takes no relation".into()));
        }
    } else if from {
        return Err(("from", "`from` is for a `change_pct`".into()));
    }
    if let Some(t) = tolerance_pts {
        if change_pct.is_none() {
            return Err(("tolerance_pts", "`tolerance_pts` is for a `change_pct` (with `about`)".into()));
        }
        if !(t.is_finite() && t >= 0.0) {
            return Err(("tolerance_pts", format!("expected a finite number of points >= 0; found {t}")));
        }
        if about.is_none() && derived.is_none() {
            return Err((
                "tolerance_pts",
                "a change's band is its printed precision; a wider `tolerance_pts` needs `about`, the paper's \
                 own words (\"about\", \"approximately\") that make it approximate, or `derived`, the printed \
                 values it is computed from"
                    .into(),
            ));
        }
    }
    Ok(())
}

/// `tick`: a positive chart tick spacing, only on a `≈` value, and not
/// with `about`.
fn check_tick(f: &Form<'_>) -> Result<(), Fault> {
    let Some(t) = f.tick else { return Ok(()) };
    if !(f.value.is_some() && f.about_rel()) {
        return Err(("tick", "`tick` (a chart's tick spacing) is for a `≈` value read off a chart".into()));
    }
    if !(t.is_finite() && t > 0.0) {
        return Err(("tick", format!("expected a finite tick spacing > 0; found {t}")));
    }
    if f.about.is_some() {
        return Err((
            "about",
            "a value is read off a chart (`tick`) or said to be \"about\" (`about`), not both".into(),
        ));
    }
    Ok(())
}

/// `band_pct`: a percentage in (0, 100] on a `≈` value or figure, given by
/// `about`.
fn check_band_pct(f: &Form<'_>) -> Result<(), Fault> {
    let Some(p) = f.band_pct else { return Ok(()) };
    if !(f.about_rel() && f.change_pct.is_none()) {
        return Err((
            "band_pct",
            "`band_pct` is for a `≈` value or figure (a change takes `tolerance_pts`)".into(),
        ));
    }
    if !(p.is_finite() && p > 0.0 && p <= 100.0) {
        return Err(("band_pct", format!("expected a percentage in (0, 100]; found {p}")));
    }
    if f.about.is_none() {
        return Err((
            "band_pct",
            "a `≈` is judged to the paper's printed precision; a wider `band_pct` needs `about`, the paper's \
             own words (\"about\", \"approximately\") that make it approximate"
                .into(),
        ));
    }
    Ok(())
}

/// `about`: one line of the paper's words, with the band it gives
/// (`band_pct` or `tolerance_pts`); and required on a `≈` between two
/// figures.
fn check_about(f: &Form<'_>) -> Result<(), Fault> {
    if let Some(q) = f.about {
        if q.trim().is_empty() || q.chars().any(char::is_control) || f.derived.is_some() {
            return Err(("about", "expected the paper's words, one line".into()));
        }
        if f.band_pct.is_none() && f.tolerance_pts.is_none() {
            return Err((
                "about",
                "`about` needs its band: `band_pct` (a value or figure) or `tolerance_pts` (a change)".into(),
            ));
        }
    }
    if f.than && f.about_rel() && f.about.is_none() {
        return Err((
            "relation",
            "a `≈` between two figures needs `about` (the paper's word for it, e.g. \"similar\") and `band_pct`".into(),
        ));
    }
    Ok(())
}

/// One `[[paper]]` entry as [`check_kinds`] judges it.
#[derive(Debug, Clone, Default)]
pub struct EntryKind<'a> {
    pub claim: Option<&'a str>,
    pub kind: Option<Kind>,
    pub basis: Option<&'a str>,
    /// When every figure the entry names has [`Provenance::Input`]: the
    /// field to blame (`"metric"`) and why, from the code that computes it.
    pub input_only: Option<(&'static str, String)>,
}

/// Checks `expect` and the `[[paper]]` entries' claim ids
/// ([`check_expect`]), then every claim's kind: declared once (on its
/// `expect` line, or on an entry without a claim id), a `basis` exactly on
/// fitted and input claims, and no `prediction` whose entries all name
/// figures of [`Provenance::Input`] — a figure no run enters cannot be a
/// prediction. Returns the path and the message.
pub fn check_kinds(expect: &[Expect], entries: &[EntryKind<'_>]) -> Result<(), (Vec<String>, String)> {
    check_expect(expect, entries.iter().map(|e| e.claim))?;
    let at = |what: &str, i: usize, k: &str| vec![what.to_string(), i.to_string(), k.to_string()];
    let basis_ok =
        |what: &str, i: usize, kind: Kind, basis: Option<&str>| -> Result<(), (Vec<String>, String)> {
            match (kind, basis) {
                (Kind::Prediction, Some(_)) => Err((
                    at(what, i, "basis"),
                    "a `prediction` has no `basis` (that is for a fitted point or an input)".into(),
                )),
                (Kind::Fitted | Kind::Input, None) => Err((
                    at(what, i, "kind"),
                    format!(
                        "a `{}` claim needs `basis`: {}",
                        kind.word(),
                        if kind == Kind::Fitted { "the parameter fitted to it" } else { "the input it is" }
                    ),
                )),
                (_, Some(b)) if b.trim().is_empty() || b.chars().any(char::is_control) => {
                    Err((at(what, i, "basis"), "expected one line".into()))
                }
                _ => Ok(()),
            }
        };
    for (i, e) in expect.iter().enumerate() {
        let Expect::Line(l) = e else { continue };
        match (&l.claim, l.kind) {
            (Some(_), None) => {
                return Err((
                    at("expect", i, "claim"),
                    "a claim needs `kind`: \"prediction\" (dyncore's mechanism produces it), \"fitted\" (a parameter \
                     was set from it) or \"input\" (a scenario or model input, or a closed form of inputs)"
                        .into(),
                ));
            }
            (Some(_), Some(k)) => basis_ok("expect", i, k, l.basis.as_deref())?,
            (None, Some(_)) => return Err((at("expect", i, "kind"), "`kind` is for a claim line".into())),
            (None, None) if l.basis.is_some() => {
                return Err((at("expect", i, "basis"), "`basis` is for a claim line".into()));
            }
            (None, None) => {}
        }
    }
    for (i, e) in entries.iter().enumerate() {
        let kind = match e.claim {
            Some(id) => {
                if e.kind.is_some() || e.basis.is_some() {
                    return Err((
                        at("paper", i, if e.kind.is_some() { "kind" } else { "basis" }),
                        format!("the claim `{id}` declares its kind on its `expect` line"),
                    ));
                }
                expect.iter().find(|l| l.claim_id() == Some(id)).and_then(|l| l.kind().0)
            }
            None => {
                let Some(k) = e.kind else {
                    return Err((
                        at("paper", i, "kind"),
                        "an entry without a claim id is a claim: it needs `kind` (\"prediction\", \"fitted\" or \
                         \"input\")"
                            .into(),
                    ));
                };
                basis_ok("paper", i, k, e.basis)?;
                Some(k)
            }
        };
        if kind == Some(Kind::Prediction)
            && let Some((field, why)) = &e.input_only
        {
            return Err((
                at("paper", i, field),
                format!(
                    "declared a `prediction`, but {why}: no run enters it. Declare it `input` (or `fitted`) with \
                     its `basis`"
                ),
            ));
        }
    }
    Ok(())
}

/// The message for a `than` or `from` that names the entry's own figure.
pub fn self_comparison(field: &str) -> String {
    format!(
        "`{field}` names the entry's own figure (every field it leaves out is the entry's): a figure compared with \
         itself always holds. Name another run, series or metric"
    )
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
