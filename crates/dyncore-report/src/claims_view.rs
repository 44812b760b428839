//! The paper's claims as report text (`dyncore_sim::claims` evaluates them):
//! one table row per check, grouped by claim with the claim's verdict, the
//! lines that are prose with why they cannot be checked, and one sentence
//! of counts. Shared by the simulator's, the NewtOS and the live reports.

use std::fmt::Write as _;

use dyncore_sim::claims::{Claims, Verdict};

use crate::table::Table;

/// One row per check: the claim (on its first check), the check, what
/// dyncore measured, the check's verdict, the claim's verdict, source and
/// note.
pub fn table(c: &Claims) -> Table {
    let mut t = Table::new("", &["claim", "check", "dyncore", "check holds", "claim", "source", "note"]);
    for claim in &c.claims {
        for (i, k) in claim.checks.iter().enumerate() {
            let first = i == 0;
            let measured = match &k.reason {
                Some(r) => format!("– ({r})"),
                None => k.measured.clone(),
            };
            t.row(vec![
                if first { claim.claim.clone() } else { String::new() },
                k.check.clone(),
                measured,
                k.verdict.word().to_string(),
                if first { claim.verdict.word().to_string() } else { String::new() },
                if first { claim.source.clone() } else { String::new() },
                if first { claim.note.clone() } else { String::new() },
            ]);
        }
    }
    t
}

/// Which rows of [`table`] belong to a claim that does not hold (for
/// shading).
pub fn failed_rows(c: &Claims) -> Vec<bool> {
    c.claims.iter().flat_map(|cl| std::iter::repeat_n(cl.verdict != Verdict::Held, cl.checks.len())).collect()
}

/// "4 claims checked: 3 hold, 1 fails."
pub fn sentence(c: &Claims) -> String {
    let k = c.counts();
    let mut s = format!(
        "{} checked: {} {}, {} {}",
        plural(k.claims(), "claim"),
        k.claims_held,
        if k.claims_held == 1 { "holds" } else { "hold" },
        k.claims_failed,
        if k.claims_failed == 1 { "fails" } else { "fail" }
    );
    if k.claims_not_evaluated > 0 {
        let _ = write!(s, ", {} not evaluated", k.claims_not_evaluated);
    }
    s.push('.');
    s
}

fn plural(k: usize, what: &str) -> String {
    format!("{k} {what}{}", if k == 1 { "" } else { "s" })
}

/// The section of a `report.md`: the claims table, then prose and
/// unchecked lines.
pub fn markdown(c: &Claims) -> String {
    let mut s = String::from("## The paper's claims, checked\n\n");
    if c.claims.is_empty() {
        s += "This scenario states no claim that its figures can check.\n\n";
    } else {
        let _ = writeln!(
            s,
            "Each claim holds when all its checks hold; every check compares medians over the seeds (`≈`: within \
             25%; a change: within its points). {}\n",
            sentence(c)
        );
        s += &table(c).to_markdown();
        s.push('\n');
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

/// The section of the page: the table, shaded where a claim fails, and the
/// prose.
pub fn html(c: &Claims) -> String {
    let mut s = String::from("<h3>The paper's claims, checked</h3>\n");
    if !c.claims.is_empty() {
        let _ = writeln!(s, "<p>{}</p>", crate::table::escape_html(&sentence(c)));
        let failed = failed_rows(c);
        s += "<div class=\"table-wrap\">\n";
        s += &table(c).to_html(|i| failed.get(i).copied().unwrap_or(false).then_some("differs"));
        s += "</div>\n";
    }
    s += &crate::markdown::to_html(&prose_markdown(c), 0, "");
    s
}
