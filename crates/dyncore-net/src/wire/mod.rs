//! Wires: where the driver's frames go. A wire port moves whole IP packets
//! (the stack runs smoltcp on an IP medium: no Ethernet header, no ARP).
//!
//! * [`mem`]: an in-memory wire to a peer stack in the same process (the
//!   default; no privileges). It can lose or corrupt frames on purpose.
//! * [`tun`]: a TUN device (the layer-3 kind of TAP) whose other side is the
//!   Linux kernel's own TCP, inside a network namespace that the code creates
//!   and removes (root only; probed first); [`linux_peer`] runs the
//!   kernel's end of the stream inside that namespace.

use std::sync::Arc;

use dyncore_core::Nanos;

use dyncore_ring::journal::WordRef;

use crate::chan::{Bell, Log};
use crate::component::Counters;

pub mod linux_peer;
pub mod mem;
pub mod tun;

/// The wire cannot take a frame now (its ring is full): try again later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireFull;

/// One end of a wire as it outlives the driver attached to it: a restarted
/// driver attaches a new [`WirePort`] to the same end.
pub trait Wire: Send + Sync {
    /// Largest frame, in bytes (the IP MTU).
    fn mtu(&self) -> usize;

    /// The bell rung when frames arrive, which the owning driver parks on.
    fn bell(&self) -> &Arc<Bell>;

    /// What the owner's journal must commit for the end's sends and
    /// receives to be part of its polls (the in-memory wire's rings, pools
    /// and counters; nothing for a device, whose reads and writes cannot be
    /// undone).
    fn words(&self) -> Vec<WordRef>;

    /// Attaches the owner's port (one at a time).
    fn attach(&self, log: &Log) -> Box<dyn WirePort>;

    /// Frames sent, received, dropped and damaged on purpose (committed).
    fn counters(&self) -> &Arc<Counters>;
}

/// One end of a wire, attached by a driver (or a monolithic stack).
pub trait WirePort: Send {
    /// Largest frame, in bytes (the IP MTU).
    fn mtu(&self) -> usize;

    /// Whether a send would be taken now.
    fn can_send(&mut self) -> bool;

    /// Sends a copy of `frame`. `Err(WireFull)` leaves nothing sent.
    fn send(&mut self, frame: &[u8]) -> Result<(), WireFull>;

    /// Replaces `buf`'s contents with the next received frame; `false` when
    /// no frame waits.
    fn recv(&mut self, buf: &mut Vec<u8>) -> bool;

    /// End of a poll: makes sent frames visible to the peer and hands back
    /// received cells (a port attached directly; a journaled one's commit
    /// with its owner's journal).
    fn flush(&mut self);

    /// Whether a frame may be waiting, or the port ran out of room to send
    /// and room came back (a parked owner's wake condition).
    fn has_work(&self) -> bool;

    /// The bell rung when frames arrive, which the owning driver parks on.
    fn bell(&self) -> &Arc<Bell>;

    /// Longest a driver may park without polling: `None` when arrivals ring
    /// the bell, a bound when they cannot (a file descriptor).
    fn park_limit_ns(&self) -> Option<Nanos>;

    /// Frames sent, received, dropped and damaged on purpose.
    fn counters(&self) -> &Arc<Counters>;
}
