//! The cluster scheduler (Chameleon §3.3, §4.3) on CFS-like run queues, and
//! — with execution objects switched off — the plain Linux-like baseline.
//!
//! Sans-IO: the backend calls [`ClusterScheduler::wake`], [`exit`],
//! [`tick`] with the current time; the scheduler appends [`Action`]s (a
//! CPU's new state, fuse, split, migrate, object changed) that the backend
//! executes. No clock, no threads, no randomness.
//!
//! ## Run queues
//! One CFS run queue per native CPU, ordered by virtual runtime. A running
//! thread's virtual runtime grows by `delta * 1024 / load_weight(nice)`; a
//! woken thread starts at `max(its vruntime, queue.min_vruntime)`;
//! `min_vruntime` never decreases. A running thread is preempted at a tick
//! once it has run `min_granularity_ns` and the leftmost queued thread is
//! behind it.
//!
//! ## Execution objects
//! A thread that asks for a `sequential` object gets one from its node's
//! [`NodeManager`] and is queued on the object's representative CPU. It
//! carries `vruntimes[c]` for every CPU `c` it would borrow, copied from
//! `c`'s `min_vruntime` when it is (re)queued. When it runs, it borrows `c`
//! only if `vruntimes[c]` is below the virtual runtime of the thread running
//! on `c` (which has had its minimum granularity), on *all* needed CPUs;
//! otherwise it tries a smaller aligned object around the representative
//! with the CPUs it can get; otherwise it runs natively, and retries at every
//! tick. While fused, its borrowed time is charged to `vruntimes[c]` times
//! its tax rate. Every tick, once the object has run `min_granularity_ns`,
//! any borrowed CPU whose leftmost thread is behind `vruntimes[c]` splits the
//! object.
//!
//! ## Invariants (checked by [`ClusterScheduler::check`])
//! 1. A CPU is borrowed by at most one thread, and a borrowed CPU runs
//!    nothing itself.
//! 2. A fused thread is running on its representative CPU, and its borrowed
//!    CPUs are inside its object.
//! 3. Every live thread is in exactly one place: one queue, or one CPU's
//!    `curr`.
//! 4. Virtual runtimes never decrease (also checked by property tests).
//!
//! [`exit`]: ClusterScheduler::exit
//! [`tick`]: ClusterScheduler::tick

use std::collections::BTreeSet;

use crate::exec::ReconfigCost;
use crate::node::{Assignment, NodeManager};
use crate::topology::Topology;
use crate::{CpuId, CpuSet, Nanos};

pub type ThreadId = usize;

/// CFS load weight of nice 0.
pub const NICE_0_LOAD: u64 = 1024;

/// CFS `sched_prio_to_weight`: nice -20..=19.
const PRIO_TO_WEIGHT: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121,
    2501, 1991, 1586, 1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29,
    23, 18, 15,
];

/// CFS load weight of a nice level.
pub fn load_weight(nice: i32) -> u64 {
    PRIO_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}

/// Tax rate derived from a thread's speedup on its object (§4.3.3): good
/// speedups earn low tax, poor ones high. `speedup` is object speed over
/// native speed; a speedup of 2 (linear on 2 CPUs... or better) gives 0.5.
pub fn auto_tax(speedup: f64) -> f64 {
    // Charge borrowed time by how little of it becomes progress:
    // tax = 1 / (speedup - 1), so speedup 2.0 -> 1.0, 1.5 -> 2.0, 1.25 -> 4.0.
    let gain = (speedup - 1.0).max(0.01);
    (1.0 / gain).clamp(0.01, 100.0)
}

/// Scheduler configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// CFS minimum granularity (paper default 16 ms).
    pub min_granularity_ns: Nanos,
    /// Execution objects on (Chameleon) or off (Linux-like).
    pub chameleon: bool,
    /// Notify node managers when a thread exits.
    pub notify_on_exit: bool,
    /// Largest fused object.
    pub max_fuse: usize,
    /// How long fusing takes (the reconfiguration mechanism's latencies).
    /// A fused object's minimum granularity counts from when the fuse is
    /// done, so a slow mechanism (hotplug) is not preempted and re-fused
    /// before it has ever run fused.
    pub cost: ReconfigCost,
}

/// What a thread is and wants.
#[derive(Debug, Clone)]
pub struct ThreadSpec {
    pub nice: i32,
    /// Tax rate on borrowed CPUs.
    pub tax: f64,
    /// CPUs of the `sequential` object wanted (1 = none).
    pub want_cpus: usize,
    /// Weight of the property (its importance / speedup).
    pub weight: f64,
    /// CPUs the thread may run on (None = all).
    pub affinity: Option<CpuSet>,
}

/// A CPU's state, as the backend should execute it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuState {
    Idle,
    /// Runs `thread`, on an object of `object_cpus` CPUs (1 = native).
    Running {
        thread: ThreadId,
        object_cpus: usize,
    },
    /// Borrowed into `by`'s fused object.
    Borrowed {
        by: ThreadId,
    },
}

/// What the backend must do.
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub enum Action {
    /// A CPU's state changed.
    Cpu { cpu: CpuId, state: CpuState },
    /// Activate a fused object: `cpus` (representative first) now run `thread`.
    Fuse { thread: ThreadId, cpus: CpuSet },
    /// Deactivate a fused object.
    Split { thread: ThreadId, cpus: CpuSet },
    /// A thread moved between run queues.
    Migrate { thread: ThreadId, from: CpuId, to: CpuId, defrag: bool },
    /// A node manager changed a thread's object (empty: none).
    Object { thread: ThreadId, cpus: CpuSet },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TState {
    New,
    Queued,
    Running,
    Exited,
}

#[derive(Debug, Clone)]
struct Thread {
    spec: ThreadSpec,
    load: u64,
    vruntime: u64,
    state: TState,
    cpu: CpuId,
    exec_start: Nanos,
    slice_start: Nanos,
    node: Option<usize>,
    object: CpuSet,
    /// (CPU, virtual runtime it would have there), for borrowed CPUs.
    vruntimes: Vec<(CpuId, u64)>,
    fused: CpuSet,
    fused_since: Nanos,
}

impl Thread {
    fn vr_on(&self, cpu: CpuId) -> u64 {
        self.vruntimes.iter().find(|(c, _)| *c == cpu).map(|(_, v)| *v).unwrap_or(u64::MAX)
    }
    fn has_object(&self) -> bool {
        !self.object.is_empty()
    }
}

#[derive(Debug, Clone, Default)]
struct Rq {
    queue: BTreeSet<(u64, ThreadId)>,
    curr: Option<ThreadId>,
    min_vruntime: u64,
    borrowed_by: Option<ThreadId>,
}

/// The scheduler.
#[derive(Debug, Clone)]
pub struct ClusterScheduler {
    topo: Topology,
    cfg: Config,
    threads: Vec<Thread>,
    rqs: Vec<Rq>,
    nms: Vec<NodeManager>,
    queued_total: usize,
    dirty: Vec<bool>,
    dirty_list: Vec<CpuId>,
    /// Balancing migrations to report at the next flush.
    migrations_pending: Vec<(ThreadId, CpuId, CpuId)>,
    decisions: u64,
    /// Union of every node manager's objects, recomputed after each request
    /// and release (the only calls that change objects), so balancing does
    /// not rebuild it on every tick.
    in_objects: CpuSet,
}

impl ClusterScheduler {
    pub fn new(topo: Topology, cfg: Config) -> ClusterScheduler {
        let n = topo.ncpus();
        let max_fuse = if cfg.chameleon { cfg.max_fuse.max(1) } else { 1 };
        let nms = (0..topo.nnodes()).map(|node| NodeManager::new(&topo, node, max_fuse)).collect();
        ClusterScheduler {
            topo,
            cfg,
            threads: Vec::new(),
            rqs: vec![Rq::default(); n],
            nms,
            queued_total: 0,
            dirty: vec![false; n],
            dirty_list: Vec::new(),
            migrations_pending: Vec::new(),
            decisions: 0,
            in_objects: CpuSet::new(),
        }
    }

    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Scheduler decisions taken so far (picks, borrow checks, tick checks).
    pub fn decisions(&self) -> u64 {
        self.decisions
    }

    pub fn vruntime(&self, t: ThreadId) -> u64 {
        self.threads[t].vruntime
    }

    /// The thread's current object (empty: none).
    pub fn object_of(&self, t: ThreadId) -> &CpuSet {
        &self.threads[t].object
    }

    /// CPUs the thread has borrowed right now.
    pub fn fused_of(&self, t: ThreadId) -> &CpuSet {
        &self.threads[t].fused
    }

    pub fn cpu_state(&self, cpu: CpuId) -> CpuState {
        let rq = &self.rqs[cpu];
        if let Some(by) = rq.borrowed_by {
            CpuState::Borrowed { by }
        } else if let Some(t) = rq.curr {
            CpuState::Running { thread: t, object_cpus: 1 + self.threads[t].fused.len() }
        } else {
            CpuState::Idle
        }
    }

    /// Registers a thread (not yet runnable).
    pub fn add_thread(&mut self, spec: ThreadSpec) -> ThreadId {
        let id = self.threads.len();
        let load = load_weight(spec.nice);
        self.threads.push(Thread {
            spec,
            load,
            vruntime: 0,
            state: TState::New,
            cpu: 0,
            exec_start: 0,
            slice_start: 0,
            node: None,
            object: CpuSet::new(),
            vruntimes: Vec::new(),
            fused: CpuSet::new(),
            fused_since: 0,
        });
        id
    }

    /// A new thread becomes runnable.
    pub fn wake(&mut self, now: Nanos, t: ThreadId, out: &mut Vec<Action>) {
        assert_eq!(self.threads[t].state, TState::New, "thread {t} woken twice");
        self.decisions += 1;
        if self.cfg.chameleon && self.threads[t].spec.want_cpus > 1 {
            self.request_object(now, t, out);
        }
        let cpu = if self.threads[t].has_object() {
            self.threads[t].object.first().expect("non-empty")
        } else {
            self.select_cpu(t)
        };
        let min = self.rqs[cpu].min_vruntime;
        let th = &mut self.threads[t];
        th.vruntime = th.vruntime.max(min);
        self.enqueue(cpu, t);
        self.reset_vruntimes(t);
        self.schedule(now, cpu, out);
        self.flush(out);
    }

    /// A thread finished.
    pub fn exit(&mut self, now: Nanos, t: ThreadId, out: &mut Vec<Action>) {
        let cpu = self.threads[t].cpu;
        match self.threads[t].state {
            TState::Running => {
                self.update_curr(now, cpu);
                if !self.threads[t].fused.is_empty() {
                    self.deactivate(now, t, out);
                }
                self.rqs[cpu].curr = None;
                self.mark(cpu);
            }
            TState::Queued => self.dequeue(cpu, t),
            TState::New => {}
            TState::Exited => panic!("thread {t} exited twice"),
        }
        self.threads[t].state = TState::Exited;
        if let Some(node) = self.threads[t].node.take() {
            self.threads[t].object = CpuSet::new();
            let busy = self.native_busy();
            let changes = self.nms[node].release(t, self.cfg.notify_on_exit, &busy);
            self.refresh_in_objects();
            self.apply(now, changes, out);
        }
        self.schedule(now, cpu, out);
        self.flush(out);
    }

    /// The periodic tick of `cpu`.
    pub fn tick(&mut self, now: Nanos, cpu: CpuId, out: &mut Vec<Action>) {
        self.decisions += 1;
        if self.rqs[cpu].borrowed_by.is_some() {
            // The representative's tick checks the whole object.
            return;
        }
        self.update_curr(now, cpu);
        match self.rqs[cpu].curr {
            None => {
                self.idle_balance(cpu);
                self.schedule(now, cpu, out);
            }
            Some(t) => {
                if !self.threads[t].fused.is_empty() {
                    self.check_fused_preemption(now, t, out);
                }
                let ran = now.saturating_sub(self.threads[t].slice_start);
                let behind = self.rqs[cpu].queue.first().is_some_and(|&(v, _)| v < self.threads[t].vruntime);
                if ran >= self.cfg.min_granularity_ns && behind {
                    self.put_prev(now, cpu, out);
                    self.schedule(now, cpu, out);
                } else if self.cfg.chameleon && self.threads[t].object.len() > 1 + self.threads[t].fused.len()
                {
                    self.push_natives_off_rep(cpu);
                    self.try_activate(now, t, out);
                } else if self.threads[t].has_object() {
                    self.push_natives_off_rep(cpu);
                } else if self.topo.sibling(cpu).is_some() {
                    self.smt_balance(now, cpu, out);
                }
            }
        }
        self.flush(out);
    }

    // ----- CFS mechanics ------------------------------------------------

    fn update_curr(&mut self, now: Nanos, cpu: CpuId) {
        let Some(t) = self.rqs[cpu].curr else { return };
        let th = &mut self.threads[t];
        let delta = now.saturating_sub(th.exec_start);
        if delta > 0 {
            let dv = (delta as u128 * NICE_0_LOAD as u128 / th.load as u128) as u64;
            th.vruntime += dv;
            if !th.fused.is_empty() {
                // Taxation: borrowed time is charged times the tax rate.
                let taxed = ((dv as f64) * th.spec.tax).ceil() as u64;
                for (c, v) in th.vruntimes.iter_mut() {
                    if th.fused.contains(*c) {
                        *v = v.saturating_add(taxed);
                    }
                }
            }
            th.exec_start = now;
        }
        self.update_min_vruntime(cpu);
    }

    fn update_min_vruntime(&mut self, cpu: CpuId) {
        let rq = &self.rqs[cpu];
        let curr = rq.curr.map(|t| self.threads[t].vruntime);
        let left = rq.queue.first().map(|&(v, _)| v);
        let m = match (curr, left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(m) = m {
            let rq = &mut self.rqs[cpu];
            rq.min_vruntime = rq.min_vruntime.max(m);
        }
    }

    fn enqueue(&mut self, cpu: CpuId, t: ThreadId) {
        let th = &mut self.threads[t];
        th.cpu = cpu;
        th.state = TState::Queued;
        let inserted = self.rqs[cpu].queue.insert((th.vruntime, t));
        debug_assert!(inserted, "thread {t} queued twice");
        self.queued_total += 1;
    }

    fn dequeue(&mut self, cpu: CpuId, t: ThreadId) {
        let removed = self.rqs[cpu].queue.remove(&(self.threads[t].vruntime, t));
        assert!(removed, "thread {t} not in queue {cpu}");
        self.queued_total -= 1;
    }

    /// Puts the running thread back into its queue (splitting its object).
    fn put_prev(&mut self, now: Nanos, cpu: CpuId, out: &mut Vec<Action>) {
        let Some(t) = self.rqs[cpu].curr else { return };
        self.update_curr(now, cpu);
        if !self.threads[t].fused.is_empty() {
            self.deactivate(now, t, out);
        }
        self.rqs[cpu].curr = None;
        self.enqueue(cpu, t);
        self.mark(cpu);
    }

    /// Picks the next thread if the CPU is free.
    fn schedule(&mut self, now: Nanos, cpu: CpuId, out: &mut Vec<Action>) {
        if self.rqs[cpu].borrowed_by.is_some() || self.rqs[cpu].curr.is_some() {
            return;
        }
        self.decisions += 1;
        let Some(&(_, t)) = self.rqs[cpu].queue.first() else {
            self.mark(cpu);
            return;
        };
        self.dequeue(cpu, t);
        self.rqs[cpu].curr = Some(t);
        let th = &mut self.threads[t];
        th.state = TState::Running;
        th.exec_start = now;
        th.slice_start = now;
        self.update_min_vruntime(cpu);
        self.mark(cpu);
        if self.cfg.chameleon && self.threads[t].object.len() > 1 {
            self.try_activate(now, t, out);
        }
    }

    fn nr_running(&self, cpu: CpuId) -> usize {
        let rq = &self.rqs[cpu];
        rq.queue.len() + usize::from(rq.curr.is_some() || rq.borrowed_by.is_some())
    }

    fn allowed(&self, t: ThreadId, cpu: CpuId) -> bool {
        self.threads[t].spec.affinity.as_ref().is_none_or(|a| a.contains(cpu))
    }

    /// Wake-up placement: an idle allowed CPU (on SMT, one whose sibling is
    /// idle too), else the least loaded; lowest number on ties.
    fn select_cpu(&self, t: ThreadId) -> CpuId {
        let mut best: Option<(usize, CpuId)> = None;
        for cpu in 0..self.rqs.len() {
            if !self.allowed(t, cpu) {
                continue;
            }
            let mut load = self.nr_running(cpu) * 4;
            if let Some(s) = self.topo.sibling(cpu)
                && self.nr_running(s) > 0
            {
                load += 1;
            }
            if best.is_none_or(|(l, _)| load < l) {
                best = Some((load, cpu));
                if load == 0 {
                    break;
                }
            }
        }
        best.map(|(_, c)| c).unwrap_or_else(|| panic!("thread {t} has an empty affinity"))
    }

    /// An idle CPU pulls a queued thread from the busiest queue.
    fn idle_balance(&mut self, cpu: CpuId) {
        if self.queued_total == 0 {
            return;
        }
        self.decisions += 1;
        let mut best: Option<(usize, CpuId, ThreadId)> = None;
        for src in 0..self.rqs.len() {
            if src == cpu || self.rqs[src].queue.is_empty() {
                continue;
            }
            let n = self.nr_running(src);
            if n < 2 && self.rqs[src].curr.is_some() {
                continue;
            }
            if best.is_some_and(|(bn, _, _)| n <= bn) {
                continue;
            }
            // The least urgent movable thread (highest vruntime).
            let cand = self.rqs[src]
                .queue
                .iter()
                .rev()
                .find(|&&(_, t)| !self.threads[t].has_object() && self.allowed(t, cpu));
            if let Some(&(_, t)) = cand {
                best = Some((n, src, t));
            }
        }
        if let Some((_, src, t)) = best {
            self.migrate_queued(t, src, cpu);
            self.migrations_pending.push((t, src, cpu));
        }
    }

    /// Load balancing around execution objects: a representative CPU runs
    /// its object's thread; native threads queued behind it move to the
    /// least-loaded CPU outside every object, if that CPU would end up no
    /// more loaded than this one is now. (Without this, a native thread
    /// sharing the representative would keep the object's thread to half a
    /// CPU whatever its tax; Chameleon's rebalancer spreads threads so
    /// objects can run — §4.3.5.)
    fn push_natives_off_rep(&mut self, cpu: CpuId) {
        let Some(&(_, victim)) = self.rqs[cpu].queue.iter().find(|&&(_, t)| !self.threads[t].has_object())
        else {
            return;
        };
        self.decisions += 1;
        let here = self.nr_running(cpu);
        let target = (0..self.rqs.len())
            .filter(|&c| c != cpu && !self.in_objects.contains(c) && self.allowed(victim, c))
            .min_by_key(|&c| (self.nr_running(c), c));
        if let Some(to) = target
            && self.nr_running(to) < here
        {
            self.migrate_queued(victim, cpu, to);
            self.migrations_pending.push((victim, cpu, to));
        }
    }

    fn refresh_in_objects(&mut self) {
        self.in_objects.clear();
        for nm in &self.nms {
            nm.objects_into(&mut self.in_objects);
        }
    }

    fn migrate_queued(&mut self, t: ThreadId, from: CpuId, to: CpuId) {
        self.dequeue(from, t);
        // Renormalise as CFS does: keep the lag relative to min_vruntime,
        // but never let the thread's virtual runtime go down.
        let th = &mut self.threads[t];
        let lag = th.vruntime.saturating_sub(self.rqs[from].min_vruntime);
        th.vruntime = th.vruntime.max(self.rqs[to].min_vruntime + lag);
        self.enqueue(to, t);
        self.mark(from);
    }

    /// SMT: a thread sharing a core moves to a fully idle core.
    fn smt_balance(&mut self, now: Nanos, cpu: CpuId, out: &mut Vec<Action>) {
        let Some(t) = self.rqs[cpu].curr else { return };
        let Some(sib) = self.topo.sibling(cpu) else { return };
        if self.threads[t].has_object() || self.nr_running(sib) == 0 || !self.rqs[cpu].queue.is_empty() {
            return;
        }
        self.decisions += 1;
        let target = (0..self.rqs.len()).find(|&c| {
            c != cpu
                && self.allowed(t, c)
                && self.nr_running(c) == 0
                && self.topo.sibling(c).is_some_and(|s| self.nr_running(s) == 0)
        });
        if let Some(to) = target {
            self.put_prev(now, cpu, out);
            self.migrate_queued(t, cpu, to);
            out.push(Action::Migrate { thread: t, from: cpu, to, defrag: false });
            self.schedule(now, to, out);
            self.schedule(now, cpu, out);
        }
    }

    // ----- execution objects ------------------------------------------

    /// CPUs busy with native (object-less) threads.
    fn native_busy(&self) -> CpuSet {
        let mut s = CpuSet::new();
        for th in &self.threads {
            if matches!(th.state, TState::Queued | TState::Running) && !th.has_object() {
                s.insert(th.cpu);
            }
        }
        s
    }

    fn request_object(&mut self, now: Nanos, t: ThreadId, out: &mut Vec<Action>) {
        let busy = self.native_busy();
        // The node whose pool (CPUs not busy with native threads) gives the
        // most CPUs per request once this one joins, then the fewest
        // requests, then the lowest number.
        let node = (0..self.nms.len())
            .max_by(|&a, &b| {
                let key = |n: usize| {
                    let pool = self.nms[n].pool(&busy) as u64;
                    let reqs = self.nms[n].requests() as u64 + 1;
                    // Compare pool/reqs exactly: scale by a common multiple.
                    (pool * 1_000_000 / reqs, u64::MAX - reqs, usize::MAX - n)
                };
                key(a).cmp(&key(b))
            })
            .expect("at least one node");
        self.threads[t].node = Some(node);
        let spec = &self.threads[t].spec;
        let changes = self.nms[node].request(t, spec.want_cpus, spec.weight, &busy);
        self.refresh_in_objects();
        self.apply(now, changes, out);
    }

    /// Applies node-manager changes: notify the object, re-queue the thread
    /// on its new representative, refresh `vruntimes[]`.
    fn apply(&mut self, now: Nanos, changes: Vec<Assignment>, out: &mut Vec<Action>) {
        for a in changes {
            let t = a.thread;
            out.push(Action::Object { thread: t, cpus: a.cpus.clone() });
            if !self.threads[t].fused.is_empty() {
                self.deactivate(now, t, out);
            }
            self.threads[t].object = a.cpus.clone();
            let state = self.threads[t].state;
            if matches!(state, TState::New | TState::Exited) {
                continue;
            }
            let from = self.threads[t].cpu;
            if let Some(rep) = a.cpus.first()
                && rep != from
            {
                if state == TState::Running {
                    self.put_prev(now, from, out);
                }
                self.migrate_queued(t, from, rep);
                out.push(Action::Migrate { thread: t, from, to: rep, defrag: a.defrag });
                self.schedule(now, from, out);
                self.schedule(now, rep, out);
            }
            self.reset_vruntimes(t);
        }
    }

    /// `vruntimes[c]` = `min_vruntime` of each CPU the thread would borrow.
    fn reset_vruntimes(&mut self, t: ThreadId) {
        let obj = self.threads[t].object.clone();
        let rep = obj.first();
        let v: Vec<(CpuId, u64)> =
            obj.iter().filter(|&c| Some(c) != rep).map(|c| (c, self.rqs[c].min_vruntime)).collect();
        // Never lower a recorded value for a CPU kept across the change.
        let old = std::mem::take(&mut self.threads[t].vruntimes);
        self.threads[t].vruntimes = v
            .into_iter()
            .map(|(c, m)| (c, old.iter().find(|(oc, _)| *oc == c).map_or(m, |(_, ov)| (*ov).max(m))))
            .collect();
    }

    /// Can `t` borrow `c` now?
    fn can_borrow(&mut self, now: Nanos, t: ThreadId, c: CpuId) -> bool {
        self.decisions += 1;
        // Bring the running thread's virtual runtime up to now.
        self.update_curr(now, c);
        let rq = &self.rqs[c];
        if rq.borrowed_by.is_some_and(|b| b != t) {
            return false;
        }
        let mine = self.threads[t].vr_on(c);
        match rq.curr {
            Some(u) => {
                let uth = &self.threads[u];
                if uth.has_object() && uth.object.len() > 1 {
                    return false;
                }
                mine < uth.vruntime && now.saturating_sub(uth.slice_start) >= self.cfg.min_granularity_ns
            }
            None => rq.queue.first().is_none_or(|&(v, _)| mine < v),
        }
    }

    /// Tries to activate `t`'s object (or a smaller one around its
    /// representative) when `t` runs.
    fn try_activate(&mut self, now: Nanos, t: ThreadId, out: &mut Vec<Action>) {
        let rep = self.threads[t].cpu;
        debug_assert_eq!(self.rqs[rep].curr, Some(t));
        if self.threads[t].object.first() != Some(rep) {
            return;
        }
        let mut size = self.threads[t].object.len();
        while size >= 2 {
            let Some(block) = self.topo.block_of(rep, size) else { break };
            if block.first() != Some(rep) || !block.is_subset(&self.threads[t].object) {
                break;
            }
            let mut need = block.clone();
            need.remove(rep);
            if need == self.threads[t].fused {
                return; // already fused at the best size we can get
            }
            if need.len() < self.threads[t].fused.len() {
                return; // never shrink here; preemption does that
            }
            if need.iter().all(|c| self.can_borrow(now, t, c)) {
                if !self.threads[t].fused.is_empty() {
                    self.deactivate(now, t, out);
                }
                self.activate(now, t, block, out);
                return;
            }
            size /= 2;
        }
    }

    fn activate(&mut self, now: Nanos, t: ThreadId, block: CpuSet, out: &mut Vec<Action>) {
        let rep = self.threads[t].cpu;
        for c in block.iter().filter(|&c| c != rep) {
            if self.rqs[c].curr.is_some() {
                self.put_prev(now, c, out);
            }
            self.rqs[c].borrowed_by = Some(t);
            self.mark(c);
        }
        let th = &mut self.threads[t];
        th.fused = block.clone();
        th.fused.remove(rep);
        th.fused_since = now + self.cfg.cost.fuse_ns(block.len());
        self.mark(rep);
        out.push(Action::Fuse { thread: t, cpus: block });
    }

    fn deactivate(&mut self, now: Nanos, t: ThreadId, out: &mut Vec<Action>) {
        let rep = self.threads[t].cpu;
        if self.rqs[rep].curr == Some(t) {
            self.update_curr(now, rep);
        }
        let fused = std::mem::take(&mut self.threads[t].fused);
        let mut all = fused.clone();
        all.insert(rep);
        out.push(Action::Split { thread: t, cpus: all });
        self.mark(rep);
        for c in fused.iter() {
            debug_assert_eq!(self.rqs[c].borrowed_by, Some(t));
            self.rqs[c].borrowed_by = None;
            self.mark(c);
            self.schedule(now, c, out);
        }
    }

    /// A fused object yields once it has had its minimum granularity and a
    /// thread on a borrowed CPU is behind the fused thread's `vruntimes[c]`.
    fn check_fused_preemption(&mut self, now: Nanos, t: ThreadId, out: &mut Vec<Action>) {
        if now.saturating_sub(self.threads[t].fused_since) < self.cfg.min_granularity_ns {
            return;
        }
        let th = &self.threads[t];
        let yield_now =
            th.fused.iter().any(|c| self.rqs[c].queue.first().is_some_and(|&(v, _)| v < th.vr_on(c)));
        self.decisions += 1;
        if yield_now {
            self.deactivate(now, t, out);
        }
    }

    // ----- bookkeeping ---------------------------------------------------

    fn mark(&mut self, cpu: CpuId) {
        if !self.dirty[cpu] {
            self.dirty[cpu] = true;
            self.dirty_list.push(cpu);
        }
    }

    /// Emits the new state of every CPU that changed, in CPU order.
    fn flush(&mut self, out: &mut Vec<Action>) {
        for (thread, from, to) in self.migrations_pending.drain(..) {
            out.push(Action::Migrate { thread, from, to, defrag: false });
        }
        self.dirty_list.sort_unstable();
        for i in 0..self.dirty_list.len() {
            let cpu = self.dirty_list[i];
            self.dirty[cpu] = false;
            out.push(Action::Cpu { cpu, state: self.cpu_state(cpu) });
        }
        self.dirty_list.clear();
    }

    /// Checks the invariants in the module doc.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = vec![0u32; self.threads.len()];
        for (cpu, rq) in self.rqs.iter().enumerate() {
            if let Some(b) = rq.borrowed_by {
                if rq.curr.is_some() {
                    return Err(format!("CPU {cpu} is borrowed by {b} but runs {:?}", rq.curr));
                }
                let th = &self.threads[b];
                if th.state != TState::Running || !th.fused.contains(cpu) {
                    return Err(format!("CPU {cpu} is borrowed by {b}, which does not hold it"));
                }
            }
            if let Some(t) = rq.curr {
                seen[t] += 1;
                if self.threads[t].cpu != cpu || self.threads[t].state != TState::Running {
                    return Err(format!("CPU {cpu} runs {t}, which thinks otherwise"));
                }
            }
            for &(v, t) in &rq.queue {
                seen[t] += 1;
                if self.threads[t].vruntime != v
                    || self.threads[t].cpu != cpu
                    || self.threads[t].state != TState::Queued
                {
                    return Err(format!("queue {cpu} holds a stale entry for {t}"));
                }
            }
        }
        for (t, th) in self.threads.iter().enumerate() {
            let live = matches!(th.state, TState::Queued | TState::Running);
            if live && seen[t] != 1 {
                return Err(format!("thread {t} is in {} places", seen[t]));
            }
            if !live && seen[t] != 0 {
                return Err(format!("thread {t} ({:?}) is still in a queue", th.state));
            }
            if !th.fused.is_empty() {
                if !th.fused.is_subset(&th.object) {
                    return Err(format!("thread {t} borrowed {} outside its object {}", th.fused, th.object));
                }
                for c in th.fused.iter() {
                    if self.rqs[c].borrowed_by != Some(t) {
                        return Err(format!("thread {t} thinks it holds CPU {c}"));
                    }
                }
            }
        }
        let mut in_objects = CpuSet::new();
        for nm in &self.nms {
            nm.check()?;
            nm.objects_into(&mut in_objects);
        }
        if in_objects != self.in_objects {
            return Err(format!(
                "cached objects {} differ from the node managers' {in_objects}",
                self.in_objects
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn config(chameleon: bool, max_fuse: usize, cost: ReconfigCost) -> Config {
        Config { min_granularity_ns: 16 * MS, chameleon, notify_on_exit: true, max_fuse, cost }
    }

    fn sched(nodes: usize, per_node: usize, max_fuse: usize) -> ClusterScheduler {
        ClusterScheduler::new(Topology::uniform(nodes, per_node), config(true, max_fuse, ReconfigCost::FREE))
    }

    fn native(nice: i32) -> ThreadSpec {
        ThreadSpec { nice, tax: 1.0, want_cpus: 1, weight: 0.0, affinity: None }
    }

    fn pinned(cpu: CpuId) -> ThreadSpec {
        ThreadSpec { affinity: Some(CpuSet::single(cpu)), ..native(0) }
    }

    fn wants(cpus: usize, tax: f64) -> ThreadSpec {
        ThreadSpec { nice: 0, tax, want_cpus: cpus, weight: 2.0, affinity: None }
    }

    /// Ticks every CPU at `t`.
    fn tick_all(s: &mut ClusterScheduler, t: Nanos, out: &mut Vec<Action>) {
        for c in 0..s.topology().ncpus() {
            s.tick(t, c, out);
        }
    }

    fn running(s: &ClusterScheduler, cpu: CpuId) -> Option<ThreadId> {
        match s.cpu_state(cpu) {
            CpuState::Running { thread, .. } => Some(thread),
            _ => None,
        }
    }

    #[test]
    fn cfs_runs_the_leftmost_and_honours_min_granularity() {
        // One CPU, two nice-0 threads woken at 0. A runs first; B is behind
        // after 4 ms but A keeps the CPU until it has run 16 ms.
        let mut s = sched(1, 1, 1);
        let mut out = Vec::new();
        let a = s.add_thread(native(0));
        let b = s.add_thread(native(0));
        s.wake(0, a, &mut out);
        s.wake(0, b, &mut out);
        assert_eq!(running(&s, 0), Some(a));
        for t in [4, 8, 12] {
            s.tick(t * MS, 0, &mut out);
            assert_eq!(running(&s, 0), Some(a), "at {t} ms");
        }
        s.tick(16 * MS, 0, &mut out);
        assert_eq!(running(&s, 0), Some(b));
        // A ran 16 ms at weight 1024: vruntime 16 ms.
        assert_eq!(s.vruntime(a), 16 * MS);
        s.check().unwrap();
    }

    #[test]
    fn nice_levels_scale_virtual_runtime() {
        // nice 5 has load weight 335: 10 ms of CPU = 10 * 1024 / 335 = 30.567 ms of vruntime.
        let mut s = sched(1, 2, 1);
        let mut out = Vec::new();
        let a = s.add_thread(native(0));
        let b = s.add_thread(native(5));
        s.wake(0, a, &mut out);
        s.wake(0, b, &mut out);
        tick_all(&mut s, 10 * MS, &mut out);
        assert_eq!(s.vruntime(a), 10 * MS);
        assert_eq!(s.vruntime(b), 10 * MS * 1024 / 335);
    }

    #[test]
    fn an_object_borrows_an_idle_neighbour_at_once() {
        let mut s = sched(1, 2, 2);
        let mut out = Vec::new();
        let a = s.add_thread(wants(2, 1.0));
        s.wake(0, a, &mut out);
        assert!(out.contains(&Action::Fuse { thread: a, cpus: "0-1".parse().unwrap() }), "{out:?}");
        assert_eq!(s.cpu_state(0), CpuState::Running { thread: a, object_cpus: 2 });
        assert_eq!(s.cpu_state(1), CpuState::Borrowed { by: a });
        s.check().unwrap();
    }

    #[test]
    fn borrowing_needs_a_lower_vruntime_on_all_cpus_else_a_smaller_object() {
        // 4 CPUs. Natives pinned on 1 and 2 from t=0; A wants 0-3 (its
        // vruntimes[] = min_vruntime = 0 everywhere). CPU 3 gets a native at
        // 20 ms (vruntime 0, just dispatched). Tax 0.01. At 20 ms, CPUs 1 and 2 run
        // natives with vruntime 20 ms > 0 that have had 16 ms: borrowable; CPU 3's
        // native has not had its minimum granularity: not. The quad fails;
        // the pair 0-1 is formed.
        let mut s = sched(1, 4, 4);
        let mut out = Vec::new();
        let n1 = s.add_thread(pinned(1));
        let n2 = s.add_thread(pinned(2));
        s.wake(0, n1, &mut out);
        s.wake(0, n2, &mut out);
        let a = s.add_thread(wants(4, 0.01));
        s.wake(0, a, &mut out);
        // CPU 3 was idle at 0: the quad needs 1 and 2, which just started.
        assert_eq!(s.cpu_state(0), CpuState::Running { thread: a, object_cpus: 1 });
        let n3 = s.add_thread(pinned(3));
        s.wake(20 * MS, n3, &mut out);
        out.clear();
        tick_all(&mut s, 20 * MS, &mut out);
        assert!(out.contains(&Action::Fuse { thread: a, cpus: "0-1".parse().unwrap() }), "{out:?}");
        assert_eq!(s.fused_of(a).to_string(), "1");
        // At 40 ms CPU 3's native has run 20 ms (vruntime 20 ms > 0), and A
        // was charged only 20 ms x 0.01 = 0.2 ms on CPU 1: the object grows
        // to the quad (split the pair, fuse the quad). With tax 1 it would
        // have been charged 20 ms and lost CPU 1's race instead.
        out.clear();
        tick_all(&mut s, 40 * MS, &mut out);
        assert!(out.contains(&Action::Fuse { thread: a, cpus: "0-3".parse().unwrap() }), "{out:?}");
        s.check().unwrap();
    }

    #[test]
    fn taxation_charges_borrowed_time_times_the_rate() {
        // Tax 0.5, fused on an idle neighbour for 12 ms: vruntime +12 ms on
        // the representative, vruntimes[1] +6 ms.
        let mut s = sched(1, 2, 2);
        let mut out = Vec::new();
        let a = s.add_thread(wants(2, 0.5));
        s.wake(0, a, &mut out);
        s.tick(12 * MS, 0, &mut out);
        assert_eq!(s.vruntime(a), 12 * MS);
        assert_eq!(s.threads[a].vr_on(1), 6 * MS);
    }

    #[test]
    fn a_fused_object_yields_after_min_granularity_when_a_native_is_behind() {
        // Tax 100: after A borrows CPU 1 its vruntimes[1] races ahead, so
        // B (queued on CPU 1) is behind at once — but A keeps the object
        // for the 16 ms minimum granularity, then splits.
        let mut s = sched(1, 2, 2);
        let mut out = Vec::new();
        let a = s.add_thread(wants(2, 100.0));
        s.wake(0, a, &mut out);
        assert_eq!(s.fused_of(a).len(), 1);
        let b = s.add_thread(pinned(1));
        s.wake(MS, b, &mut out);
        for t in [4, 8, 12] {
            s.tick(t * MS, 0, &mut out);
            assert_eq!(s.fused_of(a).len(), 1, "at {t} ms");
        }
        out.clear();
        s.tick(16 * MS, 0, &mut out);
        assert!(out.iter().any(|x| matches!(x, Action::Split { thread, .. } if *thread == a)), "{out:?}");
        assert_eq!(running(&s, 1), Some(b));
        s.check().unwrap();
    }

    #[test]
    fn min_granularity_of_a_fused_object_counts_from_the_end_of_the_fuse() {
        // Same as above, but fusing takes 150 ms (hotplug, fuse 2): A is
        // not split before 150 + 16 = 166 ms, although B is behind at once.
        let hotplug = ReconfigCost::table4(crate::exec::Mechanism::Hotplug);
        let mut s = ClusterScheduler::new(Topology::uniform(1, 2), config(true, 2, hotplug));
        let mut out = Vec::new();
        let a = s.add_thread(wants(2, 100.0));
        s.wake(0, a, &mut out);
        let b = s.add_thread(pinned(1));
        s.wake(MS, b, &mut out);
        for t in [16, 100, 164] {
            s.tick(t * MS, 0, &mut out);
            assert_eq!(s.fused_of(a).len(), 1, "at {t} ms");
        }
        out.clear();
        s.tick(168 * MS, 0, &mut out);
        assert!(out.iter().any(|x| matches!(x, Action::Split { thread, .. } if *thread == a)), "{out:?}");
        s.check().unwrap();
    }

    #[test]
    fn linux_mode_never_fuses() {
        let mut s = ClusterScheduler::new(Topology::uniform(1, 4), config(false, 4, ReconfigCost::FREE));
        let mut out = Vec::new();
        let a = s.add_thread(wants(4, 0.01));
        s.wake(0, a, &mut out);
        tick_all(&mut s, 100 * MS, &mut out);
        assert!(!out.iter().any(|x| matches!(x, Action::Fuse { .. })));
        assert!(s.object_of(a).is_empty());
    }

    #[test]
    fn exit_returns_borrowed_cpus_and_wakes_their_threads() {
        let mut s = sched(1, 2, 2);
        let mut out = Vec::new();
        let a = s.add_thread(wants(2, 0.01));
        s.wake(0, a, &mut out);
        let b = s.add_thread(pinned(1));
        s.wake(MS, b, &mut out);
        assert_eq!(s.cpu_state(1), CpuState::Borrowed { by: a });
        out.clear();
        s.exit(5 * MS, a, &mut out);
        assert!(out.iter().any(|x| matches!(x, Action::Split { .. })));
        assert_eq!(running(&s, 1), Some(b));
        assert_eq!(s.cpu_state(0), CpuState::Idle);
        s.check().unwrap();
    }

    #[test]
    fn auto_tax_rewards_good_speedups() {
        // tax = 1 / (speedup - 1): 2.0 -> 1, 1.5 -> 2, 1.25 -> 4.
        assert!((auto_tax(2.0) - 1.0).abs() < 1e-12);
        assert!((auto_tax(1.5) - 2.0).abs() < 1e-12);
        assert!((auto_tax(1.25) - 4.0).abs() < 1e-12);
        assert_eq!(auto_tax(1.0), 100.0);
    }
}
