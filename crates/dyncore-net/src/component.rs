//! What every component is to a host: a `poll(now)` object.
//!
//! A host (one thread polling every component round-robin, a thread per
//! component, and in phase B the runtime CPUs) calls [`Component::poll`]
//! with the time; the component does a bounded amount of work (at most
//! [`crate::chan::BATCH`] messages per inbox) and says what it did. Between
//! polls a host may park the component on its bell until
//! [`Component::has_work`] or [`Component::deadline_ns`] says it should run.
//!
//! Components hold no reference to each other: everything they exchange goes
//! through their ports (channels, pools, the wire), which are built by
//! [`crate::stack`] and outlive a crashed instance.
//!
//! Hosting rules: a component is `Send` and may move to another thread (a
//! runtime CPU) between two polls, never during one — its channel ends are
//! single-producer single-consumer, so exactly one host polls it at a time.
//! A host that parks it waits on [`Component::bell`] with
//! [`Component::deadline_ns`] as the deadline and `has_work` as the
//! condition (the waiter's protocol makes that free of lost wake-ups). One
//! bell per component means a CPU that hosts several components has several
//! wait points; phase B decides how such a CPU sleeps (a short deadline, or
//! a bell that forwards to the CPU's).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use dyncore_core::Nanos;
pub use dyncore_core::placement::ComponentKind;

use crate::chan::Bell;

/// What one poll did.
#[must_use]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Messages handled (packets, calls, replies).
    pub messages: u64,
    /// Payload bytes moved or touched.
    pub bytes: u64,
}

impl Progress {
    pub const IDLE: Progress = Progress { messages: 0, bytes: 0 };

    /// Whether the poll did nothing (the host counts empty polls).
    pub fn is_idle(&self) -> bool {
        self.messages == 0 && self.bytes == 0
    }

    pub fn add(&mut self, messages: u64, bytes: u64) {
        self.messages += messages;
        self.bytes += bytes;
    }
}

impl std::ops::AddAssign for Progress {
    fn add_assign(&mut self, o: Progress) {
        self.add(o.messages, o.bytes);
    }
}

/// Why a component refused to restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotRestartable(pub ComponentKind);

impl std::fmt::Display for NotRestartable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} holds state that a restart would lose (connections); it cannot be restarted", self.0)
    }
}

impl std::error::Error for NotRestartable {}

/// A component of the split stack.
pub trait Component: Send {
    fn kind(&self) -> ComponentKind;

    /// Does a bounded amount of work at time `now_ns` (monotonic, or
    /// virtual under a simulated clock).
    fn poll(&mut self, now_ns: Nanos) -> Progress;

    /// Whether a message or a returned buffer waits for it: a parked
    /// component is woken (by its bell) when this becomes true.
    fn has_work(&self) -> bool;

    /// The latest time it must be polled again even without work (TCP's
    /// timers; a wire that cannot ring a bell), given the time now.
    fn deadline_ns(&self, _now_ns: Nanos) -> Option<Nanos> {
        None
    }

    /// Its bell, counters and crash switch.
    fn common(&self) -> &Common;

    /// The bell its producers ring.
    fn bell(&self) -> &Arc<Bell> {
        &self.common().bell
    }

    /// How full its fullest inbound channel is, 0 to 1.
    fn inbound_fill(&self) -> f64;

    /// How full each channel it sends on is, with the component receiving
    /// on it: a full one says that receiver cannot keep up (NewtOS §5's
    /// hint for the placement policy; see [`crate::host::load_sample`]).
    fn outbound_fill(&self) -> Vec<(ComponentKind, f64)>;

    /// Replaces the component's state with a fresh instance's, attached to
    /// the same ports. Components with large state (TCP's connections, the
    /// syscall server's clients) refuse.
    fn restart(&mut self) -> Result<(), NotRestartable>;

    /// Buffers of the pools it allocates from that are out (in channels,
    /// return rings or held). Zero for every component of a stack at rest:
    /// a lost message shows up here as a leaked buffer.
    fn buffers_out(&mut self) -> usize {
        0
    }

    /// Its counters (shared, they outlive restarts).
    fn counters(&self) -> &Arc<Counters> {
        &self.common().counters
    }

    /// Its crash switch (shared, so a controller thread can arm it).
    fn crash_switch(&self) -> &Arc<CrashSwitch> {
        &self.common().crash
    }
}

/// What every component has besides its channels, shared with whoever
/// hosts it and kept across restarts: the bell it parks on, its counters
/// and its crash switch.
pub struct Common {
    pub bell: Arc<Bell>,
    pub counters: Arc<Counters>,
    pub crash: Arc<CrashSwitch>,
}

impl Common {
    pub fn new(bell: Arc<Bell>, counter_names: &'static [&'static str]) -> Self {
        Common { bell, counters: Counters::new(counter_names), crash: Arc::new(CrashSwitch::default()) }
    }
}

/// A command to crash: armed from anywhere, it makes the component panic in
/// the middle of handling its next message (after taking it, before
/// emitting anything), the worst point for losing a message.
#[derive(Debug, Default)]
pub struct CrashSwitch {
    armed: AtomicBool,
    fired: AtomicU64,
}

/// The panic message of an injected crash (hosts recognise it).
pub const INJECTED_CRASH: &str = "dyncore-net: injected crash";

impl CrashSwitch {
    pub fn arm(&self) {
        self.armed.store(true, Ordering::Release);
    }

    pub fn is_armed(&self) -> bool {
        self.armed.load(Ordering::Acquire)
    }

    /// Called by a component's logic mid-message: panics once if armed.
    pub fn check(&self, kind: ComponentKind) {
        if self.armed.swap(false, Ordering::AcqRel) {
            self.fired.fetch_add(1, Ordering::Relaxed);
            panic!("{INJECTED_CRASH} in {kind}");
        }
    }

    /// Crashes injected so far.
    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::Relaxed)
    }
}

/// Named event counters of one component (packets dropped by reason, rule
/// hits, ...), readable from any thread.
#[derive(Debug)]
pub struct Counters {
    names: &'static [&'static str],
    values: Box<[AtomicU64]>,
}

impl Counters {
    pub fn new(names: &'static [&'static str]) -> Arc<Counters> {
        Arc::new(Counters { names, values: names.iter().map(|_| AtomicU64::new(0)).collect() })
    }

    /// Adds `n` to counter `i` (an index into the names).
    pub fn add(&self, i: usize, n: u64) {
        self.values[i].fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self, name: &str) -> u64 {
        let i = self.names.iter().position(|n| *n == name).unwrap_or_else(|| panic!("no counter `{name}`"));
        self.values[i].load(Ordering::Relaxed)
    }

    /// `(name, value)` for every counter.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        self.names.iter().zip(self.values.iter()).map(|(n, v)| (*n, v.load(Ordering::Relaxed))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_switch_fires_once() {
        let s = CrashSwitch::default();
        s.check(ComponentKind::Ip);
        s.arm();
        let r = std::panic::catch_unwind(|| s.check(ComponentKind::Ip));
        let msg = r.unwrap_err().downcast::<String>().unwrap();
        assert!(msg.contains(INJECTED_CRASH) && msg.contains("ip"), "{msg}");
        s.check(ComponentKind::Ip);
        assert_eq!(s.fired(), 1);
    }

    #[test]
    fn counters_by_name() {
        let c = Counters::new(&["a", "b"]);
        c.add(1, 3);
        c.add(1, 2);
        assert_eq!(c.get("b"), 5);
        assert_eq!(c.snapshot(), [("a", 0), ("b", 5)]);
    }
}
