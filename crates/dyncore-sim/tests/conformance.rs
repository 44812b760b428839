//! The policy half of the conformance tests, on every shipped scenario:
//! the simulator records each run's policy traffic; replaying the event
//! trace through a fresh policy, with no backend, gives the same action
//! trace byte for byte, the traffic keeps the boundary's contract, every
//! action the policy emitted is one its registry entry declares, and what
//! the simulator executed keeps to the actions (the execution checker,
//! which the simulator acts on at once: no slice runs past its window).

mod common;

use common::{load, shipped_names};
use dyncore_core::policy::contract::{Checker, check_replay};
use dyncore_core::policy::trace::{DecisionKind, decision_kinds, parse_actions, parse_events, replay};
use dyncore_scenario::policy::{policy_for, policy_info};
use dyncore_sim::machine::MachineSpec;
use dyncore_sim::run_checked;

/// The first line where two traces differ, for the failure message.
fn first_difference(a: &str, b: &str) -> String {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let i = la.iter().zip(&lb).position(|(x, y)| x != y).unwrap_or(la.len().min(lb.len()));
    format!("line {}: recorded {:?}, replayed {:?}", i + 1, la.get(i), lb.get(i))
}

#[test]
fn every_shipped_run_replays_byte_for_byte_and_keeps_the_contract() {
    let mut fused_somewhere = false;
    let (mut slices, mut offline) = (0, 0);
    for name in shipped_names() {
        let mut s = load(&name);
        s.record_policy_trace = true;
        for (i, spec) in s.runs.iter().enumerate() {
            let (run, verdict) = run_checked(&s, i).expect("within the event budget");
            assert!(verdict.ok() && verdict.lost == 0, "{name}/{}: {}", spec.label, verdict.summary());
            assert_eq!(verdict.stop.max_ns, 0, "{name}/{}: the simulator stops a thread at once", spec.label);
            (slices, offline) = (slices + verdict.slices, offline + verdict.offline.n);
            let trace = run.policy_trace.expect("recorded");
            let events = parse_events(&trace.events).unwrap_or_else(|e| panic!("{name}/{}: {e}", spec.label));
            assert!(!events.is_empty(), "{name}/{}: nothing recorded", spec.label);

            let replayed = replay(&events, &mut policy_for(&s, i));
            assert!(
                replayed == trace.actions,
                "{name}/{}: replay differs at {}",
                spec.label,
                first_difference(&trace.actions, &replayed)
            );

            let machine = MachineSpec::build(spec).expect("validated");
            let mut checker = Checker::with_speeds(machine.speed, machine.topology);
            check_replay(&events, &mut policy_for(&s, i), &mut checker)
                .unwrap_or_else(|e| panic!("{name}/{}: {e}", spec.label));

            let actions = parse_actions(&trace.actions).expect("parses");
            let info = policy_info(&s, i);
            for (_, a) in &actions {
                assert!(
                    info.emits(a.kind()),
                    "{name}/{}: policy {} emitted an undeclared {}",
                    spec.label,
                    info.name,
                    a.kind()
                );
            }
            let kinds = decision_kinds(actions.iter().map(|(_, a)| a));
            fused_somewhere |= kinds.contains(&DecisionKind::Fuse);
            if run.reconfig_mechanism == "none" {
                assert!(
                    !kinds.contains(&DecisionKind::Fuse),
                    "{name}/{}: fused without a mechanism",
                    spec.label
                );
            }
        }
    }
    assert!(fused_somewhere, "no shipped run fused: the test would check little");
    assert!(slices > 0 && offline > 0, "the execution checker saw {slices} slices and {offline} offlines");
}
