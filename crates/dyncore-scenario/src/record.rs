//! The run record: every output of a run — per-CPU time, per-program
//! completion and fused time, reconfiguration counters, the allocation
//! timeline, the Perfetto trace — built from the policy's traffic alone,
//! the events a backend fed it and the actions it got back, each stamped
//! with the backend's time. Both backends build their results here, once:
//! the simulator in virtual time, the live runtime on its monotonic clock.
//! A backend adds only what is its own (the simulator's IPIs, the live
//! programs' measured work).
//!
//! What each figure is, from the streams:
//!
//! * a CPU is **busy** while its last `Dispatch` says it runs a thread, and
//!   **borrowed** while it says it is borrowed into another's object;
//! * a CPU is **reconfiguring** from the `Offline`/`Online` that asks for it
//!   (or from the end of the CPU's previous reconfiguration, if later) to
//!   the `ReconfigDone` that answers it, or to the end of the run; the CPUs
//!   charged are the object's (representative and borrowed) when a
//!   `Fuse`/`Split` came just before, else the action's own;
//! * a program starts at its first thread's `Spawn` and finishes at its
//!   last thread's `Exit`; its **fused** time is the time its threads ran
//!   on objects of more than one CPU;
//! * the **allocation timeline** samples, at every change, the size of
//!   each running tracked program's object (the last `Object` action of
//!   its thread);
//! * a CPU is **parked** from a standalone `Offline` (one that follows no
//!   `Fuse`) to the standalone `Online` that brings it back; a **wake-up**
//!   is such an `Online`, and its latency runs from its request to its
//!   `ReconfigDone`;
//! * the **energy** (`record::energy`) prices each CPU's state over time —
//!   reconfiguring, offline, running at its duty, borrowed, idle — with
//!   the power model: modelled, and labelled so.
//!
//! Invariants (asserted): time never goes backwards; a CPU's busy plus
//! borrowed time never exceeds the run's length.

mod energy;

use std::collections::BTreeMap;
use std::sync::Arc;

use dyncore_core::exec::ExecObject;
use dyncore_core::policy::{Action, CpuState, Event, Policy, ReconfigId, ThreadId};
use dyncore_core::{CpuId, CpuSet, Nanos};

use crate::programs::ProgramPlan;
use crate::result::{AllocSample, CpuStats, EnergyStats, ProgramResult, ReconfigStats, TraceEvent};
use energy::{Activity, PowerLedger};

/// Trace events kept per run; beyond this the trace is truncated (the
/// results are not affected).
pub const TRACE_CAP: usize = 400_000;

#[derive(Debug, Clone)]
struct CpuRec {
    state: CpuState,
    since: Nanos,
    busy_ns: Nanos,
    borrowed_ns: Nanos,
    reconfig_ns: Nanos,
    /// When its last reconfiguration ended.
    reconfigured_until: Nanos,
}

#[derive(Debug, Clone, Default)]
struct ThreadRec {
    spawned_ns: Option<Nanos>,
    exited_ns: Option<Nanos>,
    fused_ns: Nanos,
}

/// An `Offline`/`Online` not yet answered.
#[derive(Debug, Clone)]
struct Pending {
    asked_ns: Nanos,
    charged: CpuSet,
    representative: CpuId,
    name: &'static str,
}

/// What parking CPUs cost, counted as the traffic goes.
#[derive(Debug, Clone, Default)]
struct Parking {
    parks: u64,
    parked_cpus: u64,
    wakeups: u64,
    wakeup_ns: Nanos,
    wakeup_max_ns: Nanos,
}

/// A trace event whose program name is filled in at the end.
#[derive(Debug, Clone)]
enum Raw {
    Slice { cpu: CpuId, thread: ThreadId, start_ns: Nanos, end_ns: Nanos, fused: bool },
    ObjectSpan { thread: ThreadId, cpus: CpuSet, start_ns: Nanos, end_ns: Nanos },
    Reconfig { cpu: CpuId, name: &'static str, start_ns: Nanos, end_ns: Nanos },
}

/// Turns a run's policy traffic into its results; see the module doc.
#[derive(Debug, Clone)]
pub struct RunRecorder {
    now: Nanos,
    cpus: Vec<CpuRec>,
    threads: Vec<ThreadRec>,
    pending: BTreeMap<ReconfigId, Pending>,
    /// The `Fuse` or `Split` an `Offline` or `Online` that follows belongs to.
    last_object: Option<(ExecObject, bool)>,
    /// Fused objects open now: thread → (since, CPUs).
    open: BTreeMap<ThreadId, (Nanos, CpuSet)>,
    /// (time, thread, CPUs of its new object; 0: none).
    objects: Vec<(Nanos, ThreadId, u32)>,
    raw: Vec<Raw>,
    reconfig: ReconfigStats,
    migrations: u64,
    defrag_migrations: u64,
    actions: u64,
    power: PowerLedger,
    parking: Parking,
}

/// A policy whose traffic a [`RunRecorder`] records as it goes: what a
/// backend holds instead of the bare policy.
pub struct Recorded<P> {
    pub policy: P,
    pub record: RunRecorder,
}

impl<P: Policy> Policy for Recorded<P> {
    fn handle(&mut self, now: Nanos, event: &Event, out: &mut Vec<Action>) {
        let first = out.len();
        self.policy.handle(now, event, out);
        self.record.observe(now, event, &out[first..]);
    }

    fn check(&self) -> Result<(), String> {
        self.policy.check()
    }
}

/// One program, as the backend ran it: its plan, its threads (in spawn
/// order; none if it never started), and the work it did in nanoseconds of
/// one baseline CPU (the simulator: its planned work; live: its measured
/// units over its kernel's rate alone at the baseline duty).
#[derive(Debug, Clone, Copy)]
pub struct ProgramRun<'a> {
    pub plan: &'a ProgramPlan,
    pub threads: &'a [ThreadId],
    pub work_done_ns: f64,
}

/// What the record gives a backend's result.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub programs: Vec<ProgramResult>,
    pub per_cpu: Vec<CpuStats>,
    pub reconfig: ReconfigStats,
    pub migrations: u64,
    pub defrag_migrations: u64,
    /// Actions the policy emitted.
    pub decisions: u64,
    pub allocation: Vec<AllocSample>,
    pub trace: Vec<TraceEvent>,
    pub energy: EnergyStats,
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

impl RunRecorder {
    pub fn new(ncpus: usize) -> RunRecorder {
        RunRecorder {
            now: 0,
            cpus: (0..ncpus)
                .map(|_| CpuRec {
                    state: CpuState::Idle,
                    since: 0,
                    busy_ns: 0,
                    borrowed_ns: 0,
                    reconfig_ns: 0,
                    reconfigured_until: 0,
                })
                .collect(),
            threads: Vec::new(),
            pending: BTreeMap::new(),
            last_object: None,
            open: BTreeMap::new(),
            objects: Vec::new(),
            raw: Vec::new(),
            reconfig: ReconfigStats::default(),
            migrations: 0,
            defrag_migrations: 0,
            actions: 0,
            power: PowerLedger::new(ncpus),
            parking: Parking::default(),
        }
    }

    /// Keeps `r` for the trace, which shows no more than [`TRACE_CAP`]
    /// events (the first ones: later ones would never be shown).
    fn keep(&mut self, r: Raw) {
        if self.raw.len() < TRACE_CAP {
            self.raw.push(r);
        }
    }

    /// `cpu`'s busy time up to `now` (a backend's load samples read it).
    pub fn busy_ns(&self, cpu: CpuId, now: Nanos) -> Nanos {
        let c = &self.cpus[cpu];
        let running = matches!(c.state, CpuState::Running { .. });
        c.busy_ns + if running { now.saturating_sub(c.since) } else { 0 }
    }

    /// The state `cpu` runs in, as the last `Dispatch` for it says.
    pub fn cpu_state(&self, cpu: CpuId) -> CpuState {
        self.cpus[cpu].state
    }

    fn thread(&mut self, t: ThreadId) -> &mut ThreadRec {
        if self.threads.len() <= t {
            self.threads.resize(t + 1, ThreadRec::default());
        }
        &mut self.threads[t]
    }

    /// One event at `now` and the actions the policy answered it with.
    pub fn observe(&mut self, now: Nanos, event: &Event, actions: &[Action]) {
        assert!(now >= self.now, "time went backwards: {now} after {}", self.now);
        self.now = now;
        match event {
            Event::Spawn { thread, .. } => self.thread(*thread).spawned_ns = Some(now),
            Event::Exit { thread } => self.thread(*thread).exited_ns = Some(now),
            Event::ReconfigDone { id, took_ns } => self.reconfig_done(now, *id, *took_ns),
            _ => {}
        }
        for a in actions {
            self.action(now, a);
        }
    }

    fn action(&mut self, now: Nanos, a: &Action) {
        self.actions += 1;
        match a {
            Action::Dispatch { cpu, state } => self.set_state(now, *cpu, *state),
            Action::SetSpeed { cpu, duty } => self.power.duty(*cpu, now, *duty),
            Action::Place { .. } => {}
            Action::Fuse { thread, object } => {
                self.reconfig.fuses += 1;
                self.open.insert(*thread, (now, object.cpus()));
                self.last_object = Some((object.clone(), true));
            }
            Action::Split { thread, object } => {
                self.reconfig.splits += 1;
                if let Some((start, cpus)) = self.open.remove(thread) {
                    self.keep(Raw::ObjectSpan { thread: *thread, cpus, start_ns: start, end_ns: now });
                }
                self.last_object = Some((object.clone(), false));
            }
            Action::Offline { id, cpus, .. } | Action::Online { id, cpus, .. } => {
                let offline = matches!(a, Action::Offline { .. });
                let (charged, representative, name) = match self.last_object.take() {
                    Some((o, fuse)) if fuse == offline => {
                        (o.cpus(), o.representative, if fuse { "fuse" } else { "split" })
                    }
                    _ => {
                        for c in cpus.iter() {
                            self.power.park(c, now, offline);
                        }
                        if offline {
                            self.parking.parks += 1;
                            self.parking.parked_cpus += cpus.len() as u64;
                        }
                        (cpus.clone(), cpus.first().unwrap_or(0), if offline { "offline" } else { "online" })
                    }
                };
                for c in charged.iter() {
                    self.power.reconfig_begin(c, now);
                }
                self.pending.insert(*id, Pending { asked_ns: now, charged, representative, name });
            }
            Action::Migrate { defrag, .. } => {
                self.migrations += 1;
                self.defrag_migrations += u64::from(*defrag);
            }
            Action::Object { thread, object } => {
                self.objects.push((now, *thread, object.as_ref().map_or(0, |o| o.len() as u32)));
            }
        }
    }

    fn reconfig_done(&mut self, now: Nanos, id: ReconfigId, took_ns: Nanos) {
        let Some(p) = self.pending.remove(&id) else { return };
        self.reconfig.time_ns += took_ns;
        for c in p.charged.iter() {
            self.power.reconfig_end(c, now);
        }
        if p.name == "online" {
            let waited = now - p.asked_ns;
            self.parking.wakeups += 1;
            self.parking.wakeup_ns += waited;
            self.parking.wakeup_max_ns = self.parking.wakeup_max_ns.max(waited);
        }
        // The span the trace shows: what it took, ending now; after the
        // request, and after the representative's previous one (a CPU's
        // reconfigurations are serialised).
        let rep = &self.cpus[p.representative];
        let start = now.saturating_sub(took_ns).max(p.asked_ns).max(rep.reconfigured_until).min(now);
        self.charge(&p, now);
        if took_ns > 0 && start < now {
            self.keep(Raw::Reconfig { cpu: p.representative, name: p.name, start_ns: start, end_ns: now });
        }
    }

    /// Charges `p`'s CPUs with reconfiguring from its request (or the end of
    /// each one's previous reconfiguration) to `until`.
    fn charge(&mut self, p: &Pending, until: Nanos) {
        for c in p.charged.iter() {
            let cpu = &mut self.cpus[c];
            let from = cpu.reconfigured_until.max(p.asked_ns);
            cpu.reconfig_ns += until.saturating_sub(from);
            cpu.reconfigured_until = cpu.reconfigured_until.max(until);
        }
    }

    /// Accounts the time `cpu` spent in its previous state.
    fn set_state(&mut self, now: Nanos, cpu: CpuId, state: CpuState) {
        let c = &mut self.cpus[cpu];
        let old = c.state;
        if old == state {
            return;
        }
        let activity = match state {
            CpuState::Idle => Activity::Idle,
            CpuState::Running { .. } => Activity::Running,
            CpuState::Borrowed { .. } => Activity::Borrowed,
        };
        self.power.activity(cpu, now, activity);
        let c = &mut self.cpus[cpu];
        let (since, dt) = (c.since, now - c.since);
        match old {
            CpuState::Running { thread, object_cpus } => {
                c.busy_ns += dt;
                if object_cpus > 1 {
                    self.reconfig.fused_ns += dt;
                    self.thread(thread).fused_ns += dt;
                }
                if dt > 0 {
                    self.keep(Raw::Slice {
                        cpu,
                        thread,
                        start_ns: since,
                        end_ns: now,
                        fused: object_cpus > 1,
                    });
                }
            }
            CpuState::Borrowed { .. } => c.borrowed_ns += dt,
            CpuState::Idle => {}
        }
        let c = &mut self.cpus[cpu];
        c.state = state;
        c.since = now;
    }

    /// The results at `end_ns`, for `programs` (in plan order); `tracked`
    /// says which programs the allocation timeline follows.
    pub fn finish(
        mut self,
        end_ns: Nanos,
        programs: &[ProgramRun<'_>],
        tracked: impl Fn(&ProgramPlan) -> bool,
    ) -> RunRecord {
        let end_ns = end_ns.max(self.now);
        for cpu in 0..self.cpus.len() {
            self.set_state(end_ns, cpu, CpuState::Idle);
        }
        // Reconfigurations still in progress count up to the end.
        for p in std::mem::take(&mut self.pending).into_values() {
            for c in p.charged.iter() {
                self.power.reconfig_end(c, end_ns);
            }
            let from = self.cpus[p.representative].reconfigured_until.max(p.asked_ns);
            self.reconfig.time_ns += end_ns.saturating_sub(from);
            self.charge(&p, end_ns);
            if from < end_ns {
                self.keep(Raw::Reconfig { cpu: p.representative, name: p.name, start_ns: from, end_ns });
            }
        }
        let power = std::mem::replace(&mut self.power, PowerLedger::new(0)).finish(end_ns);
        let per_cpu: Vec<CpuStats> = self
            .cpus
            .iter()
            .zip(&power)
            .enumerate()
            .map(|(cpu, (c, e))| {
                let used = c.busy_ns + c.borrowed_ns;
                assert!(used <= end_ns.max(1), "CPU {cpu} used {used} ns of {end_ns}");
                CpuStats {
                    cpu,
                    busy_ns: c.busy_ns,
                    borrowed_ns: c.borrowed_ns,
                    reconfig_ns: c.reconfig_ns,
                    utilisation: if end_ns > 0 { round4(used as f64 / end_ns as f64) } else { 0.0 },
                    offline_ns: e.offline_ns,
                    energy_j: round6(e.joules),
                }
            })
            .collect();
        let energy = self.energy(end_ns, &power);
        let lives: Vec<(Nanos, Option<Nanos>)> = programs.iter().map(|p| self.life(p)).collect();
        let results = programs
            .iter()
            .zip(&lives)
            .map(|(p, &(start, finish))| {
                let completion = finish.map(|f| f - start);
                let speedup = completion.map(|c| round4(p.work_done_ns / c.max(1) as f64));
                let relative_time = completion.map(|c| round4(c as f64 / p.work_done_ns.max(1.0)));
                ProgramResult {
                    label: p.plan.label.clone(),
                    program: p.plan.program.name.to_string(),
                    instance: p.plan.instance,
                    threads: p.threads.len() as u32,
                    start_ns: start,
                    finish_ns: finish,
                    completion_ns: completion,
                    work_ns: p.plan.work_ns,
                    speedup,
                    relative_time,
                    fused_ns: p.threads.iter().map(|&t| self.threads.get(t).map_or(0, |r| r.fused_ns)).sum(),
                }
            })
            .collect();
        let allocation = self.allocation(programs, &lives, &tracked);
        let trace = self.trace(programs, &lives);
        RunRecord {
            programs: results,
            per_cpu,
            reconfig: self.reconfig,
            migrations: self.migrations,
            defrag_migrations: self.defrag_migrations,
            decisions: self.actions,
            allocation,
            trace,
            energy,
        }
    }

    /// The run's energy and parking figures from every CPU's.
    fn energy(&self, end_ns: Nanos, cpus: &[energy::CpuEnergy]) -> EnergyStats {
        let joules: f64 = cpus.iter().map(|e| e.joules).sum();
        let p = &self.parking;
        EnergyStats {
            model: energy::model_label(),
            joules: round6(joules),
            mean_w: if end_ns > 0 { round6(joules / (end_ns as f64 / 1e9)) } else { 0.0 },
            idle_ns: cpus.iter().map(|e| e.idle_ns).sum(),
            offline_ns: cpus.iter().map(|e| e.offline_ns).sum(),
            parks: p.parks,
            parked_cpus: p.parked_cpus,
            wakeups: p.wakeups,
            wakeup_ns: p.wakeup_ns,
            wakeup_max_ns: p.wakeup_max_ns,
            stalled_ns: cpus.iter().map(|e| e.stalled_ns).sum(),
        }
    }

    /// When program `p` started (its first spawn, else its plan's start) and,
    /// if every one of its threads exited, when the last did.
    fn life(&self, p: &ProgramRun<'_>) -> (Nanos, Option<Nanos>) {
        let rec = |t: ThreadId| self.threads.get(t);
        let start = p.threads.iter().filter_map(|&t| rec(t)?.spawned_ns).min().unwrap_or(p.plan.start_ns);
        let exits: Option<Vec<Nanos>> = p.threads.iter().map(|&t| rec(t)?.exited_ns).collect();
        let finish = exits.filter(|e| !e.is_empty()).map(|e| e.into_iter().max().unwrap_or(start));
        (start, finish)
    }

    /// CPUs each running tracked program's object holds, at every change.
    fn allocation(
        &self,
        programs: &[ProgramRun<'_>],
        lives: &[(Nanos, Option<Nanos>)],
        tracked: &impl Fn(&ProgramPlan) -> bool,
    ) -> Vec<AllocSample> {
        let followed = |p: usize| tracked(programs[p].plan) && !programs[p].threads.is_empty();
        let program_of: BTreeMap<ThreadId, usize> = programs
            .iter()
            .enumerate()
            .filter(|&(p, _)| followed(p))
            .flat_map(|(p, r)| r.threads.iter().map(move |&t| (t, p)))
            .collect();
        // (time, program, new size; None = gone), starts and ends first at
        // equal times (the sort is stable).
        let mut changes: Vec<(Nanos, usize, Option<u32>)> = Vec::new();
        for (p, &(start, finish)) in lives.iter().enumerate().filter(|&(p, _)| followed(p)) {
            changes.push((start, p, Some(0)));
            if let Some(f) = finish {
                changes.push((f, p, None));
            }
        }
        for &(t, thread, size) in &self.objects {
            if let Some(&p) = program_of.get(&thread) {
                changes.push((t, p, Some(size)));
            }
        }
        changes.sort_by_key(|c| c.0);
        let names: Vec<Arc<str>> = programs.iter().map(|p| Arc::from(p.plan.name.as_str())).collect();
        let mut now: BTreeMap<usize, u32> = BTreeMap::new();
        let mut gone = vec![false; programs.len()];
        let mut samples: Vec<AllocSample> = Vec::new();
        // `now` changed since the last sample was considered (when it has
        // not, the sample would equal the last one, which is skipped).
        let mut changed = true;
        for (i, &(t, p, size)) in changes.iter().enumerate() {
            match size {
                _ if gone[p] => {}
                Some(s) => changed |= now.insert(p, s) != Some(s),
                None => {
                    gone[p] = true;
                    changed |= now.remove(&p).is_some();
                }
            }
            if changes.get(i + 1).is_some_and(|n| n.0 == t) || !changed {
                continue;
            }
            changed = false;
            let cpus_by_program: Vec<(Arc<str>, u32)> =
                now.iter().map(|(&p, &s)| (names[p].clone(), s)).collect();
            if samples.last().is_some_and(|l| l.cpus_by_program == cpus_by_program) {
                continue;
            }
            samples.push(AllocSample { t_ns: t, cpus_by_program });
        }
        samples
    }

    /// The Perfetto trace: program starts and exits, then CPUs' slices,
    /// fused objects and reconfigurations in the order they ended.
    fn trace(&self, programs: &[ProgramRun<'_>], lives: &[(Nanos, Option<Nanos>)]) -> Vec<TraceEvent> {
        // Each thread's program name, by thread (the last program to name it).
        let threads = programs.iter().flat_map(|r| r.threads.iter().map(|&t| t + 1)).max().unwrap_or(0);
        let mut name_of: Vec<Option<Arc<str>>> = vec![None; threads];
        for r in programs {
            let name: Arc<str> = Arc::from(r.plan.name.as_str());
            for &t in r.threads {
                name_of[t] = Some(name.clone());
            }
        }
        let name = |t: ThreadId| {
            name_of.get(t).cloned().flatten().unwrap_or_else(|| Arc::from(format!("thread {t}")))
        };
        let mut ev = Vec::with_capacity(TRACE_CAP.min(2 * lives.len() + self.raw.len()));
        let mut instants: Vec<(Nanos, String)> = Vec::new();
        for (p, &(start, finish)) in lives.iter().enumerate() {
            if !programs[p].threads.is_empty() {
                instants.push((start, format!("start {}", programs[p].plan.name)));
            }
            if let Some(f) = finish {
                instants.push((f, format!("exit {}", programs[p].plan.name)));
            }
        }
        instants.sort_by_key(|i| i.0);
        ev.extend(instants.into_iter().map(|(t_ns, name)| TraceEvent::Instant { name, t_ns }));
        for r in self.raw.iter().take(TRACE_CAP.saturating_sub(ev.len())) {
            ev.push(match r {
                Raw::Slice { cpu, thread, start_ns, end_ns, fused } => TraceEvent::Slice {
                    cpu: *cpu,
                    thread: *thread,
                    name: name(*thread),
                    start_ns: *start_ns,
                    end_ns: *end_ns,
                    fused: *fused,
                },
                Raw::ObjectSpan { thread, cpus, start_ns, end_ns } => TraceEvent::ObjectSpan {
                    object: *thread,
                    cpus: cpus.to_string(),
                    name: format!("{} on {} CPUs", name(*thread), cpus.len()),
                    start_ns: *start_ns,
                    end_ns: *end_ns,
                },
                Raw::Reconfig { cpu, name, start_ns, end_ns } => TraceEvent::Reconfig {
                    cpu: *cpu,
                    name: (*name).to_string(),
                    start_ns: *start_ns,
                    end_ns: *end_ns,
                },
            });
        }
        ev
    }
}

#[cfg(test)]
mod tests;
