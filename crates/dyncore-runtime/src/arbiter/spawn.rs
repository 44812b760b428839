//! Starting a command inside the run's groups, before it runs.
//!
//! 1. [`resolve`] finds the program as `execvp` would (a name with a `/` is
//!    a path; otherwise the directories of `PATH`, in order) and checks that
//!    it is an executable file — before anything is created, so that a
//!    missing command costs nothing and says so in one line.
//! 2. [`launch`] prepares everything the child needs (C strings, file
//!    names) and forks. Between `fork` and `exec` the child makes only
//!    async-signal-safe system calls:
//!    1. it unblocks every signal and resets `SIGPIPE` (which the Rust
//!       runtime ignores) to the default, as `std::process::Command` does;
//!    2. it closes the descriptors it must not keep (the run's claim lock,
//!       which must die with dyncore even while the child is frozen);
//!    3. it writes `0` (itself) into each of the join files — the run's
//!       `held` group in every hierarchy, the freezer's last — and so
//!       stops, frozen, before its command runs: the policy decides where
//!       it runs first. In affinity-only mode it instead waits on a gate
//!       pipe until the arbiter has placed it; the parent restricts it to
//!       the run's CPUs right after the fork, before it returns (so before
//!       the arbiter can find and place it: a child that set its own mask
//!       could undo a placement made before it got to run);
//!    4. it `execv`s the resolved program with the caller's environment.
//!
//!    A step that fails sends `(step, errno)` through a close-on-exec pipe
//!    and exits 127; a successful `exec` closes the pipe. The parent never
//!    blocks on that pipe (the child may be frozen for a while): the
//!    arbiter reads it without blocking ([`Launched::exec_result`]).

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read as _};
use std::os::fd::{AsRawFd as _, FromRawFd as _, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use dyncore_core::CpuSet;

/// Why a command cannot be started.
#[derive(Debug)]
pub enum LaunchError {
    /// No command was given.
    Empty,
    /// Not found (in `PATH`, or at the path given).
    NotFound(String),
    /// Found, but not an executable file.
    NotExecutable(PathBuf),
    /// The fork or the child's preparation failed.
    Io(io::Error),
}

impl LaunchError {
    /// The exit status a shell gives for it: 127 not found, 126 not
    /// executable (`sh`, `env`, `timeout` and `systemd-run` agree).
    pub fn exit_status(&self) -> i32 {
        match self {
            LaunchError::NotExecutable(_) => 126,
            _ => 127,
        }
    }
}

impl std::fmt::Display for LaunchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaunchError::Empty => f.write_str("no command given"),
            LaunchError::NotFound(name) => write!(f, "{name}: command not found"),
            LaunchError::NotExecutable(p) => write!(f, "{}: not an executable file", p.display()),
            LaunchError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LaunchError {}

/// Finds `program` as `execvp` would and checks it is executable.
pub fn resolve(program: &OsStr) -> Result<PathBuf, LaunchError> {
    if program.is_empty() {
        return Err(LaunchError::Empty);
    }
    if program.as_bytes().contains(&b'/') {
        let p = PathBuf::from(program);
        return match executable(&p) {
            Some(true) => Ok(p),
            Some(false) => Err(LaunchError::NotExecutable(p)),
            None => Err(LaunchError::NotFound(p.display().to_string())),
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    let mut not_executable = None;
    for dir in std::env::split_paths(&path) {
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        let p = dir.join(program);
        match executable(&p) {
            Some(true) => return Ok(p),
            Some(false) => not_executable = not_executable.or(Some(p)),
            None => {}
        }
    }
    Err(match not_executable {
        Some(p) => LaunchError::NotExecutable(p),
        None => LaunchError::NotFound(program.to_string_lossy().into_owned()),
    })
}

/// `Some(true)`: an executable file; `Some(false)`: exists, but a
/// directory or not executable by us; `None`: does not exist.
fn executable(p: &Path) -> Option<bool> {
    let meta = std::fs::metadata(p).ok()?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Some(false);
    }
    let c = CString::new(p.as_os_str().as_bytes()).ok()?;
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    Some(unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0)
}

/// What the child does before `exec`.
#[derive(Debug, Clone, Default)]
pub(crate) struct ChildPlan {
    /// Files to write `0` to, in order (joining the run's groups).
    pub join: Vec<PathBuf>,
    /// Affinity-only mode: restrict to these real CPUs, then wait at a gate.
    pub gate_cpus: Option<CpuSet>,
    /// With cgroups: the real CPUs (the run's) the child is born on. The
    /// forking thread takes them as its affinity for the fork, so the child
    /// never runs outside the run's CPUs while it joins the groups (which
    /// took milliseconds in a TCG guest, where a sampler saw it running on
    /// a CPU outside the run).
    pub born_on: Option<CpuSet>,
    /// Descriptors the child closes at once.
    pub close: Vec<RawFd>,
    /// A descriptor to make the child's standard output (`dup2` onto 1),
    /// e.g. `/dev/null` for a scenario's commands; `None`: inherited.
    pub stdout: Option<RawFd>,
}

/// A started child.
#[derive(Debug)]
pub(crate) struct Launched {
    pub pid: i32,
    /// The read end of the exec-status pipe (non-blocking).
    status: Option<File>,
    /// The write end of the gate (affinity-only mode): writing to it, or
    /// closing it, lets the child go on to `exec`.
    gate: Option<File>,
}

/// Which step of the child failed (the first byte it reports).
const STEP_JOIN: u8 = 1;
const STEP_EXEC: u8 = 3;

impl Launched {
    /// Lets an affinity-only child go on to `exec` (once).
    pub(crate) fn open_gate(&mut self) {
        if let Some(mut g) = self.gate.take() {
            let _ = io::Write::write_all(&mut g, b"g");
        }
    }

    /// `None` while the child has not reached `exec`; then `Ok` if the exec
    /// succeeded (or the child died before reporting), `Err` with what
    /// failed.
    pub(crate) fn exec_result(&mut self) -> Option<Result<(), String>> {
        let f = self.status.as_mut()?;
        let mut b = [0u8; 5];
        match f.read(&mut b) {
            Ok(0) => {
                self.status = None;
                Some(Ok(()))
            }
            Ok(n) if n >= 5 => {
                self.status = None;
                let errno = i32::from_ne_bytes([b[1], b[2], b[3], b[4]]);
                let e = io::Error::from_raw_os_error(errno);
                let what = match b[0] {
                    STEP_JOIN => "cannot join the run's groups",
                    _ => "cannot execute",
                };
                Some(Err(format!("{what}: {e}")))
            }
            Ok(_) => Some(Err("the child's report was cut short".into())),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => None,
            Err(e) => Some(Err(format!("cannot read the child's report: {e}"))),
        }
    }
}

/// Forks a child that joins the groups of `plan` and then runs `program`
/// (already resolved) with `argv` (argv\[0\] included).
pub(crate) fn launch(program: &Path, argv: &[OsString], plan: &ChildPlan) -> io::Result<Launched> {
    let invalid =
        |what: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{what} contains a NUL byte"));
    let path = CString::new(program.as_os_str().as_bytes()).map_err(|_| invalid("the program's path"))?;
    let args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()).map_err(|_| invalid("an argument")))
        .collect::<Result<_, _>>()?;
    let mut argp: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argp.push(std::ptr::null());
    let join: Vec<CString> = plan
        .join
        .iter()
        .map(|p| CString::new(p.as_os_str().as_bytes()).map_err(|_| invalid("a group's path")))
        .collect::<Result<_, _>>()?;
    let mut mask: libc::cpu_set_t = unsafe_zeroed_cpu_set();
    if let Some(cpus) = &plan.gate_cpus {
        for c in cpus.iter() {
            // SAFETY: `mask` is a valid cpu_set_t; CPU_SET bounds-checks.
            unsafe { libc::CPU_SET(c, &mut mask) };
        }
    }
    let (status_r, status_w) = pipe()?;
    let gate = if plan.gate_cpus.is_some() { Some(pipe()?) } else { None };
    let gate_r = gate.as_ref().map(|(r, _)| r.as_raw_fd());
    // The child closes its copy of the gate's write end, so that it sees
    // the end of the file if dyncore dies before opening the gate.
    let mut close = plan.close.clone();
    close.extend(gate.as_ref().map(|(_, w)| w.as_raw_fd()));
    let child = Child {
        path: &path,
        argp: &argp,
        join: &join,
        gate_r,
        status_w: status_w.as_raw_fd(),
        close: &close,
        stdout: plan.stdout,
    };
    let size = std::mem::size_of::<libc::cpu_set_t>();
    let mut before = unsafe_zeroed_cpu_set();
    if let Some(cpus) = &plan.born_on {
        let mut born = unsafe_zeroed_cpu_set();
        for c in cpus.iter() {
            // SAFETY: `born` is a valid cpu_set_t; CPU_SET bounds-checks.
            unsafe { libc::CPU_SET(c, &mut born) };
        }
        // SAFETY: both masks are valid cpu_set_t of the size given; pid 0
        // is the calling thread.
        if unsafe { libc::sched_getaffinity(0, size, &mut before) } != 0
            || unsafe { libc::sched_setaffinity(0, size, &born) } != 0
        {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("cannot fork on the run's CPUs ({cpus}): {e}")));
        }
    }
    // SAFETY: fork(2) has no memory-safety preconditions; in the child
    // only `Child::run` runs, which makes async-signal-safe calls only and
    // never returns.
    let pid = unsafe { libc::fork() };
    let fork_error = (pid < 0).then(io::Error::last_os_error);
    if pid == 0 {
        child.run();
    }
    if plan.born_on.is_some() {
        // SAFETY: as above; `before` was filled by sched_getaffinity.
        unsafe { libc::sched_setaffinity(0, size, &before) };
    }
    if let Some(e) = fork_error {
        return Err(e);
    }
    drop(status_w);
    if plan.gate_cpus.is_some() {
        // Affinity only: the parent, not the child, restricts the child to
        // the run's CPUs, now, before the arbiter can place it (module doc,
        // step 3). The child waits at the gate meanwhile.
        // SAFETY: `mask` is a valid cpu_set_t of the size given.
        if unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mask) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                // SAFETY: kill(2) and waitpid(2) on our own child.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, std::ptr::null_mut(), 0);
                }
                return Err(io::Error::new(e.kind(), format!("cannot set the command's CPU affinity: {e}")));
            }
            // ESRCH: the child is gone already; its status pipe says why.
        }
    }
    set_nonblocking(&status_r)?;
    Ok(Launched { pid, status: Some(status_r), gate: gate.map(|(_, w)| w) })
}

fn unsafe_zeroed_cpu_set() -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain bits; all-zero is the empty set.
    unsafe { std::mem::zeroed() }
}

/// What the child needs, prepared before the fork (no allocation after).
struct Child<'a> {
    path: &'a CString,
    argp: &'a [*const libc::c_char],
    join: &'a [CString],
    gate_r: Option<RawFd>,
    status_w: RawFd,
    close: &'a [RawFd],
    stdout: Option<RawFd>,
}

impl Child<'_> {
    /// The child between fork and exec: async-signal-safe calls only.
    fn run(&self) -> ! {
        // SAFETY (whole block): every call is an async-signal-safe system
        // call on arguments prepared before the fork, which stay valid
        // (the child has a copy of the parent's memory); nothing allocates.
        unsafe {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            for &fd in self.close {
                libc::close(fd);
            }
            if let Some(fd) = self.stdout
                && fd != 1
            {
                libc::dup2(fd, 1);
            }
            for f in self.join {
                let fd = libc::open(f.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    self.fail(STEP_JOIN);
                }
                libc::close(fd);
            }
            if let Some(g) = self.gate_r {
                let mut b = 0u8;
                while libc::read(g, (&raw mut b).cast(), 1) < 0 && errno() == libc::EINTR {}
                libc::close(g);
            }
            libc::execv(self.path.as_ptr(), self.argp.as_ptr());
            self.fail(STEP_EXEC);
        }
    }

    /// Reports `(step, errno)` and exits 127, as a shell does for a
    /// command it cannot run.
    fn fail(&self, step: u8) -> ! {
        let e = errno().to_ne_bytes();
        let msg = [step, e[0], e[1], e[2], e[3]];
        // SAFETY: write(2) of a local buffer, then _exit(2): both
        // async-signal-safe.
        unsafe {
            libc::write(self.status_w, msg.as_ptr().cast(), msg.len());
            libc::_exit(127)
        }
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A close-on-exec pipe: (read end, write end).
fn pipe() -> io::Result<(File, File)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two fresh descriptors that nothing else owns.
    Ok(unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) })
}

fn set_nonblocking(f: &File) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own; no pointers.
    let flags = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_finds_commands_like_execvp_and_says_what_is_wrong() {
        let sh = resolve(OsStr::new("sh")).unwrap();
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{}", sh.display());
        let e = resolve(OsStr::new("dyncore-no-such-command-xyz")).unwrap_err();
        assert_eq!(e.to_string(), "dyncore-no-such-command-xyz: command not found");
        assert_eq!(e.exit_status(), 127);
        let d = tempfile::tempdir().unwrap();
        let plain = d.path().join("data.txt");
        std::fs::write(&plain, "not a program").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = resolve(plain.as_os_str()).unwrap_err();
        assert!(matches!(e, LaunchError::NotExecutable(_)), "{e}");
        assert_eq!(e.exit_status(), 126);
        assert!(resolve(OsStr::new("/etc")).unwrap_err().to_string().contains("not an executable file"));
        assert!(matches!(resolve(OsStr::new("")), Err(LaunchError::Empty)));
        assert!(matches!(resolve(OsStr::new("./no/such/file")), Err(LaunchError::NotFound(_))));
    }

    #[test]
    fn a_child_that_cannot_join_reports_why_and_exits_127() {
        let plan =
            ChildPlan { join: vec![PathBuf::from("/nonexistent/dyncore/tasks")], ..ChildPlan::default() };
        let sh = resolve(OsStr::new("true")).unwrap();
        let mut l = launch(&sh, &[OsString::from("true")], &plan).unwrap();
        let status = wait(l.pid);
        assert_eq!(status, 127 << 8);
        let r = l.exec_result().expect("the child reported before it exited");
        assert!(r.unwrap_err().contains("cannot join the run's groups"));
    }

    #[test]
    fn a_child_runs_its_command_with_its_arguments() {
        let sh = resolve(OsStr::new("sh")).unwrap();
        let argv = ["sh", "-c", "exit 7"].map(OsString::from);
        let mut l = launch(&sh, &argv, &ChildPlan::default()).unwrap();
        assert_eq!(wait(l.pid), 7 << 8);
        assert_eq!(l.exec_result(), Some(Ok(())));
    }

    /// A thread's CPU affinity, from the kernel.
    fn affinity(tid: i32) -> CpuSet {
        let mut mask = unsafe_zeroed_cpu_set();
        // SAFETY: `mask` is valid for writes of the size given.
        let r = unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut mask) };
        assert_eq!(r, 0, "sched_getaffinity({tid}): {}", io::Error::last_os_error());
        // SAFETY: `mask` is a valid cpu_set_t; CPU_ISSET bounds-checks.
        (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &mask) }).collect()
    }

    /// The arbiter finds an affinity-only child as soon as it is forked
    /// and may place it before the child has run at all: the placement
    /// must survive the child's start (a soak caught a child that set its
    /// own mask after the arbiter had placed it, undoing the placement).
    #[test]
    fn an_affinity_only_child_keeps_a_placement_made_before_it_ran() {
        let _cpus = crate::testing::real_cpus();
        let mine: Vec<usize> = affinity(0).iter().collect();
        if mine.len() < 2 {
            crate::testing::skip(
                crate::testing::Need::Cpus(2),
                &format!("this process may use {} CPU(s), the test needs 2", mine.len()),
            );
            return;
        }
        let run: CpuSet = mine[..2].iter().copied().collect();
        let plan = ChildPlan { gate_cpus: Some(run.clone()), ..ChildPlan::default() };
        let sleep = resolve(OsStr::new("sleep")).unwrap();
        let mut l = launch(&sleep, &["sleep", "30"].map(OsString::from), &plan).unwrap();
        assert_eq!(affinity(l.pid), run, "launch returns with the child on the run's CPUs");
        // The arbiter's placement, at once, as a fast discovery makes it.
        let placed = CpuSet::single(mine[1]);
        let mut m = unsafe_zeroed_cpu_set();
        // SAFETY: `m` is a valid cpu_set_t; CPU_SET bounds-checks; the
        // pid is our child.
        let r = unsafe {
            libc::CPU_SET(mine[1], &mut m);
            libc::sched_setaffinity(l.pid, std::mem::size_of::<libc::cpu_set_t>(), &m)
        };
        assert_eq!(r, 0);
        l.open_gate();
        // Liveness bound only: the exec takes milliseconds.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let exec = loop {
            if let Some(r) = l.exec_result() {
                break r;
            }
            assert!(std::time::Instant::now() < deadline, "the child did not exec within 30 s");
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert_eq!(exec, Ok(()));
        assert_eq!(affinity(l.pid), placed, "the placement survived the child's start");
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(l.pid, libc::SIGKILL) };
        assert_eq!(wait(l.pid) & 0x7f, libc::SIGKILL);
    }

    fn wait(pid: i32) -> i32 {
        let mut status = 0;
        // SAFETY: `status` is a valid int; the pid is our child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(r, pid);
        status
    }
}
