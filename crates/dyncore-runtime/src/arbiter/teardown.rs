//! Finding and signalling the processes of a run, whatever state it is in.
//!
//! A run's threads are listed from its groups (every `tasks` /
//! `cgroup.threads` file under the run's parent group), so a process the
//! arbiter never saw — forked a moment ago — is found as well. Signals go
//! to processes (thread group ids, from `/proc/<tid>/status`), once each,
//! and only through a pidfd opened before the process is checked to be
//! the run's: a process is never signalled by its number alone, which an
//! unrelated process may have taken since it was listed.

use std::collections::BTreeSet;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd};
use std::path::Path;

use super::Tid;
use super::cgfs;
use super::registry::dirs_depth_first;

/// Every thread listed in the groups under `dir`.
pub(crate) fn list_threads(dir: &Path) -> Vec<Tid> {
    let mut out = BTreeSet::new();
    for d in dirs_depth_first(dir) {
        for file in ["tasks", "cgroup.threads"] {
            if let Ok(text) = std::fs::read_to_string(d.join(file)) {
                out.extend(cgfs::parse_ids(&text));
            }
        }
    }
    out.into_iter().collect()
}

/// The process (thread group) of thread `tid`, if it still exists.
pub(crate) fn tgid_of(tid: Tid) -> Option<Tid> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    text.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

/// Sends `sig` to the process of each of `tids`, once per process, and
/// only to a process that is in one of run `run`'s groups; returns how
/// many processes it was sent to. Through a pidfd ([`pidfd_of`]): a thread
/// that exits and whose number is taken by an unrelated process between
/// the listing and the signal is not hit.
pub(crate) fn kill_threads(tids: &[Tid], sig: i32, run: &str) -> usize {
    let pids: BTreeSet<Tid> = tids.iter().filter_map(|&t| tgid_of(t)).collect();
    pids.into_iter()
        .filter_map(|p| pidfd_of(p, |p| in_run(p, run)))
        .filter(|fd| pidfd_signal(fd.as_fd(), sig))
        .count()
}

/// Whether process `pid` has a thread in a group of run `run` (a group
/// named `run`, or one below it, in `/proc/<pid>/cgroup`).
pub(crate) fn in_run(pid: Tid, run: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else { return false };
    text.lines().any(|l| {
        let path = l.splitn(3, ':').nth(2).unwrap_or("");
        path.split('/').any(|part| part == run)
    })
}

/// A pidfd of process `pid` (`pidfd_open(2)`, Linux 5.3), kept only if
/// `ours(pid)`, asked after the open, says yes: from the open on, the
/// descriptor names one process whatever becomes of its number, so a
/// signal through it can only reach the process that was checked (or
/// none, if that one died and the number was reused in between: then the
/// check read the newcomer, and the signal finds no process). `None`:
/// gone, not ours, or no `pidfd_open` in this kernel.
pub(crate) fn pidfd_of(pid: Tid, ours: impl Fn(Tid) -> bool) -> Option<OwnedFd> {
    let fd = pidfd_open(pid)?;
    ours(pid).then_some(fd)
}

/// A descriptor naming process `pid`, readable once it has exited
/// (`pidfd_open(2)`); `None` if it is gone or the kernel lacks it.
pub(crate) fn pidfd_open(pid: Tid) -> Option<OwnedFd> {
    use std::os::fd::FromRawFd as _;
    // SAFETY: pidfd_open takes a pid and flags, no pointers.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a non-negative result is a fresh descriptor nothing else owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Sends `sig` to the process `fd` names (`pidfd_send_signal(2)`); whether
/// it was delivered (false: the process has exited).
pub(crate) fn pidfd_signal(fd: BorrowedFd<'_>, sig: i32) -> bool {
    // SAFETY: a pidfd, a signal number, no siginfo, no flags.
    unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        ) == 0
    }
}

/// Whether the process `fd` names has exited (its pidfd is readable).
pub(crate) fn pidfd_exited(fd: BorrowedFd<'_>) -> bool {
    let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, no waiting.
    unsafe { libc::poll(&mut p, 1, 0) == 1 && p.revents != 0 }
}

/// The name of a signal for messages (`SIGTERM`), or its number.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGUSR2 => "SIGUSR2",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_listed_from_every_group_below() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("cpu0")).unwrap();
        std::fs::create_dir_all(d.path().join("held")).unwrap();
        std::fs::write(d.path().join("cpu0/tasks"), "3\n1\n").unwrap();
        std::fs::write(d.path().join("held/cgroup.threads"), "2\n3\n").unwrap();
        assert_eq!(list_threads(d.path()), [1, 2, 3]);
    }

    #[test]
    fn a_pidfd_of_a_reaped_process_signals_nothing_whatever_takes_its_number() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as Tid;
        let fd = pidfd_of(pid, |p| p == pid).expect("a pidfd of a live child");
        assert!(!pidfd_exited(fd.as_fd()));
        child.kill().unwrap();
        child.wait().unwrap();
        // Reaped: its number is free for any process; the pidfd still
        // names the dead one, so nothing is signalled through it.
        assert!(pidfd_exited(fd.as_fd()));
        assert!(!pidfd_signal(fd.as_fd(), libc::SIGKILL));
    }

    #[test]
    fn a_listed_thread_whose_process_is_not_in_the_run_is_not_signalled() {
        // As a reused number would be: listed, but in none of the run's
        // groups.
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as Tid;
        assert!(!in_run(pid, "dyncore.no-such-run.1.0"));
        assert_eq!(kill_threads(&[pid], libc::SIGKILL, "dyncore.no-such-run.1.0"), 0);
        assert!(child.try_wait().unwrap().is_none(), "it was not killed");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn the_process_of_a_thread_is_its_thread_group() {
        let me = std::process::id() as Tid;
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        assert_eq!(tgid_of(tid), Some(me));
        assert_eq!(tgid_of(me), Some(me));
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(64), "signal 64");
    }
}
