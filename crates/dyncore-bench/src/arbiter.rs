//! `dyncore bench arbiter`: what the arbiter itself costs a real program.
//!
//! Per interleaved round (the order alternates): a CPU-bound command (a
//! `sh` loop: one thread, no I/O, present on every Debian machine) alone on
//! one real CPU (`taskset`'s way: its affinity, the kernel's scheduler) and
//! under the arbiter on the same CPU with the `linux` policy at a 100%
//! baseline duty (so no quota: what is left is the arbiter's cost: the
//! process events, the tick rounds, the looks for sleep, the moves), the
//! controller on another CPU when there is one. Then a command that forks
//! 20 short processes, for the discovery latency (creation to `Spawn`).
//!
//! Reported: the overhead, the median over rounds of (wall under the
//! arbiter / wall alone) - 1, goal ≤ 3%; every round's ratio; the
//! actuation delay p50/p99 per mechanism over all rounds (a quota write, a
//! thread move into a CPU's group in every hierarchy, a freeze); discovery
//! p50/p99.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result, anyhow};
use dyncore_core::policies::Registry;
use dyncore_core::speed::Duty;
use dyncore_core::{CpuId, CpuSet};
use dyncore_runtime::arbiter::{
    Actuation, ArbiterRun, Ending, OneCpu, command_spec, quantile, run_alone, spare_cpu,
};
use dyncore_runtime::backend::DutyScale;

use super::stats::{median_f64, round_order};
use super::{Gate, Goal, goals_table};
use dyncore_report::report::write_file;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Interleaved rounds (at least 1).
    #[arg(long, default_value_t = 5, value_parser = crate::at_least_one)]
    pub rounds: usize,
    /// Iterations of the CPU-bound `sh` loop (about a second of CPU at the default).
    #[arg(long, default_value_t = 400_000)]
    pub iters: u64,
    /// The real CPU the command runs on (default: the last this process may use).
    #[arg(long)]
    pub cpu: Option<CpuId>,
    #[command(flatten)]
    pub gate: Gate,
}

fn argv(words: &[&str]) -> Vec<OsString> {
    words.iter().map(OsString::from).collect()
}

/// One arbiter run of `cmd` on `cpu` under `linux` at 100%.
fn under_arbiter(cmd: &[OsString], cpu: CpuId) -> Result<ArbiterRun> {
    let one = OneCpu {
        run_name: "bench",
        policy: "linux",
        cpu,
        tick_ns: 4_000_000,
        min_granularity_ns: 16_000_000,
        duty_scale: DutyScale { baseline: Duty::from_percent(100.0).map_err(|e| anyhow!("{e}"))? },
        weight: None,
    };
    let mut a = one.arbiter(&Registry::builtin()).map_err(|e| anyhow!("starting the arbiter: {e}"))?;
    a.start(cmd, command_spec()).map_err(|e| anyhow!("starting {cmd:?}: {e}"))?;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let r = a.run_until(u64::MAX, true, &stop);
    let run = a.finish(Ending::Wait);
    r.map_err(|e| anyhow!("the arbiter failed: {e}"))?;
    Ok(run)
}

fn wall_ns(run: &ArbiterRun) -> Result<u64> {
    let c = run.log.commands.first().ok_or_else(|| anyhow!("no command recorded"))?;
    let end = c.exited_ns.ok_or_else(|| anyhow!("the command was not reaped"))?;
    Ok(end - c.started_ns)
}

pub fn run(args: &Args, out: &Path) -> Result<Vec<Goal>> {
    let allowed = dyncore_runtime::affinity::allowed_cpus().context("reading this process's CPUs")?;
    let cpu = args.cpu.or_else(|| allowed.iter().last()).ok_or_else(|| anyhow!("no CPU allowed"))?;
    if !allowed.contains(cpu) {
        return Err(crate::stack_cmd::BadArgs(format!(
            "--cpu {cpu}: not a CPU this process may use ({allowed})"
        ))
        .into());
    }
    let _cpus = dyncore_runtime::testing::real_cpus();
    let set: CpuSet = [cpu].into_iter().collect();
    let script = format!("i=0; while [ $i -lt {} ]; do i=$((i+1)); done", args.iters);
    let burn = argv(&["sh", "-c", &script]);
    let forks = argv(&[
        "sh",
        "-c",
        "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do sleep 0.01 & done; wait",
    ]);
    let mut ratios = Vec::new();
    let mut actuation = Actuation::default();
    let mut discovery = Vec::new();
    for round in 0..args.rounds {
        let (mut alone, mut under) = (0u64, 0u64);
        for which in round_order(2, round) {
            if which == 0 {
                alone = run_alone(&burn, &set).map_err(|e| anyhow!("alone: {e}"))?.wall_ns;
            } else {
                let r = under_arbiter(&burn, cpu)?;
                under = wall_ns(&r)?;
                let a = &r.log.actuation;
                actuation.quota_write_ns.extend(&a.quota_write_ns);
                actuation.move_ns.extend(&a.move_ns);
                actuation.freeze_ns.extend(&a.freeze_ns);
                actuation.freeze_late += a.freeze_late;
            }
        }
        let f = under_arbiter(&forks, cpu)?;
        discovery
            .extend(f.log.threads.iter().filter_map(|t| t.spawned_mono_ns.checked_sub(t.created_mono_ns?)));
        let a = &f.log.actuation;
        actuation.move_ns.extend(&a.move_ns);
        actuation.freeze_ns.extend(&a.freeze_ns);
        let ratio = under as f64 / alone.max(1) as f64;
        println!(
            "  round {}: alone {:.1} ms, under the arbiter {:.1} ms ({:+.2}%)",
            round + 1,
            alone as f64 / 1e6,
            under as f64 / 1e6,
            (ratio - 1.0) * 100.0
        );
        ratios.push(ratio);
    }
    let overhead = median_f64(&mut ratios.clone()) - 1.0;
    discovery.sort_unstable();
    let us = |ns: u64| ns as f64 / 1e3;
    let goals = vec![Goal::checked(
        "the arbiter (linux policy, 100% duty) costs a CPU-bound command at most 3% of its wall time",
        format!("{:+.2}% (median of {} rounds)", overhead * 100.0, ratios.len()),
        overhead <= 0.03,
    )];
    let mut md = String::from("# bench arbiter: the cost of the arbiter to a real program\n\n");
    let _ = writeln!(
        md,
        "Machine: {}. Command: `{}`. The command: `sh -c '{script}'` on real CPU {cpu}; the controller on {}.\n",
        super::machine_description(),
        super::command_line(),
        spare_cpu(&set).map_or("the same CPU".into(), |c| format!("CPU {c}"))
    );
    let rounds: Vec<String> = ratios.iter().map(|r| format!("{:+.2}%", (r - 1.0) * 100.0)).collect();
    let _ = writeln!(md, "Overhead per round (under the arbiter / alone - 1): {}\n", rounds.join(", "));
    let _ = writeln!(md, "Actuation delay, all rounds:\n");
    for l in actuation.summary() {
        let _ = writeln!(md, "* {l}");
    }
    let _ = writeln!(
        md,
        "\nThread discovery (creation to `Spawn`): {} threads, p50 {:.1} µs, p99 {:.1} µs\n",
        discovery.len(),
        us(quantile(&discovery, 0.5)),
        us(quantile(&discovery, 0.99))
    );
    md += &goals_table("Goals", &goals).to_markdown();
    print!("{md}");
    let dir = out.join("bench-arbiter");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    write_file(&dir.join("report.md"), md.as_bytes())?;
    Ok(goals)
}
