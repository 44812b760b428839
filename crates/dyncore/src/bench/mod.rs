//! `dyncore bench …`: benchmarks that report ratios against baselines measured
//! in the same run (these machines are shared and noisy), and write a report
//! (table + plot) into the report folder.

use std::path::Path;

use anyhow::Result;
use clap::Subcommand;

pub mod reconfig;
pub mod sidecall;

#[derive(Debug, Subcommand)]
pub enum BenchCmd {
    /// Simulator speed: events and scheduler decisions per second.
    Sim(crate::bench_sim::Args),
    /// Sidecalls against traps, futexes, pipes and peer queues, on this machine.
    Sidecall(sidecall::Args),
    /// Runtime CPU offline/online (naive vs Bolt) against Linux hotplug, cpusets, affinity.
    Reconfig(reconfig::Args),
}

pub fn run(cmd: &BenchCmd, out: &Path) -> Result<()> {
    match cmd {
        BenchCmd::Sim(a) => crate::bench_sim::run(a, out),
        BenchCmd::Sidecall(a) => sidecall::run(a, out),
        BenchCmd::Reconfig(a) => reconfig::run(a, out),
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
    // Nearest rank: the smallest value with at least q of the sample at or below it.
    let rank = |q: f64| s[((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1] as f64;
    Some(Summary {
        n: s.len(),
        median_ns: rank(0.5),
        p99_ns: rank(0.99),
        min_ns: s[0] as f64,
        max_ns: s[s.len() - 1] as f64,
    })
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
    }
}
