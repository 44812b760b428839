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
