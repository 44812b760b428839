//! The queue against the reference it replaces: one binary heap of every
//! push, completions checked by generation when they come out.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{Ev, EventQueue, Key};

/// What the engine used to queue: a completion carried its generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum RefEv {
    Plain(Ev),
    Complete(usize, u64),
}

#[derive(Default)]
struct Reference {
    seq: u64,
    heap: BinaryHeap<Reverse<(Key, RefEv)>>,
    generation: Vec<u64>,
}

impl Reference {
    fn push(&mut self, t: u64, ev: RefEv) {
        self.seq += 1;
        self.heap.push(Reverse((Key { t, seq: self.seq }, ev)));
    }
    fn plan(&mut self, thread: usize, t: u64) {
        self.generation[thread] += 1;
        let g = self.generation[thread];
        self.push(t, RefEv::Complete(thread, g));
    }
    fn cancel(&mut self, thread: usize) {
        self.generation[thread] += 1;
    }
    fn pop(&mut self) -> Option<(Key, Ev)> {
        let Reverse((k, ev)) = self.heap.pop()?;
        Some((
            k,
            match ev {
                RefEv::Plain(e) => e,
                RefEv::Complete(t, g) if g == self.generation[t] => Ev::Complete(t),
                RefEv::Complete(..) => Ev::Superseded,
            },
        ))
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random traffic shaped like the engine's: ticks on a grid, completions
/// re-planned often and far ahead, a few other events, equal times common.
fn run(seed: u64, threads: usize, steps: usize) {
    let mut rng = Rng(seed | 1);
    let (mut q, mut r) =
        (EventQueue::new(), Reference { generation: vec![0; threads], ..Reference::default() });
    let (mut now, mut last_tick) = (0u64, 0u64);
    let mut popped = 0;
    for _ in 0..steps {
        match rng.below(10) {
            0 => {
                last_tick = last_tick.max(now) + rng.below(3) * 4;
                let cpu = rng.below(8) as usize;
                q.push_tick(last_tick, cpu);
                r.push(last_tick, RefEv::Plain(Ev::Tick(cpu)));
            }
            1 => {
                let t = now + rng.below(20);
                let ev =
                    [Ev::Ipi, Ev::StallEnd(3), Ev::Arrive(1), Ev::ReconfigDone(7, 2)][rng.below(4) as usize];
                q.push(t, ev);
                r.push(t, RefEv::Plain(ev));
            }
            2..=5 => {
                let th = rng.below(threads as u64) as usize;
                let t = now + if rng.below(3) == 0 { rng.below(5) } else { rng.below(1000) };
                q.plan_completion(th, t);
                r.plan(th, t);
            }
            6 => {
                let th = rng.below(threads as u64) as usize;
                q.cancel_completion(th);
                r.cancel(th);
            }
            _ => {
                let (a, b) = (q.pop(), r.pop());
                assert_eq!(a, b, "seed {seed}: pop {popped} differs");
                if let Some((k, _)) = a {
                    assert!(k.t >= now);
                    now = k.t;
                }
                popped += 1;
            }
        }
        q.check().unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(q.len(), r.heap.len());
    }
    // Drain: the same tail.
    loop {
        let (a, b) = (q.pop(), r.pop());
        assert_eq!(a, b, "seed {seed}: drain differs");
        if a.is_none() {
            break;
        }
        q.check().unwrap();
    }
    assert_eq!(q.len(), 0);
}

#[test]
fn pops_in_the_order_of_one_heap_of_every_push() {
    for seed in 1..=40 {
        run(seed * 0x9E37_79B9, 1 + (seed as usize % 9) * 7, 4000);
    }
}

#[test]
fn a_cancelled_plan_comes_out_superseded_in_its_place() {
    let mut q = EventQueue::new();
    q.plan_completion(0, 10);
    q.push(5, Ev::Ipi);
    q.cancel_completion(0);
    q.cancel_completion(0); // nothing left to cancel
    q.plan_completion(1, 10);
    assert_eq!(q.pop(), Some((Key { t: 5, seq: 2 }, Ev::Ipi)));
    assert_eq!(q.pop(), Some((Key { t: 10, seq: 1 }, Ev::Superseded)));
    assert_eq!(q.pop(), Some((Key { t: 10, seq: 3 }, Ev::Complete(1))));
    assert_eq!(q.pop(), None);
}

#[test]
#[should_panic(expected = "ticks are queued in time order")]
fn a_tick_out_of_order_is_refused() {
    let mut q = EventQueue::new();
    q.push_tick(8, 0);
    q.push_tick(4, 1);
}
