//! `park-idle`: Bolt's energy argument (Bolt §4) as a policy. Threads are
//! placed as by [`pinned`](super::pinned), on online CPUs. A CPU that has
//! been idle for `idle_ms` is taken offline through the Bolt path (a
//! standalone `Offline`: parked, power-gated, drawing nothing); a parked
//! CPU is brought back online on demand, when a thread is spawned and every
//! online CPU of its affinity already has one. The thread is dispatched on
//! the waking CPU in the same call and starts when its online is done: the
//! wake-up latency the thread pays. One CPU always stays online.
//!
//! Against "all online" (`pinned`, the same placement that never parks),
//! the report's "Energy and wake-ups" table gives the modelled energy, the
//! time parked, the parks and wake-ups and the wake-ups' latency, and the
//! thread time stalled behind them; parking pays when a CPU's idle gaps
//! are long beside `idle_ms` and the reconfiguration's cost
//! (`scenarios/policy-park-idle*.toml`).
//!
//! **Events handled**: `Spawn` (place; wake a parked CPU if no online one
//! is free), `Exit` (the next thread of its CPU runs, or the CPU goes
//! idle), `Tick` (round-robin; park, in one bulk `Offline`, every online
//! CPU idle for `idle_ms`). `ReconfigDone` is not needed: the backend
//! serialises a CPU's reconfigurations, so an `Online` may follow its
//! `Offline` at once.
//!
//! **Actions emitted**: `Offline` and `Online` (standalone, in the run's
//! reconfiguration mode), and, from [`Pinned::flush`], `SetSpeed` and
//! `Dispatch` (`Running` or `Idle`; a parked CPU is idle).

use super::pinned::Pinned;
use super::{Param, ParamKind, Params, PolicyEntry, PolicyInfo, RunContext};
use crate::policy::{Action, ActionKind, Event, EventKind, Policy, ReconfigId};
use crate::{CpuSet, Nanos};

pub static POLICY: PolicyEntry = PolicyEntry {
    info: PolicyInfo {
        name: "park-idle",
        summary: "pinned placement on online CPUs; a CPU idle for idle_ms is parked offline (Bolt's path), \
                  brought back online when a thread needs it",
        params: &[Param {
            name: "idle_ms",
            doc: "how long a CPU must have been idle before it is parked, ms",
            kind: ParamKind::Float { min: 0.0, max: 86_400_000.0, default: 5.0 },
        }],
        events: &[EventKind::Spawn, EventKind::Exit, EventKind::Tick],
        actions: &[ActionKind::SetSpeed, ActionKind::Dispatch, ActionKind::Offline, ActionKind::Online],
    },
    build: |ctx, params| Box::new(ParkIdle::new(ctx, params)),
};

struct ParkIdle {
    base: Pinned,
    idle_ns: Nanos,
    parked: Vec<bool>,
    next_id: u64,
}

impl ParkIdle {
    fn new(ctx: &RunContext, params: &Params) -> ParkIdle {
        ParkIdle {
            base: Pinned::new(ctx),
            idle_ns: (params.f64("idle_ms") * 1e6) as Nanos,
            parked: vec![false; ctx.topology.ncpus()],
            next_id: 0,
        }
    }

    fn id(&mut self) -> ReconfigId {
        self.next_id += 1;
        ReconfigId(self.next_id)
    }

    /// Parks, in one bulk `Offline`, every online CPU idle for `idle_ns`,
    /// keeping one CPU online.
    fn park(&mut self, now: Nanos, out: &mut Vec<Action>) {
        let b = &self.base;
        let idle =
            |c: usize| b.queues[c].is_empty() && now.saturating_sub(b.sent[c].2) >= self.idle_ns && !self.parked[c];
        let mut cpus: CpuSet = (0..self.parked.len()).filter(|&c| idle(c)).collect();
        let online = self.parked.iter().filter(|p| !**p).count();
        if cpus.len() == online {
            cpus.remove(cpus.first().expect("one CPU at least"));
        }
        if cpus.is_empty() {
            return;
        }
        for c in cpus.iter() {
            self.parked[c] = true;
        }
        let mode = self.base.ctx.reconfig_mode;
        out.push(Action::Offline { id: self.id(), cpus, mode });
    }
}

impl Policy for ParkIdle {
    fn handle(&mut self, now: Nanos, event: &Event, out: &mut Vec<Action>) {
        match event {
            Event::Spawn { thread, spec } => {
                let b = &self.base;
                let online = b.least_loaded(spec, |c| !self.parked[c]);
                let cpu = match online {
                    Some(c) if b.queues[c].is_empty() => c,
                    // Every online CPU it may use is busy (or none is online): wake one.
                    _ => match b.least_loaded(spec, |c| self.parked[c]) {
                        Some(c) => {
                            self.parked[c] = false;
                            let mode = self.base.ctx.reconfig_mode;
                            out.push(Action::Online { id: self.id(), cpus: CpuSet::single(c), mode });
                            c
                        }
                        None => online.expect("a thread's affinity names a CPU"),
                    },
                };
                self.base.place(*thread, spec.class, cpu);
            }
            Event::Exit { thread } => self.base.exit(*thread),
            Event::Tick { cpu } => {
                self.base.tick(now, *cpu);
                self.park(now, out);
            }
            _ => return,
        }
        self.base.flush(now, out);
    }

    fn check(&self) -> Result<(), String> {
        self.base.check()?;
        match (0..self.parked.len()).find(|&c| self.parked[c] && !self.base.queues[c].is_empty()) {
            Some(c) => Err(format!("parked CPU {c} has threads queued")),
            None => Ok(()),
        }
    }
}
