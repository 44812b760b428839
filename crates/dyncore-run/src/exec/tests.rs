use clap::Parser;

use super::*;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn args(line: &[&str]) -> Args {
    Cli::try_parse_from(std::iter::once("exec").chain(line.iter().copied())).unwrap().args
}

fn first_cpu() -> String {
    dyncore_runtime::affinity::allowed_cpus().unwrap().first().unwrap().to_string()
}

fn refused(line: &[&str]) -> String {
    match plan(&args(line), &Registry::builtin()) {
        Err(Refused(m)) => m,
        Ok(p) => panic!("accepted: {p:?}"),
    }
}

#[test]
fn parameters_are_typed_as_toml_would_type_them() {
    assert_eq!(parse_param("idle_ms=2").unwrap(), ("idle_ms".into(), ParamValue::Int(2)));
    assert_eq!(parse_param("x=2.5").unwrap(), ("x".into(), ParamValue::Float(2.5)));
    assert_eq!(parse_param("on=true").unwrap(), ("on".into(), ParamValue::Bool(true)));
    assert_eq!(parse_param("mode=bolt").unwrap(), ("mode".into(), ParamValue::Str("bolt".into())));
    assert!(parse_param("novalue").unwrap_err().contains("expected NAME=VALUE"));
    assert!(parse_param("=3").is_err());
}

#[test]
fn a_plan_takes_the_policy_the_cpus_and_the_thread_spec() {
    let cpu = first_cpu();
    let p = plan(
        &args(&[
            "--policy",
            "chameleon",
            "--cpus",
            &cpu,
            "--tax",
            "auto",
            "--class",
            "high",
            "--",
            "true",
            "-x",
        ]),
        &Registry::builtin(),
    )
    .unwrap();
    assert_eq!(p.policy, "chameleon");
    assert_eq!(p.cfg.cpus.len(), 1);
    assert_eq!((p.ctx.max_fuse, p.spec.want_cpus, p.spec.class), (1, 1, SpeedClass::High));
    assert_eq!(p.spec.tax, 1.0, "an object of one CPU borrows nothing");
    assert_eq!(p.argv, vec![OsString::from("true"), OsString::from("-x")]);
    assert!(p.cfg.controller_cpu.is_none_or(|c| c.to_string() != cpu));
}

#[test]
fn bad_arguments_are_refused_with_what_is_accepted() {
    let cpu = first_cpu();
    assert!(
        refused(&["--policy", "nope", "--cpus", &cpu, "true"])
            .contains("unknown policy `nope`; known policies:")
    );
    let m = refused(&["--policy", "chameleon", "--param", "idle_ms=2", "--cpus", &cpu, "true"]);
    assert!(m.starts_with("--param idle_ms:"), "{m}");
    assert!(refused(&["--policy", "linux", "--cpus", "0-", "true"]).contains("--cpus 0-: not a CPU list"));
    let m = refused(&["--policy", "linux", "--cpus", "4000", "true"]);
    assert!(m.contains("this process may not use CPU(s) 4000"), "{m}");
    let m = refused(&["--policy", "linux", "--cpus", &cpu, "--tax", "lots", "true"]);
    assert_eq!(m, "--tax lots: a number from 0 to 100, or auto");
    let m = refused(&["--policy", "linux", "--cpus", &cpu, "--max-fuse", "3", "true"]);
    assert_eq!(m, "--max-fuse 3: fused objects have 1, 2 or 4 CPUs");
    let m = refused(&["--policy", "linux", "--cpus", &cpu, "--mechanism", "magic", "true"]);
    assert!(m.starts_with("--mechanism: unknown mechanism `magic`"), "{m}");
    let m = refused(&["--policy", "linux", "--cpus", &cpu, "--baseline-duty", "0", "true"]);
    assert!(m.starts_with("--baseline-duty 0:"), "{m}");
    let m = refused(&["--policy", "linux", "--cpus", &cpu, "--trace", "/no/such/folder/t.json", "true"]);
    assert_eq!(m, "--trace /no/such/folder/t.json: folder /no/such/folder does not exist");
}

#[test]
fn a_baseline_duty_that_would_push_a_fused_object_past_a_whole_cpu_is_refused() {
    let cpus = dyncore_runtime::affinity::allowed_cpus().unwrap();
    if cpus.len() < 2 {
        return;
    }
    let list = cpus.to_string();
    let m = refused(&["--policy", "chameleon", "--cpus", &list, "--baseline-duty", "100", "true"]);
    assert!(m.contains("more than a whole CPU; lower it or pass --max-fuse 1"), "{m}");
    // Without fused objects, a whole CPU is the baseline.
    let ok = plan(
        &args(&[
            "--policy",
            "chameleon",
            "--cpus",
            &list,
            "--baseline-duty",
            "100",
            "--max-fuse",
            "1",
            "true",
        ]),
        &Registry::builtin(),
    )
    .unwrap();
    assert_eq!(ok.cfg.duty_scale.baseline, Duty::FULL);
}
