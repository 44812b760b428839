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
//! * `superseded`: the keys of superseded plans, a min-heap of 16-byte keys.
//!   It is pushed once per re-plan and popped only for the plans that come
//!   due within the run (most are far in the future and never are).
//! * `other`: arrivals, stall ends, reconfiguration answers and IPIs, a
//!   binary heap; few are queued at any time.
//!
//! [`EventQueue::pop`] takes the least key of the four heads. A superseded
//! plan comes out as [`Ev::Superseded`].
//!
//! ## Invariants ([`EventQueue::check`]: asserted by the tests after every
//! operation, and by the engine at the end of every run)
//! 1. Keys are unique: one sequence counter numbers every push.
//! 2. `ticks` is sorted by key (asserted on every push).
//! 3. `completions` is a 4-ary min-heap by key (the parent of slot `i` is
//!    `(i - 1) / 4`), `pos[completions[i].1] == i` for
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

/// Children per node of the completion heap (a 4-ary heap is half as deep
/// as a binary one; its four children share a cache line or two).
const ARITY: usize = 4;

/// `pos` of a thread with no plan queued.
const NONE: u32 = u32::MAX;

/// The event queue; see the module doc.
#[derive(Debug, Default)]
pub struct EventQueue {
    seq: u64,
    ticks: VecDeque<(Key, usize)>,
    other: BinaryHeap<Reverse<(Key, Ev)>>,
    /// (key, thread), a min-heap by key.
    completions: Vec<(Key, u32)>,
    /// Slot of each thread's plan in `completions` (`NONE`: none).
    pos: Vec<u32>,
    superseded: BinaryHeap<Reverse<Key>>,
}

/// Which part holds the least key.
#[derive(Clone, Copy)]
enum Part {
    Ticks,
    Other,
    Completions,
    Superseded,
}

impl EventQueue {
    pub fn new() -> EventQueue {
        EventQueue::default()
    }

    fn key(&mut self, t: Nanos) -> Key {
        self.seq += 1;
        Key { t, seq: self.seq }
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
        assert!(self.ticks.back().is_none_or(|(k, _)| k.t <= t), "ticks are queued in time order");
        let key = self.key(t);
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
            let i = self.completions.len();
            self.completions.push((key, u32::try_from(thread).expect("fewer than 2^32 threads")));
            self.pos[thread] = i as u32;
            self.sift_up(i);
        } else {
            let i = i as usize;
            let old = self.completions[i].0;
            self.superseded.push(Reverse(old));
            self.completions[i].0 = key;
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
        self.superseded.push(Reverse(self.completions[i].0));
        self.remove_at(i);
    }

    /// The next event and when it happens, in (time, sequence) order.
    pub fn pop(&mut self) -> Option<(Key, Ev)> {
        let mut best: Option<(Key, Part)> = None;
        let mut consider = |k: Option<Key>, part: Part| {
            if let Some(k) = k
                && best.is_none_or(|(b, _)| k < b)
            {
                best = Some((k, part));
            }
        };
        consider(self.ticks.front().map(|e| e.0), Part::Ticks);
        consider(self.other.peek().map(|e| e.0.0), Part::Other);
        consider(self.completions.first().map(|e| e.0), Part::Completions);
        consider(self.superseded.peek().map(|e| e.0), Part::Superseded);
        let (key, part) = best?;
        let ev = match part {
            Part::Ticks => Ev::Tick(self.ticks.pop_front().expect("peeked").1),
            Part::Other => self.other.pop().expect("peeked").0.1,
            Part::Completions => {
                let thread = self.completions[0].1 as usize;
                self.remove_at(0);
                Ev::Complete(thread)
            }
            Part::Superseded => {
                self.superseded.pop();
                Ev::Superseded
            }
        };
        Some((key, ev))
    }

    /// Events queued, superseded plans included.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.ticks.len() + self.other.len() + self.completions.len() + self.superseded.len()
    }

    /// Removes slot `i` of `completions`, keeping invariant 3.
    fn remove_at(&mut self, i: usize) {
        let last = self.completions.len() - 1;
        let gone = self.completions[i].1 as usize;
        self.completions.swap(i, last);
        self.completions.pop();
        self.pos[gone] = NONE;
        if i < last {
            self.pos[self.completions[i].1 as usize] = i as u32;
            // The moved entry may belong above or below slot i.
            if i > 0 && self.completions[i].0 < self.completions[(i - 1) / ARITY].0 {
                self.sift_up(i);
            } else {
                self.sift_down(i);
            }
        }
    }

    /// Moves the entry at slot `i` up to its place (a hole moves, the
    /// entry is written once).
    fn sift_up(&mut self, mut i: usize) {
        let e = self.completions[i];
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if self.completions[parent].0 <= e.0 {
                break;
            }
            self.put(i, self.completions[parent]);
            i = parent;
        }
        self.put(i, e);
    }

    /// Moves the entry at slot `i` down to its place.
    fn sift_down(&mut self, mut i: usize) {
        let e = self.completions[i];
        let n = self.completions.len();
        loop {
            let first = ARITY * i + 1;
            if first >= n {
                break;
            }
            let mut c = first;
            for k in first + 1..(first + ARITY).min(n) {
                if self.completions[k].0 < self.completions[c].0 {
                    c = k;
                }
            }
            if e.0 <= self.completions[c].0 {
                break;
            }
            self.put(i, self.completions[c]);
            i = c;
        }
        self.put(i, e);
    }

    /// Writes `e` into slot `i` and indexes it there.
    fn put(&mut self, i: usize, e: (Key, u32)) {
        self.completions[i] = e;
        self.pos[e.1 as usize] = i as u32;
    }

    /// Checks the invariants of the module doc (2 and 3; 1 and 4 hold by
    /// construction and are tested).
    pub fn check(&self) -> Result<(), String> {
        if !self.ticks.iter().zip(self.ticks.iter().skip(1)).all(|(a, b)| a.0 < b.0) {
            return Err("ticks out of order".into());
        }
        for (i, &(k, t)) in self.completions.iter().enumerate() {
            if i > 0 && self.completions[(i - 1) / ARITY].0 > k {
                return Err(format!("completion heap order broken at slot {i}"));
            }
            if self.pos.get(t as usize) != Some(&(i as u32)) {
                return Err(format!("thread {t} is in slot {i}, its index says otherwise"));
            }
        }
        let indexed = self.pos.iter().filter(|&&p| p != NONE).count();
        if indexed != self.completions.len() {
            return Err(format!("{indexed} threads indexed, {} plans queued", self.completions.len()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
