//! The Linux baseline: a command run alone on the same CPUs, no dyncore —
//! `taskset`'s way (its affinity is the CPU set, the kernel's own scheduler
//! does the rest). What an arbiter run is set beside.
//!
//! Its wall time is measured as the arbiter measures its commands': from
//! just before the fork to the reap, so the two compare like for like.

use std::ffi::OsString;
use std::time::Instant;

use dyncore_core::CpuSet;

use super::record::Exit;
use super::spawn::{self, ChildPlan};
use super::{ArbiterError, Tid};

/// A command run alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AloneRun {
    pub pid: Tid,
    pub wall_ns: u64,
    pub exit: Exit,
    /// User + system CPU time of the process and the descendants it waited
    /// for.
    pub cpu_ns: u64,
}

/// Runs `argv` alone on `cpus` and waits for it.
pub fn run_alone(argv: &[OsString], cpus: &CpuSet) -> Result<AloneRun, ArbiterError> {
    crate::testing::assert_held("running a command pinned to real CPUs");
    let first = argv.first().ok_or(ArbiterError::Launch(spawn::LaunchError::Empty))?;
    let program = spawn::resolve(first).map_err(ArbiterError::Launch)?;
    crate::affinity::check_allowed(cpus.iter()).map_err(|e| ArbiterError::Config(e.to_string()))?;
    let start = Instant::now();
    let plan = ChildPlan { gate_cpus: Some(cpus.clone()), ..ChildPlan::default() };
    let mut child = spawn::launch(&program, argv, &plan).map_err(ArbiterError::Io)?;
    child.open_gate();
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 writes it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are valid for writing; the pid is
        // this process's child.
        let r = unsafe { libc::wait4(child.pid, &mut status, 0, &mut usage) };
        if r == child.pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(ArbiterError::Io(e));
        }
    }
    let wall_ns = start.elapsed().as_nanos() as u64;
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    Ok(AloneRun {
        pid: child.pid,
        wall_ns,
        exit: Exit::from_wait(status),
        cpu_ns: tv(usage.ru_utime) + tv(usage.ru_stime),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_alone_runs_on_its_cpus_and_reports_its_exit() {
        let _cpus = crate::testing::real_cpus();
        let cpu = crate::affinity::allowed_cpus().unwrap().first().unwrap();
        let argv: Vec<OsString> =
            ["sh", "-c", "grep Cpus_allowed_list /proc/self/status | grep -q \"\t$0\\$\" && exit 5"]
                .iter()
                .map(OsString::from)
                .chain([OsString::from(cpu.to_string())])
                .collect();
        // The shell finds its own affinity is exactly that CPU: exit 5.
        let r = run_alone(&argv, &CpuSet::single(cpu)).unwrap();
        assert_eq!(r.exit, Exit::Code(5), "{r:?}");
        assert!(r.wall_ns > 0);
        let e = run_alone(&[OsString::from("dyncore-no-such-command")], &CpuSet::single(cpu)).unwrap_err();
        assert!(e.to_string().contains("command not found"), "{e}");
    }
}
