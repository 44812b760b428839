//! Feeding the policy and carrying out its actions on real threads (the
//! steps of one call in the module doc).

use std::collections::HashMap;
use std::io;
use std::time::Instant;

use dyncore_core::policy::{Action, CpuState, Event, Policy, ReconfigId, ThreadId};
use dyncore_core::reconfig::Mode;
use dyncore_core::speed::Duty;
use dyncore_core::{CpuId, CpuSet, Nanos};

use super::discover::cpu_time_ns;
use super::driver::{Arbiter, CpuMirror, Mech};
use super::record::FuseRecord;
use super::{ArbiterError, Loc};
use crate::backend::{ReconfigRecord, Slice};

/// Between two looks at a freezer: a sleep, not a spin, because the thread
/// being frozen may share this CPU and must run to reach the freezer; 10
/// µs, doubling at each look (`looks` so far), up to 160 µs.
fn pause(looks: &mut u32) {
    std::thread::sleep(std::time::Duration::from_micros(10 << (*looks).min(4)));
    *looks += 1;
}

/// Whether an error moving a thread means only that it has exited (the
/// next discovery pass feeds its `Exit`).
fn gone(e: &io::Error) -> bool {
    super::cgfs::errno_of(e) == Some(libc::ESRCH)
}

/// A move's error, with the likely reason where the kernel's is terse: a
/// v1 `cpu` group refuses (`EINVAL`) a real-time thread, having no
/// `rt_runtime` budget.
fn move_error(e: io::Error, tid: super::Tid) -> ArbiterError {
    if super::cgfs::errno_of(&e) == Some(libc::EINVAL) && e.to_string().contains("/tasks") {
        return ArbiterError::Io(io::Error::new(
            e.kind(),
            format!(
                "{e} (thread {tid} may be real-time: a cgroup v1 cpu group takes no SCHED_FIFO/SCHED_RR thread \
                 without an rt_runtime budget; run the command without real-time priority)"
            ),
        ));
    }
    ArbiterError::Io(e)
}

impl<P: Policy + ?Sized> Arbiter<P> {
    /// Hands one event to the policy, records the traffic, executes the
    /// actions and makes the threads match.
    pub(super) fn feed(&mut self, event: Event) -> Result<(), ArbiterError> {
        let now = self.now_ns();
        self.now = now;
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        self.policy.handle(now, &event, &mut out);
        self.record.record(now, &event, &out);
        #[cfg(debug_assertions)]
        if let Err(e) = self.contract.step(now, &event, &out) {
            panic!("the arbiter's traffic breaks the policy boundary's contract: {e}");
        }
        let seen = self.observer.is_some().then(|| out.clone());
        let r = out.drain(..).try_for_each(|a| self.execute(now, a));
        self.out = out;
        r?;
        self.reconcile()?;
        let applied = self.now_ns();
        if let (Some(o), Some(actions)) = (&mut self.observer, seen) {
            o.actions(now, applied, &actions);
        }
        Ok(())
    }

    /// Records that CPU `cpu` went online (offline) for the execution
    /// check, at the time the kernel reports its group thawed (frozen):
    /// now if it does, else at the tick round that first sees it
    /// ([`Arbiter::observe_cpus`]); never, if it never does (the checker's
    /// rule 4 then fails). With affinity only there is no group: the
    /// arbiter's own time (the threads were held or released).
    pub(super) fn record_change(&mut self, cpu: CpuId, online: bool) -> Result<(), ArbiterError> {
        let done = match &mut self.mech {
            Mech::Groups(cg) => cg.cpu_frozen(cpu)? != online,
            Mech::Affinity(_) => true,
        };
        self.pending_changes.retain(|&(c, _)| c != cpu);
        if done {
            let at = self.now_ns();
            if let Some(o) = &mut self.observer {
                o.change(cpu, at, online);
            }
        } else {
            self.pending_changes.push((cpu, online));
        }
        Ok(())
    }

    /// Every tick round: the changes the kernel had not reported yet, and
    /// a look at each offline CPU's group usage (which may not grow).
    pub(super) fn observe_cpus(&mut self) -> Result<(), ArbiterError> {
        if self.observer.is_none() {
            return Ok(());
        }
        for (cpu, online) in std::mem::take(&mut self.pending_changes) {
            self.record_change(cpu, online)?;
        }
        if let (Mech::Groups(cg), Some(o)) = (&mut self.mech, &mut self.observer) {
            for (cpu, &off) in self.offline.iter().enumerate() {
                if off && !self.pending_changes.iter().any(|&(c, _)| c == cpu) {
                    o.frozen_usage(cpu, cg.usage_ns(cpu));
                }
            }
        }
        Ok(())
    }

    /// Samples thread `t` for the execution check (module `observe`):
    /// only once the arbiter has placed it (before, it runs in its
    /// creator's group).
    pub(super) fn observe(&mut self, t: ThreadId) {
        let now = self.now_ns();
        let l = &self.threads[t];
        if !l.alive || l.actual.is_none() {
            return;
        }
        let held = l.actual == Some(Loc::Held);
        // Whether the kernel reports `held` wholly frozen now: a thread
        // that uses CPU time after that ran while frozen.
        let frozen = held
            && match &mut self.mech {
                Mech::Groups(cg) => cg.held_frozen().unwrap_or(false),
                Mech::Affinity(_) => false,
            };
        let l = &self.threads[t];
        if let Some(o) = &mut self.observer {
            o.sample(now, t, l.pid, l.tid, &self.cfg.cpus, l.asleep, held, frozen);
        }
    }

    fn execute(&mut self, now: Nanos, action: Action) -> Result<(), ArbiterError> {
        match action {
            Action::Dispatch { cpu, state } => {
                let old = std::mem::replace(&mut self.cpus[cpu], CpuMirror { state, since: now });
                self.close(cpu, old, now);
                self.dirty = true;
                Ok(())
            }
            Action::SetSpeed { cpu, duty } => {
                let real = self.cfg.duty_scale.apply(duty).map_err(|e| {
                    ArbiterError::Policy(format!(
                        "CPU {cpu}'s duty {duty} at a baseline of {}: {e}",
                        self.cfg.duty_scale.baseline
                    ))
                })?;
                self.set_duty(cpu, real)
            }
            Action::Fuse { thread, object } => {
                self.pending_rep = Some(object.representative);
                self.log.fuses.push(FuseRecord { thread, object, fused_ns: now, split_ns: None });
                Ok(())
            }
            Action::Split { thread, object } => {
                self.pending_rep = Some(object.representative);
                if let Some(f) = self
                    .log
                    .fuses
                    .iter_mut()
                    .rev()
                    .find(|f| f.thread == thread && f.object == object && f.split_ns.is_none())
                {
                    f.split_ns = Some(now);
                }
                Ok(())
            }
            Action::Offline { id, cpus, mode } => self.reconfigure(id, &cpus, mode, false),
            Action::Online { id, cpus, mode } => self.reconfigure(id, &cpus, mode, true),
            Action::Migrate { .. } | Action::Object { .. } => Ok(()),
            Action::Place { decision } => {
                Err(ArbiterError::Unsupported { action: format!("a placement ({})", decision.action) })
            }
        }
    }

    /// Accounts `cpu`'s time in state `m` up to `now`.
    pub(super) fn close(&mut self, cpu: CpuId, m: CpuMirror, now: Nanos) {
        match m.state {
            CpuState::Running { thread, object_cpus } if m.since < now => {
                self.log.slices.push(Slice { cpu, thread, start_ns: m.since, end_ns: now, object_cpus });
            }
            CpuState::Borrowed { .. } => self.log.borrowed_ns[cpu] += now - m.since,
            _ => {}
        }
    }

    /// Sets runtime CPU `cpu`'s quota to `duty` (a real duty, scaled
    /// already), measuring the write.
    pub(super) fn set_duty(&mut self, cpu: CpuId, duty: Duty) -> Result<(), ArbiterError> {
        match &mut self.mech {
            Mech::Groups(cg) => {
                let t = Instant::now();
                if cg.set_duty(cpu, duty)? > 0 {
                    self.log.actuation.quota_write_ns.push(t.elapsed().as_nanos() as u64);
                }
            }
            Mech::Affinity(_) => self.log.duties_not_enforced += 1,
        }
        Ok(())
    }

    /// Executes an `Offline` (or, with `online`, an `Online`) at once and
    /// queues its `ReconfigDone` with the critical path measured.
    fn reconfigure(
        &mut self,
        id: ReconfigId,
        cpus: &CpuSet,
        mode: Mode,
        online: bool,
    ) -> Result<(), ArbiterError> {
        // Both modes are carried out alike (module doc); the record keeps
        // the one asked for.
        // The object's representative when a Fuse/Split came just before;
        // a policy may also take CPUs offline with no object (park-idle
        // parks idle CPUs to save power), recorded under its first CPU, as
        // the live runtime records it.
        let representative = self.pending_rep.take().unwrap_or_else(|| cpus.first().unwrap_or(0));
        let started_ns = self.now_ns();
        let start = Instant::now();
        let mut steps_ns = Vec::new();
        if online {
            if let Mech::Groups(cg) = &self.mech {
                for c in cpus.iter() {
                    cg.set_frozen(c, false)?;
                }
            }
            steps_ns.push(("thaw-group", start.elapsed().as_nanos() as Nanos));
            for c in cpus.iter() {
                self.record_change(c, true)?;
            }
            for c in cpus.iter() {
                self.offline[c] = false;
            }
        } else {
            let on: Vec<ThreadId> = (0..self.threads.len())
                .filter(|&t| {
                    let l = &self.threads[t];
                    l.alive && matches!(l.actual, Some(Loc::Cpu(c)) if cpus.contains(c))
                })
                .collect();
            self.hold_all(&on)?;
            // An asleep thread held here goes to an online CPU's group.
            self.dirty = true;
            let held_ns = start.elapsed().as_nanos() as Nanos;
            steps_ns.push(("hold-threads", held_ns));
            for c in cpus.iter() {
                self.offline[c] = true;
            }
            if let Mech::Groups(cg) = &mut self.mech {
                for c in cpus.iter() {
                    cg.set_frozen(c, true)?;
                }
                let deadline = start + self.cfg.freeze_deadline;
                let mut looks = 0;
                for c in cpus.iter() {
                    while !cg.cpu_frozen(c)? && Instant::now() < deadline {
                        pause(&mut looks);
                    }
                }
            }
            steps_ns.push(("freeze-group", start.elapsed().as_nanos() as Nanos - held_ns));
            for c in cpus.iter() {
                self.record_change(c, false)?;
            }
        }
        let critical_ns = start.elapsed().as_nanos() as Nanos;
        self.log.reconfigs.push(ReconfigRecord {
            id,
            online,
            cpus: cpus.clone(),
            mode,
            representative,
            started_ns,
            finished_ns: started_ns + critical_ns,
            critical_ns,
            steps_ns,
        });
        self.queued.push_back(Event::ReconfigDone { id, took_ns: critical_ns });
        Ok(())
    }

    /// Makes the real threads match the policy's CPUs (step 3 of the
    /// module doc): holds every thread whose place changes and waits until
    /// they are frozen, then places every thread the policy runs.
    pub(super) fn reconcile(&mut self) -> Result<(), ArbiterError> {
        if !std::mem::replace(&mut self.dirty, false) {
            return Ok(());
        }
        for (cpu, m) in self.cpus.iter().enumerate() {
            if let CpuState::Running { thread, .. } = m.state
                && self.offline[cpu]
            {
                return Err(ArbiterError::Policy(format!("thread {thread} dispatched on offline CPU {cpu}")));
            }
        }
        let wanted: Vec<Loc> = (0..self.threads.len()).map(|t| self.wanted(t)).collect();
        let moving: Vec<ThreadId> = (0..self.threads.len())
            .filter(|&t| {
                let l = &self.threads[t];
                let want = wanted[t];
                // An asleep thread moves between CPUs' groups directly: it
                // runs no code on its way.
                let direct = l.asleep && matches!((l.actual, want), (Some(Loc::Cpu(_)), Loc::Cpu(_)));
                l.alive && l.actual != Some(want) && l.actual != Some(Loc::Held) && !direct
            })
            .collect();
        self.hold_all(&moving)?;
        let placing: Vec<(ThreadId, CpuId)> = wanted
            .iter()
            .enumerate()
            .filter_map(|(t, w)| match w {
                Loc::Cpu(c) => Some((t, *c)),
                Loc::Held => None,
            })
            .collect();
        for (t, cpu) in placing {
            let l = &self.threads[t];
            if !l.alive || l.actual == Some(Loc::Cpu(cpu)) {
                continue;
            }
            let tid = l.tid;
            self.observe(t);
            let start = Instant::now();
            let r = match &mut self.mech {
                Mech::Groups(cg) => cg.place(tid, cpu),
                Mech::Affinity(a) => a.place(tid, cpu),
            };
            match r {
                Ok(()) => {
                    self.log.actuation.move_ns.push(start.elapsed().as_nanos() as u64);
                    self.threads[t].actual = Some(Loc::Cpu(cpu));
                }
                Err(e) if gone(&e) => {}
                Err(e) => return Err(move_error(e, tid)),
            }
        }
        Ok(())
    }

    /// Moves `threads` into `held` and waits (up to the freeze deadline)
    /// until the freezer says they are stopped; samples their CPU time
    /// first. One freeze delay is recorded for the batch.
    fn hold_all(&mut self, threads: &[ThreadId]) -> Result<(), ArbiterError> {
        if threads.is_empty() {
            return Ok(());
        }
        for &t in threads {
            self.observe(t);
        }
        let start = Instant::now();
        for &t in threads {
            let tid = self.threads[t].tid;
            let r = match &mut self.mech {
                Mech::Groups(cg) => cg.hold(tid),
                Mech::Affinity(a) => a.hold(tid),
            };
            match r {
                Ok(()) => self.threads[t].actual = Some(Loc::Held),
                Err(e) if gone(&e) => {}
                Err(e) => return Err(move_error(e, tid)),
            }
        }
        let deadline = start + self.cfg.freeze_deadline;
        let mut looks = 0;
        let frozen = match &mut self.mech {
            Mech::Groups(cg) => loop {
                if cg.held_frozen()? {
                    break true;
                }
                if Instant::now() >= deadline {
                    break false;
                }
                pause(&mut looks);
            },
            Mech::Affinity(_) => true,
        };
        if frozen {
            self.log.actuation.freeze_ns.push(start.elapsed().as_nanos() as u64);
        } else {
            self.log.actuation.freeze_late += 1;
        }
        for &t in threads {
            self.sample(t);
        }
        Ok(())
    }

    /// Reads thread `t`'s CPU time and records it.
    pub(super) fn sample(&mut self, t: ThreadId) -> u64 {
        let l = &mut self.threads[t];
        let Some(ns) = cpu_time_ns(l.tid) else { return 0 };
        let delta = ns.saturating_sub(l.cpu_sampled_ns);
        l.cpu_sampled_ns = ns;
        self.log.threads[t].cpu_ns = ns;
        delta
    }

    /// Samples every live thread's CPU time.
    pub(super) fn sample_all(&mut self) {
        for t in 0..self.threads.len() {
            if self.threads[t].alive {
                self.sample(t);
            }
        }
    }

    /// Checks invariants 1 and 2 of the module doc against the kernel's
    /// own records: the run's groups (and that offline CPUs' groups are
    /// frozen) with cgroups; each thread's affinity and scheduling policy
    /// with affinity only. An error names the thread or CPU.
    pub fn check(&mut self) -> Result<(), String> {
        if let Mech::Affinity(a) = &self.mech {
            let live: Vec<(ThreadId, super::Tid)> = self.by_tid.iter().map(|(&tid, &t)| (t, tid)).collect();
            for (t, tid) in live {
                let want = self.wanted(t);
                let real = match want {
                    Loc::Cpu(c) => Some(self.cfg.cpus[c]),
                    Loc::Held => None,
                };
                a.check(tid, real)?;
            }
            return Ok(());
        }
        let wanted: HashMap<super::Tid, Loc> =
            self.by_tid.iter().map(|(&tid, &t)| (tid, self.wanted(t))).collect();
        let Mech::Groups(cg) = &mut self.mech else { unreachable!("checked above") };
        cg.check_consistent()?;
        let mut found = Vec::new();
        cg.scan(&mut found).map_err(|e| e.to_string())?;
        for (tid, loc) in found {
            let Some(&want) = wanted.get(&tid) else { continue }; // not discovered yet
            if loc != Some(want) {
                return Err(format!("thread {tid} is in {loc:?}, the policy has it at {want:?}"));
            }
            if let Some(Loc::Cpu(c)) = loc
                && self.offline[c]
            {
                return Err(format!("thread {tid} is in the group of offline CPU {c}"));
            }
        }
        for c in 0..self.cpus.len() {
            if self.offline[c] && !cg.cpu_frozen(c).map_err(|e| e.to_string())? {
                return Err(format!("offline CPU {c}'s group is not frozen"));
            }
        }
        Ok(())
    }
}
