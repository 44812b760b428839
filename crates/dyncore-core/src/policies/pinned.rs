//! `pinned`: the static baseline papers compare against, and the template
//! to copy for a policy of your own. No execution objects: each thread
//! goes, at its spawn, to the least-loaded CPU of its affinity (fewest
//! threads; the lowest on a tie) and stays there for life. The threads of
//! one CPU share it round-robin, each for `min_granularity_ns` at a time.
//!
//! **Events handled** (declared in `events` below; every other is ignored):
//! * `Spawn { thread, spec }` — queue `thread` on the least-loaded CPU
//!   allowed by `spec.affinity`; if that CPU was idle, it runs it now.
//! * `Exit { thread }` — drop it from its CPU's queue; if it was running,
//!   the next in the queue runs (or the CPU goes idle).
//! * `Tick { cpu }` — if the running thread has had `min_granularity_ns`
//!   and another waits, it goes to the back of the queue.
//!
//! **Actions emitted** (declared in `actions`), by [`Pinned::flush`] at the
//! end of each call, in CPU order, for the CPUs whose state changed:
//! * `SetSpeed { cpu, duty }` — before a thread runs, when the duty the
//!   speed model gives its class on this CPU kind differs from the last.
//! * `Dispatch { cpu, state }` — `Running { thread, object_cpus: 1 }` or `Idle`.
//!
//! Contract (docs/writing-a-policy.md): a thread on one CPU at a time, only
//! between spawn and exit, at a speed set first; the checkers hold it.
//!
//! `greedy-fuse` and `park-idle` build on its queues and [`Pinned::flush`].

use std::collections::VecDeque;

use super::{Params, PolicyEntry, PolicyInfo, RunContext};
use crate::policy::{Action, ActionKind, CpuState, Event, EventKind, Policy, ThreadId, ThreadSpec};
use crate::speed::{Duty, SpeedClass};
use crate::{CpuId, Nanos};

pub static POLICY: PolicyEntry = PolicyEntry {
    info: PolicyInfo {
        name: "pinned",
        summary: "no execution objects: each thread pinned at spawn to the least-loaded CPU of its affinity, \
                  round-robin among the threads of a CPU (the static baseline)",
        params: &[],
        events: &[EventKind::Spawn, EventKind::Exit, EventKind::Tick],
        actions: &[ActionKind::SetSpeed, ActionKind::Dispatch],
    },
    build: |ctx, _: &Params| Box::new(Pinned::new(ctx)),
};

/// Per CPU: its threads, the head running; per thread: its CPU and class.
pub(super) struct Pinned {
    pub(super) ctx: RunContext,
    pub(super) queues: Vec<VecDeque<ThreadId>>,
    pub(super) threads: Vec<(CpuId, SpeedClass)>,
    /// Per CPU: the size of the object its head runs on (1: native), and
    /// the thread it is lent to (borrowed into that thread's object).
    pub(super) size: Vec<usize>,
    pub(super) lent: Vec<Option<ThreadId>>,
    /// What each CPU was last dispatched, at which duty, since when.
    pub(super) sent: Vec<(CpuState, Option<Duty>, Nanos)>,
}

impl Pinned {
    pub(super) fn new(ctx: &RunContext) -> Pinned {
        let n = ctx.topology.ncpus();
        Pinned {
            ctx: ctx.clone(),
            queues: vec![VecDeque::new(); n],
            threads: Vec::new(),
            size: vec![1; n],
            lent: vec![None; n],
            sent: vec![(CpuState::Idle, None, 0); n],
        }
    }

    /// The least-loaded CPU of `spec`'s affinity that `usable` allows.
    pub(super) fn least_loaded(&self, spec: &ThreadSpec, usable: impl Fn(CpuId) -> bool) -> Option<CpuId> {
        (0..self.queues.len())
            .filter(|&c| spec.affinity.as_ref().is_none_or(|a| a.contains(c)) && usable(c))
            .min_by_key(|&c| (self.queues[c].len(), c))
    }

    /// Queues the new `thread` (named densely, in spawn order) on `cpu`, for good.
    pub(super) fn place(&mut self, thread: ThreadId, class: SpeedClass, cpu: CpuId) {
        assert_eq!(self.threads.len(), thread);
        self.threads.push((cpu, class));
        self.queues[cpu].push_back(thread);
    }

    /// Drops an exited thread.
    pub(super) fn exit(&mut self, thread: ThreadId) {
        self.queues[self.threads[thread].0].retain(|&t| t != thread);
    }

    /// What `cpu` must run now.
    pub(super) fn state(&self, cpu: CpuId) -> CpuState {
        match (self.lent[cpu], self.queues[cpu].front()) {
            (Some(by), _) => CpuState::Borrowed { by },
            (None, Some(&thread)) => CpuState::Running { thread, object_cpus: self.size[cpu] },
            (None, None) => CpuState::Idle,
        }
    }

    /// Emits, in CPU order, a `Dispatch` (and the `SetSpeed` before it) for
    /// every CPU whose state changed since the last call.
    pub(super) fn flush(&mut self, now: Nanos, out: &mut Vec<Action>) {
        for cpu in 0..self.queues.len() {
            let state = self.state(cpu);
            if let CpuState::Running { thread, object_cpus } = state {
                let want = self.ctx.speed.duty(self.ctx.topology.kind(cpu), object_cpus, self.threads[thread].1);
                if self.sent[cpu].1 != Some(want) {
                    out.push(Action::SetSpeed { cpu, duty: want });
                    self.sent[cpu].1 = Some(want);
                }
            }
            if self.sent[cpu].0 != state {
                out.push(Action::Dispatch { cpu, state });
                self.sent[cpu] = (state, self.sent[cpu].1, now);
            }
        }
    }

    /// Round-robin: the running thread of `cpu` goes to the back once it
    /// has had its slice and another waits.
    pub(super) fn tick(&mut self, now: Nanos, cpu: CpuId) {
        let q = &mut self.queues[cpu];
        if q.len() > 1 && now.saturating_sub(self.sent[cpu].2) >= self.ctx.min_granularity_ns {
            q.rotate_left(1);
        }
    }
}

impl Policy for Pinned {
    fn handle(&mut self, now: Nanos, event: &Event, out: &mut Vec<Action>) {
        match event {
            Event::Spawn { thread, spec } => {
                let cpu = self.least_loaded(spec, |_| true).expect("a thread's affinity names a CPU");
                self.place(*thread, spec.class, cpu);
            }
            Event::Exit { thread } => self.exit(*thread),
            Event::Tick { cpu } => self.tick(now, *cpu),
            _ => return,
        }
        self.flush(now, out);
    }

    fn check(&self) -> Result<(), String> {
        for (t, &(cpu, _)) in self.threads.iter().enumerate() {
            if self.queues.iter().enumerate().any(|(c, q)| c != cpu && q.contains(&t)) {
                return Err(format!("thread {t} is queued on CPU {cpu} and another"));
            }
        }
        Ok(())
    }
}
