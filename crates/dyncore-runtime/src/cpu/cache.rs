//! Per-CPU memory caches over a shared block pool (the slab allocator's
//! per-CPU arrays, which hotplug drains and Bolt keeps).
//!
//! The [`Pool`] owns every block's memory and a state word per block:
//! `FREE` (in the pool's free list), `CACHED` (in some CPU's [`CpuCache`]),
//! or `ALLOCATED` (held by a task as a [`Block`]). A task allocates from the
//! cache of the CPU it runs on and frees into the cache of the CPU it runs
//! on then (which may be another one, after a migration), as slab does.
//! Freeing a cache returns its blocks to the pool.
//!
//! Accounting (see [`MemoryReport`]): every state change is a checked
//! transition, so a double free is detected (and counted) instead of
//! corrupting a list; a leak shows as blocks still `ALLOCATED` once every
//! task is done; every cache ever created is either live (held by exactly one
//! CPU) or freed exactly once (`caches_created = caches_freed + live`).

use std::cell::UnsafeCell;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use super::sync::lock;

/// Bytes in one block.
pub const BLOCK_BYTES: usize = 64;

const FREE: u8 = 0;
const CACHED: u8 = 1;
const ALLOCATED: u8 = 2;

static NEXT_POOL_ID: AtomicU64 = AtomicU64::new(1);

/// Why an allocation or free failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemError {
    /// The pool has no free block left.
    OutOfMemory,
    /// The block was not allocated (freed twice), or the CPU has no cache.
    DoubleFree { slot: u32 },
    /// The block belongs to another runtime's pool.
    ForeignBlock,
    /// The CPU running the task has no cache (a runtime defect: an online
    /// CPU always has one).
    NoCache,
}

impl std::fmt::Display for MemError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemError::OutOfMemory => f.write_str("block pool exhausted"),
            MemError::DoubleFree { slot } => write!(f, "block {slot} freed but not allocated (double free)"),
            MemError::ForeignBlock => f.write_str("block belongs to another runtime"),
            MemError::NoCache => f.write_str("this CPU has no memory cache"),
        }
    }
}

impl std::error::Error for MemError {}

/// A block held by a task: move-only, so it is freed at most once by
/// construction; the pool checks anyway.
#[derive(Debug)]
pub struct Block {
    pool: u64,
    slot: u32,
}

impl Block {
    /// The block's index in the pool (for diagnostics).
    pub fn slot(&self) -> u32 {
        self.slot
    }
}

/// A CPU's cache: free blocks reserved for it.
#[derive(Debug)]
pub(crate) struct CpuCache {
    id: u64,
    slots: Vec<u32>,
}

impl CpuCache {
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }
}

/// Counts for the accounting checks (exact only when no task runs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryReport {
    pub blocks_total: usize,
    pub blocks_free: usize,
    pub blocks_cached: usize,
    pub blocks_allocated: usize,
    pub double_frees: u64,
    pub caches_created: u64,
    pub caches_freed: u64,
    /// Caches neither freed nor held by a CPU (should be 0).
    pub caches_unaccounted: u64,
}

pub(crate) struct Pool {
    id: u64,
    mem: Box<[UnsafeCell<[u8; BLOCK_BYTES]>]>,
    state: Box<[AtomicU8]>,
    free: Mutex<Vec<u32>>,
    /// Blocks a new cache is filled with; refills and flushes move half.
    cache_blocks: usize,
    next_cache: AtomicU64,
    live_caches: Mutex<BTreeSet<u64>>,
    caches_freed: AtomicU64,
    double_frees: AtomicU64,
}

// SAFETY: the only non-Sync field is `mem`. A block's bytes are reached only
// through `Pool::bytes`, which requires `&mut Block` for that slot; a `Block`
// is created once per ALLOCATED transition and consumed by `free`, and is
// neither `Clone` nor `Copy`, so at most one thread can reach a slot's bytes
// at a time.
unsafe impl Sync for Pool {}

impl Pool {
    pub(crate) fn new(blocks: usize, cache_blocks: usize) -> Pool {
        assert!(blocks <= u32::MAX as usize, "pool too large");
        Pool {
            id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
            mem: (0..blocks).map(|_| UnsafeCell::new([0; BLOCK_BYTES])).collect(),
            state: (0..blocks).map(|_| AtomicU8::new(FREE)).collect(),
            free: Mutex::new((0..blocks as u32).rev().collect()),
            cache_blocks: cache_blocks.max(2),
            next_cache: AtomicU64::new(1),
            live_caches: Mutex::new(BTreeSet::new()),
            caches_freed: AtomicU64::new(0),
            double_frees: AtomicU64::new(0),
        }
    }

    fn transition(&self, slot: u32, from: u8, to: u8) -> bool {
        self.state[slot as usize].compare_exchange(from, to, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Moves up to `n` free blocks from the pool into `cache`.
    fn refill(&self, cache: &mut CpuCache, n: usize) {
        let mut free = lock(&self.free);
        for _ in 0..n {
            let Some(s) = free.pop() else { break };
            let ok = self.transition(s, FREE, CACHED);
            debug_assert!(ok, "block {s} on the free list was not free");
            cache.slots.push(s);
        }
    }

    /// A new cache, filled with `cache_blocks` blocks (fewer if the pool
    /// runs short).
    pub(crate) fn new_cache(&self) -> CpuCache {
        let id = self.next_cache.fetch_add(1, Ordering::Relaxed);
        lock(&self.live_caches).insert(id);
        let mut c = CpuCache { id, slots: Vec::with_capacity(self.cache_blocks * 2) };
        self.refill(&mut c, self.cache_blocks);
        c
    }

    /// Returns every block of `cache` to the pool and retires the cache.
    pub(crate) fn free_cache(&self, cache: CpuCache) {
        let was_live = lock(&self.live_caches).remove(&cache.id);
        assert!(was_live, "cache {} freed twice", cache.id);
        self.caches_freed.fetch_add(1, Ordering::Relaxed);
        self.uncache(cache.slots);
    }

    /// Moves cached blocks back to the pool's free list.
    fn uncache(&self, slots: impl IntoIterator<Item = u32>) {
        let mut free = lock(&self.free);
        for s in slots {
            let ok = self.transition(s, CACHED, FREE);
            debug_assert!(ok, "block {s} in a cache was not cached");
            free.push(s);
        }
    }

    pub(crate) fn alloc(&self, cache: &mut CpuCache) -> Result<Block, MemError> {
        if cache.slots.is_empty() {
            self.refill(cache, self.cache_blocks / 2);
        }
        let slot = cache.slots.pop().ok_or(MemError::OutOfMemory)?;
        let ok = self.transition(slot, CACHED, ALLOCATED);
        debug_assert!(ok, "block {slot} in a cache was not cached");
        Ok(Block { pool: self.id, slot })
    }

    pub(crate) fn free(&self, cache: &mut CpuCache, b: Block) -> Result<(), MemError> {
        if b.pool != self.id {
            return Err(MemError::ForeignBlock);
        }
        if !self.transition(b.slot, ALLOCATED, CACHED) {
            self.double_frees.fetch_add(1, Ordering::Relaxed);
            return Err(MemError::DoubleFree { slot: b.slot });
        }
        cache.slots.push(b.slot);
        if cache.slots.len() > self.cache_blocks * 2 {
            // Too many cached: give half back, as slab flushes its arrays.
            let keep = cache.slots.len() - self.cache_blocks;
            self.uncache(cache.slots.drain(keep..));
        }
        Ok(())
    }

    /// The bytes of `b`.
    pub(crate) fn bytes<'a>(&'a self, b: &'a mut Block) -> &'a mut [u8; BLOCK_BYTES] {
        assert_eq!(b.pool, self.id, "block from another runtime's pool");
        debug_assert_eq!(self.state[b.slot as usize].load(Ordering::Acquire), ALLOCATED);
        // SAFETY: `b` is the unique handle of an ALLOCATED slot (see the
        // `Sync` impl), borrowed mutably for 'a, and the pool outlives 'a;
        // so no other reference to this slot's bytes exists during 'a.
        unsafe { &mut *self.mem[b.slot as usize].get() }
    }

    /// Block and cache counts. `held` lists the caches CPUs hold now.
    pub(crate) fn report<'a>(&self, held: impl Iterator<Item = &'a CpuCache>) -> MemoryReport {
        let mut r = MemoryReport { blocks_total: self.state.len(), ..Default::default() };
        for s in self.state.iter() {
            match s.load(Ordering::Acquire) {
                FREE => r.blocks_free += 1,
                CACHED => r.blocks_cached += 1,
                _ => r.blocks_allocated += 1,
            }
        }
        r.double_frees = self.double_frees.load(Ordering::Relaxed);
        r.caches_freed = self.caches_freed.load(Ordering::Relaxed);
        r.caches_created = self.next_cache.load(Ordering::Relaxed) - 1;
        let mut live = lock(&self.live_caches).clone();
        let mut held_blocks = 0;
        for c in held {
            held_blocks += c.len();
            // A cache held by two CPUs, or held but retired, is unaccounted.
            if !live.remove(&c.id) {
                r.caches_unaccounted += 1;
            }
            debug_assert!(c.slots.iter().all(|&s| self.state[s as usize].load(Ordering::Acquire) == CACHED));
        }
        r.caches_unaccounted += live.len() as u64;
        debug_assert_eq!(lock(&self.free).len(), r.blocks_free);
        if held_blocks != r.blocks_cached {
            r.caches_unaccounted += 1;
        }
        r
    }
}
