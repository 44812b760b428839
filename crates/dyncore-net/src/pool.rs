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
//! hands the index back through its own return channel to the allocator,
//! so the pool needs no lock and no multi-producer queue. The free list *is*
//! those channels: a [`PoolRef`] has one return channel per freer plus one
//! that holds every buffer when the pool is made, and allocating is taking
//! the next index from one of them. So a pool's state lives in channels
//! outside the components: an allocation or a free is staged in its
//! component's journal like any message ([`crate::chan`]), and a component
//! restarted in fresh memory neither loses nor frees twice a buffer its
//! crashed instance touched.
//!
//! Invariants:
//! * every buffer is in exactly one place: a return channel (free), a
//!   channel between components, or held by one component (for one step,
//!   or, for TCP, until a call completes); [`PoolRef::outstanding`] counts
//!   the buffers outside the return channels, and a stack at rest has none
//!   out;
//! * a buffer has exactly one owner at a time. Each buffer sits behind a
//!   `Mutex` that is never contended when the protocol is kept, so [`Pool::with`]
//!   takes it with `try_lock` and panics if it is held: a second owner is a
//!   bug, and this is where it shows. A mutex poisoned by a component that
//!   crashed mid-step is recovered, because the message that owns the buffer
//!   is redelivered to the restarted component (see [`crate::chan`]);
//! * a return channel can hold the whole pool, so freeing never fails.

use std::sync::{Arc, Mutex, TryLockError};

use dyncore_ring::journal::WordRef;

use crate::chan::{Bell, Channel, Inbox, Log, Outbox};

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
    /// and `freers` freers, attached directly (applications, tests; a stack
    /// uses [`PoolRef`]). `alloc_bell` is rung when freed buffers are
    /// published, so an allocator that parked waiting for buffers wakes.
    pub fn create(
        name: &'static str,
        count: usize,
        buf_bytes: usize,
        freers: usize,
        alloc_bell: Arc<Bell>,
    ) -> (Alloc, Vec<Freer>) {
        let r = PoolRef::create(name, count, buf_bytes, freers, alloc_bell);
        let log = Log::Direct;
        (r.alloc(&log), (0..freers).map(|i| r.freer(i, &log)).collect())
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

/// A pool and its return channels: what outlives the components that
/// allocate and free its buffers (see the module docs). Cloning shares it.
#[derive(Clone)]
pub struct PoolRef {
    pool: Arc<Pool>,
    /// `returns[0]` holds every buffer when the pool is made; `returns[i + 1]`
    /// is freer `i`'s.
    returns: Vec<Channel<BufId>>,
}

impl PoolRef {
    /// A pool of `count` buffers of `buf_bytes` each with `freers` return
    /// channels; freeing rings `alloc_bell`.
    pub fn create(
        name: &'static str,
        count: usize,
        buf_bytes: usize,
        freers: usize,
        alloc_bell: Arc<Bell>,
    ) -> PoolRef {
        assert!(count > 0 && count <= BufId::MAX as usize, "pool {name}: {count} buffers");
        let pool = Arc::new(Pool {
            name,
            buf_bytes,
            bufs: (0..count).map(|_| Mutex::new(Vec::with_capacity(buf_bytes))).collect(),
        });
        // A return channel holds the whole pool: freeing can never fail.
        let returns: Vec<Channel<BufId>> =
            (0..=freers).map(|_| Channel::new(name, count, alloc_bell.clone())).collect();
        let mut all = returns[0].outbox(&Log::Direct);
        for id in 0..count as BufId {
            all.push(id);
        }
        all.publish();
        PoolRef { pool, returns }
    }

    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Attaches the allocator (one at a time).
    pub fn alloc(&self, log: &Log) -> Alloc {
        Alloc {
            pool: self.pool.clone(),
            rings: self.returns.iter().map(|c| c.inbox(log)).collect(),
            peeked: None,
            starved: false,
        }
    }

    /// Attaches freer `i` (one at a time).
    pub fn freer(&self, i: usize, log: &Log) -> Freer {
        Freer { pool: self.pool.clone(), out: self.returns[i + 1].outbox(log) }
    }

    /// The words the allocator's journal commits.
    pub fn alloc_words(&self) -> Vec<WordRef> {
        self.returns.iter().map(Channel::tail_word).collect()
    }

    /// The word freer `i`'s journal commits.
    pub fn freer_word(&self, i: usize) -> WordRef {
        self.returns[i + 1].head_word()
    }

    /// Buffers outside the return channels (committed positions): in
    /// channels between components or held. Zero for a stack at rest: a
    /// leak shows here. Exact at rest; while buffers move, the return
    /// channels are read one after another, so a buffer that leaves one and
    /// reaches another between the two reads is counted free twice, and
    /// the figure is a lower bound (never below 0). Wait for rest on two
    /// readings in a row, not one.
    pub fn outstanding(&self) -> usize {
        let free: usize = self.returns.iter().map(Channel::pending).sum();
        self.pool.count().saturating_sub(free)
    }
}

/// The allocating end of a pool (one per pool): takes free buffers from the
/// return channels.
pub struct Alloc {
    pool: Arc<Pool>,
    rings: Vec<Inbox<BufId>>,
    /// The ring holding the buffer [`Alloc::peek`] found.
    peeked: Option<usize>,
    /// The last allocation found no buffer (cleared by one that finds
    /// some): the allocator waits for returns.
    starved: bool,
}

impl Alloc {
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// The next free buffer, without taking it (`None` when none is free
    /// now, or this poll's batch of every return channel is used up): a
    /// driver fills it and takes it only if a frame came.
    pub fn peek(&mut self) -> Option<BufId> {
        self.peeked = None;
        for (i, r) in self.rings.iter_mut().enumerate() {
            if let Some(id) = r.peek() {
                self.peeked = Some(i);
                self.starved = false;
                return Some(id);
            }
        }
        self.starved = true;
        None
    }

    /// Takes the buffer [`Alloc::peek`] found.
    pub fn take(&mut self) -> BufId {
        let i = self.peeked.take().expect("take after a peek that found a buffer");
        let r = &mut self.rings[i];
        let id = r.peek().expect("a peeked buffer stays until taken");
        r.commit();
        if r.is_direct() {
            r.release();
        }
        id
    }

    /// A free buffer (cleared), or `None` when every buffer is out.
    pub fn alloc(&mut self) -> Option<BufId> {
        self.peek()?;
        let id = self.take();
        self.pool.with(id, Vec::clear);
        Some(id)
    }

    /// Whether a buffer can be allocated now.
    pub fn has_free(&mut self) -> bool {
        self.peek().is_some()
    }

    /// End of a poll (see [`Inbox::release`]).
    pub fn release(&mut self) {
        for r in &mut self.rings {
            r.release();
        }
    }

    /// Whether the allocator ran out (an allocation found nothing) and
    /// freers have returned buffers since: the wake condition of a component
    /// parked for want of buffers. An allocator that has not run out does
    /// not wait for returns, so they do not count as work.
    pub fn refill_waiting(&self) -> bool {
        self.starved && self.rings.iter().any(Inbox::has_work)
    }
}

/// A freeing end of a pool: returns buffers to the allocator.
pub struct Freer {
    pool: Arc<Pool>,
    out: Outbox<BufId>,
}

impl Freer {
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Stages `id` for return; visible to the allocator at [`Freer::flush`]
    /// (or its journal's commit).
    pub fn free(&mut self, id: BufId) {
        debug_assert!((id as usize) < self.pool.count());
        self.out.push(id);
    }

    /// Publishes staged returns and rings the allocator's bell (a direct
    /// end).
    pub fn flush(&mut self) {
        self.out.publish();
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
        let r = PoolRef::create("t", 4, 16, 2, bell());
        let mut a = r.alloc(&Log::Direct);
        let mut f: Vec<Freer> = (0..2).map(|i| r.freer(i, &Log::Direct)).collect();
        let ids: Vec<_> = (0..4).map(|_| a.alloc().unwrap()).collect();
        assert_eq!(ids, [0, 1, 2, 3]);
        assert_eq!(a.alloc(), None, "the pool has only four buffers");
        assert_eq!(r.outstanding(), 4);
        f[0].free(1);
        f[1].free(3);
        assert!(!a.has_free(), "returns are invisible before flush");
        assert!(!a.refill_waiting());
        f[0].flush();
        f[1].flush();
        assert!(a.refill_waiting(), "it ran out, and buffers came back");
        assert_eq!(r.outstanding(), 2);
        assert_eq!((a.alloc(), a.alloc(), a.alloc()), (Some(1), Some(3), None));
        assert_eq!(r.outstanding(), 4);
        // Returns to an allocator that has not run out are not work.
        f[0].free(1);
        f[0].flush();
        let id = a.alloc().unwrap();
        f[0].free(id);
        f[0].flush();
        assert!(!a.refill_waiting());
    }

    #[test]
    fn a_journaled_allocation_or_free_shows_only_when_committed_and_a_crash_forgets_it() {
        use dyncore_ring::journal::Journal;
        let r = PoolRef::create("t", 2, 8, 1, bell());
        let mut words = r.alloc_words();
        words.push(r.freer_word(0));
        let j = Arc::new(Journal::new(words));
        let log = Log::Journal(j.clone());
        let (mut a, f) = (r.alloc(&log), r.freer(0, &log));
        let id = a.alloc().unwrap();
        assert_eq!(r.outstanding(), 0, "an allocation shows at the commit");
        drop((a, f));
        j.recover();
        // The crashed allocation is forgotten: the same buffer comes first.
        let (mut a, mut f) = (r.alloc(&log), r.freer(0, &log));
        assert_eq!(a.alloc(), Some(id));
        a.release();
        j.commit_now();
        assert_eq!(r.outstanding(), 1);
        f.free(id);
        drop((a, f));
        j.recover();
        assert_eq!(r.outstanding(), 1, "an uncommitted free is forgotten: no double free later");
        let (mut a, mut f) = (r.alloc(&log), r.freer(0, &log));
        f.free(id);
        j.commit_now();
        assert_eq!(r.outstanding(), 0);
        assert!(a.alloc().is_some() && a.alloc().is_some() && a.alloc().is_none());
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
            a.alloc()
        });
        std::thread::sleep(std::time::Duration::from_millis(5));
        f[0].free(id);
        f[0].flush();
        assert_eq!(t.join().unwrap(), Some(id));
    }
}
