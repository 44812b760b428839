//! What every component is to a host: a `poll(now)` object, and the
//! blueprint it is built from.
//!
//! A host (one thread polling every component round-robin, a thread per
//! component, or runtime CPUs) calls [`Component::poll`] with the time; the
//! component does a bounded amount of work (at most [`crate::chan::BATCH`]
//! messages per inbox), commits it through its journal, and says what it
//! did. Between polls a host may park the component on its bell until
//! [`Component::has_work`] or [`Component::deadline_ns`] says it should run.
//!
//! Components hold no reference to each other: everything they exchange goes
//! through their ports (channels, pools, the wire), which are built by
//! [`crate::stack`] and outlive every instance. A component's [`Blueprint`]
//! is what outlives its instances: the ports, the component's journal (the
//! committed positions of its ports and its counters, and for TCP the
//! connection facts it checkpoints), its bell, counters and crash switch —
//! and its constructor. A crashed instance is dropped whole; the host
//! recovers the journal and builds a new instance from the blueprint, in
//! fresh memory (see [`crate::host::Supervised`]). A live update builds an
//! instance of another version from the old one's exported [`State`].
//!
//! Hosting rules: a component is `Send` and may move to another thread (a
//! runtime CPU) between two polls, never during one — its channel ends are
//! single-producer single-consumer, so exactly one host polls it at a time.
//! A host that parks it waits on [`Component::bell`] with
//! [`Component::deadline_ns`] as the deadline and `has_work` as the
//! condition (the waiter's protocol makes that free of lost wake-ups).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use dyncore_core::Nanos;
pub use dyncore_core::placement::ComponentKind;
use dyncore_ring::journal::{self, CommitPoint, Crashed, Journal, Word, WordRef};

use crate::chan::{Bell, Log, clock_ns};

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

/// A component's state for a live update: explicit and versioned. A new
/// version's blueprint says which older states it starts from
/// ([`Blueprint::accepts`]) and how.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub kind: ComponentKind,
    pub version: u32,
    pub body: StateBody,
}

/// What a component's state holds, by component.
#[derive(Debug, Clone, PartialEq)]
pub enum StateBody {
    /// Nothing beyond its ports (the syscall server, the driver).
    Ports,
    Ip(crate::ip::IpState),
    Filter(crate::filter::FilterState),
}

/// Why a live update cannot happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateError(pub String);

impl std::fmt::Display for UpdateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UpdateError {}

/// A component of the split stack: one instance, in its own memory.
pub trait Component: Send {
    fn kind(&self) -> ComponentKind;

    /// Its code's version (a live update may change it).
    fn version(&self) -> u32 {
        1
    }

    /// Does a bounded amount of work at time `now_ns` (monotonic, or
    /// virtual under a simulated clock) and commits it.
    fn poll(&mut self, now_ns: Nanos) -> Progress;

    /// Whether a message or a returned buffer waits for it: a parked
    /// component is woken (by its bell) when this becomes true.
    fn has_work(&self) -> bool;

    /// The latest time it must be polled again even without work (TCP's
    /// timers; a wire that cannot ring a bell), given the time now.
    fn deadline_ns(&self, _now_ns: Nanos) -> Option<Nanos> {
        None
    }

    /// Its bell, counters and crash switch (shared with its blueprint).
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

    /// Its state, for a live update (called between two polls, when
    /// everything it did is committed).
    fn export(&self) -> Result<State, UpdateError>;

    /// Its counters (committed values; shared, they outlive instances).
    fn counters(&self) -> &Arc<Counters> {
        &self.common().counters
    }

    /// Its crash switch (shared, so a controller thread can arm it).
    fn crash_switch(&self) -> &Arc<CrashSwitch> {
        &self.common().crash
    }
}

/// What outlives a component's instances, and its constructor (see the
/// module docs).
pub trait Blueprint: Send + Sync {
    fn kind(&self) -> ComponentKind;

    /// The version its instances run.
    fn version(&self) -> u32;

    /// The journal its instances commit through.
    fn journal(&self) -> &Arc<Journal>;

    fn common(&self) -> &Common;

    /// A new instance in fresh memory, its ports attached at their
    /// committed positions. After a crash the host recovers the journal
    /// first.
    fn build(&self, now_ns: Nanos) -> Box<dyn Component>;

    /// This component at `version`, over the same ports: the target of a
    /// live update.
    fn at_version(&self, version: u32) -> Result<Arc<dyn Blueprint>, UpdateError>;

    /// Whether an instance can start from `state` (an instance's export,
    /// maybe of another version).
    fn accepts(&self, state: &State) -> Result<(), UpdateError>;

    /// A new instance started from `state`, which [`Blueprint::accepts`].
    fn build_from(&self, state: State, now_ns: Nanos) -> Box<dyn Component>;

    /// Buffers out of the pools its instances allocate from (committed
    /// positions): zero for a stack at rest. A lost message shows here as
    /// a leaked buffer.
    fn buffers_out(&self) -> usize {
        0
    }
}

/// The versions of a component, for `at_version` of blueprints with one.
pub(crate) fn only_version(kind: ComponentKind, version: u32) -> Result<(), UpdateError> {
    if version == 1 { Ok(()) } else { Err(UpdateError(format!("{kind} has version 1 only, not {version}"))) }
}

/// What every component has besides its channels, shared with whoever
/// hosts it and kept across instances: the bell it parks on, its counters
/// and its crash switch.
#[derive(Clone)]
pub struct Common {
    pub bell: Arc<Bell>,
    pub counters: Arc<Counters>,
    pub crash: Arc<CrashSwitch>,
}

impl Common {
    pub fn new(bell: Arc<Bell>, counter_names: &'static [&'static str]) -> Self {
        Common { bell, counters: Counters::new(counter_names), crash: Arc::new(CrashSwitch::default()) }
    }

    /// The crash switch's hook for a journal's commit: panics at an armed
    /// commit point.
    pub fn commit(&self, kind: ComponentKind, journal: &Journal) {
        let mut at = |p: CommitPoint| -> Result<(), Crashed> {
            self.crash.check(kind, CrashPoint::Commit(p));
            Ok(())
        };
        journal.commit(&mut at).expect("the crash switch panics, it does not return an error");
    }
}

/// Where an armed crash switch makes a component panic: in its logic, in
/// the middle of a message (after taking it, while it holds the message's
/// buffer, before staging anything), or at a step of its journal's commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    Logic,
    Commit(CommitPoint),
}

impl CrashPoint {
    pub const ALL: [CrashPoint; 5] = [
        CrashPoint::Logic,
        CrashPoint::Commit(CommitPoint::Staged),
        CrashPoint::Commit(CommitPoint::Committed),
        CrashPoint::Commit(CommitPoint::Applying),
        CrashPoint::Commit(CommitPoint::Applied),
    ];

    fn code(self) -> u32 {
        CrashPoint::ALL.iter().position(|&p| p == self).expect("every point is in ALL") as u32 + 1
    }

    pub fn name(self) -> &'static str {
        match self {
            CrashPoint::Logic => "mid-message",
            CrashPoint::Commit(CommitPoint::Staged) => "before the commit point",
            CrashPoint::Commit(CommitPoint::Committed) => "at the commit point",
            CrashPoint::Commit(CommitPoint::Applying) => "while publishing",
            CrashPoint::Commit(CommitPoint::Applied) => "after publishing",
        }
    }
}

impl std::fmt::Display for CrashPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A command to crash: armed from anywhere with a [`CrashPoint`], it makes
/// the component panic when it next reaches that point.
#[derive(Debug, Default)]
pub struct CrashSwitch {
    /// 0: not armed; else [`CrashPoint::code`].
    armed: AtomicU32,
    fired: AtomicU64,
    /// When it last fired ([`clock_ns`]).
    fired_at_ns: AtomicU64,
}

/// The panic message of an injected crash (hosts recognise it).
pub const INJECTED_CRASH: &str = "dyncore-net: injected crash";

impl CrashSwitch {
    /// Arms it to crash mid-message (the point with the most to lose).
    pub fn arm(&self) {
        self.arm_at(CrashPoint::Logic);
    }

    /// Arms it to crash at `point`.
    pub fn arm_at(&self, point: CrashPoint) {
        self.armed.store(point.code(), Ordering::Release);
    }

    pub fn is_armed(&self) -> bool {
        self.armed.load(Ordering::Acquire) != 0
    }

    /// Disarms it; returns whether it was armed.
    pub fn disarm(&self) -> bool {
        self.armed.swap(0, Ordering::AcqRel) != 0
    }

    /// Called by a component at `point`: panics once if armed there.
    pub fn check(&self, kind: ComponentKind, point: CrashPoint) {
        let code = point.code();
        if self.armed.load(Ordering::Relaxed) == code
            && self.armed.compare_exchange(code, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            self.fired.fetch_add(1, Ordering::Relaxed);
            self.fired_at_ns.store(clock_ns(), Ordering::Release);
            panic!("{INJECTED_CRASH} in {kind} ({point})");
        }
    }

    /// Crashes injected so far.
    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::Relaxed)
    }

    /// When the last injected crash fired ([`clock_ns`]).
    pub fn fired_at_ns(&self) -> u64 {
        self.fired_at_ns.load(Ordering::Acquire)
    }
}

/// Named event counters of one component (packets dropped by reason, rule
/// hits, ...), readable from any thread. Each value is a journal word: a
/// component stages its counts with the rest of a poll ([`Tally`]), so a
/// crash never counts a message twice.
#[derive(Debug)]
pub struct Counters {
    names: &'static [&'static str],
    values: Box<[Arc<journal::Counter>]>,
}

impl Counters {
    pub fn new(names: &'static [&'static str]) -> Arc<Counters> {
        Counters::with_values(names, &vec![0; names.len()])
    }

    /// Counters starting at `values` (a new version's, from an old one's).
    pub fn with_values(names: &'static [&'static str], values: &[u64]) -> Arc<Counters> {
        assert_eq!(names.len(), values.len(), "a value per counter");
        Arc::new(Counters {
            names,
            values: values.iter().map(|&v| Arc::new(journal::Counter::new(v))).collect(),
        })
    }

    /// Adds `n` to counter `i` (an index into the names). For a counter
    /// with one writer that is not a component (a wire end); a component
    /// counts through its [`Tally`].
    pub fn add(&self, i: usize, n: u64) {
        let c = &self.values[i];
        c.store(c.get() + n);
    }

    /// Sets counter `i` (a new version's counters, before any instance
    /// counts through them).
    pub fn set(&self, i: usize, v: u64) {
        self.values[i].store(v);
    }

    pub fn get(&self, name: &str) -> u64 {
        let i = self.names.iter().position(|n| *n == name).unwrap_or_else(|| panic!("no counter `{name}`"));
        self.values[i].get()
    }

    pub fn names(&self) -> &'static [&'static str] {
        self.names
    }

    /// Every value, in name order.
    pub fn values(&self) -> Vec<u64> {
        self.values.iter().map(|v| v.get()).collect()
    }

    /// `(name, value)` for every counter.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        self.names.iter().zip(self.values.iter()).map(|(n, v)| (*n, v.get())).collect()
    }

    /// The words a journal commits.
    pub fn words(&self) -> Vec<WordRef> {
        self.values.iter().map(|v| v.clone() as WordRef).collect()
    }
}

/// A component instance's view of its counters: counts staged in its
/// journal, committed with its poll.
pub struct Tally {
    values: Vec<Arc<journal::Counter>>,
    staged: Vec<u64>,
    slots: Vec<Option<(Arc<Journal>, usize)>>,
}

impl Tally {
    pub fn attach(counters: &Arc<Counters>, log: &Log) -> Tally {
        Tally::over(&counters.values, log)
    }

    /// A tally of any counter words (a filter's hits per rule).
    pub fn over(values: &[Arc<journal::Counter>], log: &Log) -> Tally {
        Tally {
            values: values.to_vec(),
            staged: values.iter().map(|v| v.get()).collect(),
            slots: values.iter().map(|v| log.slot(&**v)).collect(),
        }
    }

    /// Adds `n` to counter `i`.
    pub fn add(&mut self, i: usize, n: u64) {
        if n != 0 {
            self.set(i, self.staged[i] + n);
        }
    }

    /// Sets word `i` (a checkpointed fact rather than a count).
    pub fn set(&mut self, i: usize, v: u64) {
        self.staged[i] = v;
        match &self.slots[i] {
            Some((j, s)) => j.stage(*s, v),
            None => self.values[i].store(v),
        }
    }

    /// Word `i` as this instance has it (staged).
    pub fn get(&self, i: usize) -> u64 {
        self.staged[i]
    }
}

/// A journal over `words`, each once (several ports may name one word,
/// e.g. a wire's bell; duplicates are dropped).
pub fn journal_of(words: Vec<WordRef>) -> Arc<Journal> {
    let mut seen = std::collections::BTreeSet::new();
    Arc::new(Journal::new(words.into_iter().filter(|w| seen.insert(w.key())).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_switch_fires_once_at_its_point() {
        let s = CrashSwitch::default();
        s.check(ComponentKind::Ip, CrashPoint::Logic);
        let at = CrashPoint::Commit(CommitPoint::Applying);
        s.arm_at(at);
        s.check(ComponentKind::Ip, CrashPoint::Logic);
        assert!(s.is_armed(), "armed for another point");
        let r = std::panic::catch_unwind(|| s.check(ComponentKind::Ip, at));
        let msg = r.unwrap_err().downcast::<String>().unwrap();
        assert!(
            msg.contains(INJECTED_CRASH) && msg.contains("ip") && msg.contains("while publishing"),
            "{msg}"
        );
        s.check(ComponentKind::Ip, at);
        assert_eq!(s.fired(), 1);
        assert!(s.fired_at_ns() > 0);
    }

    #[test]
    fn a_tally_counts_at_its_journal_commit_only() {
        let c = Counters::new(&["a", "b"]);
        let j = journal_of(c.words());
        let mut t = Tally::attach(&c, &Log::Journal(j.clone()));
        t.add(1, 3);
        assert_eq!(c.get("b"), 0, "staged");
        j.commit_now();
        assert_eq!(c.get("b"), 3);
        t.add(1, 2);
        drop(t);
        j.recover();
        assert_eq!(c.get("b"), 3, "a crash forgets what was not committed");
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
