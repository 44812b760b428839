//! The scenarios `bench sim` times besides the shipped ones: a 24-CPU
//! dynamic machine with a mixed workload, and a large dynamic machine.

use anyhow::{Context, Result};
use dyncore_sim::Scenario;
use dyncore_sim::large_mix::LargeMix;

/// The 24-CPU dynamic machine with a mix of parallel and sequential
/// programs under `policy`; `work_scale` scales every program's work.
pub fn mix_24(policy: &str, work_scale: f64) -> String {
    let w = |ms: f64| ms * work_scale;
    format!(
        r#"name = "sim-bench-24"
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
/// the rest sequential programs asking for fused objects (the mix of
/// [`dyncore_sim::large_mix`], the gcc programs starting at 100 ms).
pub fn big(nodes: usize, work_scale: f64) -> String {
    let cpus = nodes * 16;
    LargeMix {
        name: "sim-bench-big",
        title: &format!("{cpus}-CPU dynamic machine"),
        label: "big",
        nodes,
        threads: 4 * cpus,
        work_per_thread_ms: 200.0,
        sequential_work_ms: 400.0,
        work_scale,
        gcc_start_ms: Some(100),
    }
    .toml()
}

/// Parses and validates a benchmark scenario.
pub fn parse(text: &str) -> Result<Scenario> {
    let s = Scenario::from_toml(text).context("benchmark scenario")?;
    s.validate().map_err(|e| anyhow::anyhow!("benchmark scenario: {e}"))?;
    Ok(s)
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
}
