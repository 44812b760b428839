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

pub fn main(args: &[OsString]) -> ExitCode {
    let plan = match crate::plan::plan(args, &Registry::builtin()) {
        Ok(p) => p,
        Err(m) => return fail(2, &m),
    };
    if let Err((_, m)) = crate::preflight::resolve(&plan.argv[0]) {
        return fail(2, &m);
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
    // Ctrl-C reaches the command (the terminal's process group); the
    // supervisor stays to stop the scheduler and report, as `time` does.
    // SAFETY: ignoring signals in this process only.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
    let started = Instant::now();
    let status = match spawn_command(&plan) {
        Ok(pid) => wait_pid(pid),
        Err((code, m)) => {
            stop(&mut sched);
            let _ = std::fs::remove_file(&record_path);
            return fail(code, &m);
        }
    };
    let wall = started.elapsed();
    let sched_status = stop(&mut sched);
    let _ = relay.join();
    let record: Option<Record> =
        std::fs::read(&record_path).ok().and_then(|b| serde_json::from_slice(&b).ok());
    let _ = std::fs::remove_file(&record_path);
    let status = match status {
        Ok(s) => s,
        Err(e) => return fail(125, &format!("waiting for the command: {e}")),
    };
    let ending = Ending::of(sched_status, record.as_ref());
    if let Some(path) = &plan.json {
        let out = Outcome {
            command_status: shell_status(status),
            scheduler: format!("{ending:?}"),
            failed: ending.failed(),
            wall_ns: wall.as_nanos() as u64,
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
        eprint!("{}", crate::report::text(&plan, record.as_ref(), &ending, status, wall));
    }
    if ending.failed() { ExitCode::from(125) } else { ExitCode::from(shell_status(status)) }
}

/// What `--json FILE` holds: the run's outcome, the checker's verdict and
/// the whole record (None when the scheduler wrote none: it was killed).
#[derive(Debug, serde::Serialize)]
struct Outcome {
    command_status: u8,
    scheduler: String,
    failed: bool,
    wall_ns: u64,
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
    cmd.arg("scheduler").arg("--record").arg(record).args(&plan.options).arg("--").args(&plan.argv);
    // Its stderr is a pipe the supervisor relays: the scheduler must never
    // block on a file the command may hold locked (the same log, when a
    // caller sends both there), or it could not run the task that holds it.
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
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

/// The command, started so that it never runs where the policy did not
/// put it: forked onto the run's CPUs, it waits on a pipe, asleep, while
/// the supervisor gives it `SCHED_EXT`; so its first run under sched_ext
/// is an enqueue the BPF half places (a task that set `SCHED_EXT` on
/// itself would go on running where it was until rescheduled). Then it
/// execs. Its pid, or why it could not start (127 not found, 126 not
/// executable, with the message).
fn spawn_command(plan: &Plan) -> Result<i32, (u8, String)> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let argv: Vec<CString> = plan
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
            return Err((status, format!("{}: {e}", plan.argv[0].to_string_lossy())));
        }
        Ok(pid)
    }
}

/// Waits for process `pid`.
fn wait_pid(pid: i32) -> std::io::Result<ExitStatus> {
    let mut status = 0;
    loop {
        // SAFETY: waiting for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return Ok(ExitStatus::from_raw(status));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
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
