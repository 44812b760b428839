//! Which runs are alive and which CPUs they hold; the sweep of what dead
//! runs left behind.
//!
//! A run holds a *claim*: the file `<state dir>/<run group name>.claim`,
//! which names its CPUs and its pid, locked (`flock`, exclusive) by the
//! run for its whole life. The kernel drops the lock when the run's
//! process dies, however it dies — `SIGKILL` included — so a claim whose
//! lock can be taken belongs to a dead run.
//!
//! ## Starting a run (all under the state dir's lock, `<state dir>/lock`)
//! 1. The sweep: every group directory named `dyncore.*` at the root of a
//!    hierarchy whose run is dead — its claim unlocked or missing *and* the
//!    pid in its name gone — is emptied (threads thawed and killed with
//!    `SIGKILL`: their arbiter is gone) and removed, children first; a
//!    stale claim file is removed. Each removal is reported in one line.
//! 2. The overlap check: a live claim whose CPUs meet this run's refuses
//!    the run, naming the other run, its pid and its CPUs.
//! 3. This run's claim is written and locked.
//!
//! The lock serialises starts, so two runs on overlapping CPUs never both
//! pass step 2. A run whose claim file someone deleted is still recognised
//! as alive by its pid (and its groups are left alone).

use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dyncore_core::CpuSet;

use super::cgfs;
use super::teardown::{kill_threads, list_threads};

/// The prefix of every group directory (and claim) of a run.
pub const PREFIX: &str = "dyncore.";

/// A run's group name: `dyncore.<run>.<pid>.<n>` (`n` numbers the runs of
/// one process). `run` keeps only letters, digits, `-` and `_` (at most 40).
pub fn group_name(run: &str, pid: u32, n: u64) -> String {
    let clean: String = run
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
        .take(40)
        .collect();
    let clean = if clean.is_empty() { "run".to_string() } else { clean };
    format!("{PREFIX}{clean}.{pid}.{n}")
}

/// The pid in a group name made by [`group_name`].
pub fn pid_of(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let mut parts = rest.rsplitn(3, '.');
    let _n: u64 = parts.next()?.parse().ok()?;
    let pid = parts.next()?.parse().ok()?;
    parts.next()?;
    Some(pid)
}

/// A live run's claim on its CPUs; released (unlocked and removed) on drop.
#[derive(Debug)]
pub(crate) struct Claim {
    file: File,
    path: PathBuf,
}

impl Claim {
    /// The claim's descriptor, which a child must close (see `spawn.rs`).
    pub(crate) fn fd(&self) -> i32 {
        self.file.as_raw_fd()
    }

    /// The claim's file.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Remove first, unlock (close) second: a start that takes the lock
        // in between finds no file, not an unlocked one.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Another live run holds some of the CPUs asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    pub other: String,
    pub other_pid: Option<u32>,
    pub other_cpus: CpuSet,
    pub cpus: CpuSet,
}

impl std::fmt::Display for Overlap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pid = self.other_pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
        write!(
            f,
            "CPUs {} are already arbitrated by run {}{pid}, which holds CPUs {}: choose CPUs outside {} or \
             wait for it to end",
            self.other_cpus.intersection(&self.cpus),
            self.other,
            self.other_cpus,
            self.other_cpus
        )
    }
}

/// Sweeps stale runs, checks for overlap and claims `cpus` for run
/// `name`, under the state dir's lock (the steps of the module doc).
/// Returns the claim and one line per thing the sweep removed.
pub(crate) fn start(
    state: &Path,
    roots: &[PathBuf],
    name: &str,
    cpus: &CpuSet,
) -> Result<(Claim, Vec<String>), StartError> {
    std::fs::create_dir_all(state).map_err(|e| StartError::Io(cgfs::context(e, "cannot create", state)))?;
    let _lock = lock(&state.join("lock"), true).map_err(StartError::Io)?;
    let removed = sweep_locked(state, roots);
    for (other, other_cpus, other_pid) in live_claims(state).map_err(StartError::Io)? {
        if !other_cpus.is_disjoint(cpus) {
            return Err(StartError::Overlap(Overlap { other, other_pid, other_cpus, cpus: cpus.clone() }));
        }
    }
    let path = state.join(format!("{name}.claim"));
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .read(true)
        .open(&path)
        .map_err(|e| StartError::Io(cgfs::context(e, "cannot create the claim", &path)))?;
    flock(&file, libc::LOCK_EX | libc::LOCK_NB)
        .map_err(|e| StartError::Io(cgfs::context(e, "cannot lock", &path)))?;
    writeln!(file, "cpus {cpus}\npid {}", std::process::id())
        .map_err(|e| StartError::Io(cgfs::context(e, "cannot write", &path)))?;
    Ok((Claim { file, path }, removed))
}

/// Why a run could not start.
#[derive(Debug)]
pub(crate) enum StartError {
    Overlap(Overlap),
    Io(io::Error),
}

/// The sweep alone (step 1), under the state dir's lock: what a run does
/// at its start, for a command that only cleans up.
pub fn sweep(state: &Path, roots: &[PathBuf]) -> io::Result<Vec<String>> {
    std::fs::create_dir_all(state).map_err(|e| cgfs::context(e, "cannot create", state))?;
    let _lock = lock(&state.join("lock"), true)?;
    Ok(sweep_locked(state, roots))
}

fn sweep_locked(state: &Path, roots: &[PathBuf]) -> Vec<String> {
    let mut report = Vec::new();
    let mut stale = Vec::new();
    for root in roots {
        let Ok(entries) = std::fs::read_dir(root) else { continue };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with(PREFIX) || !e.path().is_dir() || alive(state, &name) {
                continue;
            }
            stale.push((e.path(), name));
        }
    }
    // Every hierarchy's groups are thawed before any is emptied: a thread
    // frozen in the freezer hierarchy cannot die of the SIGKILL sent while
    // emptying its cpu or cpuset group.
    let thaw_errors: Vec<Vec<io::Error>> = stale.iter().map(|(dir, _)| thaw_tree(dir)).collect();
    for ((dir, name), errors) in stale.iter().zip(thaw_errors) {
        report.push(remove_stale(dir, name, errors));
    }
    // Stale claims without groups (affinity-only runs, or groups already gone).
    if let Ok(entries) = std::fs::read_dir(state) {
        for e in entries.flatten() {
            let file = e.file_name().to_string_lossy().into_owned();
            if let Some(name) = file.strip_suffix(".claim")
                && !alive(state, name)
                && std::fs::remove_file(e.path()).is_ok()
            {
                report.push(format!("removed the claim of dead run {name} ({})", e.path().display()));
            }
        }
    }
    report
}

/// Whether run `name` is alive: its claim is locked by someone, or (the
/// claim gone) the pid in its name still exists.
fn alive(state: &Path, name: &str) -> bool {
    let path = state.join(format!("{name}.claim"));
    match File::open(&path) {
        Ok(f) => flock(&f, libc::LOCK_EX | libc::LOCK_NB).is_err(),
        Err(_) => pid_of(name).is_some_and(|p| Path::new("/proc").join(p.to_string()).exists()),
    }
}

/// Empties (kills what is left) and removes a dead run's groups under
/// `dir`, children first; one line saying what was done.
fn remove_stale(dir: &Path, name: &str, thaw_errors: Vec<io::Error>) -> String {
    let threads = list_threads(dir);
    let killed = kill_threads(&threads, libc::SIGKILL, name);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !list_threads(dir).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut errors = thaw_errors;
    errors.extend(remove_tree(dir));
    let pid = pid_of(name).map(|p| format!("pid {p} is gone")).unwrap_or_else(|| "its claim is stale".into());
    let mut line = format!("removed the groups of dead run {name} at {} ({pid})", dir.display());
    if killed > 0 {
        line.push_str(&format!(", killing {killed} process(es) it left"));
    }
    for e in errors {
        line.push_str(&format!("; {e}"));
    }
    line
}

/// Thaws every group under `dir` (v1 `freezer.state`, v2 `cgroup.freeze`).
fn thaw_tree(dir: &Path) -> Vec<io::Error> {
    let mut errors = Vec::new();
    for d in dirs_depth_first(dir) {
        for (file, value) in [("freezer.state", "THAWED"), ("cgroup.freeze", "0")] {
            let p = d.join(file);
            if p.exists()
                && let Err(e) = cgfs::write(&p, value)
            {
                errors.push(e);
            }
        }
    }
    errors
}

/// Removes the groups under `dir` and `dir` itself, children first.
fn remove_tree(dir: &Path) -> Vec<io::Error> {
    dirs_depth_first(dir).iter().filter_map(|d| cgfs::remove_group(d).err()).collect()
}

/// `dir` and every directory below it, deepest first.
pub(crate) fn dirs_depth_first(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.path().is_dir() {
                out.extend(dirs_depth_first(&e.path()));
            }
        }
    }
    out.push(dir.to_path_buf());
    out
}

/// Every live claim in `state`: (run name, its CPUs, its pid).
/// The live runs' claims in `state` now: (run name, CPUs, pid); none if
/// the folder cannot be read (no run has made it yet).
pub fn claims_now(state: &Path) -> Vec<(String, CpuSet, Option<u32>)> {
    live_claims(state).unwrap_or_default()
}

fn live_claims(state: &Path) -> io::Result<Vec<(String, CpuSet, Option<u32>)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(state).map_err(|e| cgfs::context(e, "cannot list", state))?.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(name) = file.strip_suffix(".claim") else { continue };
        if !alive(state, name) {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let field = |k: &str| text.lines().find_map(|l| l.strip_prefix(k).map(str::trim).map(str::to_string));
        let cpus = field("cpus ").and_then(|c| c.parse().ok()).unwrap_or_default();
        let pid = field("pid ").and_then(|p| p.parse().ok());
        out.push((name.to_string(), cpus, pid));
    }
    Ok(out)
}

/// Takes the lock file `path` (created if missing), waiting if `wait`.
fn lock(path: &Path, wait: bool) -> io::Result<File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| cgfs::context(e, "cannot open the lock", path))?;
    let op = if wait { libc::LOCK_EX } else { libc::LOCK_EX | libc::LOCK_NB };
    flock(&f, op).map_err(|e| cgfs::context(e, "cannot lock", path))?;
    Ok(f)
}

fn flock(file: &File, op: i32) -> io::Result<()> {
    loop {
        // SAFETY: the descriptor is open for the call; flock takes no pointers.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
