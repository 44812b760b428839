//! The `sync` shim for the mailbox protocol (as in `dyncore-ring`, whose shim
//! is private to that crate): `std`'s mutex and atomics normally, loom's
//! under `cfg(dyncore_loom)`, so the code that routes messages to a CPU or
//! its proxy is both run and model-checked.

#[cfg(not(dyncore_loom))]
pub(crate) use std::sync::atomic::AtomicUsize;
#[cfg(not(dyncore_loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

#[cfg(dyncore_loom)]
pub(crate) use loom::sync::atomic::AtomicUsize;
#[cfg(dyncore_loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

/// Locks `m`, ignoring poisoning: a panicking task must not wedge the
/// runtime (the state a mailbox guards is a queue and a CPU number, valid
/// after any partial update).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}
