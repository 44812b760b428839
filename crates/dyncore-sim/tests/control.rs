//! The event budget and in-run progress of `run_scenario`.

use dyncore_sim::{RunProgress, Scenario, Watch, run_quietly, run_scenario};

const TWO_RUNS: &str = r#"
name = "t"
title = "t"
[[run]]
label = "a"
machine = "uniform"
policy = "chameleon"
[[run.workload]]
program = "fibonacci"
work_ms = 400
[[run]]
label = "b"
machine = "uniform"
policy = "linux"
[[run.workload]]
program = "gcc"
work_ms = 300
"#;

fn scenario(text: &str) -> Scenario {
    let s = Scenario::from_toml(text).unwrap();
    s.validate().unwrap();
    s
}

#[test]
fn progress_is_reported_within_runs_in_order_and_once_at_each_end() {
    let s = scenario(TWO_RUNS);
    let mut seen: Vec<RunProgress> = Vec::new();
    let result = run_scenario(&s, &mut Watch { every_events: 16, report: &mut |p| seen.push(*p) }).unwrap();
    let done: Vec<&RunProgress> = seen.iter().filter(|p| p.done).collect();
    assert_eq!(done.len(), 2, "one final report per run");
    for (i, run) in result.runs.iter().enumerate() {
        let mine: Vec<&RunProgress> = seen.iter().filter(|p| p.run == i).collect();
        assert!(mine.iter().all(|p| p.runs == 2 && p.max_events == s.sim.max_events));
        // Every 16 events, then the end.
        assert_eq!(mine.len() as u64, run.events / 16 + 1, "run {i}");
        assert!(
            mine.windows(2).all(|w| (w[0].events < w[1].events || w[1].done) && w[0].now_ns <= w[1].now_ns)
        );
        let last = mine.last().unwrap();
        assert!(last.done && last.events == run.events && last.now_ns == run.end_ns);
    }
    // Reports follow the runs' order.
    assert!(seen.windows(2).all(|w| w[0].run <= w[1].run));
    // Watching changes nothing in the results.
    let quiet = run_quietly(&s).unwrap();
    assert_eq!(serde_json::to_string(&quiet).unwrap(), serde_json::to_string(&result).unwrap());
}

#[test]
fn the_event_budget_stops_a_run_and_names_the_field() {
    let s = scenario(TWO_RUNS);
    let full = run_quietly(&s).unwrap();
    let need = full.runs[0].events;
    // A budget of exactly what run 0 needs is enough.
    let mut exact = s.clone();
    exact.sim.max_events = need.max(full.runs[1].events);
    assert!(run_quietly(&exact).is_ok());
    // One fewer, and run 0 stops, with the field to change.
    let mut short = s.clone();
    short.sim.max_events = need - 1;
    let e = run_quietly(&short).unwrap_err();
    assert_eq!((e.run, e.label.as_str(), e.max_events), (0, "a", need - 1));
    assert_eq!(e.field(), vec!["sim", "max_events"]);
    assert!(e.now_ns < full.runs[0].end_ns);
    assert!(e.to_string().contains("raise `max_events`"), "{e}");
    // A run's own budget is the one named when it sets one.
    let mut own = s.clone();
    own.runs[1].sim.max_events = Some(3);
    let e = run_quietly(&own).unwrap_err();
    assert_eq!(e.run, 1);
    assert_eq!(e.field(), vec!["run", "1", "sim", "max_events"]);
}
