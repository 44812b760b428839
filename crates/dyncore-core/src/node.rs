//! Node managers (Chameleon §3.2, §4.2, §4.3.5): which CPUs of a node form
//! which thread's execution object.
//!
//! A node manager holds the open requests of its node (a thread asking for a
//! `sequential` object of some size, with a weight) and, whenever demand or
//! supply changes, recomputes the assignment:
//!
//! 1. **Pool.** CPUs of the node not busy with native threads are the pool
//!    that sequential requests share.
//! 2. **Sizes, by weight.** Requests are ordered by weight (ties: first come)
//!    and raised in rounds — every request to 1 CPU, then to 2, then to 4 —
//!    while the pool lasts. When demand exceeds supply this *splits the
//!    largest objects* and *reclaims CPUs from low-weight requests*; when an
//!    object is freed its CPUs go to the objects that got fewer than they
//!    asked, highest weight first.
//! 3. **Placement.** Objects are aligned blocks (pairs and quads; a pair is a
//!    hyperthread pair on SMT machines). A request keeps a block inside its
//!    current CPUs when it can (no migration). If the free CPUs suffice but
//!    no aligned block is free, the node is *fragmented*: all objects are
//!    re-placed from scratch and the requests that moved are reported as
//!    defragmentation migrations.
//! 4. **Overlay.** A request the pool gave fewer than 2 CPUs may have its
//!    object *extended* over CPUs busy with native threads, to the largest
//!    aligned block that contains the idle CPU it got (if it got one) and no
//!    CPU of another object. It never gives up an idle CPU, and never takes
//!    one that another object holds: when demand exceeds the idle supply,
//!    the rounds of step 2 split the largest objects and what is left runs
//!    on one idle CPU (§4.3.5). Whether the thread then borrows the busy
//!    CPUs is the cluster scheduler's decision, by virtual runtime and tax:
//!    the rate is the share of a contended CPU it gets, `1 / (1 + tax)`
//!    (§4.3.3, see `sched::tax`). Figure 3 is the case the overlay exists for: task A's
//!    idle CPU and task B's busy one form A's object, and taxation decides
//!    how much of B's CPU A gets.
//!
//! Every change of a request's CPUs is reported (the execution object is
//! notified and the scheduler re-queues the thread). Whether a thread's exit
//! triggers redistribution is the caller's choice (`notify`), so the paper's
//! `3*` experiment can turn it off.
//!
//! Invariant (asserted after every rebalance): objects are pairwise disjoint
//! — a CPU is in at most one non-nested object — and each lies in the node
//! on an aligned block.

use std::collections::BTreeMap;

use crate::exec::ExecObject;
use crate::topology::{Topology, aligned_block, aligned_blocks};
use crate::{CpuId, CpuSet};

/// Identifies the requesting thread.
pub type Requester = usize;

#[derive(Debug, Clone)]
struct Request {
    wanted: usize,
    weight: f64,
    arrival: u64,
    /// The CPUs of its object (empty: none).
    cpus: CpuSet,
}

/// A change of one request's object.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    pub thread: Requester,
    /// The new object (`None`: no object, run natively anywhere).
    pub object: Option<ExecObject>,
    /// The node manager moved the thread to defragment.
    pub defrag: bool,
}

/// The node manager of one node.
#[derive(Debug, Clone)]
pub struct NodeManager {
    node: usize,
    node_cpus: CpuSet,
    /// (first CPU, CPUs) of the node.
    first: CpuId,
    len: usize,
    max_fuse: usize,
    requests: BTreeMap<Requester, Request>,
    arrivals: u64,
    defrags: u64,
}

impl NodeManager {
    pub fn new(topology: &Topology, node: usize, max_fuse: usize) -> NodeManager {
        let (first, len) = topology.node_range(node);
        assert!(max_fuse.is_power_of_two() && max_fuse <= 4, "objects have 1, 2 or 4 CPUs");
        assert!(max_fuse <= len.max(1), "a fused object must fit its node");
        NodeManager {
            node,
            node_cpus: topology.node_cpus(node),
            first,
            len,
            max_fuse,
            requests: BTreeMap::new(),
            arrivals: 0,
            defrags: 0,
        }
    }

    pub fn requests(&self) -> usize {
        self.requests.len()
    }

    /// Times the node was found fragmented and re-packed.
    pub fn defragmentations(&self) -> u64 {
        self.defrags
    }

    /// Pool CPUs: not busy with native threads (free or in objects).
    pub fn pool(&self, native_busy: &CpuSet) -> usize {
        self.len - native_busy.intersection(&self.node_cpus).len()
    }

    /// Adds the CPUs of every object of this node to `set`.
    pub fn objects_into(&self, set: &mut CpuSet) {
        for r in self.requests.values() {
            set.extend_from(&r.cpus);
        }
    }

    /// The CPUs of `thread`'s current object (empty if none).
    pub fn object_of(&self, thread: Requester) -> CpuSet {
        self.requests.get(&thread).map(|r| r.cpus.clone()).unwrap_or_default()
    }

    /// A thread asks for an object of `wanted` CPUs. Returns every change
    /// (including the new thread's object).
    pub fn request(
        &mut self,
        thread: Requester,
        wanted: usize,
        weight: f64,
        native_busy: &CpuSet,
    ) -> Vec<Assignment> {
        let wanted = wanted.clamp(1, self.max_fuse).next_power_of_two().min(self.max_fuse);
        self.arrivals += 1;
        self.requests.insert(thread, Request { wanted, weight, arrival: self.arrivals, cpus: CpuSet::new() });
        self.rebalance(native_busy)
    }

    /// A thread exits or gives its object up. With `notify`, the freed CPUs
    /// are redistributed; without, they stay idle until the next request.
    pub fn release(&mut self, thread: Requester, notify: bool, native_busy: &CpuSet) -> Vec<Assignment> {
        if self.requests.remove(&thread).is_none() {
            return Vec::new();
        }
        if notify { self.rebalance(native_busy) } else { Vec::new() }
    }

    /// Recomputes sizes and placement; returns the requests whose CPUs changed.
    pub fn rebalance(&mut self, native_busy: &CpuSet) -> Vec<Assignment> {
        let busy = native_busy.intersection(&self.node_cpus);
        // Pool: CPUs not busy with native threads. CPUs of overlay objects are
        // busy with natives too and so are not in the pool.
        let pool = self.node_cpus.difference(&busy);
        // Priority order: weight descending, then arrival.
        let mut order: Vec<Requester> = self.requests.keys().copied().collect();
        order.sort_by(|a, b| {
            let (ra, rb) = (&self.requests[a], &self.requests[b]);
            rb.weight.total_cmp(&ra.weight).then(ra.arrival.cmp(&rb.arrival))
        });

        // Step 2: sizes from the pool, in rounds 1 -> 2 -> 4.
        let mut size: BTreeMap<Requester, usize> = BTreeMap::new();
        let mut left = pool.len();
        let mut target = 1;
        while target <= self.max_fuse {
            for &t in &order {
                let cur = size.get(&t).copied().unwrap_or(0);
                let want = self.requests[&t].wanted;
                if target <= want && cur < target && left >= target - cur {
                    left -= target - cur;
                    size.insert(t, target);
                }
            }
            target *= 2;
        }

        // Step 3: place pool objects, largest first (then by priority),
        // keeping current blocks. Requests keep their old CPUs until the commit.
        let mut by_size: Vec<Requester> = order.iter().copied().filter(|t| size.contains_key(t)).collect();
        by_size.sort_by_key(|t| std::cmp::Reverse(size[t]));
        let mut placed: BTreeMap<Requester, CpuSet> = BTreeMap::new();
        let mut defrag = false;
        if !self.place_all(&by_size, &size, &pool, true, &mut placed) {
            // Enough CPUs but no aligned blocks: fragmented. Re-pack from scratch.
            placed.clear();
            defrag = true;
            self.defrags += 1;
            // Re-packing largest-first into aligned blocks always fits when the
            // pool is itself made of aligned blocks; if not, shrink until it does.
            while !self.place_all(&by_size, &size, &pool, false, &mut placed) {
                placed.clear();
                // Halve the lowest-priority object that can shrink.
                let Some(t) = order.iter().rev().find(|t| size.get(t).is_some_and(|s| *s > 1)) else {
                    break;
                };
                *size.get_mut(t).expect("present") /= 2;
            }
        }

        // Step 4: overlays.
        self.overlay(&order, &mut placed);

        // Report changes and commit.
        let mut changes = Vec::new();
        for (&t, r) in self.requests.iter_mut() {
            let new = placed.remove(&t).unwrap_or_default();
            if new != r.cpus {
                let moved = !r.cpus.is_empty() && !new.is_empty() && new.first() != r.cpus.first();
                let object = (!new.is_empty()).then(|| ExecObject::new(&new));
                changes.push(Assignment { thread: t, object, defrag: defrag && moved });
                r.cpus = new;
            }
        }
        if let Err(e) = self.check() {
            panic!("node manager invariant broken: {e}");
        }
        changes
    }

    /// Step 4: extends each request that got fewer than 2 CPUs (or none) to
    /// the largest aligned block over busy CPUs that contains the idle CPU
    /// it got, if any, and no CPU of another object.
    fn overlay(&self, order: &[Requester], placed: &mut BTreeMap<Requester, CpuSet>) {
        for &t in order {
            let want = self.requests[&t].wanted;
            let own = placed.get(&t).and_then(CpuSet::first);
            let got = placed.get(&t).map(|c| c.len()).unwrap_or(0);
            if want < 2 || got >= 2 {
                continue;
            }
            let mut taken = CpuSet::new();
            for (other, c) in placed.iter() {
                if *other != t {
                    taken.extend_from(c);
                }
            }
            let mut sz = want;
            while sz >= 2 {
                let found = match own {
                    Some(cpu) => self.block_at(cpu, sz).filter(|b| b.is_disjoint(&taken)),
                    None => self.requests[&t]
                        .cpus
                        .first()
                        .and_then(|f| self.block_at(f, sz))
                        .filter(|b| b.is_disjoint(&taken))
                        .or_else(|| self.find_block(sz, &self.node_cpus, &taken)),
                };
                if let Some(block) = found {
                    placed.insert(t, block);
                    break;
                }
                sz /= 2;
            }
        }
    }

    /// Places every request of `sizes` inside `pool`. With `keep`, requests
    /// first keep the block of their new size around their old CPUs (no
    /// migration); the rest are placed first-fit. Returns false when some
    /// request finds no aligned block (fragmentation).
    fn place_all(
        &self,
        order: &[Requester],
        sizes: &BTreeMap<Requester, usize>,
        pool: &CpuSet,
        keep: bool,
        placed: &mut BTreeMap<Requester, CpuSet>,
    ) -> bool {
        let mut taken = CpuSet::new();
        if keep {
            for &t in order {
                let Some(first) = self.requests[&t].cpus.first() else { continue };
                if let Some(b) = self.block_at(first, sizes[&t])
                    && b.is_subset(pool)
                    && b.is_disjoint(&taken)
                {
                    taken.extend_from(&b);
                    placed.insert(t, b);
                }
            }
        }
        for &t in order {
            if placed.contains_key(&t) {
                continue;
            }
            match self.find_block(sizes[&t], pool, &taken) {
                Some(b) => {
                    taken.extend_from(&b);
                    placed.insert(t, b);
                }
                None => return false,
            }
        }
        true
    }

    /// The aligned block of `size` CPUs of this node containing `cpu`.
    fn block_at(&self, cpu: CpuId, size: usize) -> Option<CpuSet> {
        if !self.node_cpus.contains(cpu) {
            return None;
        }
        aligned_block(self.first, self.len, cpu, size)
    }

    /// The first aligned block of `size` CPUs inside `within`, disjoint from `taken`.
    fn find_block(&self, size: usize, within: &CpuSet, taken: &CpuSet) -> Option<CpuSet> {
        aligned_blocks(self.first, self.len, size).find(|b| b.is_subset(within) && b.is_disjoint(taken))
    }

    /// Objects are disjoint aligned blocks of the node.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = CpuSet::new();
        for (t, r) in &self.requests {
            if r.cpus.is_empty() {
                continue;
            }
            if !r.cpus.is_disjoint(&seen) {
                return Err(format!("thread {t}'s object {} overlaps another object", r.cpus));
            }
            if !r.cpus.is_subset(&self.node_cpus) {
                return Err(format!("thread {t}'s object {} leaves node {}", r.cpus, self.node));
            }
            let n = r.cpus.len();
            let first = r.cpus.first().expect("non-empty");
            if !n.is_power_of_two()
                || !(first - self.first).is_multiple_of(n)
                || r.cpus.last() != Some(first + n - 1)
            {
                return Err(format!("thread {t}'s object {} is not an aligned block", r.cpus));
            }
            if n > r.wanted {
                return Err(format!("thread {t} got {n} CPUs but asked for {}", r.wanted));
            }
            seen.extend_from(&r.cpus);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objs(nm: &NodeManager, ts: &[usize]) -> Vec<String> {
        ts.iter().map(|&t| nm.object_of(t).to_string()).collect()
    }

    #[test]
    fn idle_node_gives_full_quads() {
        // 10 idle CPUs: two quad requests get 0-3 and 4-7.
        let t = Topology::uniform(1, 10);
        let mut nm = NodeManager::new(&t, 0, 4);
        let none = CpuSet::new();
        nm.request(1, 4, 1.0, &none);
        nm.request(2, 4, 1.0, &none);
        assert_eq!(objs(&nm, &[1, 2]), ["0-3", "4-7"]);
    }

    #[test]
    fn figure8_events_a_to_d() {
        // One node of 10 CPUs, weights = speedups: astar 1.5, lbm 1.75, sjeng 2.0.
        let t = Topology::uniform(1, 10);
        let mut nm = NodeManager::new(&t, 0, 4);
        let none = CpuSet::new();
        let (astar1, astar2, lbm, sjeng) = (1, 2, 3, 4);
        nm.request(astar1, 4, 1.5, &none);
        nm.request(astar2, 4, 1.5, &none);
        assert_eq!(objs(&nm, &[astar1, astar2]), ["0-3", "4-7"]);
        // (a) lbm: 3 requests, 10 CPUs. Round 1: 1+1+1 (7 left); round 2: 2+2+2
        // (4 left); round 4 by weight: lbm +2, astar1 +2 (0 left). astar2 shrinks.
        let ch = nm.request(lbm, 4, 1.75, &none);
        assert!(
            ch.iter().any(|a| a.thread == astar2 && a.object.as_ref().map(|o| o.len()) == Some(2)),
            "{ch:?}"
        );
        let sizes = |nm: &NodeManager| [astar1, astar2, lbm, sjeng].map(|t| nm.object_of(t).len());
        assert_eq!(sizes(&nm), [4, 2, 4, 0]);
        // (b) sjeng: 4 requests: everyone 2 (8), 2 left -> sjeng 4.
        nm.request(sjeng, 4, 2.0, &none);
        assert_eq!(sizes(&nm), [2, 2, 2, 4]);
        // (c) lbm exits: its 2 CPUs go to the first astar (4).
        nm.release(lbm, true, &none);
        assert_eq!(sizes(&nm), [4, 2, 0, 4]);
        // (d) sjeng exits: the second astar gets 4 too.
        nm.release(sjeng, true, &none);
        assert_eq!(sizes(&nm), [4, 4, 0, 0]);
        nm.check().unwrap();
    }

    #[test]
    fn without_notification_freed_cpus_stay_idle() {
        // Figure 6's 3*: 8 pool CPUs, three requests -> 4, 2, 2; the quad
        // holder exits; without notification the others stay at 2.
        let t = Topology::uniform(1, 8);
        let mut nm = NodeManager::new(&t, 0, 4);
        let none = CpuSet::new();
        for th in 1..=3 {
            nm.request(th, 4, 2.0, &none);
        }
        let sizes: Vec<usize> = (1..=3).map(|th| nm.object_of(th).len()).collect();
        assert_eq!(sizes, [4, 2, 2]);
        let quad = (1..=3).find(|&th| nm.object_of(th).len() == 4).unwrap();
        assert!(nm.release(quad, false, &none).is_empty());
        let others: Vec<usize> = (1..=3).filter(|&th| th != quad).map(|th| nm.object_of(th).len()).collect();
        assert_eq!(others, [2, 2]);
        // With notification the two remaining get quads.
        let mut nm2 = NodeManager::new(&t, 0, 4);
        for th in 1..=3 {
            nm2.request(th, 4, 2.0, &none);
        }
        nm2.release(quad, true, &none);
        let others: Vec<usize> = (1..=3).filter(|&th| th != quad).map(|th| nm2.object_of(th).len()).collect();
        assert_eq!(others, [4, 4]);
    }

    #[test]
    fn native_threads_shrink_the_pool() {
        // 12 CPUs, natives busy on 0-3: the pool is 4-11 (8 CPUs); a third
        // quad request splits the largest object.
        let t = Topology::uniform(1, 12);
        let mut nm = NodeManager::new(&t, 0, 4);
        let busy: CpuSet = "0-3".parse().unwrap();
        nm.request(1, 4, 1.0, &busy);
        nm.request(2, 4, 1.0, &busy);
        assert_eq!(objs(&nm, &[1, 2]), ["4-7", "8-11"]);
        nm.request(3, 4, 1.0, &busy);
        let mut sizes: Vec<usize> = (1..=3).map(|th| nm.object_of(th).len()).collect();
        sizes.sort();
        assert_eq!(sizes, [2, 2, 4]);
        assert!(nm.object_of(3).is_subset(&"4-11".parse().unwrap()));
    }

    #[test]
    fn overlay_when_every_cpu_runs_native_threads() {
        // Figure 7: natives on all 12 CPUs; quad requests overlay them.
        let t = Topology::uniform(1, 12);
        let mut nm = NodeManager::new(&t, 0, 4);
        let busy: CpuSet = "0-11".parse().unwrap();
        for th in 1..=3 {
            nm.request(th, 4, 2.0, &busy);
        }
        assert_eq!(objs(&nm, &[1, 2, 3]), ["0-3", "4-7", "8-11"]);
        // A fourth finds no free block of any size: no object.
        nm.request(4, 4, 2.0, &busy);
        assert!(nm.object_of(4).is_empty());
    }

    #[test]
    fn an_overlay_extends_the_idle_cpu_it_got_and_never_takes_another_objects() {
        // Figure 6's mix with more sequential programs than idle pairs:
        // natives on 0-7, pool 8-11 (4 CPUs), three quad requests. Rounds:
        // 1+1+1, then one pair: sizes 2, 1, 1 (8-9, 10, 11). The two singles
        // cannot grow: each one's pair holds the other, each one's quad holds
        // the pair. They keep their idle CPU; nobody overlays the natives.
        let t = Topology::uniform(1, 12);
        let mut nm = NodeManager::new(&t, 0, 4);
        let busy: CpuSet = "0-7".parse().unwrap();
        for th in 1..=3 {
            nm.request(th, 4, 2.0, &busy);
        }
        assert_eq!(objs(&nm, &[1, 2, 3]), ["8-9", "10", "11"]);
        // Figure 3: one idle CPU (0) and a native on 1: the object is the
        // idle CPU extended over the busy one.
        let t = Topology::uniform(1, 2);
        let mut nm = NodeManager::new(&t, 0, 2);
        nm.request(1, 2, 2.0, &CpuSet::single(1));
        assert_eq!(objs(&nm, &[1]), ["0-1"]);
        nm.check().unwrap();
    }

    #[test]
    fn smt_pairs_go_to_the_highest_weights() {
        // Figure 9: 8 hyperthreads, six requests for a core (2): rounds give
        // everyone 1 (6), then the two highest weights get a pair (8).
        let t = Topology::uniform_smt(1, 4);
        let mut nm = NodeManager::new(&t, 0, 2);
        let none = CpuSet::new();
        let weights = [1.2, 1.8, 1.4, 1.4, 1.8, 1.6];
        for (th, w) in weights.iter().enumerate() {
            nm.request(th, 2, *w, &none);
        }
        let sizes: Vec<usize> = (0..6).map(|th| nm.object_of(th).len()).collect();
        assert_eq!(sizes, [1, 2, 1, 1, 2, 1]);
    }

    #[test]
    fn fragmentation_is_detected_and_repacked() {
        // 8 CPUs; four pair requests at 0-1, 2-3, 4-5, 6-7. Threads 1 and 3
        // exit (0-1 and 4-5 free): 4 free CPUs but no free quad. A new quad
        // request with higher weight forces a re-pack.
        let t = Topology::uniform(1, 8);
        let mut nm = NodeManager::new(&t, 0, 4);
        let none = CpuSet::new();
        for th in 1..=4 {
            nm.request(th, 2, 1.0, &none);
        }
        nm.release(1, false, &none);
        nm.release(3, false, &none);
        let before = nm.defragmentations();
        let ch = nm.request(5, 4, 3.0, &none);
        assert_eq!(nm.object_of(5).len(), 4);
        assert_eq!(nm.defragmentations(), before + 1);
        assert!(ch.iter().any(|a| a.defrag), "some thread moved: {ch:?}");
        nm.check().unwrap();
    }
}
