//! Behaviour tests of runtime CPUs: placement, remote calls through
//! proxies, grace periods and invalidations across offline/online, both
//! modes' critical and deferred work, bad input and rollback (the stress
//! test is in `stress_tests.rs`, robustness in `robust_tests.rs`). No test
//! asserts a time: waits are "eventually, or fail with a dump of every
//! CPU".

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dyncore_core::reconfig::{Direction, PlanError, Step};

use super::*;

/// How long "eventually" may take before a test fails with a dump. Generous:
/// these tests run many runtime CPUs on two loaded real ones.
const EVENTUALLY: Duration = Duration::from_secs(30);

pub(super) fn config(n: usize) -> RuntimeConfig {
    let real = crate::affinity::allowed_cpus().expect("the affinity mask is readable");
    let mut cfg = RuntimeConfig::over(&real, n);
    cfg.watchdog_period = Duration::from_millis(5);
    // These tests are not about stalls or deadlines (`robust_tests.rs` is):
    // on a loaded machine a worker may go unscheduled for a long time, and
    // that must not fail them. A real hang still fails, at `EVENTUALLY` or
    // by a deadlock watchdog.
    cfg.stall_after = Duration::from_secs(30);
    cfg.wait_deadline = Duration::from_secs(60);
    cfg
}

fn runtime(n: usize) -> Runtime {
    Runtime::new(config(n)).expect("a runtime over the allowed CPUs")
}

pub(super) fn set(s: &str) -> CpuSet {
    s.parse().expect("a CPU list")
}

/// Takes `cpus` offline and checks that exactly they changed.
fn off(rt: &Runtime, cpus: &str, mode: Mode) {
    let r = rt.offline(&set(cpus), mode).unwrap_or_else(|e| panic!("offline {cpus} ({mode}): {e}"));
    assert_eq!(r.changed(), &set(cpus), "offline {cpus} ({mode})");
}

/// Brings `cpus` online and checks that exactly they changed.
fn on(rt: &Runtime, cpus: &str, mode: Mode) {
    let r = rt.online(&set(cpus), mode).unwrap_or_else(|e| panic!("online {cpus} ({mode}): {e}"));
    assert_eq!(r.changed(), &set(cpus), "online {cpus} ({mode})");
}

/// Polls `cond` until true; fails with every CPU's state if it never is.
pub(super) fn eventually(rt: &Runtime, what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < EVENTUALLY, "never happened: {what}\n{}", rt.dump());
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// A task of `steps` steps that counts into `done` when it finishes.
fn counting_task(steps: u32, done: Arc<AtomicU32>) -> impl Task {
    let mut left = steps;
    move |_: &mut Ctx<'_>| {
        left -= 1;
        if left == 0 {
            done.fetch_add(1, Ordering::SeqCst);
            TaskPoll::Ready
        } else {
            TaskPoll::Pending
        }
    }
}

pub(super) fn assert_memory_accounted(rt: &Runtime) {
    let m = rt.memory();
    assert_eq!(m.blocks_allocated, 0, "leaked blocks: {m:?}");
    assert_eq!(m.double_frees, 0, "{m:?}");
    assert_eq!(m.caches_unaccounted, 0, "{m:?}");
    assert_eq!(m.blocks_free + m.blocks_cached, m.blocks_total, "{m:?}");
}

#[test]
fn smoke_tasks_run_to_completion_and_memory_is_accounted() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(4);
    let done = Arc::new(AtomicU32::new(0));
    for i in 0..40u32 {
        let done = done.clone();
        let mut held: Option<Block> = None;
        let mut left = 1 + i % 5;
        rt.spawn(move |cx: &mut Ctx<'_>| {
            match held.take() {
                None => {
                    let mut b = cx.alloc().expect("a block");
                    cx.bytes(&mut b)[0] = i as u8;
                    held = Some(b);
                }
                Some(mut b) => {
                    assert_eq!(cx.bytes(&mut b)[0], i as u8, "block contents survived");
                    cx.free(b).expect("free once");
                }
            }
            left -= 1;
            if left == 0 {
                if let Some(b) = held.take() {
                    cx.free(b).expect("free once");
                }
                done.fetch_add(1, Ordering::SeqCst);
                TaskPoll::Ready
            } else {
                TaskPoll::Pending
            }
        });
    }
    eventually(&rt, "40 tasks done", || done.load(Ordering::SeqCst) == 40);
    eventually(&rt, "stats count 40 tasks", || rt.stats().tasks_done == 40);
    assert_memory_accounted(&rt);
    assert_eq!(rt.check(), Ok(()));
}

#[test]
fn call_on_an_offline_cpu_runs_on_its_proxy_with_its_state() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(4);
    for mode in [Mode::Bolt, Mode::Naive] {
        off(&rt, "3", mode);
        let proxy = lock(&rt.sh.ctl).state.proxies.proxied_by(3);
        assert!(proxy.is_some_and(|p| p != 3), "{mode}: CPU 3 has a proxy");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        rt.call_on(3, move |cx| {
            s.lock().unwrap().push((cx.cpu(), cx.handled_on(), cx.by_proxy(), cx.stats().calls))
        })
        .unwrap();
        eventually(&rt, "the call was handled", || !seen.lock().unwrap().is_empty());
        let (cpu, handled_on, by_proxy, calls) = seen.lock().unwrap()[0];
        assert_eq!((cpu, Some(handled_on), by_proxy), (3, proxy, true), "{mode}");
        assert!(calls >= 1, "the handler sees CPU 3's counters, this call included");
        on(&rt, "3", mode);
        let s = seen.clone();
        rt.call_on(3, move |cx| s.lock().unwrap().push((cx.cpu(), cx.handled_on(), cx.by_proxy(), 0)))
            .unwrap();
        eventually(&rt, "the second call was handled", || seen.lock().unwrap().len() == 2);
        assert_eq!(seen.lock().unwrap()[1], (3, 3, false, 0), "{mode}: back online, CPU 3 handles its own");
    }
    assert!(rt.stats().calls_by_proxy >= 2);
}

#[test]
fn reschedule_of_an_offline_cpu_is_counted_by_its_proxy() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(3);
    off(&rt, "2", Mode::Bolt);
    rt.reschedule(2).unwrap();
    eventually(&rt, "the reschedule was handled", || rt.stats().reschedules == 1);
}

#[test]
fn synchronize_does_not_wait_for_offline_cpus() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(4);
    off(&rt, "1-2", Mode::Bolt);
    let r = rt.synchronize().unwrap();
    assert_eq!(r.waited_for, set("0,3"));
    assert_eq!(r.reported_by_proxy, set("1-2"));
    on(&rt, "1", Mode::Naive);
    let r = rt.synchronize().unwrap();
    assert_eq!((r.waited_for, r.reported_by_proxy), (set("0-1,3"), set("2")));
}

#[test]
fn broadcast_invalidate_skips_offline_cpus_which_apply_it_on_return() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(4);
    off(&rt, "2", Mode::Bolt);
    let r = rt.broadcast_invalidate().unwrap();
    assert_eq!((r.applied.clone(), r.skipped.clone()), (set("0-1,3"), set("2")));
    for cpu in r.applied.iter() {
        assert!(rt.invalidation_seen(cpu).unwrap() >= r.generation, "CPU {cpu} applied it before the return");
    }
    assert!(rt.invalidation_seen(2).unwrap() < r.generation, "an offline CPU is skipped");
    on(&rt, "2", Mode::Bolt);
    let first_task_saw = Arc::new(AtomicU64::new(0));
    let f = first_task_saw.clone();
    rt.spawn_on(2, move |cx: &mut Ctx<'_>| {
        f.store(cx.invalidation_generation(), Ordering::SeqCst);
        TaskPoll::Ready
    })
    .unwrap();
    eventually(&rt, "the task on CPU 2 ran", || first_task_saw.load(Ordering::SeqCst) != 0);
    assert!(first_task_saw.load(Ordering::SeqCst) >= r.generation, "applied before its first task");
}

#[test]
fn bolt_offline_keeps_cache_and_registry_and_parks_the_helper_lazily() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(4);
    let done = Arc::new(AtomicU32::new(0));
    for _ in 0..5 {
        rt.spawn_on(1, counting_task(3, done.clone())).unwrap();
    }
    eventually(&rt, "tasks on CPU 1 done", || done.load(Ordering::SeqCst) == 5);
    let before = rt.stats();
    let report = rt.offline(&set("1"), Mode::Bolt).unwrap();
    assert_eq!(report.changed(), &set("1"));
    assert!(report.entry_ns.is_some());
    assert!(
        report.step_ns.iter().all(|(s, _)| !matches!(s, Step::FreeCache { .. } | Step::StopHelper { .. }))
    );
    let info = rt.cpu_info(1).expect("the registry entry stays");
    assert_eq!(info.state, CpuLiveness::Offline);
    assert!(info.cache_blocks.is_some(), "the cache is kept for reuse");
    assert!(info.proxied_by.is_some());
    eventually(&rt, "the helper parked", || rt.cpu_info(1).unwrap().helper == HelperState::Parked);
    eventually(&rt, "statistics folded", || rt.cpu_info(1).unwrap().stats == CpuCounters::default());
    assert_eq!(rt.stats().tasks_done, before.tasks_done, "folding loses nothing");
    // Memory pressure frees the kept cache; online re-creates one.
    assert_eq!(rt.reclaim_memory(), 1);
    assert_eq!(rt.reclaim_memory(), 0, "freed once");
    assert_eq!(rt.cpu_info(1).unwrap().cache_blocks, None);
    assert_memory_accounted(&rt);
    let on = rt.online(&set("1"), Mode::Bolt).unwrap();
    assert!(on.plan.steps.iter().any(|s| s.step == Step::CreateCache { cpu: 1 }));
    let info = rt.cpu_info(1).unwrap();
    assert!(info.cache_blocks.is_some() && info.state == CpuLiveness::Online && info.proxied_by.is_none());
    eventually(&rt, "the helper runs again", || rt.cpu_info(1).unwrap().helper == HelperState::Running);
    rt.spawn_on(1, counting_task(2, done.clone())).unwrap();
    eventually(&rt, "CPU 1 runs tasks again", || done.load(Ordering::SeqCst) == 6);
    assert_memory_accounted(&rt);
}

#[test]
fn naive_offline_removes_everything_and_online_recreates_it() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(3);
    let done = Arc::new(AtomicU32::new(0));
    rt.spawn_on(2, counting_task(4, done.clone())).unwrap();
    eventually(&rt, "task on CPU 2 done", || done.load(Ordering::SeqCst) == 1);
    let freed = rt.memory().caches_freed;
    let r = rt.offline(&set("2"), Mode::Naive).unwrap();
    assert!(r.plan.steps.iter().all(|s| s.kind == dyncore_core::reconfig::Kind::Critical));
    assert_eq!(rt.cpu_info(2), None, "the registry entry is removed");
    assert_eq!(rt.registry().len(), 2);
    assert_eq!(rt.memory().caches_freed, freed + 1);
    assert_eq!(rt.stats().steps, 4, "statistics folded, not lost");
    assert_eq!(rt.online_cpus(), set("0-1"));
    on(&rt, "2", Mode::Naive);
    let info = rt.cpu_info(2).expect("re-created");
    assert_eq!((info.state, info.helper), (CpuLiveness::Online, HelperState::Running));
    assert!(info.cache_blocks.is_some());
    assert_memory_accounted(&rt);
    assert_eq!(rt.check(), Ok(()));
}

#[test]
fn kept_cache_is_reclaimed_after_cache_keep() {
    let _cpus = crate::testing::real_cpus();
    let mut cfg = config(3);
    cfg.cache_keep = Some(Duration::from_millis(10));
    let rt = Runtime::new(cfg).unwrap();
    off(&rt, "2", Mode::Bolt);
    eventually(&rt, "the kept cache was freed", || rt.cpu_info(2).unwrap().cache_blocks.is_none());
    assert_memory_accounted(&rt);
    on(&rt, "2", Mode::Bolt);
    assert!(rt.cpu_info(2).unwrap().cache_blocks.is_some());
}

#[test]
fn bulk_bolt_offline_updates_the_mask_once_and_moves_queued_tasks() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(6);
    let done = Arc::new(AtomicU32::new(0));
    for i in 0..60 {
        rt.spawn_on(i % 6, counting_task(20, done.clone())).unwrap();
    }
    let r = rt.offline(&set("2-5"), Mode::Bolt).unwrap();
    let deactivations = r.step_ns.iter().filter(|(s, _)| s.name() == "deactivate").count();
    assert_eq!(deactivations, 1);
    assert_eq!(rt.online_cpus(), set("0-1"));
    eventually(&rt, "every task finished on CPUs 0-1", || done.load(Ordering::SeqCst) == 60);
    assert_eq!(rt.stats().tasks_done, 60);
    let r = rt.online(&set("2-5"), Mode::Bolt).unwrap();
    assert_eq!(r.step_ns.iter().filter(|(s, _)| s.name() == "activate").count(), 1);
    assert_eq!(rt.check(), Ok(()));
}

#[test]
fn a_cpu_that_proxies_hands_its_charges_over_when_it_leaves() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(3);
    off(&rt, "2", Mode::Bolt);
    off(&rt, "0", Mode::Bolt);
    assert_eq!(rt.cpu_info(2).unwrap().proxied_by, Some(1));
    assert_eq!(rt.cpu_info(0).unwrap().proxied_by, Some(1));
    let hits = Arc::new(AtomicUsize::new(0));
    for cpu in [0, 2] {
        let h = hits.clone();
        rt.call_on(cpu, move |cx| {
            assert_eq!(cx.handled_on(), 1);
            h.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
    }
    eventually(&rt, "both calls handled by CPU 1", || hits.load(Ordering::SeqCst) == 2);
    on(&rt, "0,2", Mode::Naive);
    assert_eq!(rt.check(), Ok(()));
}

#[test]
fn step_timing_off_still_lists_the_steps_and_the_entry_latency() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(3);
    rt.set_step_timing(false);
    let r = rt.offline(&set("1-2"), Mode::Bolt).unwrap();
    // Both CPUs: install-proxy, stop-dispatch, await-stopped, migrate each,
    // plus one deactivate; none timed.
    assert_eq!(r.step_ns.len(), 1 + 2 * 4, "{:?}", r.step_ns);
    assert!(r.step_ns.iter().all(|&(_, ns)| ns == 0), "{:?}", r.step_ns);
    assert!(r.entry_ns.is_some(), "entry latency is measured whatever the step timing");
    rt.set_step_timing(true);
    let r = rt.online(&set("1-2"), Mode::Bolt).unwrap();
    assert!(!r.step_ns.is_empty());
    assert_eq!(rt.check(), Ok(()));
}

#[test]
fn offline_of_the_last_online_cpu_is_refused_with_a_clear_error() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(2);
    let err = rt.offline(&set("0-1"), Mode::Bolt).unwrap_err();
    assert!(matches!(err, ReconfigError::Refused(PlanError::LastOnline { .. })), "{err:?}");
    assert!(err.to_string().contains("would leave no online CPU"), "{err}");
    off(&rt, "1", Mode::Naive);
    let err = rt.offline(&set("0"), Mode::Naive).unwrap_err();
    assert_eq!(
        err.to_string(),
        "refusing to take CPU(s) 0 offline: that would leave no online CPU (at least one must stay)"
    );
    assert_eq!(rt.online_cpus(), set("0"), "nothing changed");
    assert_eq!(rt.check(), Ok(()));
}

#[test]
fn cpus_not_owned_are_refused_by_number() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(4);
    let err = rt.offline(&set("2,5"), Mode::Bolt).unwrap_err();
    assert_eq!(err.to_string(), "CPU 5 not owned by this runtime (it owns CPUs 0-3)");
    assert_eq!(rt.online_cpus(), set("0-3"), "nothing changed, not even CPU 2");
    let err = rt.online(&set("9"), Mode::Naive).unwrap_err();
    assert_eq!(err, ReconfigError::Refused(PlanError::NotOwned { cpus: set("9"), owned: 4 }));
    assert_eq!(
        rt.call_on(7, |_| {}).unwrap_err().to_string(),
        "CPU 7 not owned by this runtime (it owns CPUs 0-3)"
    );
    assert_eq!(
        rt.spawn_on(4, |_: &mut Ctx<'_>| TaskPoll::Ready).unwrap_err(),
        PlaceError::NotOwned { cpu: 4, owned: 4 }
    );
    assert!(matches!(rt.reschedule(8), Err(PlaceError::NotOwned { cpu: 8, .. })));
    assert!(matches!(rt.offline(&CpuSet::new(), Mode::Bolt), Err(ReconfigError::Refused(PlanError::Empty))));
}

#[test]
fn offline_of_an_offline_cpu_is_a_reported_noop() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(4);
    off(&rt, "2", Mode::Bolt);
    for mode in [Mode::Bolt, Mode::Naive] {
        let r = rt.offline(&set("2"), mode).unwrap();
        assert!(r.is_noop() && r.plan.steps.is_empty() && r.step_ns.is_empty());
        assert_eq!(r.already(), &set("2"));
        let r = rt.online(&set("0-1"), mode).unwrap();
        assert!(r.is_noop());
        assert_eq!(r.already(), &set("0-1"));
    }
    let r = rt.offline(&set("1-2"), Mode::Bolt).unwrap();
    assert_eq!((r.changed().clone(), r.already().clone()), (set("1"), set("2")));
    assert_eq!(rt.online_cpus(), set("0,3"));
}

/// One registry row as a rollback must restore it: CPU, state, proxy,
/// whether it holds a cache, helper.
type Row = (CpuId, CpuLiveness, Option<CpuId>, bool, HelperState);

/// Snapshot of everything a rollback must restore.
fn snapshot(rt: &Runtime) -> (CpuSet, Vec<Row>) {
    let reg = rt
        .registry()
        .into_iter()
        .map(|i| {
            let helper = match i.helper {
                // A park request may or may not have been seen yet.
                HelperState::ParkRequested => HelperState::Parked,
                h => h,
            };
            (i.cpu, i.state, i.proxied_by, i.cache_blocks.is_some(), helper)
        })
        .collect();
    (rt.online_cpus(), reg)
}

#[test]
fn a_failing_step_rolls_back_and_names_the_step() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(4);
    // Each case: set up, then fail the reconfiguration at every critical step.
    let cases: [(Mode, Direction, &str); 4] = [
        (Mode::Naive, Direction::Offline, "2-3"),
        (Mode::Bolt, Direction::Offline, "1-3"),
        (Mode::Naive, Direction::Online, "2-3"),
        (Mode::Bolt, Direction::Online, "1-3"),
    ];
    let run = |mode, dir, cpus: &CpuSet| match dir {
        Direction::Offline => rt.offline(cpus, mode),
        Direction::Online => rt.online(cpus, mode),
    };
    let undo = |mode, dir, cpus: &CpuSet| match dir {
        Direction::Offline => rt.online(cpus, mode),
        Direction::Online => rt.offline(cpus, mode),
    };
    let done = Arc::new(AtomicU32::new(0));
    let mut expect_done = 0;
    for (mode, dir, cpus) in cases {
        let cpus = set(cpus);
        if dir == Direction::Online {
            assert_eq!(rt.offline(&cpus, mode).unwrap().changed(), &cpus);
        }
        // A clean run gives the plan; undo it to get back.
        let plan = run(mode, dir, &cpus).unwrap().plan;
        assert_eq!(undo(mode, dir, &cpus).unwrap().changed(), &cpus);
        for index in 0..plan.critical_len() {
            let before = snapshot(&rt);
            let calls = Arc::new(AtomicUsize::new(0));
            let c = calls.clone();
            rt.set_fault_hook(Some(Box::new(move |_| c.fetch_add(1, Ordering::SeqCst) == index)));
            let err = run(mode, dir, &cpus).unwrap_err();
            rt.set_fault_hook(None);
            let ReconfigError::StepFailed { step, index: at, rollback_errors, .. } = &err else {
                panic!("{mode} {dir:?} {cpus}: expected a failed step, got {err:?}");
            };
            assert_eq!(
                (at, step),
                (&index, &plan.steps[index].step),
                "{mode} {dir:?}: the failing step is named"
            );
            assert!(err.to_string().contains(&step.to_string()), "{err}");
            assert!(rollback_errors.is_empty(), "{err}");
            assert_eq!(rt.check(), Ok(()), "{mode} {dir:?} failing at {step}");
            assert_eq!(snapshot(&rt), before, "{mode} {dir:?} failing at {step}: rolled back");
            // Still works: every online CPU runs a task.
            for cpu in rt.online_cpus().iter() {
                rt.spawn_on(cpu, counting_task(2, done.clone())).unwrap();
                expect_done += 1;
            }
            eventually(&rt, "tasks after a rollback", || done.load(Ordering::SeqCst) == expect_done);
        }
        if dir == Direction::Online {
            assert_eq!(rt.online(&cpus, mode).unwrap().changed(), &cpus);
        }
    }
    assert_eq!(rt.online_cpus(), set("0-3"));
    assert_memory_accounted(&rt);
}

/// The step lasts until the watchdog has counted it (not for a fixed time,
/// which a loaded machine could let pass between two of the watchdog's
/// checks).
#[test]
fn watchdog_counts_a_worker_stuck_in_a_long_step() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime(2);
    let (started, release, done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (s, r, d) = (started.clone(), release.clone(), done.clone());
    rt.spawn_on(1, move |_: &mut Ctx<'_>| {
        s.store(true, Ordering::SeqCst);
        // One long step: long compared to the 5 ms watchdog period.
        while !r.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        d.store(true, Ordering::SeqCst);
        TaskPoll::Ready
    })
    .unwrap();
    eventually(&rt, "the long step started", || started.load(Ordering::SeqCst));
    eventually(&rt, "the watchdog counted the long step", || rt.cpu_info(1).unwrap().watchdog_stalls >= 1);
    release.store(true, Ordering::SeqCst);
    eventually(&rt, "the long step finished", || done.load(Ordering::SeqCst));
    assert_eq!(rt.cpu_info(0).unwrap().watchdog_stalls, 0, "an idle CPU is not stalled");
}

#[test]
#[should_panic(expected = "called from the worker")]
fn global_operations_refuse_to_run_on_a_worker_thread() {
    // What a task calling `offline` would hit (it would wait for itself).
    worker::WORKER_OF.with(|w| w.set(Some(0)));
    worker::assert_not_on_worker("offline");
}
