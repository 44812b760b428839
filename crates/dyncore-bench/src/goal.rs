//! Benchmark goals: a figure measured in the run, checked against a bound,
//! and the `--strict` gate that turns an unexpected verdict into a failing
//! exit status.
//!
//! Most goals are expected to PASS. A few are expected to MISS: they record
//! where dyncore's mechanism *loses* (a sidecall against a lock the caller
//! takes itself, uncontended), so that the loss is stated by a row that is
//! checked every run instead of hidden. `--strict` fails on the unexpected:
//! a MISS of a goal expected to pass, and a PASS of a goal expected to miss
//! (the documented loss no longer holds, so docs/results.md is wrong).

use dyncore_report::table::Table;

/// What the project expects of a goal on a machine like this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    Pass,
    /// A documented loss; the string says why (e.g. "sidecall loses").
    Miss(&'static str),
}

/// A benchmark goal, checked against a figure measured in the same run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Goal {
    pub goal: String,
    pub measured: String,
    /// `None`: not measured in this run (`measured` says why).
    pub pass: Option<bool>,
    pub expect: Expect,
}

impl Goal {
    pub fn checked(goal: impl Into<String>, measured: String, pass: bool) -> Goal {
        Goal { goal: goal.into(), measured, pass: Some(pass), expect: Expect::Pass }
    }

    pub fn not_measured(goal: impl Into<String>, why: impl Into<String>) -> Goal {
        Goal { goal: goal.into(), measured: why.into(), pass: None, expect: Expect::Pass }
    }

    /// Marks the goal as a documented loss (expected to MISS).
    pub fn expected_miss(mut self, why: &'static str) -> Goal {
        self.expect = Expect::Miss(why);
        self
    }

    pub fn verdict(&self) -> String {
        match (self.pass, self.expect) {
            (None, _) => "not measured".into(),
            (Some(true), Expect::Pass) => "PASS".into(),
            (Some(false), Expect::Pass) => "MISS".into(),
            (Some(false), Expect::Miss(why)) => format!("MISS (expected: {why})"),
            (Some(true), Expect::Miss(why)) => format!("PASS (unexpected: documented as \"{why}\")"),
        }
    }

    /// Whether the verdict is not what the project expects (fails `--strict`).
    pub fn unexpected(&self) -> bool {
        match (self.pass, self.expect) {
            (Some(pass), Expect::Pass) => !pass,
            (Some(pass), Expect::Miss(_)) => pass,
            (None, _) => false,
        }
    }
}

/// The goals as a table: goal, measured, verdict.
pub fn goals_table(title: &str, goals: &[Goal]) -> Table {
    let mut t = Table::new(title, &["goal", "measured", "verdict"]);
    for g in goals {
        t.row(vec![g.goal.clone(), g.measured.clone(), g.verdict()]);
    }
    t
}

/// `--strict`: an error naming every goal with an unexpected verdict, or
/// `Ok` (also when nothing was measured: a skipped goal says why in the
/// report, and the machine cannot be blamed on the code).
pub fn strict_check(bench: &str, goals: &[Goal]) -> anyhow::Result<()> {
    let bad: Vec<String> = goals
        .iter()
        .filter(|g| g.unexpected())
        .map(|g| format!("  {}: {} — measured {}", g.verdict(), g.goal, g.measured))
        .collect();
    if bad.is_empty() {
        say!("strict: every goal of bench {bench} as expected");
        return Ok(());
    }
    anyhow::bail!("strict: {} goal(s) of bench {bench} not as expected:\n{}", bad.len(), bad.join("\n"))
}

/// The `--strict` flag, shared by every bench subcommand.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct Gate {
    /// Exit non-zero when a goal MISSes (or a documented loss no longer
    /// holds); the report is written either way.
    #[arg(long)]
    pub strict: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals_table_gives_each_verdict() {
        let goals = [
            Goal::checked("a", "1×".into(), true),
            Goal::checked("b", "2×".into(), false),
            Goal::not_measured("c", "skipped"),
            Goal::checked("d", "6×".into(), false).expected_miss("sidecall loses"),
        ];
        let md = goals_table("Goals", &goals).to_markdown();
        for v in ["PASS", "MISS", "not measured", "MISS (expected: sidecall loses)"] {
            assert!(md.contains(v), "{v}: {md}");
        }
        let j = serde_json::to_value(&goals).unwrap();
        assert_eq!(j[0]["pass"], true);
        assert_eq!(j[2]["pass"], serde_json::Value::Null);
        assert_eq!(j[3]["expect"]["miss"], "sidecall loses");
    }

    #[test]
    fn strict_fails_on_the_unexpected_only() {
        let pass = Goal::checked("a", "1×".into(), true);
        let miss = Goal::checked("b", "2×".into(), false);
        let skipped = Goal::not_measured("c", "no hypervisor");
        let loss = Goal::checked("d", "6×".into(), false).expected_miss("sidecall loses");
        let no_loss = Goal::checked("e", "0.5×".into(), true).expected_miss("sidecall loses");
        assert!(strict_check("t", &[pass.clone(), skipped.clone(), loss.clone()]).is_ok());
        let e = strict_check("t", &[pass, miss, skipped, loss, no_loss]).unwrap_err().to_string();
        assert!(e.contains("2 goal(s)") && e.contains("MISS: b") && e.contains("PASS (unexpected"), "{e}");
    }
}
