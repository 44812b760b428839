//! The handshake between a runtime CPU's worker and the controller: may a
//! task step start, and has every step that started finished?
//!
//! Two words: the CPU's liveness (written by the controller) and `running`
//! (written by the worker around each dispatch section), plus a count of
//! quiescent points for grace periods.
//!
//! Protocol (Dekker's, with `SeqCst` fences between each side's store and
//! load — the C11 pattern that loom checks exactly; loom treats `SeqCst`
//! *accesses* as acquire/release, fences as the real thing):
//!
//! * Worker, [`Gate::enter`]: store `running = true`; fence; load the
//!   liveness. Not online: store `running = false` and run nothing.
//! * Worker, [`Gate::leave`]: count a quiescent point, then store
//!   `running = false` (release: a controller that sees it sees the step's
//!   writes).
//! * Controller, [`Gate::stop`]: store the liveness `Stopping`; fence. Then
//!   [`Gate::stopped`] (acquire load of `running`) until it is false.
//!
//! Invariant: once the controller has seen [`Gate::stopped`] after
//! [`Gate::stop`], no dispatch section runs and none starts until the CPU is
//! started again. Proof: the fences are totally ordered. If the worker's
//! fence comes first, the controller's load sees `running = true` (or the
//! later `false` of `leave`) and waits; if the controller's comes first, the
//! worker's load sees `Stopping` and it does not enter. Checked by the loom
//! models in `loom_tests.rs`, which call these functions.
//!
//! Grace periods: [`Gate::snapshot`] (a fence, then the count) and
//! [`Gate::passed`] (`running` clear, or the count moved) tell whether every
//! dispatch section that could have seen data from before the snapshot has
//! ended.

use std::sync::atomic::Ordering;

use crossbeam_utils::CachePadded;

use super::percpu::CpuLiveness;
use super::sync::model::{AtomicBool, AtomicU8, AtomicU64, fence};

pub(crate) struct Gate {
    liveness: CachePadded<AtomicU8>,
    running: CachePadded<AtomicBool>,
    /// Quiescent points passed (one per dispatch section).
    qs: AtomicU64,
}

impl Gate {
    /// An online CPU outside any dispatch section.
    pub(crate) fn new() -> Gate {
        Gate {
            liveness: CachePadded::new(AtomicU8::new(CpuLiveness::Online as u8)),
            running: CachePadded::new(AtomicBool::new(false)),
            qs: AtomicU64::new(0),
        }
    }

    pub(crate) fn liveness(&self) -> CpuLiveness {
        CpuLiveness::from_u8(self.liveness.load(Ordering::Acquire))
    }

    pub(crate) fn online(&self) -> bool {
        self.liveness() == CpuLiveness::Online
    }

    /// Publishes a liveness other than `Stopping` (use [`Gate::stop`] for
    /// that: it needs the fence). Release: a worker that sees `Online` sees
    /// what the controller set up before (the reopened queue, the flag to
    /// apply invalidations).
    pub(crate) fn set_liveness(&self, s: CpuLiveness) {
        debug_assert_ne!(s, CpuLiveness::Stopping, "use Gate::stop");
        self.liveness.store(s as u8, Ordering::Release);
    }

    /// Worker: enters a dispatch section if the CPU is online; `false`
    /// (and not entered) otherwise.
    pub(crate) fn enter(&self) -> bool {
        self.running.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if self.online() {
            return true;
        }
        self.running.store(false, Ordering::Release);
        false
    }

    /// Worker: leaves the dispatch section, counting a quiescent point.
    pub(crate) fn leave(&self) {
        self.qs.fetch_add(1, Ordering::Release);
        self.running.store(false, Ordering::Release);
    }

    /// Controller: tells the CPU to stop dispatching. Wait for
    /// [`Gate::stopped`] before touching what a step could touch.
    pub(crate) fn stop(&self) {
        self.liveness.store(CpuLiveness::Stopping as u8, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Controller, after [`Gate::stop`]: no step runs and none will start.
    pub(crate) fn stopped(&self) -> bool {
        !self.running.load(Ordering::Acquire)
    }

    /// Inside a dispatch section now (for reports and the watchdog).
    pub(crate) fn running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }

    /// Grace period, start: the quiescent count after a full fence (so a
    /// section that starts later sees everything written before).
    pub(crate) fn snapshot(&self) -> u64 {
        fence(Ordering::SeqCst);
        self.qs.load(Ordering::Acquire)
    }

    /// Grace period: the CPU is outside a dispatch section, or has passed a
    /// quiescent point since `snapshot`.
    pub(crate) fn passed(&self, snapshot: u64) -> bool {
        !self.running.load(Ordering::Acquire) || self.qs.load(Ordering::Acquire) != snapshot
    }

    /// Quiescent points passed so far (for dumps).
    pub(crate) fn quiescent_count(&self) -> u64 {
        self.qs.load(Ordering::Relaxed)
    }
}
