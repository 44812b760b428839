//! Indexes over the run queues, kept up to date as threads come and go, so
//! that placement does not scan every CPU or every thread (a 1024-CPU
//! machine ticks 256 000 times per simulated second, and every request for
//! an object asked which CPUs run native threads):
//!
//! * `load[c]`, `by_load[l]`: each CPU's `nr_running`, and the CPUs at each
//!   load, so that "the least-loaded CPU outside every object" and "the
//!   least-loaded CPU" are a few word operations;
//! * `natives[c]`: how many threads of CPU `c`'s run queue (queued or
//!   current) have no execution object; `native_busy`: the CPUs where that
//!   is not 0 (what the node managers call busy with native threads);
//!   `node_busy[n]`: how many of node `n`'s CPUs are in `native_busy`.
//!
//! The scheduler calls [`ClusterScheduler::set_curr`],
//! [`ClusterScheduler::set_borrowed`] and [`ClusterScheduler::set_object`]
//! instead of writing those fields, and `enqueue`/`dequeue` report
//! themselves, so every change passes through here.
//!
//! Invariants (checked by [`ClusterScheduler::check`]): for every CPU `c`,
//! `load[c] == nr_running(c)` and `c` is in `by_load[load[c]]` and in no
//! other set; `natives[c]` is the number of threads in `c`'s queue or
//! running on it that have no object; `native_busy` is exactly the CPUs
//! with `natives[c] > 0`; `node_busy[n]` is the size of `native_busy` ∩
//! node `n`.

use super::{ClusterScheduler, TState, ThreadId};
use crate::exec::ExecObject;
use crate::topology::Topology;
use crate::{CpuId, CpuSet};

#[derive(Debug, Clone)]
pub(super) struct RqIndex {
    load: Vec<usize>,
    by_load: Vec<CpuSet>,
    natives: Vec<u32>,
    native_busy: CpuSet,
    node_of: Vec<usize>,
    node_busy: Vec<usize>,
}

impl RqIndex {
    pub(super) fn new(topo: &Topology) -> RqIndex {
        let n = topo.ncpus();
        RqIndex {
            load: vec![0; n],
            by_load: vec![CpuSet::range(0, n)],
            natives: vec![0; n],
            native_busy: CpuSet::new(),
            node_of: (0..n).map(|c| topo.node_of(c)).collect(),
            node_busy: vec![0; topo.nnodes()],
        }
    }

    fn set_load(&mut self, cpu: CpuId, load: usize) {
        let old = self.load[cpu];
        if old == load {
            return;
        }
        self.by_load[old].remove(cpu);
        if self.by_load.len() <= load {
            self.by_load.resize(load + 1, CpuSet::new());
        }
        self.by_load[load].insert(cpu);
        self.load[cpu] = load;
    }

    fn native_in(&mut self, cpu: CpuId) {
        self.natives[cpu] += 1;
        if self.natives[cpu] == 1 {
            self.native_busy.insert(cpu);
            self.node_busy[self.node_of[cpu]] += 1;
        }
    }

    fn native_out(&mut self, cpu: CpuId) {
        self.natives[cpu] -= 1;
        if self.natives[cpu] == 0 {
            self.native_busy.remove(cpu);
            self.node_busy[self.node_of[cpu]] -= 1;
        }
    }

    /// CPUs busy with native (object-less) threads.
    pub(super) fn native_busy(&self) -> &CpuSet {
        &self.native_busy
    }

    /// How many of node `node`'s CPUs are busy with native threads.
    pub(super) fn node_busy(&self, node: usize) -> usize {
        self.node_busy[node]
    }

    /// The least-loaded CPU with load below `below` that is in `within` (if
    /// given), not in `not` and not `except`; the lowest number on ties.
    pub(super) fn least_loaded(
        &self,
        below: usize,
        within: Option<&CpuSet>,
        not: &CpuSet,
        except: Option<CpuId>,
    ) -> Option<CpuId> {
        self.by_load.iter().take(below).find_map(|set| set.first_where(within, not, except))
    }
}

impl ClusterScheduler {
    /// Records that `cpu`'s `nr_running` may have changed.
    pub(super) fn load_changed(&mut self, cpu: CpuId) {
        let n = self.nr_running(cpu);
        self.index.set_load(cpu, n);
    }

    /// Thread `t` joined (`true`) or left `cpu`'s run queue or its `curr`.
    pub(super) fn membership_changed(&mut self, cpu: CpuId, t: ThreadId, joined: bool) {
        if !self.threads[t].has_object() {
            if joined {
                self.index.native_in(cpu);
            } else {
                self.index.native_out(cpu);
            }
        }
        self.load_changed(cpu);
    }

    /// Sets what `cpu` runs.
    pub(super) fn set_curr(&mut self, cpu: CpuId, t: Option<ThreadId>) {
        if let Some(old) = self.rqs[cpu].curr.take() {
            self.membership_changed(cpu, old, false);
        }
        self.rqs[cpu].curr = t;
        if let Some(t) = t {
            self.membership_changed(cpu, t, true);
        }
    }

    /// Sets which thread has borrowed `cpu`.
    pub(super) fn set_borrowed(&mut self, cpu: CpuId, by: Option<ThreadId>) {
        self.rqs[cpu].borrowed_by = by;
        self.load_changed(cpu);
    }

    /// Sets thread `t`'s object (the caller keeps `in_objects`).
    pub(super) fn set_object(&mut self, t: ThreadId, object: Option<ExecObject>) {
        let in_rq = matches!(self.threads[t].state, TState::Queued | TState::Running);
        let was_native = !self.threads[t].has_object();
        self.threads[t].object = object;
        let native = !self.threads[t].has_object();
        if in_rq && was_native != native {
            let cpu = self.threads[t].cpu;
            if native {
                self.index.native_in(cpu);
            } else {
                self.index.native_out(cpu);
            }
        }
    }

    /// Checks the invariants of the index (module doc).
    pub(super) fn check_index(&self) -> Result<(), String> {
        let ix = &self.index;
        for cpu in 0..self.rqs.len() {
            let n = self.nr_running(cpu);
            if ix.load[cpu] != n || ix.by_load.iter().enumerate().any(|(l, s)| s.contains(cpu) != (l == n)) {
                return Err(format!("CPU {cpu} runs {n} threads, its load index says {}", ix.load[cpu]));
            }
            let rq = &self.rqs[cpu];
            let natives = rq
                .queue
                .iter()
                .map(|&(_, t)| t)
                .chain(rq.curr)
                .filter(|&t| !self.threads[t].has_object())
                .count();
            if ix.natives[cpu] as usize != natives || ix.native_busy.contains(cpu) != (natives > 0) {
                return Err(format!(
                    "CPU {cpu} has {natives} native threads, its index says {}",
                    ix.natives[cpu]
                ));
            }
        }
        for (node, &busy) in ix.node_busy.iter().enumerate() {
            let (first, len) = self.topo.node_range(node);
            if busy != ix.native_busy.iter().filter(|c| (first..first + len).contains(c)).count() {
                return Err(format!("node {node}'s count of CPUs busy with natives is stale"));
            }
        }
        Ok(())
    }
}
