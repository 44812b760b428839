//! The warden: what ends a run's commands when dyncore cannot.
//!
//! A run's teardown (module `driver`) ends its commands on every exit that
//! runs code: a return, a panic (the `Drop` guard), SIGINT, SIGTERM,
//! SIGHUP. SIGKILL, the OOM killer, an abort or a SIGQUIT core dump run
//! none. So every run forks a warden when it starts: a small process that
//! outlives dyncore, waits on a socket, and does the teardown's killing if
//! the socket closes without the teardown having said it is done.
//!
//! * **What it holds.** The run's groups (each hierarchy's parent group and
//!   its CPU and `held` groups), known when it is forked; a pidfd of every
//!   process of the run the arbiter has found, sent to it over the socket
//!   (`SCM_RIGHTS`) as each is found (`Warden::follow`); the run's claim
//!   (its locked file descriptor, inherited), so no other run takes the
//!   CPUs while it is still cleaning up.
//! * **What it does when dyncore is gone** (end of file on the socket, no
//!   `disarm`):
//!   1. cgroup v2: `cgroup.kill` on the run's parent group (the kernel
//!      kills every process below it, forks in flight included);
//!      cgroup v1: the parent group is frozen (`freezer.state`; the freezer
//!      is hierarchical), so nothing in it can fork or exit, then each
//!      process listed in the run's groups gets `SIGKILL` through a pidfd
//!      opened and checked (`/proc/<pid>/cgroup` names the run) first;
//!   2. affinity only (no groups to list): every process it holds is
//!      stopped (`SIGSTOP` through its pidfd); once they are stopped,
//!      their children (`/proc/<pid>/task/*/children`) are added and
//!      stopped in turn, to a fixed point — a stopped process cannot fork,
//!      so the closure is complete — and then all are killed;
//!   3. every process it holds is killed through its pidfd (the commands
//!      and what the arbiter found), every group is thawed, emptied (waited
//!      for, bounded) and removed, children first; the claim file is
//!      removed, and one line on standard error says what it did.
//! * **Invariants.** (1) The warden never signals a process by number: a
//!   pidfd names one process whatever becomes of its number, and in v1 the
//!   number is read from a frozen group, whose processes cannot exit.
//!   (2) After `disarm` it does nothing but exit. (3) Nothing it does after
//!   the fork allocates or takes a lock (it is forked from a multithreaded
//!   process): every path, buffer and table is built before the fork.
//!   (4) It leaves nothing frozen: every group it knows is thawed before it
//!   exits, whatever else failed.
//! * **Bounds.** In affinity-only mode, a process that a command forked and
//!   whose parent then exited, both within the arbiter's last discovery
//!   pass before dyncore died (2 ms without the kernel's process events),
//!   was reparented to init and is not found. The warden holds at most
//!   [`CAPACITY`] processes at once (exited ones are dropped first); it
//!   says how many it could not hold. It ignores the terminal's signals and
//!   leads its own process group, so a Ctrl-C or a kill of dyncore's group
//!   does not end it before it has done its work.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use super::Tid;
use raw::{
    Writer, close, close_range, errno, exit, exited, now_ms, parse_id, pidfd_open, pidfd_signal, proc_path,
    read_file, read_proc, sleep_ms, write_file,
};

mod raw;

/// The most processes a warden holds at once.
pub const CAPACITY: usize = 4096;

/// One hierarchy's groups of the run, for the warden.
#[derive(Debug, Clone)]
pub(crate) struct Hierarchy {
    /// The run's parent group.
    pub run: PathBuf,
    /// Its CPU groups and `held`.
    pub groups: Vec<PathBuf>,
    pub freezer: bool,
}

/// What a warden is to clean up.
#[derive(Debug, Clone, Default)]
pub(crate) struct Plan {
    /// The run's name (its groups' name).
    pub name: String,
    /// cgroup v2 (else v1).
    pub v2: bool,
    /// Empty with affinity only.
    pub hierarchies: Vec<Hierarchy>,
    /// The run's claim file, and its locked descriptor (kept open in the
    /// warden: the claim stays locked until the warden is done).
    pub claim: Option<(PathBuf, RawFd)>,
}

/// The running warden, from the arbiter's side.
#[derive(Debug)]
pub(crate) struct Warden {
    sock: Option<OwnedFd>,
    pid: Tid,
    /// A message could not be sent: the warden is gone.
    pub lost: Option<String>,
}

impl Warden {
    /// Forks the warden for `plan`. Nothing after the fork allocates: the
    /// paths are made here.
    pub(crate) fn start(plan: &Plan) -> io::Result<Warden> {
        let mut prepared = Prepared::new(plan)?;
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        if unsafe {
            libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr())
        } != 0
        {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh descriptors nothing else owns.
        let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: the child runs `Prepared::serve`, which only makes
        // system calls on memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // SAFETY: closing the arbiter's end in the child, by number
            // (no destructor may run here).
            unsafe { libc::close(ours.as_raw_fd()) };
            prepared.serve(theirs.as_raw_fd());
        }
        drop(theirs);
        Ok(Warden { sock: Some(ours), pid, lost: None })
    }

    /// The warden's process id.
    pub(crate) fn pid(&self) -> Tid {
        self.pid
    }

    /// Hands the warden a pidfd of process `pid` of the run.
    pub(crate) fn follow(&mut self, pid: Tid, fd: BorrowedFd<'_>) {
        let mut data = [0u8; 5];
        data[0] = b'P';
        data[1..].copy_from_slice(&pid.to_le_bytes());
        if let Err(e) = self.send(&data, Some(fd.as_raw_fd())) {
            self.lost.get_or_insert_with(|| {
                format!(
                    "the run's warden is gone ({e}): a SIGKILL of dyncore would leave its commands running"
                )
            });
        }
    }

    fn send(&self, data: &[u8], fd: Option<RawFd>) -> io::Result<()> {
        let Some(sock) = &self.sock else { return Err(io::Error::other("disarmed")) };
        let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut _, iov_len: data.len() };
        let mut cbuf = [0u64; 4];
        // SAFETY: an all-zero msghdr is valid; the fields set point to
        // buffers that outlive the call, and the control message fits.
        unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            if let Some(fd) = fd {
                msg.msg_control = cbuf.as_mut_ptr().cast();
                msg.msg_controllen = libc::CMSG_SPACE(4) as usize;
                let c = libc::CMSG_FIRSTHDR(&msg);
                (*c).cmsg_level = libc::SOL_SOCKET;
                (*c).cmsg_type = libc::SCM_RIGHTS;
                (*c).cmsg_len = libc::CMSG_LEN(4) as usize;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<i32>(), fd);
            }
            loop {
                if libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) >= 0 {
                    return Ok(());
                }
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }

    /// The teardown is done: the warden exits without doing anything, and
    /// is reaped.
    pub(crate) fn disarm(&mut self) {
        if self.sock.is_none() {
            return;
        }
        let _ = self.send(b"D", None);
        self.sock = None;
        self.reap();
    }

    fn reap(&self) {
        // SAFETY: waiting for this process's own child.
        while unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) } < 0
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
    }
}

impl Drop for Warden {
    /// Not disarmed: the warden does its work (the socket closes) and is
    /// reaped.
    fn drop(&mut self) {
        if self.sock.take().is_some() {
            self.reap();
        }
    }
}

/// Everything the warden touches, made before the fork.
struct Prepared {
    /// The run's name as a `/proc/<pid>/cgroup` path component.
    name: Vec<u8>,
    /// v2: the parent group's `cgroup.kill`.
    kill: Vec<CString>,
    /// v1: the freezer hierarchy's parent `freezer.state`.
    freeze: Option<CString>,
    /// v1: every group's `cgroup.procs` in the freezer hierarchy (or the
    /// first one).
    procs: Vec<CString>,
    /// Every group's `tasks` / `cgroup.threads`, every hierarchy.
    threads: Vec<CString>,
    /// Every freezer control with its thawed value, children first.
    thaw: Vec<(CString, &'static [u8])>,
    /// Every group, children first.
    rmdir: Vec<CString>,
    claim: Option<CString>,
    claim_fd: Option<RawFd>,
    affinity: bool,
    pids: Box<[Tid]>,
    fds: Box<[RawFd]>,
    held: usize,
    /// The processes it killed, once each (for its report).
    killed: Box<[Tid]>,
    killed_count: usize,
    /// Processes not held for want of room.
    dropped: usize,
    buf: Box<[u8]>,
    dirbuf: Box<[u8]>,
}

fn cstring(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

impl Prepared {
    fn new(plan: &Plan) -> io::Result<Prepared> {
        let mut p = Prepared {
            name: plan.name.as_bytes().to_vec(),
            kill: Vec::new(),
            freeze: None,
            procs: Vec::new(),
            threads: Vec::new(),
            thaw: Vec::new(),
            rmdir: Vec::new(),
            claim: plan.claim.as_ref().map(|(p, _)| cstring(p)).transpose()?,
            claim_fd: plan.claim.as_ref().map(|&(_, fd)| fd),
            affinity: plan.hierarchies.is_empty(),
            pids: vec![0; CAPACITY].into_boxed_slice(),
            fds: vec![-1; CAPACITY].into_boxed_slice(),
            held: 0,
            killed: vec![0; CAPACITY].into_boxed_slice(),
            killed_count: 0,
            dropped: 0,
            buf: vec![0; 64 << 10].into_boxed_slice(),
            dirbuf: vec![0; 16 << 10].into_boxed_slice(),
        };
        let listing = plan.hierarchies.iter().position(|h| h.freezer).unwrap_or(0);
        for (i, h) in plan.hierarchies.iter().enumerate() {
            let dirs: Vec<&PathBuf> = h.groups.iter().chain([&h.run]).collect();
            for d in &dirs {
                p.threads.push(cstring(&d.join(if plan.v2 { "cgroup.threads" } else { "tasks" }))?);
                p.rmdir.push(cstring(d)?);
                if h.freezer {
                    let (file, value): (&str, &[u8]) =
                        if plan.v2 { ("cgroup.freeze", b"0") } else { ("freezer.state", b"THAWED") };
                    p.thaw.push((cstring(&d.join(file))?, value));
                }
                if i == listing && !plan.v2 {
                    p.procs.push(cstring(&d.join("cgroup.procs"))?);
                }
            }
            if plan.v2 {
                p.kill.push(cstring(&h.run.join("cgroup.kill"))?);
                if i == listing {
                    p.procs.push(cstring(&h.run.join("cgroup.procs"))?);
                }
            } else if h.freezer {
                p.freeze = Some(cstring(&h.run.join("freezer.state"))?);
            }
        }
        Ok(p)
    }

    /// The warden's life, in the child. Never returns.
    fn serve(&mut self, sock: RawFd) -> ! {
        // SAFETY: system calls on this process's own state, with arguments
        // made before the fork.
        unsafe {
            libc::prctl(libc::PR_SET_NAME, c"dyncore-warden".as_ptr(), 0, 0, 0);
            for sig in [
                libc::SIGINT,
                libc::SIGTERM,
                libc::SIGHUP,
                libc::SIGQUIT,
                libc::SIGPIPE,
                libc::SIGTSTP,
                libc::SIGTTIN,
                libc::SIGTTOU,
                libc::SIGUSR1,
                libc::SIGUSR2,
            ] {
                libc::signal(sig, libc::SIG_IGN);
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            libc::setpgid(0, 0);
            // Lower its chance of being the OOM killer's choice (as root).
            let fd = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd >= 0 {
                libc::write(fd, b"-1000".as_ptr().cast(), 5);
                libc::close(fd);
            }
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            if null >= 0 {
                libc::dup2(null, 0);
                libc::dup2(null, 1);
                libc::close(null);
            }
            // Every other descriptor dyncore had (pipes a caller waits on
            // to close, among them) but the socket and the claim.
            let mut keep = [sock, self.claim_fd.unwrap_or(sock)];
            keep.sort_unstable();
            let mut from = 3;
            for k in keep {
                if k > from {
                    close_range(from, k - 1);
                }
                from = from.max(k + 1);
            }
            close_range(from, i32::MAX);
        }
        loop {
            let mut data = [0u8; 8];
            let mut cbuf = [0u64; 4];
            let mut iov = libc::iovec { iov_base: data.as_mut_ptr().cast(), iov_len: data.len() };
            // SAFETY: an all-zero msghdr is valid; its buffers outlive the
            // call.
            let (n, fd) = unsafe {
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_iov = &mut iov;
                msg.msg_iovlen = 1;
                msg.msg_control = cbuf.as_mut_ptr().cast();
                msg.msg_controllen = std::mem::size_of_val(&cbuf);
                let n = libc::recvmsg(sock, &mut msg, libc::MSG_CMSG_CLOEXEC);
                let c = libc::CMSG_FIRSTHDR(&msg);
                let fd = if n > 0 && !c.is_null() && (*c).cmsg_type == libc::SCM_RIGHTS {
                    std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<i32>())
                } else {
                    -1
                };
                (n, fd)
            };
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            match (n, data[0]) {
                (1.., b'D') => exit(0),
                (5.., b'P') if fd >= 0 => {
                    let pid = i32::from_le_bytes([data[1], data[2], data[3], data[4]]);
                    self.hold(pid, fd);
                }
                (1.., _) => {
                    if fd >= 0 {
                        close(fd);
                    }
                }
                _ => break, // end of file (or an error): dyncore is gone
            }
        }
        self.end_run()
    }

    /// Holds `fd` (a pidfd of `pid`), making room by dropping processes
    /// that have exited when full.
    fn hold(&mut self, pid: Tid, fd: RawFd) {
        if let Some(i) = self.pids[..self.held].iter().position(|&p| p == pid) {
            // Held already; or its number reused: keep the live one.
            if exited(self.fds[i]) {
                close(self.fds[i]);
                self.fds[i] = fd;
            } else {
                close(fd);
            }
            return;
        }
        if self.held == self.pids.len() {
            let mut i = 0;
            while i < self.held {
                if exited(self.fds[i]) {
                    close(self.fds[i]);
                    self.held -= 1;
                    self.fds[i] = self.fds[self.held];
                    self.pids[i] = self.pids[self.held];
                } else {
                    i += 1;
                }
            }
        }
        if self.held == self.pids.len() {
            self.dropped += 1;
            close(fd);
            return;
        }
        self.pids[self.held] = pid;
        self.fds[self.held] = fd;
        self.held += 1;
    }

    /// Counts `pid` as killed (once).
    fn note_killed(&mut self, pid: Tid) {
        if !self.killed[..self.killed_count].contains(&pid) && self.killed_count < self.killed.len() {
            self.killed[self.killed_count] = pid;
            self.killed_count += 1;
        }
    }

    fn holds(&self, pid: Tid) -> bool {
        self.pids[..self.held].contains(&pid)
    }

    /// Dyncore is gone: end everything of the run, leave nothing frozen.
    fn end_run(&mut self) -> ! {
        if self.affinity {
            self.stop_closure();
        }
        if !self.kill.is_empty() {
            // What cgroup.kill is about to kill, for the report.
            self.for_each_listed(|w, pid| w.note_killed(pid));
        }
        for k in 0..self.kill.len() {
            write_file(self.kill[k].as_ptr(), b"1");
        }
        if let Some(f) = &self.freeze {
            let f = f.as_ptr();
            write_file(f, b"FROZEN");
            let deadline = now_ms() + 2000;
            while now_ms() < deadline && !self.file_starts_with(f, b"FROZEN") {
                sleep_ms(1);
            }
            self.kill_listed();
        }
        for i in 0..self.held {
            if pidfd_signal(self.fds[i], libc::SIGKILL) {
                self.note_killed(self.pids[i]);
            }
        }
        self.thaw_all();
        // Wait (bounded) for the groups to empty: killing again, thawing
        // again, in case a process was on its way in.
        let deadline = now_ms() + 5000;
        while !self.groups_empty() && now_ms() < deadline {
            if self.kill.is_empty() {
                self.kill_listed();
            }
            self.thaw_all();
            sleep_ms(5);
        }
        let mut removed = 0;
        for d in &self.rmdir {
            // SAFETY: a path made before the fork.
            if unsafe { libc::rmdir(d.as_ptr()) } == 0 {
                removed += 1;
            }
        }
        if let Some(c) = &self.claim {
            // SAFETY: as above.
            unsafe { libc::unlink(c.as_ptr()) };
        }
        self.report(self.killed_count, removed);
        exit(0)
    }

    /// Affinity only: stops every process held, then their children, to a
    /// fixed point (a stopped process cannot fork).
    fn stop_closure(&mut self) {
        let mut stopped = 0;
        for _round in 0..1000 {
            for i in stopped..self.held {
                pidfd_signal(self.fds[i], libc::SIGSTOP);
            }
            let deadline = now_ms() + 1000;
            for i in stopped..self.held {
                while now_ms() < deadline && !self.is_stopped(self.pids[i]) {
                    sleep_ms(1);
                }
            }
            let before = self.held;
            for i in 0..before {
                self.add_children(self.pids[i]);
            }
            stopped = before;
            if self.held == before {
                return;
            }
        }
    }

    /// Whether process `pid` is stopped, dead or gone (`stat`'s state).
    fn is_stopped(&mut self, pid: Tid) -> bool {
        let Some(text) = read_proc(&mut self.buf, pid, b"stat") else { return true };
        let Some(close) = text.iter().rposition(|&b| b == b')') else { return true };
        matches!(text.get(close + 2), Some(b'T' | b't' | b'Z' | b'X') | None)
    }

    /// Holds every child of process `pid` not held yet (their parent is
    /// checked again after each pidfd is opened).
    fn add_children(&mut self, pid: Tid) {
        let mut path = [0u8; 64];
        let dir = proc_path(&mut path, pid, None, b"task");
        // SAFETY: a path in a local buffer.
        let dfd = unsafe { libc::open(dir, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if dfd < 0 {
            return;
        }
        loop {
            // SAFETY: the buffer is valid for its length.
            let n = unsafe {
                libc::syscall(libc::SYS_getdents64, dfd, self.dirbuf.as_mut_ptr(), self.dirbuf.len())
            };
            if n <= 0 {
                break;
            }
            let mut off = 0usize;
            while off < n as usize {
                let rec = &self.dirbuf[off..];
                let reclen = u16::from_ne_bytes([rec[16], rec[17]]) as usize;
                let name = &rec[19..reclen];
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                off += reclen.max(1);
                let Some(tid) = parse_id(name) else { continue };
                let mut cpath = [0u8; 96];
                let cp = proc_path(&mut cpath, pid, Some(tid), b"children");
                let len = read_file(cp, &mut self.buf);
                if len <= 0 {
                    continue;
                }
                let mut i = 0;
                while i < len as usize {
                    let start = i;
                    while i < len as usize && self.buf[i].is_ascii_digit() {
                        i += 1;
                    }
                    let child = parse_id(&self.buf[start..i]);
                    i += 1;
                    let Some(child) = child else { continue };
                    if self.holds(child) {
                        continue;
                    }
                    let fd = pidfd_open(child);
                    if fd < 0 {
                        continue;
                    }
                    if self.parent_of(child) == Some(pid) {
                        self.hold(child, fd);
                    } else {
                        close(fd);
                    }
                }
            }
        }
        close(dfd);
    }

    fn parent_of(&mut self, pid: Tid) -> Option<Tid> {
        let text = read_proc(&mut self.buf, pid, b"stat")?;
        let close = text.iter().rposition(|&b| b == b')')?;
        // ") S 1234 ..."
        let rest = text.get(close + 4..)?;
        let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
        parse_id(&rest[..end])
    }

    /// v1: `SIGKILL` to each process listed in the run's groups, through a
    /// pidfd, if `/proc/<pid>/cgroup` names the run after it is opened.
    fn kill_listed(&mut self) {
        self.for_each_listed(|w, pid| {
            let fd = pidfd_open(pid);
            if fd < 0 {
                return;
            }
            if w.in_run(pid) && pidfd_signal(fd, libc::SIGKILL) {
                w.note_killed(pid);
            }
            close(fd);
        });
    }

    /// Calls `f` with each process listed in the run's groups (at most 512
    /// per group a call: the callers call again until the groups are empty).
    fn for_each_listed(&mut self, mut f: impl FnMut(&mut Self, Tid)) {
        for k in 0..self.procs.len() {
            let n = read_file(self.procs[k].as_ptr(), &mut self.buf);
            if n <= 0 {
                continue;
            }
            // Copy the ids out: `f` reuses the buffer.
            let mut ids = [0 as Tid; 512];
            let mut count = 0;
            let mut i = 0;
            while i < n as usize && count < ids.len() {
                let start = i;
                while i < n as usize && self.buf[i].is_ascii_digit() {
                    i += 1;
                }
                if let Some(id) = parse_id(&self.buf[start..i]) {
                    ids[count] = id;
                    count += 1;
                }
                i += 1;
            }
            for &pid in &ids[..count] {
                f(self, pid);
            }
        }
    }

    fn in_run(&mut self, pid: Tid) -> bool {
        let Some(text) = read_proc(&mut self.buf, pid, b"cgroup") else { return false };
        let name = &self.name[..];
        // A path component equal to the run's name: "/NAME/" or "/NAME\n".
        text.windows(name.len() + 2)
            .any(|w| w[0] == b'/' && &w[1..=name.len()] == name && matches!(w[name.len() + 1], b'/' | b'\n'))
    }

    fn thaw_all(&self) {
        for (f, value) in &self.thaw {
            write_file(f.as_ptr(), value);
        }
    }

    fn groups_empty(&mut self) -> bool {
        for k in 0..self.threads.len() {
            if read_file(self.threads[k].as_ptr(), &mut self.buf) > 0 {
                return false;
            }
        }
        true
    }

    fn file_starts_with(&mut self, path: *const libc::c_char, prefix: &[u8]) -> bool {
        let n = read_file(path, &mut self.buf);
        n > 0 && self.buf[..n as usize].starts_with(prefix)
    }

    /// One line on standard error.
    fn report(&mut self, killed: usize, removed: usize) {
        let mut line = [0u8; 512];
        let mut w = Writer { buf: &mut line, len: 0 };
        w.put(b"dyncore warden: run ");
        w.put(&self.name);
        w.put(b" ended without its teardown (dyncore died); killed ");
        w.num(killed);
        w.put(b" process(es)");
        if removed > 0 {
            w.put(b", removed ");
            w.num(removed);
            w.put(b" group(s)");
        }
        if self.dropped > 0 {
            w.put(b"; ");
            w.num(self.dropped);
            w.put(b" process(es) were not followed (the warden holds at most 4096)");
        }
        w.put(b"\n");
        let len = w.len;
        // SAFETY: a local buffer of `len` bytes.
        unsafe { libc::write(2, line.as_ptr().cast(), len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_lists_children_before_parents_and_thaws_every_group() {
        let plan = Plan {
            name: "dyncore.t.1.0".into(),
            v2: false,
            hierarchies: vec![
                Hierarchy { run: "/cg/cpu/r".into(), groups: vec!["/cg/cpu/r/cpu0".into()], freezer: false },
                Hierarchy {
                    run: "/cg/freezer/r".into(),
                    groups: vec!["/cg/freezer/r/cpu0".into(), "/cg/freezer/r/held".into()],
                    freezer: true,
                },
            ],
            claim: None,
        };
        let p = Prepared::new(&plan).unwrap();
        let names = |v: &[CString]| v.iter().map(|c| c.to_str().unwrap().to_string()).collect::<Vec<_>>();
        assert_eq!(
            names(&p.rmdir),
            ["/cg/cpu/r/cpu0", "/cg/cpu/r", "/cg/freezer/r/cpu0", "/cg/freezer/r/held", "/cg/freezer/r"]
        );
        assert_eq!(p.freeze.as_ref().unwrap().to_str().unwrap(), "/cg/freezer/r/freezer.state");
        assert_eq!(p.thaw.len(), 3, "every group of the freezer hierarchy, the parent last");
        assert!(p.thaw.last().unwrap().0.to_str().unwrap().ends_with("/r/freezer.state"));
        assert!(p.procs.iter().all(|c| c.to_str().unwrap().starts_with("/cg/freezer/")));
        assert!(!p.affinity && p.kill.is_empty());
    }
}
