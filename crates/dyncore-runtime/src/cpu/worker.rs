//! The two threads of a runtime CPU: the worker (runs tasks and handles
//! messages, its own and, as a proxy, those of offline CPUs) and the helper
//! (a watchdog that also runs Bolt's lazily deferred steps).
//!
//! Worker loop, one iteration:
//!
//! 0. Heartbeat: store the time (the watchdog and reports of an
//!    unresponsive CPU read it).
//! 1. Stop-the-world requested and this CPU online: arrive at the barrier,
//!    wait for release.
//! 2. Not online: park until the CPU is started again. Nothing runs here
//!    while offline; the proxy serves the mailbox.
//! 3. Dispatch section, entered through the gate (`gate.rs`: the Dekker
//!    handshake with the controller, so a step never starts after the
//!    controller saw the worker stopped). Outside this section the CPU is
//!    quiescent. On the first section after returning, apply the newest
//!    invalidation (offline CPUs skip broadcasts). Then drain the own
//!    mailbox and those of proxied CPUs; if a task is queued, ask the
//!    throttle (`throttle.rs`) and run one step of it — inside
//!    `catch_unwind`, so a panicking task is reported as failed and dropped
//!    and the CPU goes on — or note when the throttle allows the next one.
//!    Leave the section (a quiescent point).
//! 4. Throttled: sleep until the period allows a step, waking early for
//!    messages, a barrier, offline, a duty change or shutdown. Nothing done:
//!    park (spin, then futex) until something is ready.
//!
//! If the worker thread itself unwinds (a defect of the runtime, not of a
//! task), it marks itself dead and leaves the dispatch section, so that no
//! controller waits for it: waits on it fail at once, naming it, and
//! offline of it succeeds and moves its tasks to live CPUs.

use std::num::NonZeroU64;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use dyncore_core::CpuId;
use dyncore_ring::SpinPolicy;

use super::Shared;
use super::events::{FailedWork, RuntimeEvent, TaskFailure, panic_message};
use super::percpu::{CpuLiveness, Msg, PerCpu};
use super::sync::lock;
use super::task::{CallCx, Ctx, Task, TaskPoll};
use super::throttle::{Charge, SPIN_BELOW_NS, Throttle};

thread_local! {
    /// The runtime CPU this thread is the worker of, if any.
    pub(crate) static WORKER_OF: std::cell::Cell<Option<CpuId>> = const { std::cell::Cell::new(None) };
}

/// Panics if called from a worker thread: the calling operation waits for
/// every worker, so a worker calling it would wait for itself.
pub(crate) fn assert_not_on_worker(what: &str) {
    if let Some(c) = WORKER_OF.with(|w| w.get()) {
        panic!("{what} called from the worker of runtime CPU {c}: it would wait for itself");
    }
}

/// Stop-the-world barrier (naive mode's `stop_machine`). `gen` is odd while
/// the world is stopped.
#[derive(Default)]
pub(crate) struct Stw {
    pub(crate) generation: std::sync::atomic::AtomicU64,
    pub(crate) arrived: std::sync::atomic::AtomicUsize,
    pub(crate) waiter: dyncore_ring::Waiter,
}

impl Stw {
    /// The generation of a stop-the-world in force that a worker which last
    /// arrived at generation `seen` has not arrived at yet.
    pub(crate) fn stopping(&self, seen: u64) -> Option<u64> {
        let g = self.generation.load(Ordering::SeqCst);
        (g % 2 == 1 && g != seen).then_some(g)
    }
}

/// Marks the worker dead if its thread unwinds (see the module docs).
struct DeathWatch<'a>(&'a PerCpu);

impl Drop for DeathWatch<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.worker_dead.store(true, Ordering::Release);
            self.0.gate.leave();
        }
    }
}

/// Throttle sleeps last hundreds of microseconds; the default timer slack
/// (50 µs) would make each overshoot by up to that much.
const WORKER_TIMER_SLACK_NS: u64 = 1_000;

pub(crate) fn worker_main(sh: Arc<Shared>, me: CpuId) {
    WORKER_OF.with(|w| w.set(Some(me)));
    // Best effort: without it throttle sleeps are only less precise.
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(WORKER_TIMER_SLACK_NS));
    let c = &sh.cpus[me];
    let _death = DeathWatch(c);
    let mut stw_seen = 0u64;
    let mut throttle = Throttle::charging(Charge::ThreadCpu, sh.throttle_period_ns(), sh.now_ns());
    loop {
        if sh.shutdown.load(Ordering::Acquire) {
            break;
        }
        // 0. Only this thread writes it.
        c.heartbeat_ns.store(sh.now_ns(), Ordering::Relaxed);
        // 1. Barrier.
        if let Some(g) = sh.stw.stopping(stw_seen)
            && c.online()
        {
            throttle.pause(sh.now_ns(), &c.throttle);
            stw_seen = g;
            // Counted before it says which generation it arrived at: the
            // controller, which waits for the latter, then sees the count.
            sh.stw.arrived.fetch_add(1, Ordering::SeqCst);
            c.stw_arrived.store(g, Ordering::SeqCst);
            sh.stw.waiter.wait_until(&sh.cfg.idle_spin, None, || {
                (sh.stw.generation.load(Ordering::SeqCst) != g || sh.shutdown.load(Ordering::Acquire))
                    .then_some(())
            });
            continue;
        }
        // 2. Offline.
        if !c.online() {
            throttle.pause(sh.now_ns(), &c.throttle);
            c.waiter.wait_until(&SpinPolicy::PARK, None, || {
                (c.online() || sh.shutdown.load(Ordering::Acquire)).then_some(())
            });
            continue;
        }
        // 3. Dispatch section.
        if !c.gate.enter() {
            continue;
        }
        if sh.stw.stopping(stw_seen).is_some() {
            c.gate.leave();
            continue;
        }
        // A load first: the swap (a read-modify-write) only when set.
        if c.flush_on_return.load(Ordering::SeqCst) && c.flush_on_return.swap(false, Ordering::SeqCst) {
            // Back from offline (`StartDispatch` sets the flag before the
            // state), or a proxy took an invalidation for us: apply the
            // newest generation before anything else runs here.
            c.inval_seen.fetch_max(sh.inval_gen.load(Ordering::SeqCst), Ordering::SeqCst);
        }
        let mut busy = serve_mailboxes(&sh, me);
        let mut throttled_until = None;
        if c.runq_len.load(Ordering::Acquire) > 0 {
            let t0 = sh.now_ns();
            match throttle.admit(t0, c.throttle.duty(), &c.throttle) {
                None => busy |= run_one_step(&sh, me, &mut throttle, t0),
                Some(until) => throttled_until = Some(until),
            }
        }
        c.gate.leave();
        // 4. Idle.
        if let Some(until) = throttled_until {
            idle_throttled(&sh, me, stw_seen, until, &mut throttle);
        } else if !busy {
            throttle.pause(sh.now_ns(), &c.throttle);
            c.waiter.wait_until(&sh.cfg.idle_spin, None, || ready(&sh, me, stw_seen).then_some(()));
        }
    }
}

/// Step 4, throttled: idle until `until_ns` (runtime clock), or until
/// something other than a task needs the worker.
fn idle_throttled(sh: &Shared, me: CpuId, stw_seen: u64, until_ns: u64, throttle: &mut Throttle) {
    let c = &sh.cpus[me];
    let t0 = sh.now_ns();
    let duty = c.throttle.duty();
    let interrupt = || other_work(sh, me, stw_seen) || c.throttle.duty() != duty;
    let deadline = sh.instant_at(until_ns);
    if until_ns.saturating_sub(t0) >= SPIN_BELOW_NS {
        c.waiter.wait_until(&SpinPolicy::PARK, Some(deadline), || interrupt().then_some(()));
    } else {
        // Reaching the deadline is the normal end of this wait.
        let _ = crate::wait::spin_until(Some(deadline), interrupt);
    }
    let end = sh.now_ns();
    throttle.throttled(end.saturating_sub(t0), &c.throttle);
    throttle.woke_late(end.saturating_sub(until_ns), &c.throttle);
}

/// Whether the worker of `me` has anything to do but its run queue.
fn other_work(sh: &Shared, me: CpuId, stw_seen: u64) -> bool {
    let c = &sh.cpus[me];
    sh.shutdown.load(Ordering::Acquire)
        || !c.online()
        || sh.stw.stopping(stw_seen).is_some()
        || c.mailbox.has_pending()
        || c.flush_on_return.load(Ordering::Acquire)
        || (c.has_charges.load(Ordering::Acquire)
            && lock(&c.charges).iter().any(|x| sh.cpus[x].mailbox.has_pending()))
}

/// Whether the worker of `me` has anything to do (its park condition).
fn ready(sh: &Shared, me: CpuId, stw_seen: u64) -> bool {
    sh.cpus[me].runq_len.load(Ordering::Acquire) > 0 || other_work(sh, me, stw_seen)
}

/// Drains this CPU's mailbox and, as a proxy, those of the CPUs it proxies
/// for. Returns whether any message was handled.
fn serve_mailboxes(sh: &Shared, me: CpuId) -> bool {
    let c = &sh.cpus[me];
    let mut any = false;
    for m in c.mailbox.drain() {
        handle(sh, me, me, m);
        any = true;
    }
    if c.has_charges.load(Ordering::Acquire) {
        // Handlers run without the charges lock; collect only the mailboxes
        // with messages (usually none: no allocation).
        let pending: Vec<CpuId> =
            lock(&c.charges).iter().filter(|&x| sh.cpus[x].mailbox.has_pending()).collect();
        for x in pending {
            for m in sh.cpus[x].mailbox.drain() {
                handle(sh, x, me, m);
                any = true;
            }
        }
    }
    any
}

/// Runs message `m` addressed to CPU `to` on CPU `on` (a proxy if they
/// differ), with `to`'s per-CPU state.
fn handle(sh: &Shared, to: CpuId, on: CpuId, m: Msg) {
    let target = &sh.cpus[to];
    let by_proxy = to != on;
    match m {
        Msg::Call(f) => {
            let mut local = lock(&target.local);
            local.stats.calls += 1;
            if by_proxy {
                local.stats.calls_by_proxy += 1;
            }
            let r = catch_unwind(AssertUnwindSafe(|| {
                f(&mut CallCx { cpu: to, handled_on: on, stats: &local.stats })
            }));
            if let Err(payload) = r {
                local.stats.calls_failed += 1;
                drop(local);
                sh.events.emit(RuntimeEvent::Failed(TaskFailure {
                    at_ns: sh.now_ns(),
                    cpu: to,
                    work: FailedWork::Call { handled_on: on },
                    message: panic_message(&*payload),
                }));
            }
        }
        Msg::Reschedule => lock(&target.local).stats.reschedules += 1,
        Msg::Invalidate(g) => {
            // A proxy applies it on the offline CPU's behalf and leaves a
            // note so the CPU flushes when it returns (Chameleon drops
            // shootdowns for proxied CPUs and flushes on resume).
            target.inval_seen.fetch_max(g, Ordering::SeqCst);
            let mut local = lock(&target.local);
            if by_proxy {
                target.flush_on_return.store(true, Ordering::SeqCst);
                local.stats.invalidations_by_proxy += 1;
            } else {
                local.stats.invalidations += 1;
            }
        }
    }
}

/// Runs one step of the task at the head of the run queue, which the
/// throttle admitted at `t0` (runtime clock).
fn run_one_step(sh: &Shared, me: CpuId, throttle: &mut Throttle, t0: u64) -> bool {
    let c = &sh.cpus[me];
    let task = {
        let mut q = lock(&c.runq);
        let t = q.tasks.pop_front();
        c.runq_len.store(q.tasks.len(), Ordering::Release);
        t
    };
    let Some(mut task) = task else { return false };
    let outcome = {
        let mut local = lock(&c.local);
        debug_assert!(local.cache.is_some(), "online CPU {me} has no cache");
        local.stats.steps += 1;
        let invalidation = c.inval_seen.load(Ordering::Acquire);
        let mut cx = Ctx {
            cpu: me,
            real_cpu: c.real,
            pool: &sh.pool,
            local: &mut local,
            invalidation,
            epoch: sh.epoch,
            step_started_ns: t0,
        };
        let r = catch_unwind(AssertUnwindSafe(|| task.step(&mut cx)));
        match r {
            Ok(TaskPoll::Ready) => local.stats.tasks_done += 1,
            Err(_) => local.stats.tasks_failed += 1,
            Ok(TaskPoll::Pending) => {}
        }
        r
    };
    let end = sh.now_ns();
    throttle.charge(end.saturating_sub(t0), &c.throttle);
    if outcome.is_ok() {
        // Contained like the step: a task's defect never stops the CPU.
        let _ = catch_unwind(AssertUnwindSafe(|| task.stepped(end)));
    }
    match outcome {
        Ok(TaskPoll::Pending) => {
            let mut q = lock(&c.runq);
            // The queue closes only after `AwaitStopped` saw the gate
            // stopped, and we are still inside the dispatch section.
            assert!(q.open, "run queue of CPU {me} closed during a step");
            q.tasks.push_back(task);
            c.runq_len.store(q.tasks.len(), Ordering::Release);
        }
        Ok(TaskPoll::Ready) => drop_task(task),
        Err(payload) => {
            let name = catch_unwind(AssertUnwindSafe(|| task.name()))
                .unwrap_or_else(|_| "(a task whose name() panicked too)".to_string());
            sh.events.emit(RuntimeEvent::Failed(TaskFailure {
                at_ns: sh.now_ns(),
                cpu: me,
                work: FailedWork::Task { name },
                message: panic_message(&*payload),
            }));
            drop_task(task);
        }
    }
    true
}

/// Drops a finished or failed task; a panic in its `Drop` is contained too.
fn drop_task(task: Box<dyn Task>) {
    let _ = catch_unwind(AssertUnwindSafe(move || drop(task)));
}

/// The helper thread: every `watchdog_period` it checks that its worker
/// makes progress when it has work; it also runs Bolt's lazily deferred
/// steps (fold statistics, park) and, while parked, frees the kept cache
/// once `cache_keep` has passed.
pub(crate) fn helper_main(sh: Arc<Shared>, me: CpuId) {
    let c = &sh.cpus[me];
    let h = &c.helper;
    let period = sh.cfg.watchdog_period;
    let mut last_beat = c.heartbeat_ns.load(Ordering::Relaxed);
    while !h.stop.load(Ordering::Acquire) && !sh.shutdown.load(Ordering::Acquire) {
        h.ticks.fetch_add(1, Ordering::Relaxed);
        if h.fold.swap(false, Ordering::AcqRel) {
            sh.fold_stats(me);
        }
        if h.park.load(Ordering::Acquire) {
            park(&sh, me, period);
            continue;
        }
        h.waiter.wait_for(&SpinPolicy::PARK, period, || {
            (h.stop.load(Ordering::Acquire)
                || h.park.load(Ordering::Acquire)
                || sh.shutdown.load(Ordering::Acquire))
            .then_some(())
        });
        watch(&sh, me, last_beat);
        last_beat = c.heartbeat_ns.load(Ordering::Relaxed);
    }
}

/// The watchdog's check, once per period: work pending and no loop
/// iteration since the last check (`last_beat`) is a stall period, counted.
/// Once the worker has made no progress for `stall_after`, the CPU is
/// marked stalled (controller waits on it then fail at once) and
/// subscribers are told; the first check after the worker moves again
/// clears the mark and tells them it recovered.
fn watch(sh: &Shared, me: CpuId, last_beat: u64) {
    let c = &sh.cpus[me];
    let h = &c.helper;
    let beat = c.heartbeat_ns.load(Ordering::Relaxed);
    let g = sh.stw.generation.load(Ordering::SeqCst);
    // Waiting at a stop-the-world barrier is not a stall of this CPU.
    let at_barrier = g % 2 == 1 && c.stw_arrived.load(Ordering::SeqCst) == g;
    let has_work = c.gate.running() || c.runq_len.load(Ordering::Acquire) > 0;
    let now = sh.now_ns();
    let flagged = h.stalled_since_ns.load(Ordering::Acquire);
    if beat == last_beat && has_work && !at_barrier && c.state() != CpuLiveness::Offline {
        h.stalls.fetch_add(1, Ordering::Relaxed);
        let stuck_for = Duration::from_nanos(now.saturating_sub(beat));
        if flagged == 0 && stuck_for >= sh.cfg.stall_after {
            // 0 means "not stalled": a heartbeat at time 0 reads as 1 ns.
            h.stalled_since_ns.store(beat.max(1), Ordering::Release);
            sh.events.emit(RuntimeEvent::Stalled { at_ns: now, cpu: me, since_ns: beat });
        }
    } else if flagged != 0 && beat > flagged {
        h.stalled_since_ns.store(0, Ordering::Release);
        sh.events.emit(RuntimeEvent::Recovered { at_ns: now, cpu: me, stalled_ns: beat - flagged });
    }
}

/// Parked: wait until unparked or stopped; reclaim the cache after
/// `cache_keep` if the CPU is still offline.
fn park(sh: &Shared, me: CpuId, period: Duration) {
    let c = &sh.cpus[me];
    let h = &c.helper;
    h.parked.store(true, Ordering::Release);
    h.parks.fetch_add(1, Ordering::Relaxed);
    let since = Instant::now();
    let mut reclaimed = false;
    while h.park.load(Ordering::Acquire)
        && !h.stop.load(Ordering::Acquire)
        && !sh.shutdown.load(Ordering::Acquire)
    {
        h.waiter.wait_for(&SpinPolicy::PARK, period, || {
            (!h.park.load(Ordering::Acquire)
                || h.stop.load(Ordering::Acquire)
                || sh.shutdown.load(Ordering::Acquire))
            .then_some(())
        });
        if let Some(keep) = sh.cfg.cache_keep
            && !reclaimed
            && since.elapsed() >= keep
        {
            reclaimed = sh.reclaim_cache_if_offline(me, false);
        }
    }
    h.parked.store(false, Ordering::Release);
}
