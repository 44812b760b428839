//! Robustness: a panicking task or call does not wedge the runtime; a CPU
//! stuck in a step makes the controller's waits fail with a report instead
//! of hanging, and reconfigurations roll back; the watchdog's stall mark
//! makes them fail at once and is visible in the registry and to
//! subscribers. Every test runs under a deadlock watchdog: a hang fails the
//! run with a dump instead of blocking it. No test asserts a time.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use dyncore_core::reconfig::Step;

use super::tests::{config, set};
use super::*;

const HOUR: Duration = Duration::from_secs(3600);

/// Fails the test binary with a dump if the test does not finish in time.
struct HangGuard {
    done: Arc<AtomicBool>,
}

impl HangGuard {
    fn new(rt: &Arc<Runtime>) -> HangGuard {
        let done = Arc::new(AtomicBool::new(false));
        let (d, rt) = (done.clone(), rt.clone());
        std::thread::spawn(move || {
            let t0 = std::time::Instant::now();
            while !d.load(Ordering::SeqCst) {
                if t0.elapsed() > Duration::from_secs(120) {
                    eprintln!("robustness test hung:\n{}", rt.dump());
                    std::process::exit(101);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        HangGuard { done }
    }
}

impl Drop for HangGuard {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
    }
}

/// Polls `cond` (there is no wall-clock bound: the hang guard is the bound).
fn eventually(mut cond: impl FnMut() -> bool) {
    while !cond() {
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// A task that blocks its CPU inside one step until `release` is set, and
/// says when it started blocking.
fn blocking_task(started: Arc<AtomicBool>, release: Arc<AtomicBool>) -> impl Task {
    move |_: &mut Ctx<'_>| {
        started.store(true, Ordering::SeqCst);
        while !release.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        TaskPoll::Ready
    }
}

fn counting(done: Arc<AtomicU32>) -> impl Task {
    move |_: &mut Ctx<'_>| {
        done.fetch_add(1, Ordering::SeqCst);
        TaskPoll::Ready
    }
}

#[test]
fn a_panicking_task_is_reported_and_the_cpu_goes_on_serving() {
    let _cpus = crate::testing::real_cpus();
    let rt = Arc::new(Runtime::new(config(2)).unwrap());
    let _guard = HangGuard::new(&rt);
    let events = rt.subscribe();
    let mut steps = 0;
    rt.spawn_on(1, move |_: &mut Ctx<'_>| {
        steps += 1;
        if steps == 3 {
            panic!("kernel exploded at step {steps}");
        }
        TaskPoll::Pending
    })
    .unwrap();
    eventually(|| !rt.failures().is_empty());
    let f = &rt.failures()[0];
    assert_eq!(f.cpu, 1);
    assert_eq!(f.message, "kernel exploded at step 3");
    assert!(matches!(&f.work, FailedWork::Task { name } if name.contains("robust_tests")), "{f:?}");
    assert!(f.to_string().contains("panicked: kernel exploded at step 3"), "{f}");
    // (The panic hook may print a backtrace slowly enough for the watchdog
    // to report a stall first.)
    let failed = events.iter().find(|e| matches!(e, RuntimeEvent::Failed(_)));
    assert_eq!(failed, Some(RuntimeEvent::Failed(f.clone())));
    assert_eq!(rt.stats().tasks_failed, 1);
    // The CPU still runs tasks, and every controller operation still works.
    let done = Arc::new(AtomicU32::new(0));
    rt.spawn_on(1, counting(done.clone())).unwrap();
    eventually(|| done.load(Ordering::SeqCst) == 1);
    rt.synchronize().unwrap();
    rt.broadcast_invalidate().unwrap();
    for mode in [Mode::Bolt, Mode::Naive] {
        assert_eq!(rt.offline(&set("1"), mode).unwrap().changed(), &set("1"));
        assert_eq!(rt.online(&set("1"), mode).unwrap().changed(), &set("1"));
    }
    assert_eq!(rt.check(), Ok(()));
}

#[test]
fn a_panicking_call_is_reported_for_the_cpu_it_was_addressed_to() {
    let _cpus = crate::testing::real_cpus();
    let rt = Arc::new(Runtime::new(config(3)).unwrap());
    let _guard = HangGuard::new(&rt);
    assert_eq!(rt.offline(&set("2"), Mode::Bolt).unwrap().changed(), &set("2"));
    rt.call_on(2, |cx| panic!("handler for CPU {} failed", cx.cpu())).unwrap();
    eventually(|| !rt.failures().is_empty());
    let f = rt.failures()[0].clone();
    assert_eq!((f.cpu, f.message.as_str()), (2, "handler for CPU 2 failed"));
    let FailedWork::Call { handled_on } = f.work else { panic!("{f:?}") };
    assert_ne!(handled_on, 2, "the proxy ran it");
    // The proxy still serves: a later call to the same CPU is handled.
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    rt.call_on(2, move |_| r.store(true, Ordering::SeqCst)).unwrap();
    eventually(|| ran.load(Ordering::SeqCst));
    assert_eq!(rt.stats().calls_failed, 1);
    assert_eq!(rt.online(&set("2"), Mode::Bolt).unwrap().changed(), &set("2"));
}

#[test]
fn waits_on_a_cpu_stuck_in_a_step_fail_at_the_deadline_and_roll_back() {
    let _cpus = crate::testing::real_cpus();
    let mut cfg = config(4);
    // Long enough that the other CPUs answer in time on a loaded machine
    // (workers unscheduled for a few hundred milliseconds have been seen).
    cfg.wait_deadline = Duration::from_secs(1);
    // No stall mark in this test: only the deadline can end the waits.
    cfg.stall_after = HOUR;
    let rt = Arc::new(Runtime::new(cfg).unwrap());
    let _guard = HangGuard::new(&rt);
    let (started, release) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    rt.spawn_on(1, blocking_task(started.clone(), release.clone())).unwrap();
    eventually(|| started.load(Ordering::SeqCst));

    // Bolt offline of the stuck CPU: AwaitStopped gives up, rolled back.
    let err = rt.offline(&set("1"), Mode::Bolt).unwrap_err();
    let ReconfigError::StepFailed { step, unresponsive: Some(u), rollback, rollback_errors, .. } = &err
    else {
        panic!("expected a failed step naming the CPU, got {err:?}");
    };
    assert_eq!(step, &Step::AwaitStopped { cpu: 1 });
    assert_eq!((u.cpu, u.running, u.state, u.stalled), (1, true, CpuLiveness::Stopping, false), "{u}");
    assert!(u.waited_ns > 0 && !rollback.is_empty() && rollback_errors.is_empty(), "{err}");
    assert!(err.to_string().contains("CPU 1 did not finish its current step within"), "{err}");
    assert_eq!(rt.check(), Ok(()));
    assert_eq!(rt.online_cpus(), set("0-3"), "rolled back");

    // Naive offline of another CPU: the barrier waits for CPU 1, gives up,
    // and releases the others.
    let err = rt.offline(&set("3"), Mode::Naive).unwrap_err();
    let ReconfigError::StepFailed { step, unresponsive: Some(u), .. } = &err else { panic!("{err:?}") };
    assert_eq!((step, u.cpu), (&Step::StopTheWorld, 1), "{err}");
    assert!(u.waited_for.contains("stop-the-world barrier"), "{u}");
    let done = Arc::new(AtomicU32::new(0));
    for cpu in [0, 2, 3] {
        rt.spawn_on(cpu, counting(done.clone())).unwrap();
    }
    eventually(|| done.load(Ordering::SeqCst) == 3);

    // Grace periods and shootdowns name the CPU too.
    let u = rt.synchronize().unwrap_err();
    assert_eq!((u.cpu, u.running), (1, true));
    assert!(u.to_string().starts_with("CPU 1 did not pass a quiescent point"), "{u}");
    let u = rt.broadcast_invalidate().unwrap_err();
    assert_eq!(u.cpu, 1);

    // Released, everything works again.
    release.store(true, Ordering::SeqCst);
    rt.synchronize().unwrap();
    assert_eq!(rt.offline(&set("1"), Mode::Bolt).unwrap().changed(), &set("1"));
    assert_eq!(rt.online(&set("1"), Mode::Naive).unwrap().changed(), &set("1"));
    assert_eq!(rt.check(), Ok(()));
}

#[test]
fn a_stalled_cpu_is_reported_and_makes_waits_fail_at_once() {
    let _cpus = crate::testing::real_cpus();
    let mut cfg = config(3);
    cfg.stall_after = Duration::from_millis(20);
    // Only the stall mark can end these waits: a hang would trip the guard.
    cfg.wait_deadline = HOUR;
    let rt = Arc::new(Runtime::new(cfg).unwrap());
    let _guard = HangGuard::new(&rt);
    let events = rt.subscribe();
    let (started, release) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    rt.spawn_on(2, blocking_task(started.clone(), release.clone())).unwrap();
    eventually(|| rt.cpu_info(2).unwrap().stalled.is_some());
    let info = rt.cpu_info(2).unwrap();
    assert!(info.watchdog_stalls >= 1, "{info:?}");
    assert_eq!(info.cache_blocks, None, "held by the stuck step, not read");
    assert!(rt.cpu_info(0).unwrap().stalled.is_none());
    assert!(matches!(events.recv().unwrap(), RuntimeEvent::Stalled { cpu: 2, .. }), "a stall event");

    let err = rt.offline(&set("1-2"), Mode::Bolt).unwrap_err();
    let ReconfigError::Unresponsive(u) = &err else { panic!("{err:?}") };
    assert_eq!((u.cpu, u.stalled, u.waited_ns), (2, true, 0), "{err}");
    assert!(err.to_string().starts_with("refusing to take CPU 2 offline"), "{err}");
    assert_eq!(rt.online_cpus(), set("0-2"), "nothing changed, not even CPU 1");
    let u = rt.synchronize().unwrap_err();
    assert!(u.stalled && u.cpu == 2, "{u}");
    // Counters of the stuck CPU are left out, not waited for.
    let _ = rt.stats();

    release.store(true, Ordering::SeqCst);
    assert!(matches!(events.recv().unwrap(), RuntimeEvent::Recovered { cpu: 2, .. }), "a recovery event");
    assert!(rt.cpu_info(2).unwrap().stalled.is_none());
    assert_eq!(rt.offline(&set("1-2"), Mode::Bolt).unwrap().changed(), &set("1-2"));
    assert_eq!(rt.check(), Ok(()));
}

#[test]
fn dropping_a_runtime_with_a_stuck_worker_does_not_hang() {
    let _cpus = crate::testing::real_cpus();
    let mut cfg = config(2);
    cfg.wait_deadline = Duration::from_millis(50);
    let rt = Runtime::new(cfg).unwrap();
    let (started, release) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    rt.spawn_on(1, blocking_task(started.clone(), release.clone())).unwrap();
    eventually(|| started.load(Ordering::SeqCst));
    let dropped = Arc::new(Mutex::new(false));
    let d = dropped.clone();
    let t = std::thread::spawn(move || {
        drop(rt);
        *d.lock().unwrap() = true;
    });
    eventually(|| *dropped.lock().unwrap());
    t.join().unwrap();
    release.store(true, Ordering::SeqCst);
}
