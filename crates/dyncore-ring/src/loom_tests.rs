//! loom models of every protocol in this crate. Run with
//! `RUSTFLAGS="--cfg dyncore_loom" cargo test --release -p dyncore-ring --lib -- loom`.
//! Each model is kept small (two or three threads, one or two operations)
//! so that the exhaustive search stays in seconds.

use loom::thread;

use crate::sync::{Arc, AtomicBool, Ordering};
use crate::*;

/// Spin once, then park (parking is what is being checked).
const LOOM_POLICY: SpinPolicy = SpinPolicy { spin_iters: 1, yield_iters: 0, umwait: false };

/// The server side of a model: serves until `n` requests are answered,
/// replying `f(request)`.
fn serve(mut server: CallServer<u32, u32>, n: usize, f: fn(u32) -> u32) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut served = 0;
        while served < n {
            served += server.poll(|_, &r| f(r));
            if served < n {
                assert_eq!(server.wait(&LOOM_POLICY, None), ServerWake::Work);
            }
        }
    })
}

#[test]
fn loom_no_lost_wakeup() {
    loom::model(|| {
        let shared = Arc::new((Waiter::new(), AtomicBool::new(false)));
        let s2 = shared.clone();
        let notifier = thread::spawn(move || {
            s2.1.store(true, Ordering::Release);
            s2.0.notify();
        });
        // A lost wake-up leaves this parked forever: loom reports a deadlock.
        let got = shared.0.wait_until(&LOOM_POLICY, None, || shared.1.load(Ordering::Acquire).then_some(()));
        assert_eq!(got, Some(()));
        notifier.join().unwrap();
    });
}

#[test]
fn loom_no_lost_wakeup_with_two_waiters() {
    loom::model(|| {
        let shared = Arc::new((Waiter::new(), AtomicBool::new(false)));
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let s = shared.clone();
                thread::spawn(move || {
                    let got =
                        s.0.wait_until(&LOOM_POLICY, None, || s.1.load(Ordering::Acquire).then_some(()));
                    assert_eq!(got, Some(()));
                })
            })
            .collect();
        shared.1.store(true, Ordering::Release);
        shared.0.notify();
        for w in waiters {
            w.join().unwrap();
        }
    });
}

#[test]
fn loom_request_response() {
    loom::model(|| {
        let chan = CallChannel::<u32, u32>::new(1);
        let server = CallServer::new(&chan).unwrap();
        let mut client = CallClient::new(&chan).unwrap();
        let srv = serve(server, 2, |r| r + 100);
        assert_eq!(client.call(1, &LOOM_POLICY, None), Ok(101));
        assert_eq!(client.call(2, &LOOM_POLICY, None), Ok(102));
        srv.join().unwrap();
    });
}

#[test]
fn loom_batched_request_response() {
    loom::model(|| {
        let chan = CallChannel::<u32, u32>::new(1);
        let server = CallServer::new(&chan).unwrap();
        let mut client = CallClient::new(&chan).unwrap();
        // One batched call of two requests: two requests served.
        let srv = serve(server, 2, |r| r * 10);
        let mut out = Vec::new();
        client.call_batch(&[1, 2], &mut out, &LOOM_POLICY, None).unwrap();
        assert_eq!(out, [10, 20]);
        srv.join().unwrap();
    });
}

#[test]
fn loom_close_wakes_waiting_client() {
    loom::model(|| {
        let chan = CallChannel::<u32, u32>::new(1);
        let mut client = CallClient::new(&chan).unwrap();
        let c2 = chan.clone();
        let closer = thread::spawn(move || c2.close());
        // No server: the only way out is the close, which must not be lost.
        assert_eq!(client.call(1, &LOOM_POLICY, None), Err(CallError::Closed));
        closer.join().unwrap();
    });
}

#[test]
fn loom_two_clients_one_server() {
    loom::model(|| {
        let chan = CallChannel::<u32, u32>::new(2);
        let server = CallServer::new(&chan).unwrap();
        let mut a = CallClient::new(&chan).unwrap();
        let mut b = CallClient::new(&chan).unwrap();
        let srv = serve(server, 2, |r| r + 1);
        let tb = thread::spawn(move || assert_eq!(b.call(20, &LOOM_POLICY, None), Ok(21)));
        assert_eq!(a.call(10, &LOOM_POLICY, None), Ok(11));
        tb.join().unwrap();
        srv.join().unwrap();
    });
}

#[test]
fn loom_ring_publish_consume() {
    loom::model(|| {
        let (mut p, mut q) = ring::<u32>(2);
        let prod = thread::spawn(move || {
            // A batch of two published at once, then one more after space frees.
            p.push(1).unwrap();
            p.push(2).unwrap();
            p.publish();
            let mut v = 3;
            while let Err(back) = p.send(v) {
                v = back;
                thread::yield_now();
            }
        });
        let mut got = Vec::new();
        while got.len() < 3 {
            match q.pop() {
                Some(v) => got.push(v),
                None => {
                    q.release();
                    thread::yield_now();
                }
            }
        }
        q.release();
        assert_eq!(got, [1, 2, 3]);
        prod.join().unwrap();
    });
}

#[test]
fn loom_timed_out_call_then_late_reply_is_discarded() {
    loom::model(|| {
        let chan = CallChannel::<u32, u32>::new(1);
        let server = CallServer::new(&chan).unwrap();
        let mut client = CallClient::new(&chan).unwrap();
        let srv = serve(server, 2, |r| r + 100);
        // A zero timeout: either the reply was already there, or the call
        // times out and stays outstanding.
        match client.call(1, &LOOM_POLICY, Some(std::time::Duration::ZERO)) {
            Ok(r) => assert_eq!(r, 101),
            Err(e) => assert_eq!(e, CallError::TimedOut),
        }
        // The next call never sees the late reply to the first one.
        loop {
            match client.call(2, &LOOM_POLICY, None) {
                Ok(r) => {
                    assert_eq!(r, 102);
                    break;
                }
                Err(CallError::Busy) => thread::yield_now(),
                Err(e) => panic!("{e}"),
            }
        }
        srv.join().unwrap();
    });
}

/// Where the component of [`crash_restart_pipeline`] crashes, once.
#[derive(Clone, Copy, PartialEq)]
enum CrashAt {
    Nowhere,
    /// In the middle of a batch: items taken and outputs staged, no commit.
    MidBatch,
    /// At one of the commit's steps.
    Commit(journal::CommitPoint),
}

/// The component's rings and journal (what outlives an instance).
struct Wiring {
    x: ring::RingRef<u32>,
    y: ring::RingRef<u32>,
    count: std::sync::Arc<journal::Counter>,
    journal: std::sync::Arc<journal::Journal>,
}

/// One instance of the component, in fresh memory: handles attached at the
/// committed positions; runs until every item is committed (`true`) or it
/// crashes where `at` says (`false`, once: `crashed` remembers).
fn instance(w: &Wiring, at: CrashAt, crashed: &mut bool) -> bool {
    use journal::{Crashed, HeadWord, TailWord, Word};
    let mut rx = w.x.attach_consumer();
    let mut tx = w.y.attach_producer();
    let sx = w.journal.slot_of(&TailWord(w.x.clone()));
    let sy = w.journal.slot_of(&HeadWord(w.y.clone()));
    let sc = w.journal.slot_of(&*w.count);
    let mut n = w.count.load();
    while n < 2 {
        let mut took = false;
        while let Some(v) = rx.pop() {
            tx.push(v * 10).expect("Y holds every item X can");
            n += 1;
            w.journal.stage(sx, rx.position() as u64);
            w.journal.stage(sy, tx.position() as u64);
            w.journal.stage(sc, n);
            took = true;
        }
        if !took {
            // Every item of X is released, yet not all were counted: lost.
            assert!(w.x.tail() < 2, "X's items were consumed but {n} of 2 committed");
            thread::yield_now();
            continue;
        }
        if at == CrashAt::MidBatch && !*crashed {
            *crashed = true;
            return false;
        }
        let armed = !*crashed;
        let mut stop = |p| match at {
            CrashAt::Commit(c) if c == p && armed => Err(Crashed(p)),
            _ => Ok(()),
        };
        if w.journal.commit(&mut stop).is_err() {
            *crashed = true;
            return false;
        }
    }
    true
}

/// Ring X holding items 1 and 2, published, and an empty ring Y: the
/// pipelines' input and output.
fn two_items_waiting() -> (ring::RingRef<u32>, ring::RingRef<u32>) {
    let x = ring::shared::<u32>(2);
    let y = ring::shared::<u32>(2);
    let mut p = x.attach_producer();
    p.push(1).unwrap();
    p.push(2).unwrap();
    p.publish();
    (x, y)
}

/// The downstream thread: consumes `y` until `done`, returns what it got.
fn read_until_done(y: ring::RingRef<u32>, done: Arc<AtomicBool>) -> thread::JoinHandle<Vec<u32>> {
    thread::spawn(move || {
        let mut rx = y.attach_consumer();
        let mut got = Vec::new();
        loop {
            let finished = done.load(Ordering::Acquire);
            while let Some(v) = rx.pop() {
                got.push(v);
            }
            rx.release();
            if finished {
                return got;
            }
            thread::yield_now();
        }
    })
}

/// The journal's protocol (`journal.rs`): items 1 and 2 wait in ring X; a
/// component takes them, pushes `10 × item` into ring Y and counts each,
/// committing X's tail, Y's head and the count through one journal; a
/// downstream thread consumes Y. The component crashes once at `at`: its
/// handles are dropped (its private positions die with them), the journal
/// is recovered, and a new instance attaches new handles, as a component
/// restarted in fresh memory. Whatever the interleaving, Y carries exactly
/// `[10, 20]` and the counter says 2: nothing lost, nothing duplicated.
fn crash_restart_pipeline(at: CrashAt) {
    use journal::{Counter, HeadWord, Journal, TailWord};
    loom::model(move || {
        let (x, y) = two_items_waiting();
        let count = std::sync::Arc::new(Counter::new(0));
        let words: Vec<journal::WordRef> = vec![
            std::sync::Arc::new(TailWord(x.clone())),
            std::sync::Arc::new(HeadWord(y.clone())),
            count.clone(),
        ];
        let w = Wiring { x, y, count, journal: std::sync::Arc::new(Journal::new(words)) };
        let done = Arc::new(AtomicBool::new(false));
        let downstream = read_until_done(w.y.clone(), done.clone());
        let mut crashed = false;
        while !instance(&w, at, &mut crashed) {
            w.journal.recover();
        }
        assert_eq!(at == CrashAt::Nowhere, !crashed, "the crash happened where it was asked for");
        done.store(true, Ordering::Release);
        assert_eq!(downstream.join().unwrap(), [10, 20], "Y carries each item once, in order");
        assert_eq!(w.count.get(), 2, "each item counted once");
        assert_eq!(w.x.tail(), 2, "X's items are all consumed");
    });
}

#[test]
fn loom_journal_no_crash() {
    crash_restart_pipeline(CrashAt::Nowhere);
}

#[test]
fn loom_journal_crash_mid_batch() {
    crash_restart_pipeline(CrashAt::MidBatch);
}

#[test]
fn loom_journal_crash_at_every_commit_step() {
    for p in journal::CommitPoint::ALL {
        crash_restart_pipeline(CrashAt::Commit(p));
    }
}

/// Where the component of [`checkpoint_pipeline`] crashes, once.
#[derive(Clone, Copy, PartialEq)]
enum SaveCrash {
    Nowhere,
    /// Items taken and outputs staged, nothing saved.
    BeforeSave,
    /// The next slot written and the generation staged, no commit.
    AfterSave,
    /// At one of the commit's steps.
    Commit(journal::CommitPoint),
}

/// What outlives an instance of [`checkpoint_pipeline`]'s component.
struct Saved {
    x: ring::RingRef<u32>,
    y: ring::RingRef<u32>,
    generation: std::sync::Arc<journal::Counter>,
    state: std::sync::Arc<journal::TwoSlots<u32>>,
    journal: std::sync::Arc<journal::Journal>,
}

/// One instance in fresh memory: its running sum restored from the slot
/// the committed generation names; each item it takes adds to the sum and
/// pushes the new sum into Y; after the batch it saves the sum (the next
/// slot, the generation staged) and commits. `true` once both items are
/// committed; `false` where it crashed (once).
fn checkpoint_instance(w: &Saved, at: SaveCrash, crashed: &mut bool) -> bool {
    use journal::{Crashed, HeadWord, TailWord, Word};
    let mut rx = w.x.attach_consumer();
    let mut tx = w.y.attach_producer();
    let sx = w.journal.slot_of(&TailWord(w.x.clone()));
    let sy = w.journal.slot_of(&HeadWord(w.y.clone()));
    let sg = w.journal.slot_of(&*w.generation);
    let mut g = w.generation.load();
    let mut sum = *w.state.current(g);
    while w.x.tail() < 2 {
        let mut took = false;
        while let Some(v) = rx.pop() {
            sum += v;
            tx.push(sum).expect("Y holds every item X can");
            w.journal.stage(sx, rx.position() as u64);
            w.journal.stage(sy, tx.position() as u64);
            took = true;
        }
        if !took {
            thread::yield_now();
            continue;
        }
        let armed = !*crashed;
        if at == SaveCrash::BeforeSave && armed {
            *crashed = true;
            return false;
        }
        *w.state.next(g) = sum;
        w.journal.stage(sg, g + 1);
        if at == SaveCrash::AfterSave && armed {
            *crashed = true;
            return false;
        }
        let mut stop = |p| match at {
            SaveCrash::Commit(c) if c == p && armed => Err(Crashed(p)),
            _ => Ok(()),
        };
        if w.journal.commit(&mut stop).is_err() {
            *crashed = true;
            return false;
        }
        g += 1;
    }
    true
}

/// State saved with the journal ([`journal::TwoSlots`]): items 1 and 2
/// wait in ring X; a component adds each to a running sum, pushes the sum
/// into ring Y (read by a downstream thread) and saves the sum in two slots
/// named by a generation word, committed with X's tail and Y's head. It
/// crashes once at `at` and restarts in fresh memory from the committed
/// generation's slot. Whatever the interleaving, Y carries `[1, 3]` (a
/// restored sum that ran ahead of, or behind, what Y was told would show as
/// a wrong or repeated sum), and the current slot holds 3.
fn checkpoint_pipeline(at: SaveCrash) {
    use journal::{Counter, HeadWord, Journal, TailWord, TwoSlots};
    loom::model(move || {
        let (x, y) = two_items_waiting();
        let generation = std::sync::Arc::new(Counter::new(0));
        let words: Vec<journal::WordRef> = vec![
            std::sync::Arc::new(TailWord(x.clone())),
            std::sync::Arc::new(HeadWord(y.clone())),
            generation.clone(),
        ];
        let journal = std::sync::Arc::new(Journal::new(words));
        let state = std::sync::Arc::new(TwoSlots::new(0, 0));
        let w = Saved { x, y, generation, state, journal };
        let done = Arc::new(AtomicBool::new(false));
        let downstream = read_until_done(w.y.clone(), done.clone());
        let mut crashed = false;
        while !checkpoint_instance(&w, at, &mut crashed) {
            w.journal.recover();
        }
        assert_eq!(at == SaveCrash::Nowhere, !crashed, "the crash happened where it was asked for");
        done.store(true, Ordering::Release);
        assert_eq!(downstream.join().unwrap(), [1, 3], "Y carries each running sum once, in order");
        assert_eq!(*w.state.current(w.generation.get()), 3, "the current slot holds the last sum");
        assert_eq!(w.x.tail(), 2, "X's items are all consumed");
    });
}

#[test]
fn loom_checkpoint_no_crash() {
    checkpoint_pipeline(SaveCrash::Nowhere);
}

#[test]
fn loom_checkpoint_crash_before_and_after_the_save() {
    checkpoint_pipeline(SaveCrash::BeforeSave);
    checkpoint_pipeline(SaveCrash::AfterSave);
}

#[test]
fn loom_checkpoint_crash_at_every_commit_step() {
    for p in journal::CommitPoint::ALL {
        checkpoint_pipeline(SaveCrash::Commit(p));
    }
}
