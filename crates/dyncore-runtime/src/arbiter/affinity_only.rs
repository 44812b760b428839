//! The fallback where no cgroup hierarchy is usable (or the caller is not
//! root): `sched_setaffinity` alone.
//!
//! | policy action | what happens |
//! |---|---|
//! | `Dispatch` of T on CPU c | T's affinity becomes c's real CPU (and it is back under `SCHED_OTHER`) |
//! | a thread the policy does not run | as root: `SCHED_IDLE`, affinity to the run's CPUs — it runs only when a CPU of the run would otherwise idle; not root: left as it is (it shares its CPU under CFS) |
//! | `SetSpeed` | not enforced (there is no quota without the cpu controller); counted and reported |
//! | `Offline` / `Online` | the CPU's threads are held as above; nothing freezes the CPU |
//!
//! These are weaker than cgroups: a held thread is not stopped, and duties
//! are not kept. The run says so, and its report counts the duty changes
//! it could not carry out.

use std::collections::HashSet;
use std::io;

use dyncore_core::{CpuId, CpuSet};

use super::Tid;

#[derive(Debug)]
pub(crate) struct AffinityOnly {
    real: Vec<CpuId>,
    all: CpuSet,
    /// Held threads go to `SCHED_IDLE` (needs root to come back).
    idle_hold: bool,
    /// Threads under `SCHED_IDLE` now.
    idle: HashSet<Tid>,
}

impl AffinityOnly {
    pub(crate) fn new(real: &[CpuId], root: bool) -> AffinityOnly {
        AffinityOnly {
            real: real.to_vec(),
            all: real.iter().copied().collect(),
            idle_hold: root,
            idle: HashSet::new(),
        }
    }

    /// What holding a thread means here, for reports.
    pub(crate) fn hold_note(&self) -> &'static str {
        if self.idle_hold {
            "threads the policy does not run are set to SCHED_IDLE (they run only where a CPU of the run idles)"
        } else {
            "threads the policy does not run are not held (not root: SCHED_IDLE could not be undone)"
        }
    }

    pub(crate) fn real_cpus(&self) -> &CpuSet {
        &self.all
    }

    pub(crate) fn place(&mut self, tid: Tid, cpu: CpuId) -> io::Result<()> {
        set_affinity(tid, &CpuSet::single(self.real[cpu]))?;
        if self.idle.remove(&tid) {
            set_policy(tid, libc::SCHED_OTHER)?;
        }
        Ok(())
    }

    pub(crate) fn hold(&mut self, tid: Tid) -> io::Result<()> {
        if !self.idle_hold {
            return Ok(());
        }
        set_affinity(tid, &self.all)?;
        if self.idle.insert(tid) {
            set_policy(tid, libc::SCHED_IDLE)?;
        }
        Ok(())
    }

    /// Forgets a thread that exited.
    pub(crate) fn exited(&mut self, tid: Tid) {
        self.idle.remove(&tid);
    }

    /// Checks that thread `tid` is where the policy has it: its affinity is
    /// exactly `real` (a CPU's) and it is not `SCHED_IDLE`; or, held (`real`
    /// = `None`), that it is `SCHED_IDLE` where holding is possible.
    pub(crate) fn check(&self, tid: Tid, real: Option<CpuId>) -> Result<(), String> {
        // SAFETY: cpu_set_t is plain bits; sched_getaffinity fills it.
        let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `mask` is valid for writes of the size given.
        if unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut mask) } != 0 {
            return Ok(()); // exited meanwhile
        }
        // SAFETY: sched_getscheduler takes a pid, no pointers.
        let policy = unsafe { libc::sched_getscheduler(tid) };
        let cpus: CpuSet = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: `mask` is a valid cpu_set_t; CPU_ISSET bounds-checks.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &mask) })
            .collect();
        match real {
            Some(c) if cpus != CpuSet::single(c) || policy == libc::SCHED_IDLE => Err(format!(
                "thread {tid} runs on CPUs {cpus} (policy {policy}), the policy has it on CPU {c}"
            )),
            None if self.idle_hold && policy != libc::SCHED_IDLE => {
                Err(format!("thread {tid} is held but under scheduling policy {policy}, not SCHED_IDLE"))
            }
            _ => Ok(()),
        }
    }

    /// Puts every held thread back under `SCHED_OTHER` (the teardown).
    pub(crate) fn release_all(&mut self) -> Vec<io::Error> {
        let mut errors = Vec::new();
        for tid in self.idle.drain().collect::<Vec<_>>() {
            if let Err(e) = set_policy(tid, libc::SCHED_OTHER)
                && super::cgfs::errno_of(&e) != Some(libc::ESRCH)
            {
                errors.push(e);
            }
        }
        errors
    }
}

/// A thread named as a path for error messages (`/proc/<tid>`).
fn tid_path(tid: Tid) -> String {
    format!("/proc/{tid}")
}

/// Sets thread `tid`'s affinity (its requested mask) to `cpus`.
pub(crate) fn set_affinity(tid: Tid, cpus: &CpuSet) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain bits; all-zero is the empty set.
    let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for c in cpus.iter() {
        // SAFETY: `mask` is a valid cpu_set_t; CPU_SET bounds-checks.
        unsafe { libc::CPU_SET(c, &mut mask) };
    }
    // SAFETY: `mask` is valid for the size given and outlives the call.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mask) };
    if rc == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        Err(super::cgfs::context(
            e,
            &format!("cannot set the affinity to {cpus} of thread"),
            tid_path(tid).as_ref(),
        ))
    }
}

fn set_policy(tid: Tid, policy: libc::c_int) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid sched_param that outlives the call.
    let rc = unsafe { libc::sched_setscheduler(tid, policy, &param) };
    if rc == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        Err(super::cgfs::context(e, "cannot set the scheduling policy of thread", tid_path(tid).as_ref()))
    }
}
