//! Execution objects in the scheduler: asking node managers for objects,
//! borrowing CPUs by virtual runtime, fusing, splitting, preempting.

use super::tax::{credit_ns, first_vruntime, placed};
use super::{Action, ClusterScheduler, TState, ThreadId};
use crate::exec::ExecObject;
use crate::node::Assignment;
use crate::{CpuId, CpuSet, Nanos};

impl ClusterScheduler {
    pub(super) fn request_object(&mut self, now: Nanos, t: ThreadId, out: &mut Vec<Action>) {
        // The node whose pool (CPUs not busy with native threads) gives the
        // most CPUs per request once this one joins, then the fewest
        // requests, then the lowest number.
        let node = (0..self.nms.len())
            .max_by(|&a, &b| {
                let key = |n: usize| {
                    let pool = (self.topo.node_range(n).1 - self.index.node_busy(n)) as u64;
                    let reqs = self.nms[n].requests() as u64 + 1;
                    // Compare pool/reqs exactly: scale by a common multiple.
                    (pool * 1_000_000 / reqs, u64::MAX - reqs, usize::MAX - n)
                };
                key(a).cmp(&key(b))
            })
            .expect("at least one node");
        self.threads[t].node = Some(node);
        let spec = &self.threads[t].spec;
        let changes = self.nms[node].request(t, spec.want_cpus, spec.weight, self.index.native_busy());
        self.apply(now, changes, out);
    }

    /// Applies node-manager changes: notify the object, re-queue the thread
    /// on its new representative, refresh `vruntimes[]`.
    pub(super) fn apply(&mut self, now: Nanos, changes: Vec<Assignment>, out: &mut Vec<Action>) {
        // `in_objects`: the changed threads' old objects out, then their new
        // ones in (objects are disjoint, but one may take CPUs another gives up).
        for a in &changes {
            if let Some(o) = &self.threads[a.thread].object {
                self.in_objects.remove_all(&o.cpus());
            }
        }
        for a in &changes {
            if let Some(o) = &a.object {
                self.in_objects.extend_from(&o.cpus());
            }
        }
        for a in changes {
            let t = a.thread;
            out.push(Action::Object { thread: t, object: a.object.clone() });
            if !self.threads[t].fused.is_empty() {
                self.deactivate(now, t, out);
            }
            let new_rep = a.object.as_ref().map(|o| o.representative);
            self.set_object(t, a.object);
            let state = self.threads[t].state;
            // Not runnable: it goes to its new representative when it wakes.
            if matches!(state, TState::New | TState::Blocked | TState::Exited) {
                continue;
            }
            let from = self.threads[t].cpu;
            if let Some(rep) = new_rep
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

    /// `vruntimes[c]` for each CPU the thread would borrow: a CPU it had
    /// keeps its value; a new one gets its first placement (`tax.rs`, rule
    /// 1: c's `min_vruntime` plus the thread's lag on its own CPU).
    pub(super) fn reset_vruntimes(&mut self, t: ThreadId) {
        let th = &self.threads[t];
        let own_min = self.rqs[th.cpu].min_vruntime;
        let v: Vec<(CpuId, u64)> = match &th.object {
            Some(o) => o
                .borrowed
                .iter()
                .map(|c| (c, first_vruntime(self.rqs[c].min_vruntime, th.vruntime, own_min)))
                .collect(),
            None => Vec::new(),
        };
        // Never lower a recorded value for a CPU kept across the change.
        let old = std::mem::take(&mut self.threads[t].vruntimes);
        self.threads[t].vruntimes = v
            .into_iter()
            .map(|(c, m)| (c, old.iter().find(|(oc, _)| *oc == c).map_or(m, |(_, ov)| (*ov).max(m))))
            .collect();
    }

    /// Can `t` borrow `c` now? Its `vruntimes[c]` is first placed no more
    /// than the credit behind `c`'s `min_vruntime` (`tax.rs`, rule 2, as CFS
    /// places a waking task); then it may borrow only if that is behind the
    /// thread running on `c` (which has had its minimum granularity) or, if
    /// none runs, the first queued. The tax rate decides how far ahead each
    /// borrowed stretch puts it: that is its share.
    pub(super) fn can_borrow(&mut self, now: Nanos, t: ThreadId, c: CpuId) -> bool {
        self.decisions += 1;
        // Bring the running thread's virtual runtime up to now.
        self.update_curr(now, c);
        if self.rqs[c].borrowed_by.is_some_and(|b| b != t) {
            return false;
        }
        let (floor, credit) = (self.rqs[c].min_vruntime, credit_ns(self.cfg.min_granularity_ns));
        if let Some((_, v)) = self.threads[t].vruntimes.iter_mut().find(|(cc, _)| *cc == c) {
            *v = placed(*v, floor, credit);
        }
        let rq = &self.rqs[c];
        let mine = self.threads[t].vr_on(c);
        match rq.curr {
            Some(u) => {
                let uth = &self.threads[u];
                if uth.object_len() > 1 {
                    return false;
                }
                mine < uth.vruntime && now.saturating_sub(uth.slice_start) >= self.cfg.min_granularity_ns
            }
            None => rq.queue.first().is_none_or(|&(v, _)| mine < v),
        }
    }

    /// Tries to activate `t`'s object (or a smaller one around its
    /// representative) when `t` runs.
    pub(super) fn try_activate(&mut self, now: Nanos, t: ThreadId, out: &mut Vec<Action>) {
        let rep = self.threads[t].cpu;
        debug_assert_eq!(self.rqs[rep].curr, Some(t));
        if self.threads[t].representative() != Some(rep) {
            return;
        }
        let mut size = self.threads[t].object_len();
        // Blocks are aligned runs of CPUs: the block is `start..start + size`
        // and what it needs borrowed is `rep + 1..rep + size` (no set is built
        // unless it fuses: this runs at every tick of such a thread).
        while size >= 2 {
            let Some(start) = self.topo.block_start(rep, size) else { break };
            let inside =
                self.threads[t].object.as_ref().is_some_and(|o| (start..start + size).all(|c| o.contains(c)));
            if start != rep || !inside {
                break;
            }
            let fused = &self.threads[t].fused;
            let fused_len = fused.len();
            if fused_len == size - 1 && (rep + 1..rep + size).all(|c| fused.contains(c)) {
                return; // already fused at the best size we can get
            }
            if size - 1 < fused_len {
                return; // never shrink here; preemption does that
            }
            if (rep + 1..rep + size).all(|c| self.can_borrow(now, t, c)) {
                if fused_len > 0 {
                    self.deactivate(now, t, out);
                }
                self.activate(now, t, CpuSet::range(start, start + size), out);
                return;
            }
            size /= 2;
        }
    }

    /// Fuses `block` for `t`: preempts what runs on the borrowed CPUs, and
    /// emits `Fuse` and the `Offline` of the borrowed CPUs. The object's
    /// minimum granularity starts when the backend says the offline is done.
    pub(super) fn activate(&mut self, now: Nanos, t: ThreadId, block: CpuSet, out: &mut Vec<Action>) {
        let object = ExecObject::new(&block);
        debug_assert_eq!(object.representative, self.threads[t].cpu);
        for c in object.borrowed.iter() {
            if self.rqs[c].curr.is_some() {
                self.put_prev(now, c, out);
            }
            self.set_borrowed(c, Some(t));
            self.mark(c);
        }
        let id = self.reconfig_id();
        self.fusing.push((id, t));
        let th = &mut self.threads[t];
        th.fused = object.borrowed.clone();
        th.fused_since = None;
        self.mark(object.representative);
        let cpus = object.borrowed.clone();
        out.push(Action::Fuse { thread: t, object });
        out.push(Action::Offline { id, cpus, mode: self.cfg.reconfig_mode });
    }

    /// Splits `t`'s active object: emits `Split` and the `Online` of the
    /// borrowed CPUs, and lets them schedule their own threads again.
    pub(super) fn deactivate(&mut self, now: Nanos, t: ThreadId, out: &mut Vec<Action>) {
        let rep = self.threads[t].cpu;
        if self.rqs[rep].curr == Some(t) {
            self.update_curr(now, rep);
        }
        // A fuse still in progress is abandoned: its `ReconfigDone` no longer
        // starts anything.
        self.fusing.retain(|&(_, th)| th != t);
        let fused = std::mem::take(&mut self.threads[t].fused);
        let mut block = fused.clone();
        block.insert(rep);
        let id = self.reconfig_id();
        out.push(Action::Split { thread: t, object: ExecObject::new(&block) });
        out.push(Action::Online { id, cpus: fused.clone(), mode: self.cfg.reconfig_mode });
        self.mark(rep);
        for c in fused.iter() {
            debug_assert_eq!(self.rqs[c].borrowed_by, Some(t));
            self.set_borrowed(c, None);
            self.mark(c);
            self.schedule(now, c, out);
        }
    }

    /// A fused object yields once it has had its minimum granularity and a
    /// thread on a borrowed CPU is behind the fused thread's `vruntimes[c]`.
    pub(super) fn check_fused_preemption(&mut self, now: Nanos, t: ThreadId, out: &mut Vec<Action>) {
        let Some(since) = self.threads[t].fused_since else {
            return; // the fuse has not finished
        };
        if now.saturating_sub(since) < self.cfg.min_granularity_ns {
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
}
