//! A journal: commits the positions of several rings (and other counters
//! that only grow) at once, so that an owner that crashes between any two
//! steps leaves either all of a batch's effects or none, and a new owner in
//! fresh memory finishes what the crashed one committed.
//!
//! The owner (a network-stack component) reads some rings, writes others,
//! and counts what it did. Every one of those shared effects is a *word*
//! that only the owner stores to and that only moves forward: a ring's
//! `head` (what it published), a ring's `tail` (what it consumed), a
//! counter. A [`Journal`] holds one *slot* per word: the word, the value the
//! owner has staged for it (its *target*), and the value last stored.
//!
//! # The commit protocol
//!
//! 1. **Stage.** While it handles a batch, the owner writes items into ring
//!    cells past the published head and takes items below the head without
//!    releasing them; for every word it changes it stages the new value
//!    ([`Journal::stage`]). Nothing shared has changed yet: another thread
//!    sees none of the batch.
//! 2. **Commit point.** [`Journal::commit`] stores `pending = true`
//!    (release). From here the batch counts as done.
//! 3. **Apply.** For each slot whose target differs from the stored value,
//!    it stores the target into the word (a ring head: release, after which
//!    the consumer sees the items; a ring tail: release, after which the
//!    producer may reuse the cells).
//! 4. **Clean.** It stores `pending = false` (release).
//!
//! A crash (the owner's memory is lost, the journal and the words are not)
//! between any two of these steps is repaired by [`Journal::recover`],
//! which the next owner calls before it attaches anything:
//!
//! * before 2: `pending` is false, so nothing is redone; every target is
//!   reset to its word's stored value, so the next owner starts from the
//!   last committed positions — the batch is handled again from its first
//!   item, and the cells written past the head are overwritten;
//! * after 2 (during or after 3, before 4): `pending` is true, so every
//!   target is stored again (a word already at its target stores the same
//!   value: nothing moves), then 4; the batch is not handled again.
//!
//! So each item of a ring is handled by exactly one owner's committed batch:
//! none is lost (a batch is either redone from its positions or applied in
//! full) and none is duplicated (a committed batch's consumed positions are
//! stored before the next owner reads them). The loom models in
//! `loom_tests.rs` crash an owner at each step and check exactly that.
//!
//! Why positions and not sequence numbers with duplicates dropped by the
//! receiver: a message names a buffer, and once a batch's effects are out
//! (the buffer passed on, or freed and allocated again), handling that
//! message again would touch a buffer the owner no longer owns. So the
//! owner must never redo a batch whose effects are visible; the commit
//! point makes "visible" and "done" the same instant. A message's sequence
//! number is its position in its ring, and a restarted owner resumes at the
//! committed position: every message below it is done.
//!
//! The journal's slots are fixed when it is made; the owner finds its
//! slot for a word with [`Journal::slot_of`] (by the word's address, so a
//! new owner finds the same slots). Only one owner uses a journal at a
//! time; handing it to another thread (a restart, a move) must happen
//! after the last owner's last step (a lock, a join).

use crate::ring::RingRef;
use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// A value that only its owner stores and that only grows (a ring position
/// or a counter), committed through a [`Journal`].
pub trait Word: Send + Sync {
    /// The stored value.
    fn load(&self) -> u64;
    /// Stores a value (the owner only; never smaller than the stored one).
    fn store(&self, v: u64);
    /// The address of the memory it stores into: two words with the same
    /// key are the same word.
    fn key(&self) -> usize;
}

/// A word as journals hold it (a `std` `Arc`: its count is not part of any
/// protocol).
pub type WordRef = std::sync::Arc<dyn Word>;

/// A step of [`Journal::commit`], where a test may crash the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitPoint {
    /// After staging, before the commit point (step 1 done).
    Staged,
    /// After the commit point, before any word is stored (step 2 done).
    Committed,
    /// After the first word is stored, before the others.
    Applying,
    /// After every word is stored, before `pending` is cleared (step 3 done).
    Applied,
}

impl CommitPoint {
    pub const ALL: [CommitPoint; 4] =
        [CommitPoint::Staged, CommitPoint::Committed, CommitPoint::Applying, CommitPoint::Applied];
}

/// The owner stopped at a [`CommitPoint`] (a simulated crash).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crashed(pub CommitPoint);

struct Slot {
    word: WordRef,
    /// Staged value (owner only).
    target: AtomicU64,
    /// Value last stored into the word (owner only).
    stored: AtomicU64,
}

/// See the module docs.
pub struct Journal {
    pending: AtomicBool,
    slots: Box<[Slot]>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Journal({} words, pending {})", self.slots.len(), self.pending.load(Ordering::Relaxed))
    }
}

/// What [`Journal::recover`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovery {
    /// A commit was pending and was finished.
    pub redone: bool,
}

impl Journal {
    /// A journal over `words` (each once), every target at its stored value.
    pub fn new(words: Vec<WordRef>) -> Journal {
        let mut keys: Vec<usize> = words.iter().map(|w| w.key()).collect();
        keys.sort_unstable();
        assert!(keys.windows(2).all(|k| k[0] != k[1]), "a word is in a journal once");
        let slots = words
            .into_iter()
            .map(|word| {
                let v = word.load();
                Slot { word, target: AtomicU64::new(v), stored: AtomicU64::new(v) }
            })
            .collect();
        Journal { pending: AtomicBool::new(false), slots }
    }

    /// Words in the journal.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The slot of `word` (by its key). Panics if it is not in the journal.
    pub fn slot_of(&self, word: &dyn Word) -> usize {
        let key = word.key();
        self.slots
            .iter()
            .position(|s| s.word.key() == key)
            .unwrap_or_else(|| panic!("word {key:#x} is not in this journal"))
    }

    /// Step 1: stages `v` as slot `i`'s next value.
    pub fn stage(&self, i: usize, v: u64) {
        self.slots[i].target.store(v, Ordering::Relaxed);
    }

    /// Slot `i`'s staged value.
    pub fn target(&self, i: usize) -> u64 {
        self.slots[i].target.load(Ordering::Relaxed)
    }

    /// Slot `i`'s stored (committed) value.
    pub fn stored(&self, i: usize) -> u64 {
        self.slots[i].stored.load(Ordering::Relaxed)
    }

    /// Whether anything is staged that is not stored.
    pub fn dirty(&self) -> bool {
        self.slots.iter().any(|s| s.target.load(Ordering::Relaxed) != s.stored.load(Ordering::Relaxed))
    }

    /// Steps 2-4. `at` is called at each [`CommitPoint`]; an `Err` from it
    /// stops the commit there (a simulated crash; a real one panics inside
    /// `at`). A commit with nothing staged does nothing.
    pub fn commit(&self, at: &mut dyn FnMut(CommitPoint) -> Result<(), Crashed>) -> Result<(), Crashed> {
        if !self.dirty() {
            return Ok(());
        }
        at(CommitPoint::Staged)?;
        self.pending.store(true, Ordering::Release);
        at(CommitPoint::Committed)?;
        let mut first = true;
        for s in self.slots.iter() {
            let t = s.target.load(Ordering::Relaxed);
            if t != s.stored.load(Ordering::Relaxed) {
                s.word.store(t);
                s.stored.store(t, Ordering::Relaxed);
                if first {
                    first = false;
                    at(CommitPoint::Applying)?;
                }
            }
        }
        at(CommitPoint::Applied)?;
        self.pending.store(false, Ordering::Release);
        Ok(())
    }

    /// [`Journal::commit`] with no crash points.
    pub fn commit_now(&self) {
        self.commit(&mut |_| Ok(())).expect("no crash point stops it");
    }

    /// After a crash, before a new owner attaches: finishes a pending
    /// commit, then sets every target to its word's stored value (module
    /// docs).
    pub fn recover(&self) -> Recovery {
        let redone = self.pending.load(Ordering::Acquire);
        if redone {
            for s in self.slots.iter() {
                s.word.store(s.target.load(Ordering::Relaxed));
            }
            self.pending.store(false, Ordering::Release);
        }
        for s in self.slots.iter() {
            let v = s.word.load();
            s.target.store(v, Ordering::Relaxed);
            s.stored.store(v, Ordering::Relaxed);
        }
        Recovery { redone }
    }
}

/// A ring's `head` as a word: storing publishes.
pub struct HeadWord<T>(pub RingRef<T>);

impl<T: Send> Word for HeadWord<T> {
    fn load(&self) -> u64 {
        self.0.head() as u64
    }
    fn store(&self, v: u64) {
        self.0.set_head(v as usize);
    }
    fn key(&self) -> usize {
        self.0.head_key()
    }
}

/// A ring's `tail` as a word: storing releases.
pub struct TailWord<T>(pub RingRef<T>);

impl<T: Send> Word for TailWord<T> {
    fn load(&self) -> u64 {
        self.0.tail() as u64
    }
    fn store(&self, v: u64) {
        self.0.set_tail(v as usize);
    }
    fn key(&self) -> usize {
        self.0.tail_key()
    }
}

/// A plain word (a counter that must not count a batch twice).
#[derive(Debug)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn new(v: u64) -> Counter {
        Counter(AtomicU64::new(v))
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

impl Word for Counter {
    fn load(&self) -> u64 {
        self.get()
    }
    fn store(&self, v: u64) {
        self.0.store(v, Ordering::Release);
    }
    fn key(&self) -> usize {
        &self.0 as *const AtomicU64 as usize
    }
}

/// State a component saves with its journal, so that an instance restarted
/// in fresh memory resumes from it (TCP's connection checkpoints,
/// `dyncore-net`'s `tcp_recover`): two slots, the current one named by a
/// generation word committed through the journal. The protocol:
///
/// 1. **Restore.** An instance reads the committed generation `g` and
///    restores from [`TwoSlots::current`]`(g)`.
/// 2. **Save.** To save, it writes [`TwoSlots::next`]`(g)`, never the
///    current slot, and stages `g + 1` for the generation word.
/// 3. **Commit.** The journal's commit publishes the new generation
///    together with the outputs the saved state produced.
///
/// A crash before the commit point leaves `g` and its slot untouched (the
/// new instance resumes from the state before the poll, and the poll's
/// inputs are delivered again); a crash after it finishes the commit
/// (`Journal::recover`) and leaves `g + 1`. So the restored state is always
/// the one whose outputs were published (model-checked with the journal in
/// `loom_tests::loom_checkpoint_*`).
///
/// The slots are touched only by the instance that owns them; an instance
/// and the next are ordered by the restart (the old one's thread has
/// unwound before the new one runs), so the locks are never contended.
#[derive(Debug, Default)]
pub struct TwoSlots<T> {
    slots: [std::sync::Mutex<T>; 2],
}

impl<T> TwoSlots<T> {
    pub fn new(a: T, b: T) -> TwoSlots<T> {
        TwoSlots { slots: [std::sync::Mutex::new(a), std::sync::Mutex::new(b)] }
    }

    /// The slot generation `generation` names (step 1).
    pub fn current(&self, generation: u64) -> std::sync::MutexGuard<'_, T> {
        self.slot(generation)
    }

    /// The slot a save at generation `generation` writes (step 2).
    pub fn next(&self, generation: u64) -> std::sync::MutexGuard<'_, T> {
        self.slot(generation.wrapping_add(1))
    }

    fn slot(&self, generation: u64) -> std::sync::MutexGuard<'_, T> {
        // A crash (panic) never happens while a slot is locked; a poisoned
        // lock's data is still what the last writer left.
        self.slots[(generation % 2) as usize].lock().unwrap_or_else(|e| e.into_inner())
    }
}
