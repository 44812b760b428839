//! Threads placed by a policy: the mechanism behind the action "run thread
//! T on CPU c" of a live backend.
//!
//! A [`LiveThreads`] holds the threads of a run, each a [`Kernel`]. The
//! runtime's own placement (FIFO run queues, round-robin spawn) is not
//! used: a thread runs only where [`LiveThreads::run_on`] put it, until
//! [`LiveThreads::stop`] or another `run_on`.
//!
//! How: each placement gets a new *epoch* and a runner task queued on the
//! chosen CPU. A runner steps the thread's kernel only while its epoch is
//! the thread's current one, on the CPU it was placed on; a superseded
//! runner drops out at its next step. So a move takes effect within one
//! kernel step (≤ about 50 µs): the old runner may be in a step when
//! `run_on` returns, and the new one waits (without blocking its CPU) for
//! the kernel until that step ends; a kernel never runs on two CPUs at once.
//!
//! Events, in a channel, with times on the runtime's clock:
//! [`ThreadEvent::Done`] when a kernel finishes, [`ThreadEvent::Failed`]
//! when it panics (the runtime also lists the failure), and
//! [`ThreadEvent::Displaced`] when a CPU went offline under a thread (the
//! runtime moved its runner elsewhere; the runner does not run there — the
//! thread is unplaced until the policy places it again).
//!
//! What ran, recorded from the workers: each runner keeps, in its own
//! fields (no lock, no shared write per step), the slice it executed — the
//! start of its first kernel step ([`Ctx::step_started_ns`], which the
//! worker read before taking the runner from its queue), the start of its
//! last and the end of its last ([`Task::stepped`], the worker's own
//! reading after the step) — and hands it to the record once, when it is
//! dropped. [`LiveThreads::executed`] waits for every runner to be dropped
//! and returns the slices, which the execution checker
//! (`dyncore_core::policy::execution`) holds against the policy's
//! `Dispatch`es. The record is bounded ([`SLICE_CAP`] slices, then counted
//! as lost) and costs one lock per placement, none per step.
//!
//! Invariants: a thread's kernel is stepped by at most one runner at a
//! time (its mutex; a runner that cannot take it yields its step); only a
//! runner of the current epoch steps it (unless the test-only fault hook,
//! [`LiveThreads::inject_dispatch_fault`], makes one ignore its successor);
//! a finished thread is never stepped again; every kernel step is inside
//! exactly one recorded slice, of the runner that took it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use dyncore_core::CpuId;
use dyncore_core::policy::execution::{ExecSlice, os_cpu_bit};

use crate::cpu::{Ctx, PlaceError, Runtime, Task, TaskPoll};
use crate::kernels::Kernel;

/// A thread's index in its [`LiveThreads`].
pub type ThreadId = usize;

/// Not placed on any CPU.
const NOWHERE: usize = usize::MAX;

/// What happened to a thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadEvent {
    /// The kernel finished on `cpu`, after `units` units in all.
    Done { at_ns: u64, thread: ThreadId, cpu: CpuId, units: u64 },
    /// The kernel panicked on `cpu`; the thread is finished.
    Failed { at_ns: u64, thread: ThreadId, cpu: CpuId },
    /// `from` went offline with the thread placed on it; the thread is
    /// unplaced (its runner was migrated to `to` and did not run there).
    Displaced { at_ns: u64, thread: ThreadId, from: CpuId, to: CpuId },
}

struct Slot {
    name: &'static str,
    kernel: Mutex<Box<dyn Kernel>>,
    /// Bumped by every placement and unplacement.
    epoch: AtomicU64,
    cpu: AtomicUsize,
    units: AtomicU64,
    finished: AtomicBool,
}

/// Most slices a [`LiveThreads`] keeps; later ones are counted as lost.
pub const SLICE_CAP: usize = 1 << 20;

/// A test-only defect: asked by a runner that finds the thread's placement
/// superseded (the policy moved or stopped it), with the thread and the
/// runner's CPU; `true` makes the runner ignore the `Dispatch` and keep
/// stepping there. For the execution checker's tests: it must catch this.
pub type DispatchFault = Box<dyn Fn(ThreadId, CpuId) -> bool + Send + Sync>;

/// What ran: the slices of the runners dropped so far, and the fault hook.
#[derive(Default)]
struct Record {
    slices: Mutex<Vec<ExecSlice>>,
    lost: AtomicU64,
    /// Runners created and not yet dropped (they may still step).
    open: AtomicUsize,
    faulty: AtomicBool,
    fault: Mutex<Option<DispatchFault>>,
    /// Kernel steps taken by runners that ignored their successor.
    ignored_steps: AtomicU64,
}

impl Record {
    fn push(&self, s: ExecSlice) {
        let mut v = self.slices.lock().unwrap_or_else(|e| e.into_inner());
        if v.len() < SLICE_CAP {
            v.push(s);
        } else {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn ignores(&self, thread: ThreadId, cpu: CpuId) -> bool {
        self.faulty.load(Ordering::Acquire)
            && self.fault.lock().unwrap_or_else(|e| e.into_inner()).as_ref().is_some_and(|f| f(thread, cpu))
    }
}

/// The slices a [`LiveThreads`] executed ([`LiveThreads::executed`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Executed {
    /// On the runtime's clock, in the order the runners were dropped.
    pub slices: Vec<ExecSlice>,
    /// Slices dropped by the bounded record.
    pub lost: u64,
    /// Runners still alive at the deadline (their slices are missing).
    pub open: usize,
}

/// The threads of a live run. See the module docs.
pub struct LiveThreads {
    slots: Vec<Arc<Slot>>,
    events: Sender<ThreadEvent>,
    record: Arc<Record>,
}

impl LiveThreads {
    /// No threads yet, and the receiving end of their events.
    pub fn new() -> (LiveThreads, Receiver<ThreadEvent>) {
        let (events, rx) = channel();
        (LiveThreads { slots: Vec::new(), events, record: Arc::default() }, rx)
    }

    /// Adds a thread (not placed: it runs nowhere yet).
    pub fn add(&mut self, kernel: Box<dyn Kernel>) -> ThreadId {
        self.slots.push(Arc::new(Slot {
            name: kernel.name(),
            kernel: Mutex::new(kernel),
            epoch: AtomicU64::new(0),
            cpu: AtomicUsize::new(NOWHERE),
            units: AtomicU64::new(0),
            finished: AtomicBool::new(false),
        }));
        self.slots.len() - 1
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    fn slot(&self, t: ThreadId) -> &Arc<Slot> {
        self.slots
            .get(t)
            .unwrap_or_else(|| panic!("thread {t} does not exist ({} threads)", self.slots.len()))
    }

    /// Runs thread `t` on `cpu` from its next step, wherever it ran before
    /// (see the module docs). A finished thread is left alone (`Ok`).
    pub fn run_on(&self, rt: &Runtime, t: ThreadId, cpu: CpuId) -> Result<(), PlaceError> {
        let s = self.slot(t);
        if s.finished.load(Ordering::Acquire) {
            return Ok(());
        }
        if s.cpu.load(Ordering::Acquire) == cpu {
            return Ok(());
        }
        // Unplace first: if `cpu` refuses the runner, the thread runs nowhere.
        self.stop(t);
        let epoch = s.epoch.fetch_add(1, Ordering::AcqRel) + 1;
        s.cpu.store(cpu, Ordering::Release);
        self.record.open.fetch_add(1, Ordering::AcqRel);
        let runner = Runner {
            slot: s.clone(),
            thread: t,
            cpu,
            epoch,
            events: self.events.clone(),
            clock: rt.clock_start(),
            ended: false,
            record: self.record.clone(),
            slice: None,
            stepping: None,
            ignoring: false,
            os_cpus: 0,
        };
        rt.spawn_on(cpu, runner).inspect_err(|_| {
            s.epoch.fetch_add(1, Ordering::AcqRel);
            s.cpu.store(NOWHERE, Ordering::Release);
        })
    }

    /// Runs thread `t` nowhere from its next step (it keeps its state).
    pub fn stop(&self, t: ThreadId) {
        let s = self.slot(t);
        s.epoch.fetch_add(1, Ordering::AcqRel);
        s.cpu.store(NOWHERE, Ordering::Release);
    }

    /// Where thread `t` is placed now (`None`: nowhere, or finished).
    pub fn placement(&self, t: ThreadId) -> Option<CpuId> {
        let c = self.slot(t).cpu.load(Ordering::Acquire);
        (c != NOWHERE).then_some(c)
    }

    /// Units thread `t` has done so far.
    pub fn units(&self, t: ThreadId) -> u64 {
        self.slot(t).units.load(Ordering::Acquire)
    }

    /// Thread `t`'s kernel finished (or failed).
    pub fn is_finished(&self, t: ThreadId) -> bool {
        self.slot(t).finished.load(Ordering::Acquire)
    }

    /// The Table 3 program of thread `t`'s kernel.
    pub fn name(&self, t: ThreadId) -> &'static str {
        self.slot(t).name
    }

    /// The slices executed so far, once every runner created so far has
    /// been dropped or `deadline` has passed (see [`Executed::open`]).
    /// Stop the threads first ([`LiveThreads::stop`]): a stopped thread's
    /// runner drops out at its next step.
    pub fn executed(&self, deadline: Instant) -> Executed {
        let r = &self.record;
        let _ = crate::wait::spin_until(Some(deadline), || r.open.load(Ordering::Acquire) == 0);
        let open = r.open.load(Ordering::Acquire);
        let slices = r.slices.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Executed { slices, lost: r.lost.load(Ordering::Relaxed), open }
    }

    /// Installs (or with `None` removes) a test-only defect (see
    /// [`DispatchFault`]).
    pub fn inject_dispatch_fault(&self, fault: Option<DispatchFault>) {
        let r = &self.record;
        let on = fault.is_some();
        *r.fault.lock().unwrap_or_else(|e| e.into_inner()) = fault;
        r.faulty.store(on, Ordering::Release);
    }

    /// Kernel steps taken so far by runners that ignored a `Dispatch`
    /// (see [`DispatchFault`]).
    pub fn steps_ignoring_dispatch(&self) -> u64 {
        self.record.ignored_steps.load(Ordering::Acquire)
    }
}

/// Steps a thread's kernel on one CPU for one epoch.
struct Runner {
    slot: Arc<Slot>,
    thread: ThreadId,
    cpu: CpuId,
    epoch: u64,
    events: Sender<ThreadEvent>,
    /// The start of the runtime's clock.
    clock: std::time::Instant,
    /// Ended normally (finished, superseded or displaced): nothing to
    /// report when dropped.
    ended: bool,
    record: Arc<Record>,
    /// What this runner executed so far, handed to the record when dropped.
    slice: Option<ExecSlice>,
    /// The start of the kernel step in progress (until [`Task::stepped`]).
    stepping: Option<u64>,
    /// Ignores its successor (the test-only fault hook said so at its
    /// last step).
    ignoring: bool,
    /// The OS CPUs its steps ran on, as the kernel said at each step
    /// (`ExecSlice::os_cpus`).
    os_cpus: u64,
}

impl Runner {
    fn end(&mut self) -> TaskPoll {
        self.ended = true;
        TaskPoll::Ready
    }

    fn send(&self, e: ThreadEvent) {
        // The receiver may be gone (the run ended): nothing to tell.
        let _ = self.events.send(e);
    }

    /// Whether the thread's placement is no longer this runner's (unless
    /// the fault hook makes it ignore that).
    fn superseded(&mut self, s: &Slot) -> bool {
        if s.epoch.load(Ordering::Acquire) == self.epoch {
            return false;
        }
        // Asked again at every step: removing the hook ends the defect.
        self.ignoring = self.record.ignores(self.thread, self.cpu);
        !self.ignoring
    }

    /// A kernel step that started at `start_ns` ended at `end_ns`.
    fn ran(&mut self, start_ns: u64, end_ns: u64) {
        match &mut self.slice {
            Some(sl) => {
                (sl.last_start_ns, sl.end_ns, sl.steps, sl.os_cpus) =
                    (start_ns, end_ns, sl.steps + 1, self.os_cpus)
            }
            None => {
                self.slice = Some(ExecSlice {
                    thread: self.thread,
                    cpu: self.cpu,
                    start_ns,
                    last_start_ns: start_ns,
                    end_ns,
                    steps: 1,
                    os_cpus: self.os_cpus,
                })
            }
        }
    }
}

impl Task for Runner {
    fn step(&mut self, cx: &mut Ctx<'_>) -> TaskPoll {
        let s = self.slot.clone();
        if self.superseded(&s) {
            return self.end();
        }
        if cx.cpu() != self.cpu && self.ignoring {
            return self.end();
        }
        if cx.cpu() != self.cpu {
            // Migrated by an offline: unplace, unless the policy moved the
            // thread meanwhile.
            if s.epoch
                .compare_exchange(self.epoch, self.epoch + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                s.cpu.store(NOWHERE, Ordering::Release);
                let at_ns = cx.now_ns();
                self.send(ThreadEvent::Displaced {
                    at_ns,
                    thread: self.thread,
                    from: self.cpu,
                    to: cx.cpu(),
                });
            }
            return self.end();
        }
        // The previous placement's runner may be finishing a step. (A
        // poisoned kernel panicked before: that runner reported it.)
        let mut kernel = match s.kernel.try_lock() {
            Ok(k) => k,
            Err(std::sync::TryLockError::WouldBlock) => return TaskPoll::Pending,
            Err(std::sync::TryLockError::Poisoned(_)) => return self.end(),
        };
        if s.finished.load(Ordering::Acquire) {
            return self.end();
        }
        self.stepping = Some(cx.step_started_ns());
        // Where the step really runs: the evidence that a thread ran only
        // on the real CPUs its runtime CPU stands for (a vDSO call).
        self.os_cpus |= os_cpu_bit(crate::affinity::current_cpu());
        if self.ignoring && s.epoch.load(Ordering::Acquire) != self.epoch {
            self.record.ignored_steps.fetch_add(1, Ordering::AcqRel);
        }
        let p = kernel.step();
        let units = s.units.fetch_add(p.units, Ordering::AcqRel) + p.units;
        if !p.done {
            return TaskPoll::Pending;
        }
        s.finished.store(true, Ordering::Release);
        s.cpu.store(NOWHERE, Ordering::Release);
        self.send(ThreadEvent::Done { at_ns: cx.now_ns(), thread: self.thread, cpu: self.cpu, units });
        self.end()
    }

    fn name(&self) -> String {
        format!("thread {} ({})", self.thread, self.slot.name)
    }

    fn stepped(&mut self, end_ns: u64) {
        if let Some(start) = self.stepping.take() {
            self.ran(start, end_ns);
        }
    }
}

impl Drop for Runner {
    /// Dropped without ending and with the kernel's mutex poisoned: its
    /// step panicked (the runtime caught it and dropped the runner). Other
    /// drops without ending (a runtime shutting down with the runner
    /// queued, a refused placement) have nothing to report.
    fn drop(&mut self) {
        if let Some(start) = self.stepping.take() {
            // The step panicked (the worker did not call `stepped`).
            self.ran(start, dyncore_core::nanos(self.clock.elapsed()));
        }
        if let Some(sl) = self.slice.take() {
            self.record.push(sl);
        }
        self.record.open.fetch_sub(1, Ordering::AcqRel);
        let s = &self.slot;
        if self.ended || !s.kernel.is_poisoned() {
            return;
        }
        s.finished.store(true, Ordering::Release);
        s.cpu.store(NOWHERE, Ordering::Release);
        let at_ns = dyncore_core::nanos(self.clock.elapsed());
        self.send(ThreadEvent::Failed { at_ns, thread: self.thread, cpu: self.cpu });
    }
}

#[cfg(all(test, not(dyncore_loom)))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::cpu::{Mode, RuntimeConfig};
    use crate::kernels::{FibJobs, Fibonacci, Progress, fib};

    fn runtime(n: usize) -> Runtime {
        let real = crate::affinity::allowed_cpus().expect("the affinity mask is readable");
        let mut cfg = RuntimeConfig::over(&real, n);
        // Not a test of stalls: a loaded machine must not make one.
        cfg.stall_after = Duration::from_secs(30);
        cfg.wait_deadline = Duration::from_secs(60);
        Runtime::new(cfg).expect("a runtime")
    }

    /// The next event (there is no wall-clock bound on it: a lost event
    /// shows as a test that fails after an hour rather than passing).
    fn next(rx: &Receiver<ThreadEvent>) -> ThreadEvent {
        rx.recv_timeout(Duration::from_secs(3600)).expect("an event")
    }

    fn wait_until(mut cond: impl FnMut() -> bool) {
        while !cond() {
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// A kernel that records the worker thread of each of its steps.
    struct Traced {
        inner: Box<dyn Kernel>,
        trace: Arc<Mutex<Vec<String>>>,
    }

    impl Kernel for Traced {
        fn name(&self) -> &'static str {
            self.inner.name()
        }
        fn step_units(&self) -> u64 {
            self.inner.step_units()
        }
        fn step(&mut self) -> Progress {
            let worker = std::thread::current().name().unwrap_or("?").to_string();
            self.trace.lock().unwrap().push(worker);
            self.inner.step()
        }
    }

    #[test]
    fn a_thread_runs_only_where_placed_and_moves_and_finishes_with_its_units() {
        let _cpus = crate::testing::real_cpus();
        let rt = runtime(3);
        let (mut threads, rx) = LiveThreads::new();
        let jobs = FibJobs::new(32, 16);
        let trace = Arc::new(Mutex::new(Vec::new()));
        let (kernel, release) = held(&jobs);
        let t = threads.add(Box::new(Traced { inner: kernel, trace: trace.clone() }));
        assert_eq!((threads.placement(t), threads.units(t), threads.name(t)), (None, 0, "fibonacci"));
        // Not placed: nothing runs.
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(threads.units(t), 0);
        threads.run_on(&rt, t, 1).unwrap();
        assert_eq!(threads.placement(t), Some(1));
        wait_until(|| threads.units(t) > 0);
        let before = rt.busy_sample();
        threads.run_on(&rt, t, 2).unwrap();
        release.store(true, Ordering::SeqCst);
        let ThreadEvent::Done { thread, cpu, units, .. } = next(&rx) else { panic!("done") };
        assert_eq!((thread, cpu, units), (t, 2, jobs.total_units()));
        assert_eq!(jobs.sum(), fib(32), "the kernel's result survived the move");
        // Steps on CPU 1, then only on CPU 2: never both, never back.
        let trace = trace.lock().unwrap();
        let on_1 = trace.iter().take_while(|w| *w == "dyncore-cpu1").count();
        assert!(on_1 >= 1 && on_1 < trace.len(), "{:?}", trace.len());
        assert!(trace[on_1..].iter().all(|w| w == "dyncore-cpu2"), "{:?}", &trace[on_1..]);
        let done = rt.busy_sample();
        assert!(done.busy_ns[2] > before.busy_ns[2] && done.at_ns > before.at_ns);
        assert!(threads.is_finished(t) && threads.placement(t).is_none());
        // A finished thread is left alone.
        threads.run_on(&rt, t, 0).unwrap();
        assert_eq!(threads.placement(t), None);
    }

    /// Runs `inner`, but after its first step does nothing (0 units, not
    /// done) until `release`: the kernel cannot finish before the test has
    /// acted, however the threads are scheduled.
    struct Held {
        inner: Fibonacci,
        release: Arc<AtomicBool>,
        stepped: bool,
    }

    impl Kernel for Held {
        fn name(&self) -> &'static str {
            self.inner.name()
        }
        fn step_units(&self) -> u64 {
            self.inner.step_units()
        }
        fn step(&mut self) -> Progress {
            if self.stepped && !self.release.load(Ordering::SeqCst) {
                return Progress { units: 0, done: false };
            }
            self.stepped = true;
            self.inner.step()
        }
    }

    fn held(jobs: &Arc<FibJobs>) -> (Box<Held>, Arc<AtomicBool>) {
        let release = Arc::new(AtomicBool::new(false));
        (
            Box::new(Held { inner: Fibonacci::new(jobs.clone()), release: release.clone(), stepped: false }),
            release,
        )
    }

    #[test]
    fn a_stopped_thread_keeps_its_state_and_resumes() {
        let _cpus = crate::testing::real_cpus();
        let rt = runtime(2);
        let (mut threads, rx) = LiveThreads::new();
        let jobs = FibJobs::new(30, 14);
        let (kernel, release) = held(&jobs);
        let t = threads.add(kernel);
        threads.run_on(&rt, t, 0).unwrap();
        wait_until(|| threads.units(t) > 0);
        let first = threads.units(t);
        threads.stop(t);
        assert_eq!(threads.placement(t), None);
        release.store(true, Ordering::SeqCst);
        // Stopped: at most the step in progress, then nothing (a thread
        // still running would do hundreds of steps meanwhile).
        std::thread::sleep(Duration::from_millis(20));
        assert!(threads.units(t) <= first + threads_step(&jobs), "{} after {first}", threads.units(t));
        assert_eq!(rx.try_recv(), Err(std::sync::mpsc::TryRecvError::Empty));
        threads.run_on(&rt, t, 1).unwrap();
        let ThreadEvent::Done { units, cpu: 1, .. } = next(&rx) else { panic!("done on CPU 1") };
        assert_eq!(units, jobs.total_units());
        assert_eq!(jobs.sum(), fib(30));
    }

    fn threads_step(jobs: &Arc<FibJobs>) -> u64 {
        Fibonacci::new(jobs.clone()).step_units()
    }

    #[test]
    fn an_offline_under_a_thread_displaces_it() {
        let _cpus = crate::testing::real_cpus();
        let rt = runtime(3);
        let (mut threads, rx) = LiveThreads::new();
        let jobs = FibJobs::new(30, 16);
        let (kernel, release) = held(&jobs);
        let t = threads.add(kernel);
        threads.run_on(&rt, t, 2).unwrap();
        wait_until(|| threads.units(t) > 0);
        let r = rt.offline(&"2".parse().unwrap(), Mode::Bolt).unwrap();
        assert!(!r.is_noop());
        let ThreadEvent::Displaced { thread, from: 2, to, .. } = next(&rx) else { panic!("displaced") };
        assert!(thread == t && to != 2);
        assert_eq!(threads.placement(t), None);
        release.store(true, Ordering::SeqCst);
        threads.run_on(&rt, t, 0).unwrap();
        assert!(matches!(next(&rx), ThreadEvent::Done { cpu: 0, .. }));
        assert_eq!(jobs.sum(), fib(30));
    }

    struct Bomb(u32);

    impl Kernel for Bomb {
        fn name(&self) -> &'static str {
            "bomb"
        }
        fn step_units(&self) -> u64 {
            1
        }
        fn step(&mut self) -> Progress {
            self.0 -= 1;
            assert!(self.0 > 0, "the bomb went off");
            Progress { units: 1, done: false }
        }
    }

    #[test]
    fn a_panicking_kernel_fails_its_thread_only() {
        let _cpus = crate::testing::real_cpus();
        let rt = runtime(2);
        let (mut threads, rx) = LiveThreads::new();
        let bomb = threads.add(Box::new(Bomb(3)));
        let jobs = FibJobs::new(25, 12);
        let fine = threads.add(Box::new(Fibonacci::new(jobs.clone())));
        threads.run_on(&rt, bomb, 1).unwrap();
        let ThreadEvent::Failed { at_ns, thread, cpu } = next(&rx) else { panic!("failed") };
        assert_eq!((thread, cpu), (bomb, 1));
        assert!(threads.is_finished(bomb));
        assert!(at_ns >= rt.failures()[0].at_ns, "reported after the runtime caught it");
        threads.run_on(&rt, fine, 1).unwrap();
        assert!(matches!(next(&rx), ThreadEvent::Done { thread, .. } if thread == fine));
        let f = &rt.failures()[0];
        assert_eq!((f.cpu, f.message.as_str()), (1, "the bomb went off"));
        assert!(matches!(&f.work, crate::cpu::FailedWork::Task { name } if name == "thread 0 (bomb)"));
    }
}
