//! `greedy-fuse`: a naive dynamic-processor policy, the kind a designer
//! writes first. Threads are placed as by [`pinned`](super::pinned) (the
//! least-loaded CPU of their affinity at spawn, round-robin on a CPU). A
//! thread that runs alone on its CPU and wants a fused object
//! (`spec.want_cpus`) fuses with its neighbours — the aligned block of its
//! node around it, the largest of at most `want_cpus` and `max_fuse` CPUs —
//! as soon as every other CPU of the block has been idle for `idle_ms`. It
//! never borrows a busy CPU (no taxation, no node manager), and splits the
//! object on the first wake-up of a neighbour: a thread spawned onto one of
//! its borrowed CPUs (idle CPUs are taken first), or onto its own CPU. Its
//! exit splits it too.
//!
//! **Events handled**: `Spawn` (place; split the object whose CPU it lands
//! on), `Exit` (split its object; the next thread of its CPU runs), `Tick`
//! (round-robin; fuse the CPU's lone thread if its neighbours have been
//! idle long enough). `ReconfigDone` is not needed: a backend serialises a
//! CPU's reconfigurations and stalls a thread dispatched on a CPU until it
//! is online.
//!
//! **Actions emitted**: `Migrate` (the thread moves to the object's lowest
//! CPU, its representative, when it is not on it), `Fuse` then the
//! `Offline` of its borrowed CPUs (Bolt's path), `Split` then their
//! `Online`, and, from [`Pinned::flush`], `SetSpeed` (the object's duty)
//! and `Dispatch` (`Running` at the object's size on the representative,
//! `Borrowed` on the others).
//!
//! Set beside Chameleon on the Figure 6 and 7 mixes
//! (`scenarios/policy-greedy-fuse.toml`): what node managers (objects for
//! the threads that gain most, handed on at exits) and taxation (borrowing
//! busy CPUs at a price) buy over this.

use super::pinned::Pinned;
use super::{Param, ParamKind, Params, PolicyEntry, PolicyInfo, RunContext};
use crate::exec::ExecObject;
use crate::policy::{Action, ActionKind, Event, EventKind, Policy, ReconfigId, ThreadId};
use crate::{CpuId, Nanos};

pub static POLICY: PolicyEntry = PolicyEntry {
    info: PolicyInfo {
        name: "greedy-fuse",
        summary: "pinned placement; a lone thread fuses with its neighbours once they have been idle idle_ms, \
                  never borrows a busy CPU, splits on the first wake-up of a neighbour",
        params: &[Param {
            name: "idle_ms",
            doc: "how long a neighbour must have been idle before it is borrowed, ms",
            kind: ParamKind::Float { min: 0.0, max: 86_400_000.0, default: 2.0 },
        }],
        events: &[EventKind::Spawn, EventKind::Exit, EventKind::Tick],
        actions: &[
            ActionKind::SetSpeed,
            ActionKind::Dispatch,
            ActionKind::Migrate,
            ActionKind::Fuse,
            ActionKind::Offline,
            ActionKind::Split,
            ActionKind::Online,
        ],
    },
    build: |ctx, params| Box::new(GreedyFuse::new(ctx, params)),
};

struct GreedyFuse {
    base: Pinned,
    idle_ns: Nanos,
    /// Per thread: the object size it wants, and its object when fused.
    want: Vec<usize>,
    object: Vec<Option<ExecObject>>,
    next_id: u64,
}

impl GreedyFuse {
    fn new(ctx: &RunContext, params: &Params) -> GreedyFuse {
        GreedyFuse {
            base: Pinned::new(ctx),
            idle_ns: (params.f64("idle_ms") * 1e6) as Nanos,
            want: Vec::new(),
            object: Vec::new(),
            next_id: 0,
        }
    }

    fn id(&mut self) -> ReconfigId {
        self.next_id += 1;
        ReconfigId(self.next_id)
    }

    /// Splits `thread`'s object, if it has one: its CPUs come back idle.
    fn split(&mut self, thread: ThreadId, out: &mut Vec<Action>) {
        let Some(object) = self.object[thread].take() else { return };
        for b in object.borrowed.iter() {
            self.base.lent[b] = None;
        }
        self.base.size[object.representative] = 1;
        let (cpus, mode) = (object.borrowed.clone(), self.base.ctx.reconfig_mode);
        out.push(Action::Split { thread, object });
        out.push(Action::Online { id: self.id(), cpus, mode });
    }

    /// Whether `cpu` has been idle, and not lent, since `now - idle_ns`.
    fn idle(&self, now: Nanos, cpu: CpuId) -> bool {
        let b = &self.base;
        b.queues[cpu].is_empty() && b.lent[cpu].is_none() && now.saturating_sub(b.sent[cpu].2) >= self.idle_ns
    }

    /// Fuses the lone thread of `cpu` with its idle neighbours, if it
    /// wants an object and a block around it is idle long enough.
    fn try_fuse(&mut self, now: Nanos, cpu: CpuId, out: &mut Vec<Action>) {
        let b = &self.base;
        if b.lent[cpu].is_some() || b.queues[cpu].len() != 1 || self.object[b.queues[cpu][0]].is_some() {
            return;
        }
        let thread = b.queues[cpu][0];
        let mut size = self.want[thread].min(b.ctx.max_fuse).next_power_of_two();
        while size > 1 {
            let block = b.ctx.topology.block_of(cpu, size);
            if let Some(block) = block.filter(|s| s.iter().all(|c| c == cpu || self.idle(now, c))) {
                let object = ExecObject::new(&block);
                let rep = object.representative;
                if rep != cpu {
                    self.base.queues[cpu].clear();
                    self.base.queues[rep].push_back(thread);
                    self.base.threads[thread].0 = rep;
                    out.push(Action::Migrate { thread, from: cpu, to: rep, defrag: false });
                }
                for c in object.borrowed.iter() {
                    self.base.lent[c] = Some(thread);
                }
                self.base.size[rep] = size;
                let (cpus, mode) = (object.borrowed.clone(), self.base.ctx.reconfig_mode);
                self.object[thread] = Some(object.clone());
                out.push(Action::Fuse { thread, object });
                out.push(Action::Offline { id: self.id(), cpus, mode });
                return;
            }
            size /= 2;
        }
    }
}

impl Policy for GreedyFuse {
    fn handle(&mut self, now: Nanos, event: &Event, out: &mut Vec<Action>) {
        match event {
            Event::Spawn { thread, spec } => {
                let b = &self.base;
                // An idle CPU first; else the least loaded, lent ones counting as idle.
                let cpu = match b.least_loaded(spec, |c| b.lent[c].is_none()) {
                    Some(c) if b.queues[c].is_empty() => c,
                    _ => b.least_loaded(spec, |_| true).expect("a thread's affinity names a CPU"),
                };
                let woken = b.lent[cpu].or_else(|| b.queues[cpu].front().copied());
                if let Some(owner) = woken {
                    self.split(owner, out);
                }
                self.base.place(*thread, spec.class, cpu);
                self.want.push(spec.want_cpus);
                self.object.push(None);
            }
            Event::Exit { thread } => {
                self.split(*thread, out);
                self.base.exit(*thread);
            }
            Event::Tick { cpu } => {
                self.base.tick(now, *cpu);
                self.try_fuse(now, *cpu, out);
            }
            _ => return,
        }
        self.base.flush(now, out);
    }

    fn check(&self) -> Result<(), String> {
        self.base.check()?;
        for (t, o) in self.object.iter().enumerate() {
            if let Some(o) = o
                && (self.base.threads[t].0 != o.representative || self.base.queues[o.representative].len() != 1)
            {
                return Err(format!("fused thread {t} is not alone on its object's representative {o}"));
            }
        }
        Ok(())
    }
}
