//! One run of a scenario on runtime CPUs: the machine's CPUs as runtime
//! CPUs over the real ones ([`crate::fit`]), the kernels calibrated at the
//! baseline duty, the run's policy from the registry (`policy_for`) driven
//! by the live executor, the programs started at their (scaled) start
//! times with their work dealt as the simulator deals it, until every
//! thread is done, the safety stop, Ctrl-C or an error.
//!
//! Real-time: the workers run under `SCHED_FIFO` (priority
//! [`WORKER_PRIORITY`]) so that the other processes of a shared machine
//! do not take the real CPUs' time from them (a duty cycle is a share of
//! wall time); the controller — the thread running the policy and the
//! executor — runs one priority above, so that ticks and exits are fed on
//! time even when every runtime CPU is busy (at the workers' priority it
//! could wait a whole throttle period for a worker to sleep), and drops to
//! the workers' priority while it waits for them in a reconfiguration
//! (`BackendConfig::worker_priority` says why). Its CPU time, the price of
//! running above the workers, is measured and reported. Where real-time priority is
//! not permitted the run goes at normal priority and the report says so.
//! The controller is restored to the normal scheduler and its old affinity
//! before this returns, and the runtime's workers are joined.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use dyncore_core::policy::{Policy, ThreadId};
use dyncore_core::speed::Duty;
use dyncore_core::topology::Topology;
use dyncore_core::{CpuSet, Nanos};
use dyncore_runtime::affinity;
use dyncore_runtime::backend::{BackendConfig, DutyScale, Executor, LiveRun, Stopped};
use dyncore_runtime::cpu::{Runtime, RuntimeConfig};
use dyncore_runtime::kernels::{MakeKernel, Portion, TaskPool};
use dyncore_scenario::Scenario;
use dyncore_scenario::machine::MachineSpec;
use dyncore_scenario::policy::{LOAD_SAMPLE_NS, policy_for};
use dyncore_scenario::programs::{ProgramPlan, deal_work, plan_programs, work_rng};
use dyncore_scenario::record::{Recorded, RunRecorder};
use rand_chacha::ChaCha8Rng;

use crate::fit::{Fit, realtime_capacity};
use crate::kernels::{Rate, kernel_for, measure, units};

/// `SCHED_FIFO` priority of the workers; the controller runs one above.
pub const WORKER_PRIORITY: u8 = 20;

/// What a live run needs besides the scenario.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// The real CPUs to run on.
    pub real: CpuSet,
    pub duty_scale: DutyScale,
    /// The real machine's topology (for the fuse decision).
    pub machine: Topology,
}

/// How a live run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every program finished.
    Finished,
    /// The (scaled) `max_time_ns` came first.
    TimedOut,
    /// Ctrl-C.
    Interrupted,
    /// The backend could not go on (the message says why).
    Failed(String),
}

/// One live run and what was measured around it.
pub struct LiveRunOutput {
    pub index: usize,
    pub fit: Fit,
    /// For an oversubscribed run: the baseline duty at which it would fit.
    pub fit_hint: Option<String>,
    /// The workers' real-time priority, or why they ran without.
    pub realtime: Result<u8, String>,
    pub throttle_period_ns: Nanos,
    /// The runtime duty of one baseline CPU.
    pub baseline: Duty,
    /// One per kernel the run's programs use.
    pub rates: Vec<Rate>,
    pub programs: Vec<ProgramPlan>,
    /// Per program: its threads, and its kernel (an index into `rates`).
    pub threads: Vec<Vec<ThreadId>>,
    pub kernel: Vec<usize>,
    pub run: LiveRun,
    /// The run's policy traffic, recorded as it went (its results are
    /// built from it, as the simulator's are).
    pub record: RunRecorder,
    pub outcome: Outcome,
}

/// The throttle period for a tick: 1 ms (the runtime's default, see its
/// `throttle.rs`), or the tick when that is shorter (a time-scaled
/// scenario), so a CPU's speed is right within every tick.
fn throttle_period_ns(tick_ns: Nanos) -> Nanos {
    tick_ns.min(1_000_000)
}

/// Starts the runtime for `fit`, real-time if permitted.
fn start_runtime(fit: &Fit, throttle_ns: Nanos) -> Result<(Runtime, Result<u8, String>), String> {
    let distinct: CpuSet = fit.real.iter().copied().collect();
    let mut cfg = RuntimeConfig::over(&distinct, fit.real.len());
    cfg.real_cpus = fit.real.clone();
    cfg.throttle_period = Duration::from_nanos(throttle_ns);
    cfg.realtime_priority = Some(WORKER_PRIORITY);
    match Runtime::new(cfg.clone()) {
        Ok(rt) => Ok((rt, Ok(WORKER_PRIORITY))),
        Err(e) => {
            cfg.realtime_priority = None;
            let rt = Runtime::new(cfg).map_err(|e| format!("cannot start the runtime: {e}"))?;
            Ok((rt, Err(e.to_string())))
        }
    }
}

/// The controller thread raised to real time (and pinned to a spare CPU
/// if there is one) until dropped.
struct Controller {
    affinity: Option<CpuSet>,
    realtime: bool,
}

impl Controller {
    fn enter(realtime: bool, spare: Option<usize>) -> Controller {
        let affinity = spare.and_then(|c| {
            let old = affinity::allowed_cpus().ok()?;
            affinity::pin_current_thread(c).ok().map(|()| old)
        });
        let realtime = realtime && affinity::set_current_thread_realtime(WORKER_PRIORITY + 1).is_ok();
        Controller { affinity, realtime }
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        if self.realtime {
            let _ = affinity::set_current_thread_normal();
        }
        if let Some(old) = &self.affinity {
            let _ = affinity::set_current_thread_affinity(old);
        }
    }
}

/// Runs run `index` of the (scaled, validated) `scenario` live. `progress`
/// is told what is going on, every quarter second or so. Errors are
/// failures to start (the runtime, a calibration); a failure during the run
/// is an [`Outcome::Failed`] with what was measured until then.
pub fn run(
    scenario: &Scenario,
    index: usize,
    opts: &LiveOptions,
    stop: &AtomicBool,
    progress: &dyn Fn(String),
) -> Result<LiveRunOutput, String> {
    let spec = &scenario.runs[index];
    let params = scenario.sim.with(&spec.sim);
    let machine = MachineSpec::build(spec).expect("validated");
    let (fit, fit_hint) = fit_for(&machine, opts);
    let throttle_period_ns = throttle_period_ns(params.tick_ns);
    let (rt, realtime) = start_runtime(&fit, throttle_period_ns)?;
    let baseline = opts.duty_scale.apply(Duty::BASELINE).map_err(|e| format!("the baseline duty: {e}"))?;
    let programs = plan_programs(spec, &machine);
    let (kinds, kernel) = kernels_of(&programs);
    let mut rates = Vec::with_capacity(kinds.len());
    for (name, make) in &kinds {
        progress(format!("run {}/{} `{}`: calibrating {name}", index + 1, scenario.runs.len(), spec.label));
        let before = measure(&rt, baseline, make).map_err(|e| format!("calibrating {name}: {e}"))?;
        rates.push(Rate { kernel: name, before, after: None });
    }

    let controller = Controller::enter(realtime.is_ok(), fit.spare);
    let cfg = BackendConfig {
        tick_ns: params.tick_ns,
        load_sample_ns: LOAD_SAMPLE_NS,
        duty_scale: opts.duty_scale,
        machine: opts.machine.clone(),
        worker_priority: realtime.as_ref().ok().copied(),
    };
    let policy = Recorded { policy: policy_for(scenario, index), record: RunRecorder::new(fit.real.len()) };
    let mut ex = Executor::new(&rt, policy, cfg);
    let tell = |ex: &LiveExecutor<'_>| {
        progress(format!(
            "run {}/{} `{}`: {:.2} s, {} thread(s) running",
            index + 1,
            scenario.runs.len(),
            spec.label,
            ex.now_ns() as f64 / 1e9,
            ex.live_threads()
        ))
    };
    let work =
        Work { programs: &programs, kinds: &kinds, kernel: &kernel, rates: &rates, seed: scenario.seed };
    let (threads, outcome) = drive(&mut ex, &work, params.max_time_ns, stop, &tell);
    let (run, policy) = ex.finish();
    drop(controller);
    if matches!(outcome, Outcome::Finished | Outcome::TimedOut) {
        for (rate, (_, make)) in rates.iter_mut().zip(&kinds) {
            rate.after = measure(&rt, baseline, make).ok();
        }
    }
    drop(rt);
    Ok(LiveRunOutput {
        index,
        fit,
        fit_hint,
        realtime,
        throttle_period_ns,
        baseline,
        rates,
        programs,
        threads,
        kernel,
        run,
        record: policy.record,
        outcome,
    })
}

/// Where the run's runtime CPUs go and, if that oversubscribes the real
/// CPUs, the lower baseline duty (every ratio kept) at which it would fit.
fn fit_for(machine: &MachineSpec, opts: &LiveOptions) -> (Fit, Option<String>) {
    let capacity = realtime_capacity();
    let fit = Fit::new(machine, &opts.real, opts.duty_scale, capacity);
    let hint = fit.oversubscribed.then(|| {
        [450, 400, 350, 300]
            .into_iter()
            .filter(|&pm| pm < u32::from(opts.duty_scale.baseline.per_mille()))
            .map(|pm| DutyScale { baseline: Duty::from_per_mille(pm).expect("in range") })
            .find(|s| !Fit::new(machine, &opts.real, *s, capacity).oversubscribed)
            .map_or_else(
                || "no baseline down to 30% makes it fit these real CPUs".to_string(),
                |s| format!("it would fit with --baseline-duty {}", s.baseline.percent()),
            )
    });
    (fit, hint)
}

/// The kernels the programs run, once each, and each program's (an index).
fn kernels_of(programs: &[ProgramPlan]) -> (Vec<(&'static str, MakeKernel)>, Vec<usize>) {
    let mut kinds: Vec<(&'static str, MakeKernel)> = Vec::new();
    let kernel = programs
        .iter()
        .map(|p| {
            let (name, make) = kernel_for(p.program);
            kinds.iter().position(|(n, _)| *n == name).unwrap_or_else(|| {
                kinds.push((name, make));
                kinds.len() - 1
            })
        })
        .collect();
    (kinds, kernel)
}

/// The executor of a live run: any policy, recorded as it goes.
type LiveExecutor<'rt> = Executor<'rt, Recorded<Box<dyn Policy + Send>>>;

/// A run's programs and what their work is made of.
struct Work<'a> {
    programs: &'a [ProgramPlan],
    kinds: &'a [(&'static str, MakeKernel)],
    kernel: &'a [usize],
    rates: &'a [Rate],
    seed: u64,
}

/// Starts the programs at their times and runs until every thread is done,
/// the safety stop, Ctrl-C or an error; each program's threads, and how it
/// ended.
fn drive(
    ex: &mut LiveExecutor<'_>,
    work: &Work<'_>,
    max_time_ns: Nanos,
    stop: &AtomicBool,
    tell: &dyn Fn(&LiveExecutor<'_>),
) -> (Vec<Vec<ThreadId>>, Outcome) {
    let programs = work.programs;
    let mut threads = vec![Vec::new(); programs.len()];
    let mut order: Vec<usize> = (0..programs.len()).collect();
    order.sort_by_key(|&p| programs[p].start_ns);
    for p in order {
        // Programs due now start together, as the simulator starts them
        // (its arrivals come before anything else at their time).
        let due = programs[p].start_ns;
        if due > ex.now_ns() {
            match step_until(ex, due.min(max_time_ns), false, stop, tell) {
                Ok(Stopped::Time) => {}
                other => return (threads, outcome_of(other, false)),
            }
        }
        if due > max_time_ns {
            // As in the simulator: a program due after the safety stop never starts.
            return (threads, Outcome::TimedOut);
        }
        let k = work.kernel[p];
        let rate = work.rates[k].sizing_units_per_s();
        match spawn_program(ex, &programs[p], &work.kinds[k].1, rate, &mut work_rng(work.seed, p)) {
            Ok(ts) => threads[p] = ts,
            Err(e) => return (threads, Outcome::Failed(e)),
        }
    }
    let r = step_until(ex, max_time_ns, true, stop, tell);
    (threads, outcome_of(r, true))
}

/// Runs the executor towards `until_ns` in slices of a quarter second,
/// telling `tell` in between.
fn step_until(
    ex: &mut LiveExecutor<'_>,
    until_ns: Nanos,
    stop_when_idle: bool,
    stop: &AtomicBool,
    tell: &dyn Fn(&LiveExecutor<'_>),
) -> Result<Stopped, String> {
    loop {
        let slice_end = until_ns.min(ex.now_ns() + 250_000_000);
        match ex.run_until(slice_end, stop_when_idle, stop).map_err(|e| e.to_string())? {
            Stopped::Time if slice_end < until_ns => tell(ex),
            s => return Ok(s),
        }
    }
}

fn outcome_of(r: Result<Stopped, String>, at_the_end: bool) -> Outcome {
    match r {
        Ok(Stopped::Idle) => Outcome::Finished,
        Ok(Stopped::Time) if at_the_end => Outcome::TimedOut,
        Ok(Stopped::Time) => unreachable!("a start time is not the end"),
        Ok(Stopped::Interrupted) => Outcome::Interrupted,
        Err(e) => Outcome::Failed(e),
    }
}

/// Starts program `p`'s threads: its work dealt as the simulator deals it
/// (the same generator, so the same tasks), each piece converted to units
/// of its kernel.
fn spawn_program(
    ex: &mut LiveExecutor<'_>,
    p: &ProgramPlan,
    make: &MakeKernel,
    units_per_s: f64,
    rng: &mut ChaCha8Rng,
) -> Result<Vec<ThreadId>, String> {
    let dealt = deal_work(p.program.shape, p.work_ns, p.threads, rng);
    // The simulator pops its pool from the end: the same order here.
    let pool: Vec<u64> = dealt.pool.iter().rev().map(|&ns| units(ns, units_per_s)).collect();
    let pool = (!pool.is_empty()).then(|| TaskPool::new(pool));
    dealt
        .initial
        .iter()
        .map(|&ns| {
            let k = Portion::new(make.clone(), units(ns, units_per_s), pool.clone());
            ex.spawn(Box::new(k), p.template.clone()).map_err(|e| e.to_string())
        })
        .collect()
}
