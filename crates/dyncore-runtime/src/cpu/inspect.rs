//! Reading a runtime's state for users and failure reports: registry
//! entries and the dump, both safe to call while a CPU is stuck.

use std::sync::MutexGuard;
use std::sync::atomic::Ordering;

use dyncore_core::CpuId;

use super::percpu::{Local, PerCpu};
use super::report::{CpuInfo, HelperState, Stall};
use super::sync::lock;
use super::{RegistryEntry, Shared};

impl Shared {
    /// `c`'s per-CPU state, unless the CPU is stalled inside a step (which
    /// holds it) or dead: then `None` rather than waiting for ever. Waits
    /// for a running step otherwise (steps are short).
    pub(crate) fn lock_local_unless_stalled<'a>(&self, c: &'a PerCpu) -> Option<MutexGuard<'a, Local>> {
        loop {
            match c.local.try_lock() {
                Ok(g) => return Some(g),
                Err(std::sync::TryLockError::Poisoned(p)) => return Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) if c.unresponsive() => return None,
                Err(std::sync::TryLockError::WouldBlock) => std::thread::yield_now(),
            }
        }
    }

    fn helper_state(&self, cpu: CpuId) -> HelperState {
        let h = &self.cpus[cpu].helper;
        if lock(&h.handle).is_none() {
            HelperState::Stopped
        } else if h.parked.load(Ordering::Acquire) {
            HelperState::Parked
        } else if h.park.load(Ordering::Acquire) {
            HelperState::ParkRequested
        } else {
            HelperState::Running
        }
    }

    pub(crate) fn stall(&self, cpu: CpuId) -> Option<Stall> {
        let since_ns = self.cpus[cpu].stalled_since_ns()?;
        Some(Stall { since_ns, for_ns: self.now_ns().saturating_sub(since_ns) })
    }

    pub(crate) fn info(&self, cpu: CpuId, e: &RegistryEntry) -> CpuInfo {
        let c = &self.cpus[cpu];
        let handler = c.mailbox.handler();
        let local = self.lock_local_unless_stalled(c);
        CpuInfo {
            cpu,
            name: e.name.clone(),
            real_cpu: e.real_cpu,
            state: c.state(),
            proxied_by: (handler != cpu).then_some(handler),
            cache_blocks: local.as_ref().and_then(|l| l.cache.as_ref().map(|c| c.len())),
            helper: self.helper_state(cpu),
            watchdog_stalls: c.helper.stalls.load(Ordering::Relaxed),
            stalled: self.stall(cpu),
            stats: local.map(|l| l.stats).unwrap_or_default(),
        }
    }

    pub(crate) fn dump(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let now = self.now_ns();
        let _ = writeln!(
            s,
            "runtime at {now} ns: {} CPUs, stop-the-world gen {} (arrived {}), invalidation gen {}, control lock {}",
            self.cpus.len(),
            self.stw.generation.load(Ordering::SeqCst),
            self.stw.arrived.load(Ordering::SeqCst),
            self.inval_gen.load(Ordering::SeqCst),
            if self.ctl.try_lock().is_ok() { "free" } else { "held" },
        );
        for c in &self.cpus {
            let mb =
                c.mailbox.try_peek().map_or("locked".into(), |(h, n)| format!("handler {h}, {n} pending"));
            let h = &c.helper;
            let _ = writeln!(
                s,
                "  cpu{} (real {}): {} running={} qs={} heartbeat_age={}ns dead={} duty={} runq={} mailbox[{mb}] \
                 charges={} inval_seen={} helper[park={} parked={} stop={} ticks={} stalls={} stalled_since={}]",
                c.id,
                c.real,
                c.state(),
                c.gate.running(),
                c.gate.quiescent_count(),
                now.saturating_sub(c.heartbeat_ns.load(Ordering::Relaxed)),
                c.worker_dead.load(Ordering::Acquire),
                c.throttle.duty(),
                c.runq_len.load(Ordering::Acquire),
                c.charges.try_lock().map_or("locked".into(), |g| format!("{{{g}}}")),
                c.inval_seen.load(Ordering::SeqCst),
                h.park.load(Ordering::Acquire),
                h.parked.load(Ordering::Acquire),
                h.stop.load(Ordering::Acquire),
                h.ticks.load(Ordering::Relaxed),
                h.stalls.load(Ordering::Relaxed),
                h.stalled_since_ns.load(Ordering::Acquire),
            );
        }
        s
    }
}
