//! Channels between components: a dyncore-ring SPSC ring that outlives the
//! components at its ends, and the ends they attach to it.
//!
//! A [`Channel`] is the ring's memory, its consumer's bell and its name.
//! It belongs to the stack, not to a component: a component *attaches* an
//! [`Inbox`] or an [`Outbox`] to it, and a component restarted in fresh
//! memory attaches new ones, which start at the channel's *committed*
//! positions (the ring's published head and released tail; whatever the
//! crashed instance had staged or taken is forgotten).
//!
//! An end commits in one of two ways ([`Log`]):
//!
//! * **through a journal** (components): pushes and takes are staged in the
//!   component's [`Journal`], and the component commits all of its ends at
//!   once at the end of a poll ([`dyncore_ring::journal`]'s protocol). A
//!   message's sequence number is its position in its ring; a restarted
//!   component resumes at the committed position, so a message is handled
//!   by exactly one committed poll;
//! * **directly** (applications, the wire's far end, tests):
//!   [`Outbox::publish`] and [`Inbox::release`] store the positions
//!   themselves.
//!
//! A component step is
//!
//! 1. peek the input message ([`Inbox::peek`]; it stays in the inbox);
//! 2. run the component's logic on it (checksums, filter rules, frame
//!    checks: the code that may panic). The logic must be idempotent: a
//!    crash means the next instance runs it again on the same message;
//! 3. stage the results (push to an [`Outbox`], free a buffer) and mark the
//!    input handled ([`Inbox::commit`]), all staged in the journal;
//!
//! and at the end of a poll, the journal commits the batch. A crash
//! anywhere before the journal's commit point leaves every message of the
//! batch in its inbox and none of its outputs visible; a crash after it is
//! finished by the journal's recovery. See docs/architecture.md, "Restart in
//! fresh memory", for the whole protocol, numbered.
//!
//! Pushes never fail because rings are sized: every message on a frame or
//! data channel owns a distinct pool buffer, so a channel never holds more
//! messages than its pool has buffers; control channels carry at most one
//! message per client (one call outstanding). Consumers take at most
//! [`BATCH`] messages per poll before committing, so a ring needs
//! `messages + BATCH` cells ([`capacity_for`]). A push into a full ring is
//! therefore a broken invariant and panics with the channel's name.
//!
//! Each channel carries its consumer's *bell* (a dyncore-ring [`Waiter`]):
//! publishing makes the staged messages visible with one release store and
//! rings the bell, so a consumer that parked wakes; it counts the rings
//! that had to wake a sleeper (the wake-ups NewtOS pays for MWAIT or kernel
//! notifications).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use dyncore_ring::journal::{HeadWord, Journal, TailWord, Word, WordRef};
use dyncore_ring::{Consumer, Probe, Producer, RingRef, Waiter};

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

/// How a channel end (or a pool's, or a counter's) commits: by itself, or
/// staged in its owner's journal (see the module docs).
#[derive(Clone, Default)]
pub enum Log {
    #[default]
    Direct,
    Journal(Arc<Journal>),
}

impl Log {
    /// The journal slot of `word`, when this is a journal.
    pub fn slot(&self, word: &dyn Word) -> Option<(Arc<Journal>, usize)> {
        match self {
            Log::Direct => None,
            Log::Journal(j) => Some((j.clone(), j.slot_of(word))),
        }
    }
}

/// A ring's head as a journal word: storing it publishes and rings the
/// consumer's bell.
struct Publish<T> {
    ring: RingRef<T>,
    bell: Arc<Bell>,
}

impl<T: Send> Word for Publish<T> {
    fn load(&self) -> u64 {
        self.ring.head() as u64
    }
    fn store(&self, v: u64) {
        HeadWord(self.ring.clone()).store(v);
        self.bell.ring();
    }
    fn key(&self) -> usize {
        self.ring.head_key()
    }
}

/// A channel: its ring, its consumer's bell and its name; it outlives the
/// ends attached to it (see the module docs). Cloning shares it.
pub struct Channel<T> {
    name: &'static str,
    ring: RingRef<T>,
    bell: Arc<Bell>,
    messages: usize,
    head: WordRef,
    tail: WordRef,
}

impl<T> Clone for Channel<T> {
    fn clone(&self) -> Self {
        Channel {
            name: self.name,
            ring: self.ring.clone(),
            bell: self.bell.clone(),
            messages: self.messages,
            head: self.head.clone(),
            tail: self.tail.clone(),
        }
    }
}

impl<T: Copy + Send + 'static> Channel<T> {
    /// A channel named `name` that holds at most `messages` messages, whose
    /// consumer parks on `bell`.
    pub fn new(name: &'static str, messages: usize, bell: Arc<Bell>) -> Channel<T> {
        let ring = dyncore_ring::ring::shared::<T>(capacity_for(messages));
        let head: WordRef = Arc::new(Publish { ring: ring.clone(), bell: bell.clone() });
        let tail: WordRef = Arc::new(TailWord(ring.clone()));
        Channel { name, ring, bell, messages, head, tail }
    }

    /// Attaches the sending end (at the published head).
    pub fn outbox(&self, log: &Log) -> Outbox<T> {
        Outbox {
            name: self.name,
            tx: self.ring.attach_producer(),
            staged: false,
            bell: self.bell.clone(),
            probe: self.ring.probe(),
            messages: self.messages,
            log: log.slot(&*self.head),
        }
    }

    /// Attaches the receiving end (at the released tail).
    pub fn inbox(&self, log: &Log) -> Inbox<T> {
        Inbox {
            name: self.name,
            rx: self.ring.attach_consumer(),
            held: None,
            taken: 0,
            probe: self.ring.probe(),
            messages: self.messages,
            log: log.slot(&*self.tail),
        }
    }
}

impl<T> Channel<T> {
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The word the producer's journal commits (the ring's head).
    pub fn head_word(&self) -> WordRef {
        self.head.clone()
    }

    /// The word the consumer's journal commits (the ring's tail).
    pub fn tail_word(&self) -> WordRef {
        self.tail.clone()
    }

    /// Messages published and not yet released. The tail is read before
    /// the head: both only grow and the tail never passes the head, so
    /// the difference is never negative, even while both move.
    pub fn pending(&self) -> usize {
        let tail = self.ring.tail();
        self.ring.head().wrapping_sub(tail)
    }

    /// Messages ever published (the sequence number of the next one).
    pub fn published(&self) -> usize {
        self.ring.head()
    }

    /// The consumer's bell.
    pub fn bell(&self) -> &Arc<Bell> {
        &self.bell
    }
}

/// Creates a channel and attaches both ends directly (applications, tests).
pub fn channel<T: Copy + Send + 'static>(
    name: &'static str,
    messages: usize,
    bell: Arc<Bell>,
) -> (Outbox<T>, Inbox<T>) {
    let c = Channel::new(name, messages, bell);
    (c.outbox(&Log::Direct), c.inbox(&Log::Direct))
}

/// The sending end of a channel.
pub struct Outbox<T> {
    name: &'static str,
    tx: Producer<T>,
    staged: bool,
    bell: Arc<Bell>,
    probe: Probe<T>,
    messages: usize,
    log: Option<(Arc<Journal>, usize)>,
}

impl<T: Copy + Send> Outbox<T> {
    /// Stages `v`; it becomes visible at [`Outbox::publish`], or at the
    /// journal's commit.
    ///
    /// Panics if the ring is full, which the sizing rule in the module docs
    /// makes impossible.
    pub fn push(&mut self, v: T) {
        if self.tx.push(v).is_err() {
            panic!("channel {}: full, but it is sized to hold every message that can exist", self.name);
        }
        self.staged = true;
        if let Some((j, i)) = &self.log {
            j.stage(*i, self.tx.position() as u64);
        }
    }

    /// Publishes staged messages (one release store) and rings the
    /// consumer's bell. An end that commits through a journal publishes at
    /// the journal's commit instead, and must not call this.
    pub fn publish(&mut self) {
        debug_assert!(self.log.is_none(), "channel {}: a journaled end publishes at its commit", self.name);
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
    log: Option<(Arc<Journal>, usize)>,
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

    /// Marks the peeked message handled (staged in the journal, if any).
    pub fn commit(&mut self) {
        debug_assert!(self.held.is_some(), "channel {}: commit without a peeked message", self.name);
        self.held = None;
        if let Some((j, i)) = &self.log {
            j.stage(*i, self.rx.position() as u64);
        }
    }

    /// End of a poll: hands consumed cells back to the producer (a direct
    /// end; a journaled one's are handed back by the journal's commit) and
    /// starts a new batch.
    pub fn release(&mut self) {
        if self.log.is_none() {
            self.rx.release();
        }
        self.taken = 0;
    }

    /// Whether this end commits directly (not through a journal).
    pub fn is_direct(&self) -> bool {
        self.log.is_none()
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
