//! The controller (the thread that drives an arbiter) pinned to a spare
//! real CPU for a run's life, so that the policy, the actuation and the
//! discovery take no time from the run's CPUs — as the live runner pins
//! its controller. Its affinity is restored when the run ends.

use std::io;

use dyncore_core::{CpuId, CpuSet};
use rustix::process::Pid;
use rustix::thread::{CpuSet as RawSet, sched_getaffinity, sched_setaffinity};

/// The first real CPU this thread may use outside `run`: where a
/// controller can sit alone (`None` when the run takes every CPU).
pub fn spare_cpu(run: &CpuSet) -> Option<CpuId> {
    crate::affinity::allowed_cpus().ok()?.iter().find(|&c| !run.contains(c))
}

fn raw(cpus: &CpuSet) -> RawSet {
    let mut raw = RawSet::new();
    for c in cpus.iter() {
        raw.set(c);
    }
    raw
}

/// The calling thread pinned to one CPU; its earlier affinity comes back
/// on drop (if nobody changed it meanwhile).
#[derive(Debug)]
pub(super) struct Pinned {
    tid: Pid,
    cpu: CpuId,
    before: CpuSet,
}

impl Pinned {
    /// Pins the calling thread to `cpu`.
    pub(super) fn pin(cpu: CpuId) -> io::Result<Pinned> {
        let before = crate::affinity::allowed_cpus()?;
        crate::affinity::pin_current_thread(cpu)?;
        Ok(Pinned { tid: rustix::thread::gettid(), cpu, before })
    }

    pub(super) fn cpu(&self) -> CpuId {
        self.cpu
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // By thread id: the arbiter may end on another thread than the one
        // it started on. Left alone if someone else has changed it since.
        let Ok(now) = sched_getaffinity(Some(self.tid)) else { return };
        let now: CpuSet = (0..RawSet::MAX_CPU).filter(|&c| now.is_set(c)).collect();
        if now == CpuSet::single(self.cpu) {
            let _ = sched_setaffinity(Some(self.tid), &raw(&self.before));
        }
    }
}
