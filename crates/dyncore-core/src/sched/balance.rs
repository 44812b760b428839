//! Load balancing: wake-up placement, idle pulls, pushing natives off a
//! representative CPU, SMT spreading.

use super::{Action, ClusterScheduler, ThreadId};
use crate::{CpuId, CpuSet, Nanos};

impl ClusterScheduler {
    /// Wake-up placement: an idle allowed CPU (on SMT, one whose sibling is
    /// idle too), else the least loaded; lowest number on ties.
    pub(super) fn select_cpu(&self, t: ThreadId) -> CpuId {
        if !self.smt {
            // Without siblings: the least loaded, from the load index.
            let within = self.threads[t].spec.affinity.as_ref();
            return self
                .index
                .least_loaded(usize::MAX, within, &CpuSet::new(), None)
                .unwrap_or_else(|| panic!("thread {t} has an empty affinity"));
        }
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
    pub(super) fn idle_balance(&mut self, cpu: CpuId) {
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
    pub(super) fn push_natives_off_rep(&mut self, cpu: CpuId) {
        let Some(&(_, victim)) = self.rqs[cpu].queue.iter().find(|&&(_, t)| !self.threads[t].has_object())
        else {
            return;
        };
        self.decisions += 1;
        // The least-loaded allowed CPU outside every object (lowest number
        // on ties), if it is less loaded than this one.
        let here = self.nr_running(cpu);
        let within = self.threads[victim].spec.affinity.as_ref();
        if let Some(to) = self.index.least_loaded(here, within, &self.in_objects, Some(cpu)) {
            self.migrate_queued(victim, cpu, to);
            self.migrations_pending.push((victim, cpu, to));
        }
    }

    pub(super) fn migrate_queued(&mut self, t: ThreadId, from: CpuId, to: CpuId) {
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
    pub(super) fn smt_balance(&mut self, now: Nanos, cpu: CpuId, out: &mut Vec<Action>) {
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
}
