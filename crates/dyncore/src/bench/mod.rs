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
