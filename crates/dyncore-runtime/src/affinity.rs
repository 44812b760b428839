//! Pinning threads to real CPUs, asking the kernel which CPUs this process
//! may use (its affinity mask, which cpusets and `taskset` narrow), and
//! real-time priority for threads that must not be preempted by the rest
//! of the machine.

use dyncore_core::{CpuId, CpuSet};
use rustix::thread::{CpuSet as RawSet, sched_getaffinity, sched_setaffinity};

/// The real CPUs this process may run on (its affinity mask).
pub fn allowed_cpus() -> std::io::Result<CpuSet> {
    let raw = sched_getaffinity(None)?;
    Ok((0..RawSet::MAX_CPU).filter(|&c| raw.is_set(c)).collect())
}

/// Refuses, with the reason, the first of `cpus` that does not exist or that
/// the process's affinity mask does not allow.
pub fn check_allowed(cpus: impl IntoIterator<Item = CpuId>) -> std::io::Result<()> {
    let allowed = allowed_cpus()?;
    match cpus.into_iter().find(|&c| !allowed.contains(c)) {
        None => Ok(()),
        Some(cpu) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("CPU {cpu} does not exist or is not in this process's affinity mask ({allowed})"),
        )),
    }
}

/// Pins the calling thread to `cpu`, refusing with the reason when the CPU
/// does not exist or the process's affinity does not allow it.
pub fn pin_current_thread(cpu: CpuId) -> std::io::Result<()> {
    crate::testing::assert_held("pinning a thread");
    check_allowed([cpu])?;
    let mut raw = RawSet::new();
    raw.set(cpu);
    sched_setaffinity(None, &raw)?;
    Ok(())
}

/// Sets the calling thread's affinity to `cpus`.
pub fn set_current_thread_affinity(cpus: &CpuSet) -> std::io::Result<()> {
    crate::testing::assert_held("setting a thread's affinity");
    let mut raw = RawSet::new();
    for c in cpus.iter() {
        raw.set(c);
    }
    sched_setaffinity(None, &raw)?;
    Ok(())
}

/// Gives the calling thread real-time priority `priority` (1-99) under
/// `SCHED_FIFO`: ordinary threads no longer preempt it (the kernel still
/// keeps 5% of each second for them by default, `sched_rt_runtime_us`).
/// Needs `CAP_SYS_NICE` (root); the error says so.
pub fn set_current_thread_realtime(priority: u8) -> std::io::Result<()> {
    crate::testing::assert_held("giving a thread real-time priority");
    if !(1..=99).contains(&priority) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("real-time priority {priority} is outside 1-99"),
        ));
    }
    let param = libc::sched_param { sched_priority: i32::from(priority) };
    // SAFETY: `param` is a valid `sched_param` that outlives the call; pid 0
    // is the calling thread; the call reads `param` and nothing else.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    Err(std::io::Error::new(
        e.kind(),
        format!("cannot set SCHED_FIFO priority {priority}: {e} (needs root or CAP_SYS_NICE)"),
    ))
}

/// Puts the calling thread back under the normal scheduler (`SCHED_OTHER`),
/// undoing [`set_current_thread_realtime`].
pub fn set_current_thread_normal() -> std::io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: as in `set_current_thread_realtime`: a valid `sched_param`
    // that outlives the call, pid 0 = the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// The calling thread's real-time priority, if it runs under `SCHED_FIFO`
/// or `SCHED_RR`.
pub fn current_thread_realtime_priority() -> Option<u8> {
    // SAFETY: no arguments to get wrong; pid 0 = the calling thread.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy != libc::SCHED_FIFO && policy != libc::SCHED_RR {
        return None;
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is a valid, writable `sched_param`; pid 0 = the
    // calling thread.
    let rc = unsafe { libc::sched_getparam(0, &mut param) };
    (rc == 0).then(|| u8::try_from(param.sched_priority).unwrap_or(0))
}

/// The CPU the calling thread is running on now.
pub fn current_cpu() -> CpuId {
    rustix::thread::sched_getcpu()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_to_an_allowed_cpu_and_refuse_a_missing_one() {
        let _cpus = crate::testing::real_cpus();
        let allowed = allowed_cpus().unwrap();
        let first = allowed.first().expect("at least one CPU is allowed");
        std::thread::spawn(move || {
            pin_current_thread(first).unwrap();
            assert_eq!(current_cpu(), first);
        })
        .join()
        .unwrap();
        let err = pin_current_thread(100_000).unwrap_err();
        assert!(err.to_string().contains("CPU 100000"), "{err}");
    }

    #[test]
    fn refuses_a_real_time_priority_outside_1_to_99() {
        let _cpus = crate::testing::real_cpus();
        for p in [0, 100, 255] {
            let err = set_current_thread_realtime(p).unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "{err}");
            assert!(err.to_string().contains("outside 1-99"), "{err}");
        }
    }

    #[test]
    fn real_time_priority_is_undone() {
        let _cpus = crate::testing::real_cpus();
        std::thread::spawn(|| {
            assert_eq!(current_thread_realtime_priority(), None);
            if let Err(e) = set_current_thread_realtime(3) {
                crate::testing::skip(crate::testing::Need::Root, &e.to_string());
                return;
            }
            assert_eq!(current_thread_realtime_priority(), Some(3));
            set_current_thread_normal().unwrap();
            assert_eq!(current_thread_realtime_priority(), None);
        })
        .join()
        .unwrap();
    }
}
