//! The engine's event queue: every event comes out in (time, sequence)
//! order, exactly as from one binary heap of everything ever pushed, but
//! kept in parts that suit each kind of event.
//!
//! ## Why parts
//! The engine re-plans a thread's completion whenever its rate may have
//! changed (a dispatch, a speed change, a stall on its CPU or its sibling).
//! A plan re-planned before it comes due is *superseded*. In one heap a
//! superseded completion stays until it comes due, doing nothing when it
//! does: a 24-CPU run held about 5 800 entries of which some 70 were live,
//! and every pop paid for the dead ones. Superseded completions still come
//! out in their place, and the engine counts them as events (the count is
//! in every report, and bounds a run's event budget), so they cannot simply
//! be dropped; they can be kept where they cost little.
//!
//! * `ticks`: a FIFO. A tick is pushed at `now + tick_ns` (or at 0 before
//!   the run starts), `now` never decreases and sequence numbers only grow,
//!   so ticks are pushed in key order.
//! * `completions`: at most one entry per thread, its current plan, in an
//!   indexed 4-ary min-heap (`pos[thread]` is its slot) re-planned in
//!   place.
//! * `superseded`: the keys of superseded plans, a 4-ary min-heap of keys.
//!   It is pushed once per re-plan and popped only for the plans that come
//!   due within the run (most are far in the future and never are).
//! * `other`: arrivals, stall ends, reconfiguration answers and IPIs, a
//!   binary heap; few are queued at any time.
//!
//! [`EventQueue::pop`] takes the least key of the four heads. A superseded
//! plan comes out as [`Ev::Superseded`].
//!
//! The two 4-ary heaps sift with the same two functions
//! ([`sift_up_hole`], [`sift_down_hole`]); the completion heap's hook moves
//! each shifted entry's owner along and re-indexes it ([`move_owner`]).
//!
//! ## Invariants ([`EventQueue::check`]: asserted by the tests after every
//! operation, and by the engine at the end of every run)
//! 1. Keys are unique: one sequence counter numbers every push.
//! 2. `ticks` is sorted by key (asserted on every push); `superseded` is a
//!    4-ary min-heap.
//! 3. `keys` (the completions) is a 4-ary min-heap (the parent of slot `i`
//!    is `(i - 1) / 4`), `owners` is as long, `pos[owners[i]] == i` for
//!    every slot `i`, and `pos[t] == NONE` for every thread `t` with no plan.
//! 4. Popping gives the order of one heap of every push, superseded ones
//!    included (the tests hold it against such a heap).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use dyncore_core::Nanos;

/// A simulation event (the engine's module doc says what each does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ev {
    Tick(usize),
    Arrive(usize),
    /// Thread `t`'s current task is done (only a current plan comes out
    /// as this).
    Complete(usize),
    /// A completion that was re-planned or cancelled before it came due:
    /// it does nothing, and counts as an event.
    Superseded,
    StallEnd(usize),
    /// (reconfiguration id, what it took).
    ReconfigDone(u64, Nanos),
    Ipi,
}

/// When an event happens: time, then the order it was pushed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub t: Nanos,
    pub seq: u64,
}

impl Key {
    /// The key as one number that orders the same way.
    fn packed(self) -> u128 {
        (u128::from(self.t) << 64) | u128::from(self.seq)
    }

    fn unpacked(k: u128) -> Key {
        Key { t: (k >> 64) as u64, seq: k as u64 }
    }
}

/// Children per node of the completion heap (a 4-ary heap is half as deep
/// as a binary one; its four children's keys share a cache line).
const ARITY: usize = 4;

/// `pos` of a thread with no plan queued.
const NONE: u32 = u32::MAX;

/// The event queue; see the module doc. Keys are held packed
/// ([`Key::packed`]): one comparison each.
#[derive(Debug, Default)]
pub struct EventQueue {
    seq: u64,
    ticks: VecDeque<(u128, usize)>,
    other: BinaryHeap<Reverse<(u128, Ev)>>,
    /// The completion heap's keys, a min-heap, and the thread of each slot.
    keys: Vec<u128>,
    owners: Vec<u32>,
    /// Slot of each thread's plan in `keys` (`NONE`: none).
    pos: Vec<u32>,
    superseded: KeyHeap,
}

/// Of the up to [`ARITY`] children `first..` of a node of `keys[..n]`, the
/// slot of the least (the first on ties: keys are unique anyway).
fn least_child(keys: &[u128], first: usize, n: usize) -> usize {
    if first + ARITY <= n {
        // All four: a tournament of two pairs.
        let a = if keys[first + 1] < keys[first] { first + 1 } else { first };
        let b = if keys[first + 3] < keys[first + 2] { first + 3 } else { first + 2 };
        if keys[b] < keys[a] { b } else { a }
    } else {
        (first + 1..n).fold(first, |c, j| if keys[j] < keys[c] { j } else { c })
    }
}

/// The sift-up of both 4-ary heaps ([`KeyHeap`] and the completion heap):
/// moves the hole at slot `i` of `keys` up while its parent is greater
/// than `k` (a hole moves: each parent is copied down once, and
/// `moved(to, from)` lets the caller move what goes with it). Returns the
/// slot where `k` belongs; the caller writes it there. Whatever `keys[i]`
/// holds on entry is never read.
#[inline]
fn sift_up_hole(keys: &mut [u128], mut i: usize, k: u128, mut moved: impl FnMut(usize, usize)) -> usize {
    while i > 0 {
        let parent = (i - 1) / ARITY;
        if keys[parent] <= k {
            break;
        }
        keys[i] = keys[parent];
        moved(i, parent);
        i = parent;
    }
    i
}

/// The sift-down of both 4-ary heaps: moves the hole at slot `i` of
/// `keys` down while its least child ([`least_child`]) is less than `k`,
/// as [`sift_up_hole`] does up. Returns the slot where `k` belongs.
#[inline]
fn sift_down_hole(keys: &mut [u128], mut i: usize, k: u128, mut moved: impl FnMut(usize, usize)) -> usize {
    let n = keys.len();
    loop {
        let first = ARITY * i + 1;
        if first >= n {
            break;
        }
        let c = least_child(keys, first, n);
        if k <= keys[c] {
            break;
        }
        keys[i] = keys[c];
        moved(i, c);
        i = c;
    }
    i
}

/// Moves the completion heap's owner of slot `from` to slot `to` and
/// indexes it there (the key has moved already: [`sift_up_hole`]).
#[inline]
fn move_owner(owners: &mut [u32], pos: &mut [u32], to: usize, from: usize) {
    let o = owners[from];
    owners[to] = o;
    pos[o as usize] = to as u32;
}

/// A 4-ary min-heap of keys (the superseded plans: thousands at a time,
/// most far in the future, pushed often and popped as they come due).
#[derive(Debug, Default)]
struct KeyHeap {
    keys: Vec<u128>,
}

impl KeyHeap {
    fn peek(&self) -> Option<u128> {
        self.keys.first().copied()
    }

    fn push(&mut self, k: u128) {
        self.keys.push(k);
        let last = self.keys.len() - 1;
        let i = sift_up_hole(&mut self.keys, last, k, |_, _| {});
        self.keys[i] = k;
    }

    fn pop(&mut self) -> Option<u128> {
        let top = self.peek()?;
        let k = self.keys.pop().expect("not empty");
        if !self.keys.is_empty() {
            let i = sift_down_hole(&mut self.keys, 0, k, |_, _| {});
            self.keys[i] = k;
        }
        Some(top)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.keys.len()
    }
}

impl EventQueue {
    pub fn new() -> EventQueue {
        EventQueue::default()
    }

    fn key(&mut self, t: Nanos) -> u128 {
        assert!(t < Nanos::MAX, "an event at the end of time");
        self.seq += 1;
        Key { t, seq: self.seq }.packed()
    }

    /// Queues `ev` at `t`. Ticks go through [`EventQueue::push_tick`] and
    /// completions through [`EventQueue::plan_completion`].
    pub fn push(&mut self, t: Nanos, ev: Ev) {
        debug_assert!(!matches!(ev, Ev::Tick(_) | Ev::Complete(_) | Ev::Superseded));
        let key = self.key(t);
        self.other.push(Reverse((key, ev)));
    }

    /// Queues `cpu`'s tick at `t`, which is no earlier than any tick queued.
    pub fn push_tick(&mut self, t: Nanos, cpu: usize) {
        let key = self.key(t);
        assert!(self.ticks.back().is_none_or(|&(k, _)| k < key), "ticks are queued in time order");
        self.ticks.push_back((key, cpu));
    }

    /// Plans thread `thread`'s completion at `t`, superseding its plan if it
    /// has one.
    pub fn plan_completion(&mut self, thread: usize, t: Nanos) {
        let key = self.key(t);
        if self.pos.len() <= thread {
            self.pos.resize(thread + 1, NONE);
        }
        let i = self.pos[thread];
        if i == NONE {
            let i = self.keys.len();
            self.keys.push(key);
            self.owners.push(u32::try_from(thread).expect("fewer than 2^32 threads"));
            self.sift_up(i);
        } else {
            let i = i as usize;
            let old = self.keys[i];
            self.superseded.push(old);
            self.keys[i] = key;
            // The new key has a larger sequence number; it may be earlier or later.
            if key < old {
                self.sift_up(i);
            } else {
                self.sift_down(i);
            }
        }
    }

    /// Supersedes thread `thread`'s plan, if it has one.
    pub fn cancel_completion(&mut self, thread: usize) {
        let Some(&i) = self.pos.get(thread).filter(|&&i| i != NONE) else { return };
        let i = i as usize;
        self.superseded.push(self.keys[i]);
        self.remove_at(i);
    }

    /// The next event and when it happens, in (time, sequence) order.
    pub fn pop(&mut self) -> Option<(Key, Ev)> {
        // An empty part's head is u128::MAX, which no key is (`key`).
        let tick = self.ticks.front().map_or(u128::MAX, |e| e.0);
        let other = self.other.peek().map_or(u128::MAX, |e| e.0.0);
        let done = self.keys.first().copied().unwrap_or(u128::MAX);
        let dead = self.superseded.peek().unwrap_or(u128::MAX);
        let key = tick.min(other).min(done).min(dead);
        // Keys are unique, so the least names its part.
        let ev = if key == u128::MAX {
            return None;
        } else if key == tick {
            Ev::Tick(self.ticks.pop_front().expect("peeked").1)
        } else if key == done {
            let thread = self.owners[0] as usize;
            self.remove_at(0);
            Ev::Complete(thread)
        } else if key == other {
            self.other.pop().expect("peeked").0.1
        } else {
            self.superseded.pop();
            Ev::Superseded
        };
        Some((Key::unpacked(key), ev))
    }

    /// Events queued, superseded plans included.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.ticks.len() + self.other.len() + self.keys.len() + self.superseded.len()
    }

    /// Removes slot `i` of the completion heap, keeping invariant 3.
    fn remove_at(&mut self, i: usize) {
        let last = self.keys.len() - 1;
        self.pos[self.owners[i] as usize] = NONE;
        let (k, o) = (self.keys[last], self.owners[last]);
        self.keys.pop();
        self.owners.pop();
        if i < last {
            self.keys[i] = k;
            self.owners[i] = o;
            // The moved entry may belong above or below slot i.
            if i > 0 && k < self.keys[(i - 1) / ARITY] {
                self.sift_up(i);
            } else {
                self.sift_down(i);
            }
        }
    }

    /// Moves the entry at slot `i` up to its place (a hole moves, the
    /// entry is written once; every entry moved is re-indexed).
    fn sift_up(&mut self, i: usize) {
        let (k, o) = (self.keys[i], self.owners[i]);
        let (owners, pos) = (&mut self.owners, &mut self.pos);
        let i = sift_up_hole(&mut self.keys, i, k, |to, from| move_owner(owners, pos, to, from));
        self.put(i, k, o);
    }

    /// Moves the entry at slot `i` down to its place.
    fn sift_down(&mut self, i: usize) {
        let (k, o) = (self.keys[i], self.owners[i]);
        let (owners, pos) = (&mut self.owners, &mut self.pos);
        let i = sift_down_hole(&mut self.keys, i, k, |to, from| move_owner(owners, pos, to, from));
        self.put(i, k, o);
    }

    /// Writes a plan into slot `i` and indexes it there.
    fn put(&mut self, i: usize, k: u128, o: u32) {
        self.keys[i] = k;
        self.owners[i] = o;
        self.pos[o as usize] = i as u32;
    }

    /// Checks the invariants of the module doc (2 and 3; 1 and 4 hold by
    /// construction and are tested).
    pub fn check(&self) -> Result<(), String> {
        if !self.ticks.iter().zip(self.ticks.iter().skip(1)).all(|(a, b)| a.0 < b.0) {
            return Err("ticks out of order".into());
        }
        let sk = &self.superseded.keys;
        if (1..sk.len()).any(|i| sk[(i - 1) / ARITY] > sk[i]) {
            return Err("superseded heap order broken".into());
        }
        if self.keys.len() != self.owners.len() {
            return Err("completion keys and owners differ in length".into());
        }
        for (i, (&k, &t)) in self.keys.iter().zip(&self.owners).enumerate() {
            if i > 0 && self.keys[(i - 1) / ARITY] > k {
                return Err(format!("completion heap order broken at slot {i}"));
            }
            if self.pos.get(t as usize) != Some(&(i as u32)) {
                return Err(format!("thread {t} is in slot {i}, its index says otherwise"));
            }
        }
        let indexed = self.pos.iter().filter(|&&p| p != NONE).count();
        if indexed != self.keys.len() {
            return Err(format!("{indexed} threads indexed, {} plans queued", self.keys.len()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
