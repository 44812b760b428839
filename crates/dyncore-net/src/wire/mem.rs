//! The in-memory wire: two stacks in one process joined like two NICs by a
//! cable.
//!
//! Each direction is a pool of frame buffers (the sender's transmit ring)
//! and a dyncore-ring channel of buffer indices: the sending port copies a
//! frame into a buffer and publishes its index (DMA out), the receiving port
//! copies it into its own stack's buffer and returns the wire buffer (DMA
//! in). When all of a direction's buffers are in flight the wire is full and
//! the sender keeps its frame (backpressure, as a NIC whose transmit ring is
//! full), so an unimpaired wire never loses a frame.
//!
//! An [`Impairment`] drops or corrupts frames on purpose, drawing from a
//! seeded ChaCha8 generator, to show that TCP recovers and that the IP
//! component's checksums catch damage.
//!
//! Each end ([`MemEnd`]) is the channels and pools it sends and receives
//! on; a driver attaches a [`MemPort`] to it through its journal, so a
//! driver's sends and receives are committed with the rest of its poll, and
//! a driver restarted in fresh memory neither loses nor repeats a frame on
//! this wire.

use std::sync::{Arc, Mutex};

use dyncore_core::Nanos;
use dyncore_ring::journal::WordRef;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Wire, WireFull, WirePort};
use crate::chan::{Bell, Channel, Frame, Inbox, Log, Outbox};
use crate::component::{Counters, Tally};
use crate::pool::{Alloc, Freer, PoolRef};

/// Frames lost or damaged on purpose.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Impairment {
    /// Probability that a frame is dropped.
    pub loss: f64,
    /// Probability that one bit of a frame is flipped.
    pub corrupt: f64,
    pub seed: u64,
}

/// Wire configuration (both directions alike).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemWireConfig {
    pub mtu: usize,
    /// Frames in flight per direction.
    pub frames: usize,
    pub impairment: Option<Impairment>,
}

impl Default for MemWireConfig {
    fn default() -> Self {
        MemWireConfig { mtu: 1500, frames: 256, impairment: None }
    }
}

const COUNTERS: &[&str] = &["sent", "received", "full", "dropped", "corrupted"];
const SENT: usize = 0;
const RECEIVED: usize = 1;
const FULL: usize = 2;
const DROPPED: usize = 3;
const CORRUPTED: usize = 4;

/// One end of an in-memory wire, as it outlives the port attached to it.
pub struct MemEnd {
    mtu: usize,
    /// Sending: this end's direction's channel and pool (allocated here).
    tx: Channel<Frame>,
    tx_pool: PoolRef,
    /// Receiving: the other direction's channel and pool (freed here).
    rx: Channel<Frame>,
    rx_pool: PoolRef,
    bell: Arc<Bell>,
    impair: Arc<Mutex<Option<(Impairment, ChaCha8Rng)>>>,
    counters: Arc<Counters>,
}

/// Creates a wire and returns its two ends.
pub fn pair(cfg: MemWireConfig) -> (MemEnd, MemEnd) {
    let bells = [Bell::new(), Bell::new()];
    // Direction d goes from end d to end 1 - d: its buffers are allocated
    // by end d (woken by returns on its bell) and freed by end 1 - d.
    let dirs = [0, 1].map(|d| {
        let pool = PoolRef::create("wire", cfg.frames, cfg.mtu, 1, bells[d].clone());
        (Channel::<Frame>::new("wire", cfg.frames, bells[1 - d].clone()), pool)
    });
    let end = |d: usize| MemEnd {
        mtu: cfg.mtu,
        tx: dirs[d].0.clone(),
        tx_pool: dirs[d].1.clone(),
        rx: dirs[1 - d].0.clone(),
        rx_pool: dirs[1 - d].1.clone(),
        bell: bells[d].clone(),
        // Each end draws from its own generator, so the two directions'
        // impairments do not depend on how the ends' polls interleave.
        impair: Arc::new(Mutex::new(
            cfg.impairment.map(|i| (i, ChaCha8Rng::seed_from_u64(i.seed.wrapping_add(d as u64)))),
        )),
        counters: Counters::new(COUNTERS),
    };
    (end(0), end(1))
}

impl MemEnd {
    /// The end's port, attached directly (a monolithic stack, tests).
    pub fn port(&self) -> Box<dyn WirePort> {
        self.attach(&Log::Direct)
    }

    fn attach_port(&self, log: &Log) -> MemPort {
        MemPort {
            mtu: self.mtu,
            tx: self.tx.outbox(log),
            tx_alloc: self.tx_pool.alloc(log),
            rx: self.rx.inbox(log),
            rx_free: self.rx_pool.freer(0, log),
            bell: self.bell.clone(),
            impair: self.impair.clone(),
            tally: Tally::attach(&self.counters, log),
            counters: self.counters.clone(),
            direct: matches!(log, Log::Direct),
        }
    }
}

impl Wire for MemEnd {
    fn mtu(&self) -> usize {
        self.mtu
    }

    fn bell(&self) -> &Arc<Bell> {
        &self.bell
    }

    fn words(&self) -> Vec<WordRef> {
        let mut w = vec![self.tx.head_word(), self.rx.tail_word(), self.rx_pool.freer_word(0)];
        w.extend(self.tx_pool.alloc_words());
        w.extend(self.counters.words());
        w
    }

    fn attach(&self, log: &Log) -> Box<dyn WirePort> {
        Box::new(self.attach_port(log))
    }

    fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }
}

/// A port attached to one end of an in-memory wire.
pub struct MemPort {
    mtu: usize,
    tx: Outbox<Frame>,
    tx_alloc: Alloc,
    rx: Inbox<Frame>,
    rx_free: Freer,
    bell: Arc<Bell>,
    impair: Arc<Mutex<Option<(Impairment, ChaCha8Rng)>>>,
    tally: Tally,
    counters: Arc<Counters>,
    direct: bool,
}

impl MemPort {
    /// Whether an impairment drops this frame; may corrupt it instead.
    fn impair(&mut self, frame: &mut [u8]) -> bool {
        let mut g = self.impair.lock().unwrap_or_else(|e| e.into_inner());
        let Some((imp, rng)) = &mut *g else { return false };
        if imp.loss > 0.0 && rng.random_bool(imp.loss) {
            self.tally.add(DROPPED, 1);
            return true;
        }
        if imp.corrupt > 0.0 && rng.random_bool(imp.corrupt) && !frame.is_empty() {
            let at = rng.random_range(0..frame.len());
            frame[at] ^= 1 << rng.random_range(0..8);
            self.tally.add(CORRUPTED, 1);
        }
        false
    }
}

impl WirePort for MemPort {
    fn mtu(&self) -> usize {
        self.mtu
    }

    fn can_send(&mut self) -> bool {
        self.tx_alloc.has_free()
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), WireFull> {
        assert!(frame.len() <= self.mtu, "a {}-byte frame on a wire with MTU {}", frame.len(), self.mtu);
        let Some(buf) = self.tx_alloc.peek() else {
            self.tally.add(FULL, 1);
            return Err(WireFull);
        };
        let pool = self.tx_alloc.pool().clone();
        let dropped = pool.with(buf, |b| {
            b.clear();
            b.extend_from_slice(frame);
            self.impair(b)
        });
        // A dropped frame leaves its buffer free (not taken).
        if !dropped {
            self.tx_alloc.take();
            self.tx.push(Frame { buf, len: frame.len() as u32 });
            self.tally.add(SENT, 1);
        }
        Ok(())
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> bool {
        let Some(f) = self.rx.peek() else { return false };
        self.rx_free.pool().with(f.buf, |b| {
            debug_assert_eq!(b.len(), f.len as usize);
            buf.clear();
            buf.extend_from_slice(b);
        });
        self.rx_free.free(f.buf);
        self.rx.commit();
        self.tally.add(RECEIVED, 1);
        true
    }

    fn flush(&mut self) {
        if self.direct {
            self.tx.publish();
            self.rx_free.flush();
        }
        self.rx.release();
        self.tx_alloc.release();
    }

    fn has_work(&self) -> bool {
        self.rx.has_work() || self.tx_alloc.refill_waiting()
    }

    fn bell(&self) -> &Arc<Bell> {
        &self.bell
    }

    fn park_limit_ns(&self) -> Option<Nanos> {
        None
    }

    fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cross_in_both_directions_in_order() {
        let (ea, eb) = pair(MemWireConfig { mtu: 100, frames: 4, impairment: None });
        let (mut a, mut b) = (ea.port(), eb.port());
        let mut got = Vec::new();
        for i in 0..3u8 {
            a.send(&[i; 10]).unwrap();
        }
        assert!(!b.has_work(), "unpublished frames are invisible");
        a.flush();
        assert!(b.has_work());
        let mut buf = Vec::new();
        while b.recv(&mut buf) {
            got.push(buf[0]);
        }
        assert_eq!(got, [0, 1, 2]);
        b.send(b"back").unwrap();
        b.flush();
        assert!(a.recv(&mut buf));
        assert_eq!(buf, b"back");
        assert_eq!(a.counters().get("sent"), 3);
        assert_eq!(b.counters().get("received"), 3);
    }

    #[test]
    fn a_full_wire_pushes_back_and_drains() {
        let (ea, eb) = pair(MemWireConfig { mtu: 8, frames: 2, impairment: None });
        let (mut a, mut b) = (ea.port(), eb.port());
        a.send(b"1").unwrap();
        a.send(b"2").unwrap();
        assert_eq!(a.send(b"3"), Err(WireFull), "two frames in flight fill the wire");
        a.flush();
        let mut buf = Vec::new();
        assert!(b.recv(&mut buf));
        b.flush(); // returns the buffer
        a.send(b"3").unwrap();
        a.flush();
        let mut got = vec![];
        while b.recv(&mut buf) {
            got.push(buf.clone());
        }
        assert_eq!(got, [b"2".to_vec(), b"3".to_vec()]);
        assert_eq!(a.counters().get("full"), 1);
    }

    #[test]
    fn an_impaired_wire_drops_and_corrupts_reproducibly() {
        let run = || {
            let imp = Impairment { loss: 0.2, corrupt: 0.2, seed: 9 };
            let (ea, eb) = pair(MemWireConfig { mtu: 64, frames: 512, impairment: Some(imp) });
            let (mut a, mut b) = (ea.port(), eb.port());
            for _ in 0..400 {
                a.send(&[0u8; 64]).unwrap();
            }
            a.flush();
            let mut buf = Vec::new();
            let mut damaged = 0;
            while b.recv(&mut buf) {
                damaged += usize::from(buf.iter().any(|&x| x != 0));
                b.flush();
            }
            (a.counters().get("dropped"), a.counters().get("corrupted"), damaged)
        };
        let (dropped, corrupted, damaged) = run();
        // 400 frames at 20%: 80 expected each; 4 standard deviations is ±32.
        assert!((48..=112).contains(&dropped), "{dropped} dropped");
        assert_eq!(damaged as u64, corrupted, "every corrupted frame arrives damaged");
        assert_eq!(run(), (dropped, corrupted, damaged), "same seed, same impairments");
    }
}
