//! `dyncore bench sim`: how fast the simulator runs, in simulated events and
//! scheduler decisions per second of wall time.
//!
//! Configurations: the 24-CPU dynamic machine with a mixed workload (under
//! Chameleon and under the Linux-like policy), a 1024-CPU dynamic machine
//! (64 nodes × 16) with 4096 threads, and every shipped scenario. The floor
//! measured in the same run is a bare binary-heap event queue (push and pop
//! of (time, sequence) pairs, the simulator's own queue shape), so the report
//! can say how many times the floor one simulated event costs.
//!
//! Writes `<out>/bench-sim/{report.md, results.json, plot.png, plot.svg}`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use dyncore_sim::Scenario;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::bench::{Goal, goals_table};
use crate::plot::{BarChart, Series, write_bar_chart};
use crate::table::Table;

/// Goal of the foundation issue on the 2-core machine.
const GOAL_EVENTS_PER_S: f64 = 2.0e6;
/// Goal for the default run (every shipped scenario), wall seconds.
const GOAL_DEFAULT_RUN_S: f64 = 60.0;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Timed repetitions of each configuration (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// One repetition, a smaller large machine (256 CPUs, 1024 threads) and
    /// shorter work: a smoke run of a few seconds.
    #[arg(long)]
    pub quick: bool,
    /// Scenario folder for the "shipped scenarios" row (default: the shipped ones).
    #[arg(long)]
    pub scenarios: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
struct Row {
    config: String,
    /// CPUs and threads of the run (`≤N`: the largest of several runs).
    cpus: String,
    threads: String,
    runs: usize,
    events: u64,
    decisions: u64,
    /// Virtual time simulated, summed over runs (s).
    virtual_s: f64,
    /// Median wall time of one repetition (s).
    wall_s: f64,
    events_per_s: f64,
    decisions_per_s: f64,
    /// Wall ns per event divided by the event-queue floor's ns per event.
    x_floor: f64,
}

fn mix_24(policy: &str, work_scale: f64) -> String {
    let w = |ms: f64| ms * work_scale;
    format!(
        r#"name = "bench-24"
title = "24-CPU dynamic mix"
[[run]]
label = "mix"
machine = "dynamic"
policy = "{policy}"
[[run.workload]]
program = "mandelbrot-db"
threads = 24
work_ms = {}
[[run.workload]]
program = "fibonacci"
threads = 12
work_ms = {}
start_ms = 50
[[run.workload]]
program = "nqueen"
count = 3
work_ms = {}
tax = 1
[[run.workload]]
program = "gcc"
count = 2
work_ms = {}
start_ms = 200
[[run.workload]]
program = "sjeng"
count = 2
work_ms = {}
start_ms = 400
"#,
        w(48_000.0),
        w(12_000.0),
        w(4_000.0),
        w(4_000.0),
        w(4_000.0)
    )
}

/// A dynamic machine of `nodes` × 16 CPUs with 4 threads per CPU: half in
/// one dynamic-binding parallel program, a quarter in a task-parallel one,
/// the rest sequential programs asking for fused objects.
fn big(nodes: usize, work_scale: f64) -> String {
    let cpus = nodes * 16;
    let threads = 4 * cpus;
    let (mandel, fib) = (threads / 2, threads / 4);
    let seq = threads - mandel - fib;
    format!(
        r#"name = "bench-big"
title = "{cpus}-CPU dynamic machine"
[[run]]
label = "big"
machine = "dynamic"
policy = "chameleon"
nodes = {nodes}
cpus_per_node = 16
[[run.workload]]
program = "mandelbrot-db"
threads = {mandel}
work_ms = {}
[[run.workload]]
program = "fibonacci"
threads = {fib}
work_ms = {}
[[run.workload]]
program = "sjeng"
count = {}
work_ms = {}
[[run.workload]]
program = "gcc"
count = {}
work_ms = {}
start_ms = 100
"#,
        mandel as f64 * 200.0 * work_scale,
        fib as f64 * 200.0 * work_scale,
        seq / 2,
        400.0 * work_scale,
        seq - seq / 2,
        400.0 * work_scale,
    )
}

fn parse(text: &str) -> Result<Scenario> {
    let s = Scenario::from_toml(text).context("benchmark scenario")?;
    s.validate().map_err(|e| anyhow::anyhow!("benchmark scenario: {e}"))?;
    Ok(s)
}

/// What one repetition of a configuration simulated, summed over its runs
/// (CPUs and threads: the largest run's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Totals {
    runs: usize,
    events: u64,
    decisions: u64,
    virtual_ns: u64,
    max_cpus: usize,
    max_threads: u64,
}

/// Runs every run of every scenario once; returns what was simulated and
/// the wall time it took.
fn time_once(scenarios: &[Scenario]) -> (Totals, Duration) {
    let t0 = Instant::now();
    let mut t = Totals::default();
    for s in scenarios {
        for i in 0..s.runs.len() {
            let r = dyncore_sim::run_one(s, i).expect("benchmark runs fit the default event budget");
            assert!(r.finished, "benchmark run {} of {} did not finish", r.label, s.name);
            t.runs += 1;
            t.events += r.events;
            t.decisions += r.decisions;
            t.virtual_ns += r.end_ns;
            t.max_cpus = t.max_cpus.max(r.cpus);
            t.max_threads = t.max_threads.max(r.programs.iter().map(|p| u64::from(p.threads)).sum());
        }
    }
    (t, t0.elapsed())
}

/// ns per event of a bare binary-heap event queue holding `live` events,
/// each pop followed by one push (the steady state of a simulation).
fn queue_floor_ns(live: usize, ops: usize) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let mut h: BinaryHeap<Reverse<(u64, u64)>> = BinaryHeap::with_capacity(live + 1);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut seq = 0u64;
        for _ in 0..live {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            h.push(Reverse((x % 1_000_000, seq)));
            seq += 1;
        }
        let t0 = Instant::now();
        for _ in 0..ops {
            let Reverse((t, _)) = h.pop().expect("queue is never empty");
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            h.push(Reverse((t + x % 4_000_000, seq)));
            seq += 1;
        }
        black_box(&h);
        best = best.min(t0.elapsed().as_nanos() as f64 / ops as f64);
    }
    best
}

pub fn run(args: &Args, out: &Path) -> Result<()> {
    anyhow::ensure!(args.repeats >= 1, "--repeats must be at least 1");
    let repeats = if args.quick { 1 } else { args.repeats };
    let dir = out.join("bench-sim");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;

    // Work scales chosen so a full repetition of each configuration takes
    // on the order of a second on a 2-core machine.
    let (mix_scale, big_scale) = if args.quick { (2.0, 0.25) } else { (20.0, 2.0) };
    let big_nodes = if args.quick { 16 } else { 64 };
    let big_text = big(big_nodes, big_scale);
    let shipped: Vec<Scenario> =
        crate::load_all(args.scenarios.as_slice())?.into_iter().map(|(_, s)| s).collect();
    let configs: Vec<(String, Vec<Scenario>)> = vec![
        ("dynamic-24 chameleon".into(), vec![parse(&mix_24("chameleon", mix_scale))?]),
        ("dynamic-24 linux".into(), vec![parse(&mix_24("linux", mix_scale))?]),
        (format!("dynamic-{} chameleon", big_nodes * 16), vec![parse(&big_text)?]),
        (format!("all {} shipped scenarios", shipped.len()), shipped),
    ];

    let machine = crate::bench::machine_description();
    eprintln!("bench sim on {machine}; {repeats} repetition(s) per configuration");
    let pb = ProgressBar::new((configs.len() * repeats) as u64);
    pb.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}").expect("static template is valid"),
    );

    let floor = queue_floor_ns(4096, if args.quick { 200_000 } else { 2_000_000 });
    let mut rows = Vec::new();
    for (name, scs) in &configs {
        pb.set_message(name.clone());
        let mut walls = Vec::new();
        let mut first: Option<Totals> = None;
        for _ in 0..repeats {
            let (t, wall) = time_once(scs);
            // Determinism: every repetition simulates exactly the same thing.
            let first = *first.get_or_insert(t);
            anyhow::ensure!(t == first, "{name}: repetitions differ, the simulator is not deterministic");
            walls.push(u64::try_from(wall.as_nanos()).unwrap_or(u64::MAX));
            pb.inc(1);
        }
        let t = first.expect("at least one repetition");
        let wall = crate::bench::summarize(&walls).expect("at least one repetition").median_ns.max(1.0) / 1e9;
        // A configuration of several runs shows its largest machine and run.
        let at_most = if t.runs > 1 { "≤" } else { "" };
        rows.push(Row {
            config: name.clone(),
            cpus: format!("{at_most}{}", t.max_cpus),
            threads: format!("{at_most}{}", t.max_threads),
            runs: t.runs,
            events: t.events,
            decisions: t.decisions,
            virtual_s: t.virtual_ns as f64 / 1e9,
            wall_s: wall,
            events_per_s: t.events as f64 / wall,
            decisions_per_s: t.decisions as f64 / wall,
            x_floor: (wall * 1e9 / t.events.max(1) as f64) / floor,
        });
    }
    pb.finish_and_clear();

    let mut t = Table::new(
        format!("Simulator speed ({machine})"),
        &[
            "configuration",
            "CPUs",
            "threads",
            "runs",
            "events",
            "decisions",
            "virtual s",
            "wall s",
            "M events/s",
            "M decisions/s",
            "× queue floor",
        ],
    );
    for r in &rows {
        t.row(vec![
            r.config.clone(),
            r.cpus.clone(),
            r.threads.clone(),
            r.runs.to_string(),
            r.events.to_string(),
            r.decisions.to_string(),
            format!("{:.1}", r.virtual_s),
            format!("{:.3}", r.wall_s),
            format!("{:.2}", r.events_per_s / 1e6),
            format!("{:.2}", r.decisions_per_s / 1e6),
            format!("{:.1}", r.x_floor),
        ]);
    }
    println!("{}", t.to_terminal());

    let worst = rows.iter().map(|r| r.events_per_s).fold(f64::INFINITY, f64::min);
    let shipped_row = rows.last().expect("four configurations");
    let goals = [
        Goal::checked(
            format!("every configuration ≥ {:.0} M events/s", GOAL_EVENTS_PER_S / 1e6),
            format!("slowest {:.2} M events/s", worst / 1e6),
            worst >= GOAL_EVENTS_PER_S,
        ),
        Goal::checked(
            format!("default run (all shipped scenarios) under {GOAL_DEFAULT_RUN_S:.0} s"),
            format!("{:.3} s of simulation", shipped_row.wall_s),
            shipped_row.wall_s < GOAL_DEFAULT_RUN_S,
        ),
    ];
    let g = goals_table("Goals", &goals);
    println!("{}", g.to_terminal());

    let chart = BarChart {
        title: format!(
            "Simulator speed ({} CPUs available)",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ),
        y_label: "million per wall second".into(),
        categories: rows.iter().map(|r| r.config.clone()).collect(),
        series: vec![
            Series { name: "events".into(), values: rows.iter().map(|r| r.events_per_s / 1e6).collect() },
            Series {
                name: "scheduler decisions".into(),
                values: rows.iter().map(|r| r.decisions_per_s / 1e6).collect(),
            },
        ],
        log_y: false,
    };
    write_bar_chart(&dir.join("plot"), &chart)?;

    let cmd = format!(
        "cargo run --release -- bench sim{}{}",
        if args.quick { " --quick" } else { "" },
        if !args.quick && args.repeats != 3 { format!(" --repeats {}", args.repeats) } else { String::new() }
    );
    let mut md = String::new();
    writeln!(md, "# Simulator speed\n")?;
    writeln!(md, "Machine: {machine}. Command: `{cmd}`. Median of {repeats} repetition(s).\n")?;
    writeln!(
        md,
        "Events are the simulator's discrete events (ticks, task completions, arrivals, reconfigurations, \
         IPIs); decisions are scheduler decisions (picks, borrow checks, preemption checks). The queue floor is a \
         bare binary-heap event queue measured in the same run: {floor:.1} ns per event.\n"
    )?;
    writeln!(md, "{}\n", t.to_markdown())?;
    writeln!(md, "## Goals\n\n{}\n", g.to_markdown())?;
    writeln!(md, "![simulator speed](plot.png)")?;
    crate::report::write_file(&dir.join("report.md"), md.as_bytes())?;
    let json = serde_json::json!({
        "machine": machine,
        "command": cmd,
        "repeats": repeats,
        "queue_floor_ns_per_event": floor,
        "rows": rows,
        "goals": goals,
    });
    crate::report::write_file(&dir.join("results.json"), serde_json::to_string_pretty(&json)?.as_bytes())?;
    println!("report written to {}", dir.join("report.md").display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmark_scenarios_are_valid_and_sized_as_the_issue_asks() {
        let s = parse(&big(64, 1.0)).unwrap();
        // 64 nodes × 16 CPUs = 1024 CPUs, 4 threads per CPU = 4096 threads
        // (a sequential program has one).
        let threads: u32 = s.runs[0].workloads.iter().map(|w| w.count * w.threads.unwrap_or(1)).sum();
        assert_eq!(threads, 4096);
        assert_eq!(s.runs[0].nodes, Some(64));
        assert_eq!(s.runs[0].cpus_per_node, Some(16));
        parse(&mix_24("chameleon", 1.0)).unwrap();
        parse(&mix_24("linux", 1.0)).unwrap();
    }

    #[test]
    fn queue_floor_is_positive() {
        assert!(queue_floor_ns(64, 1000) > 0.0);
    }
}
