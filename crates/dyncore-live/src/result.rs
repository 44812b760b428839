//! A live run as a [`RunResult`], built from its policy traffic by the
//! record the simulator's results come from too
//! (`dyncore_scenario::record`), so the same report code — figures,
//! tables, plots, the Perfetto trace — renders it. Times are wall-clock ns
//! since the run started.
//!
//! What is live's own:
//!
//! * a program's speedup is its work done over its completion, its work
//!   being its units over its kernel's units per second alone at the
//!   baseline duty (calibrated in the same run); a program with a failed
//!   thread did not finish;
//! * a CPU's busy time is the time the policy had a thread running on it
//!   (as in the simulator; the time the runtime CPU really spent in steps,
//!   about its duty of that, is in the duty report);
//! * reconfiguration time is the sum of the critical paths the runtime
//!   measured (what `ReconfigDone` told the policy);
//! * IPIs are not sent live (the simulator's are counted only).

use dyncore_scenario::policy::{policy_info, reconfigures, tracked};
use dyncore_scenario::record::ProgramRun;
use dyncore_scenario::scenario::Scenario;
use dyncore_scenario::{PolicyTrace, RunResult};

use crate::run::{LiveRunOutput, Outcome};

/// The name reports give the live backend's reconfiguration mechanism.
pub const LIVE_MECHANISM: &str = "live: Bolt on runtime CPUs";

/// `out` as a `RunResult` of run `out.index` of `scenario`: built from the
/// run's policy traffic by the record both backends share
/// (`dyncore_scenario::record`), with each program's work as measured.
pub fn run_result(scenario: &Scenario, out: &LiveRunOutput) -> RunResult {
    let spec = &scenario.runs[out.index];
    let log = &out.run.log;
    let end = out.run.end_ns;
    let info = policy_info(scenario, out.index);
    let machine = dyncore_scenario::policy::machine_of(scenario, out.index);
    let work: Vec<f64> = (0..out.programs.len())
        .map(|p| {
            let units: u64 = out.threads[p].iter().map(|&t| log.threads[t].units).sum();
            // Work done in baseline nanoseconds: units over the kernel's
            // units per second alone at the baseline duty.
            units as f64 / out.rates[out.kernel[p]].units_per_s() * 1e9
        })
        .collect();
    let runs: Vec<ProgramRun<'_>> = out
        .programs
        .iter()
        .zip(&out.threads)
        .zip(&work)
        .map(|((plan, threads), &w)| ProgramRun { plan, threads, work_done_ns: w })
        .collect();
    let mut r = out.record.clone().finish(end, &runs, |plan| tracked(info, plan));
    // A program one of whose threads failed did not finish.
    for (p, res) in r.programs.iter_mut().enumerate() {
        if out.threads[p].iter().any(|&t| log.threads[t].failed) {
            (res.finish_ns, res.completion_ns, res.speedup, res.relative_time) = (None, None, None, None);
        }
    }
    let finished = out.outcome == Outcome::Finished;
    RunResult {
        label: spec.label.clone(),
        series: spec.series.clone().unwrap_or_else(|| spec.label.clone()),
        machine: spec.machine.clone(),
        policy: spec.policy.name.clone(),
        reconfig_mechanism: if reconfigures(info, &machine) { LIVE_MECHANISM.into() } else { "none".into() },
        reconfig_profile: None,
        cpus: out.fit.real.len(),
        end_ns: end,
        finished,
        programs: r.programs,
        per_cpu: r.per_cpu,
        reconfig: r.reconfig,
        ipis: 0,
        proxy_ipis: 0,
        migrations: r.migrations,
        defrag_migrations: r.defrag_migrations,
        events: out.run.events.lines().count() as u64,
        decisions: r.decisions,
        allocation: r.allocation,
        energy: r.energy,
        trace: r.trace,
        policy_trace: Some(PolicyTrace { events: out.run.events.clone(), actions: out.run.actions.clone() }),
    }
}
