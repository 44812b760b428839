//! Shared set-up for the stack tests: two stacks on one in-memory wire.
#![allow(dead_code)] // each test binary uses part of it

use std::net::Ipv4Addr;
use std::sync::Arc;

use dyncore_net::app::{App, Receiver, Sender};
use dyncore_net::component::{Blueprint, Component};
use dyncore_net::stack::{Stack, StackConfig};
use dyncore_net::wire::mem::{self, MemWireConfig};

pub const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const PORT: u16 = 5001;
pub const SEED: u64 = 0x5eed;

pub type Components = Vec<Arc<dyn Blueprint>>;
pub type Apps = Vec<Box<dyn App>>;

/// Two stacks on one in-memory wire: A (seed 11) and B (seed 22), each
/// configuration `tune`d.
pub fn stack_pair(wire: MemWireConfig, tune: impl Fn(&mut StackConfig)) -> (Stack, Stack) {
    let (wa, wb) = mem::pair(wire);
    let mut ca = StackConfig::new(A);
    let mut cb = StackConfig::new(B);
    ca.seed = 11;
    cb.seed = 22;
    tune(&mut ca);
    tune(&mut cb);
    (Stack::build(&ca, Arc::new(wa)), Stack::build(&cb, Arc::new(wb)))
}

/// Two split stacks ([`stack_pair`]): A sends `total` bytes to B.
/// Components are returned A's then B's, each in pipeline order; apps are
/// [sender, receiver].
pub fn split_pair(wire: MemWireConfig, total: u64, tune: impl Fn(&mut StackConfig)) -> (Components, Apps) {
    let (mut a, mut b) = stack_pair(wire, tune);
    let sender = Sender::new(a.sockets.remove(0), (B, PORT), total, SEED);
    let receiver = Receiver::new(b.sockets.remove(0), PORT, Some(SEED));
    let mut comps = a.blueprints;
    comps.extend(b.blueprints);
    (comps, vec![Box::new(sender), Box::new(receiver)])
}

/// Asserts both applications finished and their digests match.
pub fn assert_stream_intact(apps: &[Box<dyn App>], total: u64) {
    for a in apps {
        assert_eq!(a.error(), None, "an application failed");
    }
    let (s, r) = (apps[0].report(), apps[1].report());
    assert_eq!(s.digest.bytes, total, "the sender did not send everything");
    assert_eq!(r.digest, s.digest, "the receiver's digest differs from the sender's");
}

/// Asserts that no application failed. When one did, the message gives
/// every application's error and connections, and every component's
/// counters: TCP's `rst_in`/`rst_out` say which side reset a connection,
/// `no_tx_buffer` and the queues' counts whether it was starved.
pub fn assert_apps_ok(apps: &[Box<dyn App>], comps: &[&dyn Component]) {
    if apps.iter().all(|a| a.error().is_none()) {
        return;
    }
    let apps: Vec<String> =
        apps.iter().map(|a| format!("  {:?}, connections {:?}", a.error(), a.connections())).collect();
    let comps: Vec<String> =
        comps.iter().map(|c| format!("  {}: {:?}", c.kind(), c.counters().snapshot())).collect();
    panic!("an application failed:\n{}\ncomponents (A's, then B's):\n{}", apps.join("\n"), comps.join("\n"));
}

/// On an unimpaired wire, every frame one TCP sent is a frame the other
/// received, and every component in between passed each exactly once: a
/// frame lost or duplicated anywhere (a crash, a restart) breaks an equality
/// ([`dyncore_net::audit`]). `comps` are two stacks' components, A's then
/// B's, in pipeline order.
pub fn assert_frames_conserved(comps: &[&dyn Component]) {
    assert_eq!(comps.len(), 10);
    let audit = dyncore_net::audit::Audit::of(&comps[..5], &comps[5..]);
    assert!(audit.frames() > 0, "no frame went anywhere");
    assert_eq!((audit.lost(), audit.duplicated()), (0, 0), "{}", audit.describe());
}

/// Two split stacks with `streams` connections from A to B (A's sockets
/// send, B's receive, stream `i` on port `PORT + i`), the applications made
/// with `reconnect` if asked. Apps are A's senders, then B's receivers.
pub fn streams_pair(
    wire: MemWireConfig,
    total: u64,
    streams: usize,
    reconnect: bool,
) -> (Components, Apps, [Stack; 2]) {
    streams_pair_until(wire, total, streams, reconnect, None)
}

/// [`streams_pair`], the senders closing once `cancel` is set.
pub fn streams_pair_until(
    wire: MemWireConfig,
    total: u64,
    streams: usize,
    reconnect: bool,
    cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
) -> (Components, Apps, [Stack; 2]) {
    streams_pair_tuned(wire, total, streams, reconnect, cancel, |_| {})
}

/// [`streams_pair_until`], both stacks' configurations `tune`d.
pub fn streams_pair_tuned(
    wire: MemWireConfig,
    total: u64,
    streams: usize,
    reconnect: bool,
    cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    tune: impl Fn(&mut StackConfig),
) -> (Components, Apps, [Stack; 2]) {
    let (wa, wb) = mem::pair(wire);
    let mut ca = StackConfig::new(A);
    let mut cb = StackConfig::new(B);
    ca.seed = 11;
    cb.seed = 22;
    ca.sockets = streams;
    cb.sockets = streams;
    tune(&mut ca);
    tune(&mut cb);
    let mut a = Stack::build(&ca, Arc::new(wa));
    let mut b = Stack::build(&cb, Arc::new(wb));
    let mut apps: Apps = Vec::new();
    let mut flags = Vec::new();
    for (i, sock) in a.sockets.drain(..).enumerate() {
        let mut s = Sender::new(sock, (B, PORT + i as u16), total, SEED + i as u64);
        if let Some(c) = &cancel {
            s = s.cancel_on(c.clone());
        }
        flags.push(s.progress());
        apps.push(Box::new(if reconnect { s.reconnect() } else { s }));
    }
    for ((i, sock), flag) in b.sockets.drain(..).enumerate().zip(flags) {
        let r = Receiver::new(sock, PORT + i as u16, Some(SEED + i as u64));
        apps.push(Box::new(if reconnect { r.reconnect().until_done(flag) } else { r }));
    }
    let mut comps = a.blueprints.clone();
    comps.extend(b.blueprints.iter().cloned());
    (comps, apps, [a, b])
}

/// Per stream, pairs the sender's connections with the receiver's and
/// checks each ([`dyncore_net::app::check_pair`]): a completed one
/// delivered exactly what was sent; a reset one delivered an intact prefix
/// of it. Returns (completed, reset).
pub fn check_connections(apps: &[Box<dyn App>]) -> (usize, usize) {
    use dyncore_net::app::{Outcome, check_pair};
    let n = apps.len() / 2;
    let (mut done, mut reset) = (0, 0);
    for i in 0..n {
        let (s, r) = (&apps[i], &apps[n + i]);
        assert_eq!(s.error(), None, "stream {i}: the sender failed");
        assert_eq!(r.error(), None, "stream {i}: the receiver failed");
        let (sc, rc) = (s.connections(), r.connections());
        assert_eq!(sc.len(), rc.len(), "stream {i}: {sc:?} against {rc:?}");
        for (k, (a, b)) in sc.iter().zip(rc).enumerate() {
            if let Err(e) = check_pair(a, b) {
                panic!("stream {i} connection {k}: {e}: {a:?} {b:?}");
            }
            match a.outcome {
                Outcome::Completed => done += 1,
                Outcome::Reset => reset += 1,
            }
        }
    }
    (done, reset)
}

/// TCP reset what the senders saw reset: for every sender `i` (TCP's
/// client `i` on the stack whose TCP restarted), the connections the
/// restarts reset are the sender's connections that ended `Reset`. Each
/// reset is told to its client exactly once, on the call in flight or the
/// next ([`dyncore_net::tcp_reset`], 2), and a sender ends a connection
/// `Reset` only on that error (the receivers' TCP, which never restarts
/// here, resets nothing); so this holds at any stop once the senders are
/// done.
pub fn assert_resets_told(facts: &dyncore_net::tcp::TcpFacts, senders: &[Box<dyn App>]) {
    use dyncore_net::app::Outcome;
    for (i, s) in senders.iter().enumerate() {
        assert!(s.is_done(), "sender {i} is not done");
        let seen = s.connections().iter().filter(|c| c.outcome == Outcome::Reset).count();
        assert_eq!(facts.resets(i), seen as u64, "stream {i}: TCP reset what the application saw reset");
    }
}

/// A component's restart times: p50, p99 and max of crash → ready and
/// crash → first message handled, in µs.
pub fn restart_summary(s: &dyncore_net::host::Supervised) -> String {
    let pct = |v: &[u64]| {
        if v.is_empty() {
            return "–".to_string();
        }
        let mut v = v.to_vec();
        v.sort_unstable();
        let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize] as f64 / 1e3;
        format!("p50 {:.1} / p99 {:.1} / max {:.1} µs", at(0.5), at(0.99), at(1.0))
    };
    format!(
        "{}: {} restarts; crash → ready {}; crash → first message {}",
        s.kind(),
        s.load.restarts,
        pct(&s.restarts.ready_ns),
        pct(&s.restarts.first_message_ns)
    )
}
