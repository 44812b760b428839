//! Behaviour tests, run with more threads than this machine has cores: every
//! wait in them is bounded (spin budget, then park with a timeout).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use super::*;

/// A policy that gives the CPU away quickly (tests oversubscribe the cores).
const TEST_POLICY: SpinPolicy = SpinPolicy { spin_iters: 200, yield_iters: 4, umwait: false };
/// Generous: only reached if a wake-up were lost, turning a hang into a failure.
const LONG: Option<Duration> = Some(Duration::from_secs(20));

fn spawn_server<Req: Copy + Send + 'static, Resp: Copy + Send + 'static>(
    chan: &Arc<CallChannel<Req, Resp>>,
    f: impl Fn(&Req) -> Resp + Send + 'static,
) -> thread::JoinHandle<usize> {
    let mut server = CallServer::new(chan).expect("first server");
    thread::spawn(move || {
        let mut served = 0;
        loop {
            served += server.poll(|_, r| f(r));
            match server.wait(&TEST_POLICY, None) {
                ServerWake::Work => {}
                ServerWake::Closed => return served + server.poll(|_, r| f(r)),
                ServerWake::Idle => unreachable!("no deadline"),
            }
        }
    })
}

#[test]
fn smoke() {
    let chan = CallChannel::<u64, u64>::new(1);
    let server = spawn_server(&chan, |x| x * 2);
    let mut c = CallClient::new(&chan).unwrap();
    assert_eq!(c.call(21, &TEST_POLICY, LONG), Ok(42));
    drop(c);
    chan.close();
    assert_eq!(server.join().unwrap(), 1);

    let (mut p, mut q) = ring::<u32>(4);
    assert_eq!(q.recv(), None);
    p.send(7).unwrap();
    assert_eq!(q.recv(), Some(7));
}

#[test]
fn payload_of_a_full_line() {
    let chan = CallChannel::<[u64; 7], [u64; 7]>::new(1);
    let server = spawn_server(&chan, |a| a.map(|x| x + 1));
    let mut c = CallClient::new(&chan).unwrap();
    assert_eq!(c.call([1, 2, 3, 4, 5, 6, 7], &TEST_POLICY, LONG), Ok([2, 3, 4, 5, 6, 7, 8]));
    drop(c);
    chan.close();
    server.join().unwrap();
}

#[test]
fn many_clients() {
    const CLIENTS: usize = 8;
    const CALLS: u64 = 2_000;
    let chan = CallChannel::<(u64, u64), u64>::new(CLIENTS);
    let server = spawn_server(&chan, |&(a, b)| a * 1_000_000 + b);
    let clients: Vec<_> = (0..CLIENTS as u64)
        .map(|id| {
            let mut c = CallClient::new(&chan).unwrap();
            thread::spawn(move || {
                for i in 0..CALLS {
                    assert_eq!(c.call((id, i), &TEST_POLICY, LONG), Ok(id * 1_000_000 + i));
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    chan.close();
    assert_eq!(server.join().unwrap(), CLIENTS * CALLS as usize);
}

#[test]
fn batched_calls_keep_sequence_order() {
    let chan = CallChannel::<u32, u32>::new(2);
    let server = spawn_server(&chan, |x| x + 1000);
    let mut c = CallClient::new(&chan).unwrap();
    let mut out = Vec::new();
    for k in 0..=BATCH_MAX {
        let reqs: Vec<u32> = (0..k as u32).collect();
        c.call_batch(&reqs, &mut out, &TEST_POLICY, LONG).unwrap();
        assert_eq!(out, reqs.iter().map(|x| x + 1000).collect::<Vec<_>>());
    }
    let too_many = vec![0; BATCH_MAX + 1];
    assert_eq!(
        c.call_batch(&too_many, &mut out, &TEST_POLICY, LONG),
        Err(CallError::BatchTooLarge(BATCH_MAX + 1))
    );
    drop(c);
    chan.close();
    server.join().unwrap();
}

#[test]
fn slots_are_claimed_once_and_reused_after_drop() {
    let chan = CallChannel::<u8, u8>::new(2);
    let a = CallClient::new(&chan).unwrap();
    let b = CallClient::new(&chan).unwrap();
    assert_ne!(a.slot(), b.slot());
    assert!(CallClient::new(&chan).is_none(), "only two slots");
    drop(a);
    assert!(CallClient::new(&chan).is_some());
    let s = CallServer::new(&chan).unwrap();
    assert!(CallServer::new(&chan).is_none(), "one server at a time");
    drop(s);
    assert!(CallServer::new(&chan).is_some());
}

#[test]
fn closing_fails_a_waiting_client() {
    let chan = CallChannel::<u8, u8>::new(1);
    let mut c = CallClient::new(&chan).unwrap();
    // No server: the client parks until the channel closes.
    let t = thread::spawn(move || c.call(1, &TEST_POLICY, LONG));
    thread::sleep(Duration::from_millis(20));
    chan.close();
    assert_eq!(t.join().unwrap(), Err(CallError::Closed));
    let mut c = CallClient::new(&chan);
    // The timed-out/closed slot is leaked, so with one slot none is free.
    assert!(c.is_none() || c.as_mut().unwrap().call(1, &TEST_POLICY, LONG) == Err(CallError::Closed));
}

#[test]
fn timeout_then_busy_then_recovers() {
    let chan = CallChannel::<u8, u8>::new(1);
    let mut c = CallClient::new(&chan).unwrap();
    assert_eq!(c.call(1, &TEST_POLICY, Some(Duration::from_millis(10))), Err(CallError::TimedOut));
    assert_eq!(c.call(2, &TEST_POLICY, Some(Duration::from_millis(10))), Err(CallError::Busy));
    let mut server = CallServer::new(&chan).unwrap();
    assert_eq!(server.poll(|_, &r| r + 10), 1);
    // The late reply is discarded; the next call proceeds.
    let t = thread::spawn(move || c.call(3, &TEST_POLICY, LONG));
    while server.poll(|_, &r| r + 10) == 0 {
        thread::yield_now();
    }
    assert_eq!(t.join().unwrap(), Ok(13));
}

#[test]
fn spsc() {
    const N: u64 = 200_000;
    let (mut p, mut q) = ring::<u64>(64);
    let prod = thread::spawn(move || {
        for i in 0..N {
            let mut v = i;
            let mut tries = 0u32;
            while let Err(back) = p.send(v) {
                v = back;
                tries += 1;
                if tries.is_multiple_of(64) {
                    thread::yield_now();
                }
            }
        }
    });
    let mut next = 0;
    let mut idle = 0u32;
    while next < N {
        match q.recv() {
            Some(v) => {
                assert_eq!(v, next, "sequence order");
                next += 1;
            }
            None => {
                idle += 1;
                if idle.is_multiple_of(64) {
                    thread::yield_now();
                }
            }
        }
    }
    prod.join().unwrap();
    assert!(q.is_abandoned());
}

#[test]
fn sequence_order_with_batched_publication() {
    let (mut p, mut q) = ring::<u32>(8);
    let mut expect = 0;
    let mut next = 0;
    for round in 0..1000u32 {
        let k = round % 9;
        for _ in 0..k {
            if p.push(next).is_err() {
                break;
            }
            next += 1;
        }
        // Staged items are invisible until published.
        if k > 0 && q.probe().pending() == 0 {
            assert_eq!(q.pop(), None);
        }
        p.publish();
        while let Some(v) = q.pop() {
            assert_eq!(v, expect);
            expect += 1;
        }
        q.release();
    }
    assert_eq!(expect, next);
}

#[test]
fn drops() {
    // A dropped producer publishes what it staged; the consumer drains it.
    let (mut p, mut q) = ring::<u8>(4);
    p.push(1).unwrap();
    p.push(2).unwrap();
    assert_eq!(p.push(3), Ok(()));
    assert!(!q.is_abandoned());
    drop(p);
    assert!(q.is_abandoned());
    assert_eq!((q.pop(), q.pop(), q.pop(), q.pop()), (Some(1), Some(2), Some(3), None));
    let (mut p, q) = ring::<u8>(2);
    drop(q);
    assert!(p.is_abandoned());
    // Full ring gives the item back.
    p.push(1).unwrap();
    p.push(2).unwrap();
    assert_eq!(p.push(3), Err(3));
}

#[test]
fn no_lost_wakeup() {
    // Two threads ping-pong through two waiters that park at once: a lost
    // wake-up would strand one of them until the (long) timeout.
    const ROUNDS: u32 = 3_000;
    let w = Arc::new((Waiter::new(), Waiter::new(), std::sync::atomic::AtomicU32::new(0)));
    let w2 = w.clone();
    let t = thread::spawn(move || {
        for i in 0..ROUNDS {
            let got = w2.0.wait_for(&SpinPolicy::PARK, Duration::from_secs(20), || {
                (w2.2.load(Ordering::Acquire) == 2 * i + 1).then_some(())
            });
            assert!(got.is_some(), "lost wake-up at round {i}");
            w2.2.store(2 * i + 2, Ordering::Release);
            w2.1.notify();
        }
    });
    for i in 0..ROUNDS {
        w.2.store(2 * i + 1, Ordering::Release);
        w.0.notify();
        let got = w.1.wait_for(&SpinPolicy::PARK, Duration::from_secs(20), || {
            (w.2.load(Ordering::Acquire) == 2 * i + 2).then_some(())
        });
        assert!(got.is_some(), "lost wake-up at round {i}");
    }
    t.join().unwrap();
}

#[test]
fn wait_times_out_without_notify() {
    let w = Waiter::new();
    let flag = AtomicBool::new(false);
    assert_eq!(
        w.wait_for(&TEST_POLICY, Duration::from_millis(5), || flag.load(Ordering::Acquire).then_some(())),
        None
    );
    // The timed-out waiter left PARKED set: the next notify makes the wake call.
    assert!(w.notify());
    assert!(!w.notify(), "PARKED was cleared");
}

#[test]
fn waitpkg_detection_agrees_with_the_kernel() {
    // The kernel lists `waitpkg` among the flags only when CPUID reports it
    // (it may hide a present feature, never invent one).
    let flagged = std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|info| {
        info.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "waitpkg"))
    });
    assert!(!flagged || waitpkg::available(), "the kernel reports waitpkg, detection missed it");
    if !cfg!(target_arch = "x86_64") {
        assert!(!waitpkg::available());
    }
    if waitpkg::available() {
        // UMONITOR/UMWAIT run and return by their deadline with no write.
        waitpkg::wait_for_write(&std::sync::atomic::AtomicU32::new(0));
    }
}

#[test]
fn attached_handles_start_at_the_published_positions_and_forget_what_they_staged() {
    let r = ring::shared::<u32>(4);
    let mut p = r.attach_producer();
    p.push(1).unwrap();
    p.publish();
    p.push(2).unwrap(); // staged, never published
    assert_eq!(p.position(), 2);
    drop(p);
    assert_eq!(r.head(), 1, "an attached producer does not publish when dropped");
    let mut p = r.attach_producer();
    assert_eq!(p.position(), 1, "a new producer starts at the published head");
    p.push(3).unwrap();
    p.publish();
    let mut c = r.attach_consumer();
    assert_eq!(c.pop(), Some(1));
    assert_eq!(c.pop(), Some(3), "the forgotten item was overwritten");
    drop(c);
    assert_eq!(r.tail(), 0, "an attached consumer does not release when dropped");
    let mut c = r.attach_consumer();
    assert_eq!(c.pop(), Some(1), "a new consumer starts at the released tail");
    r.set_tail(c.position());
    assert_eq!(r.tail(), 1);
}

#[test]
#[should_panic(expected = "one producer at a time")]
fn two_producers_are_refused() {
    let r = ring::shared::<u32>(4);
    let _a = r.attach_producer();
    let _b = r.attach_producer();
}

#[test]
#[should_panic(expected = "never past its head")]
fn a_tail_past_the_head_is_refused() {
    let r = ring::shared::<u32>(4);
    r.set_tail(1);
}

#[test]
fn a_journal_commits_every_word_or_none_and_recovery_finishes_a_pending_commit() {
    use journal::{CommitPoint, Counter, Crashed, HeadWord, Journal, TailWord, Word};
    let x = ring::shared::<u32>(4);
    let y = ring::shared::<u32>(4);
    let n = Arc::new(Counter::new(0));
    let j = Journal::new(vec![Arc::new(TailWord(x.clone())), Arc::new(HeadWord(y.clone())), n.clone()]);
    let (sx, sy, sn) = (j.slot_of(&TailWord(x.clone())), j.slot_of(&HeadWord(y.clone())), j.slot_of(&*n));
    let mut px = x.attach_producer();
    px.push(5).unwrap();
    px.publish();
    for stop_at in CommitPoint::ALL {
        let mut rx = x.attach_consumer();
        let mut ty = y.attach_producer();
        let v = rx.pop().expect("the item is there until a commit consumes it");
        ty.push(v).unwrap();
        j.stage(sx, rx.position() as u64);
        j.stage(sy, ty.position() as u64);
        j.stage(sn, n.load() + 1);
        assert!(j.dirty());
        let r = j.commit(&mut |p| if p == stop_at { Err(Crashed(p)) } else { Ok(()) });
        assert_eq!(r, Err(Crashed(stop_at)));
        drop((rx, ty));
        let rec = j.recover();
        assert_eq!(rec.redone, stop_at != CommitPoint::Staged, "{stop_at:?}");
        if rec.redone {
            assert_eq!((x.tail(), y.head(), n.get()), (1, 1, 1), "{stop_at:?}: finished in full");
            break;
        }
        assert_eq!((x.tail(), y.head(), n.get()), (0, 0, 0), "{stop_at:?}: nothing of it shows");
        assert!(!j.dirty(), "recovery forgets what was staged");
    }
    assert_eq!((x.tail(), y.head(), n.get()), (1, 1, 1));
    j.commit_now(); // nothing staged: nothing happens
    assert_eq!(n.get(), 1);
}
