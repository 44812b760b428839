//! A CPU's mailbox: where remote calls, reschedules and invalidations
//! addressed to it wait (the IPI analogue), and who is woken for them.
//!
//! The mailbox belongs to the *addressed* CPU and never moves; what changes
//! is its *handler*, the CPU that is woken to drain it: the CPU itself while
//! online, its proxy while offline. This is Chameleon's logical addressing
//! (§4.1) done in software: redirecting a CPU is one store under the
//! mailbox's lock, not a copy of its queue.
//!
//! Protocol:
//!
//! 1. Post: under the lock, push the message and read the handler; after
//!    unlocking, wake the handler. Push and read are one critical section,
//!    so a post is ordered entirely before or after a redirect.
//! 2. Redirect (install or remove a proxy): under the lock, set the new
//!    handler and report whether messages are pending; the caller wakes the
//!    new handler if so. A message posted before the redirect is thus either
//!    drained already or seen pending; one posted after wakes the new
//!    handler. None is stranded with a handler that stopped listening.
//! 3. Drain: anyone serving the mailbox takes everything queued. The CPU
//!    itself drains while online even when a proxy is also installed (the
//!    proxy is installed *before* the CPU stops, so for a moment both
//!    serve it); handlers are idempotent, and per-CPU state is locked while a
//!    handler runs, so it does not matter which of the two runs a message.
//!
//! Invariant: a message leaves the queue only by a drain, so every posted
//! message is handled by the CPU or its proxy (checked exhaustively by the
//! loom models in `loom_tests.rs`).

use std::collections::VecDeque;

use dyncore_core::CpuId;

use super::sync::model::{AtomicUsize, Mutex, lock};
use std::sync::atomic::Ordering;

struct Inner<M> {
    queue: VecDeque<M>,
    handler: CpuId,
}

pub(crate) struct Mailbox<M> {
    inner: Mutex<Inner<M>>,
    /// Queue length, published under the lock so that a waiter's readiness
    /// check needs no lock (Release on write, Acquire on read).
    pending: AtomicUsize,
}

impl<M> Mailbox<M> {
    /// A mailbox handled by its own CPU, `owner`.
    pub(crate) fn new(owner: CpuId) -> Self {
        Mailbox {
            inner: Mutex::new(Inner { queue: VecDeque::new(), handler: owner }),
            pending: AtomicUsize::new(0),
        }
    }

    /// Step 1: queues `m`; returns the CPU to wake.
    pub(crate) fn post(&self, m: M) -> CpuId {
        let mut g = lock(&self.inner);
        g.queue.push_back(m);
        self.pending.store(g.queue.len(), Ordering::Release);
        g.handler
    }

    /// Step 2: makes `to` the handler; returns whether messages are pending
    /// (the caller must then wake `to`).
    pub(crate) fn redirect(&self, to: CpuId) -> bool {
        let mut g = lock(&self.inner);
        g.handler = to;
        !g.queue.is_empty()
    }

    /// Step 3: takes every queued message.
    pub(crate) fn drain(&self) -> VecDeque<M> {
        if self.pending.load(Ordering::Acquire) == 0 {
            return VecDeque::new();
        }
        let mut g = lock(&self.inner);
        self.pending.store(0, Ordering::Release);
        std::mem::take(&mut g.queue)
    }

    pub(crate) fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire) > 0
    }

    pub(crate) fn handler(&self) -> CpuId {
        lock(&self.inner).handler
    }

    /// (handler, pending) without blocking, for dumps of a possibly stuck
    /// runtime.
    pub(crate) fn try_peek(&self) -> Option<(CpuId, usize)> {
        self.inner.try_lock().ok().map(|g| (g.handler, g.queue.len()))
    }
}
