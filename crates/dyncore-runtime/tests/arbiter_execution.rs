//! The execution checker on arbiter runs (`arbiter::observe`): a correct
//! run — three CPU-bound workers time-shared on two CPUs, moved and held
//! many times — gives no violation; a thread moved by hand into another
//! CPU's group (outside the cpuset the policy put it in) is caught, named,
//! at the CPU it was found on. Nothing here asserts a time.

mod arbiter_common;

use std::time::Duration;

use arbiter_common::*;
use dyncore_runtime::arbiter::{Arbiter, Ending, Loc, Want, cpu_time_ns};

#[test]
fn a_correct_run_passes_the_execution_check() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let Some(cpus) = cpus(2) else { return };
    if !cgroups_usable() {
        return;
    }
    let mut a = Arbiter::new(Box::new(scheduler(2, false)), config("exec-check", cpus, Want::Auto)).unwrap();
    a.start(&argv(&["work", "100000000", "3"]), spec(1)).unwrap();
    run_for(&mut a, 800);
    let run = a.finish(Ending::Kill);
    let e = run.execution.expect("with cgroups the run is checked");
    eprintln!("{}", e.summary());
    assert!(e.ok(), "{}", e.summary());
    assert!(e.verdict.slices >= 10, "too few sampled slices to mean anything: {}", e.summary());
    assert!(e.verdict.windows >= 3, "{}", e.summary());
    assert!(e.verdict.apply.n > 0, "{}", e.summary());
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
        std::fs::write(d.join("tasks"), worker.tid.to_string()).unwrap();
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
