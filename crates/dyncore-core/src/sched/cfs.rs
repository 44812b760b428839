//! CFS run-queue mechanics: virtual runtime, `min_vruntime`, enqueue,
//! dequeue, put back and pick next.

use super::{Action, ClusterScheduler, TState, ThreadId};
use crate::{CpuId, Nanos};

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

impl ClusterScheduler {
    pub(super) fn update_curr(&mut self, now: Nanos, cpu: CpuId) {
        let Some(t) = self.rqs[cpu].curr else { return };
        let th = &mut self.threads[t];
        let delta = now.saturating_sub(th.exec_start);
        if delta > 0 {
            // In u64 when the product fits (exactly the same quotient).
            let dv = match delta.checked_mul(NICE_0_LOAD) {
                Some(p) => p / th.load,
                None => (delta as u128 * NICE_0_LOAD as u128 / th.load as u128) as u64,
            };
            th.vruntime += dv;
            if !th.fused.is_empty() {
                // Taxation: borrowed time is charged times the tax rate.
                let taxed = super::tax::charge(dv, th.spec.tax);
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

    pub(super) fn update_min_vruntime(&mut self, cpu: CpuId) {
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

    pub(super) fn enqueue(&mut self, cpu: CpuId, t: ThreadId) {
        let th = &mut self.threads[t];
        th.cpu = cpu;
        th.state = TState::Queued;
        let inserted = self.rqs[cpu].queue.insert((th.vruntime, t));
        debug_assert!(inserted, "thread {t} queued twice");
        self.queued_total += 1;
        self.membership_changed(cpu, t, true);
    }

    pub(super) fn dequeue(&mut self, cpu: CpuId, t: ThreadId) {
        let removed = self.rqs[cpu].queue.remove(&(self.threads[t].vruntime, t));
        assert!(removed, "thread {t} not in queue {cpu}");
        self.queued_total -= 1;
        self.membership_changed(cpu, t, false);
    }

    /// Puts the running thread back into its queue (splitting its object).
    pub(super) fn put_prev(&mut self, now: Nanos, cpu: CpuId, out: &mut Vec<Action>) {
        let Some(t) = self.rqs[cpu].curr else { return };
        self.update_curr(now, cpu);
        if !self.threads[t].fused.is_empty() {
            self.deactivate(now, t, out);
        }
        self.set_curr(cpu, None);
        self.enqueue(cpu, t);
        self.mark(cpu);
    }

    /// Picks the next thread if the CPU is free.
    pub(super) fn schedule(&mut self, now: Nanos, cpu: CpuId, out: &mut Vec<Action>) {
        if self.rqs[cpu].borrowed_by.is_some() || self.rqs[cpu].curr.is_some() {
            return;
        }
        self.decisions += 1;
        let Some(&(_, t)) = self.rqs[cpu].queue.first() else {
            self.mark(cpu);
            return;
        };
        self.dequeue(cpu, t);
        self.set_curr(cpu, Some(t));
        let th = &mut self.threads[t];
        th.state = TState::Running;
        th.exec_start = now;
        th.slice_start = now;
        self.update_min_vruntime(cpu);
        self.mark(cpu);
        if self.cfg.chameleon && self.threads[t].object_len() > 1 {
            self.try_activate(now, t, out);
        }
    }

    pub(super) fn nr_running(&self, cpu: CpuId) -> usize {
        let rq = &self.rqs[cpu];
        rq.queue.len() + usize::from(rq.curr.is_some() || rq.borrowed_by.is_some())
    }

    pub(super) fn allowed(&self, t: ThreadId, cpu: CpuId) -> bool {
        self.threads[t].spec.affinity.as_ref().is_none_or(|a| a.contains(cpu))
    }
}
