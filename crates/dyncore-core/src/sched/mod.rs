//! The cluster scheduler (Chameleon §3.3, §4.3) on CFS-like run queues, with
//! the speed model of Table 2 — the Chameleon policy — and, with execution
//! objects switched off, the plain Linux-like baseline.
//!
//! It implements [`Policy`]: the backend hands it spawns, exits, blocks and
//! wake-ups, ticks and finished reconfigurations with the current time; it appends [`Action`]s
//! (a CPU's new state and speed, fuse, split, offline, online, migrate,
//! object changed) that the backend executes. No clock, no threads, no
//! randomness, and no knowledge of what a reconfiguration costs.
//!
//! ## Run queues
//! One CFS run queue per native CPU, ordered by virtual runtime. A running
//! thread's virtual runtime grows by `delta * 1024 / load_weight(nice)`; a
//! woken thread starts at `max(its vruntime, queue.min_vruntime)`;
//! `min_vruntime` never decreases. A running thread is preempted at a tick
//! once it has run `min_granularity_ns` and the leftmost queued thread is
//! behind it.
//!
//! A thread that blocks (`Event::Block`: it sleeps) leaves its CPU — its
//! fused object, if it has one active, splits — or its queue, keeps its
//! virtual runtime and gives its object back (a sleeper holds no CPUs
//! another thread could fuse); when it wakes it asks again, as a new
//! thread does, and is queued as a new
//! thread is, on its representative or the best CPU, at no less than the
//! queue's `min_vruntime` (CFS without the sleeper credit). Backends whose
//! threads never sleep never send either event.
//!
//! ## Execution objects
//! A thread that asks for a `sequential` object gets one from its node's
//! [`NodeManager`] and is queued on the object's representative CPU. It
//! carries `vruntimes[c]` for every CPU `c` it would borrow, placed as CFS
//! places a task on a run queue (`tax.rs`: first `c`'s `min_vruntime` plus
//! its lag; when it starts to borrow, never more than a bounded credit
//! behind `c`'s `min_vruntime`). When it runs, it borrows `c`
//! only if `vruntimes[c]` is below the virtual runtime of the thread running
//! on `c` (which has had its minimum granularity), on *all* needed CPUs;
//! otherwise it tries a smaller aligned object around the representative
//! with the CPUs it can get; otherwise it runs natively, and retries at every
//! tick. Activating an object emits `Fuse` and the `Offline` of the borrowed
//! CPUs (Bolt, proxies installed); deactivating emits `Split` and their
//! `Online`. While fused, its borrowed time is charged to `vruntimes[c]`
//! times its tax rate, which makes the rate a share (`tax.rs`). Every tick, once the object has run
//! `min_granularity_ns` *since its fuse finished* (the backend's
//! `ReconfigDone`), any borrowed CPU whose leftmost thread is behind
//! `vruntimes[c]` splits the object. Counting from the end of the fuse
//! keeps a slow mechanism (hotplug) from being preempted and re-fused
//! before it has ever run fused.
//!
//! ## Speeds
//! Whenever a CPU starts running a thread, or the object it represents
//! changes size, the scheduler emits `SetSpeed` with the duty cycle of
//! [`SpeedModel::duty`] for the CPU's kind, the object's size and the
//! thread's speed class — before the `Dispatch` that runs it.
//!
//! ## Invariants (checked by [`ClusterScheduler::check`])
//! 1. A CPU is borrowed by at most one thread, and a borrowed CPU runs
//!    nothing itself.
//! 2. A fused thread is running on its representative CPU, and its borrowed
//!    CPUs are inside its object.
//! 3. Every live thread is in exactly one place: one queue, or one CPU's
//!    `curr`.
//! 4. Virtual runtimes never decrease (also checked by property tests).

mod balance;
mod borrow;
mod cfs;
mod index;
mod tax;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;

use crate::exec::ExecObject;
use crate::node::NodeManager;
use crate::policy::{Action, CpuState, Event, Policy, ReconfigId, ThreadId, ThreadSpec};
use crate::reconfig::Mode;
use crate::speed::{Duty, SpeedModel};
use crate::topology::Topology;
use crate::{CpuId, CpuSet, Nanos};

pub use cfs::{NICE_0_LOAD, load_weight};
pub use tax::{SCHED_NR_LATENCY, auto_tax, credit_ns};

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
    /// Duty cycles by CPU kind, object size and speed class (Table 2).
    pub speed: SpeedModel,
    /// How the borrowed CPUs of a fused object go offline and come back.
    pub reconfig_mode: Mode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TState {
    New,
    Queued,
    Running,
    /// Asleep between a `Block` and its `Wake`: in no queue, on no CPU.
    Blocked,
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
    object: Option<ExecObject>,
    /// (CPU, virtual runtime it would have there), for borrowed CPUs.
    vruntimes: Vec<(CpuId, u64)>,
    /// The CPUs borrowed right now (the active object minus the representative).
    fused: CpuSet,
    /// When the active object's fuse finished; `None` while it is in progress.
    fused_since: Option<Nanos>,
}

impl Thread {
    fn vr_on(&self, cpu: CpuId) -> u64 {
        self.vruntimes.iter().find(|(c, _)| *c == cpu).map(|(_, v)| *v).unwrap_or(u64::MAX)
    }
    fn has_object(&self) -> bool {
        self.object.is_some()
    }
    /// CPUs of its object (0: none).
    fn object_len(&self) -> usize {
        self.object.as_ref().map_or(0, ExecObject::len)
    }
    fn representative(&self) -> Option<CpuId> {
        self.object.as_ref().map(|o| o.representative)
    }
}

#[derive(Debug, Clone, Default)]
struct Rq {
    queue: BTreeSet<(u64, ThreadId)>,
    curr: Option<ThreadId>,
    min_vruntime: u64,
    borrowed_by: Option<ThreadId>,
}

/// The scheduler: the Chameleon policy (or, with `chameleon = false`, the
/// Linux-like one).
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
    /// The duty each CPU was last set to (`None`: never).
    duty: Vec<Option<Duty>>,
    /// The next reconfiguration id.
    next_reconfig: u64,
    /// Fuses whose `Offline` has not finished: (its id, the fused thread).
    fusing: Vec<(ReconfigId, ThreadId)>,
    /// Loads and native threads per CPU (`index.rs`).
    index: index::RqIndex,
    /// Some CPU has an SMT sibling.
    smt: bool,
}

impl Policy for ClusterScheduler {
    fn handle(&mut self, now: Nanos, event: &Event, out: &mut Vec<Action>) {
        match event {
            Event::Spawn { thread, spec } => {
                let t = self.add_thread(*thread, spec.clone());
                self.wake(now, t, out);
            }
            Event::Exit { thread } => self.exit(now, *thread, out),
            Event::Block { thread } => self.block(now, *thread, out),
            Event::Wake { thread } => self.wake(now, *thread, out),
            Event::Tick { cpu } => self.tick(now, *cpu, out),
            Event::ReconfigDone { id, .. } => self.reconfig_done(now, *id),
            Event::Load { .. } | Event::StackLoad { .. } | Event::StackControl { .. } => {}
        }
    }

    fn check(&self) -> Result<(), String> {
        ClusterScheduler::check(self)
    }
}

impl ClusterScheduler {
    pub fn new(topo: Topology, cfg: Config) -> ClusterScheduler {
        let n = topo.ncpus();
        let max_fuse = if cfg.chameleon { cfg.max_fuse.max(1) } else { 1 };
        let nms = (0..topo.nnodes()).map(|node| NodeManager::new(&topo, node, max_fuse)).collect();
        ClusterScheduler {
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
            duty: vec![None; n],
            next_reconfig: 0,
            fusing: Vec::new(),
            index: index::RqIndex::new(&topo),
            smt: (0..n).any(|c| topo.sibling(c).is_some()),
            topo,
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

    /// The thread's current object (`None`: none).
    pub fn object_of(&self, t: ThreadId) -> Option<&ExecObject> {
        self.threads[t].object.as_ref()
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

    /// Registers a thread (not yet runnable). The backend names threads
    /// densely, in spawn order (the boundary's contract).
    fn add_thread(&mut self, id: ThreadId, spec: ThreadSpec) -> ThreadId {
        assert_eq!(id, self.threads.len(), "thread ids are dense, in spawn order");
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
            object: None,
            vruntimes: Vec::new(),
            fused: CpuSet::new(),
            fused_since: None,
        });
        id
    }

    /// A new thread, or a blocked one, becomes runnable: it is queued on
    /// its object's representative, or where it is best placed, at no less
    /// than the queue's minimum virtual runtime (CFS's wake-up). It first
    /// asks for its object (a blocked thread gave its own back).
    fn wake(&mut self, now: Nanos, t: ThreadId, out: &mut Vec<Action>) {
        match self.threads[t].state {
            TState::New => {}
            TState::Blocked => {}
            // A wake of a runnable thread changes nothing (the backend's
            // contract says it does not happen).
            _ => return,
        }
        self.decisions += 1;
        if self.cfg.chameleon && self.threads[t].spec.want_cpus > 1 {
            self.request_object(now, t, out);
        }
        let cpu = match self.threads[t].representative() {
            Some(rep) => rep,
            None => self.select_cpu(t),
        };
        let min = self.rqs[cpu].min_vruntime;
        let th = &mut self.threads[t];
        th.vruntime = th.vruntime.max(min);
        self.enqueue(cpu, t);
        self.reset_vruntimes(t);
        self.schedule(now, cpu, out);
        self.flush(out);
    }

    /// A thread stopped being runnable: it leaves its CPU (splitting its
    /// object) or its queue, keeps its virtual runtime, and gives its
    /// object back to its node manager (another thread may get it while
    /// it sleeps; it asks again when it wakes).
    fn block(&mut self, now: Nanos, t: ThreadId, out: &mut Vec<Action>) {
        let cpu = self.threads[t].cpu;
        match self.threads[t].state {
            TState::Running | TState::Queued => self.take_off(now, t, out),
            // Not runnable already: nothing to take away.
            TState::New | TState::Blocked | TState::Exited => return,
        }
        self.decisions += 1;
        self.threads[t].state = TState::Blocked;
        self.update_min_vruntime(cpu);
        self.give_back(now, t, cpu, out);
    }

    /// A thread finished.
    fn exit(&mut self, now: Nanos, t: ThreadId, out: &mut Vec<Action>) {
        let cpu = self.threads[t].cpu;
        match self.threads[t].state {
            TState::Running | TState::Queued => self.take_off(now, t, out),
            TState::New | TState::Blocked => {}
            TState::Exited => panic!("thread {t} exited twice"),
        }
        self.threads[t].state = TState::Exited;
        self.give_back(now, t, cpu, out);
    }

    /// Takes thread `t`, running or queued, off its CPU (splitting its
    /// object) or out of its queue, for [`ClusterScheduler::block`] and
    /// [`ClusterScheduler::exit`]; a thread neither running nor queued is left as it is.
    fn take_off(&mut self, now: Nanos, t: ThreadId, out: &mut Vec<Action>) {
        let cpu = self.threads[t].cpu;
        match self.threads[t].state {
            TState::Running => {
                self.update_curr(now, cpu);
                if !self.threads[t].fused.is_empty() {
                    self.deactivate(now, t, out);
                }
                self.set_curr(cpu, None);
                self.mark(cpu);
            }
            TState::Queued => self.dequeue(cpu, t),
            TState::New | TState::Blocked | TState::Exited => {}
        }
    }

    /// After `t` left `cpu` ([`ClusterScheduler::take_off`]): `t` gives its object
    /// back to its node manager (if it had one), and `cpu` runs what is
    /// next.
    fn give_back(&mut self, now: Nanos, t: ThreadId, cpu: CpuId, out: &mut Vec<Action>) {
        if let Some(node) = self.threads[t].node.take() {
            if let Some(o) = &self.threads[t].object {
                self.in_objects.remove_all(&o.cpus());
            }
            self.set_object(t, None);
            let changes = self.nms[node].release(t, self.cfg.notify_on_exit, self.index.native_busy());
            self.apply(now, changes, out);
        }
        self.schedule(now, cpu, out);
        self.flush(out);
    }

    /// The periodic tick of `cpu`.
    fn tick(&mut self, now: Nanos, cpu: CpuId, out: &mut Vec<Action>) {
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
                } else if self.cfg.chameleon && self.threads[t].object_len() > 1 + self.threads[t].fused.len()
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

    /// A reconfiguration finished: if it was a fuse still in progress, the
    /// object's minimum granularity starts now.
    fn reconfig_done(&mut self, now: Nanos, id: ReconfigId) {
        if let Some(i) = self.fusing.iter().position(|&(f, _)| f == id) {
            let (_, t) = self.fusing.swap_remove(i);
            self.threads[t].fused_since = Some(now);
        }
    }

    /// A fresh reconfiguration id.
    fn reconfig_id(&mut self) -> ReconfigId {
        self.next_reconfig += 1;
        ReconfigId(self.next_reconfig)
    }

    // ----- bookkeeping ---------------------------------------------------

    fn mark(&mut self, cpu: CpuId) {
        if !self.dirty[cpu] {
            self.dirty[cpu] = true;
            self.dirty_list.push(cpu);
        }
    }

    /// Emits the new state of every CPU that changed, in CPU order, each
    /// running one preceded by its new speed if that changed.
    fn flush(&mut self, out: &mut Vec<Action>) {
        for (thread, from, to) in self.migrations_pending.drain(..) {
            out.push(Action::Migrate { thread, from, to, defrag: false });
        }
        self.dirty_list.sort_unstable();
        for i in 0..self.dirty_list.len() {
            let cpu = self.dirty_list[i];
            self.dirty[cpu] = false;
            let state = self.cpu_state(cpu);
            if let CpuState::Running { thread, object_cpus } = state {
                let duty =
                    self.cfg.speed.duty(self.topo.kind(cpu), object_cpus, self.threads[thread].spec.class);
                if self.duty[cpu] != Some(duty) {
                    self.duty[cpu] = Some(duty);
                    out.push(Action::SetSpeed { cpu, duty });
                }
            }
            out.push(Action::Dispatch { cpu, state });
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
                if !th.object.as_ref().is_some_and(|o| th.fused.iter().all(|c| o.contains(c))) {
                    return Err(format!(
                        "thread {t} borrowed {} outside its object {:?}",
                        th.fused, th.object
                    ));
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
        self.check_index()
    }
}
