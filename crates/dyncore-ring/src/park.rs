//! Parking a thread on a 32-bit word, futex style: [`Parker::park`] sleeps
//! only while the word still holds `expected` (checked atomically with going
//! to sleep), and [`Parker::unpark_all`] wakes every thread parked on it.
//! Spurious returns are allowed; callers loop.
//!
//! On Linux this is the futex system call (rustix). Under loom, where system
//! calls cannot run, the same contract is modelled with a loom `Mutex` and
//! `Condvar` (the check-then-sleep is atomic because both sides hold the
//! mutex), so the wake handshake built on top is still model-checked.

use std::time::Duration;

use crate::sync::AtomicU32;

#[cfg(not(dyncore_loom))]
#[derive(Debug, Default)]
pub(crate) struct Parker;

#[cfg(not(dyncore_loom))]
impl Parker {
    /// Sleeps while `word == expected`, for at most `timeout`.
    pub(crate) fn park(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        use rustix::thread::futex;
        let ts = timeout.map(|d| futex::Timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as i64,
            tv_nsec: d.subsec_nanos().into(),
        });
        // EAGAIN (word changed), ETIMEDOUT and EINTR are all "return and
        // re-check": the caller loops on its own condition.
        let _ = futex::wait(word, futex::Flags::PRIVATE, expected, ts.as_ref());
    }

    /// Wakes every thread parked on `word`.
    pub(crate) fn unpark_all(&self, word: &AtomicU32) {
        use rustix::thread::futex;
        // i32::MAX is the kernel's "all waiters".
        let _ = futex::wake(word, futex::Flags::PRIVATE, i32::MAX as u32);
    }
}

#[cfg(dyncore_loom)]
#[derive(Debug, Default)]
pub(crate) struct Parker {
    lock: loom::sync::Mutex<()>,
    cond: loom::sync::Condvar,
}

#[cfg(dyncore_loom)]
impl Parker {
    /// Loom model of `FUTEX_WAIT`. A timed park returns at once (as if the
    /// timeout had expired), which is a legal futex outcome; loom models do
    /// not use deadlines.
    pub(crate) fn park(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        use crate::sync::Ordering;
        if timeout.is_some() {
            return;
        }
        let guard = self.lock.lock().unwrap();
        if word.load(Ordering::SeqCst) != expected {
            return;
        }
        drop(self.cond.wait(guard).unwrap());
    }

    /// Loom model of `FUTEX_WAKE` (all).
    pub(crate) fn unpark_all(&self, _word: &AtomicU32) {
        let _guard = self.lock.lock().unwrap();
        self.cond.notify_all();
    }
}
