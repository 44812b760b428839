//! The live backend: the backend half of the policy boundary
//! (`dyncore_core::policy`) on runtime CPUs. An [`Executor`] feeds a policy
//! events stamped with the runtime's monotonic clock and executes the
//! actions it returns on a [`Runtime`] with real threads
//! ([`LiveThreads`]), recording both as the boundary's JSON-lines traces.
//!
//! | action | what the executor does |
//! |---|---|
//! | `Dispatch { cpu, Running { thread } }` | `LiveThreads::run_on(cpu, thread)`: that runtime CPU steps the thread's kernel |
//! | `Dispatch { cpu, Idle / Borrowed }` | the thread the CPU ran is stopped (unless a `Dispatch` earlier in the batch moved it) |
//! | `SetSpeed { cpu, duty }` | `Runtime::set_duty` with the duty scaled by [`DutyScale`]; the representative of a fuse that is a real SMT core keeps the baseline duty (the core, not the throttle, makes it faster) |
//! | `Fuse` | which mechanism carries it out: `machine::fuse::decide` (a real SMT core where the real machine has one, else throttling), recorded |
//! | `Offline` / `Online` | `Runtime::offline` / `online` of the CPUs (a fused object's borrowed ones, or CPUs a policy parks), in the action's mode (Bolt: proxies installed), executed at once; answered by `ReconfigDone` with what the critical path really took |
//! | `Split`, `Migrate`, `Object` | recorded (the action trace has them) |
//!
//! and the events it feeds:
//!
//! * `Spawn` when the caller starts a thread ([`Executor::spawn`]);
//! * `Tick` for every CPU, in CPU order, every `tick_ns` on a grid from the
//!   start (a round is fed late when the controller is late, and skipped
//!   when it is more than a tick late; [`TickStats`] measures both);
//! * `Exit` when a thread's kernel reports its work done;
//! * `ReconfigDone` after the batch whose `Offline` or `Online` it answers;
//! * `Load` for every CPU every `load_sample_ns`: its time in task steps
//!   (`Runtime::busy_sample`) over the window, capped at the window (a step
//!   in progress when one sample is taken is counted in the next).
//!
//! ## The backend's promises, and how they are kept
//! 1. Time never goes backwards: every event is stamped with the runtime's
//!    monotonic clock, at least the last stamp.
//! 2. Threads are spawned densely, in order: the executor adds the thread
//!    to [`LiveThreads`] (which numbers them densely) and feeds its `Spawn`
//!    at once. Each exits once: a kernel reports done once.
//! 3. Every CPU ticks periodically while the caller runs the executor.
//! 4. Actions are executed in order; reconfigurations are executed
//!    synchronously by the controller thread, one at a time, so those of a
//!    CPU never overlap, and each is answered by exactly one `ReconfigDone`.
//! 5. A CPU runs what the last `Dispatch` says (the runner of any earlier
//!    placement drops out at its next step, within one kernel step, about
//!    20 µs), at the duty of the last `SetSpeed`; an offline runtime CPU
//!    runs nothing.
//! 6. A load sample's busy time is capped at its window.
//!
//! A reconfiguration the runtime refuses or rolls back, or a placement on
//! a CPU the runtime says is offline, breaks the contract and stops the run
//! with a [`BackendError`]: the policy has no way to hear of a failure.
//!
//! ## Checked, in every build
//! * Every call — the event, and the actions the policy answered it with —
//!   goes through the contract's checker
//!   (`dyncore_core::policy::contract::Checker`): a broken promise, on
//!   either side, stops the run with [`BackendError::Contract`]. Its time
//!   is measured ([`RunLog::contract_ns`]).
//! * What the runtime really executed is held against the actions by the
//!   execution checker (`dyncore_core::policy::execution`): the executor
//!   stamps each `Dispatch`, `Offline` and `Online` with the time it had
//!   applied it; at [`Executor::finish`] the slices the workers recorded
//!   ([`LiveThreads::executed`]) and the CPU changes the runtime recorded
//!   ([`Runtime::cpu_changes`]) are checked, and the verdict, with the
//!   actuation delays, is [`LiveRun::execution`] (its time,
//!   [`RunLog::check_ns`]). The stated actuation bound: a superseded runner
//!   starts no kernel step after the `Dispatch` was applied; the step in
//!   progress then finishes. Inside a cargo test binary a violation
//!   panics in `finish` (unless a fault was injected on purpose,
//!   [`Executor::inject_dispatch_fault`]), so every live run of the test
//!   suite is checked.

mod log;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use dyncore_core::policy::contract::Checker;
use dyncore_core::policy::execution::{ExecSlice, Execution, ExecutionChecker, Verdict};
use dyncore_core::policy::trace::TraceWriter;
use dyncore_core::policy::{Action, CpuState, Event, Policy, ReconfigId, ThreadId, ThreadSpec};
use dyncore_core::reconfig::Mode;
use dyncore_core::speed::{Duty, DutyError};
use dyncore_core::topology::Topology;
use dyncore_core::{CpuId, CpuSet, Nanos};

pub use log::{FuseRecord, LiveRun, ReconfigRecord, RunLog, Slice, ThreadRecord, TickStats, quantile};

use crate::cpu::{DutyReport, PlaceError, ReconfigError, Runtime, thread_cpu_ns};
use crate::kernels::Kernel;
use crate::machine::fuse::{FuseMechanism, decide};
use crate::threads::{DispatchFault, LiveThreads, ThreadEvent};

/// Maps the policy's duty cycles (Table 2: 50% is one baseline CPU) to the
/// duties the runtime CPUs run: every duty is multiplied by `baseline /
/// 50%`, so every ratio between speeds is kept. The default, 50%, is the
/// identity; a lower baseline leaves headroom under the real-time limit
/// (the kernel keeps 5% of each second from `SCHED_FIFO` threads, so a
/// 100% duty cannot be delivered) and for the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DutyScale {
    pub baseline: Duty,
}

impl Default for DutyScale {
    fn default() -> Self {
        DutyScale { baseline: Duty::BASELINE }
    }
}

impl DutyScale {
    /// The runtime duty for the policy's `duty`, rounded to a whole
    /// per-mille; an error when it falls outside (0, 100%].
    pub fn apply(&self, duty: Duty) -> Result<Duty, DutyError> {
        let pm = u32::from(duty.per_mille()) * u32::from(self.baseline.per_mille());
        let base = u32::from(Duty::BASELINE.per_mille());
        Duty::from_per_mille((pm + base / 2) / base)
    }
}

/// How an executor runs.
#[derive(Debug, Clone)]
pub struct BackendConfig {
    /// Every CPU ticks every `tick_ns`.
    pub tick_ns: Nanos,
    /// Every CPU's load is sampled every `load_sample_ns`.
    pub load_sample_ns: Nanos,
    pub duty_scale: DutyScale,
    /// The real machine's topology (of the usable CPUs, as
    /// `machine::Machine` reads it), for the fuse decision.
    pub machine: Topology,
    /// The workers' real-time priority, if they have one. A controller
    /// running above it drops to it while it waits for the workers (a
    /// reconfiguration waits for a worker to finish its step): its waits
    /// yield, and under `SCHED_FIFO` a yield goes only to threads of the
    /// same priority, so a controller above a worker that shares its real
    /// CPU would wait for it for ever.
    pub worker_priority: Option<u8>,
}

/// Why a live run stopped before its end.
#[derive(Debug)]
pub enum BackendError {
    /// The runtime refused or rolled back a reconfiguration.
    Reconfig { action: String, error: Box<ReconfigError> },
    /// A thread could not be placed where the policy put it.
    Place { thread: ThreadId, cpu: CpuId, error: PlaceError },
    /// A duty the policy set falls outside (0, 100%] once scaled.
    Duty { cpu: CpuId, duty: Duty, error: DutyError },
    /// An action of a kind this executor does not run (it runs threads,
    /// not network-stack components).
    Unsupported { action: String },
    /// The traffic broke the policy boundary's contract (on the policy's
    /// side or the backend's; the message says which promise).
    Contract { message: String },
}

impl std::fmt::Display for BackendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BackendError::Reconfig { action, error } => {
                write!(f, "the runtime could not execute {action}: {error}")
            }
            BackendError::Place { thread, cpu, error } => {
                write!(f, "thread {thread} could not run on runtime CPU {cpu}: {error}")
            }
            BackendError::Duty { cpu, duty, error } => {
                write!(f, "the duty {duty} the policy set on CPU {cpu} cannot be run: {error}")
            }
            BackendError::Unsupported { action } => {
                write!(f, "this executor runs threads, not {action}")
            }
            BackendError::Contract { message } => {
                write!(f, "the live traffic breaks the policy boundary's contract: {message}")
            }
        }
    }
}

impl std::error::Error for BackendError {}

/// Why [`Executor::run_until`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// The time asked for came.
    Time,
    /// Every thread spawned so far has exited (asked for).
    Idle,
    /// The stop flag was raised (Ctrl-C).
    Interrupted,
}

/// What the executor knows of one runtime CPU.
#[derive(Debug, Clone, Copy)]
struct CpuMirror {
    state: CpuState,
    since: Nanos,
}

/// Drives a policy on a runtime. See the module docs.
pub struct Executor<'rt, P: Policy> {
    rt: &'rt Runtime,
    policy: P,
    cfg: BackendConfig,
    threads: LiveThreads,
    thread_events: Receiver<ThreadEvent>,
    record: TraceWriter<Vec<u8>, Vec<u8>>,
    /// The runtime clock at the executor's time 0.
    origin_ns: u64,
    /// The last time fed to the policy.
    now: Nanos,
    next_tick: Nanos,
    load_at: Nanos,
    load_busy: Vec<u64>,
    cpus: Vec<CpuMirror>,
    /// Events to feed once the current batch is executed.
    queued: VecDeque<Event>,
    /// Representatives of fuses carried out by a real SMT core.
    smt_reps: Vec<bool>,
    /// The `Fuse` or `Split` whose `Offline`/`Online` comes next: (index
    /// in `log.fuses`).
    pending_object: Option<usize>,
    live: usize,
    out: Vec<Action>,
    log: RunLog,
    duty_before: Vec<DutyReport>,
    cpu_time_before: Nanos,
    /// The boundary's contract, checked on every call.
    contract: Checker,
    /// The windows of the actions, for the execution check at the end.
    execution: ExecutionChecker,
    /// A defect was injected on purpose: the check may fail.
    faulty: bool,
}

impl<'rt, P: Policy> Executor<'rt, P> {
    /// An executor of `policy` on `rt`, whose time 0 is now. Call it from
    /// the thread that will run it (the controller): its CPU time is
    /// measured.
    pub fn new(rt: &'rt Runtime, policy: P, cfg: BackendConfig) -> Executor<'rt, P> {
        assert!(cfg.tick_ns > 0 && cfg.load_sample_ns > 0, "tick and load periods must be positive");
        let (threads, thread_events) = LiveThreads::new();
        let n = rt.cpus();
        let sample = rt.busy_sample();
        let ticks = TickStats { tick_ns: cfg.tick_ns, ..TickStats::default() };
        Executor {
            rt,
            policy,
            threads,
            thread_events,
            record: TraceWriter::new(Vec::with_capacity(1 << 20), Vec::with_capacity(1 << 20)),
            origin_ns: sample.at_ns,
            now: 0,
            next_tick: 0,
            load_at: 0,
            load_busy: sample.busy_ns,
            cpus: vec![CpuMirror { state: CpuState::Idle, since: 0 }; n],
            queued: VecDeque::new(),
            smt_reps: vec![false; n],
            pending_object: None,
            live: 0,
            out: Vec::new(),
            log: RunLog { ticks, borrowed_ns: vec![0; n], ..RunLog::default() },
            duty_before: rt.duty_report(),
            cpu_time_before: thread_cpu_ns(),
            contract: Checker::new(),
            execution: ExecutionChecker::new(),
            faulty: false,
            cfg,
        }
    }

    /// The executor's clock: ns since it started, never below the last
    /// time fed to the policy.
    pub fn now_ns(&self) -> Nanos {
        self.rt.now_ns().saturating_sub(self.origin_ns).max(self.now)
    }

    /// Threads spawned and not exited.
    pub fn live_threads(&self) -> usize {
        self.live
    }

    /// Starts a thread running `kernel` and tells the policy (`Spawn`).
    pub fn spawn(&mut self, kernel: Box<dyn Kernel>, spec: ThreadSpec) -> Result<ThreadId, BackendError> {
        let thread = self.threads.add(kernel);
        debug_assert_eq!(thread, self.log.threads.len(), "threads are numbered densely");
        let now = self.now_ns();
        self.log.threads.push(ThreadRecord { spawned_ns: now, done_ns: None, failed: false, units: 0 });
        self.live += 1;
        self.feed(Event::Spawn { thread, spec })?;
        Ok(thread)
    }

    /// Runs until `until_ns` (executor time), or until every thread has
    /// exited if `stop_when_idle`, or until `stop` is raised: ticks, load
    /// samples, exits, and whatever the policy does about them.
    pub fn run_until(
        &mut self,
        until_ns: Nanos,
        stop_when_idle: bool,
        stop: &AtomicBool,
    ) -> Result<Stopped, BackendError> {
        loop {
            self.drain_queued()?;
            if stop.load(Ordering::Acquire) {
                return Ok(Stopped::Interrupted);
            }
            if stop_when_idle && self.live == 0 {
                return Ok(Stopped::Idle);
            }
            let now = self.now_ns();
            if now >= until_ns {
                return Ok(Stopped::Time);
            }
            if now >= self.next_tick {
                self.tick_round(now)?;
                continue;
            }
            // Wait for a thread event, the next tick or the end, whichever
            // comes first; and at least every 10 ms, to see `stop`.
            let wait = (self.next_tick.min(until_ns) - now).min(10_000_000);
            match self.thread_events.recv_timeout(Duration::from_nanos(wait)) {
                Ok(e) => self.thread_event(e)?,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => unreachable!("the executor holds a sender"),
            }
        }
    }

    fn tick_round(&mut self, now: Nanos) -> Result<(), BackendError> {
        self.next_tick = self.log.ticks.round_fed(now, self.next_tick, self.cfg.tick_ns);
        for cpu in 0..self.cpus.len() {
            self.feed(Event::Tick { cpu })?;
        }
        if now - self.load_at >= self.cfg.load_sample_ns {
            let sample = self.rt.busy_sample();
            let window_ns = now - self.load_at;
            for cpu in 0..self.cpus.len() {
                let busy_ns = (sample.busy_ns[cpu] - self.load_busy[cpu]).min(window_ns);
                self.feed(Event::Load { cpu, busy_ns, window_ns })?;
            }
            (self.load_at, self.load_busy) = (now, sample.busy_ns);
        }
        Ok(())
    }

    fn thread_event(&mut self, e: ThreadEvent) -> Result<(), BackendError> {
        match e {
            ThreadEvent::Done { at_ns, thread, units, .. } => {
                let r = &mut self.log.threads[thread];
                r.done_ns = Some(at_ns.saturating_sub(self.origin_ns));
                r.units = units;
                self.exit(thread)
            }
            ThreadEvent::Failed { at_ns, thread, .. } => {
                let r = &mut self.log.threads[thread];
                (r.done_ns, r.failed) = (Some(at_ns.saturating_sub(self.origin_ns)), true);
                self.exit(thread)
            }
            ThreadEvent::Displaced { .. } => {
                self.log.displaced += 1;
                Ok(())
            }
        }
    }

    fn exit(&mut self, thread: ThreadId) -> Result<(), BackendError> {
        self.live -= 1;
        self.feed(Event::Exit { thread })
    }

    fn drain_queued(&mut self) -> Result<(), BackendError> {
        while let Some(e) = self.queued.pop_front() {
            self.feed(e)?;
        }
        Ok(())
    }

    /// Hands one event to the policy, records the traffic and executes it.
    fn feed(&mut self, event: Event) -> Result<(), BackendError> {
        let now = self.now_ns();
        self.now = now;
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        self.policy.handle(now, &event, &mut out);
        self.record.record(now, &event, &out);
        let t0 = Instant::now();
        let kept = self.contract.step(now, &event, &out);
        self.log.contract_ns += dyncore_core::nanos(t0.elapsed());
        if let Err(message) = kept {
            self.out = out;
            return Err(BackendError::Contract { message });
        }
        let r = out.drain(..).try_for_each(|a| {
            let tracked =
                matches!(a, Action::Dispatch { .. } | Action::Offline { .. } | Action::Online { .. })
                    .then(|| a.clone());
            self.execute(now, a)?;
            if let Some(a) = tracked {
                let applied = self.rt.now_ns().saturating_sub(self.origin_ns);
                self.execution.action(now, applied, &a);
                if let Action::Dispatch { cpu, state: CpuState::Running { thread, .. } } = a {
                    self.dispatched_on_object(thread, cpu, applied);
                }
            }
            Ok(())
        });
        self.out = out;
        r
    }

    /// A `Dispatch` of `thread` on `cpu` was applied at `applied`: if it
    /// is the first onto the thread's fused object, from then on the
    /// thread runs there (`FuseRecord::dispatched_ns`).
    fn dispatched_on_object(&mut self, thread: ThreadId, cpu: CpuId, applied: Nanos) {
        if let Some(f) = self.log.fuses.iter_mut().rev().find(|f| f.thread == thread && f.split_ns.is_none())
            && f.dispatched_ns.is_none()
            && f.object.cpus().contains(cpu)
        {
            f.dispatched_ns = Some(applied);
        }
    }

    /// Injects a test-only defect into the runtime's threads (see
    /// [`DispatchFault`]): the execution check at [`Executor::finish`] is
    /// then expected to fail, and does not panic in tests.
    pub fn inject_dispatch_fault(&mut self, fault: DispatchFault) {
        self.faulty = true;
        self.threads.inject_dispatch_fault(Some(fault));
    }

    /// Kernel steps taken so far against a `Dispatch` (the injected defect).
    pub fn steps_ignoring_dispatch(&self) -> u64 {
        self.threads.steps_ignoring_dispatch()
    }

    fn execute(&mut self, now: Nanos, action: Action) -> Result<(), BackendError> {
        match action {
            Action::Dispatch { cpu, state } => self.dispatch(now, cpu, state),
            Action::SetSpeed { cpu, duty } => {
                let policy_duty = if self.smt_reps[cpu] { Duty::BASELINE } else { duty };
                let live = self.cfg.duty_scale.apply(policy_duty).map_err(|error| BackendError::Duty {
                    cpu,
                    duty: policy_duty,
                    error,
                })?;
                self.rt.set_duty(cpu, live).expect("the policy names only the runtime's CPUs");
                Ok(())
            }
            Action::Fuse { thread, object } => {
                let mechanism = decide(&self.cfg.machine, &self.rt.mapping(), &object.cpus());
                self.smt_reps[object.representative] = matches!(mechanism, FuseMechanism::SmtCore { .. });
                self.pending_object = Some(self.log.fuses.len());
                self.log.fuses.push(FuseRecord {
                    thread,
                    object,
                    fused_ns: now,
                    dispatched_ns: None,
                    split_ns: None,
                    mechanism,
                });
                Ok(())
            }
            Action::Split { thread, object } => {
                let i = self
                    .log
                    .fuses
                    .iter()
                    .rposition(|f| f.thread == thread && f.object == object && f.split_ns.is_none())
                    .expect("contract: a split object was fused");
                self.log.fuses[i].split_ns = Some(now);
                self.smt_reps[object.representative] = false;
                self.pending_object = Some(i);
                Ok(())
            }
            Action::Offline { id, cpus, mode } => self.reconfigure(id, cpus, mode, false),
            Action::Online { id, cpus, mode } => self.reconfigure(id, cpus, mode, true),
            Action::Migrate { .. } | Action::Object { .. } => Ok(()),
            Action::Place { decision } => {
                Err(BackendError::Unsupported { action: format!("a placement ({})", decision.action) })
            }
        }
    }

    /// Executes an `Offline` (or, with `online`, an `Online`) at once and
    /// queues its `ReconfigDone`.
    fn reconfigure(
        &mut self,
        id: ReconfigId,
        cpus: CpuSet,
        mode: Mode,
        online: bool,
    ) -> Result<(), BackendError> {
        // The object's representative when a Fuse/Split came just before;
        // a policy may also take CPUs offline with no object (to save power).
        let representative = match self.pending_object.take() {
            Some(i) => self.log.fuses[i].object.representative,
            None => cpus.first().unwrap_or(0),
        };
        let r = self
            .at_worker_priority(|rt| if online { rt.online(&cpus, mode) } else { rt.offline(&cpus, mode) });
        let report = r.map_err(|error| BackendError::Reconfig {
            action: format!("{} of CPUs {cpus} ({mode:?})", if online { "online" } else { "offline" }),
            error: Box::new(error),
        })?;
        let at = |ns: u64| ns.saturating_sub(self.origin_ns);
        self.log.reconfigs.push(ReconfigRecord {
            id,
            online,
            cpus,
            mode,
            representative,
            started_ns: at(report.started_at_ns),
            finished_ns: at(report.finished_at_ns),
            critical_ns: report.critical_ns,
            steps_ns: report.step_ns.iter().map(|(step, ns)| (step.name(), *ns)).collect(),
        });
        self.queued.push_back(Event::ReconfigDone { id, took_ns: report.critical_ns });
        Ok(())
    }

    /// Runs `f` with the controller at the workers' priority, if it runs
    /// above it (see [`BackendConfig::worker_priority`]).
    fn at_worker_priority<T>(&self, f: impl FnOnce(&Runtime) -> T) -> T {
        let own = crate::affinity::current_thread_realtime_priority();
        let lower = match (own, self.cfg.worker_priority) {
            (Some(own), Some(w)) if own > w => crate::affinity::set_current_thread_realtime(w).is_ok(),
            _ => false,
        };
        let r = f(self.rt);
        if lower && let Some(own) = own {
            let _ = crate::affinity::set_current_thread_realtime(own);
        }
        r
    }

    fn dispatch(&mut self, now: Nanos, cpu: CpuId, state: CpuState) -> Result<(), BackendError> {
        let old = std::mem::replace(&mut self.cpus[cpu], CpuMirror { state, since: now });
        self.close(cpu, old, now);
        if let CpuState::Running { thread, .. } = old.state {
            let stays = matches!(state, CpuState::Running { thread: t, .. } if t == thread);
            if !stays && self.threads.placement(thread) == Some(cpu) {
                self.threads.stop(thread);
            }
        }
        if let CpuState::Running { thread, .. } = state {
            self.threads.run_on(self.rt, thread, cpu).map_err(|error| BackendError::Place {
                thread,
                cpu,
                error,
            })?;
        }
        Ok(())
    }

    /// Accounts `cpu`'s time in state `m` up to `now`: a slice of the
    /// thread it ran, or time borrowed into a fused object.
    fn close(&mut self, cpu: CpuId, m: CpuMirror, now: Nanos) {
        match m.state {
            CpuState::Running { thread, object_cpus } if m.since < now => {
                self.log.slices.push(Slice { cpu, thread, start_ns: m.since, end_ns: now, object_cpus });
            }
            CpuState::Borrowed { .. } => self.log.borrowed_ns[cpu] += now - m.since,
            _ => {}
        }
    }

    /// Stops every thread and returns what was measured and recorded, and
    /// the policy. The runtime keeps running (its CPUs idle) until the
    /// caller drops it.
    pub fn finish(mut self) -> (LiveRun, P) {
        let end = self.now_ns();
        // An injected defect ends here: its runner obeys the stop below.
        self.threads.inject_dispatch_fault(None);
        for t in 0..self.threads.len() {
            self.threads.stop(t);
            self.log.threads[t].units = self.threads.units(t);
        }
        for cpu in 0..self.cpus.len() {
            self.close(cpu, self.cpus[cpu], end);
        }
        let stopped = self.rt.now_ns().saturating_sub(self.origin_ns).max(end);
        let execution = self.check_execution(stopped);
        self.log.controller_cpu_ns = thread_cpu_ns().saturating_sub(self.cpu_time_before);
        let duty = self.rt.duty_report().iter().zip(&self.duty_before).map(|(a, b)| a.since(b)).collect();
        let (events, actions) = self.record.finish().expect("writing to memory does not fail");
        let text = |b: Vec<u8>| String::from_utf8(b).expect("serde_json writes UTF-8");
        let run = LiveRun {
            log: self.log,
            events: text(events),
            actions: text(actions),
            end_ns: end,
            duty,
            execution,
        };
        if !run.execution.ok() && !self.faulty && crate::testing::in_test_binary() {
            panic!("the live backend did not execute what the policy asked: {}", run.execution.summary());
        }
        (run, self.policy)
    }

    /// The execution check (see the module docs), every thread stopped by
    /// `stopped` (executor time): waits for the runners to hand in their
    /// slices, then checks them and the runtime's CPU changes.
    fn check_execution(&mut self, stopped: Nanos) -> Verdict {
        let executed = self.threads.executed(Instant::now() + self.rt.wait_deadline());
        let (changes, lost_changes) = self.rt.cpu_changes();
        let origin = self.origin_ns;
        let at = |ns: u64| ns.saturating_sub(origin);
        let exec = Execution {
            slices: executed
                .slices
                .iter()
                .map(|s| ExecSlice {
                    start_ns: at(s.start_ns),
                    last_start_ns: at(s.last_start_ns),
                    end_ns: at(s.end_ns),
                    ..*s
                })
                .collect(),
            changes: changes
                .into_iter()
                .filter(|c| c.at_ns >= origin)
                .map(|c| dyncore_core::policy::execution::CpuChange { at_ns: at(c.at_ns), ..c })
                .collect(),
            lost: executed.lost + executed.open as u64 + lost_changes,
            // The runtime places every run itself.
            forced: Vec::new(),
        };
        let t0 = Instant::now();
        let verdict = std::mem::take(&mut self.execution).finish(stopped, &exec);
        self.log.check_ns = dyncore_core::nanos(t0.elapsed());
        (self.log.executed, self.log.cpu_changes) = (exec.slices, exec.changes);
        verdict
    }
}

#[cfg(all(test, not(dyncore_loom)))]
mod tests;
