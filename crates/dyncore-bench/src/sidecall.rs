//! `dyncore bench sidecall`: sidecalls against the kernel's mechanisms and
//! peer queues, measured side by side in interleaved rounds on this
//! machine, plus the interrupt-virtualisation experiment (Sidecore paper,
//! Figure 4).
//!
//! Every round measures every round-trip row, every throughput
//! configuration and every interrupt configuration once, in an order that
//! changes from round to round (see [`crate::stats`]); goals are
//! ratios computed within each round.
//!
//! Writes `<out>/bench-sidecall/{report.md, results.json, latency.{png,svg},
//! transports.{png,svg}, irq-latency.{png,svg}, irq-redundant.{png,svg}}`.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use dyncore_core::{CpuId, CpuSet};
use dyncore_runtime::affinity::allowed_cpus;

use super::{Gate, Goal, RoundSpread, round_order};

mod calls;
mod irq;
mod measure;
mod report;
mod rows;

use calls::Cpus;
use irq::IrqRow;
use measure::Clock;
use rows::{Iters, Row};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Round trips per latency row, over all rounds (the futex, pipe, CPUID
    /// and mprotect rows take at most 50 000).
    #[arg(long, default_value_t = 200_000)]
    pub iters: u64,
    /// Interleaved rounds: every row is measured once per round.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// A run of a few seconds: 20 000 round trips per row, short throughput runs, 200 packets per guest count.
    #[arg(long)]
    pub quick: bool,
    /// CPU of the sidecore (server) threads; default: the last allowed CPU.
    #[arg(long)]
    pub server_cpu: Option<CpuId>,
    /// CPU of the measuring client thread; default: the first other allowed CPU.
    #[arg(long)]
    pub client_cpu: Option<CpuId>,
    /// Packets per interrupt-virtualisation configuration, over all rounds (default 2000, quick 200).
    #[arg(long)]
    pub irq_packets: Option<usize>,
    /// Seconds per throughput configuration, over all rounds (default 0.5, quick 0.1).
    #[arg(long)]
    pub throughput_secs: Option<f64>,
    #[command(flatten)]
    pub gate: Gate,
}

/// The most round trips a slow row (microseconds each) takes.
const SLOW_ITERS: u64 = 50_000;

/// Sidecore throughput of one configuration, round by round.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Tput {
    pub clients: usize,
    pub batched: bool,
    /// More client threads than free cores.
    pub oversubscribed: bool,
    pub requests_per_s_by_round: Vec<f64>,
    /// Median over the rounds (and its range).
    pub requests_per_s: Option<RoundSpread>,
}

/// Where and how much to measure, from the arguments and the machine.
pub struct Setup {
    pub machine: String,
    pub allowed: CpuSet,
    pub cpus: Cpus,
    pub two_cores: bool,
    pub hypervisor: bool,
    pub rounds: usize,
    pub iters: Iters,
    pub tput_per_round: Duration,
    pub irq_packets_per_round: usize,
    pub clock: Clock,
    pub skipped: Vec<String>,
}

impl Setup {
    fn new(args: &Args) -> Result<Setup> {
        if args.rounds == 0 {
            return Err(crate::stack_cmd::BadArgs("--rounds must be at least 1".into()).into());
        }
        let rounds = args.rounds;
        let total = if args.quick { args.iters.min(20_000) } else { args.iters };
        let per_round = |n: u64| n.div_ceil(rounds as u64).max(1);
        let tput = args.throughput_secs.unwrap_or(if args.quick { 0.1 } else { 0.5 });
        if !(tput > 0.0 && tput <= 3600.0) {
            let m =
                format!("--throughput-secs {tput:?}: expected a number of seconds above 0 and at most 3600");
            return Err(crate::stack_cmd::BadArgs(m).into());
        }
        let irq_packets = args.irq_packets.unwrap_or(if args.quick { 200 } else { 2000 });
        let allowed = allowed_cpus()?;
        let server = args.server_cpu.or(allowed.last()).context("no CPU allowed")?;
        let client = args.client_cpu.or_else(|| allowed.iter().find(|&c| c != server)).unwrap_or(server);
        for c in [server, client] {
            if !allowed.contains(c) {
                let m = format!("CPU {c} is not in this process's affinity mask ({allowed})");
                return Err(crate::stack_cmd::BadArgs(m).into());
            }
        }
        let two_cores = server != client;
        let mut skipped = Vec::new();
        if !two_cores {
            skipped.push(format!(
                "all cross-core round trips, throughput and the sidecore: only CPU {server} is usable, and a sidecore needs a core of its own"
            ));
        }
        Ok(Setup {
            machine: super::machine_description(),
            allowed,
            cpus: Cpus { client, server },
            two_cores,
            hypervisor: super::cpu_has_flag("hypervisor"),
            rounds,
            iters: Iters { fast: per_round(total), slow: per_round(total.min(SLOW_ITERS)) },
            tput_per_round: Duration::from_secs_f64(tput / rounds as f64),
            irq_packets_per_round: irq_packets.div_ceil(rounds).max(1),
            clock: Clock::calibrate(),
            skipped,
        })
    }
}

/// What a run measured.
pub struct Measured {
    pub rows: Vec<Row>,
    pub tput: Vec<Tput>,
    pub irq: Vec<IrqRow>,
}

pub fn run(args: &Args, out: &Path) -> Result<Vec<Goal>> {
    // The arguments first: a refused bench creates nothing.
    let mut setup = Setup::new(args)?;
    let dir = out.join("bench-sidecall");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    say!("dyncore bench sidecall — {}", setup.machine);
    say!(
        "allowed CPUs {}; server on CPU {}, client on CPU {}; {} rounds of {} round trips per row ({} for the slow rows)",
        setup.allowed,
        setup.cpus.server,
        setup.cpus.client,
        setup.rounds,
        setup.iters.fast,
        setup.iters.slow
    );
    say!("UMWAIT/TPAUSE (waitpkg): {}", report::waitpkg_text());
    let m = measure_rounds(&mut setup)?;
    let goals = report::write(&dir, &setup, &m)?;
    say!("report written to {}", dir.join("report.md").display());
    Ok(goals)
}

/// The throughput configurations: 1, 2 and 4 clients, unbatched and batched.
fn tput_configs(setup: &mut Setup) -> Vec<Tput> {
    if !setup.two_cores {
        return Vec::new();
    }
    let free = setup.allowed.len() - 1;
    if free < 4 {
        setup.skipped.push(format!(
            "throughput with more clients than free cores: only {free} core(s) besides the sidecore, so 2 and 4 clients share them (labelled oversubscribed)"
        ));
    }
    [1usize, 2, 4]
        .into_iter()
        .flat_map(|clients| {
            [false, true].map(|batched| Tput {
                clients,
                batched,
                oversubscribed: clients > free,
                requests_per_s_by_round: Vec::new(),
                requests_per_s: None,
            })
        })
        .collect()
}

/// Measures every row, throughput configuration and interrupt
/// configuration once per round, in an order that changes per round.
fn measure_rounds(setup: &mut Setup) -> Result<Measured> {
    let specs = rows::specs(setup.two_cores, setup.hypervisor, setup.iters);
    let mut rows: Vec<Row> = specs.iter().map(Row::new).collect();
    let mut tput = tput_configs(setup);
    let mut irq_rows = IrqRow::all();
    let steps = setup.rounds * (specs.len() + tput.len() + irq_rows.len());
    let bar = indicatif::ProgressBar::new(steps as u64).with_style(
        indicatif::ProgressStyle::with_template("round {msg:32} {bar:40} {pos}/{len} [{elapsed}]")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let client_cpus = setup.allowed.difference(&CpuSet::single(setup.cpus.server));
    for round in 0..setup.rounds {
        let of = format!("{}/{}", round + 1, setup.rounds);
        for i in round_order(specs.len(), round) {
            let spec = &specs[i];
            bar.set_message(format!("{of}: {}", spec.label));
            let s = rows::measure(spec.key, &setup.clock, spec.iters, setup.cpus)
                .with_context(|| format!("measuring {}", spec.what))?;
            rows[i].add(s);
            bar.inc(1);
        }
        for i in round_order(tput.len(), round) {
            let t = &mut tput[i];
            bar.set_message(format!("{of}: throughput, {} client(s)", t.clients));
            let r = calls::throughput(
                t.clients,
                t.batched,
                setup.tput_per_round,
                &client_cpus,
                setup.cpus.server,
            )?;
            t.requests_per_s_by_round.push(r);
            t.requests_per_s = RoundSpread::of(t.requests_per_s_by_round.clone());
            bar.inc(1);
        }
        for i in round_order(irq_rows.len(), round) {
            let r = &mut irq_rows[i];
            bar.set_message(format!("{of}: interrupts, {} guests", r.guests));
            r.measure_round(setup.irq_packets_per_round, setup.cpus.server, round)?;
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(Measured { rows, tput, irq: irq_rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_writes_a_report() {
        let _cpus = dyncore_runtime::testing::real_cpus();
        let dir = std::env::temp_dir().join(format!("dyncore-bench-sidecall-{}", std::process::id()));
        let args = Args {
            iters: 300,
            rounds: 2,
            quick: true,
            server_cpu: None,
            client_cpu: None,
            irq_packets: Some(40),
            throughput_secs: Some(0.02),
            gate: Gate::default(),
        };
        let goals = run(&args, &dir).unwrap();
        let d = dir.join("bench-sidecall");
        let md = std::fs::read_to_string(d.join("report.md")).unwrap();
        assert!(md.contains("## Goals") && md.contains("Interrupt virtualisation"), "{md}");
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("results.json")).unwrap()).unwrap();
        assert_eq!(j["irq"].as_array().unwrap().len(), irq::GUESTS.len() * irq::MODES.len());
        assert_eq!(j["rounds"], 2);
        for r in j["round_trips"].as_array().unwrap() {
            // Every row was measured in both rounds; its count is printed.
            assert_eq!(r["spread"]["rounds"], 2, "{r}");
            let n = r["spread"]["samples"].as_u64().unwrap();
            assert_eq!(n, 2 * r["iters_per_round"].as_u64().unwrap(), "{r}");
            assert!(md.contains(&format!("| {n} |")) || md.contains(&format!("{n} (")), "{n} in {md}");
        }
        if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
            assert!(goals.iter().any(|g| g.goal.contains("State") && g.expect != crate::goal::Expect::Pass));
        }
        for f in ["latency.png", "transports.svg", "irq-latency.png", "irq-redundant.svg"] {
            assert!(d.join(f).exists(), "{f}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
