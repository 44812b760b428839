//! `first-fit`: a policy written outside dyncore's tree, as a researcher
//! writes one — never fuse; every thread goes, at its spawn, to the first
//! CPU of its affinity with the fewest threads, and stays there; a CPU runs
//! its threads one after another, each to its end (FIFO, no time slicing).
//!
//! It reads `Spawn` and `Exit` (and ignores the rest), and emits
//! `SetSpeed` (the baseline duty, before a CPU first runs a thread) and
//! `Dispatch`. It is registered with
//! `Registry::builtin().with(&custom_policy::POLICY)` and runs on both
//! backends through `dyncore::Runner` (see `src/main.rs`).

use std::collections::VecDeque;

use dyncore::core::CpuId;
use dyncore::core::policy::{ActionKind, CpuState, EventKind, ThreadId};
use dyncore::core::speed::{Duty, SpeedClass};
use dyncore::{Action, Event, Params, Policy, PolicyEntry, PolicyInfo, RunContext};

/// The registry entry: what `dyncore policies` lists and scenarios name.
pub static POLICY: PolicyEntry = PolicyEntry {
    info: PolicyInfo {
        name: "first-fit",
        summary: "never fuse; each thread to the first CPU with the fewest threads, run to its end (FIFO)",
        params: &[],
        events: &[EventKind::Spawn, EventKind::Exit],
        actions: &[ActionKind::SetSpeed, ActionKind::Dispatch],
    },
    build: |ctx, params| Box::new(FirstFit::new(ctx, params)),
};

/// Per CPU: the thread it runs and those waiting for it, in spawn order.
pub struct FirstFit {
    ctx: RunContext,
    queues: Vec<VecDeque<ThreadId>>,
    /// Each thread's CPU and speed class.
    threads: Vec<(CpuId, SpeedClass)>,
    /// The duty each CPU was last set to.
    duty: Vec<Option<Duty>>,
}

impl FirstFit {
    pub fn new(ctx: &RunContext, _: &Params) -> FirstFit {
        let n = ctx.topology.ncpus();
        FirstFit {
            ctx: ctx.clone(),
            queues: vec![VecDeque::new(); n],
            threads: Vec::new(),
            duty: vec![None; n],
        }
    }

    /// Runs the head of `cpu`'s queue, at its duty (Table 2: its class on
    /// this kind of CPU, natively), or nothing.
    fn dispatch(&mut self, cpu: CpuId, out: &mut Vec<Action>) {
        let state = match self.queues[cpu].front() {
            Some(&thread) => {
                let want = self.ctx.speed.duty(self.ctx.topology.kind(cpu), 1, self.threads[thread].1);
                if self.duty[cpu] != Some(want) {
                    out.push(Action::SetSpeed { cpu, duty: want });
                    self.duty[cpu] = Some(want);
                }
                CpuState::Running { thread, object_cpus: 1 }
            }
            None => CpuState::Idle,
        };
        out.push(Action::Dispatch { cpu, state });
    }
}

impl Policy for FirstFit {
    fn handle(&mut self, _now: dyncore::core::Nanos, event: &Event, out: &mut Vec<Action>) {
        match event {
            Event::Spawn { thread, spec } => {
                let allowed = |c: &CpuId| spec.affinity.as_ref().is_none_or(|a| a.contains(*c));
                let cpu = (0..self.queues.len())
                    .filter(allowed)
                    .min_by_key(|&c| (self.queues[c].len(), c))
                    .expect("a thread's affinity names a CPU of the machine");
                assert_eq!(self.threads.len(), *thread, "threads are named densely, in spawn order");
                self.threads.push((cpu, spec.class));
                self.queues[cpu].push_back(*thread);
                if self.queues[cpu].len() == 1 {
                    self.dispatch(cpu, out);
                }
            }
            Event::Exit { thread } => {
                let cpu = self.threads[*thread].0;
                let was_running = self.queues[cpu].front() == Some(thread);
                self.queues[cpu].retain(|t| t != thread);
                if was_running {
                    self.dispatch(cpu, out);
                }
            }
            _ => {}
        }
    }

    fn check(&self) -> Result<(), String> {
        for (t, &(cpu, _)) in self.threads.iter().enumerate() {
            if self.queues.iter().enumerate().any(|(c, q)| c != cpu && q.contains(&t)) {
                return Err(format!("thread {t} is queued on a CPU other than its own ({cpu})"));
            }
        }
        Ok(())
    }
}
