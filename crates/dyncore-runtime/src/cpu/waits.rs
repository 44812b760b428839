//! The controller's waits on runtime CPUs, each with a deadline
//! ([`super::RuntimeConfig::wait_deadline`]): a wait that passes it, or
//! that is on a CPU the watchdog finds stalled (or whose worker died),
//! returns [`Unresponsive`] naming the CPU and the state it was in, instead
//! of spinning for ever.

use std::sync::atomic::Ordering;
use std::time::Instant;

use dyncore_core::{CpuId, CpuSet};

use super::Shared;
use super::percpu::{CpuLiveness, Msg};
use super::report::{InvalidateReport, SyncReport, Unresponsive};

impl Shared {
    /// Waits until `done()`; fails if the deadline passes first or `cpu`
    /// is (or becomes) stalled or dead while not done.
    pub(crate) fn await_cpu(
        &self,
        cpu: CpuId,
        waited_for: impl FnOnce() -> String,
        mut done: impl FnMut() -> bool,
    ) -> Result<(), Unresponsive> {
        self.await_all(&[cpu], |_| waited_for(), |_| done())
    }

    /// Waits until `done(cpu)` for every CPU of `cpus`, with one deadline
    /// for all; fails if it passes first, or as soon as a CPU not done is
    /// stalled or dead. The CPU blamed is the likeliest culprit among those
    /// not done: dead, then stalled, then inside a dispatch section (a long
    /// step), then the first.
    pub(crate) fn await_all(
        &self,
        cpus: &[CpuId],
        waited_for: impl FnOnce(CpuId) -> String,
        mut done: impl FnMut(CpuId) -> bool,
    ) -> Result<(), Unresponsive> {
        let t0 = Instant::now();
        let mut pending: Vec<CpuId> = cpus.to_vec();
        let _ = crate::wait::spin_until(Some(t0 + self.cfg.wait_deadline), || {
            pending.retain(|&c| !done(c));
            pending.is_empty() || pending.iter().any(|&c| self.cpus[c].unresponsive())
        });
        pending.retain(|&c| !done(c));
        let rank = |&c: &CpuId| {
            let p = &self.cpus[c];
            (!p.worker_dead.load(Ordering::Acquire), p.stalled_since_ns().is_none(), !p.gate.running())
        };
        match pending.iter().min_by_key(|c| rank(c)) {
            None => Ok(()),
            Some(&cpu) => Err(self.unresponsive(cpu, waited_for(cpu), t0.elapsed().as_nanos())),
        }
    }

    /// What a report says about `cpu`, which did not `waited_for`.
    pub(crate) fn unresponsive(&self, cpu: CpuId, waited_for: String, waited_ns: u128) -> Unresponsive {
        let c = &self.cpus[cpu];
        let h = &c.helper;
        Unresponsive {
            cpu,
            waited_for,
            waited_ns: u64::try_from(waited_ns).unwrap_or(u64::MAX),
            state: c.state(),
            running: c.gate.running(),
            heartbeat_age_ns: self.now_ns().saturating_sub(c.heartbeat_ns.load(Ordering::Relaxed)),
            watchdog_stalls: h.stalls.load(Ordering::Relaxed),
            stalled: c.stalled_since_ns().is_some(),
            worker_dead: c.worker_dead.load(Ordering::Acquire),
        }
    }

    pub(crate) fn synchronize(&self) -> Result<SyncReport, Unresponsive> {
        let snaps: Vec<u64> = self.cpus.iter().map(|c| c.gate.snapshot()).collect();
        let (mut waited_for, mut reported_by_proxy) = (CpuSet::new(), CpuSet::new());
        for c in &self.cpus {
            if c.state() == CpuLiveness::Offline {
                reported_by_proxy.insert(c.id);
            } else {
                waited_for.insert(c.id);
            }
        }
        let cpus: Vec<CpuId> = waited_for.iter().collect();
        self.await_all(
            &cpus,
            |_| "pass a quiescent point (grace period)".into(),
            |c| self.cpus[c].gate.passed(snaps[c]),
        )?;
        Ok(SyncReport { waited_for, reported_by_proxy })
    }

    pub(crate) fn broadcast_invalidate(&self) -> Result<InvalidateReport, Unresponsive> {
        let g = self.inval_gen.fetch_add(1, Ordering::SeqCst) + 1;
        let (mut applied, mut skipped) = (CpuSet::new(), CpuSet::new());
        for c in &self.cpus {
            if c.online() {
                self.post(c.id, Msg::Invalidate(g));
                applied.insert(c.id);
            } else {
                skipped.insert(c.id);
            }
        }
        let seen = |c: CpuId| self.cpus[c].inval_seen.load(Ordering::SeqCst) >= g;
        let cpus: Vec<CpuId> = applied.iter().collect();
        self.await_all(&cpus, |_| format!("apply invalidation {g}"), |c| seen(c) || !self.cpus[c].online())?;
        for cpu in cpus {
            if !seen(cpu) {
                // Went offline meanwhile: it applies it when it returns.
                applied.remove(cpu);
                skipped.insert(cpu);
            }
        }
        Ok(InvalidateReport { generation: g, applied, skipped })
    }

    /// See [`super::Runtime::invalidate`]; `cpus` are owned.
    pub(crate) fn invalidate(&self, cpus: &CpuSet) -> Result<InvalidateReport, Unresponsive> {
        let g = self.inval_gen.fetch_add(1, Ordering::SeqCst) + 1;
        for cpu in cpus.iter() {
            self.post(cpu, Msg::Invalidate(g));
        }
        // An offline CPU's proxy applies it on its behalf; the CPU blamed
        // if it does not is the addressed one (its report names its state).
        let list: Vec<CpuId> = cpus.iter().collect();
        self.await_all(
            &list,
            |_| format!("apply invalidation {g} (itself, or through its proxy)"),
            |c| self.cpus[c].inval_seen.load(Ordering::SeqCst) >= g,
        )?;
        Ok(InvalidateReport { generation: g, applied: cpus.clone(), skipped: CpuSet::new() })
    }
}
