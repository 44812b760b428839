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
