//! `dyncore bench sim`: how fast the simulator runs, in simulated events and
//! scheduler decisions per second of wall time, and what the default run
//! costs beyond its simulation.
//!
//! Configurations: the 24-CPU dynamic machine with a mixed workload (under
//! Chameleon and under the Linux-like policy), a 1024-CPU dynamic machine
//! (64 nodes × 16) with 4096 threads, and every shipped scenario. The floor
//! measured in the same run is a bare binary-heap event queue (push and pop
//! of (time, sequence) pairs, the simulator's own queue shape), so the report
//! can say how many times the floor one simulated event costs. The *whole
//! default run* is the `dyncore run` a user starts (a child process of this
//! binary: loading, simulating, and writing reports, plots and traces into a
//! temporary folder; with one seed), timed against the simulation of the
//! same scenarios alone, with the same seed, in the same round.
//!
//! Every round runs each of these once, in an order that changes from round
//! to round; the simulator is deterministic, so every round must simulate
//! exactly the same events (checked).
//!
//! Writes `<out>/bench-sim/{report.md, results.json, plot.png, plot.svg}`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use dyncore_sim::Scenario;

use super::{Gate, Goal, ns, round_order};

mod report;
pub mod sweeps;
mod workloads;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Interleaved rounds: each configuration once per round (medians are reported).
    #[arg(long, default_value_t = 5, value_parser = crate::at_least_one)]
    pub rounds: usize,
    /// Two rounds, a smaller large machine (256 CPUs, 1024 threads) and
    /// shorter work: a smoke run of a few seconds.
    #[arg(long)]
    pub quick: bool,
    /// Scenario folder for the "shipped scenarios" row and the whole run (default: the shipped ones).
    #[arg(long)]
    pub scenarios: Option<PathBuf>,
    #[command(flatten)]
    pub gate: Gate,
}

/// One configuration and what each round measured of it.
pub struct Config {
    pub name: String,
    scenarios: Vec<Scenario>,
    /// What one round simulated (the same in every round).
    pub totals: Option<Totals>,
    pub walls_ns: Vec<u64>,
}

/// What a run measured.
pub struct Measured {
    pub configs: Vec<Config>,
    /// The queue floor, ns per event, per round.
    pub floor_ns: Vec<f64>,
    /// The whole default run's wall time, per round.
    pub whole_run_ns: Vec<u64>,
    /// The NewtOS model at scale: what one round simulated and its wall
    /// time per round.
    pub newtos: Option<NewtosRow>,
    /// One sweep run by the command (1 and 2 jobs) and by the Dask engine (1 and 2 workers).
    pub sweeps: sweeps::SweepRow,
    pub rounds: usize,
    /// Memory per simulated CPU and thread, measured in child processes
    /// (`dyncore_sim::memory`; not with `--quick`).
    pub memory: Option<Result<dyncore_sim::memory::Footprint, String>>,
}

/// The NewtOS network-stack model (`dyncore_sim::netstack::scale`): many
/// stacks placed by `dynamic` under a diurnal load, timed per round.
pub struct NewtosRow {
    pub name: String,
    /// Segments simulated in one round (the same in every round).
    pub packets: u64,
    pub events: u64,
    pub walls_ns: Vec<u64>,
}

/// The NewtOS scale configuration of this bench: `stacks` stacks with the
/// shipped Table 2 calibration, `dynamic` placement.
fn newtos_once(
    sc: &dyncore_sim::netstack::scenario::NetScenario,
    cfg: &dyncore_sim::netstack::scale::ScaleConfig,
) -> (u64, u64, Duration) {
    use dyncore_sim::netstack::scenario::PolicyName;
    let t0 = Instant::now();
    let o = dyncore_sim::netstack::scale::run(&sc.stack, &sc.net, cfg, PolicyName::Dynamic);
    (o.packets, o.events, t0.elapsed())
}

/// What one repetition of a configuration simulated, summed over its runs
/// (CPUs and threads: the largest run's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    pub runs: usize,
    pub events: u64,
    pub decisions: u64,
    pub virtual_ns: u64,
    pub max_cpus: usize,
    pub max_threads: u64,
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

pub fn run(args: &Args, out: &Path, registry: &dyncore_core::policies::Registry) -> Result<Vec<Goal>> {
    anyhow::ensure!(args.rounds >= 1, "--rounds must be at least 1");
    let rounds = if args.quick { args.rounds.min(2) } else { args.rounds };
    let dir = out.join("bench-sim");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let configs = configs(args, registry)?;
    let machine = super::machine_description();
    eprintln!("bench sim on {machine}; {rounds} interleaved round(s)");
    let floor_ops = if args.quick { 200_000 } else { 2_000_000 };
    let path = dyncore_report::newtos::default_dir().join("table2.toml");
    let net = dyncore_report::newtos::load(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let scale = dyncore_sim::netstack::scale::ScaleConfig {
        stacks: if args.quick { 4 } else { 16 },
        ..dyncore_sim::netstack::scale::ScaleConfig::default()
    };
    let sweep_size = if args.quick { sweeps::QUICK } else { sweeps::FULL };
    let mut m =
        measure_rounds(configs, rounds, floor_ops, args.scenarios.as_deref(), (&net, &scale), sweep_size)?;
    if !args.quick {
        eprintln!("memory probes: 4096 CPUs and 4096 threads, 2048 CPUs, 8192 threads");
        let exe = std::env::current_exe().context("finding this program for the memory probes")?;
        m.memory = Some(dyncore_sim::memory::measure(&exe, 4096, 4096));
    }
    let goals = report::write(&dir, &machine, &m)?;
    say!("report written to {}", dir.join("report.md").display());
    Ok(goals)
}

/// The configurations: the 24-CPU mix under both policies, the large
/// machine, and the shipped scenarios (last: the whole run is timed
/// against it).
fn configs(args: &Args, registry: &dyncore_core::policies::Registry) -> Result<Vec<Config>> {
    // Work scales chosen so a round of each configuration takes on the
    // order of a second on a 2-core machine.
    let (mix_scale, big_scale) = if args.quick { (2.0, 0.25) } else { (20.0, 2.0) };
    let big_nodes = if args.quick { 16 } else { 64 };
    let shipped: Vec<Scenario> = dyncore_run::runner::load_all(registry, args.scenarios.as_slice())?
        .into_iter()
        .map(|(_, s)| s)
        .collect();
    let config = |name: String, scenarios| Config { name, scenarios, totals: None, walls_ns: Vec::new() };
    Ok(vec![
        config(
            "dynamic-24 chameleon".into(),
            vec![workloads::parse(&workloads::mix_24("chameleon", mix_scale))?],
        ),
        config("dynamic-24 linux".into(), vec![workloads::parse(&workloads::mix_24("linux", mix_scale))?]),
        config(
            format!("dynamic-{} chameleon", big_nodes * 16),
            vec![workloads::parse(&workloads::big(big_nodes, big_scale))?],
        ),
        config(format!("all {} shipped scenarios", shipped.len()), shipped),
    ])
}

/// Each configuration, the queue floor and the whole default run once per
/// round, in an order that changes per round.
fn measure_rounds(
    mut configs: Vec<Config>,
    rounds: usize,
    floor_ops: usize,
    scenarios: Option<&Path>,
    (net, scale): (&dyncore_sim::netstack::scenario::NetScenario, &dyncore_sim::netstack::scale::ScaleConfig),
    sweep_size: sweeps::SweepSize,
) -> Result<Measured> {
    let n = configs.len();
    let units = n + 4;
    let mut sweep_row = sweeps::SweepRow {
        size: sweep_size,
        walls_ns: Default::default(),
        dask_startup_s: Vec::new(),
        dask_missing: None,
        table: None,
    };
    let python = sweeps::python();
    if let Err(why) = &python {
        eprintln!("sweep row: the Dask engine is not run: {why}");
        sweep_row.dask_missing = Some(why.clone());
    }
    let sweep_dir = std::env::temp_dir().join(format!("dyncore-bench-sim-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&sweep_dir).with_context(|| format!("creating {}", sweep_dir.display()))?;
    let _remove = RemoveOnDrop(sweep_dir.clone());
    let mut newtos = NewtosRow {
        name: format!(
            "NewtOS: {} stacks, {} flows, dynamic, diurnal load",
            scale.stacks,
            scale.stacks * scale.streams
        ),
        packets: 0,
        events: 0,
        walls_ns: Vec::new(),
    };
    let pb = indicatif::ProgressBar::new((rounds * units) as u64);
    pb.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
            .expect("static template is valid"),
    );
    let (mut floor_ns, mut whole_run_ns) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for u in round_order(units, round) {
            match configs.get_mut(u) {
                Some(c) => {
                    pb.set_message(c.name.clone());
                    let (t, wall) = time_once(&c.scenarios);
                    // Determinism: every round simulates exactly the same thing.
                    let first = *c.totals.get_or_insert(t);
                    anyhow::ensure!(
                        t == first,
                        "{}: rounds differ, the simulator is not deterministic",
                        c.name
                    );
                    c.walls_ns.push(ns(wall));
                }
                None if u == n => {
                    pb.set_message("event-queue floor");
                    floor_ns.push(queue_floor_ns(4096, floor_ops));
                }
                None if u == n + 3 => {
                    pb.set_message(format!("a {}-point sweep, four ways", sweep_row.size.points));
                    sweep_row.round(round, &sweep_dir, python.as_deref().ok())?;
                }
                None if u == n + 2 => {
                    pb.set_message("NewtOS model");
                    let (packets, events, wall) = newtos_once(net, scale);
                    anyhow::ensure!(
                        newtos.walls_ns.is_empty() || (packets, events) == (newtos.packets, newtos.events),
                        "NewtOS: rounds differ, the simulator is not deterministic"
                    );
                    (newtos.packets, newtos.events) = (packets, events);
                    newtos.walls_ns.push(ns(wall));
                }
                None => {
                    pb.set_message("whole default run");
                    whole_run_ns.push(ns(whole_run(scenarios)?));
                }
            }
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    Ok(Measured {
        configs,
        floor_ns,
        whole_run_ns,
        newtos: Some(newtos),
        sweeps: sweep_row,
        rounds,
        memory: None,
    })
}

/// Removes a temporary folder when dropped (also on an error's return).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `dyncore run --quiet --seeds 1` (this binary, as a user would) on
/// `scenarios` (default: the shipped Chameleon ones) into a temporary folder, and
/// returns its wall time. One seed, so that it does the same simulation as
/// the "simulation alone" it is timed against (the default run's several
/// seeds would multiply the simulation, not the overhead being measured).
fn whole_run(scenarios: Option<&Path>) -> Result<Duration> {
    let exe = std::env::current_exe().context("finding this program to time the whole run")?;
    let out = std::env::temp_dir().join(format!("dyncore-bench-sim-run-{}", std::process::id()));
    let mut cmd = std::process::Command::new(&exe);
    cmd.arg("--out").arg(&out).args(["run", "--quiet", "--seeds", "1"]);
    // The Chameleon scenarios only (the folder named, so that the NewtOS
    // scenarios of the default run stay out): the same scenarios as the
    // "simulation alone" row it is timed against. The NewtOS model has a
    // row of its own.
    cmd.arg(scenarios.map_or_else(dyncore_scenario::load::default_dir, Path::to_path_buf));
    let t0 = Instant::now();
    let o = cmd.output().with_context(|| format!("running {}", exe.display()));
    let wall = t0.elapsed();
    let _ = std::fs::remove_dir_all(&out);
    let o = o?;
    anyhow::ensure!(
        o.status.success(),
        "the whole default run ({} --out {} run --quiet --seeds 1) failed: {}",
        exe.display(),
        out.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    Ok(wall)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_floor_is_positive() {
        assert!(queue_floor_ns(64, 1000) > 0.0);
    }
}
