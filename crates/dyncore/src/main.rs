//! The `dyncore` command. With no arguments it runs every shipped scenario on
//! the simulator and writes a report folder (`out/`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod bench_sim;
mod plot;
mod table;

#[derive(Debug, Parser)]
#[command(
    name = "dyncore",
    version,
    about = "OS support for specialised, heterogeneous and dynamic multicore processors"
)]
struct Cli {
    /// Report folder.
    #[arg(long, global = true, default_value = "out")]
    out: PathBuf,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Benchmarks on this machine (ratios against baselines measured in the same run).
    #[command(subcommand)]
    Bench(bench::BenchCmd),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match &cli.cmd {
        None => Ok(()),
        Some(Cmd::Bench(b)) => bench::run(b, &cli.out),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
