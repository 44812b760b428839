//! The paper's claims as report text (`dyncore_sim::claims` evaluates them):
//! one table row per check, grouped by claim with the claim's verdict, the
//! lines that are prose with why they cannot be checked, and one sentence
//! of counts. Shared by the simulator's, the NewtOS and the live reports.

use std::fmt::Write as _;

use dyncore_sim::claims::{ClaimOutcome, Claims, Kind, Verdict};

use crate::table::Table;

/// The three groups a report shows apart, in order, with their headings.
pub const GROUPS: [(Kind, &str); 3] = [
    (Kind::Prediction, "Predictions (dyncore's mechanisms produce these figures; counted)"),
    (Kind::Fitted, "Fitted points (a model parameter was set from these figures; shown, not counted)"),
    (Kind::Input, "Inputs (scenario or model inputs, or closed forms of them; shown, not counted)"),
];

/// One row per check of the claims of `kind`: the claim (on its first
/// check), the check, what dyncore measured, the check's verdict, the
/// claim's verdict, source, and note (for a fitted or input claim, its
/// basis first).
pub fn table_of(c: &Claims, kind: Kind) -> Table {
    let mut t = Table::new("", &["claim", "check", "dyncore", "check holds", "claim", "source", "note"]);
    for claim in c.of_kind(kind) {
        for (i, k) in claim.checks.iter().enumerate() {
            let first = i == 0;
            let measured = match &k.reason {
                Some(r) => format!("– ({r})"),
                None => k.measured.clone(),
            };
            t.row(vec![
                if first { format!("{} (`{}`)", claim.claim, claim.id) } else { String::new() },
                k.check.clone(),
                measured,
                k.verdict.word().to_string(),
                if first { claim.verdict.word().to_string() } else { String::new() },
                if first { claim.source.clone() } else { String::new() },
                if first { note(claim) } else { String::new() },
            ]);
        }
    }
    t
}

fn note(claim: &ClaimOutcome) -> String {
    match (claim.basis.is_empty(), claim.note.is_empty()) {
        (true, _) => claim.note.clone(),
        (false, true) => format!("{}: {}", claim.kind.word(), claim.basis),
        (false, false) => format!("{}: {}; {}", claim.kind.word(), claim.basis, claim.note),
    }
}

/// Which rows of [`table_of`] belong to a claim that does not hold (for
/// shading).
pub fn failed_rows(c: &Claims, kind: Kind) -> Vec<bool> {
    c.of_kind(kind).flat_map(|cl| std::iter::repeat_n(cl.verdict != Verdict::Held, cl.checks.len())).collect()
}

/// "4 predictions checked: 3 hold, 1 fails; also 0 fitted points and 2
/// inputs shown, not counted."
pub fn sentence(c: &Claims) -> String {
    let mut s = c.counts().sentence();
    s.push('.');
    s
}

const RULE: &str = "Each claim holds when all its checks hold. A `≈` is judged to the paper's printed precision (half a \
                    unit of its last digit, at least 0.5%), half a chart tick for a value read off a chart, or the \
                    band the paper's own \"about\" allows, widened by the seeds' range; an ordering compares medians \
                    and must hold in every seed (docs/scenarios.md, \"Claims\").";

/// The section of a `report.md`: one table per kind, then prose and
/// unchecked lines.
pub fn markdown(c: &Claims) -> String {
    let mut s = String::from("## The paper's claims, checked\n\n");
    if c.claims.is_empty() {
        s += "This scenario states no claim that its figures can check.\n\n";
    } else {
        let _ = writeln!(s, "{RULE} {}\n", sentence(c));
        for (kind, heading) in GROUPS {
            if c.of_kind(kind).next().is_some() {
                let _ = writeln!(s, "### {heading}\n");
                s += &table_of(c, kind).to_markdown();
                s.push('\n');
            }
        }
    }
    s += &prose_markdown(c);
    s
}

/// The prose lines (and any unclassified ones) as a Markdown list.
pub fn prose_markdown(c: &Claims) -> String {
    let mut s = String::new();
    if !c.prose.is_empty() {
        s += "Prose (what the paper says that these figures cannot check):\n\n";
        for (line, why) in &c.prose {
            let _ = writeln!(s, "* {line} — *{why}*");
        }
        s.push('\n');
    }
    if !c.unclassified.is_empty() {
        s += "Not checked (marked neither claim nor prose):\n\n";
        for line in &c.unclassified {
            let _ = writeln!(s, "* {line}");
        }
        s.push('\n');
    }
    s
}

/// The section of the page: one table per kind, shaded where a claim
/// fails, and the prose.
pub fn html(c: &Claims) -> String {
    let mut s = String::from("<h3>The paper's claims, checked</h3>\n");
    if !c.claims.is_empty() {
        let _ = writeln!(s, "<p>{}</p>", crate::table::escape_html(&sentence(c)));
        for (kind, heading) in GROUPS {
            if c.of_kind(kind).next().is_none() {
                continue;
            }
            let _ = writeln!(
                s,
                "<h4 class=\"claims-{}\">{}</h4>",
                kind.word(),
                crate::table::escape_html(heading)
            );
            let failed = failed_rows(c, kind);
            s += "<div class=\"table-wrap\">\n";
            s += &table_of(c, kind).to_html(|i| failed.get(i).copied().unwrap_or(false).then_some("differs"));
            s += "</div>\n";
        }
    }
    s += &crate::markdown::to_html(&prose_markdown(c), 0, "");
    s
}
