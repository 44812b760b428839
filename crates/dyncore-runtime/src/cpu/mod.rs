//! Runtime CPUs that go offline and online the Bolt way, with processor
//! proxies (Bolt; Chameleon §3.1, §4.1).
//!
//! A [`Runtime`] owns runtime CPUs `0..n`, each a worker thread pinned to a
//! real CPU ([`RuntimeConfig::real_cpus`]; several runtime CPUs may share a
//! real one). Each runtime CPU has what a kernel CPU has:
//!
//! * a run queue of user-level [`Task`]s, run one step at a time;
//! * a mailbox for remote calls ([`Runtime::call_on`]), reschedules and
//!   invalidations — the IPI analogue (see `mailbox.rs`);
//! * a memory cache over the runtime's block pool (see `cache.rs`);
//! * statistics ([`CpuCounters`]);
//! * a helper thread, a watchdog that checks the worker makes progress;
//! * an entry in the registry ([`Runtime::registry`], the sysfs analogue).
//!
//! and two global operations involve every CPU: [`Runtime::synchronize`] (a
//! grace period) and [`Runtime::broadcast_invalidate`] (a TLB shootdown).
//!
//! [`Runtime::offline`] and [`Runtime::online`] take a [`CpuSet`] and a
//! [`Mode`], ask `dyncore_core::reconfig` for a plan, and execute its
//! critical steps before returning (the deferred ones are handed to the
//! helper threads, or wait for memory pressure). Bolt offline of a set S:
//!
//! 1. `Deactivate(S)`: S leaves the active mask, so no migration targets
//!    it. (`spawn` places by open run queue, not by the mask: a task
//!    spawned onto S before step 4 closes its queue is migrated with the
//!    rest.)
//! 2. `InstallProxy` for each CPU: its mailbox is redirected to an online
//!    CPU, which from now on handles its messages with its per-CPU state.
//! 3. `StopDispatch` for each, then `AwaitStopped` for each: the worker
//!    finishes its current step and starts no other (the waits overlap).
//! 4. `MigrateRunQueue` for each: queued tasks move to active CPUs; the CPU
//!    is offline.
//! 5. Deferred: statistics folded and the helper parked at the helper's next
//!    tick, without waiting; the cache kept until [`Runtime::reclaim_memory`]
//!    or [`RuntimeConfig::cache_keep`]; the registry entry stays and reads
//!    offline.
//!
//! Online reverses it: re-create what is missing (cache, registry entry,
//! helper), `RemoveProxy` (pending messages stay queued for the CPU),
//! `Activate`, `StartDispatch` (the worker drains its mailbox and applies
//! the newest invalidation before its first task). Naive mode does one CPU
//! at a time with everything critical: a stop-the-world barrier, a grace
//! period, freeing the cache, removing the registry entry, joining the
//! helper; online re-creates all of it.
//!
//! Invariants (asserted after every reconfiguration in debug builds, and
//! checked by [`Runtime::check`]):
//! 1. At least one CPU is online; the active mask is exactly the online CPUs.
//! 2. An offline CPU has exactly one proxy, which is online; its mailbox's
//!    handler is that proxy, its run queue is closed and empty. An online
//!    CPU has no proxy, handles its own mailbox, has an open queue and a
//!    cache.
//! 3. Every proxy's list of charges equals the proxy table's.
//! 4. No message is lost: a message leaves a mailbox only by being handled
//!    (at least once; handlers are idempotent).
//! 5. No task is lost or duplicated: a task is always in exactly one run
//!    queue or being stepped by exactly one worker.
//! 6. Memory: every block is free, cached by one CPU, or held by one task;
//!    every cache is live in one CPU or freed exactly once
//!    ([`Runtime::memory`]).
//!
//! A failing critical step (an error, or the fault hook of
//! [`Runtime::set_fault_hook`]) rolls the whole call back with
//! [`dyncore_core::reconfig::Plan::rollback`] and reports the step.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dyncore_core::policy::execution::CpuChange;
use dyncore_core::reconfig::{ReconfigState, Step};
use dyncore_core::{CpuId, CpuSet};
use dyncore_ring::SpinPolicy;

mod cache;
mod events;
mod exec;
mod gate;
mod inspect;
mod mailbox;
mod percpu;
mod report;
mod sync;
mod task;
mod throttle;
mod waits;
mod worker;

pub use cache::{BLOCK_BYTES, Block, MemError, MemoryReport};
pub use dyncore_core::reconfig::Mode;
pub use events::{FailedWork, RuntimeEvent, TaskFailure};
pub use percpu::{CpuCounters, CpuLiveness};
pub use report::{
    CpuInfo, HelperState, InvalidateError, InvalidateReport, PlaceError, ReconfigError, ReconfigReport,
    Stall, SyncReport, Unresponsive,
};
pub use task::{CallCx, Ctx, Task, TaskPoll};
pub use throttle::{
    CONTENDED_STOLEN_SHARE, Charge, DELIVERY_TOLERANCE, Duty, DutyError, DutyReport, SPIN_BELOW_NS, Throttle,
    ThrottleCounters, thread_cpu_ns,
};

use cache::Pool;
use percpu::{Msg, PerCpu};
use sync::lock;
use worker::Stw;

/// How a runtime is built.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Runtime CPU `i` runs on real CPU `real_cpus[i]`.
    pub real_cpus: Vec<CpuId>,
    /// Blocks a new per-CPU cache holds.
    pub cache_blocks: usize,
    /// Blocks in the pool (default: 4 caches' worth per CPU).
    pub pool_blocks: Option<usize>,
    /// Bolt: free an offline CPU's kept cache after this long (`None`: only
    /// under memory pressure, [`Runtime::reclaim_memory`]).
    pub cache_keep: Option<Duration>,
    /// How often a helper thread checks its worker (a period in which the
    /// worker had work and made no progress counts as a stall period).
    pub watchdog_period: Duration,
    /// A worker with work and no progress for this long is *stalled*: its
    /// registry entry says so, subscribers are told, and controller waits on
    /// it fail at once instead of at the deadline (see [`CpuInfo::stalled`]).
    /// Long compared with a step (≤ 50 µs for the kernels) and with the
    /// scheduling delays of a loaded machine (a worker not run for hundreds
    /// of milliseconds has been seen on the shared 2-CPU test machine), so
    /// that a merely descheduled worker is not called stalled; shorter than
    /// `wait_deadline`, so that later waits fail at once.
    pub stall_after: Duration,
    /// How an idle worker waits for work.
    pub idle_spin: SpinPolicy,
    /// How long the controller waits for a CPU (a step to finish, a
    /// barrier, a grace period, an invalidation) before it gives up with
    /// [`Unresponsive`] and rolls a reconfiguration back.
    pub wait_deadline: Duration,
    /// The duty-cycle throttle's period (see [`Duty`]).
    pub throttle_period: Duration,
    /// Run the workers under `SCHED_FIFO` at this priority (`None`: the
    /// normal scheduler). A duty cycle is a share of a real CPU in wall
    /// time; on a machine where other processes compete for the real CPUs,
    /// only a real-time worker gets the share its duty says (see
    /// `throttle.rs`). [`Runtime::new`] fails with the reason when this is
    /// not permitted.
    pub realtime_priority: Option<u8>,
}

impl RuntimeConfig {
    /// `n` runtime CPUs dealt round-robin over the real CPUs `real`.
    pub fn over(real: &CpuSet, n: usize) -> RuntimeConfig {
        let real: Vec<CpuId> = real.iter().collect();
        assert!(!real.is_empty(), "no real CPU given");
        RuntimeConfig {
            real_cpus: (0..n).map(|i| real[i % real.len()]).collect(),
            cache_blocks: 128,
            pool_blocks: None,
            cache_keep: None,
            watchdog_period: Duration::from_millis(50),
            stall_after: Duration::from_secs(1),
            idle_spin: SpinPolicy { spin_iters: 2_000, yield_iters: 4, umwait: false },
            // Far above any legitimate wait (a Bolt offline takes a few
            // microseconds, a naive one a few milliseconds, a step at most
            // tens of microseconds), short enough for a person to wait.
            wait_deadline: Duration::from_secs(2),
            throttle_period: Duration::from_millis(1),
            realtime_priority: None,
        }
    }
}

/// Consulted before each critical step; `true` makes the step fail (tests).
pub type FaultHook = Box<dyn Fn(&Step) -> bool + Send>;

/// The control plane: held for a whole reconfiguration (the hotplug lock).
pub(crate) struct Control {
    /// What the planner reads. Its proxy table is the runtime's (mailbox
    /// handlers and per-CPU `charges` are published from it); its CPU views
    /// are refreshed from the runtime before each plan (`exec.rs`).
    pub(crate) state: ReconfigState,
    pub(crate) fault: Option<FaultHook>,
    /// Time each critical step (see [`Runtime::set_step_timing`]).
    pub(crate) step_timing: bool,
}

pub(crate) struct RegistryEntry {
    name: String,
    real_cpu: CpuId,
}

pub(crate) struct Shared {
    pub(crate) cpus: Vec<PerCpu>,
    pub(crate) cfg: RuntimeConfig,
    pub(crate) pool: Pool,
    pub(crate) stw: Stw,
    pub(crate) inval_gen: AtomicU64,
    pub(crate) shutdown: AtomicBool,
    pub(crate) active: Mutex<CpuSet>,
    pub(crate) folded: Mutex<CpuCounters>,
    registry: Mutex<BTreeMap<CpuId, RegistryEntry>>,
    pub(crate) ctl: Mutex<Control>,
    spawn_rr: AtomicUsize,
    /// The runtime's clock starts here ([`Runtime::now_ns`]).
    pub(crate) epoch: Instant,
    pub(crate) events: events::Events,
    /// When each CPU really stopped and started again (bounded).
    pub(crate) changes: Mutex<ChangeLog>,
}

/// Most CPU changes a runtime keeps ([`Runtime::cpu_changes`]); later ones
/// are counted, not kept.
pub const CHANGE_CAP: usize = 1 << 16;

/// The runtime's record of when each CPU really went offline and came back.
#[derive(Debug, Default)]
pub(crate) struct ChangeLog {
    pub(crate) changes: Vec<CpuChange>,
    pub(crate) lost: u64,
}

impl ChangeLog {
    pub(crate) fn push(&mut self, c: CpuChange) {
        if self.changes.len() < CHANGE_CAP {
            self.changes.push(c);
        } else {
            self.lost += 1;
        }
    }
}

/// A set of runtime CPUs. See the module docs.
pub struct Runtime {
    sh: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl Runtime {
    /// Starts one worker and one helper thread per runtime CPU; refuses
    /// with the reason when a real CPU is not usable.
    pub fn new(cfg: RuntimeConfig) -> io::Result<Runtime> {
        crate::testing::assert_held_here("starting a runtime");
        let n = cfg.real_cpus.len();
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a runtime needs at least one CPU"));
        }
        if cfg.throttle_period.is_zero() || cfg.wait_deadline.is_zero() || cfg.watchdog_period.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the throttle period, the wait deadline and the watchdog period must be positive",
            ));
        }
        crate::affinity::check_allowed(cfg.real_cpus.iter().copied())
            .map_err(|e| io::Error::new(e.kind(), format!("cannot start the runtime: {e}")))?;
        let pool = Pool::new(cfg.pool_blocks.unwrap_or(n * cfg.cache_blocks * 4), cfg.cache_blocks);
        let cpus: Vec<PerCpu> = (0..n).map(|i| PerCpu::new(i, cfg.real_cpus[i], pool.new_cache())).collect();
        let registry = (0..n).map(|i| (i, RegistryEntry::new(i, cfg.real_cpus[i]))).collect();
        let sh = Arc::new(Shared {
            cpus,
            cfg,
            pool,
            stw: Stw::default(),
            inval_gen: AtomicU64::new(0),
            shutdown: AtomicBool::new(false),
            active: Mutex::new(CpuSet::range(0, n)),
            folded: Mutex::new(CpuCounters::default()),
            registry: Mutex::new(registry),
            ctl: Mutex::new(Control { state: ReconfigState::all_online(n), fault: None, step_timing: true }),
            spawn_rr: AtomicUsize::new(0),
            epoch: Instant::now(),
            events: events::Events::default(),
            changes: Mutex::new(ChangeLog::default()),
        });
        let mut rt = Runtime { sh: sh.clone(), workers: Vec::with_capacity(n) };
        let (tx, rx) = std::sync::mpsc::channel();
        for i in 0..n {
            let (sh, tx) = (sh.clone(), tx.clone());
            let real = sh.cpus[i].real;
            let rt_priority = sh.cfg.realtime_priority;
            let t = std::thread::Builder::new().name(format!("dyncore-cpu{i}")).spawn(move || {
                let pinned = crate::affinity::pin_current_thread(real).and_then(|()| {
                    rt_priority.map_or(Ok(()), |p| {
                        crate::affinity::set_current_thread_realtime(p).map_err(|e| {
                            io::Error::new(
                                e.kind(),
                                format!("cannot start the worker of runtime CPU {i}: {e}"),
                            )
                        })
                    })
                });
                let ok = pinned.is_ok();
                // The receiver outlives every worker's first message.
                let _ = tx.send(pinned);
                if ok {
                    worker::worker_main(sh, i);
                }
            })?;
            rt.workers.push(t);
        }
        for _ in 0..n {
            rx.recv().map_err(|_| io::Error::other("a worker thread died while starting"))??;
        }
        for i in 0..n {
            sh.start_helper(i)?;
        }
        Ok(rt)
    }

    /// Number of runtime CPUs (all owned CPUs, online or not).
    pub fn cpus(&self) -> usize {
        self.sh.cpus.len()
    }

    /// The real CPU each runtime CPU runs on.
    pub fn mapping(&self) -> Vec<CpuId> {
        self.sh.cpus.iter().map(|c| c.real).collect()
    }

    /// The active mask: the online CPUs.
    pub fn online_cpus(&self) -> CpuSet {
        lock(&self.sh.active).clone()
    }

    fn owned(&self, cpu: CpuId) -> Result<&PerCpu, PlaceError> {
        self.sh.cpus.get(cpu).ok_or(PlaceError::NotOwned { cpu, owned: self.sh.cpus.len() })
    }

    /// Queues `task` on an online CPU (round-robin); returns which.
    pub fn spawn(&self, task: impl Task) -> CpuId {
        let mut task: Box<dyn Task> = Box::new(task);
        let n = self.sh.cpus.len();
        loop {
            let start = self.sh.spawn_rr.fetch_add(1, Ordering::Relaxed);
            for k in 0..n {
                let cpu = (start + k) % n;
                match self.sh.push_task(cpu, task) {
                    Ok(()) => return cpu,
                    Err(t) => task = t,
                }
            }
            // Every queue closed for an instant (a rollback reopening
            // one); invariant 1 says one opens again.
            std::thread::yield_now();
        }
    }

    /// Queues `task` on `cpu`, which must be online.
    pub fn spawn_on(&self, cpu: CpuId, task: impl Task) -> Result<(), PlaceError> {
        self.owned(cpu)?;
        self.sh.push_task(cpu, Box::new(task)).map_err(|_| PlaceError::Offline { cpu })
    }

    /// Runs `f` on `cpu` with its per-CPU state — or, if it is offline, on
    /// its proxy with the same state. `f` may run more than once (make it
    /// idempotent); it is never lost.
    pub fn call_on(
        &self,
        cpu: CpuId,
        f: impl Fn(&mut CallCx<'_>) + Send + Sync + 'static,
    ) -> Result<(), PlaceError> {
        self.owned(cpu)?;
        self.sh.post(cpu, Msg::Call(Box::new(f)));
        Ok(())
    }

    /// Asks `cpu` to look at its run queue again (handled by the proxy, as a
    /// no-op, while offline).
    pub fn reschedule(&self, cpu: CpuId) -> Result<(), PlaceError> {
        self.owned(cpu)?;
        self.sh.post(cpu, Msg::Reschedule);
        Ok(())
    }

    /// Waits until every online CPU has passed a quiescent point (was seen
    /// between task steps); offline CPUs are reported quiescent by their
    /// proxies. Fails, naming the CPU, if one does not within
    /// [`RuntimeConfig::wait_deadline`] or is stalled. Must not be called
    /// from a task.
    pub fn synchronize(&self) -> Result<SyncReport, Unresponsive> {
        worker::assert_not_on_worker("synchronize");
        self.sh.synchronize()
    }

    /// Makes every online CPU apply a new invalidation generation before
    /// returning. Offline CPUs are skipped and apply it when they return.
    /// Fails, naming the CPU, if one does not apply it within
    /// [`RuntimeConfig::wait_deadline`] or is stalled. Must not be called
    /// from a task.
    pub fn broadcast_invalidate(&self) -> Result<InvalidateReport, Unresponsive> {
        worker::assert_not_on_worker("broadcast_invalidate");
        self.sh.broadcast_invalidate()
    }

    /// A shootdown aimed at `cpus`, whatever their state (a TLB shootdown
    /// to the CPUs in an address space's mask): each applies a new
    /// generation before the call returns — an offline one through its
    /// proxy, which applies it on its behalf and leaves it to flush when it
    /// returns. Fails like [`Runtime::broadcast_invalidate`].
    pub fn invalidate(&self, cpus: &CpuSet) -> Result<InvalidateReport, InvalidateError> {
        worker::assert_not_on_worker("invalidate");
        if let Some(cpu) = cpus.iter().find(|&c| c >= self.sh.cpus.len()) {
            return Err(InvalidateError::NotOwned(PlaceError::NotOwned { cpu, owned: self.sh.cpus.len() }));
        }
        self.sh.invalidate(cpus).map_err(InvalidateError::Unresponsive)
    }

    /// The newest invalidation generation `cpu` has applied.
    pub fn invalidation_seen(&self, cpu: CpuId) -> Result<u64, PlaceError> {
        Ok(self.owned(cpu)?.inval_seen.load(Ordering::SeqCst))
    }

    /// The newest invalidation generation broadcast.
    pub fn invalidation_generation(&self) -> u64 {
        self.sh.inval_gen.load(Ordering::SeqCst)
    }

    /// Takes `cpus` offline. Already-offline CPUs are a reported no-op
    /// ([`ReconfigReport::already`]). Must not be called from a task.
    pub fn offline(&self, cpus: &CpuSet, mode: Mode) -> Result<ReconfigReport, ReconfigError> {
        worker::assert_not_on_worker("offline");
        self.sh.reconfigure(dyncore_core::reconfig::Direction::Offline, mode, cpus)
    }

    /// Brings `cpus` online. Already-online CPUs are a reported no-op.
    pub fn online(&self, cpus: &CpuSet, mode: Mode) -> Result<ReconfigReport, ReconfigError> {
        worker::assert_not_on_worker("online");
        self.sh.reconfigure(dyncore_core::reconfig::Direction::Online, mode, cpus)
    }

    /// Memory pressure: frees the caches that offline CPUs kept (Bolt's
    /// deferred `FreeCache`). Returns how many were freed.
    pub fn reclaim_memory(&self) -> usize {
        (0..self.sh.cpus.len()).filter(|&c| self.sh.reclaim_cache_if_offline(c, true)).count()
    }

    /// Whether reconfigurations time each critical step into
    /// [`ReconfigReport::step_ns`] (on by default). Reading the clock around
    /// every step costs tens of nanoseconds on some machines (more under a
    /// hypervisor), which is a large share of a Bolt offline; a benchmark of
    /// whole-call latency turns it off (the steps are still listed, with 0).
    pub fn set_step_timing(&self, on: bool) {
        lock(&self.sh.ctl).step_timing = on;
    }

    /// Installs (or with `None` removes) the fault-injection hook.
    pub fn set_fault_hook(&self, hook: Option<FaultHook>) {
        lock(&self.sh.ctl).fault = hook;
    }

    /// Nanoseconds since the runtime started, on the monotonic clock that
    /// every event, report and sample of this runtime uses.
    pub fn now_ns(&self) -> u64 {
        self.sh.now_ns()
    }

    /// The instant [`Runtime::now_ns`] counts from.
    pub fn clock_start(&self) -> Instant {
        self.sh.epoch
    }

    /// Sets `cpu`'s duty cycle (see [`Duty`]). Cheap (one store, and a wake
    /// of a throttled worker) and immediate: the worker's next step obeys
    /// it. Allowed in any state; an offline CPU keeps it for its return.
    pub fn set_duty(&self, cpu: CpuId, duty: Duty) -> Result<(), PlaceError> {
        let c = self.owned(cpu)?;
        c.throttle.set_duty(duty);
        c.waiter.notify();
        Ok(())
    }

    /// `cpu`'s duty cycle.
    pub fn duty(&self, cpu: CpuId) -> Result<Duty, PlaceError> {
        Ok(self.owned(cpu)?.throttle.duty())
    }

    /// Tasks queued on `cpu` (not counting one being stepped).
    pub fn queued(&self, cpu: CpuId) -> Result<usize, PlaceError> {
        Ok(self.owned(cpu)?.runq_len.load(Ordering::Acquire))
    }

    /// [`RuntimeConfig::wait_deadline`].
    pub fn wait_deadline(&self) -> Duration {
        self.sh.cfg.wait_deadline
    }

    /// How well each CPU kept its duty cycle so far (see [`DutyReport`]).
    pub fn duty_report(&self) -> Vec<DutyReport> {
        let period = self.sh.throttle_period_ns();
        self.sh.cpus.iter().map(|c| c.throttle.report(c.id, period)).collect()
    }

    /// Every CPU's busy time (time in task steps) so far, with the time of
    /// the sample: the difference of two samples over the time between
    /// them is each CPU's load.
    pub fn busy_sample(&self) -> BusySample {
        let busy_ns = self.sh.cpus.iter().map(|c| c.throttle.busy_ns.load(Ordering::Relaxed)).collect();
        BusySample { at_ns: self.sh.now_ns(), busy_ns }
    }

    /// When each CPU really stopped running anything (`online: false`: its
    /// worker was seen stopped by `AwaitStopped`, so no step runs on it
    /// from then on) and when it really started again (`online: true`:
    /// `StartDispatch` is about to let it), on the runtime's clock, from
    /// the start — rollbacks included; and how many the bounded record
    /// ([`CHANGE_CAP`]) dropped. The execution checker
    /// (`dyncore_core::policy::execution`) holds it against the actions.
    pub fn cpu_changes(&self) -> (Vec<CpuChange>, u64) {
        let log = lock(&self.sh.changes);
        (log.changes.clone(), log.lost)
    }

    /// Every task and call that panicked so far (see [`TaskFailure`]).
    pub fn failures(&self) -> Vec<TaskFailure> {
        self.sh.events.failures()
    }

    /// Events from now on: failures, stalls and recoveries.
    pub fn subscribe(&self) -> Receiver<RuntimeEvent> {
        self.sh.events.subscribe()
    }

    /// The registry: one entry per CPU that has one (naive offline removes
    /// it; Bolt keeps it, reading offline).
    pub fn registry(&self) -> Vec<CpuInfo> {
        let reg = lock(&self.sh.registry);
        reg.iter().map(|(&cpu, e)| self.sh.info(cpu, e)).collect()
    }

    /// One CPU's registry entry, if it has one.
    pub fn cpu_info(&self, cpu: CpuId) -> Option<CpuInfo> {
        let reg = lock(&self.sh.registry);
        reg.get(&cpu).map(|e| self.sh.info(cpu, e))
    }

    /// Statistics of the whole runtime: folded totals plus every CPU's
    /// unfolded counters (a CPU stalled inside a step holds its counters:
    /// they are left out until it recovers).
    pub fn stats(&self) -> CpuCounters {
        let mut s = *lock(&self.sh.folded);
        for c in &self.sh.cpus {
            if let Some(local) = self.sh.lock_local_unless_stalled(c) {
                s.add(&local.stats);
            }
        }
        s
    }

    /// Memory accounting (exact: every cache is locked while counting, so
    /// this waits for running steps).
    pub fn memory(&self) -> MemoryReport {
        let locals: Vec<_> = self.sh.cpus.iter().map(|c| lock(&c.local)).collect();
        self.sh.pool.report(locals.iter().filter_map(|l| l.cache.as_ref()))
    }

    /// Checks invariants 1-3 of the module docs.
    pub fn check(&self) -> Result<(), String> {
        let ctl = lock(&self.sh.ctl);
        self.sh.check(&ctl)
    }

    /// Every CPU's state in one text, without taking a lock that a stuck
    /// thread could hold (for watchdogs and failure reports).
    pub fn dump(&self) -> String {
        self.sh.dump()
    }
}

/// Every CPU's busy time at one moment (see [`Runtime::busy_sample`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusySample {
    /// Runtime clock.
    pub at_ns: u64,
    /// Per runtime CPU, total time in task steps.
    pub busy_ns: Vec<u64>,
}

impl Drop for Runtime {
    /// Stops every thread. A worker stuck in a step past
    /// [`RuntimeConfig::wait_deadline`] is left behind (detached, reported
    /// on stderr) rather than hanging the caller; it exits when its step
    /// returns.
    fn drop(&mut self) {
        let sh = &self.sh;
        sh.shutdown.store(true, Ordering::Release);
        sh.stw.waiter.notify();
        for c in &sh.cpus {
            c.waiter.notify();
            c.helper.waiter.notify();
        }
        let deadline = Instant::now() + sh.cfg.wait_deadline;
        for (cpu, w) in self.workers.drain(..).enumerate() {
            if crate::wait::spin_until(Some(deadline), || w.is_finished()).is_ok() {
                let _ = w.join();
            } else {
                eprintln!("dyncore runtime: the worker of CPU {cpu} is stuck in a step; leaving it behind");
            }
        }
        for c in &sh.cpus {
            if let Some(h) = lock(&c.helper.handle).take() {
                let _ = h.join();
            }
        }
    }
}

impl RegistryEntry {
    fn new(cpu: CpuId, real_cpu: CpuId) -> Self {
        RegistryEntry { name: format!("cpu{cpu}"), real_cpu }
    }
}

impl Shared {
    /// Queues a task on `cpu` if its queue is open; gives it back if not.
    fn push_task(&self, cpu: CpuId, task: Box<dyn Task>) -> Result<(), Box<dyn Task>> {
        let c = &self.cpus[cpu];
        {
            let mut q = lock(&c.runq);
            if !q.open {
                return Err(task);
            }
            q.tasks.push_back(task);
            c.runq_len.store(q.tasks.len(), Ordering::Release);
        }
        c.waiter.notify();
        Ok(())
    }

    /// Posts `m` to `cpu`'s mailbox and wakes its handler (it or its proxy).
    pub(crate) fn post(&self, cpu: CpuId, m: Msg) {
        let handler = self.cpus[cpu].mailbox.post(m);
        self.cpus[handler].waiter.notify();
    }

    pub(crate) fn now_ns(&self) -> u64 {
        dyncore_core::nanos(self.epoch.elapsed())
    }

    /// The instant `ns` on the runtime's clock.
    pub(crate) fn instant_at(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }

    pub(crate) fn throttle_period_ns(&self) -> u64 {
        dyncore_core::nanos(self.cfg.throttle_period)
    }

    pub(crate) fn fold_stats(&self, cpu: CpuId) {
        let s = std::mem::take(&mut lock(&self.cpus[cpu].local).stats);
        lock(&self.folded).add(&s);
    }

    /// Frees `cpu`'s cache if it is offline and has one. `wait` for the
    /// control lock, or give up if it is held (a helper thread must not
    /// wait: the holder may be joining it).
    pub(crate) fn reclaim_cache_if_offline(&self, cpu: CpuId, wait: bool) -> bool {
        let _ctl = if wait {
            lock(&self.ctl)
        } else {
            match self.ctl.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return false,
            }
        };
        self.cpus[cpu].state() == CpuLiveness::Offline && self.free_cache(cpu)
    }

    /// Returns `cpu`'s cache to the pool; false if it has none.
    ///
    /// The blocks go back to the pool while `cpu`'s local lock is held, so
    /// that [`Runtime::memory`], which holds every CPU's local lock, never
    /// sees a cache that has left its CPU and not yet reached the pool (a
    /// soak once caught that in-between: the free list 128 blocks longer
    /// than the blocks marked free). Lock order: local, then the pool's.
    pub(crate) fn free_cache(&self, cpu: CpuId) -> bool {
        let c = &self.cpus[cpu];
        let mut local = lock(&c.local);
        c.has_cache.store(false, Ordering::Release);
        local.cache.take().map(|cache| self.pool.free_cache(cache)).is_some()
    }
}

#[cfg(all(test, not(dyncore_loom)))]
mod tests;

#[cfg(all(test, not(dyncore_loom)))]
mod robust_tests;

#[cfg(all(test, not(dyncore_loom)))]
mod stress_tests;

#[cfg(all(test, not(dyncore_loom)))]
mod contention_tests;

#[cfg(all(test, dyncore_loom))]
mod loom_tests;
