//! Streams with every component and application on a plain thread of its
//! own (phase B moves them onto runtime CPUs). Bounded by a generous time
//! limit, which is a liveness bound, not a performance check.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use dyncore_net::app::{App, Receiver, Sender};
use dyncore_net::component::{Component, ComponentKind, CrashPoint};
use dyncore_net::host::{ThreadRun, Threads, quiet_injected_crashes, run_threads};
use dyncore_net::stack::{Stack, StackConfig};
use dyncore_net::stream::{StreamGen, StreamHash};
use dyncore_net::syscall::{Completion, UserCall};
use dyncore_net::wire::mem::{self, MemWireConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const LIMIT: Duration = Duration::from_secs(120);

/// Fails with every component's and application's state.
fn assert_finished(run: &ThreadRun, finished: bool) {
    if finished {
        return;
    }
    let mut dump = String::new();
    for s in &run.components {
        let c = s.component();
        dump += &format!(
            "\n  {}: has_work {} fill {:.2} {:?} {:?}",
            c.kind(),
            c.has_work(),
            c.inbound_fill(),
            s.load,
            c.counters().snapshot()
        );
    }
    for a in &run.apps {
        dump += &format!("\n  app: has_work {} {:?} {:?}", a.has_work(), a.report(), a.error());
    }
    panic!("the stream did not finish within {LIMIT:?}:{dump}");
}

fn check(run: &ThreadRun, total: u64) {
    assert_stream_intact(&run.apps, total);
    let comps: Vec<&dyn Component> = run.components.iter().map(|s| s.component()).collect();
    assert_frames_conserved(&comps);
}

#[test]
fn a_stream_crosses_two_split_stacks_on_threads() {
    let total = 8 << 20;
    let (comps, apps) = split_pair(MemWireConfig::default(), total, |_| ());
    let (mut run, finished) = run_threads(comps, apps, LIMIT);
    assert_finished(&run, finished);
    check(&run, total);
    for s in &mut run.components {
        assert_eq!(s.buffers_out(), 0, "{} holds buffers at rest", s.kind());
        assert!(s.load.busy_ns > 0, "{} was never busy", s.kind());
    }
}

/// A controller crashes a random one of the syscall server, IP, the filter
/// and the driver of the sending stack, at a random point of its step (in
/// the middle of a message, or at a step of its journal's commit), arming
/// the next switch only once the last has fired,
/// until `CRASHES` have; the stream runs until then (then the sender
/// closes), so every crash happens with traffic in flight, however fast
/// this machine streams or however late the controller is scheduled.
#[test]
fn components_crash_and_restart_on_threads_without_loss() {
    const CRASHES: u64 = 20;
    quiet_injected_crashes();
    let cancel = Arc::new(AtomicBool::new(false));
    let (mut a, mut b) = stack_pair(MemWireConfig::default(), |_| {});
    let sender = Sender::new(a.sockets.remove(0), (B, PORT), 1 << 40, SEED).cancel_on(cancel.clone());
    let receiver = Receiver::new(b.sockets.remove(0), PORT, Some(SEED));
    let mut comps = a.blueprints;
    comps.extend(b.blueprints);
    let switches: Vec<_> = comps
        .iter()
        .take(ComponentKind::ALL.len()) // the sending stack's
        .filter(|c| c.kind() != ComponentKind::Tcp)
        .map(|c| c.common().crash.clone())
        .collect();
    let controller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            let mut rng = ChaCha8Rng::seed_from_u64(1);
            let fired = || switches.iter().map(|s| s.fired()).sum::<u64>();
            let t0 = std::time::Instant::now();
            for n in 0..CRASHES {
                let point = CrashPoint::ALL[rng.random_range(0..CrashPoint::ALL.len())];
                switches[rng.random_range(0..switches.len())].arm_at(point);
                while fired() == n {
                    assert!(t0.elapsed() < LIMIT, "crash {n} never fired");
                    std::thread::sleep(Duration::from_micros(100));
                }
            }
            cancel.store(true, Ordering::Release);
        })
    };
    let (run, finished) = run_threads(comps, vec![Box::new(sender), Box::new(receiver)], LIMIT);
    controller.join().unwrap();
    assert_finished(&run, finished);
    let sent = run.apps[0].report().digest.bytes;
    check(&run, sent);
    let restarts: u64 = run.components.iter().map(|s| s.load.restarts).sum();
    let fired: u64 = run.components.iter().map(|s| s.component().crash_switch().fired()).sum();
    assert_eq!((restarts, fired), (CRASHES, CRASHES));
}

#[test]
fn an_application_makes_blocking_calls_from_its_own_thread() {
    let total: u64 = 3 << 20;
    let (wa, wb) = mem::pair(MemWireConfig::default());
    let mut a = Stack::build(&StackConfig::new(A), std::sync::Arc::new(wa));
    let mut b = Stack::build(&StackConfig::new(B), std::sync::Arc::new(wb));
    let receiver: Box<dyn App> = Box::new(Receiver::new(b.sockets.remove(0), PORT, Some(SEED)));
    let mut comps = a.blueprints;
    comps.extend(b.blueprints);
    let host = Threads::start(comps, vec![receiver]);
    // The sender is straight-line code with synchronous calls.
    let mut sock = a.sockets.remove(0);
    let mut none = |_: &[u8]| ();
    let t = Some(LIMIT);
    // The receiver may not be listening yet: retry a refused connection.
    let mut connected = None;
    for _ in 0..100 {
        connected = Some(sock.call(UserCall::Connect { addr: B, port: PORT }, &mut none, t));
        if connected != Some(Ok(Completion::Error(dyncore_net::proto::SockError::Refused))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(connected, Some(Ok(Completion::Connected)));
    let mut stream = StreamGen::new(SEED);
    let mut hash = StreamHash::new();
    let mut chunk = vec![0; 100_000]; // more than one send buffer: sends take a prefix
    while stream.position() < total {
        let n = chunk.len().min((total - stream.position()) as usize);
        stream.fill(&mut chunk[..n]);
        let mut off = 0;
        while off < n {
            let taken = sock.submit(UserCall::Send(&chunk[off..n])).unwrap();
            assert_eq!(sock.wait(&mut none, t), Ok(Completion::Sent(taken)));
            hash.update(&chunk[off..off + taken]);
            off += taken;
        }
    }
    assert_eq!(sock.call(UserCall::Close, &mut none, t), Ok(Completion::Closed));
    assert!(host.wait_apps(LIMIT), "the receiver did not finish");
    let run = host.stop();
    assert_eq!(run.apps[0].error(), None);
    assert_eq!(run.apps[0].report().digest, hash.digest());
    assert_eq!(hash.digest().bytes, total);
}

#[test]
fn a_split_stack_streams_to_a_monolithic_stack_on_threads() {
    let total = 4 << 20;
    let (wa, wb) = mem::pair(MemWireConfig::default());
    let mut a = Stack::build(&StackConfig::new(A), std::sync::Arc::new(wa));
    let sender: Box<dyn App> =
        Box::new(dyncore_net::app::Sender::new(a.sockets.remove(0), (B, PORT), total, SEED));
    let role = dyncore_net::mono::MonoRole::Receive { port: PORT, verify_seed: Some(SEED) };
    let mono = dyncore_net::mono::Mono::new(wb.port(), B, Default::default(), 5, role, 0);
    // The monolithic stack parks between frames with its TCP timers as deadline.
    let (run, finished) = run_threads(a.blueprints, vec![sender, Box::new(mono)], LIMIT);
    assert_finished(&run, finished);
    assert_stream_intact(&run.apps, total);
}
