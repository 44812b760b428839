//! The model's event queue: events come out in (time, sequence number)
//! order, the sequence number counting pushes, exactly as from one binary
//! heap of `(time, seq, event)` — so the model's results do not depend on
//! how the queue keeps them.
//!
//! It keeps them in four **lanes**, each sorted by (time, seq), chosen by
//! how the events arrive so that an event is put near the front or the
//! back of its lane, never deep inside:
//!
//! * [`Lane::Soon`]: a CPU's next job end or wake-up, the NIC, a segment
//!   reaching the receiver, the application's next write: few at a time
//!   (about one per CPU), all near — kept in a `Vec` with the least at its
//!   end, inserted by a scan from the end;
//! * [`Lane::DelAck`]: the receiver's delayed-ACK timers, armed `delack_ns`
//!   (a constant) after now, so each is pushed behind the last: appended;
//! * [`Lane::AckIn`]: ACKs on their way back, `remote_ns` plus a seeded
//!   jitter after now, so nearly in order: inserted by a scan from the back;
//! * [`Lane::Timer`]: the run's fixed timers (the load steps and the start
//!   of the measured time), pushed at the start.
//!
//! A lane is only a place: any event may go to any lane and the pops come
//! out the same; a lane only costs more when its events come out of order.
//!
//! Invariants (asserted in debug builds): every lane is sorted by (time,
//! seq) (`Soon` in reverse); the queue holds each lane's least key (its
//! front's) and the least of the lanes other than `Soon`'s, and a pop
//! takes the least of those, so the pops are in (time, seq) order whatever
//! lane an event went to; sequence numbers are unique and increase with
//! each push. (Most events are `Soon`'s: a pop compares its front with the
//! others' least, and only a pop from another lane looks at the three.)

use std::collections::VecDeque;

use dyncore_core::Nanos;

use super::sim::Ev;

/// Where an event waits (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lane {
    Soon = 0,
    DelAck = 1,
    AckIn = 2,
    Timer = 3,
}

const LANES: usize = 4;

#[derive(Debug, Clone, Copy)]
struct Entry {
    at: Nanos,
    seq: u64,
    ev: Ev,
}

impl Entry {
    /// The order of the pops: time, then push order, as one `u128`.
    #[inline]
    fn key(&self) -> u128 {
        (u128::from(self.at) << 64) | u128::from(self.seq)
    }
}

/// The key of no event: an empty lane's front.
const NONE: u128 = u128::MAX;

/// The queue (module docs).
#[derive(Debug)]
pub(super) struct EventQueue {
    seq: u64,
    /// Per lane, the key of its least entry ([`NONE`]: empty).
    fronts: [u128; LANES],
    /// The least of `fronts[1..]`.
    later: u128,
    /// [`Lane::Soon`], sorted by key, greatest first: the least is popped
    /// from the end.
    soon: Vec<Entry>,
    /// The other lanes (index `lane - 1`), least first.
    deques: [VecDeque<Entry>; LANES - 1],
}

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue {
            seq: 0,
            fronts: [NONE; LANES],
            later: NONE,
            soon: Vec::new(),
            deques: Default::default(),
        }
    }
}

impl EventQueue {
    /// Queues `ev` at `at` in `lane`.
    #[inline]
    pub(super) fn push(&mut self, at: Nanos, ev: Ev, lane: Lane) {
        self.seq += 1;
        let e = Entry { at, seq: self.seq, ev };
        let l = lane as usize;
        if e.key() < self.fronts[l] {
            self.fronts[l] = e.key();
        }
        // `e` has the newest sequence number: it goes behind every entry
        // not later than it.
        if lane == Lane::Soon {
            // Moved into place by swaps: the lane is short, and a swap is
            // cheaper than `insert`'s call to `memmove`.
            let q = &mut self.soon;
            q.push(e);
            let mut i = q.len() - 1;
            while i > 0 && q[i - 1].at <= at {
                q.swap(i - 1, i);
                i -= 1;
            }
            debug_assert!(i == 0 || q[i - 1].key() > e.key(), "the soon lane out of order");
            return;
        }
        self.later = self.later.min(e.key());
        let q = &mut self.deques[l - 1];
        let mut i = q.len();
        while i > 0 && q[i - 1].at > at {
            i -= 1;
        }
        debug_assert!(i == 0 || q[i - 1].key() < e.key(), "a lane out of order");
        debug_assert!(q.get(i).is_none_or(|n| e.key() < n.key()), "a lane out of order");
        if i == q.len() {
            q.push_back(e);
        } else {
            q.insert(i, e);
        }
    }

    /// Whether an event at `at` is queued (`at` not the end of time).
    #[inline]
    pub(super) fn has_at(&self, at: Nanos) -> bool {
        let least = self.fronts[0].min(self.later);
        least != NONE && (least >> 64) as Nanos == at
    }

    /// Takes the least event (module docs) if it is due by `until`.
    #[inline]
    pub(super) fn pop_until(&mut self, until: Nanos) -> Option<(Nanos, Ev)> {
        debug_assert_eq!(self.later, self.fronts[1..].iter().copied().min().unwrap_or(NONE));
        let soon = self.fronts[0];
        if soon < self.later {
            // Not NONE: less than another key.
            if (soon >> 64) as Nanos > until {
                return None;
            }
            let e = self.soon.pop().expect("a lane's front is one of its entries");
            self.fronts[0] = self.soon.last().map_or(NONE, Entry::key);
            debug_assert_eq!(e.key(), soon, "a lane's front key is its least entry's");
            return Some((e.at, e.ev));
        }
        let best = self.later;
        if best == NONE || (best >> 64) as Nanos > until {
            return None;
        }
        // Keys are unique: the lane whose front it is.
        let f = &mut self.fronts;
        let l = if f[1] == best {
            1
        } else if f[2] == best {
            2
        } else {
            3
        };
        let q = &mut self.deques[l - 1];
        let e = q.pop_front().expect("a lane's front is one of its entries");
        f[l] = q.front().map_or(NONE, Entry::key);
        self.later = f[1].min(f[2]).min(f[3]);
        debug_assert_eq!(e.key(), best, "a lane's front key is its least entry's");
        Some((e.at, e.ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever lanes the events go to, they come out as from one heap of
    /// (time, seq).
    #[test]
    fn pops_in_time_then_push_order_across_lanes() {
        let lanes = [Lane::Soon, Lane::DelAck, Lane::AckIn, Lane::Timer];
        let mut q = EventQueue::default();
        let mut reference = std::collections::BinaryHeap::new();
        let mut seq = 0u64;
        // A deterministic scramble of times with ties.
        for i in 0..400u64 {
            let at = (i * 7919) % 97;
            let lane = lanes[(i * 31 % 4) as usize];
            q.push(at, Ev::Remote(i as u32), lane);
            seq += 1;
            reference.push(std::cmp::Reverse((at, seq, i as u32)));
        }
        let mut got = Vec::new();
        while let Some((at, Ev::Remote(i))) = q.pop_until(60) {
            got.push((at, i));
        }
        let mut want = Vec::new();
        while let Some(&std::cmp::Reverse((at, _, i))) = reference.peek() {
            if at > 60 {
                break;
            }
            reference.pop();
            want.push((at, i));
        }
        assert_eq!(got, want);
        assert!(q.pop_until(u64::MAX).is_some_and(|(at, _)| at > 60));
    }
}
