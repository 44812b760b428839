//! The simulator's model where it follows the paper in ways the shipped
//! figures do not show: IPIs flow only while a parallel program runs;
//! sequential programs beyond the idle CPUs do not take a parallel
//! program's CPUs; the tax rate is a continuous, monotone share.

use dyncore_core::policy::trace::parse_actions;
use dyncore_core::policy::{Action, CpuState};
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
    let alone = run_one(&s, 0).expect("within the event budget");
    assert_eq!(alone.ipis, 0);
    let mut s2 = s.clone();
    s2.seed = 99;
    assert_eq!(
        serde_json::to_string(&run_one(&s2, 0).expect("within the event budget")).unwrap(),
        serde_json::to_string(&alone).unwrap()
    );
    // With a parallel program: 40 IPIs per CPU per second while it runs,
    // none before it starts or after it ends (a Poisson count: within 15%,
    // several standard deviations for ~1300 expected).
    let mixed = run_one(&s, 1).expect("within the event budget");
    let par = mixed.programs.iter().find(|p| p.program == "mandelbrot-db").unwrap();
    let seconds = par.completion_ns.expect("finished") as f64 / 1e9;
    let expected = 40.0 * 8.0 * seconds;
    let got = mixed.ipis as f64;
    assert!((got - expected).abs() < 0.15 * expected, "{got} IPIs, expected about {expected:.0}");
    // The check discriminates: IPIs over the whole run would be a third more.
    let whole_run = 40.0 * 8.0 * mixed.end_ns as f64 / 1e9;
    assert!(whole_run > 1.3 * expected, "{whole_run} vs {expected}");
}

/// Figure 6's mix with more sequential programs than the 8 idle CPUs can
/// hold as pairs: 5 and 6 N-Queens beside a 16-thread parallel program.
fn crowded(count: u32, tax: f64) -> Scenario {
    scenario(&format!(
        r#"
name = "crowded"
title = "Figure 6's mix, crowded"
[[run]]
label = "run"
machine = "dynamic"
policy = "chameleon"
[[run.workload]]
program = "mandelbrot-db"
threads = 16
work_ms = 64000.0
[[run.workload]]
program = "nqueen"
count = {count}
tax = {tax}
"#
    ))
}

#[test]
fn sequential_programs_beyond_the_idle_cpus_never_take_the_parallel_programs_cpus() {
    // §4.3.5: when demand exceeds the idle supply the node manager splits
    // the largest objects, and what is left runs on one idle CPU; it does
    // not overlay CPUs busy with the parallel program. So, at any tax rate,
    // the parallel program loses none of its CPUs: less than any share a
    // tax would allow.
    for count in [5, 6] {
        for tax in [0.01, 1.0, 100.0] {
            let mut s = crowded(count, tax);
            s.record_policy_trace = true;
            let run = run_one(&s, 0).expect("within the event budget");
            let trace = run.policy_trace.as_ref().expect("recorded");
            let actions = parse_actions(&trace.actions).expect("parses");
            // The parallel program's 16 threads are spawned first: ids 0-15.
            let parallel = |t: usize| t < 16;
            let mut state: Vec<CpuState> = vec![CpuState::Idle; run.cpus];
            let mut fuses = 0;
            for (t, a) in &actions {
                match a {
                    Action::Dispatch { cpu, state: st } => state[*cpu] = *st,
                    Action::Fuse { object, .. } => {
                        fuses += 1;
                        for c in object.borrowed.iter() {
                            assert!(
                                !matches!(state[c], CpuState::Running { thread, .. } if parallel(thread)),
                                "{count} N-Queens, tax {tax}: the fuse of {object} at {t} ns takes CPU {c} from the \
                                 parallel program"
                            );
                        }
                    }
                    _ => {}
                }
            }
            assert!(fuses >= 3, "{count} N-Queens, tax {tax}: only {fuses} fuses");
            let par = run.programs.iter().find(|p| p.program == "mandelbrot-db").unwrap();
            assert!(par.speedup.unwrap() > 15.9, "{count}, tax {tax}: parallel at {:?}", par.speedup);
        }
    }
}

/// Two workloads with the same label are told apart in timelines and
/// traces: `N#1` and `N#2`, not `N#1` twice.
#[test]
fn programs_sharing_a_label_get_distinct_names() {
    let s = scenario(
        r#"
name = "names"
title = "same label"
[[run]]
label = "a"
machine = "uniform"
policy = "chameleon"
[[run.workload]]
program = "nqueen"
label = "N"
work_ms = 100.0
[[run.workload]]
program = "gcc"
label = "N"
work_ms = 100.0
"#,
    );
    let run = run_one(&s, 0).expect("within the event budget");
    let mut names: Vec<&str> =
        run.allocation.iter().flat_map(|a| a.cpus_by_program.iter().map(|(n, _)| &**n)).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names, ["N#1", "N#2"]);
}

/// Figure 3's two tasks at `tax`: task B pinned on the CPU task A's pair
/// would borrow.
fn fig3_at(tax: impl std::fmt::Display) -> Scenario {
    scenario(&format!(
        r#"
name = "fig3"
title = "Figure 3"
[[run]]
label = "run"
machine = "uniform"
cpus_per_node = 2
max_fuse = 2
policy = "chameleon"
[[run.workload]]
program = "nqueen"
label = "B"
seq_level = 0
pin = "1"
[[run.workload]]
program = "nqueen"
label = "A"
seq_level = 1
tax = {tax}
"#
    ))
}

/// Chameleon §4.3.3: the tax rate "can act as a share". In Figure 3's
/// setting task A borrows task B's CPU for a share 1 / (1 + tax) of the
/// time both run (`sched::tax`): continuous and monotone from 0.01 to 100,
/// with no threshold anywhere; tax 100 is about 1% ("sticks with native
/// execution": both about 1.0).
#[test]
fn the_borrowed_share_is_continuous_and_monotone_in_the_tax() {
    let mut last: Option<(f64, f64)> = None;
    for i in 0..=16 {
        // 17 rates from 0.01 to 100, evenly spaced in log.
        let tax = 0.01 * 10f64.powf(f64::from(i) / 4.0);
        let run = run_one(&fig3_at(tax), 0).expect("within the event budget");
        let a = run.programs.iter().find(|p| p.label == "A").unwrap();
        let share = a.fused_ns as f64 / a.completion_ns.unwrap() as f64;
        let expected = 1.0 / (1.0 + tax);
        assert!((share - expected).abs() < 0.01, "tax {tax}: share {share}, 1 / (1 + tax) = {expected}");
        if let Some((t0, s0)) = last {
            assert!(share < s0, "tax {t0} -> {tax}: share {s0} -> {share} does not fall");
            // No jump: a step of 10^0.25 in the rate moves the share by no
            // more than the formula's largest step (0.14 around tax 1) plus slack.
            assert!(s0 - share < 0.16, "tax {t0} -> {tax}: share {s0} -> {share} jumps");
        }
        last = Some((tax, share));
    }
    // Tax 100: about 1% of B's CPU; both tasks about 1.0.
    let run = run_one(&fig3_at(100.0), 0).expect("within the event budget");
    for p in &run.programs {
        let t = p.relative_time.unwrap();
        assert!((t - 1.0).abs() < 0.02, "{}: {t}", p.label);
    }
    assert!(run.reconfig.fuses > 0, "tax 100 still borrows, about 1% of the time");
    // `tax = "auto"`: N-Queen (high class) on a pair runs at 1.5x, so the
    // rate is (2 - 1) / (1.5 - 1) = 2: a third of B's CPU.
    let run = run_one(&fig3_at("\"auto\""), 0).expect("within the event budget");
    let a = run.programs.iter().find(|p| p.label == "A").unwrap();
    let share = a.fused_ns as f64 / a.completion_ns.unwrap() as f64;
    assert!((share - 1.0 / 3.0).abs() < 0.01, "auto: share {share}");
}
