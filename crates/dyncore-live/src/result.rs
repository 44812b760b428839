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

use dyncore_core::Nanos;
use dyncore_core::policy::ThreadId;
use dyncore_scenario::policy::{policy_info, reconfigures, tracked};
use dyncore_scenario::programs::ProgramPlan;
use dyncore_scenario::record::{ProgramRun, RunRecorder};
use dyncore_scenario::scenario::Scenario;
use dyncore_scenario::{PolicyTrace, RunResult};

use crate::run::{LiveRunOutput, Outcome};

/// The name reports give the live backend's reconfiguration mechanism.
pub const LIVE_MECHANISM: &str = "live: Bolt on runtime CPUs";

/// What a live run — of kernels ([`run_result`]) or of commands
/// ([`crate::commands::run_result`]) — hands its `RunResult`.
pub struct LiveParts<'a> {
    /// The run's index in its scenario.
    pub index: usize,
    /// Per program (in plan order): its plan, its threads (in spawn
    /// order) and the work it did in nanoseconds of one baseline CPU.
    pub programs: &'a [ProgramPlan],
    pub threads: &'a [Vec<ThreadId>],
    pub work_ns: &'a [f64],
    /// The run's policy traffic, recorded as it went.
    pub record: &'a RunRecorder,
    /// Wall-clock ns since the run started.
    pub end_ns: Nanos,
    /// Real CPUs the run had.
    pub cpus: usize,
    pub finished: bool,
    /// The policy's traffic, JSON lines (`dyncore_core::policy::trace`).
    pub events: &'a str,
    pub actions: &'a str,
}

/// Run `parts.index` of `scenario` as a `RunResult`: built from the run's
/// policy traffic by the record both backends share
/// (`dyncore_scenario::record`), its reconfiguration mechanism named
/// `mechanism` when the run can reconfigure. What each backend says of its
/// programs beyond the record, its caller amends.
pub fn from_record(scenario: &Scenario, parts: &LiveParts<'_>, mechanism: &str) -> RunResult {
    let spec = &scenario.runs[parts.index];
    let info = policy_info(scenario, parts.index);
    let machine = dyncore_scenario::policy::machine_of(scenario, parts.index);
    let runs: Vec<ProgramRun<'_>> = parts
        .programs
        .iter()
        .zip(parts.threads)
        .zip(parts.work_ns)
        .map(|((plan, threads), &w)| ProgramRun { plan, threads, work_done_ns: w })
        .collect();
    let r = parts.record.clone().finish(parts.end_ns, &runs, |plan| tracked(info, plan));
    RunResult {
        label: spec.label.clone(),
        series: spec.series.clone().unwrap_or_else(|| spec.label.clone()),
        machine: spec.machine.clone(),
        policy: spec.policy.name.clone(),
        reconfig_mechanism: if reconfigures(info, &machine) { mechanism.into() } else { "none".into() },
        reconfig_profile: None,
        cpus: parts.cpus,
        end_ns: parts.end_ns,
        finished: parts.finished,
        programs: r.programs,
        per_cpu: r.per_cpu,
        reconfig: r.reconfig,
        ipis: 0,
        proxy_ipis: 0,
        migrations: r.migrations,
        defrag_migrations: r.defrag_migrations,
        events: parts.events.lines().count() as u64,
        decisions: r.decisions,
        allocation: r.allocation,
        energy: r.energy,
        trace: r.trace,
        policy_trace: Some(PolicyTrace {
            events: parts.events.to_string(),
            actions: parts.actions.to_string(),
        }),
    }
}

/// `out` as a `RunResult` of run `out.index` of `scenario` ([`from_record`]),
/// with each program's work as measured.
pub fn run_result(scenario: &Scenario, out: &LiveRunOutput) -> RunResult {
    let log = &out.run.log;
    let work: Vec<f64> = (0..out.programs.len())
        .map(|p| {
            let units: u64 = out.threads[p].iter().map(|&t| log.threads[t].units).sum();
            // Work done in baseline nanoseconds: units over the kernel's
            // units per second alone at the baseline duty.
            units as f64 / out.rates[out.kernel[p]].units_per_s() * 1e9
        })
        .collect();
    let parts = LiveParts {
        index: out.index,
        programs: &out.programs,
        threads: &out.threads,
        work_ns: &work,
        record: &out.record,
        end_ns: out.run.end_ns,
        cpus: out.fit.real.len(),
        finished: out.outcome == Outcome::Finished,
        events: &out.run.events,
        actions: &out.run.actions,
    };
    let mut r = from_record(scenario, &parts, LIVE_MECHANISM);
    // A program one of whose threads failed did not finish.
    for (p, res) in r.programs.iter_mut().enumerate() {
        if out.threads[p].iter().any(|&t| log.threads[t].failed) {
            (res.finish_ns, res.completion_ns, res.speedup, res.relative_time) = (None, None, None, None);
        }
    }
    r
}
