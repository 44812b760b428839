//! Shared set-up for the stack tests: two stacks on one in-memory wire.
#![allow(dead_code)] // each test binary uses part of it

use std::net::Ipv4Addr;

use dyncore_net::app::{App, Receiver, Sender};
use dyncore_net::component::Component;
use dyncore_net::stack::{Stack, StackConfig};
use dyncore_net::wire::mem::{self, MemWireConfig};

pub const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub const PORT: u16 = 5001;
pub const SEED: u64 = 0x5eed;

pub type Components = Vec<Box<dyn Component>>;
pub type Apps = Vec<Box<dyn App>>;

/// Two split stacks: A sends `total` bytes to B. Components are returned
/// A's then B's, each in pipeline order; apps are [sender, receiver].
pub fn split_pair(wire: MemWireConfig, total: u64, tune: impl Fn(&mut StackConfig)) -> (Components, Apps) {
    let (wa, wb) = mem::pair(wire);
    let mut ca = StackConfig::new(A);
    let mut cb = StackConfig::new(B);
    ca.seed = 11;
    cb.seed = 22;
    tune(&mut ca);
    tune(&mut cb);
    let mut a = Stack::build(&ca, Box::new(wa), 0);
    let mut b = Stack::build(&cb, Box::new(wb), 0);
    let sender = Sender::new(a.sockets.remove(0), (B, PORT), total, SEED);
    let receiver = Receiver::new(b.sockets.remove(0), PORT, Some(SEED));
    let mut comps = a.components;
    comps.extend(b.components);
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

/// On an unimpaired wire, every frame one TCP sent is a frame the other
/// received, and every component in between passed each exactly once: a
/// frame lost or duplicated anywhere (a crash, a restart) breaks an equality.
/// `comps` are two stacks' components, A's then B's, in pipeline order.
pub fn assert_frames_conserved(comps: &[&dyn Component]) {
    assert_eq!(comps.len(), 10);
    let c = |i: usize, name: &str| comps[i].counters().get(name);
    let (tcp, ip, filter, driver) = (1, 2, 3, 4);
    for (from, to) in [(0, 5), (5, 0)] {
        let sent = c(from + tcp, "frames_out");
        let path = [
            ("ip sent", c(from + ip, "sent")),
            ("filter passed out", c(from + filter, "passed_out")),
            ("driver sent", c(from + driver, "sent")),
            ("peer driver received", c(to + driver, "received")),
            ("peer filter passed in", c(to + filter, "passed_in")),
            ("peer ip received", c(to + ip, "received")),
            ("peer tcp frames in", c(to + tcp, "frames_in")),
        ];
        for (what, n) in path {
            assert_eq!(n, sent, "stack {}: TCP sent {sent} frames, {what} {n}", from / 5);
        }
    }
}
