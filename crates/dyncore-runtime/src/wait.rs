//! Waiting for another thread without a lock: spin briefly, then yield,
//! and give up at a deadline.
//!
//! The runtime's controller waits this way for workers (a step to finish,
//! a barrier, a grace period, an invalidation); it is public so that
//! benchmarks wait the same way.

use std::time::Instant;

/// How a waiter spins: `before_yield` polls with `spin_loop` before it
/// first yields the CPU, then `between_yields` polls between one yield and
/// the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spin {
    pub before_yield: u32,
    pub between_yields: u32,
}

impl Spin {
    /// The controller's waits: long enough to catch a partner that answers
    /// within a few hundred nanoseconds (a cross-core round trip), then a
    /// yield at every poll, so a partner that shares the real CPU is not
    /// starved.
    pub const CONTROLLER: Spin = Spin { before_yield: 128, between_yields: 0 };
}

/// The deadline of [`spin_until`] passed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlinePassed;

impl std::fmt::Display for DeadlinePassed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the deadline passed before the condition held")
    }
}

impl std::error::Error for DeadlinePassed {}

/// Spins, then yields, until `done()` returns true (`Ok`) or `deadline`
/// passes (`Err`; `None`: no deadline), the way [`Spin::CONTROLLER`] says.
pub fn spin_until(deadline: Option<Instant>, done: impl FnMut() -> bool) -> Result<(), DeadlinePassed> {
    spin_until_with(Spin::CONTROLLER, deadline, done)
}

/// [`spin_until`] with the spinning of `spin`. The clock is read only at a
/// yield, so a condition that comes true between yields costs no clock read
/// (latency benchmarks spin thousands of polls between yields for that).
#[inline]
pub fn spin_until_with(
    spin: Spin,
    deadline: Option<Instant>,
    mut done: impl FnMut() -> bool,
) -> Result<(), DeadlinePassed> {
    let mut polls = 0u32;
    let mut since_yield = 0u32;
    loop {
        if done() {
            return Ok(());
        }
        if polls < spin.before_yield {
            polls += 1;
            std::hint::spin_loop();
            continue;
        }
        if since_yield < spin.between_yields {
            since_yield += 1;
            std::hint::spin_loop();
            continue;
        }
        since_yield = 0;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(DeadlinePassed);
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    #[test]
    fn returns_when_the_condition_holds_or_the_deadline_passes() {
        let mut n = 0;
        assert_eq!(
            spin_until(None, || {
                n += 1;
                n == 1000
            }),
            Ok(())
        );
        assert_eq!(spin_until(Some(Instant::now()), || false), Err(DeadlinePassed));
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        let t = std::thread::spawn(move || f.store(true, Ordering::Release));
        let far = Instant::now() + Duration::from_secs(3600);
        assert_eq!(spin_until(Some(far), || flag.load(Ordering::Acquire)), Ok(()));
        t.join().unwrap();
    }
}
