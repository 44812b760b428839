//! The `dyncore` command line, as a library function: [`main`] parses the
//! arguments and calls the library crates. With no arguments it runs every
//! shipped scenario on the simulator and writes a report folder (`out/`).
//!
//! Exit status: 0 on success, 2 for bad input (a scenario that does not
//! parse or validate, a file that cannot be read as one, a run past its
//! event budget, an option that does not apply, a report folder that cannot
//! be written or is in use), 3 when the runs ran but no program of any of
//! them finished (the reports are written), 130 on Ctrl-C, 1 for any other
//! failure.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use dyncore_bench::stack_cmd;
use dyncore_core::policies::Registry;
use dyncore_run::{exec as exec_cmd, say};
use dyncore_sim::Scenario;

mod policies_cmd;
mod topology;
mod vm_cmd;

use dyncore_bench as bench;

#[derive(Debug, Parser)]
#[command(
    name = "dyncore",
    version,
    about = "OS support for specialised, heterogeneous and dynamic multicore processors",
    long_about = "OS support for specialised, heterogeneous and dynamic multicore processors.\n\n\
                  With no command, runs every shipped scenario (scenarios/*.toml) on the \
                  deterministic simulator and writes a report into the report folder (out/)."
)]
struct Cli {
    /// Report folder (default: out; `exec` writes one only when asked).
    #[arg(long, global = true, value_name = "DIR")]
    out: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run scenarios on the simulator and write their reports (default: every shipped scenario).
    Run(RunArgs),
    /// Validate scenario files without running them.
    Check {
        /// Scenario files or folders (default: the shipped scenarios).
        files: Vec<PathBuf>,
    },
    /// Benchmarks on this machine (ratios against baselines measured in the same run).
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// What the live backend finds on this machine: usable CPUs, cores, kinds, NUMA nodes.
    Topology(topology::TopologyArgs),
    /// Every registered policy: what it does, its parameters, the backends that run it.
    Policies,
    /// A TCP stream through the NewtOS split network stack: throughput, per-component load, restarts.
    Stack(stack_cmd::Args),
    /// Sweep a scenario's fields over a grid: every point × seed on all cores, one table
    /// (results.parquet, results.csv) and a summary with a plot per swept field; resumable.
    Sweep(SweepCmd),
    /// Run a command, unmodified, under a policy on real CPUs (its threads placed, throttled and
    /// fused through cgroups or affinity); its output, its exit status, then dyncore's summary.
    Exec(exec_cmd::Args),
    /// The VM rig: boot a small guest (a pinned sched_ext kernel, the topology asked for: CPUs,
    /// SMT threads, sockets, cgroup v1/v2) and run a command in it; `vm setup` first, once.
    #[command(subcommand)]
    Vm(vm_cmd::VmCmd),
}

#[derive(Debug, Default, clap::Args)]
#[command(allow_negative_numbers = true)]
struct RunArgs {
    /// Scenario files or folders (default: the shipped scenarios).
    files: Vec<PathBuf>,
    /// Override every scenario's seed.
    #[arg(long, value_parser = seed_value)]
    seed: Option<u64>,
    /// Run every run with N seeds: the seed, seed + 1, ..., seed + N - 1 (default: the scenario's
    /// `seeds`, else 5). Figures are reported as the median and the min-max range.
    #[arg(long, value_name = "N", value_parser = seeds_value)]
    seeds: Option<u32>,
    /// Print only the summary, not a table per scenario.
    #[arg(long, short)]
    quiet: bool,
    /// Where the runs run: the simulator, the live runtime (real threads on this machine's CPUs,
    /// each figure beside the simulator's prediction), or both in one report.
    #[arg(long, value_enum, default_value_t = Backend::Sim)]
    backend: Backend,
    /// Multiply every duration of the scenario by X (work, start times, tick, minimum
    /// granularity, safety stop), e.g. 0.25 for a live run four times shorter.
    #[arg(long, value_name = "X", value_parser = number_value)]
    time_scale: Option<f64>,
    /// Live: the duty cycle (percent) that stands for one baseline CPU; every duty the
    /// policy sets is scaled with it (default 50, Table 2's baseline).
    #[arg(long, value_name = "PERCENT", value_parser = number_value)]
    baseline_duty: Option<f64>,
    /// Live: the real CPUs to run on, a cpulist (default: every CPU this process may use).
    #[arg(long, value_name = "LIST")]
    real_cpus: Option<String>,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "The sweep file: docs/sweeps.md. Output: OUT/sweep-NAME/ (results.parquet, results.csv, \
                        report.md, by-*.png). Interrupted (Ctrl-C, a crash), the same command resumes: finished \
                        runs are kept in OUT/.sweep-NAME.parts/. Exit status: 0 done, 2 bad input, 130 on Ctrl-C (SIGTERM and SIGHUP stop it alike, keeping the finished runs)."
)]
struct SweepCmd {
    /// The sweep file (e.g. sweeps/tax-vs-node.toml).
    file: PathBuf,
    /// Worker threads (default: every CPU this process may use).
    #[arg(long, short, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    jobs: Option<u32>,
    /// Forget the runs an earlier, interrupted or finished, run of this sweep kept, and run them all.
    #[arg(long)]
    fresh: bool,
    /// No progress bar or plan line; only the summary line.
    #[arg(long, short)]
    quiet: bool,
    /// Print point N's scenario (the base with the point's values set) and exit; runs nothing.
    #[arg(long, value_name = "N")]
    show_point: Option<usize>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Backend {
    /// The deterministic simulator.
    #[default]
    Sim,
    /// The live runtime, with the simulator's prediction beside every figure.
    Live,
    /// Both, in one report.
    Both,
    /// Scenarios of real programs (`command` workloads) with each run's policy as the kernel's
    /// scheduler (sched_ext, through the separate dyncore-scx binary), beside the simulator's prediction.
    Scx,
}

/// `--seed`: in our words, not the parser's.
fn seed_value(s: &str) -> Result<u64, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a seed: a seed is a whole number from 0 to {}", u64::MAX))
}

/// `--seeds`: 1 to the most a scenario may ask for.
fn seeds_value(s: &str) -> Result<u32, String> {
    let max = Scenario::MAX_SEEDS;
    s.trim()
        .parse()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| format!("`{s}` is not a number of seeds: a whole number from 1 to {max}"))
}

/// A number (its range is checked where it is used, with the reason).
fn number_value(s: &str) -> Result<f64, String> {
    s.trim().parse::<f64>().map_err(|_| format!("`{s}` is not a number"))
}

impl RunArgs {
    /// The library's options.
    fn to_lib(&self) -> dyncore_run::RunArgs {
        dyncore_run::RunArgs {
            files: self.files.clone(),
            seed: self.seed,
            seeds: self.seeds,
            quiet: self.quiet,
            backend: match self.backend {
                Backend::Sim => dyncore_run::Backend::Sim,
                Backend::Live => dyncore_run::Backend::Live,
                Backend::Both => dyncore_run::Backend::Both,
                Backend::Scx => dyncore_run::Backend::Scx,
            },
            time_scale: self.time_scale,
            baseline_duty: self.baseline_duty,
            real_cpus: self.real_cpus.clone(),
        }
    }
}

/// The whole `dyncore` command with the policies of `registry`: what the
/// `dyncore` binary runs with [`Registry::builtin`], and what an
/// out-of-tree crate's binary runs with its own policies added
/// (`Registry::builtin().with(&MINE)`): `run`, `check`, `exec`, `sweep`,
/// `bench` and `policies` then know them. (`--backend scx` runs the
/// separate `dyncore-scx` binary, which has the built-in policies.)
/// Returns the exit status (module doc).
pub fn main(registry: Registry) -> ExitCode {
    // `bench sim`'s memory probes run this program as a child.
    dyncore_sim::memory::child_if_asked();
    let cli = Cli::parse();
    let out = cli.out.clone().unwrap_or_else(|| PathBuf::from("out"));
    let runner = dyncore_run::Runner::new(&out).with_registry(registry);
    let res = match &cli.cmd {
        // A simulator run has nothing to pass a signal on to: it ends at
        // once, removing what it was writing (the live and scx backends
        // handle signals themselves). Installed here, not in the library:
        // a program that runs dyncore keeps its own signal handling.
        None => {
            let _clean_exit = dyncore_run::interrupt::CleanExit::install();
            runner.run(&RunArgs::default().to_lib())
        }
        Some(Cmd::Run(a)) => {
            let _clean_exit =
                matches!(a.backend, Backend::Sim).then(dyncore_run::interrupt::CleanExit::install);
            runner.run(&a.to_lib())
        }
        Some(Cmd::Check { files }) => runner.check(files).map(|lines| {
            for l in lines {
                say!("{l}");
            }
        }),
        Some(Cmd::Bench(b)) => {
            let existed = out.exists();
            let r = dyncore_run::runner::open_out(&out).and_then(|held| {
                let r = bench::run(b, &out, runner.registry());
                drop(held);
                r
            });
            // Refused arguments create nothing: not even the folder the
            // report would have gone to (nor its lock).
            if r.as_ref().is_err_and(|e| e.downcast_ref::<stack_cmd::BadArgs>().is_some()) && !existed {
                let _ = std::fs::remove_file(out.join(".dyncore.lock"));
                let _ = std::fs::remove_dir(&out);
            }
            r
        }
        Some(Cmd::Topology(t)) => topology::run(t),
        Some(Cmd::Policies) => {
            say!("{}", policies_cmd::listing(runner.registry()));
            Ok(())
        }
        Some(Cmd::Stack(a)) => stack_cmd::run(a),
        Some(Cmd::Exec(a)) => return exec_cmd::main(a, cli.out.as_deref(), runner.registry()),
        Some(Cmd::Vm(v)) => return vm_cmd::main(v),
        Some(Cmd::Sweep(a)) => {
            let args = dyncore_sweep::SweepArgs {
                file: a.file.clone(),
                jobs: a.jobs.map(|j| j as usize),
                fresh: a.fresh,
                quiet: a.quiet,
                show_point: a.show_point,
            };
            let stop = dyncore_sweep::cmd::ctrl_c_flag();
            dyncore_sweep::cmd::run(runner.registry(), &out, &args, stop)
        }
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e)
            if e.downcast_ref::<dyncore_run::Interrupted>().is_some()
                || e.downcast_ref::<dyncore_sweep::Interrupted>().is_some() =>
        {
            eprintln!("{e}");
            let status = e.downcast_ref::<dyncore_run::Interrupted>().map(dyncore_run::Interrupted::status);
            let sweep =
                e.downcast_ref::<dyncore_sweep::Interrupted>().map(dyncore_sweep::Interrupted::status);
            ExitCode::from(status.or(sweep).unwrap_or(130))
        }
        Err(e) if e.downcast_ref::<dyncore_run::NothingFinished>().is_some() => {
            eprintln!("warning: {e}");
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            let bad = e.downcast_ref::<dyncore_run::BadInput>().is_some()
                || e.downcast_ref::<stack_cmd::BadArgs>().is_some();
            if bad { ExitCode::from(2) } else { ExitCode::FAILURE }
        }
    }
}
