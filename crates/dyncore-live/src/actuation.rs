//! What each live run really executed, as the execution checker
//! (`dyncore_core::policy::execution`) found it: whether every executed
//! slice lay inside its `Dispatch` window and every CPU obeyed its
//! `Offline`/`Online`, and the **actuation delay** — the time from an
//! action to its effect, p50 and p99 — for each kind of action:
//!
//! * dispatch → running: a `Dispatch { c, Running T }` to T's first step
//!   on c;
//! * dispatch → stopped: the `Dispatch` that ended a window to the end of
//!   T's last step there;
//! * dispatch applied: a `Dispatch` to the moment the executor had applied
//!   it;
//! * offline, online: the action to the CPU stopped, or running again.
//!
//! Beside them, what checking cost: the policy-contract checker's time
//! over every call, and the execution checker's at the end, as a share of
//! the run. Both run in every build, release included.

use dyncore_core::policy::execution::{Delays, Verdict};
use dyncore_report::table::Table;
use serde::Serialize;

use crate::compare::fmt_ns;
use crate::run::LiveRunOutput;

/// `p50 / p99` of a set of delays ("–" when there were none).
fn quantiles(d: &Delays) -> String {
    if d.n == 0 { "–".into() } else { format!("{} / {}", fmt_ns(d.p50_ns), fmt_ns(d.p99_ns)) }
}

/// The two checkers' time over the run's length.
pub fn check_share(o: &LiveRunOutput) -> f64 {
    (o.run.log.contract_ns + o.run.log.check_ns) as f64 / o.run.end_ns.max(1) as f64
}

/// One row per live run (label by run index): the verdict, the actuation
/// delays, and what the checkers cost.
pub fn table(live: &[LiveRunOutput], label: impl Fn(usize) -> String) -> Table {
    let mut t = Table::new(
        "",
        &[
            "run",
            "slices / windows",
            "violations",
            "dispatch → running p50 / p99",
            "dispatch → stopped p50 / p99",
            "dispatch applied p50 / p99",
            "offline p50 / p99",
            "online p50 / p99",
            "checkers' time",
        ],
    );
    for o in live {
        let v = &o.run.execution;
        let log = &o.run.log;
        let violations = match v.violations.first() {
            None => v.violation_count.to_string(),
            Some(first) => format!("{} (first: {})", v.violation_count, first.message),
        };
        t.row(vec![
            label(o.index),
            format!("{} / {}", v.slices, v.windows),
            if v.lost > 0 { format!("{violations}; the record lost {}", v.lost) } else { violations },
            quantiles(&v.start),
            quantiles(&v.stop),
            quantiles(&v.apply),
            quantiles(&v.offline),
            quantiles(&v.online),
            format!(
                "{} + {} ({:.3}% of the run)",
                fmt_ns(log.contract_ns),
                fmt_ns(log.check_ns),
                check_share(o) * 100.0
            ),
        ]);
    }
    t
}

/// The words under the table.
pub const NOTE: &str = "Actuation delay: from an action to its effect, as the execution checker found it in what \
     the runtime's workers recorded. Dispatch → running: a `Dispatch { c, Running T }` to T's first step on c; \
     dispatch → stopped: the `Dispatch` that ended a window to the end of T's last step there (a step in \
     progress finishes); dispatch applied: the `Dispatch` to the executor having applied it; offline and \
     online: the action to the CPU stopped or running again. Violations: executed slices outside their \
     `Dispatch` window, on a borrowed CPU, or on an offline one. Checkers' time: the policy-contract checker \
     over every call, plus the execution checker at the end (both in every build).";

/// The verdict and the checkers' cost, as results.json has them.
#[derive(Serialize)]
pub struct ExecutionJson<'a> {
    #[serde(flatten)]
    pub verdict: &'a Verdict,
    pub contract_check_ns: u64,
    pub execution_check_ns: u64,
    /// Both, over the run's length.
    pub check_share: f64,
}

pub fn json(o: &LiveRunOutput) -> ExecutionJson<'_> {
    ExecutionJson {
        verdict: &o.run.execution,
        contract_check_ns: o.run.log.contract_ns,
        execution_check_ns: o.run.log.check_ns,
        check_share: check_share(o),
    }
}
