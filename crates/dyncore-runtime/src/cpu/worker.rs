//! The two threads of a runtime CPU: the worker (runs tasks and handles
//! messages, its own and, as a proxy, those of offline CPUs) and the helper
//! (a watchdog that also runs Bolt's lazily deferred steps).
//!
//! Worker loop, one iteration:
//!
//! 1. Stop-the-world requested and this CPU online: arrive at the barrier,
//!    wait for release.
//! 2. Not online: park until the CPU is started again. Nothing runs here
//!    while offline; the proxy serves the mailbox.
//! 3. Dispatch section: set `running`, then re-check the state (SeqCst both:
//!    the controller's `StopDispatch` store and `AwaitStopped` load of
//!    `running` form a Dekker handshake with these, so a step never starts
//!    after the controller saw the worker stopped). Outside this section
//!    the CPU is quiescent (grace periods need only see `running` clear
//!    once, or `qs` move). On the first section after returning, apply the
//!    newest invalidation (offline CPUs skip broadcasts). Then drain the own mailbox and those of proxied CPUs,
//!    run one step of one task, count a quiescent point, clear `running`.
//! 4. Nothing done: park (spin, then futex) until something is ready.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use dyncore_core::CpuId;
use dyncore_ring::SpinPolicy;

use super::Shared;
use super::percpu::Msg;
use super::sync::lock;
use super::task::{CallCx, Ctx, TaskPoll};

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
    fn stopping(&self, seen: u64) -> Option<u64> {
        let g = self.generation.load(Ordering::SeqCst);
        (g % 2 == 1 && g != seen).then_some(g)
    }
}

pub(crate) fn worker_main(sh: Arc<Shared>, me: CpuId) {
    WORKER_OF.with(|w| w.set(Some(me)));
    let c = &sh.cpus[me];
    let mut stw_seen = 0u64;
    loop {
        if sh.shutdown.load(Ordering::Acquire) {
            break;
        }
        // Only this thread writes it: no read-modify-write needed.
        c.heartbeat.store(c.heartbeat.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        // 1. Barrier.
        if let Some(g) = sh.stw.stopping(stw_seen)
            && c.online()
        {
            stw_seen = g;
            sh.stw.arrived.fetch_add(1, Ordering::SeqCst);
            sh.stw.waiter.wait_until(&sh.cfg.idle_spin, None, || {
                (sh.stw.generation.load(Ordering::SeqCst) != g || sh.shutdown.load(Ordering::Acquire))
                    .then_some(())
            });
            continue;
        }
        // 2. Offline.
        if !c.online() {
            c.waiter.wait_until(&SpinPolicy::PARK, None, || {
                (c.online() || sh.shutdown.load(Ordering::Acquire)).then_some(())
            });
            continue;
        }
        // 3. Dispatch section.
        c.running.store(true, Ordering::SeqCst);
        if !c.online() || sh.stw.stopping(stw_seen).is_some() {
            c.running.store(false, Ordering::SeqCst);
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
        busy |= run_one_step(&sh, me);
        c.qs.fetch_add(1, Ordering::SeqCst);
        c.running.store(false, Ordering::SeqCst);
        // 4. Idle.
        if !busy {
            c.waiter.wait_until(&sh.cfg.idle_spin, None, || ready(&sh, me, stw_seen).then_some(()));
        }
    }
}

/// Whether the worker of `me` has anything to do (its park condition).
fn ready(sh: &Shared, me: CpuId, stw_seen: u64) -> bool {
    let c = &sh.cpus[me];
    sh.shutdown.load(Ordering::Acquire)
        || !c.online()
        || sh.stw.stopping(stw_seen).is_some()
        || c.runq_len.load(Ordering::Acquire) > 0
        || c.mailbox.has_pending()
        || c.flush_on_return.load(Ordering::Acquire)
        || (c.has_charges.load(Ordering::Acquire)
            && lock(&c.charges).iter().any(|x| sh.cpus[x].mailbox.has_pending()))
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
            f(&mut CallCx { cpu: to, handled_on: on, stats: &local.stats });
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

/// Runs one step of the task at the head of the run queue.
fn run_one_step(sh: &Shared, me: CpuId) -> bool {
    let c = &sh.cpus[me];
    if c.runq_len.load(Ordering::Acquire) == 0 {
        return false;
    }
    let task = {
        let mut q = lock(&c.runq);
        let t = q.tasks.pop_front();
        c.runq_len.store(q.tasks.len(), Ordering::Release);
        t
    };
    let Some(mut task) = task else { return false };
    let poll = {
        let mut local = lock(&c.local);
        debug_assert!(local.cache.is_some(), "online CPU {me} has no cache");
        local.stats.steps += 1;
        let invalidation = c.inval_seen.load(Ordering::Acquire);
        let mut cx = Ctx { cpu: me, real_cpu: c.real, pool: &sh.pool, local: &mut local, invalidation };
        let p = task.step(&mut cx);
        if p == TaskPoll::Ready {
            local.stats.tasks_done += 1;
        }
        p
    };
    if poll == TaskPoll::Pending {
        let mut q = lock(&c.runq);
        // The queue closes only after `AwaitStopped` saw `running` clear,
        // and we are still inside the dispatch section.
        assert!(q.open, "run queue of CPU {me} closed during a step");
        q.tasks.push_back(task);
        c.runq_len.store(q.tasks.len(), Ordering::Release);
    }
    true
}

/// The helper thread: every `watchdog_period` it checks that its worker
/// makes progress when it has work; it also runs Bolt's lazily deferred
/// steps (fold statistics, park) and, while parked, frees the kept cache
/// once `cache_keep` has passed.
pub(crate) fn helper_main(sh: Arc<Shared>, me: CpuId) {
    let c = &sh.cpus[me];
    let h = &c.helper;
    let period = sh.cfg.watchdog_period;
    let mut last_beat = c.heartbeat.load(Ordering::Relaxed);
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
        // Watchdog: work pending, and no loop iteration for a whole period.
        let beat = c.heartbeat.load(Ordering::Relaxed);
        let has_work = c.running.load(Ordering::Acquire) || c.runq_len.load(Ordering::Acquire) > 0;
        if c.online() && has_work && beat == last_beat {
            h.stalls.fetch_add(1, Ordering::Relaxed);
        }
        last_beat = beat;
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
