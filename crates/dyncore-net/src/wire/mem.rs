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

use std::sync::Arc;

use dyncore_core::Nanos;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{WireFull, WirePort};
use crate::chan::{Bell, Frame, Inbox, Outbox, channel};
use crate::component::Counters;
use crate::pool::{Alloc, Freer, Pool};

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

/// One end of an in-memory wire.
pub struct MemPort {
    mtu: usize,
    tx: Outbox<Frame>,
    tx_alloc: Alloc,
    rx: Inbox<Frame>,
    rx_free: Freer,
    bell: Arc<Bell>,
    impair: Option<(Impairment, ChaCha8Rng)>,
    counters: Arc<Counters>,
}

/// Creates a wire and returns its two ends.
pub fn pair(cfg: MemWireConfig) -> (MemPort, MemPort) {
    let bells = [Bell::new(), Bell::new()];
    // Direction d goes from port d to port 1 - d: its buffers are allocated
    // by port d (woken by returns on its bell) and freed by port 1 - d.
    let mut dirs = [0, 1].map(|d| {
        let (alloc, mut freers) = Pool::create("wire", cfg.frames, cfg.mtu, 1, bells[d].clone());
        let (tx, rx) = channel::<Frame>("wire", cfg.frames, bells[1 - d].clone());
        Some((alloc, freers.pop().expect("one freer"), tx, rx))
    });
    let mut take = |d: usize| dirs[d].take().expect("each direction is taken once");
    let (a_alloc, b_free, a_tx, b_rx) = take(0);
    let (b_alloc, a_free, b_tx, a_rx) = take(1);
    let port = |d: u64, tx, tx_alloc, rx, rx_free, bell| MemPort {
        mtu: cfg.mtu,
        tx,
        tx_alloc,
        rx,
        rx_free,
        bell,
        // Each end draws from its own generator, so the two directions'
        // impairments do not depend on how the ends' polls interleave.
        impair: cfg.impairment.map(|i| (i, ChaCha8Rng::seed_from_u64(i.seed.wrapping_add(d)))),
        counters: Counters::new(COUNTERS),
    };
    let [bell_a, bell_b] = bells;
    (port(0, a_tx, a_alloc, a_rx, a_free, bell_a), port(1, b_tx, b_alloc, b_rx, b_free, bell_b))
}

impl MemPort {
    /// Whether an impairment drops this frame; may corrupt it instead.
    fn impair(&mut self, frame: &mut [u8]) -> bool {
        let Some((imp, rng)) = &mut self.impair else { return false };
        if imp.loss > 0.0 && rng.random_bool(imp.loss) {
            self.counters.add(DROPPED, 1);
            return true;
        }
        if imp.corrupt > 0.0 && rng.random_bool(imp.corrupt) && !frame.is_empty() {
            let at = rng.random_range(0..frame.len());
            frame[at] ^= 1 << rng.random_range(0..8);
            self.counters.add(CORRUPTED, 1);
        }
        false
    }
}

impl WirePort for MemPort {
    fn mtu(&self) -> usize {
        self.mtu
    }

    fn can_send(&mut self) -> bool {
        self.tx_alloc.available() > 0
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), WireFull> {
        assert!(frame.len() <= self.mtu, "a {}-byte frame on a wire with MTU {}", frame.len(), self.mtu);
        let Some(buf) = self.tx_alloc.alloc() else {
            self.counters.add(FULL, 1);
            return Err(WireFull);
        };
        let pool = self.tx_alloc.pool().clone();
        let dropped = pool.with(buf, |b| {
            b.extend_from_slice(frame);
            self.impair(b)
        });
        if dropped {
            self.tx_alloc.unalloc(buf);
        } else {
            self.tx.push(Frame { buf, len: frame.len() as u32 });
            self.counters.add(SENT, 1);
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
        self.counters.add(RECEIVED, 1);
        true
    }

    fn flush(&mut self) {
        self.tx.publish();
        self.rx.release();
        self.rx_free.flush();
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
        let (mut a, mut b) = pair(MemWireConfig { mtu: 100, frames: 4, impairment: None });
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
        let (mut a, mut b) = pair(MemWireConfig { mtu: 8, frames: 2, impairment: None });
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
            let (mut a, mut b) = pair(MemWireConfig { mtu: 64, frames: 512, impairment: Some(imp) });
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
