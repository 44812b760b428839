//! The Linux baseline: a command run alone on the same CPUs, no dyncore —
//! `taskset`'s way (its affinity is the CPU set, the kernel's own scheduler
//! does the rest). What an arbiter run is set beside.
//!
//! Its wall time is measured as the arbiter measures its commands': from
//! just before the fork to the reap, so the two compare like for like.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use dyncore_core::CpuSet;

use super::cgfs;
use super::discover::ProcTree;
use super::probe::{Flavor, Probe, ProbeInput, Want};
use super::record::Exit;
use super::registry;
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

/// One command of [`run_together`]: its argv, when it starts (from the
/// call), where its standard output goes (`None`: inherited).
#[derive(Debug, Clone)]
pub struct Together {
    pub argv: Vec<OsString>,
    pub start: Duration,
    pub stdout: Option<RawFd>,
    /// Its nice value (set before it `exec`s; its children inherit it),
    /// `None`: dyncore's own.
    pub nice: Option<i32>,
}

/// A group of the `cpu` controller with a weight, where the Linux
/// baseline's commands run so that they have the weight an arbiter run
/// has against the machine's other processes (cgroup v1, as root; named
/// like the arbiter's groups, `dyncore.linux.<pid>.<n>`, so that the next
/// run's sweep removes it if dyncore is killed). Removed when dropped.
struct WeightGroup {
    dir: Option<PathBuf>,
}

static LINUX_RUNS: AtomicU64 = AtomicU64::new(0);

impl WeightGroup {
    /// The group, or why not.
    fn create(weight: u32) -> Result<WeightGroup, String> {
        let mounts = std::fs::read_to_string("/proc/self/mounts").map_err(|e| e.to_string())?;
        let euid = rustix::process::geteuid();
        let probe = Probe::run(&ProbeInput { mounts: &mounts, prefix: Path::new("/"), euid: euid.as_raw() });
        let root = match probe.choose(Want::CgroupV1)? {
            (Flavor::V1 { hierarchies }, _) => hierarchies.into_iter().find(|h| h.has("cpu")).map(|h| h.root),
            _ => None,
        }
        .ok_or("no cgroup v1 `cpu` hierarchy")?;
        let name =
            registry::group_name("linux", std::process::id(), LINUX_RUNS.fetch_add(1, Ordering::Relaxed));
        let dir = root.join(name);
        cgfs::create_group(&dir).map_err(|e| e.to_string())?;
        let g = WeightGroup { dir: Some(dir.clone()) };
        cgfs::write(&dir.join("cpu.shares"), &weight.clamp(2, 262_144).to_string())
            .map_err(|e| e.to_string())?;
        Ok(g)
    }

    fn join(&self) -> Vec<PathBuf> {
        self.dir.iter().map(|d| d.join("tasks")).collect()
    }
}

impl Drop for WeightGroup {
    fn drop(&mut self) {
        if let Some(d) = &self.dir {
            let _ = cgfs::remove_group(d);
        }
    }
}

/// The children of [`run_together`] not yet reaped: killed (their trees
/// too) and reaped when dropped, on every path (an error, a stop).
struct Reaper {
    pids: Vec<Tid>,
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if self.pids.is_empty() {
            return;
        }
        let mut tree = ProcTree::default();
        let mut threads = Vec::new();
        let _ = tree.scan(&self.pids, &mut threads);
        // Through the pidfds the tree holds (the roots among them).
        tree.signal(libc::SIGKILL);
        for &p in &self.pids {
            // SAFETY: waitpid on this process's own child.
            unsafe { libc::waitpid(p, std::ptr::null_mut(), 0) };
        }
    }
}

/// The Linux baseline of a mix: `cmds` started at their times on `cpus`
/// (their affinity, `taskset`'s way; no quota: the kernel's own scheduler
/// at full speed), each waited for. With `weight`, they run in a `cpu`
/// group of that weight (cgroup v1, as root; elsewhere the notes say why
/// not, and they run where dyncore runs). Each one's wall time is from
/// just before its fork to its reap (the reap is looked for every
/// millisecond: ±1 ms). `stop` raised: every tree is killed and reaped and
/// `Ok(None)` returned; nothing is left on any path.
pub fn run_together(
    cmds: &[Together],
    cpus: &CpuSet,
    weight: Option<u32>,
    stop: &AtomicBool,
) -> Result<(Option<Vec<AloneRun>>, Vec<String>), ArbiterError> {
    crate::testing::assert_held("running commands pinned to real CPUs");
    let mut notes = Vec::new();
    let group = match weight.map(WeightGroup::create) {
        None => WeightGroup { dir: None },
        Some(Ok(g)) => {
            notes.push(format!("in a cpu group of weight {}", weight.unwrap_or_default()));
            g
        }
        Some(Err(why)) => {
            notes.push(format!("the weight is not applied ({why}): they ran where dyncore runs"));
            WeightGroup { dir: None }
        }
    };
    crate::affinity::check_allowed(cpus.iter()).map_err(|e| ArbiterError::Config(e.to_string()))?;
    let programs: Vec<_> = cmds
        .iter()
        .map(|c| {
            let first = c.argv.first().ok_or(spawn::LaunchError::Empty)?;
            spawn::resolve(first)
        })
        .collect::<Result<_, _>>()
        .map_err(ArbiterError::Launch)?;
    let mut order: Vec<usize> = (0..cmds.len()).collect();
    order.sort_by_key(|&i| cmds[i].start);
    let origin = Instant::now();
    let mut reaper = Reaper { pids: Vec::new() };
    let mut started: Vec<Option<(Tid, Instant)>> = vec![None; cmds.len()];
    let mut done: Vec<Option<AloneRun>> = vec![None; cmds.len()];
    let mut next = 0;
    while done.iter().any(Option::is_none) {
        if stop.load(Ordering::Acquire) {
            return Ok((None, notes));
        }
        while next < order.len() && origin.elapsed() >= cmds[order[next]].start {
            let i = order[next];
            let plan = ChildPlan {
                join: group.join(),
                gate_cpus: Some(cpus.clone()),
                stdout: cmds[i].stdout,
                ..ChildPlan::default()
            };
            let at = Instant::now();
            let mut child = spawn::launch(&programs[i], &cmds[i].argv, &plan).map_err(ArbiterError::Io)?;
            reaper.pids.push(child.pid);
            if let Some(n) = cmds[i].nice {
                // SAFETY: setpriority(2) on this process's own child,
                // which waits at its gate: it runs its command at `n`.
                if unsafe { libc::setpriority(libc::PRIO_PROCESS, child.pid as libc::id_t, n) } != 0 {
                    return Err(ArbiterError::Io(std::io::Error::last_os_error()));
                }
            }
            child.open_gate();
            started[i] = Some((child.pid, at));
            next += 1;
        }
        for i in 0..cmds.len() {
            let Some((pid, at)) = started[i] else { continue };
            if done[i].is_some() {
                continue;
            }
            let mut status = 0;
            // SAFETY: an all-zero rusage is valid; wait4 writes it.
            let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
            // SAFETY: `status` and `usage` are valid for writing; `pid` is
            // this process's child, not yet reaped.
            let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
            if r == pid {
                reaper.pids.retain(|&p| p != pid);
                let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
                done[i] = Some(AloneRun {
                    pid,
                    wall_ns: at.elapsed().as_nanos() as u64,
                    exit: Exit::from_wait(status),
                    cpu_ns: tv(usage.ru_utime) + tv(usage.ru_stime),
                });
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok((Some(done.into_iter().map(|d| d.expect("every command reaped")).collect()), notes))
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

    fn together(args: &[&str], start_ms: u64) -> Together {
        Together {
            argv: args.iter().map(OsString::from).collect(),
            start: Duration::from_millis(start_ms),
            stdout: None,
            nice: None,
        }
    }

    #[test]
    fn commands_together_each_report_their_exit_and_a_stop_leaves_none_behind() {
        let _cpus = crate::testing::real_cpus();
        let cpus = crate::affinity::allowed_cpus().unwrap();
        let stop = AtomicBool::new(false);
        let cmds = [together(&["sh", "-c", "exit 3"], 0), together(&["true"], 30)];
        let (r, notes) = run_together(&cmds, &cpus, Some(2048), &stop).unwrap();
        let r = r.expect("not stopped");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(r[0].exit, Exit::Code(3));
        assert_eq!(r[1].exit, Exit::Code(0));
        // A tree that would outlive the call: stopped, it is killed.
        let marker = format!("/tmp/dyncore-together-{}", std::process::id());
        let script = format!("(sleep 30; touch {marker}) & sleep 30");
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(200));
                stop.store(true, Ordering::Release);
            });
            let cmds = [together(&["sh", "-c", &script], 0)];
            assert!(run_together(&cmds, &cpus, None, &stop).unwrap().0.is_none());
        });
        let out = std::process::Command::new("pgrep").args(["-f", &marker]).output().unwrap();
        assert!(out.stdout.is_empty(), "left behind: {}", String::from_utf8_lossy(&out.stdout));
    }
}
