//! The `dyncore` command. With no arguments it runs every shipped scenario on
//! the simulator and writes a report folder (`out/`).
//!
//! Exit status: 0 on success, 2 for bad input (a scenario that does not
//! parse or validate, a missing file), 1 for any other failure.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use dyncore_sim::Scenario;
use indicatif::{ProgressBar, ProgressStyle};

mod bench;
mod bench_sim;
mod figure;
mod plot;
mod report;
mod scenarios;
mod stack_cmd;
mod table;
mod trace;

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
    /// Report folder.
    #[arg(long, global = true, default_value = "out")]
    out: PathBuf,
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
    /// A TCP stream through the NewtOS split network stack: throughput, per-component load, restarts.
    Stack(stack_cmd::Args),
}

#[derive(Debug, Default, clap::Args)]
struct RunArgs {
    /// Scenario files or folders (default: the shipped scenarios).
    files: Vec<PathBuf>,
    /// Override every scenario's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Print only the summary, not a table per scenario.
    #[arg(long, short)]
    quiet: bool,
}

/// Bad input: exit status 2.
#[derive(Debug)]
struct BadInput(Vec<scenarios::LoadError>);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
                write!(f, "error: ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for BadInput {}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match &cli.cmd {
        None => run(&RunArgs::default(), &cli.out),
        Some(Cmd::Run(a)) => run(a, &cli.out),
        Some(Cmd::Check { files }) => check(files),
        Some(Cmd::Bench(b)) => bench::run(b, &cli.out),
        Some(Cmd::Stack(a)) => stack_cmd::run(a),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            let bad =
                e.downcast_ref::<BadInput>().is_some() || e.downcast_ref::<stack_cmd::BadArgs>().is_some();
            if bad { ExitCode::from(2) } else { ExitCode::FAILURE }
        }
    }
}

/// Loads every scenario, reporting all bad files (not just the first).
pub(crate) fn load_all(files: &[PathBuf]) -> Result<Vec<(PathBuf, Scenario)>> {
    let paths = scenarios::discover(files).map_err(|e| BadInput(vec![e]))?;
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    for p in paths {
        match scenarios::load(&p) {
            Ok(s) => ok.push((p, s)),
            Err(e) => bad.push(e),
        }
    }
    if !bad.is_empty() {
        return Err(BadInput(bad).into());
    }
    let mut names = std::collections::BTreeMap::new();
    for (p, s) in &ok {
        if let Some(first) = names.insert(s.name.clone(), p.clone()) {
            return Err(BadInput(vec![scenarios::LoadError {
                file: p.clone(),
                at: None,
                field: Some("name".into()),
                message: format!(
                    "`{}` is also the name of {}; report folders would collide",
                    s.name,
                    first.display()
                ),
            }])
            .into());
        }
    }
    Ok(ok)
}

fn check(files: &[PathBuf]) -> Result<()> {
    let loaded = load_all(files)?;
    for (p, s) in &loaded {
        println!("ok  {}  ({}: {} runs)", p.display(), s.name, s.runs.len());
    }
    Ok(())
}

fn run(args: &RunArgs, out: &Path) -> Result<()> {
    let mut loaded = load_all(&args.files)?;
    if let Some(seed) = args.seed {
        for (_, s) in &mut loaded {
            s.seed = seed;
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating the report folder {}", out.display()))?;
    let total: usize = loaded.iter().map(|(_, s)| s.runs.len()).sum();
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs  {msg}")
            .expect("static template is valid"),
    );
    let mut written = Vec::new();
    let started = std::time::Instant::now();
    for (path, sc) in &loaded {
        bar.set_message(sc.name.clone());
        let base = bar.position();
        let result = dyncore_sim::run_scenario(sc, &mut |done, _| bar.set_position(base + done as u64));
        let fig = figure::Figure::build(sc, &result);
        let w = report::write_scenario(out, path, sc, &result, &fig)
            .with_context(|| format!("writing the report of {}", sc.name))?;
        if !args.quiet {
            bar.suspend(|| {
                println!(
                    "\n{}",
                    figure::comparison_table(&format!("{} — {}", sc.name, sc.title), &fig).to_terminal()
                );
                for r in result.runs.iter().filter(|r| !r.finished) {
                    println!("warning: run `{}` hit max_time_ns before every program finished", r.label);
                }
            });
        }
        written.push(w);
    }
    bar.finish_and_clear();
    report::write_index(out, &written)?;
    let compared: usize = written.iter().map(|w| w.compared).sum();
    let differing: usize = written.iter().map(|w| w.differing).sum();
    let n = |k: usize, what: &str| format!("{k} {what}{}", if k == 1 { "" } else { "s" });
    let diff_note = if compared == 0 {
        String::new()
    } else {
        format!(
            " {} compared with the paper, {} by more than 25% (see docs/results.md).",
            n(compared, "figure"),
            if differing == 1 { "1 differs".to_string() } else { format!("{differing} differ") }
        )
    };
    println!(
        "\n{}, {} in {:.1} s.{diff_note}",
        n(written.len(), "scenario"),
        n(total, "run"),
        started.elapsed().as_secs_f64(),
    );
    println!("Report: {}", out.join("index.md").display());
    Ok(())
}
