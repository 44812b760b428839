//! The executor of reconfiguration plans: turns each [`Step`] of a
//! `dyncore_core::reconfig` plan into actions on the runtime's threads,
//! queues and mailboxes.
//!
//! One reconfiguration at a time: [`Shared::reconfigure`] holds the control
//! lock (the hotplug lock) from planning to the last critical step, so the
//! planner's view (who is online, who holds a cache, a registry entry, a
//! running helper, who proxies for whom) stays true while the plan runs.
//!
//! Execution:
//!
//! 1. Plan from the control plane's view of the runtime, refreshed in place
//!    ([`Shared::refresh_view`]); a refusal (last online CPU, CPU not
//!    owned, empty set) returns before any step.
//! 2. Critical steps in plan order. Before each, the fault hook is asked;
//!    a step that fails (by the hook or by an error) stops the run, and the
//!    undo steps of [`Plan::rollback`] run newest first, so every CPU is
//!    back in its previous state (a rollback step that fails in turn is
//!    reported, and the remaining ones still run).
//! 3. Deferred steps are *handed over*, not run: `Lazily` ones become
//!    requests to the CPU's helper thread (fold statistics, park), which
//!    the call does not wait for; `UnderPressure` ones (free the kept cache)
//!    wait for [`super::Runtime::reclaim_memory`] or the helper's
//!    `cache_keep` timer.
//! 4. In debug builds the invariants of the module docs of `cpu` are
//!    asserted ([`Shared::check`]).
//!
//! Step semantics that matter for correctness:
//!
//! * `InstallProxy` first adds the CPU to the proxy's charges, then
//!   redirects the mailbox, then wakes the proxy if messages are pending: a post after the redirect
//!   wakes a proxy that already looks at this mailbox; a message posted
//!   before it is either drained by the CPU (still online: the proxy is
//!   installed before `StopDispatch`) or seen pending and handed to the
//!   proxy. `RemoveProxy` does the reverse order: redirect first, then drop
//!   the charge; what is pending stays queued for the returning CPU, which
//!   drains it in its first dispatch section, before its first task.
//! * `MigrateRunQueue` closes the queue and takes its tasks in one critical
//!   section, after `AwaitStopped`; so no task is left behind (a spawn that
//!   raced with `Deactivate` landed before the close and is migrated), and
//!   the worker never re-queues into a closed queue.
//! * `StartDispatch` reopens the queue, sets `flush_on_return` (apply the
//!   newest invalidation, which broadcasts skipped) and only then publishes
//!   the state `Online`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use dyncore_core::policy::execution::CpuChange;
use dyncore_core::reconfig::{self, CpuView, Deferral, Direction, HelperView, Kind, Step};
use dyncore_core::{CpuId, CpuSet};

use super::percpu::CpuLiveness;
use super::report::Unresponsive;
use super::sync::lock;
use super::{Control, ReconfigError, ReconfigReport, RegistryEntry, Shared, worker};

/// Why a step failed: a reason, and the CPU that did not answer if that was
/// it.
struct StepError {
    reason: String,
    unresponsive: Option<Box<Unresponsive>>,
}

impl From<String> for StepError {
    fn from(reason: String) -> Self {
        StepError { reason, unresponsive: None }
    }
}

impl From<&str> for StepError {
    fn from(reason: &str) -> Self {
        StepError { reason: reason.to_string(), unresponsive: None }
    }
}

impl From<Unresponsive> for StepError {
    fn from(u: Unresponsive) -> Self {
        StepError { reason: u.to_string(), unresponsive: Some(Box::new(u)) }
    }
}

impl Shared {
    /// Spawns CPU `cpu`'s helper thread (the watchdog).
    pub(crate) fn start_helper(self: &Arc<Self>, cpu: CpuId) -> std::io::Result<()> {
        let h = &self.cpus[cpu].helper;
        let mut handle = lock(&h.handle);
        if handle.is_some() {
            return Err(std::io::Error::other(format!("CPU {cpu} already has a helper thread")));
        }
        h.stop.store(false, Ordering::Release);
        h.park.store(false, Ordering::Release);
        h.parked.store(false, Ordering::Release);
        let sh = self.clone();
        let t = std::thread::Builder::new()
            .name(format!("dyncore-help{cpu}"))
            .spawn(move || worker::helper_main(sh, cpu))?;
        *handle = Some(t);
        Ok(())
    }

    /// Stops CPU `cpu`'s helper thread and joins it (or gives up at the
    /// deadline, leaving it running).
    fn stop_helper(&self, cpu: CpuId) -> Result<(), String> {
        let h = &self.cpus[cpu].helper;
        let mut handle = lock(&h.handle);
        let t = handle.take().ok_or_else(|| format!("CPU {cpu} has no helper thread"))?;
        h.stop.store(true, Ordering::Release);
        h.waiter.notify();
        let deadline = Instant::now() + self.cfg.wait_deadline;
        if crate::wait::spin_until(Some(deadline), || t.is_finished()).is_err() {
            h.stop.store(false, Ordering::Release);
            *handle = Some(t);
            return Err(format!(
                "the helper thread of CPU {cpu} did not stop within {:?}",
                self.cfg.wait_deadline
            ));
        }
        drop(handle);
        t.join().map_err(|_| format!("the helper thread of CPU {cpu} panicked"))?;
        h.stop.store(false, Ordering::Release);
        h.park.store(false, Ordering::Release);
        h.parked.store(false, Ordering::Release);
        Ok(())
    }

    /// Refreshes what the planner needs to know about each CPU, in place
    /// (no allocation). Everything it reads changes only under the control
    /// lock, which the caller holds.
    fn refresh_view(&self, ctl: &mut Control) {
        let reg = lock(&self.registry);
        for (v, c) in ctl.state.cpus.iter_mut().zip(&self.cpus) {
            let online = c.online();
            *v = CpuView {
                online,
                cache: c.has_cache.load(Ordering::Acquire),
                registry_entry: reg.contains_key(&c.id),
                helper: if lock(&c.helper.handle).is_none() {
                    HelperView::Stopped
                } else if c.helper.park.load(Ordering::Acquire) {
                    HelperView::Parked
                } else {
                    HelperView::Running
                },
            };
        }
    }

    /// Plans and executes one reconfiguration (see the module docs).
    pub(crate) fn reconfigure(
        self: &Arc<Self>,
        dir: Direction,
        mode: reconfig::Mode,
        cpus: &CpuSet,
    ) -> Result<ReconfigReport, ReconfigError> {
        let start = Instant::now();
        let started_at_ns = self.now_ns();
        let mut ctl = lock(&self.ctl);
        if dir == Direction::Offline
            && let Some(cpu) = cpus.iter().find(|&c| c < self.cpus.len() && self.stall(c).is_some())
        {
            // Its step would never end: fail now, not at the deadline.
            return Err(ReconfigError::Unresponsive(Box::new(self.unresponsive(
                cpu,
                "respond: its watchdog reports it stalled".into(),
                0,
            ))));
        }
        self.refresh_view(&mut ctl);
        let plan = match dir {
            Direction::Offline => reconfig::plan_offline(mode, cpus, &ctl.state),
            Direction::Online => reconfig::plan_online(mode, cpus, &ctl.state),
        }
        .map_err(ReconfigError::Refused)?;
        let mut step_ns = Vec::with_capacity(plan.critical_len());
        let mut entry_ns = None;
        let timing = ctl.step_timing;
        for (index, ps) in plan.steps.iter().enumerate().take_while(|(_, s)| s.kind == Kind::Critical) {
            let t0 = timing.then(Instant::now);
            let injected = ctl.fault.as_ref().is_some_and(|hook| hook(&ps.step));
            let res = if injected {
                Err(StepError::from("injected fault"))
            } else {
                self.run_step(&mut ctl, &ps.step)
            };
            if let Err(StepError { reason, unresponsive }) = res {
                let rollback = plan.rollback(index);
                let rollback_errors = rollback
                    .iter()
                    .filter_map(|s| self.run_step(&mut ctl, s).err().map(|e| format!("{s}: {}", e.reason)))
                    .collect();
                debug_assert_eq!(self.check(&ctl), Ok(()), "after rolling back {plan:?}");
                return Err(ReconfigError::StepFailed {
                    step: ps.step.clone(),
                    index,
                    reason,
                    unresponsive,
                    rollback,
                    rollback_errors,
                });
            }
            let awaited = matches!(ps.step, Step::AwaitStopped { .. });
            let now = (timing || awaited).then(Instant::now);
            step_ns.push((ps.step.clone(), t0.zip(now).map_or(0, |(t0, now)| ns(now - t0))));
            if awaited {
                entry_ns = now.map(|now| ns(now - start));
            }
        }
        for ps in &plan.steps[plan.critical_len()..] {
            self.hand_over(&ps.step, ps.kind);
        }
        let critical_ns = ns(start.elapsed());
        let finished_at_ns = self.now_ns();
        debug_assert_eq!(self.check(&ctl), Ok(()), "after {plan:?}");
        drop(ctl);
        Ok(ReconfigReport { plan, critical_ns, entry_ns, step_ns, started_at_ns, finished_at_ns })
    }

    /// Step 3 of the module docs: a deferred step becomes a request.
    fn hand_over(&self, step: &Step, kind: Kind) {
        let h = |cpu: CpuId| &self.cpus[cpu].helper;
        match (step, kind) {
            (&Step::FoldStats { cpu }, Kind::Deferred(Deferral::Lazily)) => {
                // No wake-up (it would cost a system call per CPU on the
                // caller's path): the helper sees the request at its next
                // watchdog tick, which is what `Lazily` means.
                if lock(&h(cpu).handle).is_some() {
                    h(cpu).fold.store(true, Ordering::Release);
                } else {
                    // No helper to ask: fold now rather than never.
                    self.fold_stats(cpu);
                }
            }
            (&Step::ParkHelper { cpu }, Kind::Deferred(Deferral::Lazily)) => {
                // Seen at the helper's next tick, as above.
                h(cpu).park.store(true, Ordering::Release);
            }
            // Kept for reuse: freed by `reclaim_memory` or the helper's timer.
            (Step::FreeCache { .. }, Kind::Deferred(Deferral::UnderPressure)) => {}
            (s, k) => unreachable!("the planner deferred {s} as {k:?}, which the runtime cannot defer"),
        }
    }

    /// Runs one step now (a critical step, or an undo step of a rollback).
    fn run_step(self: &Arc<Self>, ctl: &mut Control, step: &Step) -> Result<(), StepError> {
        match *step {
            Step::StopTheWorld => self.stop_the_world()?,
            Step::ResumeTheWorld => self.resume_the_world()?,
            Step::Deactivate(ref s) => {
                let mut a = lock(&self.active);
                *a = a.difference(s);
            }
            Step::Activate(ref s) => {
                let mut a = lock(&self.active);
                *a = a.union(s);
            }
            Step::InstallProxy { cpu, proxy } => self.install_proxy(ctl, cpu, proxy)?,
            Step::RemoveProxy { cpu, proxy } => self.remove_proxy(ctl, cpu, proxy)?,
            // No wake-up: a worker inside a dispatch section sees the state
            // when it re-checks; an idle one is already stopped and finds
            // out when it next wakes (`StartDispatch` wakes it).
            Step::StopDispatch { cpu } => self.cpus[cpu].gate.stop(),
            Step::AwaitStopped { cpu } => {
                let c = &self.cpus[cpu];
                if c.online() {
                    return Err(format!("CPU {cpu} was not told to stop").into());
                }
                // The handshake of `gate.rs`: once stopped, no step starts.
                self.await_cpu(cpu, || "finish its current step".into(), || c.gate.stopped())?;
                // Read after it was seen stopped: every step ended before.
                let at_ns = self.now_ns();
                lock(&self.changes).push(CpuChange { cpu, at_ns, online: false });
            }
            Step::MigrateRunQueue { cpu } => self.migrate_run_queue(cpu)?,
            Step::StartDispatch { cpu } => {
                let c = &self.cpus[cpu];
                if !c.has_cache.load(Ordering::Acquire) {
                    return Err(format!("CPU {cpu} has no memory cache").into());
                }
                lock(&c.runq).open = true;
                c.flush_on_return.store(true, Ordering::SeqCst);
                // Read before it may run: every step starts after.
                let at_ns = self.now_ns();
                lock(&self.changes).push(CpuChange { cpu, at_ns, online: true });
                c.gate.set_liveness(CpuLiveness::Online);
                c.waiter.notify();
            }
            Step::GracePeriod => {
                self.synchronize()?;
            }
            Step::FoldStats { cpu } => self.fold_stats(cpu),
            Step::FreeCache { cpu } => {
                if !self.free_cache(cpu) {
                    return Err(format!("CPU {cpu} has no cache to free").into());
                }
            }
            Step::CreateCache { cpu } => {
                let mut local = lock(&self.cpus[cpu].local);
                if local.cache.is_some() {
                    return Err(format!("CPU {cpu} already has a cache").into());
                }
                local.cache = Some(self.pool.new_cache());
                self.cpus[cpu].has_cache.store(true, Ordering::Release);
            }
            Step::RemoveRegistryEntry { cpu } => {
                if lock(&self.registry).remove(&cpu).is_none() {
                    return Err(format!("CPU {cpu} has no registry entry").into());
                }
            }
            Step::CreateRegistryEntry { cpu } => {
                let mut reg = lock(&self.registry);
                if reg.contains_key(&cpu) {
                    return Err(format!("CPU {cpu} already has a registry entry").into());
                }
                reg.insert(cpu, RegistryEntry::new(cpu, self.cpus[cpu].real));
            }
            Step::StopHelper { cpu } => self.stop_helper(cpu)?,
            Step::StartHelper { cpu } => self
                .start_helper(cpu)
                .map_err(|e| format!("cannot start the helper thread of CPU {cpu}: {e}"))?,
            Step::ParkHelper { cpu } => {
                let h = &self.cpus[cpu].helper;
                h.park.store(true, Ordering::Release);
                h.waiter.notify();
            }
            Step::UnparkHelper { cpu } => {
                let h = &self.cpus[cpu].helper;
                h.park.store(false, Ordering::Release);
                h.waiter.notify();
            }
        }
        Ok(())
    }

    fn resume_the_world(&self) -> Result<(), String> {
        let g = self.stw.generation.load(Ordering::SeqCst);
        if g.is_multiple_of(2) {
            return Err("the world is not stopped".into());
        }
        self.stw.generation.store(g + 1, Ordering::SeqCst);
        self.stw.waiter.notify();
        Ok(())
    }

    /// Naive mode's `stop_machine`: every online CPU stops between two
    /// steps and waits at the barrier until `ResumeTheWorld`. A CPU that
    /// does not arrive in time fails the step, and the world is resumed
    /// here (the failed step must leave no effect for the rollback).
    fn stop_the_world(&self) -> Result<(), StepError> {
        let g = self.stw.generation.load(Ordering::SeqCst);
        if g % 2 == 1 {
            return Err("the world is already stopped".into());
        }
        // Online CPUs cannot change while the control lock is held, so this
        // is exactly who will arrive.
        let online: Vec<CpuId> = self.cpus.iter().filter(|c| c.online()).map(|c| c.id).collect();
        self.stw.arrived.store(0, Ordering::SeqCst);
        self.stw.generation.store(g + 1, Ordering::SeqCst);
        for &cpu in &online {
            self.cpus[cpu].waiter.notify();
        }
        let arrived = self.await_all(
            &online,
            |_| format!("arrive at stop-the-world barrier {}", g + 1),
            |c| self.cpus[c].stw_arrived.load(Ordering::SeqCst) == g + 1,
        );
        if let Err(u) = arrived {
            self.resume_the_world()?;
            return Err(u.into());
        }
        debug_assert_eq!(self.stw.arrived.load(Ordering::SeqCst), online.len());
        Ok(())
    }

    /// Publishes the proxy table's charges of `cpu` to its worker (which
    /// cannot take the control lock): invariant 3 by construction.
    fn publish_charges(&self, ctl: &Control, cpu: CpuId) {
        let c = &self.cpus[cpu];
        let mut ch = lock(&c.charges);
        *ch = ctl.state.proxies.proxying_for(cpu);
        c.has_charges.store(!ch.is_empty(), Ordering::Release);
    }

    fn install_proxy(&self, ctl: &mut Control, cpu: CpuId, proxy: CpuId) -> Result<(), String> {
        // The CPUs `cpu` proxies for move to `proxy` with it (no chains).
        let moving = ctl.state.proxies.proxying_for(cpu);
        ctl.state.proxies.install(cpu, proxy).map_err(|e| e.to_string())?;
        // Charge first, then redirect, then wake (module docs).
        self.publish_charges(ctl, proxy);
        let mut pending = self.cpus[cpu].mailbox.redirect(proxy);
        for x in moving.iter() {
            pending |= self.cpus[x].mailbox.redirect(proxy);
        }
        self.publish_charges(ctl, cpu);
        if pending {
            self.cpus[proxy].waiter.notify();
        }
        Ok(())
    }

    fn remove_proxy(&self, ctl: &mut Control, cpu: CpuId, proxy: CpuId) -> Result<(), String> {
        match ctl.state.proxies.proxied_by(cpu) {
            Some(p) if p == proxy => {}
            other => return Err(format!("CPU {cpu} is proxied by {other:?}, not by CPU {proxy}")),
        }
        ctl.state.proxies.remove(cpu);
        // Redirect first, then drop the charge: pending messages stay queued
        // for `cpu` (replayed when it starts), and the proxy may still be
        // draining — handlers are idempotent.
        let pending = self.cpus[cpu].mailbox.redirect(cpu);
        self.publish_charges(ctl, proxy);
        if pending {
            self.cpus[cpu].waiter.notify();
        }
        Ok(())
    }

    /// Closes `cpu`'s run queue and deals its tasks over the active CPUs.
    fn migrate_run_queue(&self, cpu: CpuId) -> Result<(), String> {
        let c = &self.cpus[cpu];
        if !c.gate.stopped() || c.online() {
            return Err(format!("CPU {cpu} is still dispatching"));
        }
        let tasks = {
            let mut q = lock(&c.runq);
            q.open = false;
            c.runq_len.store(0, Ordering::Release);
            std::mem::take(&mut q.tasks)
        };
        if tasks.is_empty() {
            // Stopped, proxied, nothing queued: the CPU is offline.
            c.gate.set_liveness(CpuLiveness::Offline);
            return Ok(());
        }
        let targets: Vec<CpuId> = lock(&self.active).iter().filter(|&t| t != cpu).collect();
        let mut k = 0usize;
        let mut stranded = Vec::new();
        for task in tasks {
            let mut task = Some(task);
            for _ in 0..targets.len() {
                let t = targets[k % targets.len()];
                k += 1;
                match self.push_task(t, task.take().expect("a task to place")) {
                    Ok(()) => break,
                    Err(back) => task = Some(back),
                }
            }
            stranded.extend(task);
        }
        if stranded.is_empty() {
            // Stopped, proxied, emptied: the CPU is offline.
            c.gate.set_liveness(CpuLiveness::Offline);
            return Ok(());
        }
        // No active CPU took them: keep them here rather than lose them.
        let n = stranded.len();
        let mut q = lock(&c.runq);
        q.tasks.extend(stranded);
        c.runq_len.store(q.tasks.len(), Ordering::Release);
        Err(format!("no active CPU accepted {n} task(s) of CPU {cpu}"))
    }

    /// Checks invariants 1-3 of the `cpu` module docs.
    pub(crate) fn check(&self, ctl: &Control) -> Result<(), String> {
        ctl.state.proxies.check()?;
        let active = lock(&self.active).clone();
        let online: CpuSet =
            self.cpus.iter().filter(|c| c.state() == CpuLiveness::Online).map(|c| c.id).collect();
        if online.is_empty() {
            return Err("no CPU is online".into());
        }
        if active != online {
            return Err(format!("active mask {{{active}}} is not the online CPUs {{{online}}}"));
        }
        for c in &self.cpus {
            let cpu = c.id;
            let handler = c.mailbox.handler();
            let (open, queued) = {
                let q = lock(&c.runq);
                (q.open, q.tasks.len())
            };
            let charges = lock(&c.charges).clone();
            if charges != ctl.state.proxies.proxying_for(cpu) {
                return Err(format!(
                    "CPU {cpu} proxies for {{{charges}}}, the proxy table says {{{}}}",
                    ctl.state.proxies.proxying_for(cpu)
                ));
            }
            if c.has_charges.load(Ordering::Acquire) == charges.is_empty() {
                return Err(format!("CPU {cpu}: has_charges disagrees with its charges {{{charges}}}"));
            }
            match c.state() {
                CpuLiveness::Online => {
                    if let Some(p) = ctl.state.proxies.proxied_by(cpu) {
                        return Err(format!("online CPU {cpu} still has proxy {p}"));
                    }
                    if handler != cpu {
                        return Err(format!("online CPU {cpu}'s mailbox is handled by CPU {handler}"));
                    }
                    if !open {
                        return Err(format!("online CPU {cpu} has a closed run queue"));
                    }
                    if !c.has_cache.load(Ordering::Acquire) {
                        return Err(format!("online CPU {cpu} has no cache"));
                    }
                }
                CpuLiveness::Offline => {
                    let Some(p) = ctl.state.proxies.proxied_by(cpu) else {
                        return Err(format!("offline CPU {cpu} has no proxy"));
                    };
                    if !online.contains(p) {
                        return Err(format!("offline CPU {cpu}'s proxy {p} is not online"));
                    }
                    if handler != p {
                        return Err(format!(
                            "offline CPU {cpu}'s mailbox is handled by {handler}, not its proxy {p}"
                        ));
                    }
                    if open || queued > 0 {
                        return Err(format!(
                            "offline CPU {cpu}'s run queue is open={open} with {queued} task(s)"
                        ));
                    }
                }
                CpuLiveness::Stopping => return Err(format!("CPU {cpu} is left stopping")),
            }
        }
        Ok(())
    }
}

use dyncore_core::nanos as ns;
