use super::*;
use crate::CpuSet;
use crate::policy::ReconfigId;
use crate::reconfig::Mode;

fn run(thread: ThreadId) -> CpuState {
    CpuState::Running { thread, object_cpus: 1 }
}

fn dispatch(cpu: CpuId, state: CpuState) -> Action {
    Action::Dispatch { cpu, state }
}

fn slice(thread: ThreadId, cpu: CpuId, start_ns: Nanos, last_start_ns: Nanos, end_ns: Nanos) -> ExecSlice {
    ExecSlice { thread, cpu, start_ns, last_start_ns, end_ns, steps: 3, os_cpus: 0 }
}

/// Thread 0 on CPU 0 from 0, moved to CPU 1 at 100 (applied at 105: CPU 0
/// idle, CPU 1 runs it), every thread stopped at 300.
fn moved() -> ExecutionChecker {
    let mut c = ExecutionChecker::new();
    c.action(0, 2, &dispatch(0, run(0)));
    c.action(100, 104, &dispatch(0, CpuState::Idle));
    c.action(100, 105, &dispatch(1, run(0)));
    c
}

fn exec(slices: Vec<ExecSlice>) -> Execution {
    Execution { slices, ..Execution::default() }
}

#[test]
fn a_backend_that_did_what_it_was_told_passes_with_its_delays() {
    // On CPU 0: a first step at 10, a last one started at 103 (before the
    // move was applied at 104) and ended at 110; on CPU 1 from 106.
    let v = moved().finish(300, &exec(vec![slice(0, 0, 10, 103, 110), slice(0, 1, 106, 280, 290)]));
    assert!(v.ok(), "{}", v.summary());
    assert_eq!((v.slices, v.windows, v.never_ran), (2, 2, 0));
    assert_eq!((v.start.n, v.start.max_ns), (2, 10), "from 0 to 10 on CPU 0, 100 to 106 on CPU 1");
    // Ran 10 ns past the end of its window on CPU 0: reported, allowed.
    assert_eq!((v.stop.n, v.stop.max_ns), (1, 10));
    assert_eq!((v.apply.n, v.apply.max_ns), (3, 5));
    assert!(v.summary().contains("0 violation(s)"), "{}", v.summary());
}

#[test]
fn a_first_step_between_the_end_of_a_window_and_its_application_belongs_to_it() {
    // The placement's first step started at 102: after the move was
    // decided (100), before it was applied (104).
    let v = moved().finish(300, &exec(vec![slice(0, 0, 102, 102, 109)]));
    assert!(v.ok(), "{}", v.summary());
    assert_eq!(v.never_ran, 1, "CPU 1's window had no slice");
}

#[test]
fn a_step_started_after_the_end_was_applied_is_caught_at_its_time() {
    let v = moved().finish(300, &exec(vec![slice(0, 0, 10, 150, 160)]));
    assert_eq!(v.violation_count, 1, "{}", v.summary());
    let x = &v.violations[0];
    assert_eq!((x.kind, x.cpu, x.thread, x.at_ns), (ViolationKind::OutsideDispatch, 0, Some(0), 150));
    assert!(x.message.contains("while dispatched idle since 100 ns"), "{}", x.message);
}

/// Thread 0 on CPU 0 from 0, taken off at 100 but seen off only at 200
/// (a backend that applies a removal when the kernel shows it done); CPU
/// 0 idle from 100, given to thread 1 at 110, applied at once (115).
fn removed_late() -> ExecutionChecker {
    let mut c = ExecutionChecker::new();
    c.action(0, 2, &dispatch(0, run(0)));
    c.action(100, 200, &dispatch(0, CpuState::Idle));
    c.action(110, 115, &dispatch(0, run(1)));
    c
}

#[test]
fn a_removal_applied_after_a_later_dispatch_still_holds_its_late_step() {
    // Thread 0 starts on CPU 0 at 150: after thread 1's window opened and
    // was applied (115), before the removal of thread 0 was (200). Within
    // the backend's stated bound: not a violation, whatever lies between.
    let ok = removed_late().finish(300, &exec(vec![slice(0, 0, 150, 150, 160), slice(1, 0, 161, 250, 260)]));
    assert!(ok.ok(), "{}", ok.summary());
    // At 210, after the removal was applied: caught, at its time.
    let v = removed_late().finish(300, &exec(vec![slice(0, 0, 210, 210, 220)]));
    assert_eq!(v.violation_count, 1, "{}", v.summary());
    assert_eq!((v.violations[0].cpu, v.violations[0].thread, v.violations[0].at_ns), (0, Some(0), 210));
}

#[test]
fn a_thread_on_a_cpu_never_dispatched_to_it_is_caught() {
    let v = moved().finish(300, &exec(vec![slice(0, 2, 50, 60, 70), slice(1, 1, 120, 130, 140)]));
    assert_eq!(v.violation_count, 2, "{}", v.summary());
    assert!(v.violations[0].message.contains("idle since 0 ns (the start)"), "{}", v.violations[0].message);
    assert!(
        v.violations[1].message.contains("while dispatched running thread 0"),
        "{}",
        v.violations[1].message
    );
}

#[test]
fn a_borrowed_cpu_that_runs_is_caught() {
    let mut c = moved();
    c.action(200, 201, &dispatch(0, CpuState::Borrowed { by: 0 }));
    let v = c.finish(300, &exec(vec![slice(1, 0, 220, 230, 240)]));
    assert_eq!(v.violation_count, 1, "{}", v.summary());
    assert_eq!(v.violations[0].kind, ViolationKind::OnBorrowed);
    assert!(v.violations[0].message.contains("borrowed by thread 0"), "{}", v.violations[0].message);
}

fn offline(id: u64, cpu: CpuId) -> Action {
    Action::Offline { id: ReconfigId(id), cpus: CpuSet::single(cpu), mode: Mode::Bolt }
}

fn online(id: u64, cpu: CpuId) -> Action {
    Action::Online { id: ReconfigId(id), cpus: CpuSet::single(cpu), mode: Mode::Bolt }
}

fn change(cpu: CpuId, at_ns: Nanos, online: bool) -> CpuChange {
    CpuChange { cpu, at_ns, online }
}

/// CPU 1 borrowed (offline) from 10 (applied at 12) to 100 (applied at
/// 130), then running thread 0; with `broken`, a dispatch of thread 3 on it
/// at 50, while it is offline.
fn borrowed_spell(broken: bool) -> ExecutionChecker {
    let mut c = ExecutionChecker::new();
    c.action(10, 12, &offline(1, 1));
    c.action(10, 12, &dispatch(1, CpuState::Borrowed { by: 0 }));
    if broken {
        c.action(50, 50, &dispatch(1, run(3)));
    }
    c.action(100, 130, &online(2, 1));
    c.action(100, 130, &dispatch(1, run(0)));
    c
}

#[test]
fn offline_and_online_take_effect_and_nothing_runs_between() {
    let changes = vec![change(1, 11, false), change(1, 125, true)];
    let good = Execution {
        slices: vec![slice(0, 1, 131, 200, 210)],
        changes: changes.clone(),
        ..Execution::default()
    };
    let v = borrowed_spell(false).finish(300, &good);
    assert!(v.ok(), "{}", v.summary());
    assert_eq!((v.offline.n, v.offline.p50_ns, v.online.n, v.online.p50_ns), (1, 1, 1, 25));

    // Running while offline, even where a (broken) dispatch says to run.
    let bad =
        Execution { slices: vec![slice(3, 1, 60, 70, 80)], changes: changes.clone(), ..Execution::default() };
    let v = borrowed_spell(true).finish(300, &bad);
    let kinds: Vec<ViolationKind> = v.violations.iter().map(|x| x.kind).collect();
    assert_eq!(kinds, [ViolationKind::WhileOffline; 2], "{}", v.summary());
    assert!(v.violations.iter().any(|x| x.message.contains("between its Offline and Online")));
    assert!(v.violations.iter().any(|x| x.message.contains("backend's record says it was offline")));

    // The record's own offline spell, where the actions say nothing.
    let mut c = ExecutionChecker::new();
    c.action(0, 0, &dispatch(1, run(0)));
    let only = Execution {
        slices: vec![slice(0, 1, 5, 50, 60)],
        changes: changes[..1].to_vec(),
        ..Execution::default()
    };
    let v = c.finish(300, &only);
    assert_eq!(v.violation_count, 2, "{}", v.summary());
    assert!(v.violations.iter().any(|x| x.message.contains("with no action asking for it")));
    assert!(v.violations.iter().any(|x| x.kind == ViolationKind::WhileOffline));
}

#[test]
fn an_offline_with_no_effect_or_the_wrong_one_is_caught() {
    let mut c = ExecutionChecker::new();
    c.action(10, 12, &offline(1, 1));
    let v = c.clone().finish(300, &Execution::default());
    assert!(v.violations[0].message.contains("had no effect"), "{}", v.summary());
    let v = c.finish(300, &Execution { changes: vec![change(1, 20, true)], ..Execution::default() });
    assert!(v.violations[0].message.contains("answered by the record with online"), "{}", v.summary());
}

#[test]
fn violations_are_counted_all_and_kept_first_and_lost_entries_are_said() {
    let slices = (0..50).map(|k| slice(7, 0, 1000 + k, 1000 + k, 1001 + k)).collect();
    let v = moved().finish(5000, &Execution { slices, lost: 4, ..Execution::default() });
    assert_eq!((v.violation_count, v.violations.len(), v.lost), (50, KEPT_VIOLATIONS, 4));
    assert!(v.violations.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
    assert!(v.summary().contains("lost 4"), "{}", v.summary());
}

#[test]
fn delays_are_nearest_rank_quantiles() {
    assert_eq!(Delays::of(Vec::new()), Delays::default());
    let d = Delays::of((1..=100).rev().collect());
    assert_eq!((d.n, d.p50_ns, d.p99_ns, d.max_ns), (100, 51, 99, 100));
}

#[test]
fn a_trace_checks_like_a_live_feed_with_actions_applied_at_once() {
    let actions = vec![(0, dispatch(0, run(0))), (100, dispatch(0, CpuState::Idle))];
    assert!(check_trace(&actions, 200, &exec(vec![slice(0, 0, 0, 100, 100)])).ok());
    let late = check_trace(&actions, 200, &exec(vec![slice(0, 0, 0, 101, 101)]));
    assert_eq!(late.violations[0].at_ns, 101);
}

#[test]
fn a_run_the_kernel_forced_is_reported_apart_never_dropped() {
    // Thread 0 left CPU 0 at 100 (applied at 104); the kernel ran it there
    // again at 150 (its migration disabled): not the backend's violation,
    // but reported with its time; a forced run inside its window is fine.
    let e = Execution {
        slices: vec![slice(0, 1, 106, 280, 290)],
        forced: vec![slice(0, 0, 150, 150, 160), slice(0, 1, 120, 120, 125)],
        ..Execution::default()
    };
    let v = moved().finish(300, &e);
    assert!(v.ok(), "{}", v.summary());
    assert_eq!((v.forced, v.forced_outside), (2, 1));
    let x = &v.forced_runs[0];
    assert_eq!((x.kind, x.cpu, x.thread, x.at_ns), (ViolationKind::OutsideDispatch, 0, Some(0), 150));
    assert!(v.summary().contains("2 run(s) the kernel kept on their CPU"), "{}", v.summary());
    // The same run, had the backend placed it, is a violation.
    let placed = Execution { slices: [e.slices, e.forced].concat(), ..Execution::default() };
    let v = moved().finish(300, &placed);
    assert_eq!((v.violation_count, v.forced, v.forced_outside), (1, 0, 0), "{}", v.summary());
}

#[test]
fn a_forced_run_on_an_offline_cpu_is_reported_apart() {
    let mut c = ExecutionChecker::new();
    c.action(0, 0, &dispatch(1, run(0)));
    c.action(50, 50, &dispatch(1, CpuState::Idle));
    c.action(50, 55, &offline(1, 1));
    let e = Execution {
        slices: vec![slice(0, 1, 1, 40, 45)],
        changes: vec![change(1, 55, false)],
        forced: vec![slice(0, 1, 60, 60, 70)],
        ..Execution::default()
    };
    let v = c.finish(300, &e);
    assert!(v.ok(), "{}", v.summary());
    // Outside its window, between the Offline and the end, and while the
    // record says CPU 1 was offline: three breaks, all reported apart.
    assert_eq!((v.forced, v.forced_outside), (1, 3), "{:?}", v.forced_runs);
    assert!(v.forced_runs.iter().any(|x| x.kind == ViolationKind::WhileOffline));
}
