//! The execution checker on arbiter runs (`arbiter::observe`): a correct
//! run — three CPU-bound workers time-shared on two CPUs, moved and held
//! many times — gives no violation, with cgroups and with affinity only; a
//! thread moved by hand into another CPU's group (outside the cpuset the
//! policy put it in) is caught, named, at the CPU it was found on; a held
//! thread let out of the freezer behind the arbiter's back (the kernel
//! still reports `held` frozen) is caught running; an offline CPU's group
//! that runs a thread is caught by its usage where the kernel accounts it.
//! Each violation is injected into a real run. Nothing here asserts a time.

mod arbiter_common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use arbiter_common::*;
use dyncore_core::policy::{Action, CpuState, Event, Policy, ReconfigId};
use dyncore_core::reconfig::Mode;
use dyncore_core::speed::Duty;
use dyncore_core::{CpuSet, Nanos};
use dyncore_runtime::arbiter::{Arbiter, Ending, Loc, Want, cpu_time_ns};

#[test]
fn a_correct_run_passes_the_execution_check() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let Some(cpus) = cpus(2) else { return };
    if !cgroups_usable() {
        return;
    }
    for want in [Want::Auto, Want::Affinity] {
        let mut a =
            Arbiter::new(Box::new(scheduler(2, false)), config("exec-check", cpus.clone(), want)).unwrap();
        a.start(&argv(&["work", "100000000", "3"]), spec(1)).unwrap();
        run_for(&mut a, 800);
        let run = a.finish(Ending::Kill);
        let e = run.execution.expect("every run is checked");
        eprintln!("{want:?}: {}", e.summary());
        assert!(e.ok(), "{want:?}: {}", e.summary());
        assert!(e.verdict.slices >= 10, "too few sampled slices to mean anything: {}", e.summary());
        assert!(e.verdict.windows >= 3, "{}", e.summary());
        assert!(e.verdict.apply.n > 0, "{}", e.summary());
        assert_eq!(e.held_frozen, want == Want::Auto, "held threads are checked frozen with cgroups only");
    }
}

/// Runs the command's first thread on CPU 0 (so that it starts its
/// worker) and nothing else: every other thread stays held. With
/// `offline`, takes runtime CPU 1 offline (a standalone `Offline`, as
/// park-idle does) at the first tick.
struct HoldsAll {
    offline: bool,
    done: bool,
}

impl Policy for HoldsAll {
    fn handle(&mut self, _now: Nanos, event: &Event, out: &mut Vec<Action>) {
        if let Event::Spawn { thread: 0, .. } = event {
            out.push(Action::SetSpeed { cpu: 0, duty: Duty::FULL });
            out.push(Action::Dispatch { cpu: 0, state: CpuState::Running { thread: 0, object_cpus: 1 } });
        }
        if self.offline && !self.done && matches!(event, Event::Tick { .. }) {
            self.done = true;
            out.push(Action::Offline { id: ReconfigId(1), cpus: CpuSet::from_iter([1]), mode: Mode::Bolt });
        }
    }
}

/// The arbiter for an injection: no discovery pass after the command is
/// found (so nothing puts the moved thread back), the run's groups, and
/// the spinning worker's tid.
fn injection_run(name: &str, offline: bool) -> Option<(Arbiter<HoldsAll>, i32)> {
    let cpus = cpus(2)?;
    if !cgroups_usable() {
        return None;
    }
    let mut cfg = config(name, cpus, Want::Auto);
    cfg.events = false;
    cfg.poll_ns = 60_000 * MS;
    let mut a = Arbiter::new(Box::new(HoldsAll { offline, done: false }), cfg).unwrap();
    a.start(&argv(&["work", "100000000", "1"]), spec(1)).unwrap();
    // The worker appears a moment after the main thread: look again.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let worker = loop {
        a.rescan().unwrap();
        let placed = a.placements();
        if let Some(p) = placed.iter().find(|p| p.tid != p.pid) {
            break p.tid;
        }
        assert!(std::time::Instant::now() < deadline, "the worker thread was never found: {placed:?}");
        std::thread::sleep(Duration::from_millis(5));
    };
    run_for(&mut a, 60);
    Some((a, worker))
}

/// The run's group `leaf` (`held`, `cpu1`) in the hierarchy whose parent
/// is `parent`.
fn group(parent: &Path, leaf: &str) -> PathBuf {
    parent.join(leaf)
}

fn tasks_file(dir: &Path) -> PathBuf {
    if dir.join("tasks").exists() { dir.join("tasks") } else { dir.join("cgroup.threads") }
}

#[test]
fn a_held_thread_let_out_of_the_freezer_is_caught_running() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let Some((mut a, worker)) = injection_run("exec-held-ran", false) else { return };
    // The defect: the worker leaves `held` for CPU 0's group in the
    // freezer's hierarchy only (thawed there; its cpuset and quota stay
    // held's), behind the arbiter's back. `held` still holds the frozen
    // main thread, so the kernel reports it frozen.
    let parents = a.parent_groups();
    let freezer = parents
        .iter()
        .find(|p| p.join("held/freezer.state").exists() || p.join("held/cgroup.freeze").exists())
        .expect("a hierarchy with the freezer");
    std::fs::write(tasks_file(&group(freezer, "cpu0")), worker.to_string()).unwrap();
    let before = cpu_time_ns(worker).unwrap();
    run_for(&mut a, 100);
    let ran = cpu_time_ns(worker).unwrap() - before;
    let run = a.finish(Ending::Kill);
    let e = run.execution.expect("checked");
    eprintln!("{}", e.summary());
    assert!(ran > 10 * MS, "the injection did not let the worker run ({ran} ns)");
    assert!(e.held_ran >= 1 && !e.ok(), "a held thread ran {ran} ns unseen: {}", e.summary());
    assert!(e.summary().contains(&format!("(tid {worker}), held and frozen")), "{}", e.summary());
}

#[test]
fn a_thread_running_in_an_offline_cpu_s_group_is_caught() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let Some((mut a, worker)) = injection_run("exec-offline-ran", true) else { return };
    assert!(a.is_offline(1), "the policy took CPU 1 offline");
    // The defect: the worker moved into offline CPU 1's groups (every
    // hierarchy, cpuset first, so it is migrated there) and that group
    // thawed, behind the arbiter's back.
    let (dirs, _) = a.group_dirs(1);
    let mut dirs = dirs;
    dirs.sort_by_key(|d| !d.to_string_lossy().contains("cpuset"));
    for d in &dirs {
        std::fs::write(tasks_file(d), worker.to_string()).unwrap();
        for (file, thawed) in [("freezer.state", "THAWED"), ("cgroup.freeze", "0")] {
            if d.join(file).exists() {
                std::fs::write(d.join(file), thawed).unwrap();
            }
        }
    }
    let before = cpu_time_ns(worker).unwrap();
    run_for(&mut a, 100);
    let ran = cpu_time_ns(worker).unwrap() - before;
    let run = a.finish(Ending::Kill);
    let e = run.execution.expect("checked");
    eprintln!("{}", e.summary());
    assert!(ran > 10 * MS, "the injection did not let the worker run ({ran} ns)");
    assert!(!e.ok(), "a thread ran {ran} ns on an offline CPU unseen: {}", e.summary());
    // Seen from /proc (the held thread ran) in every case; from the
    // group's own usage where the kernel accounts it (v2, or cpuacct
    // mounted with the run's hierarchies).
    assert!(e.held_ran >= 1, "{}", e.summary());
    match e.usage_observable {
        Some(true) => assert!(e.frozen_grew >= 1, "{}", e.summary()),
        other => {
            eprintln!("the offline group's usage is not observable here ({other:?}): checked from /proc only")
        }
    }
}

#[test]
fn a_thread_moved_by_hand_outside_its_cpuset_is_caught() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let Some(cpus) = cpus(2) else { return };
    if !cgroups_usable() {
        return;
    }
    // One worker (and its main thread, asleep in join): one CPU runs it,
    // the other is idle.
    let mut a = Arbiter::new(Box::new(scheduler(2, false)), config("exec-defect", cpus, Want::Auto)).unwrap();
    a.start(&argv(&["work", "100000000", "1"]), spec(1)).unwrap();
    run_for(&mut a, 200);
    // The worker: placed on a CPU, and running (its CPU time grows while
    // the arbiter is paused).
    let placed: Vec<_> = a.placements().into_iter().filter(|p| matches!(p.loc, Some(Loc::Cpu(_)))).collect();
    let before: Vec<_> = placed.iter().map(|p| cpu_time_ns(p.tid)).collect();
    std::thread::sleep(Duration::from_millis(30));
    let worker = placed
        .iter()
        .zip(&before)
        .find(|(p, b)| cpu_time_ns(p.tid) > **b)
        .map(|(p, _)| p.clone())
        .expect("a placed thread runs");
    let Some(Loc::Cpu(c)) = worker.loc else { unreachable!() };
    let other = 1 - c;
    // The defect: into the other CPU's group, every hierarchy (cpuset
    // first, so it is migrated there; freezer last).
    let (dirs, _) = a.group_dirs(other);
    let mut dirs = dirs;
    dirs.sort_by_key(|d| !d.to_string_lossy().contains("cpuset"));
    for d in &dirs {
        std::fs::write(tasks_file(d), worker.tid.to_string()).unwrap();
    }
    run_for(&mut a, 40);
    let run = a.finish(Ending::Kill);
    let e = run.execution.expect("with cgroups the run is checked");
    eprintln!("{}", e.summary());
    assert!(!e.ok(), "the moved thread was not caught: {}", e.summary());
    let v = e.verdict.violations.first().expect("a violation is kept");
    assert_eq!(v.thread, Some(worker.thread), "{}", e.summary());
    assert_eq!(v.cpu, other, "{}", e.summary());
}
