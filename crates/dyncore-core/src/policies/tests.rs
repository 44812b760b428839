//! The registry: names, parameters and capabilities.

use super::*;

static TEST_POLICY: PolicyEntry = PolicyEntry {
    info: PolicyInfo {
        name: "test-params",
        summary: "a policy with one parameter of each kind",
        params: &[
            Param {
                name: "idle_ms",
                doc: "ms",
                kind: ParamKind::Float { min: 0.0, max: 1000.0, default: 2.0 },
            },
            Param { name: "cpus", doc: "CPUs", kind: ParamKind::Int { min: 1, max: 8, default: 1 } },
            Param { name: "strict", doc: "", kind: ParamKind::Bool { default: false } },
            Param { name: "mode", doc: "", kind: ParamKind::Choice { choices: &["a", "b"], default: "a" } },
        ],
        events: &[EventKind::Spawn],
        actions: &[ActionKind::Dispatch, ActionKind::Place],
    },
    build: |ctx, p| (BUILTIN[0].build)(ctx, p),
};

fn given(v: &[(&str, ParamValue)]) -> Vec<(String, ParamValue)> {
    v.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

#[test]
fn the_builtin_policies_are_listed_by_name_and_unknown_names_list_them() {
    let r = Registry::builtin();
    assert!(r.names().starts_with(&["chameleon", "linux"]), "{:?}", r.names());
    let e = r.get("chameleo").unwrap_err();
    assert_eq!(e.to_string(), format!("unknown policy `chameleo`; known policies: {}", r.names().join(", ")));
    for e in r.entries() {
        assert!(!e.info.summary.is_empty() && !e.info.actions.is_empty() && !e.info.events.is_empty());
        Params::defaults(&e.info);
    }
}

#[test]
fn parameters_are_checked_and_defaults_filled_in() {
    let r = Registry::builtin().with(&TEST_POLICY);
    let p = r.validate("test-params", &given(&[("idle_ms", ParamValue::Int(5))])).unwrap();
    assert_eq!((p.f64("idle_ms"), p.i64("cpus"), p.bool("strict"), p.str("mode")), (5.0, 1, false, "a"));
    let bad = [
        ("idle_ms", ParamValue::Float(-1.0), "expected a number from 0 to 1000; found -1"),
        ("idle_ms", ParamValue::Float(f64::NAN), "expected a number from 0 to 1000; found NaN"),
        ("idle_ms", ParamValue::Str("x".into()), "expected a number from 0 to 1000; found \"x\""),
        ("cpus", ParamValue::Float(2.5), "expected a whole number from 1 to 8; found 2.5"),
        ("cpus", ParamValue::Int(9), "expected a whole number from 1 to 8; found 9"),
        ("strict", ParamValue::Int(1), "expected true or false; found 1"),
        ("mode", ParamValue::Str("c".into()), "expected one of a, b; found \"c\""),
        (
            "idel_ms",
            ParamValue::Int(1),
            "unknown parameter `idel_ms` of policy test-params; its parameters: idle_ms, cpus, strict, mode",
        ),
    ];
    for (name, v, want) in bad {
        let e = r.validate("test-params", &given(&[(name, v)])).unwrap_err();
        assert_eq!(e.param.as_deref(), Some(name));
        assert_eq!(e.message, want);
    }
    let e = r.validate("chameleon", &given(&[("x", ParamValue::Int(1))])).unwrap_err();
    assert_eq!(e.message, "unknown parameter `x`: policy chameleon takes none");
}

#[test]
#[should_panic(expected = "already registered")]
fn two_policies_of_one_name_are_refused() {
    let _ = Registry::builtin().with(&TEST_POLICY).with(&TEST_POLICY);
}

#[test]
fn a_backend_refuses_a_policy_that_may_emit_what_it_cannot_execute() {
    let e =
        Registry::refuse_unsupported(&TEST_POLICY.info, "simulator", &[ActionKind::Dispatch]).unwrap_err();
    assert!(e.contains("`place`") && e.contains("simulator"), "{e}");
    assert!(Registry::refuse_unsupported(&TEST_POLICY.info, "x", &ActionKind::ALL).is_ok());
}

/// The small policies (`pinned`, `greedy-fuse`, `park-idle`), fed events
/// by hand on a 4-CPU node that fuses, every call held to the contract.
mod small {
    use super::*;
    use crate::policy::contract::Checker;
    use crate::policy::{Action, CpuState, Event, ThreadSpec};
    use crate::speed::{SpeedClass, SpeedModel};
    use crate::topology::Topology;

    const MS: Nanos = 1_000_000;

    fn ctx() -> RunContext {
        RunContext {
            topology: Topology::uniform(1, 4),
            speed: SpeedModel::DYNAMIC,
            max_fuse: 4,
            tick_ns: MS,
            min_granularity_ns: 2 * MS,
            notify_on_exit: true,
            reconfig_mode: Mode::Bolt,
            seed: 1,
        }
    }

    fn spawn(thread: usize, want_cpus: usize) -> Event {
        let spec =
            ThreadSpec { nice: 0, tax: 1.0, want_cpus, weight: 1.0, affinity: None, class: SpeedClass::High };
        Event::Spawn { thread, spec }
    }

    /// A policy of the registry and the contract checker, with the speed model.
    struct Harness {
        policy: Box<dyn Policy + Send>,
        checker: Checker,
    }

    impl Harness {
        fn new(name: &str, given: &[(&str, ParamValue)]) -> Harness {
            let r = Registry::builtin();
            let params = r.validate(name, &super::given(given)).unwrap();
            let c = ctx();
            Harness {
                policy: r.build(name, &c, &params).unwrap(),
                checker: Checker::with_speeds(c.speed, c.topology),
            }
        }

        fn feed(&mut self, now: Nanos, e: Event) -> Vec<Action> {
            let mut out = Vec::new();
            self.policy.handle(now, &e, &mut out);
            self.checker.step(now, &e, &out).unwrap();
            self.policy.check().unwrap();
            out
        }

        /// Ticks every CPU at each ms from `from` to `to`; returns every action.
        fn ticks(&mut self, from: Nanos, to: Nanos) -> Vec<Action> {
            let mut all = Vec::new();
            for t in (from..=to).step_by(MS as usize) {
                for cpu in 0..4 {
                    all.extend(self.feed(t, Event::Tick { cpu }));
                }
            }
            all
        }
    }

    fn running(a: &[Action]) -> Vec<(usize, usize, usize)> {
        a.iter()
            .filter_map(|a| match a {
                Action::Dispatch { cpu, state: CpuState::Running { thread, object_cpus } } => {
                    Some((*cpu, *thread, *object_cpus))
                }
                _ => None,
            })
            .collect()
    }

    #[test]
    fn pinned_places_on_the_least_loaded_cpu_and_round_robins_there() {
        let mut h = Harness::new("pinned", &[]);
        for t in 0..4 {
            assert_eq!(running(&h.feed(0, spawn(t, 1))), [(t, t, 1)]);
        }
        // The fifth thread waits on CPU 0 (all loaded, the lowest on a tie).
        assert!(running(&h.feed(0, spawn(4, 1))).is_empty());
        // Before its slice is up, thread 0 keeps CPU 0; after it, thread 4 runs.
        assert!(running(&h.feed(MS, Event::Tick { cpu: 0 })).is_empty());
        assert_eq!(running(&h.feed(2 * MS, Event::Tick { cpu: 0 })), [(0, 4, 1)]);
        // CPU 1 empties; nobody moves there: pinned for life.
        let out = h.feed(3 * MS, Event::Exit { thread: 1 });
        assert_eq!(out, [Action::Dispatch { cpu: 1, state: CpuState::Idle }]);
        assert!(running(&h.ticks(4 * MS, 10 * MS)).iter().all(|&(cpu, ..)| cpu == 0));
    }

    #[test]
    fn greedy_fuse_borrows_only_cpus_idle_for_idle_ms_and_splits_on_a_wake_up() {
        let mut h = Harness::new("greedy-fuse", &[("idle_ms", ParamValue::Int(3))]);
        h.feed(0, spawn(0, 4)); // CPU 0
        h.feed(0, spawn(1, 1)); // CPU 1: busy, so no quad for thread 0
        h.feed(0, spawn(2, 2)); // CPU 2, wants a pair
        // CPU 3 idle since 0 and CPU 2 busy: thread 2 fuses the pair 2-3 at 3 ms.
        let out = h.ticks(MS, 2 * MS);
        assert!(!out.iter().any(|a| matches!(a, Action::Fuse { .. })), "{out:?}");
        let out = h.ticks(3 * MS, 3 * MS);
        let fused: Vec<_> = out.iter().filter(|a| matches!(a, Action::Fuse { .. })).collect();
        assert!(matches!(fused[..], [Action::Fuse { thread: 2, .. }]), "{out:?}");
        assert!(running(&out).contains(&(2, 2, 2)), "{out:?}");
        // Thread 1 exits: CPU 1 idle, but the quad 0-3 has busy CPUs (2-3
        // lent to thread 2): thread 0 fuses the pair 0-1 once CPU 1 has been
        // idle 3 ms, not before.
        h.feed(4 * MS, Event::Exit { thread: 1 });
        assert!(!h.ticks(5 * MS, 6 * MS).iter().any(|a| matches!(a, Action::Fuse { thread: 0, .. })));
        let out = h.ticks(7 * MS, 7 * MS);
        assert!(running(&out).contains(&(0, 0, 2)), "{out:?}");
        // A new thread wakes up on a lent CPU (none is idle): the first
        // object in CPU order is split, and the thread runs there.
        let out = h.feed(8 * MS, spawn(3, 1));
        assert!(matches!(out[..2], [Action::Split { thread: 0, .. }, Action::Online { .. }]), "{out:?}");
        assert!(running(&out).contains(&(1, 3, 1)) && running(&out).contains(&(0, 0, 1)), "{out:?}");
    }

    #[test]
    fn park_idle_parks_cpus_idle_for_idle_ms_keeps_one_online_and_wakes_one_on_demand() {
        let mut h = Harness::new("park-idle", &[("idle_ms", ParamValue::Int(2))]);
        h.feed(0, spawn(0, 1)); // CPU 0
        assert!(h.ticks(MS, MS).is_empty());
        // At 2 ms CPUs 1-3 have been idle 2 ms: parked in one bulk Offline.
        let out = h.ticks(2 * MS, 2 * MS);
        let parks: Vec<_> = out.iter().filter(|a| matches!(a, Action::Offline { .. })).collect();
        assert!(matches!(&parks[..], [Action::Offline { cpus, .. }] if cpus.len() == 3), "{out:?}");
        // Thread 0 exits: CPU 0 is the last online one and stays so.
        h.feed(3 * MS, Event::Exit { thread: 0 });
        assert!(!h.ticks(4 * MS, 20 * MS).iter().any(|a| matches!(a, Action::Offline { .. })));
        // Two threads: the first on CPU 0 (online, idle), the second wakes CPU 1.
        assert_eq!(running(&h.feed(21 * MS, spawn(1, 1))), [(0, 1, 1)]);
        let out = h.feed(21 * MS, spawn(2, 1));
        assert!(matches!(&out[0], Action::Online { cpus, .. } if cpus.iter().eq([1])), "{out:?}");
        assert_eq!(running(&out), [(1, 2, 1)]);
    }
}
