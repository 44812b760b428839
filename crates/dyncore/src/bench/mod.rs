//! `dyncore bench …`: benchmarks that report ratios against baselines measured
//! in the same run (these machines are shared and noisy), and write a report
//! (table + plot) into the report folder.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use clap::Subcommand;

use crate::table::Table;

pub mod reconfig;
pub mod sidecall;
pub mod stack;

#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// Simulator speed: events and scheduler decisions per second.
    Sim(crate::bench_sim::Args),
    /// Sidecalls against traps, futexes, pipes and peer queues, on this machine.
    Sidecall(sidecall::Args),
    /// Runtime CPU offline/online (naive vs Bolt) against Linux hotplug, cpusets, affinity.
    Reconfig(reconfig::Args),
    /// TCP streams: Linux loopback (B0) and the monolithic smoltcp stack (B1), in interleaved rounds.
    Stack(stack::Args),
}

pub fn run(cmd: &BenchCmd, out: &Path) -> Result<()> {
    match cmd {
        BenchCmd::Sim(a) => crate::bench_sim::run(a, out),
        BenchCmd::Sidecall(a) => sidecall::run(a, out),
        BenchCmd::Reconfig(a) => reconfig::run(a, out),
        BenchCmd::Stack(a) => stack::run(a, out),
    }
}

/// One line describing the machine a benchmark ran on, for reports.
pub fn machine_description() -> String {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let hv = if cpu_has_flag("hypervisor") { ", under a hypervisor" } else { "" };
    format!("{cpus} CPUs available, {model}{hv}, Linux {}", kernel_release())
}

/// Whether `/proc/cpuinfo` lists `flag` for the first CPU.
pub fn cpu_has_flag(flag: &str) -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("flags")).map(|l| l.split_whitespace().any(|f| f == flag))
        })
        .unwrap_or(false)
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default()
}

/// Order statistics of a sample of latencies.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Summary {
    pub n: usize,
    pub median_ns: f64,
    pub p99_ns: f64,
    pub min_ns: f64,
    pub max_ns: f64,
}

/// Median, p99 (nearest rank), min and max of `samples_ns`; `None` if empty.
pub fn summarize(samples_ns: &[u64]) -> Option<Summary> {
    if samples_ns.is_empty() {
        return None;
    }
    let mut s = samples_ns.to_vec();
    s.sort_unstable();
    Some(Summary {
        n: s.len(),
        median_ns: percentile(&s, 0.5),
        p99_ns: percentile(&s, 0.99),
        min_ns: s[0] as f64,
        max_ns: s[s.len() - 1] as f64,
    })
}

/// The `q` quantile (0 < q ≤ 1) of a sorted, non-empty sample, by nearest
/// rank: the smallest value with at least `q` of the sample at or below it.
pub fn percentile(sorted: &[u64], q: f64) -> f64 {
    sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1] as f64
}

/// A duration in whole nanoseconds (saturating).
pub fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A benchmark goal, checked against a figure measured in the same run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Goal {
    pub goal: String,
    pub measured: String,
    /// `None`: not measured in this run (`measured` says why).
    pub pass: Option<bool>,
}

impl Goal {
    pub fn checked(goal: impl Into<String>, measured: String, pass: bool) -> Goal {
        Goal { goal: goal.into(), measured, pass: Some(pass) }
    }

    pub fn not_measured(goal: impl Into<String>, why: impl Into<String>) -> Goal {
        Goal { goal: goal.into(), measured: why.into(), pass: None }
    }

    pub fn verdict(&self) -> &'static str {
        match self.pass {
            Some(true) => "PASS",
            Some(false) => "MISS",
            None => "not measured",
        }
    }
}

/// The goals as a table: goal, measured, verdict.
pub fn goals_table(title: &str, goals: &[Goal]) -> Table {
    let mut t = Table::new(title, &["goal", "measured", "verdict"]);
    for g in goals {
        t.row(vec![g.goal.clone(), g.measured.clone(), g.verdict().into()]);
    }
    t
}

#[cfg(test)]
mod summary_tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        // 1..=100: median is the 50th value, p99 the 99th.
        let v: Vec<u64> = (1..=100).rev().collect();
        let s = summarize(&v).unwrap();
        assert_eq!((s.n, s.median_ns, s.p99_ns, s.min_ns, s.max_ns), (100, 50.0, 99.0, 1.0, 100.0));
        // Three samples: median the 2nd, p99 the 3rd.
        let s = summarize(&[30, 10, 20]).unwrap();
        assert_eq!((s.median_ns, s.p99_ns), (20.0, 30.0));
        assert_eq!(summarize(&[]), None);
        // Quartiles of 1..=8: the 2nd, 4th and 6th values.
        let v: Vec<u64> = (1..=8).collect();
        assert_eq!([0.25, 0.5, 0.75].map(|q| percentile(&v, q)), [2.0, 4.0, 6.0]);
    }

    #[test]
    fn goals_table_gives_each_verdict() {
        let goals = [
            Goal::checked("a", "1×".into(), true),
            Goal::checked("b", "2×".into(), false),
            Goal::not_measured("c", "skipped"),
        ];
        let md = goals_table("Goals", &goals).to_markdown();
        assert!(md.contains("PASS") && md.contains("MISS") && md.contains("not measured"), "{md}");
        let j = serde_json::to_value(&goals).unwrap();
        assert_eq!(j[0]["pass"], true);
        assert_eq!(j[2]["pass"], serde_json::Value::Null);
    }
}
