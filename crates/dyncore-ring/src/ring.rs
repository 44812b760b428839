//! A single-producer single-consumer ring of cache-line slots for streams
//! (the NewtOS component queues), with batched publication of head and tail.
//!
//! `head` counts items published by the producer, `tail` items released by
//! the consumer; both are free-running `usize` counters (wrapping), each on
//! its own cache line (`CachePadded`). Each item occupies one cache-line
//! cell, so producer and consumer never write the same line.
//!
//! Protocol:
//!
//! 1. The producer writes cell `h % cap` for its private `h` while
//!    `h - tail < cap` (re-reading `tail`, acquire, only when its cached copy
//!    says the ring is full), and advances its private `h` (staged).
//! 2. [`Producer::publish`] stores `head = h` (release): every staged item
//!    becomes visible at once — one shared-line write per batch.
//! 3. The consumer reads cell `t % cap` for its private `t` while `t < head`
//!    (re-reading `head`, acquire, only when its cached copy is exhausted).
//! 4. [`Consumer::release`] stores `tail = t` (release), handing the cells
//!    back at once.
//!
//! Invariants: `tail <= head <= tail + cap` (checked in debug builds); a
//! cell between `tail` and `head` is read only by the consumer, any other
//! cell written only by the producer.
//!
//! **Handles that come and go.** [`ring`] makes a ring and its two handles
//! at once. [`shared`] makes only the ring's memory ([`RingRef`]); handles
//! are then *attached* to it ([`RingRef::attach_producer`],
//! [`RingRef::attach_consumer`]), at most one of each kind at a time, and an
//! attached handle starts at the ring's *published* positions: a producer at
//! `head`, a consumer at `tail`. Dropping an attached handle neither
//! publishes nor releases anything, so whatever it staged is forgotten and
//! the next handle starts where the last published positions say. This is
//! what a restarted component needs: the ring outlives the component, and
//! the component's private positions die with it. Such handles do not
//! publish or release themselves; an owner that commits several rings at
//! once (see [`crate::journal`]) stores their positions with
//! [`RingRef::set_head`] and [`RingRef::set_tail`], reading the staged ones
//! with [`Producer::position`] and [`Consumer::position`].

use std::mem::MaybeUninit;

use crossbeam_utils::CachePadded;

use crate::sync::{Arc, AtomicBool, AtomicUsize, Ordering, UnsafeCell};

/// One item's cell: exactly one cache line for items up to 64 bytes.
#[repr(C, align(64))]
struct Cell<T>(UnsafeCell<MaybeUninit<T>>);

#[cfg(not(dyncore_loom))]
const _: () = assert!(size_of::<Cell<[u8; 64]>>() == 64 && size_of::<Cell<u64>>() == 64);

struct Shared<T> {
    head: CachePadded<AtomicUsize>,
    tail: CachePadded<AtomicUsize>,
    /// A producer (consumer) handle is attached.
    producer_alive: AtomicBool,
    consumer_alive: AtomicBool,
    cells: Box<[Cell<T>]>,
}

// SAFETY: cells are accessed only under the ring protocol (module docs):
// each cell has exactly one accessor at a time, handed over with
// release/acquire on `head`/`tail`; items are `Send`.
unsafe impl<T: Send> Sync for Shared<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Shared<T> {}

impl<T> Shared<T> {
    fn cap(&self) -> usize {
        self.cells.len()
    }
}

/// Creates a ring holding `capacity` items (rounded up to a power of two).
pub fn ring<T: Copy + Send>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let r = shared(capacity);
    let mut p = r.attach_producer();
    p.owns_positions = true;
    (p, r.attach_consumer())
}

/// Creates a ring's memory holding `capacity` items (rounded up to a power
/// of two), with no handle attached (see the module docs).
pub fn shared<T: Copy + Send>(capacity: usize) -> RingRef<T> {
    #[cfg(not(dyncore_loom))]
    let () = Producer::<T>::FITS;
    let cap = capacity.max(1).next_power_of_two();
    RingRef(Arc::new(Shared {
        head: CachePadded::new(AtomicUsize::new(0)),
        tail: CachePadded::new(AtomicUsize::new(0)),
        producer_alive: AtomicBool::new(false),
        consumer_alive: AtomicBool::new(false),
        cells: (0..cap).map(|_| Cell(UnsafeCell::new(MaybeUninit::uninit()))).collect(),
    }))
}

/// A ring's memory, which outlives the handles attached to it (see the
/// module docs).
pub struct RingRef<T>(Arc<Shared<T>>);

impl<T> Clone for RingRef<T> {
    fn clone(&self) -> Self {
        RingRef(self.0.clone())
    }
}

impl<T: Copy + Send> RingRef<T> {
    /// Attaches the producer handle at the published `head`.
    ///
    /// Panics if a producer is attached already: two producers would break
    /// the single-producer protocol.
    pub fn attach_producer(&self) -> Producer<T> {
        let was = self.0.producer_alive.swap(true, Ordering::AcqRel);
        assert!(!was, "a ring has one producer at a time");
        let head = self.0.head.load(Ordering::Acquire);
        let tail = self.0.tail.load(Ordering::Acquire);
        Producer { shared: self.0.clone(), head, published: head, tail_cache: tail, owns_positions: false }
    }

    /// Attaches the consumer handle at the released `tail`.
    ///
    /// Panics if a consumer is attached already.
    pub fn attach_consumer(&self) -> Consumer<T> {
        let was = self.0.consumer_alive.swap(true, Ordering::AcqRel);
        assert!(!was, "a ring has one consumer at a time");
        let tail = self.0.tail.load(Ordering::Acquire);
        Consumer { shared: self.0.clone(), tail, released: tail, head_cache: tail }
    }
}

impl<T> RingRef<T> {
    /// Items the ring holds.
    pub fn capacity(&self) -> usize {
        self.0.cap()
    }

    /// The published head (items ever published).
    pub fn head(&self) -> usize {
        self.0.head.load(Ordering::Acquire)
    }

    /// The released tail (items ever released).
    pub fn tail(&self) -> usize {
        self.0.tail.load(Ordering::Acquire)
    }

    /// Publishes up to `head` (2), for the owner of the producer's
    /// positions (module docs). It never moves backwards, and never past
    /// `tail + capacity`.
    pub fn set_head(&self, head: usize) {
        let tail = self.0.tail.load(Ordering::Acquire);
        let old = self.0.head.load(Ordering::Relaxed);
        assert!(
            head.wrapping_sub(old) <= self.0.cap() && head.wrapping_sub(tail) <= self.0.cap(),
            "a ring's head moves forward within its capacity (old {old}, new {head}, tail {tail})"
        );
        self.0.head.store(head, Ordering::Release);
    }

    /// Releases up to `tail` (4), for the owner of the consumer's
    /// positions. It never moves backwards, and never past `head`.
    pub fn set_tail(&self, tail: usize) {
        let head = self.0.head.load(Ordering::Acquire);
        let old = self.0.tail.load(Ordering::Relaxed);
        assert!(
            tail.wrapping_sub(old) <= head.wrapping_sub(old),
            "a ring's tail moves forward, never past its head (old {old}, new {tail}, head {head})"
        );
        self.0.tail.store(tail, Ordering::Release);
    }

    /// A read-only view (see [`Consumer::probe`]).
    pub fn probe(&self) -> Probe<T> {
        Probe { shared: self.0.clone() }
    }

    /// What identifies the head word ([`crate::journal::Word::key`]).
    pub fn head_key(&self) -> usize {
        &*self.0.head as *const AtomicUsize as usize
    }

    /// What identifies the tail word.
    pub fn tail_key(&self) -> usize {
        &*self.0.tail as *const AtomicUsize as usize
    }

    /// Whether two references name the same ring.
    pub fn same(&self, other: &RingRef<T>) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The writing end.
pub struct Producer<T> {
    shared: Arc<Shared<T>>,
    /// Next cell to write (staged, maybe unpublished).
    head: usize,
    published: usize,
    tail_cache: usize,
    /// Made by [`ring`]: it publishes what it staged when dropped. An
    /// attached handle forgets it instead (module docs).
    owns_positions: bool,
}

impl<T: Copy + Send> Producer<T> {
    #[cfg(not(dyncore_loom))]
    const FITS: () = assert!(size_of::<Cell<T>>() == 64, "ring items must fit one cache line");

    /// Free cells (reads the consumer's `tail`).
    fn free(&mut self) -> usize {
        self.tail_cache = self.shared.tail.load(Ordering::Acquire);
        self.shared.cap() - self.head.wrapping_sub(self.tail_cache)
    }

    /// Stages `v` (1); invisible to the consumer until [`Producer::publish`].
    /// Gives `v` back when the ring is full.
    pub fn push(&mut self, v: T) -> Result<(), T> {
        let cap = self.shared.cap();
        if self.head.wrapping_sub(self.tail_cache) == cap && self.free() == 0 {
            return Err(v);
        }
        debug_assert!(self.head.wrapping_sub(self.tail_cache) < cap, "producer overran the consumer");
        let cell = &self.shared.cells[self.head & (cap - 1)];
        // SAFETY: `head - tail < cap`, so the consumer has released this cell
        // (acquire on `tail` in `free`) and will not read it before we
        // publish a head past it: only we access it now.
        cell.0.with_mut(|p| unsafe { (*p).write(v) });
        self.head = self.head.wrapping_add(1);
        Ok(())
    }

    /// [`Producer::push`] then [`Producer::publish`].
    pub fn send(&mut self, v: T) -> Result<(), T> {
        self.push(v)?;
        self.publish();
        Ok(())
    }

    /// Whether the consumer has been dropped.
    pub fn is_abandoned(&self) -> bool {
        !self.shared.consumer_alive.load(Ordering::Acquire)
    }

    /// The staged head: items pushed since the ring was made (published or
    /// not). What an owner of the positions publishes with
    /// [`RingRef::set_head`].
    pub fn position(&self) -> usize {
        self.head
    }
}

impl<T> Producer<T> {
    /// Publishes every staged item with one release store of `head` (2).
    pub fn publish(&mut self) {
        if self.published != self.head {
            self.shared.head.store(self.head, Ordering::Release);
            self.published = self.head;
        }
    }
}

impl<T> Drop for Producer<T> {
    fn drop(&mut self) {
        if self.owns_positions {
            // Staged items are published so nothing pushed is lost.
            self.publish();
        }
        self.shared.producer_alive.store(false, Ordering::Release);
    }
}

/// The reading end.
pub struct Consumer<T> {
    shared: Arc<Shared<T>>,
    /// Next cell to read (maybe not yet released).
    tail: usize,
    released: usize,
    head_cache: usize,
}

impl<T: Copy + Send> Consumer<T> {
    /// Takes the next published item (3); its cell goes back to the producer
    /// at the next [`Consumer::release`].
    pub fn pop(&mut self) -> Option<T> {
        if self.tail == self.head_cache {
            self.head_cache = self.shared.head.load(Ordering::Acquire);
            if self.tail == self.head_cache {
                return None;
            }
        }
        debug_assert!(
            self.head_cache.wrapping_sub(self.tail) <= self.shared.cap(),
            "head ran past tail + cap"
        );
        let cell = &self.shared.cells[self.tail & (self.shared.cap() - 1)];
        // SAFETY: `tail < head` (acquire), so the producer wrote this cell
        // before its release of `head`, and will not write it again until we
        // release a tail past it.
        let v = cell.0.with(|p| unsafe { (*p).assume_init_read() });
        self.tail = self.tail.wrapping_add(1);
        Some(v)
    }

    /// Hands every consumed cell back with one release store of `tail` (4).
    pub fn release(&mut self) {
        if self.released != self.tail {
            self.shared.tail.store(self.tail, Ordering::Release);
            self.released = self.tail;
        }
    }

    /// [`Consumer::pop`] then [`Consumer::release`].
    pub fn recv(&mut self) -> Option<T> {
        let v = self.pop()?;
        self.release();
        Some(v)
    }

    /// Whether the producer has been dropped (after which no more items come
    /// beyond those already published).
    pub fn is_abandoned(&self) -> bool {
        !self.shared.producer_alive.load(Ordering::Acquire)
    }

    /// A read-only view for a third party (a polling core) that asks how
    /// many items wait, without consuming them.
    pub fn probe(&self) -> Probe<T> {
        Probe { shared: self.shared.clone() }
    }

    /// The private tail: items taken since the ring was made (released or
    /// not). What an owner of the positions releases with
    /// [`RingRef::set_tail`].
    pub fn position(&self) -> usize {
        self.tail
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        self.shared.consumer_alive.store(false, Ordering::Release);
    }
}

/// Sees how many items are published but not yet released in a ring.
pub struct Probe<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Probe<T> {
    /// Items published and not yet released (a snapshot).
    pub fn pending(&self) -> usize {
        let tail = self.shared.tail.load(Ordering::Acquire);
        let head = self.shared.head.load(Ordering::Acquire);
        head.wrapping_sub(tail)
    }

    /// Items published since the ring was made (the free-running head): a
    /// poller that remembers it sees new arrivals even if they were
    /// consumed in the meantime.
    pub fn published(&self) -> usize {
        self.shared.head.load(Ordering::Acquire)
    }
}
