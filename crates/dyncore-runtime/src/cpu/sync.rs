//! The `sync` shim for the runtime's lock-free protocols (as in
//! `dyncore-ring`, whose shim is private to that crate): [`model`] is
//! `std`'s mutex and atomics normally and loom's under `cfg(dyncore_loom)`,
//! so the code that routes messages to a CPU or its proxy (`mailbox.rs`)
//! and the worker/controller handshake (`gate.rs`) are both run and
//! model-checked. The rest of the runtime uses `std` directly, with
//! [`lock`].

use std::sync::{Mutex, MutexGuard};

/// Locks `m`, ignoring poisoning: a panicking task must not wedge the
/// runtime (every state a runtime mutex guards — queues, sets, counters —
/// is valid after any partial update).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// What the mailbox protocol is built from.
pub(crate) mod model {
    #[cfg(not(dyncore_loom))]
    pub(crate) use super::lock;
    #[cfg(not(dyncore_loom))]
    pub(crate) use std::sync::Mutex;
    #[cfg(not(dyncore_loom))]
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, fence};

    #[cfg(dyncore_loom)]
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, fence};
    #[cfg(dyncore_loom)]
    pub(crate) use loom::sync::{Mutex, MutexGuard};

    /// [`super::lock`] for loom's mutex.
    #[cfg(dyncore_loom)]
    pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        match m.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }
}
