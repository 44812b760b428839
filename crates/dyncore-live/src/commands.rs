//! Scenario runs whose workloads name a `command`: real programs,
//! unmodified, under the run's policy through the arbiter
//! (`dyncore_runtime::arbiter`), measured against the same command run
//! alone at the baseline duty in the same invocation, and beside the
//! Linux baseline (the same commands on the same CPUs with no dyncore).
//!
//! For one scenario ([`CommandReport`](crate::commands_report::CommandReport) is what the report is
//! built from):
//!
//! 1. every command is found as a shell finds it before anything starts
//!    ([`check_commands`]: `file:line:col: run[i].workload[j].command`,
//!    exit 2);
//! 2. each distinct command runs alone, once before the runs and once
//!    after ([`measure_alone`]): one real CPU under the arbiter with the
//!    `pinned` policy at the baseline duty, the same mechanism the runs
//!    use, so what the arbiter costs is in both; its wall time is the
//!    command's work in nanoseconds of one baseline CPU;
//! 3. each run ([`run`]): one arbiter over the run's CPUs (runtime CPU i
//!    on the i-th real CPU), the run's policy from the registry, each
//!    command started at its `start_ms` with its workload's `ThreadSpec`,
//!    until every command has exited, the safety stop or Ctrl-C; the
//!    commands' standard output goes to `/dev/null` (their standard error
//!    stays on the terminal);
//! 4. each distinct mix of commands once more with no dyncore
//!    ([`os_baseline`]): the kernel's own scheduler on the same real CPUs
//!    (their affinity, `taskset`'s way), at full speed — no quota;
//!    every command, alone, under a policy or here, runs with the weight
//!    of a nice -20 process ([`COMMAND_WEIGHT`]) against the machine's
//!    other processes;
//! 5. each run as a `RunResult` ([`run_result`]): from the policy's
//!    traffic by the record both backends share, each program's
//!    completion being its command's wall time (fork to reap, as alone)
//!    and its speedup the mean of its alone times over that.
//!
//! Nothing is left behind: the arbiter's teardown (and its `Drop`, and the
//! next run's sweep) removes the groups and kills the trees; the Linux
//! baseline kills and reaps its trees on every path.

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use dyncore_core::policy::{Policy, ThreadId};
use dyncore_core::{CpuId, CpuSet, Nanos};
use dyncore_runtime::arbiter::{
    AloneRun, Arbiter, ArbiterConfig, ArbiterRun, Ending, OneCpu, Together, command_spec, resolve,
    run_together, spare_cpu,
};
use dyncore_runtime::backend::{DutyScale, Stopped};
use dyncore_scenario::RunResult;
use dyncore_scenario::Scenario;
use dyncore_scenario::machine::MachineSpec;
use dyncore_scenario::policy::policy_for;
use dyncore_scenario::programs::{ProgramPlan, plan_programs};
use dyncore_scenario::record::{Recorded, RunRecorder};
use dyncore_scenario::scenario::ScenarioError;

use crate::result::{LiveParts, from_record};
use crate::run::Outcome;

/// What a command run needs besides the scenario.
#[derive(Debug, Clone)]
pub struct CommandOptions {
    /// The real CPUs to run on: runtime CPU i on the i-th.
    pub real: CpuSet,
    pub duty_scale: DutyScale,
    /// The CFS weight of every command (alone, under a policy, and in the
    /// Linux baseline) against the machine's other processes, so that a
    /// shared machine takes from none of them ([`COMMAND_WEIGHT`]).
    pub weight: u32,
}

/// The weight of a nice -20 process (the kernel's `sched_prio_to_weight`):
/// what every command of a scenario runs with, under a policy (the run's
/// groups' `cpu.shares`/`cpu.weight`) and in the Linux baseline (nice
/// -20), as the runtime's kernels run real-time for the same reason.
pub const COMMAND_WEIGHT: u32 = 88_761;
/// The nice value of that weight.
const COMMAND_NICE: i32 = -20;

/// Every command's program found as a shell finds it (`PATH`, or a path
/// relative to where dyncore runs), and executable: the first that is not,
/// as the path of its `command` field.
pub fn check_commands(sc: &Scenario) -> Result<(), ScenarioError> {
    for (i, r) in sc.runs.iter().enumerate() {
        for (j, w) in r.workloads.iter().enumerate() {
            let Some(argv) = &w.command else { continue };
            if let Err(e) = resolve(std::ffi::OsStr::new(&argv[0])) {
                let path = ["run", &i.to_string(), "workload", &j.to_string(), "command"].map(String::from);
                return Err(ScenarioError {
                    path: path.to_vec(),
                    message: format!("expected a program found on PATH and executable; {e}"),
                });
            }
        }
    }
    Ok(())
}

/// A run's real CPUs: the first `n` of `real`, or why it does not fit
/// (the arbiter gives each runtime CPU a real CPU of its own).
pub fn real_for(sc: &Scenario, index: usize, real: &CpuSet) -> Result<Vec<CpuId>, String> {
    let n = dyncore_scenario::policy::machine_of(sc, index).topology.ncpus();
    let cpus: Vec<CpuId> = real.iter().take(n).collect();
    if cpus.len() < n {
        return Err(format!(
            "run `{}` has {n} CPUs; a run of commands gives each a real CPU of its own, and {} are available ({real})",
            sc.runs[index].label,
            cpus.len()
        ));
    }
    Ok(cpus)
}

/// The `SCHED_FIFO` priority of the controller (the thread running the
/// arbiter) during a run: one above the live runtime's workers, as the
/// live runner's controller. On a machine whose every CPU is the run's,
/// it shares them with commands that outweigh everything else at normal
/// priority: without it, its ticks and moves would wait behind them.
pub const CONTROLLER_PRIORITY: i32 = crate::run::WORKER_PRIORITY as i32 + 1;

/// The calling thread at `SCHED_FIFO` [`CONTROLLER_PRIORITY`] with
/// `SCHED_RESET_ON_FORK` (the commands it forks start under the normal
/// scheduler, which a v1 `cpu` group needs), until dropped; or why not.
pub struct RealtimeController {
    raised: bool,
}

impl RealtimeController {
    pub fn enter() -> (RealtimeController, Result<(), String>) {
        let param = libc::sched_param { sched_priority: CONTROLLER_PRIORITY };
        // SAFETY: a valid `sched_param` that outlives the call; pid 0 is
        // the calling thread.
        let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, &param) };
        if r == 0 {
            (RealtimeController { raised: true }, Ok(()))
        } else {
            let e = std::io::Error::last_os_error();
            (RealtimeController { raised: false }, Err(format!("real-time priority refused: {e}")))
        }
    }
}

impl Drop for RealtimeController {
    fn drop(&mut self) {
        if self.raised {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: as in `enter`.
            unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
        }
    }
}

fn os_args(argv: &[String]) -> Vec<OsString> {
    argv.iter().map(OsString::from).collect()
}

fn dev_null() -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new().write(true).open("/dev/null").map_err(|e| format!("opening /dev/null: {e}"))
}

/// `argv` alone on real CPU `cpu` under the arbiter with the `pinned`
/// policy at the baseline duty: its wall time from fork to reap, or
/// `None` if `stop` was raised. A command that exits non-zero is an error
/// (its time would not be its work).
pub fn measure_alone(
    sc: &Scenario,
    argv: &[String],
    cpu: CpuId,
    opts: &CommandOptions,
    stop: &AtomicBool,
) -> Result<Option<u64>, String> {
    let one = OneCpu {
        run_name: "alone",
        policy: "pinned",
        cpu,
        tick_ns: sc.sim.tick_ns,
        min_granularity_ns: sc.sim.min_granularity_ns,
        duty_scale: opts.duty_scale,
        weight: Some(opts.weight),
    };
    let mut a = one.arbiter(&sc.registry).map_err(|e| e.to_string())?;
    let _rt = RealtimeController::enter().0;
    let null = dev_null()?;
    a.start_with(&os_args(argv), command_spec(), Some(null.as_raw_fd())).map_err(|e| e.to_string())?;
    let r = a.run_until(u64::MAX, true, stop).map_err(|e| e.to_string());
    let run = a.finish(Ending::Kill);
    match r? {
        Stopped::Interrupted => return Ok(None),
        Stopped::Idle | Stopped::Time => {}
    }
    let c = &run.log.commands[0];
    match (c.exit, c.exited_ns) {
        (Some(e), Some(end)) if e.shell_status() == 0 => Ok(Some(end - c.started_ns)),
        (e, _) => Err(format!(
            "`{}` alone {}: its time is not its work; fix the command",
            argv.join(" "),
            e.map_or("did not end".to_string(), |e| format!("ended with {e}"))
        )),
    }
}

/// One run of commands under its policy.
pub struct CommandRunOutput {
    pub index: usize,
    pub real: Vec<CpuId>,
    pub programs: Vec<ProgramPlan>,
    /// Per program: its threads (the policy's names), in spawn order.
    pub threads: Vec<Vec<ThreadId>>,
    /// Per program: its command's index in the arbiter's log (`None`: not
    /// started).
    pub command: Vec<Option<usize>>,
    pub run: ArbiterRun,
    pub record: RunRecorder,
    pub outcome: Outcome,
    /// The policy's own invariants at the end (`Policy::check`).
    pub policy_check: Result<(), String>,
    /// The controller ran real-time ([`RealtimeController`]), or why not.
    pub controller: Result<(), String>,
}

/// Run `index` of `sc` (its workloads all commands) under its policy.
/// Errors are failures to start (nothing is left of the run); a failure
/// during the run is an [`Outcome::Failed`] with what was measured.
pub fn run(
    sc: &Scenario,
    index: usize,
    opts: &CommandOptions,
    stop: &AtomicBool,
    progress: &dyn Fn(String),
) -> Result<CommandRunOutput, String> {
    let spec = &sc.runs[index];
    let params = sc.sim.with(&spec.sim);
    let machine = MachineSpec::build(spec).expect("validated");
    let real = real_for(sc, index, &opts.real)?;
    let set: CpuSet = real.iter().copied().collect();
    let mut cfg = ArbiterConfig::new(&spec.label, real.clone());
    cfg.duty_scale = opts.duty_scale;
    cfg.weight = Some(opts.weight);
    cfg.tick_ns = params.tick_ns;
    cfg.controller_cpu = spare_cpu(&set);
    let n = real.len();
    let policy = Box::new(Recorded { policy: policy_for(sc, index), record: RunRecorder::new(n) });
    let mut a = Arbiter::new(policy, cfg).map_err(|e| e.to_string())?;
    let (rt, controller) = RealtimeController::enter();
    let programs = plan_programs(spec, &machine);
    let null = dev_null()?;
    let mut order: Vec<usize> = (0..programs.len()).collect();
    order.sort_by_key(|&p| programs[p].start_ns);
    let mut command = vec![None; programs.len()];
    let mut outcome = None;
    for p in order {
        let due = programs[p].start_ns;
        if due > params.max_time_ns {
            outcome = Some(Outcome::TimedOut);
            break;
        }
        match a.run_until(due, false, stop) {
            Ok(Stopped::Interrupted) => {
                outcome = Some(Outcome::Interrupted);
                break;
            }
            Ok(_) => {}
            Err(e) => {
                outcome = Some(Outcome::Failed(e.to_string()));
                break;
            }
        }
        let argv = programs[p].command.as_ref().expect("a run of commands");
        progress(format!("run `{}`: starting `{}`", spec.label, argv.join(" ")));
        match a.start_with(&os_args(argv), programs[p].template.clone(), Some(null.as_raw_fd())) {
            Ok(c) => command[p] = Some(c),
            Err(e) => {
                outcome = Some(Outcome::Failed(format!("starting `{}`: {e}", argv.join(" "))));
                break;
            }
        }
    }
    let outcome =
        outcome.unwrap_or_else(|| until_done(&mut a, params.max_time_ns, stop, progress, &spec.label));
    let record = a.policy().record.clone();
    let policy_check = a.policy().check();
    let run = a.finish(Ending::Kill);
    drop(rt);
    let mut threads = vec![Vec::new(); programs.len()];
    for t in &run.log.threads {
        if let Some(p) = command.iter().position(|&c| c == Some(t.command)) {
            threads[p].push(t.thread);
        }
    }
    Ok(CommandRunOutput {
        index,
        real,
        programs,
        threads,
        command,
        run,
        record,
        outcome,
        policy_check,
        controller,
    })
}

/// Runs until every command has exited, in quarter-second slices with
/// progress in between.
fn until_done<P: Policy + ?Sized>(
    a: &mut Arbiter<P>,
    max_time_ns: Nanos,
    stop: &AtomicBool,
    progress: &dyn Fn(String),
    label: &str,
) -> Outcome {
    loop {
        let slice_end = max_time_ns.min(a.now_ns() + 250_000_000);
        match a.run_until(slice_end, true, stop) {
            Ok(Stopped::Idle) => return Outcome::Finished,
            Ok(Stopped::Interrupted) => return Outcome::Interrupted,
            Ok(Stopped::Time) if slice_end >= max_time_ns => return Outcome::TimedOut,
            Ok(Stopped::Time) => progress(format!(
                "run `{label}`: {:.2} s, {} command(s) running",
                a.now_ns() as f64 / 1e9,
                a.running_commands()
            )),
            Err(e) => return Outcome::Failed(e.to_string()),
        }
    }
}

/// The mix of run `index` with no dyncore: its commands started at their
/// times on the run's real CPUs at full speed (module doc, step 4); `None`
/// if `stop` was raised; and how they ran (their weight, or why not).
pub fn os_baseline(
    sc: &Scenario,
    index: usize,
    opts: &CommandOptions,
    stop: &AtomicBool,
) -> Result<(Option<Vec<AloneRun>>, Vec<String>), String> {
    let real = real_for(sc, index, &opts.real)?;
    let machine = MachineSpec::build(&sc.runs[index]).expect("validated");
    let null = dev_null()?;
    let cmds: Vec<Together> = plan_programs(&sc.runs[index], &machine)
        .iter()
        .map(|p| Together {
            argv: os_args(p.command.as_ref().expect("a run of commands")),
            start: Duration::from_nanos(p.start_ns),
            stdout: Some(null.as_raw_fd()),
            nice: Some(COMMAND_NICE),
        })
        .collect();
    run_together(&cmds, &real.iter().copied().collect(), Some(opts.weight), stop).map_err(|e| e.to_string())
}

/// The mix of a run: its commands and their start times (runs with the
/// same mix share one Linux baseline).
pub fn mix_of(sc: &Scenario, index: usize) -> Vec<(Vec<String>, u64)> {
    let machine = MachineSpec::build(&sc.runs[index]).expect("validated");
    plan_programs(&sc.runs[index], &machine)
        .into_iter()
        .map(|p| (p.command.unwrap_or_default(), p.start_ns))
        .collect()
}

/// `out` as a `RunResult`: built from its policy traffic by the shared
/// record; each program's completion is its command's wall time (fork to
/// reap) and its speedup `alone_ns[p]` over that (`alone_ns[p]`: program
/// p's command alone at the baseline duty). A command that exited
/// non-zero, or did not end, did not finish.
pub fn run_result(sc: &Scenario, out: &CommandRunOutput, alone_ns: &[f64]) -> RunResult {
    // "cgroup v1 (cpuset at ..., ...)": its first words.
    let short = out.run.mechanism.split(" (").next().unwrap_or_default();
    let parts = LiveParts {
        index: out.index,
        programs: &out.programs,
        threads: &out.threads,
        work_ns: alone_ns,
        record: &out.record,
        end_ns: out.run.end_ns,
        cpus: out.real.len(),
        finished: out.outcome == Outcome::Finished,
        events: &out.run.events,
        actions: &out.run.actions,
    };
    let mut r = from_record(sc, &parts, &format!("live: the arbiter ({short})"));
    for (p, res) in r.programs.iter_mut().enumerate() {
        let c = out.command[p].map(|c| &out.run.log.commands[c]);
        res.threads = out.threads[p].len() as u32;
        res.work_ns = alone_ns[p] as u64;
        match c {
            Some(c) if c.exit.is_some_and(|e| e.shell_status() == 0) && c.exited_ns.is_some() => {
                let done = c.exited_ns.expect("checked");
                let wall = (done - c.started_ns).max(1);
                res.start_ns = c.started_ns;
                res.finish_ns = Some(done);
                res.completion_ns = Some(wall);
                res.speedup = Some(round4(alone_ns[p] / wall as f64));
                res.relative_time = Some(round4(wall as f64 / alone_ns[p].max(1.0)));
            }
            _ => {
                (res.finish_ns, res.completion_ns, res.speedup, res.relative_time) = (None, None, None, None)
            }
        }
    }
    r
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}
