//! The conformance tests of the policy boundary across backends:
//!
//! * a live run records its event trace, and replaying it through a fresh
//!   policy — built as the simulator builds it, with no backend — gives the
//!   same action trace byte for byte (and the live traffic keeps the
//!   boundary's contract, with Table 2's speed model as the oracle);
//! * one small scenario through the simulator and through the runtime:
//!   both make the policy take the same kinds of decision in the same
//!   order.
//!
//! The scenario is `scenarios/live/live-exit-notify.toml` at a fifth of its
//! length (100 and 300 ms of work). Its decisions are robust to timing,
//! which the second test needs: the node manager hands out CPUs only when
//! a program starts (the first is given the pair and fuses it, and the
//! second's arrival splits it: one CPU each) and when one exits (with the
//! notification, the long one is given the pair and fuses it), and nothing
//! else competes for them — each program has a CPU of its own, so no tick
//! ever makes the scheduler preempt, borrow or split — and the order of
//! the exits is fixed by the work (the short program has a third of the
//! long one's). Ticks, load samples and their times differ between the
//! backends; the decisions do not.
//!
//! They run live, so they need two CPUs and real-time priority (root):
//! without them they say so and skip. No test asserts a time.

use std::sync::atomic::AtomicBool;

use dyncore_core::policy::contract::{Checker, check_replay};
use dyncore_core::policy::trace::{DecisionKind, decision_kinds, parse_actions, parse_events, replay};
use dyncore_runtime::backend::DutyScale;
use dyncore_runtime::machine::Machine;
use dyncore_scenario::policy::policy_for;
use dyncore_sim::Scenario;
use dyncore_sim::machine::MachineSpec;

use crate::run::{LiveOptions, Outcome, run};

fn scenario() -> Scenario {
    let path = dyncore_scenario::load::default_dir().join("live/live-exit-notify.toml");
    let s = dyncore_scenario::load::load(&path).expect("the shipped live scenario loads");
    crate::scale::scaled(&s, 0.2).expect("a fifth of it is valid")
}

/// The options of a live run here, or why the test cannot run.
fn options() -> Result<LiveOptions, String> {
    let real = dyncore_runtime::affinity::allowed_cpus().map_err(|e| e.to_string())?;
    if real.len() < 2 {
        return Err(format!("needs 2 CPUs; this process may use {real}"));
    }
    let rt = std::thread::spawn(|| dyncore_runtime::affinity::set_current_thread_realtime(1))
        .join()
        .expect("the probe thread does not panic");
    rt.map_err(|e| format!("needs real-time priority: {e}"))?;
    let machine = Machine::detect().map_err(|e| e.to_string())?.topology;
    Ok(LiveOptions { real, duty_scale: DutyScale::default(), machine })
}

macro_rules! live_options_or_skip {
    () => {
        match options() {
            Ok(o) => o,
            Err(why) => {
                dyncore_runtime::testing::skip(dyncore_runtime::testing::Need::Root, &why);
                return;
            }
        }
    };
}

#[test]
fn a_live_run_replays_byte_for_byte_through_a_fresh_policy() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let opts = live_options_or_skip!();
    let sc = scenario();
    let mut fused = false;
    for i in 0..sc.runs.len() {
        let out = run(&sc, i, &opts, &AtomicBool::new(false), &|_| {}).expect("the run starts");
        assert_eq!(out.outcome, Outcome::Finished, "run {i}");
        let events = parse_events(&out.run.events).expect("the live event trace parses");
        assert!(!events.is_empty());
        let replayed = replay(&events, &mut policy_for(&sc, i));
        if replayed != out.run.actions {
            let (a, b): (Vec<&str>, Vec<&str>) =
                (out.run.actions.lines().collect(), replayed.lines().collect());
            let k = a.iter().zip(&b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
            panic!(
                "run {i}: the replay differs at line {}: live {:?}, replayed {:?}",
                k + 1,
                a.get(k),
                b.get(k)
            );
        }
        let machine = MachineSpec::build(&sc.runs[i]).unwrap();
        let mut checker = Checker::with_speeds(machine.speed, machine.topology);
        check_replay(&events, &mut policy_for(&sc, i), &mut checker)
            .unwrap_or_else(|e| panic!("run {i}: the live traffic breaks the contract: {e}"));
        // What the runtime really ran keeps to the dispatches (checked in
        // `finish` too, which panics in tests).
        let v = &out.run.execution;
        assert!(v.ok() && v.slices > 0, "run {i}: {}", v.summary());
        fused |= !out.run.log.fuses.is_empty();
    }
    assert!(fused, "the notified run fuses: the test checks a run that reconfigured for real");
}

#[test]
fn the_simulator_and_the_runtime_decide_the_same_kinds_in_the_same_order() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let opts = live_options_or_skip!();
    let mut sc = scenario();
    sc.record_policy_trace = true;
    let kinds = |actions: &str| {
        let a = parse_actions(actions).expect("parses");
        decision_kinds(a.iter().map(|(_, a)| a))
    };
    let mut fuses = Vec::new();
    for i in 0..sc.runs.len() {
        let sim = dyncore_sim::run_one(&sc, i).expect("within the event budget");
        let sim_kinds = kinds(&sim.policy_trace.expect("recorded").actions);
        let live = run(&sc, i, &opts, &AtomicBool::new(false), &|_| {}).expect("the run starts");
        assert_eq!(live.outcome, Outcome::Finished, "run {i}");
        assert_eq!(kinds(&live.run.actions), sim_kinds, "run {i} (`{}`)", sc.runs[i].label);
        // What the comparison covers: objects handed out, fuses each
        // followed by their offline, and splits.
        assert!(sim_kinds.contains(&DecisionKind::Object), "run {i}: {sim_kinds:?}");
        for (k, w) in sim_kinds.windows(2).enumerate() {
            assert!(w[0] != DecisionKind::Fuse || w[1] == DecisionKind::Offline, "run {i}, decision {k}");
        }
        fuses.push(sim_kinds.iter().filter(|k| **k == DecisionKind::Fuse).count());
    }
    // The short program is given the pair until the long one arrives, in
    // both runs; only the notified node manager gives the long one the pair
    // when the short one exits.
    assert_eq!(fuses, [2, 1], "fuses in the notified and the not notified run");
}
