//! The simulator's model where it follows the paper in ways the shipped
//! figures do not show: IPIs flow only while a parallel program runs.

use dyncore_sim::{Scenario, run_one};

fn scenario(text: &str) -> Scenario {
    let s = Scenario::from_toml(text).expect("parses");
    s.validate().expect("valid");
    s
}

/// Two sequential programs from 0; in the second run, a 4-thread parallel
/// program with 8 s of work starting at 1 s (about 2 s on 4 CPUs).
const MIX: &str = r#"
name = "ipis"
title = "IPIs while a parallel program runs"
seed = 1
[[run]]
label = "sequential only"
machine = "uniform"
cpus_per_node = 8
policy = "chameleon"
[[run.workload]]
program = "nqueen"
count = 2
work_ms = 3000.0
[[run]]
label = "with a parallel program"
machine = "uniform"
cpus_per_node = 8
policy = "chameleon"
[[run.workload]]
program = "nqueen"
count = 2
work_ms = 3000.0
[[run.workload]]
program = "mandelbrot-db"
threads = 4
start_ms = 1000.0
work_ms = 8000.0
"#;

#[test]
fn ipis_flow_only_while_a_parallel_program_runs() {
    let s = scenario(MIX);
    // Sequential programs only: no IPIs, so the seed changes nothing.
    let alone = run_one(&s, 0);
    assert_eq!(alone.ipis, 0);
    let mut s2 = s.clone();
    s2.seed = 99;
    assert_eq!(serde_json::to_string(&run_one(&s2, 0)).unwrap(), serde_json::to_string(&alone).unwrap());
    // With a parallel program: 40 IPIs per CPU per second while it runs,
    // none before it starts or after it ends (a Poisson count: within 15%,
    // several standard deviations for ~1300 expected).
    let mixed = run_one(&s, 1);
    let par = mixed.programs.iter().find(|p| p.program == "mandelbrot-db").unwrap();
    let seconds = par.completion_ns.expect("finished") as f64 / 1e9;
    let expected = 40.0 * 8.0 * seconds;
    let got = mixed.ipis as f64;
    assert!((got - expected).abs() < 0.15 * expected, "{got} IPIs, expected about {expected:.0}");
    // The check discriminates: IPIs over the whole run would be a third more.
    let whole_run = 40.0 * 8.0 * mixed.end_ns as f64 / 1e9;
    assert!(whole_run > 1.3 * expected, "{whole_run} vs {expected}");
}
