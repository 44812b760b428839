//! The executor drives Chameleon's policy on runtime CPUs: the traffic it
//! records keeps the boundary's contract and replays byte for byte; a fuse
//! takes the borrowed CPU offline for real and the policy hears what it
//! took; exits and failures reach the policy. No test asserts a time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dyncore_core::Nanos;
use dyncore_core::policy::contract::{Checker, check_replay};
use dyncore_core::policy::execution::ViolationKind;
use dyncore_core::policy::trace::{DecisionKind, decision_kinds, parse_actions, parse_events, replay};
use dyncore_core::policy::{Action, CpuState, Event, Policy, ThreadSpec};
use dyncore_core::reconfig::Mode;
use dyncore_core::sched::{ClusterScheduler, Config};
use dyncore_core::speed::{Duty, SpeedClass, SpeedModel};
use dyncore_core::topology::Topology;

use super::*;
use crate::cpu::RuntimeConfig;
use crate::kernels::{MakeKernel, NQueens, Portion, Progress};
use crate::machine::Machine;

const MS: u64 = 1_000_000;

fn chameleon() -> ClusterScheduler {
    ClusterScheduler::new(
        Topology::uniform(1, 2),
        Config {
            min_granularity_ns: 4 * MS,
            chameleon: true,
            notify_on_exit: true,
            max_fuse: 2,
            speed: SpeedModel::DYNAMIC,
            reconfig_mode: Mode::Bolt,
        },
    )
}

/// Two runtime CPUs over the real ones, real-time where permitted (the
/// traffic does not depend on it; the run is quicker on a busy machine).
fn runtime() -> Runtime {
    let real = crate::affinity::allowed_cpus().expect("the affinity mask is readable");
    let mut cfg = RuntimeConfig::over(&real, 2);
    cfg.stall_after = Duration::from_secs(30);
    cfg.wait_deadline = Duration::from_secs(60);
    cfg.realtime_priority = Some(10);
    Runtime::new(cfg.clone()).unwrap_or_else(|e| {
        eprintln!("running the workers at normal priority: {e}");
        cfg.realtime_priority = None;
        Runtime::new(cfg).expect("a runtime")
    })
}

fn config() -> BackendConfig {
    BackendConfig {
        tick_ns: MS,
        load_sample_ns: 5 * MS,
        duty_scale: DutyScale::default(),
        machine: Machine::detect().expect("sysfs").topology,
        worker_priority: Some(10),
    }
}

fn spec(want_cpus: usize) -> ThreadSpec {
    ThreadSpec { nice: 0, tax: 1.0, want_cpus, weight: 1.5, affinity: None, class: SpeedClass::High }
}

fn queens(units: u64) -> Box<dyn Kernel> {
    let make: MakeKernel = Arc::new(|| Box::new(NQueens::new(10)) as Box<dyn Kernel>);
    Box::new(Portion::new(make, units, None))
}

#[test]
fn a_live_run_keeps_the_contract_and_replays_byte_for_byte() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime();
    let mut ex = Executor::new(&rt, chameleon(), config());
    let stop = AtomicBool::new(false);
    // A thread that wants the pair, alone: it fuses; a second one arrives
    // and (at tax 1) takes its CPU back in turns; both finish.
    ex.spawn(queens(2_000_000), spec(2)).unwrap();
    assert_eq!(ex.run_until(20 * MS, false, &stop).unwrap(), Stopped::Time);
    ex.spawn(queens(1_000_000), spec(1)).unwrap();
    assert_eq!(ex.run_until(u64::MAX, true, &stop).unwrap(), Stopped::Idle);
    let (run, _) = ex.finish();

    let events = parse_events(&run.events).expect("the event trace parses");
    let replayed = replay(&events, &mut chameleon());
    assert!(replayed == run.actions, "the replay differs from the live run's actions");
    let mut checker = Checker::with_speeds(SpeedModel::DYNAMIC, Topology::uniform(1, 2));
    check_replay(&events, &mut chameleon(), &mut checker).expect("the live traffic keeps the contract");

    // It fused, for real: the offline is in the log with what it took, and
    // the policy was told exactly that.
    let actions = parse_actions(&run.actions).unwrap();
    let kinds = decision_kinds(actions.iter().map(|(_, a)| a));
    assert_eq!(kinds.iter().filter(|k| **k == DecisionKind::Fuse).count(), run.log.fuses.len());
    assert!(!run.log.fuses.is_empty() && !run.log.reconfigs.is_empty());
    for r in &run.log.reconfigs {
        let told = events.iter().find_map(|(_, e)| match e {
            Event::ReconfigDone { id, took_ns } if *id == r.id => Some(*took_ns),
            _ => None,
        });
        assert_eq!(told, Some(r.critical_ns), "{r:?}");
        assert!(r.started_ns <= r.finished_ns);
    }
    let offline = actions.iter().filter(|(_, a)| matches!(a, Action::Offline { .. })).count();
    assert_eq!(
        offline + actions.iter().filter(|(_, a)| matches!(a, Action::Online { .. })).count(),
        run.log.reconfigs.len()
    );
    // Both threads did their units and the policy heard of both exits.
    for (t, want) in [(0, 2_000_000), (1, 1_000_000)] {
        let r = &run.log.threads[t];
        assert!(r.done_ns.is_some() && !r.failed && r.units >= want, "thread {t}: {r:?}");
        assert!(events.iter().any(|(_, e)| *e == Event::Exit { thread: t }));
    }
    // The fused object ran at the fused duty: slices on 2 CPUs exist.
    assert!(run.log.slices.iter().any(|s| s.object_cpus == 2));
    assert!(run.log.ticks.rounds > 0 && run.end_ns > 0);
    // What the runtime really ran keeps to the dispatches, and every
    // offline and online took effect.
    let v = &run.execution;
    eprintln!("{}", v.summary());
    assert!(v.ok(), "{}", v.summary());
    assert!(v.slices > 0 && v.start.n > 0 && v.lost == 0, "{}", v.summary());
    assert_eq!(v.offline.n + v.online.n, offline_and_online(&actions), "{}", v.summary());
}

fn offline_and_online(actions: &[(u64, Action)]) -> usize {
    actions
        .iter()
        .map(|(_, a)| match a {
            Action::Offline { cpus, .. } | Action::Online { cpus, .. } => cpus.len(),
            _ => 0,
        })
        .sum()
}

/// Runs thread 0 on CPU 0 from its spawn, and moves it to CPU 1 at the
/// first tick from 5 ms on; `moved` is raised when it has asked for the
/// move (the executor applies a policy's actions in the same pass).
#[derive(Default)]
struct Mover {
    moved: Arc<AtomicBool>,
}

impl Policy for Mover {
    fn handle(&mut self, now: Nanos, event: &Event, out: &mut Vec<Action>) {
        let running = CpuState::Running { thread: 0, object_cpus: 1 };
        match event {
            Event::Spawn { thread: 0, .. } => {
                out.push(Action::SetSpeed { cpu: 0, duty: Duty::BASELINE });
                out.push(Action::SetSpeed { cpu: 1, duty: Duty::BASELINE });
                out.push(Action::Dispatch { cpu: 0, state: running });
            }
            Event::Tick { .. } if now >= 5 * MS && !self.moved.load(Ordering::Acquire) => {
                self.moved.store(true, Ordering::Release);
                out.push(Action::Dispatch { cpu: 0, state: CpuState::Idle });
                out.push(Action::Dispatch { cpu: 1, state: running });
            }
            _ => {}
        }
    }
}

/// Runs `Mover` until the move has happened and, with `defect`, until the
/// runner the move superseded has stepped the thread against it.
fn moved_run(defect: bool) -> LiveRun {
    let rt = runtime();
    let mover = Mover::default();
    let asked = mover.moved.clone();
    let mut ex = Executor::new(&rt, mover, config());
    let stop = AtomicBool::new(false);
    ex.spawn(queens(u64::MAX / 2), spec(1)).unwrap();
    if defect {
        ex.inject_dispatch_fault(Box::new(|thread, cpu| thread == 0 && cpu == 0));
    }
    // A liveness bound, not a time: the move comes at the first tick from
    // 5 ms (later on a loaded machine: run until the policy has asked for
    // it, not until a time has passed), and the ignoring runner competes
    // for the kernel with the new one.
    let mut rounds = 0;
    loop {
        let now = ex.now_ns();
        assert_eq!(ex.run_until(now + 5 * MS, false, &stop).unwrap(), Stopped::Time);
        let moved = asked.load(Ordering::Acquire);
        if moved && (!defect || ex.steps_ignoring_dispatch() > 0) {
            break;
        }
        rounds += 1;
        assert!(rounds < 12_000, "the defect never stepped: {}", rt.dump());
    }
    ex.finish().0
}

#[test]
fn the_execution_checker_catches_a_runner_that_ignores_a_dispatch() {
    let _cpus = crate::testing::real_cpus();
    // Without the defect: the thread ran on CPU 0, then on CPU 1, within
    // its windows (a violation would panic in `finish`, in tests).
    let good = moved_run(false);
    let v = &good.execution;
    assert!(v.ok(), "{}", v.summary());
    assert_eq!((v.windows, v.stop.n), (2, 1), "{}", v.summary());
    // With it: the runner on CPU 0 stepped the thread after the move.
    let bad = moved_run(true);
    let v = &bad.execution;
    eprintln!("with the defect: {}", v.summary());
    assert!(!v.ok(), "the injected defect went unnoticed: {}", v.summary());
    let x = &v.violations[0];
    assert_eq!((x.kind, x.cpu, x.thread), (ViolationKind::OutsideDispatch, 0, Some(0)), "{}", x.message);
    assert!(x.message.contains("while dispatched idle"), "{}", x.message);
}

/// Puts thread 0 on both CPUs at once: a broken promise of the policy.
struct TwoPlaces;

impl Policy for TwoPlaces {
    fn handle(&mut self, _: Nanos, event: &Event, out: &mut Vec<Action>) {
        if let Event::Spawn { thread: 0, .. } = event {
            for cpu in 0..2 {
                out.push(Action::SetSpeed { cpu, duty: Duty::BASELINE });
            }
            for cpu in 0..2 {
                out.push(Action::Dispatch { cpu, state: CpuState::Running { thread: 0, object_cpus: 1 } });
            }
        }
    }
}

/// The contract's checker is not a debug assertion: this test passes in a
/// release build too (`cargo test --release -p dyncore-runtime --lib
/// contract_checker`), where the run stops before the actions execute.
#[test]
fn the_contract_checker_stops_a_policy_that_breaks_it_in_every_build() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime();
    let mut ex = Executor::new(&rt, TwoPlaces, config());
    let err = ex.spawn(queens(1_000), spec(1)).expect_err("a thread on two CPUs is refused");
    let BackendError::Contract { message } = &err else { panic!("not the contract: {err}") };
    eprintln!("debug assertions {}: {message}", cfg!(debug_assertions));
    assert!(message.contains("runs on CPUs 0 and 1"), "{message}");
    assert!(ex.log.contract_ns > 0, "the checker's time is measured");
}

struct Bomb;

impl Kernel for Bomb {
    fn name(&self) -> &'static str {
        "bomb"
    }
    fn step_units(&self) -> u64 {
        1
    }
    fn step(&mut self) -> Progress {
        panic!("the bomb went off")
    }
}

#[test]
fn a_failed_thread_exits_and_the_run_goes_on() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime();
    let mut ex = Executor::new(&rt, chameleon(), config());
    let stop = AtomicBool::new(false);
    ex.spawn(Box::new(Bomb), spec(1)).unwrap();
    ex.spawn(queens(200_000), spec(1)).unwrap();
    assert_eq!(ex.run_until(u64::MAX, true, &stop).unwrap(), Stopped::Idle);
    let (run, _) = ex.finish();
    assert!(run.log.threads[0].failed && !run.log.threads[1].failed);
    assert!(run.events.contains(r#"{"kind":"exit","thread":0}"#), "{}", run.events);
}

#[test]
fn a_raised_stop_flag_returns_at_once() {
    let _cpus = crate::testing::real_cpus();
    let rt = runtime();
    let mut ex = Executor::new(&rt, chameleon(), config());
    ex.spawn(queens(u64::MAX / 2), spec(2)).unwrap();
    let stop = AtomicBool::new(true);
    assert_eq!(ex.run_until(u64::MAX, true, &stop).unwrap(), Stopped::Interrupted);
    let (run, _) = ex.finish();
    assert_eq!(run.log.threads[0].done_ns, None);
}

#[test]
fn duty_scale_keeps_ratios_and_refuses_what_cannot_run() {
    let d = |pm| Duty::from_per_mille(pm).unwrap();
    let identity = DutyScale::default();
    for pm in [500, 625, 750, 875, 1000] {
        assert_eq!(identity.apply(d(pm)).unwrap(), d(pm));
    }
    // A 45% baseline: 50% → 45%, 75% → 67.5%, 100% → 90%.
    let s = DutyScale { baseline: d(450) };
    assert_eq!(
        (s.apply(d(500)).unwrap(), s.apply(d(750)).unwrap(), s.apply(d(1000)).unwrap()),
        (d(450), d(675), d(900))
    );
    // A 60% baseline cannot run a 100% duty (120%).
    assert!(DutyScale { baseline: d(600) }.apply(d(1000)).is_err());
}
