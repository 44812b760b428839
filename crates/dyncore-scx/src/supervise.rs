// SPDX-License-Identifier: GPL-2.0-only
//! `dyncore-scx exec`: the supervisor. It checks everything first (exit 2,
//! nothing started), starts the scheduler process and waits until its BPF
//! half is attached, starts the command with `SCHED_EXT` on the run's CPUs,
//! waits for it, stops the scheduler, and reports.
//!
//! The scheduler is a process of its own so that the command survives it:
//! when it dies (SIGKILL, a panic, a stall), the kernel unloads the BPF
//! scheduler and returns the command's tasks to the fair class, and the
//! supervisor still waits for the command and passes its status through.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use dyncore_core::policies::Registry;

use crate::plan::Plan;
use crate::record::Record;

/// `SCHED_EXT`, the scheduling policy of tasks a sched_ext scheduler runs.
pub const SCHED_EXT: libc::c_int = 7;

fn fail(status: u8, message: &str) -> ExitCode {
    eprintln!("dyncore-scx: error: {message}");
    ExitCode::from(status)
}

/// The status a shell gives for `s`.
fn shell_status(s: ExitStatus) -> u8 {
    match (s.code(), s.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => (128 + sig) as u8,
        _ => 125,
    }
}

/// `dyncore-scx exec ...` (`mode` "exec") or `dyncore-scx run ...` ("run").
pub fn main(mode: &str, args: &[OsString]) -> ExitCode {
    let plan = match Plan::from_args(mode, args, &Registry::builtin()) {
        Ok(p) => p,
        Err(m) => return fail(2, &m),
    };
    for c in &plan.commands {
        if let Err((_, m)) = crate::preflight::resolve(&c.argv[0]) {
            return fail(2, &m);
        }
    }
    if let Err(m) = crate::preflight::machine() {
        return fail(2, &m);
    }
    let record_path = std::env::temp_dir().join(format!("dyncore-scx.{}.json", std::process::id()));
    let _ = std::fs::remove_file(&record_path);
    let (mut sched, relay) = match start_scheduler(&plan, &record_path) {
        Ok(s) => s,
        Err(m) => return fail(2, &m),
    };
    if let Ok(f) = std::env::var("DYNCORE_SCX_PID_FILE") {
        let _ = std::fs::write(f, format!("{}\n", sched.id()));
    }
    // Ctrl-C reaches the commands (the terminal's process group); the
    // supervisor stays to stop the scheduler and report, as `time` does.
    // SAFETY: ignoring signals in this process only.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
    let started = Instant::now();
    let mut control = sched.stdin.take();
    let ran = run_commands(&plan, &mut control, started);
    let wall = started.elapsed();
    drop(control);
    let sched_status = stop(&mut sched);
    let _ = relay.join();
    let record: Option<Record> =
        std::fs::read(&record_path).ok().and_then(|b| serde_json::from_slice(&b).ok());
    let _ = std::fs::remove_file(&record_path);
    let commands = match ran {
        Ok(c) => c,
        Err((code, m)) => return fail(code, &m),
    };
    let ending = Ending::of(sched_status, record.as_ref());
    let first = commands.first().map_or(125, |c| c.status.unwrap_or(125));
    if let Some(path) = &plan.json {
        let out = Outcome {
            command_status: first,
            scheduler: format!("{ending:?}"),
            failed: ending.failed(),
            wall_ns: wall.as_nanos() as u64,
            commands: commands.clone(),
            verdict: record.as_ref().map(Record::verdict),
            record: record.clone(),
        };
        if let Err(e) = serde_json::to_vec_pretty(&out)
            .map_err(std::io::Error::other)
            .and_then(|b| std::fs::write(path, b))
        {
            eprintln!("dyncore-scx: error: writing {}: {e}", path.display());
        }
    }
    if !plan.quiet {
        eprint!("{}", crate::report::text(&plan, record.as_ref(), &ending, &commands, wall));
    }
    match (ending.failed(), mode) {
        (true, _) => ExitCode::from(125),
        (false, "exec") => ExitCode::from(first),
        (false, _) => ExitCode::SUCCESS,
    }
}

/// One command of the run, as it ran: times from the run's start (the
/// supervisor's clock: fork to reap, as the live backend measures).
#[derive(Debug, Clone, serde::Serialize)]
pub struct CommandOutcome {
    pub label: String,
    pub argv: Vec<String>,
    pub pid: Option<i32>,
    pub started_ns: u64,
    pub exited_ns: Option<u64>,
    /// The status a shell gives (128 + N for signal N); None: not reaped.
    pub status: Option<u8>,
    /// Killed at the run's safety stop (`max_time_ns`).
    pub timed_out: bool,
    /// Why it could not start, if it did not.
    pub error: Option<String>,
}

/// Starts every command at its time and waits for all of them (and, at
/// the safety stop, kills what still runs). An `exec` whose command
/// cannot start is an error (its status, the message).
fn run_commands(
    plan: &Plan,
    control: &mut Option<std::process::ChildStdin>,
    t0: Instant,
) -> Result<Vec<CommandOutcome>, (u8, String)> {
    let ns = |i: Instant| i.duration_since(t0).as_nanos() as u64;
    let mut out: Vec<CommandOutcome> = plan
        .commands
        .iter()
        .map(|c| CommandOutcome {
            label: c.label.clone(),
            argv: c.argv.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
            pid: None,
            started_ns: 0,
            exited_ns: None,
            status: None,
            timed_out: false,
            error: None,
        })
        .collect();
    // (command index, pid, pidfd) of the commands running.
    let mut running: Vec<(usize, i32, i32)> = Vec::new();
    // The commands in start order; `next` is the first not started.
    let mut order: Vec<usize> = (0..plan.commands.len()).collect();
    order.sort_by_key(|&i| plan.commands[i].start_ns);
    let mut next = 0;
    let mut killed = false;
    loop {
        while next < order.len() && ns(Instant::now()) >= plan.commands[order[next]].start_ns {
            let i = order[next];
            out[i].started_ns = ns(Instant::now());
            match spawn_command(plan, i, control) {
                Ok(pid) => {
                    out[i].pid = Some(pid);
                    // SAFETY: pidfd_open of our own child, not yet reaped.
                    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
                    running.push((i, pid, fd));
                }
                Err((code, m)) if plan.commands.len() == 1 => return Err((code, m)),
                Err((code, m)) => {
                    out[i].status = Some(code);
                    out[i].error = Some(m);
                }
            }
            next += 1;
        }
        if next == order.len() && running.is_empty() {
            return Ok(out);
        }
        let now = ns(Instant::now());
        if let Some(max) = plan.max_time_ns
            && now >= max
            && !killed
        {
            for &(i, pid, _) in &running {
                out[i].timed_out = true;
                // SAFETY: signalling our own child, not yet reaped.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            killed = true;
        }
        let mut until = order.get(next).map_or(u64::MAX, |&i| plan.commands[i].start_ns);
        if !killed {
            until = until.min(plan.max_time_ns.unwrap_or(u64::MAX));
        }
        let timeout_ms = until.saturating_sub(now).div_ceil(1_000_000).min(1000) as i32;
        let mut fds: Vec<libc::pollfd> =
            running.iter().map(|&(_, _, fd)| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
        // SAFETY: a valid array of pollfds. A pidfd that could not be
        // opened (-1) is ignored by poll; its command is reaped below.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        running.retain(|&(i, pid, fd)| {
            let mut status = 0;
            // SAFETY: waiting for our own child without blocking.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r != pid {
                return true;
            }
            out[i].exited_ns = Some(ns(Instant::now()));
            out[i].status = Some(shell_status(ExitStatus::from_raw(status)));
            if fd >= 0 {
                // SAFETY: our own pidfd, closed once.
                unsafe { libc::close(fd) };
            }
            false
        });
    }
}

/// What `--json FILE` holds: the run's outcome, each command's, the
/// checker's verdict and the whole record (None when the scheduler wrote
/// none: it was killed).
#[derive(Debug, serde::Serialize)]
struct Outcome {
    /// The first command's status (`exec`'s only command).
    command_status: u8,
    scheduler: String,
    failed: bool,
    wall_ns: u64,
    commands: Vec<CommandOutcome>,
    verdict: Option<dyncore_core::policy::execution::Verdict>,
    record: Option<Record>,
}

/// How the scheduler ended.
#[derive(Debug)]
pub enum Ending {
    /// Stopped when the command ended, its record written.
    Clean,
    /// Killed by a signal the supervisor did not send (e.g. SIGKILL from
    /// outside): the kernel unloaded it; the command ran on in the fair class.
    Killed(i32),
    /// The kernel ejected it (its watchdog, a BPF error): the reason.
    Ejected(String),
    /// It failed by itself: a panic, a stalled policy (its status).
    Failed(String),
}

impl Ending {
    fn of(status: Option<ExitStatus>, record: Option<&Record>) -> Ending {
        if let Some(exit) = record.and_then(|r| r.exit.as_ref()).filter(|e| e.is_error()) {
            return Ending::Ejected(format!("{} ({})", exit.reason, exit.message));
        }
        match status {
            Some(s) if s.success() && record.is_some() => Ending::Clean,
            Some(s) if s.signal() == Some(libc::SIGKILL) || s.signal().is_some() => {
                Ending::Killed(s.signal().unwrap_or(0))
            }
            Some(s) if s.code() == Some(3) => Ending::Failed("the policy stalled (see above)".into()),
            Some(s) => Ending::Failed(format!("the scheduler exited with status {}", shell_status(s))),
            None => Ending::Failed("the scheduler could not be waited for".into()),
        }
    }

    pub fn failed(&self) -> bool {
        matches!(self, Ending::Ejected(_) | Ending::Failed(_))
    }
}

fn start_scheduler(
    plan: &Plan,
    record: &std::path::Path,
) -> Result<(Child, std::thread::JoinHandle<()>), String> {
    let exe = std::env::current_exe().map_err(|e| format!("finding dyncore-scx itself: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.arg("scheduler").arg("--record").arg(record).args(&plan.options);
    // Its stderr is a pipe the supervisor relays: the scheduler must never
    // block on a file the command may hold locked (the same log, when a
    // caller sends both there), or it could not run the task that holds it.
    // Its stdin is the control pipe: "PID INDEX" for each command started.
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // SAFETY: prctl in the child before exec; async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            // The scheduler stops (and the kernel unloads it) if the supervisor dies.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| format!("starting the scheduler process: {e}"))?;
    let err = child.stderr.take().expect("piped");
    let relay = std::thread::spawn(move || {
        let mut err = err;
        let _ = std::io::copy(&mut err, &mut std::io::stderr());
    });
    let out = child.stdout.take().expect("piped");
    let mut line = String::new();
    let _ = BufReader::new(out).read_line(&mut line);
    if line.trim() != "ready" {
        let st = child.wait().ok();
        let _ = relay.join();
        return Err(format!(
            "the scheduler did not start ({}); its reason is above",
            st.map_or("not waited for".into(), |s| format!("exit status {}", shell_status(s)))
        ));
    }
    Ok((child, relay))
}

/// Command `index`, started so that it never runs where the policy did
/// not put it: forked onto the run's CPUs, it waits on a pipe, asleep,
/// while the supervisor tells the scheduler its pid and index (the
/// control pipe: its threads get its own spec) and gives it `SCHED_EXT`;
/// so its first run under sched_ext is an enqueue the BPF half places (a
/// task that set `SCHED_EXT` on itself would go on running where it was
/// until rescheduled). Then it execs. Its pid, or why it could not start
/// (127 not found, 126 not executable, with the message).
fn spawn_command(
    plan: &Plan,
    index: usize,
    control: &mut Option<std::process::ChildStdin>,
) -> Result<i32, (u8, String)> {
    use std::ffi::CString;
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;
    let command = &plan.commands[index];
    let null = if command.stdout_null {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .map_err(|e| (125u8, format!("opening /dev/null: {e}")))?;
        Some(f)
    } else {
        None
    };
    let null_fd = null.as_ref().map_or(-1, std::os::fd::AsRawFd::as_raw_fd);
    let argv: Vec<CString> = command
        .argv
        .iter()
        .map(|a| CString::new(a.as_bytes()).map_err(|_| (2u8, "an argument holds a NUL byte".to_string())))
        .collect::<Result<_, _>>()?;
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in &plan.cpus {
        // SAFETY: c is a CPU number below CPU_SETSIZE (an online CPU).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    let (mut gate, mut err) = ([0i32; 2], [0i32; 2]);
    // SAFETY: plain pipe2/fork/exec; the child makes only async-signal-safe calls.
    unsafe {
        if libc::pipe2(gate.as_mut_ptr(), libc::O_CLOEXEC) != 0
            || libc::pipe2(err.as_mut_ptr(), libc::O_CLOEXEC) != 0
        {
            return Err((125, format!("pipe: {}", std::io::Error::last_os_error())));
        }
        let pid = libc::fork();
        if pid < 0 {
            return Err((125, format!("fork: {}", std::io::Error::last_os_error())));
        }
        if pid == 0 {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::signal(libc::SIGQUIT, libc::SIG_DFL);
            libc::close(gate[1]);
            libc::close(err[0]);
            if null_fd >= 0 {
                libc::dup2(null_fd, 1);
            }
            let mut errno: i32 = 0;
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                errno = *libc::__errno_location();
            }
            let mut b = 0u8;
            while errno == 0 && libc::read(gate[0], &mut b as *mut u8 as *mut libc::c_void, 1) < 0 {}
            if errno == 0 {
                libc::execvp(ptrs[0], ptrs.as_ptr());
                errno = *libc::__errno_location();
            }
            libc::write(err[1], &errno as *const i32 as *const libc::c_void, 4);
            libc::_exit(127);
        }
        libc::close(gate[0]);
        libc::close(err[1]);
        // Asleep on the gate, then SCHED_EXT, then through the gate.
        for _ in 0..10_000 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat.rsplit_once(") ").map(|(_, r)| r.chars().next().unwrap_or('?'));
            if state == Some('S') {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        // The scheduler learns the pid before the task joins sched_ext.
        if let Some(c) = control.as_mut() {
            let _ = writeln!(c, "{pid} {index}").and_then(|()| c.flush());
        }
        let param = libc::sched_param { sched_priority: 0 };
        let set_ext = libc::sched_setscheduler(pid, SCHED_EXT, &param);
        let set_err = std::io::Error::last_os_error();
        if set_ext != 0 {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
            return Err((125, format!("giving the command SCHED_EXT: {set_err}")));
        }
        libc::write(gate[1], b"go".as_ptr() as *const libc::c_void, 1);
        libc::close(gate[1]);
        let mut errno: i32 = 0;
        let n = libc::read(err[0], &mut errno as *mut i32 as *mut libc::c_void, 4);
        libc::close(err[0]);
        if n == 4 {
            libc::waitpid(pid, std::ptr::null_mut(), 0);
            let e = std::io::Error::from_raw_os_error(errno);
            let status = if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
            return Err((status, format!("{}: {e}", command.argv[0].to_string_lossy())));
        }
        Ok(pid)
    }
}

/// Stops the scheduler (SIGTERM, then SIGKILL after 30 s) and reaps it.
fn stop(child: &mut Child) -> Option<ExitStatus> {
    if let Ok(Some(s)) = child.try_wait() {
        return Some(s);
    }
    // SAFETY: signalling our own child, not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match child.try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                return child.wait().ok();
            }
            Err(_) => return None,
        }
    }
}
