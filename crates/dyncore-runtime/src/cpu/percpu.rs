//! The per-CPU area of a runtime CPU: what its worker thread owns, what
//! other CPUs may touch, and what a proxy uses on its behalf.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;

use dyncore_core::{CpuId, CpuSet};
use dyncore_ring::Waiter;

use super::cache::CpuCache;
use super::gate::Gate;
use super::mailbox::Mailbox;
use super::task::{CallCx, Task};
use super::throttle::ThrottleCounters;

/// Whether a runtime CPU is in service, as its registry entry shows it.
/// (Not `dyncore_core::sched::CpuState`, which says what a CPU of the
/// policy's model runs.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CpuLiveness {
    /// Running tasks and handling its own messages.
    Online = 0,
    /// Told to stop; its worker may still be finishing a step.
    Stopping = 1,
    /// Runs nothing; its proxy handles its messages.
    Offline = 2,
}

impl CpuLiveness {
    pub(crate) fn from_u8(v: u8) -> CpuLiveness {
        match v {
            0 => CpuLiveness::Online,
            1 => CpuLiveness::Stopping,
            _ => CpuLiveness::Offline,
        }
    }
}

impl std::fmt::Display for CpuLiveness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CpuLiveness::Online => "online",
            CpuLiveness::Stopping => "stopping",
            CpuLiveness::Offline => "offline",
        })
    }
}

/// A runtime CPU's event counters. Naive offline folds them into the
/// runtime's totals at once; Bolt lets the helper thread fold them later.
/// (Not the simulator's per-CPU time accounting, `dyncore_sim::CpuStats`.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuCounters {
    pub steps: u64,
    pub tasks_done: u64,
    /// Tasks whose step panicked (dropped; see [`super::Runtime::failures`]).
    pub tasks_failed: u64,
    /// Remote calls handled for this CPU (by it or by its proxy).
    pub calls: u64,
    pub calls_by_proxy: u64,
    /// Remote-call handlers that panicked.
    pub calls_failed: u64,
    pub reschedules: u64,
    pub invalidations: u64,
    pub invalidations_by_proxy: u64,
    pub allocs: u64,
    pub frees: u64,
}

impl CpuCounters {
    pub fn add(&mut self, o: &CpuCounters) {
        self.steps += o.steps;
        self.tasks_done += o.tasks_done;
        self.tasks_failed += o.tasks_failed;
        self.calls += o.calls;
        self.calls_by_proxy += o.calls_by_proxy;
        self.calls_failed += o.calls_failed;
        self.reschedules += o.reschedules;
        self.invalidations += o.invalidations;
        self.invalidations_by_proxy += o.invalidations_by_proxy;
        self.allocs += o.allocs;
        self.frees += o.frees;
    }
}

/// Per-CPU state used by tasks and by message handlers (the worker while
/// online, the proxy while offline), under one lock so the two never race.
#[derive(Debug, Default)]
pub(crate) struct Local {
    pub(crate) cache: Option<CpuCache>,
    pub(crate) stats: CpuCounters,
}

/// A remote-call handler. `Fn`, not `FnOnce`: handlers must be idempotent.
pub(crate) type CallFn = Box<dyn Fn(&mut CallCx<'_>) + Send + Sync>;

/// What travels through a mailbox (the IPIs of the runtime).
pub(crate) enum Msg {
    Call(CallFn),
    /// Look at the run queue again (a no-op for a proxy: it runs no tasks).
    Reschedule,
    /// Apply invalidation generation `g`.
    Invalidate(u64),
}

pub(crate) struct RunQueue {
    pub(crate) tasks: VecDeque<Box<dyn Task>>,
    /// False while the CPU is offline: nothing may be queued here.
    pub(crate) open: bool,
}

/// Control words of a CPU's helper thread (the watchdog).
#[derive(Default)]
pub(crate) struct Helper {
    pub(crate) stop: AtomicBool,
    /// Bolt's asynchronous park request.
    pub(crate) park: AtomicBool,
    /// The helper is parked (it saw the request).
    pub(crate) parked: AtomicBool,
    /// Fold statistics at the next tick (a deferred step).
    pub(crate) fold: AtomicBool,
    pub(crate) stalls: AtomicU64,
    /// When the stalled worker last moved (runtime clock); 0: not stalled.
    pub(crate) stalled_since_ns: AtomicU64,
    pub(crate) ticks: AtomicU64,
    pub(crate) parks: AtomicU64,
    pub(crate) waiter: Waiter,
    pub(crate) handle: Mutex<Option<JoinHandle<()>>>,
}

pub(crate) struct PerCpu {
    pub(crate) id: CpuId,
    pub(crate) real: CpuId,
    /// Liveness, `running` and quiescent points: the worker/controller
    /// handshake (`gate.rs`).
    pub(crate) gate: Gate,
    /// When the worker last went round its loop (runtime clock), for the
    /// watchdog and for reports of an unresponsive CPU.
    pub(crate) heartbeat_ns: AtomicU64,
    /// The worker thread unwound (a runtime defect; task panics are caught).
    pub(crate) worker_dead: AtomicBool,
    /// The stop-the-world generation this worker last arrived at.
    pub(crate) stw_arrived: AtomicU64,
    pub(crate) throttle: ThrottleCounters,
    /// Newest invalidation generation applied for this CPU.
    pub(crate) inval_seen: AtomicU64,
    /// A proxy applied an invalidation for this CPU: apply at return.
    pub(crate) flush_on_return: AtomicBool,
    pub(crate) runq: Mutex<RunQueue>,
    pub(crate) runq_len: AtomicUsize,
    pub(crate) mailbox: Mailbox<Msg>,
    /// CPUs this one proxies for: the control plane's
    /// `ProxyTable::proxying_for`, published for the worker, which cannot
    /// take the control lock (`exec.rs`, `publish_charges`).
    pub(crate) charges: Mutex<CpuSet>,
    /// `charges` is not empty (read without the lock on every dispatch).
    pub(crate) has_charges: AtomicBool,
    pub(crate) local: Mutex<Local>,
    /// `local.cache` is `Some`, readable without the lock (which a step
    /// holds, perhaps for ever); written under it.
    pub(crate) has_cache: AtomicBool,
    pub(crate) waiter: Waiter,
    pub(crate) helper: Helper,
}

impl PerCpu {
    pub(crate) fn new(id: CpuId, real: CpuId, cache: CpuCache) -> PerCpu {
        PerCpu {
            id,
            real,
            gate: Gate::new(),
            heartbeat_ns: AtomicU64::new(0),
            worker_dead: AtomicBool::new(false),
            stw_arrived: AtomicU64::new(0),
            throttle: ThrottleCounters::default(),
            inval_seen: AtomicU64::new(0),
            flush_on_return: AtomicBool::new(false),
            runq: Mutex::new(RunQueue { tasks: VecDeque::new(), open: true }),
            runq_len: AtomicUsize::new(0),
            mailbox: Mailbox::new(id),
            charges: Mutex::new(CpuSet::new()),
            has_charges: AtomicBool::new(false),
            local: Mutex::new(Local { cache: Some(cache), stats: CpuCounters::default() }),
            has_cache: AtomicBool::new(true),
            waiter: Waiter::new(),
            helper: Helper::default(),
        }
    }

    pub(crate) fn state(&self) -> CpuLiveness {
        self.gate.liveness()
    }

    pub(crate) fn online(&self) -> bool {
        self.gate.online()
    }

    /// Stalled now (the watchdog flagged it and the worker has not moved
    /// since), or dead: a controller must not wait for it.
    pub(crate) fn unresponsive(&self) -> bool {
        self.stalled_since_ns().is_some() || self.worker_dead.load(Ordering::Acquire)
    }

    /// When the worker last moved, if the watchdog flagged it stalled and
    /// it has not moved since (read live: a worker that moves is no longer
    /// stalled, whenever the watchdog next looks).
    pub(crate) fn stalled_since_ns(&self) -> Option<u64> {
        let since = self.helper.stalled_since_ns.load(Ordering::Acquire);
        (since != 0 && self.heartbeat_ns.load(Ordering::Relaxed) <= since).then_some(since)
    }
}
