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

mod balance;
mod borrow;
mod cfs;
mod tax;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use crate::exec::ReconfigCost;
use crate::node::NodeManager;
use crate::topology::Topology;
use crate::{CpuId, CpuSet, Nanos};

pub use cfs::{NICE_0_LOAD, load_weight};
pub use tax::auto_tax;

pub type ThreadId = usize;

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
