//! Buffer pools: how packets and application data, which are larger than a
//! ring's one-cache-line item, travel between components.
//!
//! A [`Pool`] is a fixed set of buffers in memory shared by the components of
//! one stack. A ring item carries only a [`BufId`] (and a length), so a
//! packet crosses IP and the filter without being copied: ownership of the
//! buffer moves with the message, as NewtOS passes pointers into shared
//! pools between its components.
//!
//! Each pool has one allocator ([`Alloc`]) and a fixed set of freers
//! ([`Freer`]), one per component that may end a buffer's life (the filter
//! drops a packet, TCP consumes it, the driver puts it on the wire). A freer
//! hands the index back through its own SPSC return ring to the allocator,
//! so the pool needs no lock and no multi-producer queue.
//!
//! Invariants:
//! * every buffer is in exactly one place: the allocator's free list, a
//!   return ring, a channel (ring or inbox), or held by one component for the
//!   length of one step ([`Alloc::outstanding`] counts the buffers outside
//!   the allocator; a stack at rest has none);
//! * a buffer has exactly one owner at a time. Each buffer sits behind a
//!   `Mutex` that is never contended when the protocol is kept, so [`Pool::with`]
//!   takes it with `try_lock` and panics if it is held: a second owner is a
//!   bug, and this is where it shows. A mutex poisoned by a component that
//!   crashed mid-step is recovered, because the message that owns the buffer
//!   is redelivered to the restarted component (see [`crate::chan`]);
//! * a return ring holds the whole pool, so freeing never fails.

use std::sync::{Arc, Mutex, TryLockError};

use dyncore_ring::{Consumer, Probe, Producer, ring};

use crate::chan::Bell;

/// Index of a buffer in its pool.
pub type BufId = u32;

/// The shared buffers of one pool.
pub struct Pool {
    name: &'static str,
    buf_bytes: usize,
    bufs: Box<[Mutex<Vec<u8>>]>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pool({}: {} × {} B)", self.name, self.bufs.len(), self.buf_bytes)
    }
}

impl Pool {
    /// Creates a pool of `count` buffers of `buf_bytes` each, its allocator
    /// and `freers` freers. `alloc_bell` is rung when freed buffers are
    /// published, so an allocator that parked waiting for buffers wakes.
    pub fn create(
        name: &'static str,
        count: usize,
        buf_bytes: usize,
        freers: usize,
        alloc_bell: Arc<Bell>,
    ) -> (Alloc, Vec<Freer>) {
        assert!(count > 0 && count <= BufId::MAX as usize, "pool {name}: {count} buffers");
        let pool = Arc::new(Pool {
            name,
            buf_bytes,
            bufs: (0..count).map(|_| Mutex::new(Vec::with_capacity(buf_bytes))).collect(),
        });
        let mut returns = Vec::with_capacity(freers);
        let mut probes = Vec::with_capacity(freers);
        let mut handles = Vec::with_capacity(freers);
        for _ in 0..freers {
            // A return ring holds the whole pool: freeing can never fail.
            let (tx, rx) = ring::<BufId>(count);
            probes.push(rx.probe());
            returns.push(rx);
            handles.push(Freer { pool: pool.clone(), ret: tx, staged: false, bell: alloc_bell.clone() });
        }
        // Free list in reverse so buffer 0 is handed out first (readable traces).
        let free = (0..count as BufId).rev().collect();
        (Alloc { pool, free, starved: false, returns, probes }, handles)
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Bytes each buffer can hold.
    pub fn buf_bytes(&self) -> usize {
        self.buf_bytes
    }

    pub fn count(&self) -> usize {
        self.bufs.len()
    }

    /// Runs `f` on buffer `id`, which the caller owns (see the module docs).
    ///
    /// Panics if the buffer is held by someone else: two owners at once is a
    /// broken protocol, never a wait.
    pub fn with<R>(&self, id: BufId, f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        let m = &self.bufs[id as usize];
        let mut guard = match m.try_lock() {
            Ok(g) => g,
            // A component crashed while it held this buffer; the message that
            // owns it is redelivered, so the bytes are still the owner's.
            Err(TryLockError::Poisoned(p)) => {
                let g = p.into_inner();
                m.clear_poison();
                g
            }
            Err(TryLockError::WouldBlock) => {
                panic!("pool {}: buffer {id} has two owners at once", self.name)
            }
        };
        f(&mut guard)
    }
}

/// The allocating end of a pool (one per pool).
pub struct Alloc {
    pool: Arc<Pool>,
    free: Vec<BufId>,
    /// The last allocation found no buffer (cleared by a reclaim that
    /// finds some): the allocator waits for returns.
    starved: bool,
    returns: Vec<Consumer<BufId>>,
    probes: Vec<Probe<BufId>>,
}

impl Alloc {
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// A free buffer (cleared), or `None` when every buffer is out.
    pub fn alloc(&mut self) -> Option<BufId> {
        if self.free.is_empty() {
            self.reclaim();
        }
        let Some(id) = self.free.pop() else {
            self.starved = true;
            return None;
        };
        self.pool.with(id, Vec::clear);
        Some(id)
    }

    /// Gives back a buffer this allocator handed out and nobody else saw.
    pub fn unalloc(&mut self, id: BufId) {
        debug_assert!(!self.free.contains(&id), "pool {}: buffer {id} freed twice", self.pool.name);
        self.free.push(id);
    }

    /// Free buffers, after taking back whatever the freers returned.
    pub fn available(&mut self) -> usize {
        if self.free.is_empty() {
            self.reclaim();
            self.starved = self.free.is_empty();
        }
        self.free.len()
    }

    /// Whether the allocator ran out (an allocation found nothing) and
    /// freers have returned buffers since: the wake condition of a component
    /// parked for want of buffers. An allocator that has not run out does
    /// not wait for returns, so they do not count as work.
    pub fn refill_waiting(&self) -> bool {
        self.starved && self.probes.iter().any(|p| p.pending() > 0)
    }

    /// Buffers outside the allocator: in channels, return rings or held.
    /// Zero for a stack at rest: a leak shows here.
    pub fn outstanding(&mut self) -> usize {
        self.reclaim();
        self.pool.count() - self.free.len()
    }

    fn reclaim(&mut self) {
        for r in &mut self.returns {
            while let Some(id) = r.pop() {
                debug_assert!(!self.free.contains(&id), "pool {}: buffer {id} freed twice", self.pool.name);
                self.free.push(id);
            }
            r.release();
        }
        if !self.free.is_empty() {
            self.starved = false;
        }
    }
}

/// A freeing end of a pool: returns buffers to the allocator.
pub struct Freer {
    pool: Arc<Pool>,
    ret: Producer<BufId>,
    staged: bool,
    bell: Arc<Bell>,
}

impl Freer {
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Stages `id` for return; visible to the allocator at [`Freer::flush`].
    pub fn free(&mut self, id: BufId) {
        debug_assert!((id as usize) < self.pool.count());
        if self.ret.push(id).is_err() {
            unreachable!("pool {}: a return ring holds the whole pool", self.pool.name);
        }
        self.staged = true;
    }

    /// Publishes staged returns and rings the allocator's bell.
    pub fn flush(&mut self) {
        if self.staged {
            self.ret.publish();
            self.staged = false;
            self.bell.ring();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bell() -> Arc<Bell> {
        Bell::new()
    }

    #[test]
    fn buffers_cycle_through_freers_and_are_counted() {
        let (mut a, mut f) = Pool::create("t", 4, 16, 2, bell());
        let ids: Vec<_> = (0..4).map(|_| a.alloc().unwrap()).collect();
        assert_eq!(ids, [0, 1, 2, 3]);
        assert_eq!(a.alloc(), None, "the pool has only four buffers");
        assert_eq!(a.outstanding(), 4);
        f[0].free(1);
        f[1].free(3);
        assert_eq!(a.available(), 0, "returns are invisible before flush");
        assert!(!a.refill_waiting());
        f[0].flush();
        f[1].flush();
        assert!(a.refill_waiting(), "it ran out, and buffers came back");
        assert_eq!(a.available(), 2);
        assert!(!a.refill_waiting());
        assert_eq!(a.outstanding(), 2);
        // Returns to an allocator that has not run out are not work.
        let id = a.alloc().unwrap();
        f[0].free(id);
        f[0].flush();
        assert!(!a.refill_waiting());
    }

    #[test]
    fn a_buffer_keeps_its_bytes_and_alloc_clears_it() {
        let (mut a, mut f) = Pool::create("t", 1, 8, 1, bell());
        let id = a.alloc().unwrap();
        let pool = a.pool().clone();
        pool.with(id, |b| b.extend_from_slice(b"abc"));
        assert_eq!(pool.with(id, |b| b.clone()), b"abc");
        f[0].free(id);
        f[0].flush();
        let id = a.alloc().unwrap();
        assert!(pool.with(id, |b| b.is_empty()));
    }

    #[test]
    #[should_panic(expected = "two owners")]
    fn a_second_owner_is_caught() {
        let (mut a, _f) = Pool::create("t", 1, 8, 1, bell());
        let id = a.alloc().unwrap();
        let pool = a.pool().clone();
        pool.with(id, |_| pool.with(id, |_| ()));
    }

    #[test]
    fn a_buffer_poisoned_by_a_crash_is_recovered() {
        let (mut a, _f) = Pool::create("t", 1, 8, 1, bell());
        let id = a.alloc().unwrap();
        let pool = a.pool().clone();
        let p2 = pool.clone();
        let crashed = std::panic::catch_unwind(move || {
            p2.with(id, |b| {
                b.push(7);
                panic!("crash while holding the buffer")
            })
        });
        assert!(crashed.is_err());
        assert_eq!(pool.with(id, |b| b.clone()), [7], "the owner gets its bytes back");
    }

    #[test]
    fn freeing_wakes_a_parked_allocator() {
        let b = bell();
        let (mut a, mut f) = Pool::create("t", 1, 8, 1, b.clone());
        let id = a.alloc().unwrap();
        assert_eq!(a.alloc(), None, "the allocator runs out");
        let t = std::thread::spawn(move || {
            let woke = b
                .waiter()
                .wait_until(&dyncore_ring::SpinPolicy::PARK, None, || a.refill_waiting().then_some(()));
            assert!(woke.is_some());
            a.available()
        });
        std::thread::sleep(std::time::Duration::from_millis(5));
        f[0].free(id);
        f[0].flush();
        assert_eq!(t.join().unwrap(), 1);
    }
}
