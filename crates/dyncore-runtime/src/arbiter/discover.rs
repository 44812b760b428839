//! Following the threads of a process tree as they appear and exit.
//!
//! * With cgroups, the run's groups are the tree: a thread is created in
//!   its creator's groups and a process in its parent's, so every thread of
//!   the tree is listed in one of the run's `tasks` files, wherever it came
//!   from (`Cgroups::scan`). Nothing escapes but a process that moves
//!   itself out.
//! * With affinity only, [`ProcTree`] walks `/proc`: the processes of the
//!   tree are the commands and every process whose parent is one of them,
//!   to a fixed point; their threads are `/proc/<pid>/task/*`. A process
//!   whose parent exits before a pass sees it is reparented to the arbiter,
//!   which is a child subreaper (`PR_SET_CHILD_SUBREAPER`, set when an
//!   arbiter is created): a process whose parent is the arbiter's own
//!   ([`ProcTree::adopter`]) is of the tree too, and the arbiter reaps it.
//!
//! A thread that is born and dies between two passes is never seen: it ran
//! in its creator's group (same CPU, same quota). A process is held by a
//! pidfd from the pass that finds it, so a number reused by an unrelated
//! process is never taken for a process of the tree: the old one's pidfd
//! says it exited, and the newcomer is classified by its own parent.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};

use super::Tid;

/// What `/proc` says of a thread when it is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ThreadInfo {
    pub pid: Tid,
    pub ppid: Tid,
    pub comm: String,
    pub nice: i32,
}

/// Reads thread `tid`'s process, parent process, name and nice value;
/// `None` if it is gone.
pub(crate) fn thread_info(tid: Tid) -> Option<ThreadInfo> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let field = |k: &str| status.lines().find_map(|l| l.strip_prefix(k)).map(str::trim);
    let pid = field("Tgid:")?.parse().ok()?;
    let ppid = field("PPid:")?.parse().ok()?;
    let comm = field("Name:").unwrap_or("?").to_string();
    let nice = stat_fields(tid).and_then(|f| f.get(18).and_then(|n| n.parse().ok())).unwrap_or(0);
    Some(ThreadInfo { pid, ppid, comm, nice })
}

/// The fields of `/proc/<tid>/stat` after the `comm` (which may hold
/// spaces): index 0 is field 3 (state), 1 is field 4 (ppid), ... so field
/// *k* of proc(5) is index *k* − 3.
pub(crate) fn stat_fields(tid: Tid) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_string).collect())
}

/// Clock ticks since boot now (the unit of `stat`'s start time).
fn boot_ticks_now() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    // SAFETY: sysconf takes no pointers.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let ns = t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64;
    ns / (1_000_000_000 / hz)
}

/// The parent of process `pid` (field 4 of its `stat`).
pub(crate) fn parent_of(pid: Tid) -> Option<Tid> {
    stat_fields(pid)?.get(1)?.parse().ok()
}

/// The CPU thread `tid` last ran on (field 39 of its `stat`) and its state
/// letter (field 3).
pub fn last_cpu_and_state(pid: Tid, tid: Tid) -> Option<(usize, char)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    let after = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = after.split_whitespace().collect();
    Some((f.get(36)?.parse().ok()?, f.first()?.chars().next()?))
}

/// Thread `tid`'s CPU time so far (first field of its `schedstat`, ns).
pub fn cpu_time_ns(tid: Tid) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/schedstat")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The process tree below some roots, from `/proc` (affinity-only mode).
///
/// Every process of the tree is held by a pidfd from the pass that finds
/// it: it is signalled only through that descriptor ([`ProcTree::signal`]),
/// and a process whose descriptor says it has exited is dropped, so a
/// newcomer that takes its number is classified afresh (by its parent), not
/// taken for it.
#[derive(Debug, Default)]
pub(crate) struct ProcTree {
    /// Processes of the tree seen so far, each by a pidfd opened when it
    /// was found (after which its parent was checked again).
    procs: BTreeMap<Tid, OwnedFd>,
    /// Processes seen not to be in the tree (their parent is not), with
    /// that parent: classified again once the parent is gone (it may have
    /// been reparented to the adopter).
    unrelated: HashMap<Tid, Tid>,
    /// The process that adopts the tree's orphans (the arbiter's, a child
    /// subreaper): its children are of the tree.
    pub(crate) adopter: Option<Tid>,
    /// Children of the adopter that are not of the tree (its warden).
    pub(crate) not_ours: HashSet<Tid>,
    /// When the tree began (`stat`'s start time, clock ticks since boot):
    /// a child of the adopter that started before is none of the tree's
    /// (another run's orphan adopted by the same process, in a test).
    born_after: u64,
    /// Processes added since [`ProcTree::take_fresh`] last ran.
    fresh: Vec<Tid>,
}

impl ProcTree {
    /// An empty tree whose orphans `adopter` adopts (None: none).
    pub(crate) fn adopted_by(adopter: Option<Tid>) -> ProcTree {
        ProcTree { adopter, born_after: boot_ticks_now(), ..ProcTree::default() }
    }

    /// Sends `sig` to every live process of the tree found so far, through
    /// its pidfd; how many it reached (an exited one, a zombie, is not
    /// counted).
    pub(crate) fn signal(&self, sig: i32) -> usize {
        self.procs
            .values()
            .filter(|fd| !super::teardown::pidfd_exited(fd.as_fd()))
            .filter(|fd| super::teardown::pidfd_signal(fd.as_fd(), sig))
            .count()
    }

    /// The processes found since the last call, with their pidfds.
    pub(crate) fn take_fresh(&mut self) -> Vec<(Tid, BorrowedFd<'_>)> {
        let fresh = std::mem::take(&mut self.fresh);
        fresh.into_iter().filter_map(|p| self.procs.get(&p).map(|fd| (p, fd.as_fd()))).collect()
    }

    /// Adds process `p`, whose parent was `ppid` when listed, if a pidfd
    /// can be opened on it and its parent is still `ppid` after the open
    /// (so the descriptor names the process that was classified).
    fn add(&mut self, p: Tid, ppid: Option<Tid>) {
        if self.procs.contains_key(&p) {
            return;
        }
        let adopter = self.adopter;
        let same =
            |p: Tid| ppid.is_none_or(|pp| parent_of(p).is_some_and(|now| now == pp || Some(now) == adopter));
        if let Some(fd) = super::teardown::pidfd_of(p, same) {
            self.procs.insert(p, fd);
            self.fresh.push(p);
        }
    }

    /// Appends every live thread of the tree below `roots` (processes that
    /// exist), and returns the processes found.
    pub(crate) fn scan(&mut self, roots: &[Tid], out: &mut Vec<Tid>) -> io::Result<Vec<Tid>> {
        let listed: Vec<Tid> = std::fs::read_dir("/proc")?
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
            .collect();
        let now: HashSet<Tid> = listed.iter().copied().collect();
        // A process is kept while its number is listed and its pidfd does
        // not say it exited (a zombie of the tree is kept until reaped).
        self.procs.retain(|p, fd| {
            now.contains(p)
                && (!super::teardown::pidfd_exited(fd.as_fd())
                    || stat_fields(*p).is_some_and(|f| f.first().is_some_and(|s| s == "Z")))
        });
        self.unrelated.retain(|p, pp| now.contains(p) && now.contains(pp));
        for &r in roots {
            if now.contains(&r) {
                self.add(r, None);
            }
        }
        // The parent of every process not classified yet, then the tree's
        // closure over them (a child may be listed before its parent).
        let mut parent: HashMap<Tid, Tid> = HashMap::new();
        for &p in &listed {
            if self.procs.contains_key(&p) || self.unrelated.contains_key(&p) || self.not_ours.contains(&p) {
                continue;
            }
            let Some(f) = stat_fields(p) else { continue };
            let Some(ppid) = f.get(1).and_then(|s| s.parse().ok()) else { continue };
            // An adopted process is the tree's only if it is alive and
            // began after the tree did.
            let adopted_elsewhere = self.adopter == Some(ppid)
                && (f.first().is_some_and(|s| s == "Z")
                    || f.get(19).and_then(|s| s.parse::<u64>().ok()).is_none_or(|t| t < self.born_after));
            if adopted_elsewhere {
                self.unrelated.insert(p, ppid);
                continue;
            }
            parent.insert(p, ppid);
        }
        loop {
            let joined: Vec<(Tid, Tid)> = parent
                .iter()
                .filter(|&(_, &pp)| self.procs.contains_key(&pp) || self.adopter == Some(pp))
                .map(|(&p, &pp)| (p, pp))
                .collect();
            if joined.is_empty() {
                break;
            }
            for (p, pp) in joined {
                parent.remove(&p);
                self.add(p, Some(pp));
            }
        }
        self.unrelated.extend(parent);
        let mut procs = Vec::new();
        for &p in self.procs.keys() {
            // A zombie process has no live thread left.
            if stat_fields(p).is_some_and(|f| f.first().is_some_and(|s| s == "Z")) {
                continue;
            }
            if let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) {
                procs.push(p);
                out.extend(
                    tasks
                        .flatten()
                        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<Tid>().ok())),
                );
            }
        }
        Ok(procs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_thread_is_described_by_proc() {
        let tid = rustix::thread::gettid().as_raw_nonzero().get();
        let info = thread_info(tid).unwrap();
        assert_eq!(info.pid, std::process::id() as Tid);
        assert!(cpu_time_ns(tid).is_some());
        let (cpu, state) = last_cpu_and_state(info.pid, tid).unwrap();
        assert_eq!(state, 'R', "this thread is running as it reads its own stat");
        assert!(cpu < 4096);
        assert!(thread_info(i32::MAX).is_none());
    }

    #[test]
    fn the_tree_of_a_shell_has_its_children() {
        // sh starts a sleep and waits: the tree is sh and sleep.
        let mut child = std::process::Command::new("sh").args(["-c", "sleep 5 & wait"]).spawn().unwrap();
        let root = child.id() as Tid;
        let mut tree = ProcTree::default();
        let mut found = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let procs = loop {
            found.clear();
            let procs = tree.scan(&[root], &mut found).unwrap();
            if procs.len() >= 2 || std::time::Instant::now() > deadline {
                break procs;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        for &p in procs.iter().filter(|&&p| p != root) {
            // SAFETY: kill(2) takes no pointers.
            unsafe { libc::kill(p, libc::SIGKILL) };
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(procs.len(), 2, "{procs:?}");
        assert!(procs.contains(&root) && found.contains(&root));
    }
}
