//! Channels between components: a dyncore-ring SPSC ring wrapped so that a
//! message survives the crash of the component that was handling it.
//!
//! An [`Inbox`] hands out the next message with [`Inbox::peek`] and keeps it
//! until [`Inbox::commit`]. A component step is
//!
//! 1. peek the input message;
//! 2. run the component's logic on it (checksums, filter rules, frame
//!    checks: the code that may panic). The logic must be idempotent: a
//!    crash here means the next instance runs it again on the same message;
//! 3. emit the results (push to an [`Outbox`], free a buffer) and commit the
//!    input. This is framework code that does not panic: pushes cannot fail
//!    (below) and commit is a field store.
//!
//! So a crash anywhere in step 2 leaves the message in the inbox, with no
//! output emitted: the restarted component, attached to the same inbox,
//! handles it exactly once. A crash cannot happen in step 3.
//!
//! Pushes never fail because rings are sized: every message on a frame or
//! data channel owns a distinct pool buffer, so a channel never holds more
//! messages than its pool has buffers; control channels carry at most one
//! message per client (one call outstanding). Consumers release cells in
//! batches of at most [`BATCH`] per poll, so a ring needs `messages + BATCH`
//! cells ([`capacity_for`]). A push into a full ring is therefore a broken
//! invariant and panics with the channel's name.
//!
//! Each channel carries its consumer's *bell* (a dyncore-ring [`Waiter`]):
//! [`Outbox::publish`] makes the staged messages visible with one release
//! store and rings the bell, so a consumer that parked wakes; it counts the
//! rings that had to wake a sleeper (the wake-ups NewtOS pays for MWAIT or
//! kernel notifications).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use dyncore_ring::{Consumer, Probe, Producer, Waiter, ring};

use crate::pool::BufId;

/// Most messages a component takes from one inbox in one poll, and so the
/// most cells a consumer holds unreleased.
pub const BATCH: usize = 64;

/// Ring capacity for a channel that holds at most `messages` messages.
pub fn capacity_for(messages: usize) -> usize {
    (messages + BATCH).next_power_of_two()
}

/// A packet or a chunk of application data: a buffer and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    pub buf: BufId,
    pub len: u32,
}

/// A consumer's bell and the count of wake-ups it cost its producers.
///
/// A bell may *forward* to the bell of the runtime CPU that hosts its
/// component ([`Bell::forward_to`], set by [`crate::hosting`]): a ring then
/// also rings that CPU's bell, so a CPU hosting several components sleeps on
/// one bell and wakes for any of them. The forward target changes when the
/// component moves; a ring racing a move may wake the old CPU too (harmless:
/// the new CPU is rung by the move itself).
#[derive(Debug, Default)]
pub struct Bell {
    waiter: Waiter,
    wakeups: AtomicU64,
    /// When the last ring that woke a sleeper happened ([`clock_ns`]).
    rang_at_ns: AtomicU64,
    /// The hosting CPUs' bells, and the index of the one to forward to
    /// (`usize::MAX`: none).
    forward: OnceLock<Arc<[Arc<Bell>]>>,
    forward_to: AtomicUsize,
}

/// A process-wide monotonic clock for wake-up costs, ns since first use.
pub fn clock_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    crate::elapsed_ns(*EPOCH.get_or_init(Instant::now))
}

impl Bell {
    pub fn new() -> Arc<Bell> {
        Arc::new(Bell { forward_to: AtomicUsize::new(usize::MAX), ..Bell::default() })
    }

    /// Rings the bell; counts it when it woke a parked consumer.
    pub fn ring(&self) {
        if self.waiter.notify() {
            self.rang_at_ns.store(clock_ns(), Ordering::Relaxed);
            self.wakeups.fetch_add(1, Ordering::Relaxed);
        }
        // Pairs with the fence in `forward_to`: either this ring sees the
        // new target, or the host's re-check after setting it sees the
        // message published before this ring.
        if let Some(table) = self.forward.get() {
            fence(Ordering::SeqCst);
            let i = self.forward_to.load(Ordering::Relaxed);
            if let Some(b) = table.get(i) {
                b.ring();
            }
        }
    }

    /// Forwards rings to `table[i]` from now on (a bell forwards into one
    /// table in its life). The caller re-checks its component's work after
    /// this returns.
    pub fn forward_to(&self, table: &Arc<[Arc<Bell>]>, i: usize) {
        let t = self.forward.get_or_init(|| table.clone());
        assert!(Arc::ptr_eq(t, table), "a bell forwards into one host's CPUs only");
        self.forward_to.store(i, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// The waiter a consumer parks on.
    pub fn waiter(&self) -> &Waiter {
        &self.waiter
    }

    /// Rings that woke a parked consumer (a system call each).
    pub fn wakeups(&self) -> u64 {
        self.wakeups.load(Ordering::Relaxed)
    }

    /// When the last waking ring happened ([`clock_ns`]).
    pub fn rang_at_ns(&self) -> u64 {
        self.rang_at_ns.load(Ordering::Relaxed)
    }
}

/// Creates a channel named `name` that holds at most `messages` messages,
/// whose consumer parks on `bell`.
pub fn channel<T: Copy + Send>(
    name: &'static str,
    messages: usize,
    bell: Arc<Bell>,
) -> (Outbox<T>, Inbox<T>) {
    let cap = capacity_for(messages);
    let (tx, rx) = ring(cap);
    let probe = rx.probe();
    let tx_probe = rx.probe();
    (
        Outbox { name, tx, staged: false, bell, probe: tx_probe, messages },
        Inbox { name, rx, held: None, taken: 0, probe, messages },
    )
}

/// The sending end of a channel.
pub struct Outbox<T> {
    name: &'static str,
    tx: Producer<T>,
    staged: bool,
    bell: Arc<Bell>,
    probe: Probe<T>,
    messages: usize,
}

impl<T: Copy + Send> Outbox<T> {
    /// Stages `v`; it becomes visible at [`Outbox::publish`].
    ///
    /// Panics if the ring is full, which the sizing rule in the module docs
    /// makes impossible.
    pub fn push(&mut self, v: T) {
        if self.tx.push(v).is_err() {
            panic!("channel {}: full, but it is sized to hold every message that can exist", self.name);
        }
        self.staged = true;
    }

    /// Publishes staged messages (one release store) and rings the
    /// consumer's bell.
    pub fn publish(&mut self) {
        if self.staged {
            self.tx.publish();
            self.staged = false;
            self.bell.ring();
        }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// How full the channel is, 0 to 1 (published, not yet released by the
    /// consumer), against the most messages it can hold.
    pub fn fill(&self) -> f64 {
        fill(&self.probe, self.messages)
    }
}

fn fill<T>(probe: &Probe<T>, messages: usize) -> f64 {
    (probe.pending() as f64 / messages.max(1) as f64).min(1.0)
}

/// The receiving end of a channel; see the module docs for peek/commit.
pub struct Inbox<T> {
    name: &'static str,
    rx: Consumer<T>,
    /// The message being handled: taken from the ring, not yet committed.
    held: Option<T>,
    /// Messages taken from the ring since the last release.
    taken: usize,
    probe: Probe<T>,
    messages: usize,
}

impl<T: Copy + Send> Inbox<T> {
    /// The message to handle next, kept until [`Inbox::commit`]. `None`
    /// when the channel is empty or this poll's [`BATCH`] is used up.
    pub fn peek(&mut self) -> Option<T> {
        if self.held.is_none() {
            if self.taken == BATCH {
                return None;
            }
            self.held = self.rx.pop();
            self.taken += usize::from(self.held.is_some());
        }
        self.held
    }

    /// Marks the peeked message handled.
    pub fn commit(&mut self) {
        debug_assert!(self.held.is_some(), "channel {}: commit without a peeked message", self.name);
        self.held = None;
    }

    /// Hands consumed cells back to the producer (end of a poll).
    pub fn release(&mut self) {
        self.rx.release();
        self.taken = 0;
    }

    /// Whether a message waits (held or published), without taking it.
    pub fn has_work(&self) -> bool {
        self.held.is_some() || self.probe.pending() > 0
    }

    /// How full the channel is, 0 to 1, against the most messages it can
    /// hold (the placement policy's "how full are its channels").
    pub fn fill(&self) -> f64 {
        // `pending` counts cells not yet released, which includes a held
        // message (its cell is released at the end of the poll).
        fill(&self.probe, self.messages)
    }

    pub fn name(&self) -> &'static str {
        self.name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peeked_message_stays_until_committed() {
        let (mut tx, mut rx) = channel::<u32>("t", 4, Bell::new());
        tx.push(1);
        tx.push(2);
        assert_eq!(rx.peek(), None, "nothing is visible before publish");
        tx.publish();
        assert_eq!(rx.peek(), Some(1));
        assert_eq!(rx.peek(), Some(1), "peeking again gives the same message");
        rx.commit();
        assert_eq!(rx.peek(), Some(2));
        rx.commit();
        assert_eq!(rx.peek(), None);
        rx.release();
        assert!(!rx.has_work());
    }

    #[test]
    fn a_message_survives_a_panic_between_peek_and_commit() {
        let (mut tx, mut rx) = channel::<u32>("t", 4, Bell::new());
        tx.push(7);
        tx.publish();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let m = rx.peek().unwrap();
            assert_eq!(m, 7);
            panic!("crash in the logic");
        }));
        assert!(r.is_err());
        assert_eq!(rx.peek(), Some(7), "the next instance gets the message again");
        rx.commit();
        assert_eq!(rx.peek(), None);
    }

    #[test]
    fn a_poll_takes_at_most_a_batch() {
        let n = BATCH + 10;
        let (mut tx, mut rx) = channel::<u32>("t", n, Bell::new());
        for i in 0..n as u32 {
            tx.push(i);
        }
        tx.publish();
        let mut got = 0;
        while rx.peek().is_some() {
            rx.commit();
            got += 1;
        }
        assert_eq!(got, BATCH);
        rx.release();
        while rx.peek().is_some() {
            rx.commit();
            got += 1;
        }
        assert_eq!(got, n);
    }

    #[test]
    fn fill_counts_published_and_held_messages() {
        let (mut tx, mut rx) = channel::<u32>("t", 4, Bell::new());
        assert_eq!(rx.fill(), 0.0);
        tx.push(1);
        tx.push(2);
        assert_eq!(tx.fill(), 0.0, "staged messages are not in the channel yet");
        tx.publish();
        assert_eq!(rx.fill(), 0.5);
        assert_eq!(tx.fill(), 0.5, "both ends see the same fill");
        rx.peek();
        assert_eq!(rx.fill(), 0.5, "a held message still counts");
        rx.commit();
        assert_eq!(rx.fill(), 0.5, "a cell counts until it is released");
        rx.release();
        assert_eq!(rx.fill(), 0.25);
    }

    #[test]
    #[should_panic(expected = "channel over: full")]
    fn overfilling_a_channel_is_a_broken_invariant() {
        let (mut tx, _rx) = channel::<u32>("over", 1, Bell::new());
        for i in 0..=capacity_for(1) as u32 {
            tx.push(i);
        }
    }
}
