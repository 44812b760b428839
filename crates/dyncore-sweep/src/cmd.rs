//! `dyncore sweep FILE --out DIR --jobs N`: load and validate every point,
//! take the report folder, run what is not done yet (progress bar: units,
//! points done, rate, time left), then write the table and the summary.
//!
//! Exit status (through `main`): 0 done, 2 bad input (the sweep file, a
//! point, a run past its event budget), 130 on Ctrl-C (the units finished so
//! far are kept: the same command resumes).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result};
use dyncore_core::policies::Registry;
use dyncore_scenario::load::LoadError;
use indicatif::{ProgressBar, ProgressStyle};

use super::exec::{self, Options, Row};
use super::{SweepArgs, summary, table};
use dyncore_run::BadInput;

/// A sweep stopped by a signal (SIGINT, SIGTERM or SIGHUP): exit 128 +
/// the signal (130, 143, 129), as `run` and `exec` give; the finished
/// units are kept.
#[derive(Debug)]
pub struct Interrupted {
    pub done: usize,
    pub total: usize,
    /// The signal that stopped it.
    pub signal: i32,
}

impl Interrupted {
    /// The exit status: 128 + the signal.
    pub fn status(&self) -> u8 {
        dyncore_runtime::arbiter::signal_status(self.signal)
    }
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "interrupted: {} of {} runs done and kept; run the same command again to resume",
            self.done, self.total
        )
    }
}

impl std::error::Error for Interrupted {}

/// Where the parts of sweep `name` live: beside its report folder, hidden.
pub fn parts_dir(out: &Path, folder: &str) -> PathBuf {
    out.join(format!(".{folder}.parts"))
}

/// Rows of units this process has in hand, by unit (point, seed): each
/// unit's rows exactly as its part on disk holds them (the part was
/// written from them, or they were read from its bytes).
pub type InHand = std::collections::HashMap<(usize, u64), Vec<Row>>;

/// The rows of every unit: those in hand, the rest read back from their
/// parts (all present). Reading back only what is not in hand spares a
/// sweep's end a read of every part it has just written.
pub fn collect(sweep: &super::Sweep, dir: &Path, mut in_hand: InHand) -> Result<Vec<(usize, u64, Vec<Row>)>> {
    sweep
        .units()
        .into_iter()
        .map(|(p, s)| {
            let rows = match in_hand.remove(&(p, s)) {
                Some(rows) => rows,
                None => exec::read_part(dir, sweep, p, s).with_context(|| {
                    format!("the part of point {p}, seed {s} is missing or not this sweep's")
                })?,
            };
            Ok((p, s, rows))
        })
        .collect()
}

/// What a (re)start of a sweep whose parts are in a folder runs: every
/// unit without a part that is its own, how many are kept, and, by why,
/// how many parts of an earlier run are not this sweep's any more. The same
/// for every engine (the command, Python's local and Dask engines), so any
/// of them resumes a sweep folder any other began.
#[derive(Debug, Clone, Default)]
pub struct Resume {
    pub todo: Vec<(usize, u64)>,
    pub kept: usize,
    pub stale: std::collections::BTreeMap<exec::Stale, usize>,
}

impl Resume {
    /// The resume of `sweep` from the parts in `parts`.
    pub fn of(sweep: &super::Sweep, parts: &Path) -> Resume {
        let mut r = Resume::default();
        for (p, s) in sweep.units() {
            match exec::check_part(parts, sweep, p, s) {
                Ok(Some(_)) => r.kept += 1,
                Ok(None) => r.todo.push((p, s)),
                Err(why) => {
                    *r.stale.entry(why).or_default() += 1;
                    r.todo.push((p, s));
                }
            }
        }
        r
    }

    /// One line saying how many parts run again and why (None: none).
    pub fn stale_line(&self, sweep: &super::Sweep) -> Option<String> {
        if self.stale.is_empty() {
            return None;
        }
        let whys: Vec<String> =
            self.stale.iter().map(|(why, n)| format!("{n} because {}", why.why())).collect();
        Some(format!(
            "sweep {}: {} part(s) of an earlier run are not this sweep's any more and run again: {} (this \
             build: {})",
            sweep.spec.name,
            self.stale.values().sum::<usize>(),
            whys.join("; "),
            exec::BUILD_ID
        ))
    }
}

/// Writes the sweep's report folder (`out/sweep-NAME`: `results.parquet`,
/// `results.csv`, `sweep.toml`, the summary) from its parts, all present
/// (those in hand not read again), whole or not at all; returns the
/// folder, the Parquet bytes and the number of rows. Every engine ends
/// with it: the same parts give the same bytes.
pub fn write_folder(
    sweep: &super::Sweep,
    out: &Path,
    parts: &Path,
    command: &str,
    in_hand: InHand,
) -> Result<(PathBuf, Vec<u8>, usize)> {
    let rows = collect(sweep, parts, in_hand)?;
    let parquet = table::parquet_bytes(sweep, &rows)?;
    let staged = dyncore_report::outdir::stage_sweep(out, &sweep.spec.name)?;
    let dir = staged.path();
    dyncore_report::report::write_file(&dir.join("results.parquet"), &parquet)?;
    dyncore_report::report::write_file(&dir.join("results.csv"), table::csv(sweep, &rows).as_bytes())?;
    dyncore_report::report::write_file(&dir.join("sweep.toml"), sweep.spec.text.as_bytes())?;
    summary::write(sweep, &rows, dir, command)?;
    let dest = staged.commit()?;
    let n = rows.iter().map(|(_, _, r)| r.len()).sum();
    Ok((dest, parquet, n))
}

/// Runs `dyncore sweep`.
pub fn run(registry: &Registry, out: &Path, args: &SweepArgs, stop: &AtomicBool) -> Result<()> {
    let sweep = super::Sweep::load(&args.file, registry)?;
    if let Some(n) = args.show_point {
        let p = sweep.points.get(n).ok_or_else(|| {
            let m = format!("--show-point {n}: the sweep has points 0 to {}", sweep.points.len() - 1);
            BadInput(vec![LoadError::new(&args.file, m)])
        })?;
        say!("# point {n} of {}\n{}", args.file.display(), p.text);
        return Ok(());
    }
    let _held = dyncore_run::runner::open_out(out)?;
    let folder = sweep.folder();
    let parts = parts_dir(out, &folder);
    if args.fresh && parts.exists() {
        std::fs::remove_dir_all(&parts).with_context(|| format!("removing {}", parts.display()))?;
    }
    std::fs::create_dir_all(&parts).with_context(|| format!("creating {}", parts.display()))?;
    let units = sweep.units();
    let Resume { todo, kept, .. } = {
        let r = Resume::of(&sweep, &parts);
        if let Some(line) = r.stale_line(&sweep) {
            eprintln!("{line}");
        }
        r
    };
    let jobs = args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if !args.quiet {
        eprintln!(
            "sweep {}: {} points × {} seeds = {} runs{}; {} to run on {jobs} worker thread{}",
            sweep.spec.name,
            sweep.points.len(),
            sweep.seeds.len(),
            units.len(),
            if kept > 0 { format!(" ({kept} done by an earlier run, kept)") } else { String::new() },
            todo.len(),
            if jobs == 1 { "" } else { "s" },
        );
    }
    let bar = if args.quiet { ProgressBar::hidden() } else { ProgressBar::new(todo.len() as u64) };
    bar.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs  {per_sec}  ETA {eta}  {msg}",
        )
        .expect("static template is valid"),
    );
    // Points done: all of a point's seeds have parts.
    let seeds_left: Vec<AtomicUsize> = (0..sweep.points.len())
        .map(|p| AtomicUsize::new(todo.iter().filter(|(q, _)| *q == p).count()))
        .collect();
    let points_done = AtomicUsize::new(seeds_left.iter().filter(|n| n.load(Ordering::Relaxed) == 0).count());
    let started = Instant::now();
    let in_hand = std::sync::Mutex::new(InHand::new());
    let sink = |p: usize, seed: u64, rows: Vec<Row>| -> Result<()> {
        exec::write_part(&parts, &sweep, p, seed, &rows)?;
        in_hand.lock().unwrap_or_else(|e| e.into_inner()).insert((p, seed), rows);
        if seeds_left[p].fetch_sub(1, Ordering::AcqRel) == 1 {
            points_done.fetch_add(1, Ordering::Relaxed);
        }
        bar.set_message(format!("{}/{} points", points_done.load(Ordering::Relaxed), sweep.points.len()));
        bar.inc(1);
        Ok(())
    };
    let outcome = exec::run_pool(&sweep, &todo, &Options { jobs, stop }, &sink);
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    if let Some(e) = outcome.error {
        let at = super::spec::locate(&sweep.spec.text, "base");
        let message =
            format!("{e}; the {} runs finished are kept (the same command resumes)", kept + outcome.done);
        return Err(BadInput(vec![LoadError {
            file: args.file.clone(),
            at,
            field: Some("base".into()),
            message,
        }])
        .into());
    }
    if outcome.stopped {
        let signal = RECEIVED.get().map_or(0, |s| s.load(Ordering::Acquire));
        let signal = if signal == 0 { libc::SIGINT } else { signal };
        return Err(Interrupted { done: kept + outcome.done, total: units.len(), signal }.into());
    }
    let command = format!("dyncore sweep {} --out {}", args.file.display(), out.display());
    let in_hand = in_hand.into_inner().unwrap_or_else(|e| e.into_inner());
    let (dest, _, rows) = write_folder(&sweep, out, &parts, &command, in_hand)?;
    let ran = outcome.done;
    let rate = if secs > 0.0 && ran > 0 {
        format!(
            " in {secs:.1} s: {:.2} points/s ({:.2} runs/s) on {jobs} worker thread{}",
            ran as f64 / sweep.seeds.len() as f64 / secs,
            ran as f64 / secs,
            if jobs == 1 { "" } else { "s" }
        )
    } else {
        String::new()
    };
    say!(
        "sweep {}: {} runs ({ran} run now{}), {} rows{rate}.\nTable: {} (and results.csv); summary: {}",
        sweep.spec.name,
        units.len(),
        if kept > 0 { format!(", {kept} kept") } else { String::new() },
        rows,
        dest.join("results.parquet").display(),
        dest.join("report.md").display(),
    );
    Ok(())
}

/// The signal the handlers of [`ctrl_c_flag`] received (0: none yet).
static RECEIVED: std::sync::OnceLock<&'static std::sync::atomic::AtomicI32> = std::sync::OnceLock::new();

/// Installs handlers of SIGINT, SIGTERM and SIGHUP that raise the returned
/// flag (once per process: the handlers stay; where they cannot be
/// installed, the default is left: the process ends and a rerun resumes
/// from the parts).
pub fn ctrl_c_flag() -> &'static AtomicBool {
    static NONE: AtomicBool = AtomicBool::new(false);
    match dyncore_runtime::arbiter::Signals::install() {
        Ok(signals) => {
            let flag = signals.stop_flag();
            let _ = RECEIVED.set(signals.signal_flag());
            std::mem::forget(signals);
            flag
        }
        Err(_) => &NONE,
    }
}
