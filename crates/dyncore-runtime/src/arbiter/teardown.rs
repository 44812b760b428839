//! Finding and signalling the processes of a run, whatever state it is in.
//!
//! A run's threads are listed from its groups (every `tasks` /
//! `cgroup.threads` file under the run's parent group), so a process the
//! arbiter never saw — forked a moment ago — is found as well. Signals go
//! to processes (thread group ids, from `/proc/<tid>/status`), once each.

use std::collections::BTreeSet;
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

/// Sends `sig` to the process of each of `tids`, once per process;
/// returns how many processes it was sent to.
pub(crate) fn kill_threads(tids: &[Tid], sig: i32) -> usize {
    let pids: BTreeSet<Tid> = tids.iter().filter_map(|&t| tgid_of(t)).collect();
    pids.into_iter().filter(|&p| signal(p, sig)).count()
}

/// Sends `sig` to process `pid`; whether it existed.
pub(crate) fn signal(pid: Tid, sig: i32) -> bool {
    // SAFETY: kill(2) takes no pointers.
    unsafe { libc::kill(pid, sig) == 0 }
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
    fn the_process_of_a_thread_is_its_thread_group() {
        let me = std::process::id() as Tid;
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        assert_eq!(tgid_of(tid), Some(me));
        assert_eq!(tgid_of(me), Some(me));
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(64), "signal 64");
    }
}
