//! A waiter that spins for a budget and then parks, with a wake handshake that
//! never loses a wake-up (an event count).
//!
//! The waiter's state is one 32-bit word: bit 0 is `PARKED` ("someone may be
//! asleep on this word"), bits 1.. are an epoch bumped by every notify.
//!
//! Protocol (the waiter waits for a condition `ready()` that the notifier
//! makes true *before* calling [`Waiter::notify`]):
//!
//! 1. Waiter spins: checks `ready()` up to `spin_iters` times (with
//!    `spin_loop`, or UMWAIT on the state word where the CPU has `waitpkg`),
//!    then up to `yield_iters` times with `yield_now`.
//! 2. Waiter announces: `key = state.fetch_or(PARKED) | PARKED`.
//! 3. Waiter re-checks `ready()`; if true it returns (leaving `PARKED` set:
//!    other threads may be parked under the same key).
//! 4. Waiter parks on the word while it still equals `key` (futex), then
//!    re-checks and goes back to 2.
//!
//! Notifier: (a) makes the condition true (a release store); (b)
//! `prev = state.fetch_add(EPOCH)`; (c) if `prev` had `PARKED`, clears it and
//! wakes all parked threads.
//!
//! Invariant (no lost wake-up): the RMWs of 2 and (b) are totally ordered on
//! the word. If (b) comes first, the waiter's step 2 reads from it, so it
//! synchronises with the notifier and the re-check in 3 sees the condition.
//! If 2 comes first, (b) sees `PARKED` and wakes; and the park in 4 only
//! sleeps while the word equals `key`, which (b) has already changed. No
//! `SeqCst` fence is needed, which is why loom can check it exactly.

use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::park::Parker;
use crate::sync::{AtomicU32, Ordering, spin_loop, yield_now};

const PARKED: u32 = 1;
const EPOCH: u32 = 2;

/// How long a waiter polls before it parks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpinPolicy {
    /// Polls with `spin_loop` (or UMWAIT) before yielding.
    pub spin_iters: u32,
    /// Polls with `yield_now` before parking on the futex.
    pub yield_iters: u32,
    /// Use UMWAIT (where `waitpkg` is present) instead of `spin_loop`.
    pub umwait: bool,
}

impl SpinPolicy {
    /// For a caller waiting on a reply that is usually a few hundred
    /// nanoseconds away: spin ~tens of microseconds, yield a little, park.
    pub const CLIENT: SpinPolicy = SpinPolicy { spin_iters: 20_000, yield_iters: 16, umwait: true };
    /// For a dedicated service core: poll for ~a millisecond before parking.
    pub const SERVER: SpinPolicy = SpinPolicy { spin_iters: 100_000, yield_iters: 0, umwait: true };
    /// Park at once (a thread that should not burn a CPU at all).
    pub const PARK: SpinPolicy = SpinPolicy { spin_iters: 0, yield_iters: 0, umwait: false };
}

impl Default for SpinPolicy {
    fn default() -> Self {
        SpinPolicy::CLIENT
    }
}

/// A spin-then-park waiter (see the module docs for the protocol). Any
/// number of threads may wait on one `Waiter`; a notify wakes them all.
#[derive(Debug, Default)]
pub struct Waiter {
    state: CachePadded<AtomicU32>,
    parker: Parker,
}

impl Waiter {
    pub fn new() -> Self {
        Waiter::default()
    }

    /// Waits until `ready` returns `Some`, spinning then parking; returns
    /// `None` if `deadline` passes first.
    ///
    /// `ready` must become `Some` only through state that the notifier
    /// publishes before calling [`Waiter::notify`].
    pub fn wait_until<T>(
        &self,
        policy: &SpinPolicy,
        deadline: Option<Instant>,
        mut ready: impl FnMut() -> Option<T>,
    ) -> Option<T> {
        // 1. Spin, then yield.
        let umwait = policy.umwait && crate::waitpkg::available();
        for _ in 0..policy.spin_iters {
            if let Some(v) = ready() {
                return Some(v);
            }
            if umwait {
                crate::waitpkg::wait_for_write(&self.state);
            } else {
                spin_loop();
            }
        }
        for _ in 0..policy.yield_iters {
            if let Some(v) = ready() {
                return Some(v);
            }
            yield_now();
        }
        loop {
            // 2. Announce.
            let key = self.state.fetch_or(PARKED, Ordering::AcqRel) | PARKED;
            // 3. Re-check.
            if let Some(v) = ready() {
                // PARKED stays set (another thread may be parked under the
                // same key); the next notify clears it at the cost of one
                // wake call. This only happens on the slow path.
                return Some(v);
            }
            // 4. Park while nothing has been notified since 2.
            let timeout = match deadline {
                None => None,
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return None;
                    }
                    Some(d - now)
                }
            };
            self.parker.park(&self.state, key, timeout);
            if let Some(v) = ready() {
                return Some(v);
            }
        }
    }

    /// Like [`Waiter::wait_until`] with a timeout instead of a deadline.
    pub fn wait_for<T>(
        &self,
        policy: &SpinPolicy,
        timeout: Duration,
        ready: impl FnMut() -> Option<T>,
    ) -> Option<T> {
        self.wait_until(policy, Instant::now().checked_add(timeout), ready)
    }

    /// Wakes the waiter if it is parked (call after making its condition
    /// true). Returns whether a wake system call was made.
    pub fn notify(&self) -> bool {
        // (b) Bump the epoch; the RMW orders this notify against step 2.
        let prev = self.state.fetch_add(EPOCH, Ordering::AcqRel);
        if prev & PARKED == 0 {
            return false;
        }
        // (c) Clear PARKED so later notifies stay cheap, then wake. A waiter
        // that re-announced in between sees the word changed and re-checks.
        self.state.fetch_and(!PARKED, Ordering::AcqRel);
        self.parker.unpark_all(&self.state);
        true
    }
}
