//! The kernel's own ways of taking a CPU away from work, measured on the
//! same machine in the same run: sysfs CPU hotplug, cgroup cpuset narrowing
//! and widening, and `sched_setaffinity` migration of a running thread.
//! Each either measures or says why it was skipped; none fakes a figure.
//!
//! Hotplug takes a real CPU offline, so it runs only when asked
//! (`--allow-hotplug`), and every CPU it offlines is restored: by a guard
//! on every return path (panics included), and by a Ctrl-C handler that
//! restores them before the process exits.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use dyncore_core::{CpuId, CpuSet};
use dyncore_runtime::affinity::{current_cpu, set_current_thread_affinity};

use crate::{RoundSamples, ns};

/// What one round of a baseline measured: the CPU taken away (offline,
/// narrowed, migrated off) and given back, and a description naming the
/// CPUs and mechanism used.
struct Round {
    what: String,
    away: Vec<u64>,
    back: Vec<u64>,
}

/// Which baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Affinity,
    Cpuset,
    Hotplug,
}

/// One baseline over the rounds: what it measured, or why it was skipped.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Baseline {
    pub kind: Kind,
    pub what: String,
    pub away_label: &'static str,
    pub back_label: &'static str,
    #[serde(skip)]
    pub away: RoundSamples,
    #[serde(skip)]
    pub back: RoundSamples,
    pub skipped: Option<String>,
}

impl Baseline {
    /// The three baselines; hotplug is skipped unless `allow_hotplug`.
    pub fn all(allow_hotplug: bool) -> Vec<Baseline> {
        let b = |kind, what: &str, labels: (&'static str, &'static str)| Baseline {
            kind,
            what: what.into(),
            away_label: labels.0,
            back_label: labels.1,
            away: RoundSamples::default(),
            back: RoundSamples::default(),
            skipped: None,
        };
        let mut hotplug = b(Kind::Hotplug, HOTPLUG, ("offline", "online"));
        if !allow_hotplug {
            hotplug.skipped =
                Some("not requested: pass --allow-hotplug (it takes a real CPU offline for a moment)".into());
        }
        vec![
            b(Kind::Affinity, AFFINITY, ("migrate", "–")),
            b(Kind::Cpuset, CPUSET, ("narrow", "widen")),
            hotplug,
        ]
    }

    pub fn key(&self) -> &'static str {
        match self.kind {
            Kind::Affinity => "affinity",
            Kind::Cpuset => "cpuset",
            Kind::Hotplug => "hotplug",
        }
    }

    /// One round of `repeats` cycles. A baseline that fails is skipped from
    /// then on with the reason, and what its earlier rounds measured is
    /// dropped (never reported as a figure of a run that did not finish).
    pub fn measure_round(&mut self, allowed: &CpuSet, repeats: usize, round: usize) {
        if self.skipped.is_some() {
            return;
        }
        let r = match self.kind {
            Kind::Affinity => affinity(allowed, repeats),
            Kind::Cpuset => cpuset(allowed, repeats),
            Kind::Hotplug => hotplug(allowed, repeats),
        };
        match r {
            Ok(r) => {
                self.what = r.what;
                self.away.push(r.away);
                self.back.push(r.back);
            }
            Err(why) if round == 0 => self.skipped = Some(why),
            Err(why) => {
                self.skipped =
                    Some(format!("failed in round {}: {why} (earlier rounds discarded)", round + 1));
                self.away = RoundSamples::default();
                self.back = RoundSamples::default();
            }
        }
    }
}

// ---------------------------------------------------------------- hotplug

const HOTPLUG: &str = "sysfs CPU hotplug (write 0/1 to /sys/devices/system/cpu/cpuN/online)";

/// Real CPUs this process has taken offline and not yet restored.
static OFFLINED: Mutex<Vec<CpuId>> = Mutex::new(Vec::new());

fn online_file(cpu: CpuId) -> PathBuf {
    PathBuf::from(format!("/sys/devices/system/cpu/cpu{cpu}/online"))
}

fn write_online(cpu: CpuId, on: bool) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().write(true).open(online_file(cpu))?;
    f.write_all(if on { b"1" } else { b"0" })
}

fn read_online(cpu: CpuId) -> Option<bool> {
    std::fs::read_to_string(online_file(cpu)).ok().map(|s| s.trim() == "1")
}

/// Brings every CPU in [`OFFLINED`] back online (the guard's and the
/// signal handlers' job).
fn restore_all() {
    let mut list = OFFLINED.lock().unwrap_or_else(|p| p.into_inner());
    for cpu in list.drain(..) {
        if let Err(e) = write_online(cpu, true) {
            eprintln!(
                "could not bring real CPU {cpu} back online: {e}; do it by hand: echo 1 > {}",
                online_file(cpu).display()
            );
        }
    }
    note_offlined(&list);
}

/// Where the CPUs a bench has taken offline are noted while they are
/// offline, so that a run killed by SIGKILL (no handler runs) is repaired
/// by the next one. `/run` is emptied at boot, when every CPU comes back.
fn marker() -> PathBuf {
    let run = Path::new("/run");
    if run.is_dir() {
        run.join("dyncore-offlined-cpus")
    } else {
        std::env::temp_dir().join("dyncore-offlined-cpus")
    }
}

/// Notes `cpus` as offline by this bench (none: removes the note).
fn note_offlined(cpus: &[CpuId]) {
    let m = marker();
    if let Err(e) = note_at(&m, cpus) {
        eprintln!("warning: could not update {} ({e}); a killed run may leave a CPU offline", m.display());
    }
}

fn note_at(m: &Path, cpus: &[CpuId]) -> std::io::Result<()> {
    if cpus.is_empty() {
        std::fs::remove_file(m)
            .or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(e) })
    } else {
        std::fs::write(m, cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" "))
    }
}

/// The CPUs noted in `m` (none if there is no note).
fn noted_at(m: &Path) -> Vec<CpuId> {
    let text = std::fs::read_to_string(m).unwrap_or_default();
    text.split_whitespace().filter_map(|w| w.parse::<CpuId>().ok()).collect()
}

/// Brings back online the CPUs that an earlier bench noted as offline and
/// never restored (it was killed), saying which.
pub(super) fn recover_leftovers() {
    let m = marker();
    for cpu in noted_at(&m) {
        if read_online(cpu) == Some(false) {
            match write_online(cpu, true) {
                Ok(()) => eprintln!(
                    "note: an earlier bench was killed with real CPU {cpu} offline ({}); brought it back online",
                    m.display()
                ),
                Err(e) => eprintln!("could not bring real CPU {cpu} back online: {e}"),
            }
        }
    }
    note_offlined(&[]);
}

/// Installs, once per process, handlers for SIGINT, SIGTERM and SIGHUP
/// that bring every CPU this bench took offline back online and exit with
/// 128 + the signal (130, 143, 129): a bench stopped by Ctrl-C, `timeout`
/// or a service manager leaves no CPU offline. The handlers only raise a
/// flag (async-signal-safe); a watcher thread does the sysfs writes.
fn install_signal_handlers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| match dyncore_runtime::arbiter::Signals::install() {
        Ok(signals) => {
            let (stop, signal) = (signals.stop_flag(), signals.signal_flag());
            // The handlers stay for the process's life.
            std::mem::forget(signals);
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Acquire) {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                let sig = signal.load(std::sync::atomic::Ordering::Acquire);
                eprintln!(
                    "\ninterrupted by {}: bringing offlined CPUs back online",
                    dyncore_runtime::arbiter::interrupt_name(sig)
                );
                restore_all();
                std::process::exit(i32::from(dyncore_runtime::arbiter::signal_status(sig)));
            });
        }
        Err(e) => {
            eprintln!("warning: no signal handlers ({e}); an interrupted run may leave a CPU offline")
        }
    });
}

/// While alive, `cpu` is restored to online on drop.
struct HotplugGuard {
    cpu: CpuId,
}

impl HotplugGuard {
    fn offline(&self) -> std::io::Result<()> {
        {
            let mut list = OFFLINED.lock().unwrap_or_else(|p| p.into_inner());
            list.push(self.cpu);
            // Noted before the CPU goes, so that no moment is unrecorded.
            note_offlined(&list);
        }
        write_online(self.cpu, false)
    }

    fn online(&self) -> std::io::Result<()> {
        write_online(self.cpu, true)?;
        let mut list = OFFLINED.lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|&c| c != self.cpu);
        note_offlined(&list);
        Ok(())
    }
}

impl Drop for HotplugGuard {
    fn drop(&mut self) {
        restore_all();
    }
}

/// Offline then online of one real CPU other than 0, `repeats` times.
fn hotplug(allowed: &CpuSet, repeats: usize) -> Result<Round, String> {
    let mut others: Vec<CpuId> = allowed.iter().filter(|&c| c != 0).collect();
    others.reverse();
    let candidate = others.into_iter().find(|&c| {
        read_online(c) == Some(true) && std::fs::OpenOptions::new().write(true).open(online_file(c)).is_ok()
    });
    let Some(cpu) = candidate else {
        return Err(format!(
            "no online CPU other than 0 among the allowed ({allowed}) has a writable {} (needs root and a kernel with CPU hotplug)",
            "/sys/devices/system/cpu/cpuN/online"
        ));
    };
    install_signal_handlers();
    let guard = HotplugGuard { cpu };
    let (mut away, mut back) = (Vec::new(), Vec::new());
    for i in 0..repeats {
        let t0 = Instant::now();
        if let Err(e) = guard.offline() {
            drop(guard);
            return Err(format!("writing 0 to {} failed: {e}", online_file(cpu).display()));
        }
        away.push(ns(t0.elapsed()));
        let t0 = Instant::now();
        if let Err(e) = guard.online() {
            drop(guard);
            return Err(format!("writing 1 to {} failed (repeat {i}): {e}", online_file(cpu).display()));
        }
        back.push(ns(t0.elapsed()));
    }
    drop(guard);
    let what = format!("{HOTPLUG}, real CPU {cpu}");
    if read_online(cpu) != Some(true) {
        eprintln!("warning: real CPU {cpu} does not read online after the hotplug baseline");
    }
    Ok(Round { what, away, back })
}

// ---------------------------------------------------------------- cpusets

const CPUSET: &str = "cgroup cpuset: narrow a spinning task's cpuset to one CPU, widen it back";

/// Which cgroup hierarchy holds the cpuset controller.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cgroup {
    /// cgroup v1: the cpuset hierarchy's mount point.
    V1(PathBuf),
    /// cgroup v2: the unified hierarchy's mount point.
    V2(PathBuf),
}

fn detect_cgroup() -> Result<Cgroup, String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts")
        .map_err(|e| format!("reading /proc/self/mounts: {e}"))?;
    let mut v2 = None;
    for l in mounts.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 4 {
            continue;
        }
        match f[2] {
            "cgroup" if f[3].split(',').any(|o| o == "cpuset") => return Ok(Cgroup::V1(PathBuf::from(f[1]))),
            "cgroup2" => v2 = v2.or(Some(PathBuf::from(f[1]))),
            _ => {}
        }
    }
    match v2 {
        Some(p) => {
            let ctl = std::fs::read_to_string(p.join("cgroup.controllers")).unwrap_or_default();
            if ctl.split_whitespace().any(|c| c == "cpuset") {
                Ok(Cgroup::V2(p))
            } else {
                Err(format!("cgroup v2 at {} does not offer the cpuset controller", p.display()))
            }
        }
        None => Err("no cgroup hierarchy with the cpuset controller is mounted".into()),
    }
}

/// A temporary cgroup with a spinning child process in it; removed on drop.
struct TempCpuset {
    dir: PathBuf,
    child: std::process::Child,
}

impl TempCpuset {
    fn create(cg: &Cgroup, cpus: &CpuSet) -> Result<TempCpuset, String> {
        let (root, v1) = match cg {
            Cgroup::V1(p) => (p.clone(), true),
            Cgroup::V2(p) => (p.clone(), false),
        };
        let w = |p: &Path, s: &str| {
            std::fs::write(p, s).map_err(|e| format!("writing {s:?} to {}: {e}", p.display()))
        };
        if !v1 {
            // The controller must be enabled for the root's children.
            let sub = root.join("cgroup.subtree_control");
            let on = std::fs::read_to_string(&sub).unwrap_or_default();
            if !on.split_whitespace().any(|c| c == "cpuset") {
                w(&sub, "+cpuset")?;
            }
        }
        let dir = root.join(format!("dyncore-bench-{}", std::process::id()));
        std::fs::create_dir(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .stdin(std::process::Stdio::null())
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                return Err(format!("starting a spinning `sh` child: {e}"));
            }
        };
        let t = TempCpuset { dir, child };
        if v1 {
            let mems = std::fs::read_to_string(root.join("cpuset.mems"))
                .map_err(|e| format!("reading cpuset.mems: {e}"))?;
            w(&t.dir.join("cpuset.mems"), mems.trim())?;
        }
        w(&t.dir.join("cpuset.cpus"), &cpus.to_string())?;
        w(&t.dir.join("cgroup.procs"), &t.child.id().to_string())?;
        Ok(t)
    }

    fn set_cpus(&self, cpus: &str) -> std::io::Result<()> {
        std::fs::write(self.dir.join("cpuset.cpus"), cpus)
    }
}

impl Drop for TempCpuset {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The cgroup is empty once the child is reaped; give the kernel a
        // moment to notice before removing it.
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        eprintln!("warning: could not remove the temporary cgroup {}", self.dir.display());
    }
}

/// Narrows a spinning process's cpuset to one CPU (the kernel migrates it
/// before the write returns) and widens it back, `repeats` times.
fn cpuset(allowed: &CpuSet, repeats: usize) -> Result<Round, String> {
    if allowed.len() < 2 {
        return Err(format!("needs two CPUs, only {allowed} allowed"));
    }
    let cg = detect_cgroup()?;
    let t = TempCpuset::create(&cg, allowed).map_err(|e| format!("{cg:?}: {e}"))?;
    let cpus: Vec<CpuId> = allowed.iter().collect();
    let all = allowed.to_string();
    let (mut away, mut back) = (Vec::new(), Vec::new());
    for i in 0..repeats {
        let one = cpus[i % cpus.len()].to_string();
        let t0 = Instant::now();
        if let Err(e) = t.set_cpus(&one) {
            return Err(format!("{cg:?}: narrowing to {one}: {e}"));
        }
        away.push(ns(t0.elapsed()));
        let t0 = Instant::now();
        if let Err(e) = t.set_cpus(&all) {
            return Err(format!("{cg:?}: widening to {all}: {e}"));
        }
        back.push(ns(t0.elapsed()));
    }
    let version = match cg {
        Cgroup::V1(_) => "v1",
        Cgroup::V2(_) => "v2",
    };
    Ok(Round { what: format!("{CPUSET} (cgroup {version})"), away, back })
}

// ---------------------------------------------------------------- affinity

const AFFINITY: &str = "sched_setaffinity: move a spinning thread to another CPU, until it runs there";

/// Moves a spinning thread between two CPUs with `sched_setaffinity`,
/// timing each move until the thread reports running on the new CPU.
fn affinity(allowed: &CpuSet, repeats: usize) -> Result<Round, String> {
    let cpus: Vec<CpuId> = allowed.iter().collect();
    if cpus.len() < 2 {
        return Err(format!("needs two CPUs, only {allowed} allowed"));
    }
    let (a, b) = (cpus[0], cpus[cpus.len() - 1]);
    let stop = Arc::new(AtomicBool::new(false));
    let on = Arc::new(AtomicUsize::new(usize::MAX));
    let tid = Arc::new(AtomicUsize::new(0));
    let spinner = {
        let (stop, on, tid) = (stop.clone(), on.clone(), tid.clone());
        std::thread::spawn(move || {
            tid.store(rustix::thread::gettid().as_raw_nonzero().get() as usize, Ordering::Release);
            while !stop.load(Ordering::Relaxed) {
                on.store(current_cpu(), Ordering::Release);
                std::hint::spin_loop();
            }
        })
    };
    let result = (|| -> Result<Vec<u64>, String> {
        while tid.load(Ordering::Acquire) == 0 {
            std::thread::yield_now();
        }
        let pid = rustix::process::Pid::from_raw(tid.load(Ordering::Acquire) as i32).ok_or("no thread id")?;
        let mut samples = Vec::with_capacity(repeats);
        for i in 0..=repeats {
            let target = if i % 2 == 0 { a } else { b };
            let mut raw = rustix::thread::CpuSet::new();
            raw.set(target);
            let t0 = Instant::now();
            rustix::thread::sched_setaffinity(Some(pid), &raw)
                .map_err(|e| format!("sched_setaffinity: {e}"))?;
            while on.load(Ordering::Acquire) != target {
                std::thread::yield_now();
                if t0.elapsed().as_secs() > 5 {
                    return Err(format!("the thread never ran on CPU {target}"));
                }
            }
            // The first move only places the thread.
            if i > 0 {
                samples.push(ns(t0.elapsed()));
            }
        }
        Ok(samples)
    })();
    stop.store(true, Ordering::Relaxed);
    let _ = spinner.join();
    Ok(Round { what: format!("{AFFINITY} (CPUs {a} and {b})"), away: result?, back: Vec::new() })
}

/// Lets the measuring thread run anywhere it is allowed (baselines move
/// other threads; the measuring thread must not be pinned to one of them).
pub fn unpin(allowed: &CpuSet) {
    let _ = set_current_thread_affinity(allowed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offlined_cpus_are_noted_until_restored() {
        let d = tempfile::tempdir().unwrap();
        let m = d.path().join("offlined");
        assert!(noted_at(&m).is_empty());
        note_at(&m, &[1, 3]).unwrap();
        assert_eq!(noted_at(&m), [1, 3]);
        note_at(&m, &[3]).unwrap();
        assert_eq!(noted_at(&m), [3]);
        note_at(&m, &[]).unwrap();
        assert!(!m.exists());
        note_at(&m, &[]).unwrap();
    }

    #[test]
    fn hotplug_is_skipped_unless_asked() {
        let mut b = Baseline::all(false).pop().unwrap();
        assert_eq!(b.kind, Kind::Hotplug);
        b.measure_round(&CpuSet::range(0, 2), 3, 0);
        assert!(b.skipped.as_deref().is_some_and(|s| s.contains("--allow-hotplug")), "{b:?}");
        assert!(b.away.spread().is_none() && b.back.spread().is_none());
    }

    #[test]
    fn a_baseline_that_cannot_run_is_skipped_with_the_reason() {
        let mut b = Baseline::all(false).remove(0);
        assert_eq!(b.kind, Kind::Affinity);
        b.measure_round(&CpuSet::single(0), 3, 0);
        assert!(b.skipped.as_deref().is_some_and(|s| s.contains("needs two CPUs")), "{b:?}");
    }
}
