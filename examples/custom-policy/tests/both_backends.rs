//! The library API cannot rot: this crate's policy, registered beside the
//! built-in ones, validates, runs on the simulator through `dyncore::Runner`
//! with the outcome its rule implies, and runs live beside the simulator's
//! prediction where this machine permits (two CPUs, real-time priority).

use std::path::{Path, PathBuf};

use dyncore::runtime::testing::{Need, skip};
use dyncore::{Backend, Registry, RunArgs, Runner};

fn scenario() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenario.toml")
}

fn runner(out: &Path) -> Runner {
    Runner::new(out).with_registry(Registry::builtin().with(&custom_policy::POLICY))
}

/// Each run's (program label → speedup) in results.json: the first seed's
/// of a simulated report, the live runs' of a live one.
fn speedups(out: &Path) -> Vec<(String, Vec<(String, f64)>)> {
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("custom-first-fit/results.json")).unwrap()).unwrap();
    let runs = match j["results"].as_array() {
        Some(per_seed) => &per_seed[0]["runs"],
        None => &j["live"],
    };
    runs.as_array()
        .expect("runs")
        .iter()
        .map(|r| {
            let progs = r["programs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p["label"].as_str().unwrap().to_string(), p["speedup"].as_f64().unwrap()))
                .collect();
            (r["label"].as_str().unwrap().to_string(), progs)
        })
        .collect()
}

#[test]
fn the_policy_is_registered_validated_and_run_on_the_simulator() {
    let out = tempfile::tempdir().unwrap();
    let r = runner(out.path());
    assert!(r.registry().names().contains(&"first-fit"));
    // Without registering it, the scenario names an unknown policy.
    let e = Runner::new(out.path()).load(&scenario()).unwrap_err();
    assert!(e.to_string().contains("unknown policy `first-fit`; known policies: chameleon"), "{e}");
    r.run(&RunArgs { files: vec![scenario()], seeds: Some(1), quiet: true, ..RunArgs::default() }).unwrap();
    let runs = speedups(out.path());
    let long = |run: &str| {
        runs.iter().find(|(l, _)| l == run).unwrap().1.iter().find(|(p, _)| p == "long").unwrap().1
    };
    // first-fit never fuses: the long program runs on one baseline CPU, a
    // speedup of exactly 1; Chameleon fuses the pair once the short one
    // exits (1500 ms of work in 500 + 1000 / 1.5 ms).
    assert_eq!(long("first-fit"), 1.0);
    assert!(long("chameleon") > 1.2, "{runs:?}");
    assert!(out.path().join("index.html").is_file());
}

#[test]
fn a_parameter_the_policy_does_not_take_is_refused_with_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(scenario())
        .unwrap()
        .replace("policy = \"first-fit\"", "policy = { name = \"first-fit\", idle_ms = 2 }");
    let p = dir.path().join("bad.toml");
    std::fs::write(&p, text).unwrap();
    let e = runner(dir.path()).load(&p).unwrap_err().to_string();
    assert!(e.contains("bad.toml:") && e.contains("run[1].policy.idle_ms"), "{e}");
    assert!(e.contains("unknown parameter `idle_ms`: policy first-fit takes none"), "{e}");
}

#[test]
fn the_policy_runs_live_beside_the_simulator_where_this_machine_permits() {
    let _cpus = dyncore::runtime::testing::real_cpus();
    let allowed = dyncore::runtime::affinity::allowed_cpus().unwrap();
    let rt =
        std::thread::spawn(|| dyncore::runtime::affinity::set_current_thread_realtime(1)).join().unwrap();
    if allowed.len() < 2 || rt.is_err() {
        let need = if allowed.len() < 2 { Need::Cpus(2) } else { Need::Root };
        skip(need, &format!("a live run needs 2 CPUs and real-time priority ({allowed}, {rt:?})"));
        return;
    }
    let out = tempfile::tempdir().unwrap();
    runner(out.path())
        .run(&RunArgs {
            files: vec![scenario()],
            backend: Backend::Both,
            time_scale: Some(0.2),
            quiet: true,
            ..RunArgs::default()
        })
        .unwrap();
    let md = std::fs::read_to_string(out.path().join("custom-first-fit/report.md")).unwrap();
    assert!(md.contains("first-fit") && md.contains("Live beside the simulator"), "{md}");
    let live = speedups(out.path());
    assert!(live.iter().any(|(l, _)| l == "first-fit"), "{live:?}");
}
