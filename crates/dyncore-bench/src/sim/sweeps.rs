//! The sweep-throughput row of `dyncore bench sim`: one 64-point sweep
//! (Figure 7's dynamic-binding run, its tax at 64 values) run four ways
//! in the same round: by the command with `--jobs 1` and `--jobs 2`, and by
//! the Python package's Dask engine on a local cluster of 1 and of 2
//! single-threaded worker processes. Each is timed from start to the table
//! written. The Dask engine's start-up is reported apart, not timed
//! with it: the cluster's start, each worker's import of `dyncore`, and
//! the client's import of pandas and pyarrow.parquet (which the first sweep of a
//! session imports), as for a session that has run a sweep before.
//!
//! **Parallel efficiency** is an engine's speed-up over itself on one
//! worker, in the same round: `--jobs 2` over `--jobs 1`, the Dask engine
//! on 2 workers over the Dask engine on 1 (on 2 CPUs, 2.0 is perfect). Each
//! way's points per second over `--jobs 1`'s is reported beside it: what
//! the engine costs against the command's single thread.
//!
//! **The size of a point** is the issue's design-space sweep's: about 10^6
//! events per run (the parallel program's work × 32: 1.2 M events at the
//! middle point), one seed, so that a round stays within seconds. Points
//! the size of the shipped scenarios' runs (about 30 000 events, 2 ms)
//! measure the engines' fixed costs rather than their throughput: on 2
//! CPUs the Dask engine's client and scheduler share the CPUs with its 2
//! workers (docs/results.md). `--quick`: 8 points of the base's own size.
//!
//! The Dask engine needs a Python with the `dyncore` package and
//! `dask.distributed` (`.ci/python` makes one in `target/python-venv`;
//! `DYNCORE_PYTHON` names another): without one its row says why and
//! its goal is not measured.
//!
//! **Invariant, checked:** every way gives the same table, byte for byte
//! (the Parquet file each writes), so all three did the same work.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dyncore_report::table::Table;

use crate::{Goal, RoundSpread};

/// The bench's sweep: its points, seeds per point, and the parallel
/// program's work (ms; None: the base's own).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SweepSize {
    pub points: usize,
    pub seeds: usize,
    pub work_ms: Option<f64>,
}

/// The full bench's sweep: 64 points of about 10^6 events per run.
pub const FULL: SweepSize = SweepSize { points: 64, seeds: 1, work_ms: Some(32.0 * 96_000.0) };
/// The `--quick` smoke run's sweep: 8 points of the base's size.
pub const QUICK: SweepSize = SweepSize { points: 8, seeds: 1, work_ms: None };

/// How the sweep is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    Jobs1,
    Jobs2,
    Dask1,
    Dask2,
}

impl Way {
    pub const ALL: [Way; 4] = [Way::Jobs1, Way::Jobs2, Way::Dask1, Way::Dask2];

    pub fn name(self) -> &'static str {
        match self {
            Way::Jobs1 => "dyncore sweep --jobs 1",
            Way::Jobs2 => "dyncore sweep --jobs 2",
            Way::Dask1 => "Python, Dask engine, 1 worker process",
            Way::Dask2 => "Python, Dask engine, 2 worker processes",
        }
    }

    /// The way on one worker that this way's parallel efficiency is over
    /// (None: it is one).
    pub fn one_worker(self) -> Option<Way> {
        match self {
            Way::Jobs2 => Some(Way::Jobs1),
            Way::Dask2 => Some(Way::Dask1),
            Way::Jobs1 | Way::Dask1 => None,
        }
    }

    fn is_dask(self) -> bool {
        matches!(self, Way::Dask1 | Way::Dask2)
    }

    fn index(self) -> usize {
        Way::ALL.iter().position(|&w| w == self).expect("every way is in ALL")
    }
}

/// The sweep file: Figure 7's `DB tax 1` with its tax at `size.points`
/// values from 0.01 to 100 (geometric), `size.seeds` seeds each, and the
/// parallel program's work set to `size.work_ms` (an axis of one value).
pub fn sweep_text(scenarios: &Path, size: SweepSize) -> String {
    let base = scenarios.join("fig7-underprovisioned.toml");
    let taxes: Vec<String> = (0..size.points)
        .map(|i| {
            let x = 0.01 * 10f64.powf(4.0 * i as f64 / (size.points.max(2) - 1) as f64);
            format!("{x:.6}")
        })
        .collect();
    let work = size.work_ms.map_or(String::new(), |w| format!("\"run.*.workload.*.work_ms\" = [{w:.1}]\n"));
    format!(
        "name = \"throughput\"\nbase = {:?}\nruns = [\"DB tax 1\"]\nseeds = {}\n\n[grid]\n\"run.*.workload.*.tax\" = [{}]\n{work}",
        base.display().to_string(),
        size.seeds,
        taxes.join(", ")
    )
}

/// The Python to run the Dask engine with, and why there is none.
pub fn python() -> std::result::Result<PathBuf, String> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("DYNCORE_PYTHON") {
        candidates.push(p.into());
    }
    let scenarios = dyncore_scenario::load::default_dir();
    if let Some(root) = scenarios.canonicalize().ok().and_then(|d| d.parent().map(Path::to_path_buf)) {
        candidates.push(root.join("target/python-venv/bin/python"));
    }
    candidates.push("python3".into());
    let probe = "import dyncore, dask.distributed";
    for c in &candidates {
        let ok = Command::new(c).args(["-c", probe]).output().is_ok_and(|o| o.status.success());
        if ok {
            return Ok(c.clone());
        }
    }
    Err(format!(
        "no Python with the dyncore package and dask.distributed (tried {}; `.ci/python` makes \
         target/python-venv, DYNCORE_PYTHON names another)",
        candidates.iter().map(|c| c.display().to_string()).collect::<Vec<_>>().join(", ")
    ))
}

/// The Dask driver: starts a local cluster, then times the sweep alone.
/// Prints `startup_s wall_s` on its last line.
const DASK_DRIVER: &str = r#"
import importlib, sys, time
from dask.distributed import Client, LocalCluster
import dyncore
sweep_file, out, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.monotonic()
# Start-up, as for a session that has run a sweep before: the DataFrame's
# libraries (imported at the first sweep), the cluster, and each worker's
# import of the package.
import pandas, pyarrow, pyarrow.parquet
cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
client = Client(cluster)
client.wait_for_workers(workers)
client.run(importlib.import_module, "dyncore._dask")
t1 = time.monotonic()
df = dyncore.sweep(sweep_file, engine="dask", client=client, out=out, fresh=True)
t2 = time.monotonic()
client.close()
cluster.close()
print(len(df), t1 - t0, t2 - t1)
"#;

/// Runs the sweep once one way into `out` (made fresh); returns its wall
/// time (the Dask cluster's start-up excluded, and returned beside).
pub fn run_once(
    way: Way,
    sweep_file: &Path,
    out: &Path,
    python: Option<&Path>,
    points: usize,
) -> Result<(Duration, Option<f64>)> {
    let _ = std::fs::remove_dir_all(out);
    let exe = std::env::current_exe().context("finding this program to run the sweep")?;
    match way {
        Way::Jobs1 | Way::Jobs2 => {
            let jobs = if way == Way::Jobs1 { "1" } else { "2" };
            let mut c = Command::new(&exe);
            c.arg("--out").arg(out).args(["sweep", "--quiet", "--fresh", "--jobs", jobs]).arg(sweep_file);
            let t0 = Instant::now();
            let o = c.output().with_context(|| format!("running {}", exe.display()))?;
            let wall = t0.elapsed();
            if !o.status.success() {
                bail!("{} failed: {}", way.name(), String::from_utf8_lossy(&o.stderr));
            }
            Ok((wall, None))
        }
        Way::Dask1 | Way::Dask2 => {
            let py = python.context("no Python for the Dask engine")?;
            let o = Command::new(py)
                .args(["-c", DASK_DRIVER])
                .arg(sweep_file)
                .arg(out)
                .arg(if way == Way::Dask1 { "1" } else { "2" })
                .env("DYNCORE_BIN", &exe)
                .output()
                .with_context(|| format!("running {}", py.display()))?;
            if !o.status.success() {
                bail!("{} failed: {}", way.name(), String::from_utf8_lossy(&o.stderr));
            }
            let said = String::from_utf8_lossy(&o.stdout);
            let last: Vec<f64> = said
                .lines()
                .last()
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
            let [rows, startup, wall] = last[..] else {
                bail!("the Dask driver printed no timing: {said}");
            };
            anyhow::ensure!(rows >= points as f64, "the Dask sweep returned {rows} rows for {points} points");
            Ok((Duration::from_secs_f64(wall), Some(startup)))
        }
    }
}

/// The table a way wrote (its Parquet file's bytes).
pub fn table_bytes(out: &Path) -> Result<Vec<u8>> {
    let p = out.join("sweep-throughput/results.parquet");
    std::fs::read(&p).with_context(|| format!("reading {}", p.display()))
}

/// What the sweep row measured: per way, the wall time of each round.
#[derive(Debug)]
pub struct SweepRow {
    pub size: SweepSize,
    pub walls_ns: [Vec<u64>; 4],
    /// The 2-worker Dask cluster's start-up per round (s), not in its wall time.
    pub dask_startup_s: Vec<f64>,
    /// Why the Dask engine was not run, if it was not.
    pub dask_missing: Option<String>,
    /// The table of the first way run, which every other must equal.
    pub table: Option<Vec<u8>>,
}

impl SweepRow {
    /// Runs every way once (the order turning with the round), checking
    /// that each wrote the same table.
    pub fn round(&mut self, round: usize, dir: &Path, python: Option<&Path>) -> Result<()> {
        let sweep_file = dir.join("throughput.toml");
        let scenarios = dyncore_scenario::load::default_dir();
        let scenarios =
            scenarios.canonicalize().with_context(|| format!("finding {}", scenarios.display()))?;
        std::fs::write(&sweep_file, sweep_text(&scenarios, self.size))
            .context("writing the bench's sweep file")?;
        for k in 0..Way::ALL.len() {
            let i = (k + round) % Way::ALL.len();
            let way = Way::ALL[i];
            if way.is_dask() && python.is_none() {
                continue;
            }
            let out = dir.join(format!("way-{i}"));
            let (wall, startup) = run_once(way, &sweep_file, &out, python, self.size.points)?;
            let bytes = table_bytes(&out)?;
            match &self.table {
                None => self.table = Some(bytes),
                Some(first) => anyhow::ensure!(
                    *first == bytes,
                    "{}: its table differs from the other ways' (the sweep is not deterministic)",
                    way.name()
                ),
            }
            let _ = std::fs::remove_dir_all(&out);
            self.walls_ns[i].push(super::ns(wall));
            if let (Some(s), Way::Dask2) = (startup, way) {
                self.dask_startup_s.push(s);
            }
        }
        Ok(())
    }
}

/// Issue 35: each engine reaches at least this parallel efficiency on 2
/// CPUs (its speed-up over itself on one worker, in the same round).
pub const GOAL_EFFICIENCY: f64 = 1.8;

impl SweepRow {
    /// Each round's points per second of way `i`.
    fn rates(&self, i: usize) -> Vec<f64> {
        self.walls_ns[i].iter().map(|&w| self.size.points as f64 / (w.max(1) as f64 / 1e9)).collect()
    }

    /// Each round's rate of way `i` over way `base`'s.
    fn over(&self, i: usize, base: usize) -> Vec<f64> {
        self.rates(i).iter().zip(self.rates(base)).map(|(r, one)| r / one).collect()
    }

    /// Each round's parallel efficiency of `way` (None for a one-worker way).
    fn efficiency(&self, way: Way) -> Option<Vec<f64>> {
        way.one_worker().map(|one| self.over(way.index(), one.index()))
    }

    /// The table: a line per way.
    pub fn table(&self) -> Table {
        let mut t = Table::new(
            format!(
                "Sweep throughput: {} points × {} seed{} (Figure 7's `DB tax 1`, its tax swept{}), {} CPUs; median of rounds",
                self.size.points,
                self.size.seeds,
                if self.size.seeds == 1 { "" } else { "s" },
                match self.size.work_ms {
                    Some(w) => format!("; the parallel program's work {w} ms: about 10^6 events per run"),
                    None => String::new(),
                },
                std::thread::available_parallelism().map_or(1, |n| n.get())
            ),
            &[
                "engine",
                "wall s (rounds min–max)",
                "points/s",
                "parallel efficiency (× itself on 1 worker)",
                "× --jobs 1's points/s",
            ],
        );
        for (i, way) in Way::ALL.iter().enumerate() {
            let walls: Vec<f64> = self.walls_ns[i].iter().map(|&w| w as f64 / 1e9).collect();
            let (Some(wall), Some(rate), Some(cost)) =
                (RoundSpread::of(walls), RoundSpread::of(self.rates(i)), RoundSpread::of(self.over(i, 0)))
            else {
                let why = self.dask_missing.clone().unwrap_or_else(|| "not run".into());
                let cells = vec!["–".into(), "–".into(), format!("not measured: {why}"), "–".into()];
                t.row([vec![way.name().into()], cells].concat());
                continue;
            };
            let eff = match self.efficiency(*way).and_then(RoundSpread::of) {
                Some(e) => e.text(2),
                None => "1 (the one-worker run)".into(),
            };
            t.row(vec![
                way.name().into(),
                format!("{:.2} ({:.2}–{:.2})", wall.median, wall.min, wall.max),
                format!("{:.1}", rate.median),
                eff,
                if i == 0 { "1".into() } else { format!("{:.2}×", cost.median) },
            ]);
        }
        t
    }

    /// The goals: `--jobs 2` ≥ 1.8× `--jobs 1`, and the Dask engine on 2
    /// workers ≥ 1.8× itself on 1.
    pub fn goals(&self) -> Vec<Goal> {
        let mut g = Vec::new();
        for way in Way::ALL.iter().filter(|w| w.one_worker().is_some()) {
            let one = way.one_worker().expect("filtered");
            let goal = format!(
                "{}: parallel efficiency ≥ {GOAL_EFFICIENCY}× {} on 2 CPUs ({}-point sweep)",
                way.name(),
                if one == Way::Jobs1 { "--jobs 1" } else { "its 1-worker run" },
                self.size.points
            );
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            match self.efficiency(*way).and_then(RoundSpread::of) {
                _ if cpus < 2 => {
                    g.push(Goal::not_measured(goal, format!("{cpus} CPU: nothing to spread over")))
                }
                Some(e) => {
                    let startup = if *way == Way::Dask2 && !self.dask_startup_s.is_empty() {
                        let mut s = self.dask_startup_s.clone();
                        let cost = RoundSpread::of(self.over(way.index(), 0)).map_or(0.0, |c| c.median);
                        format!(
                            "; {cost:.2}× --jobs 1's points/s; start-up (cluster, imports) {:.1} s, not counted",
                            crate::stats::median_f64(&mut s)
                        )
                    } else {
                        String::new()
                    };
                    g.push(Goal::checked(
                        goal,
                        format!("{}{startup}", e.text(2)),
                        e.median >= GOAL_EFFICIENCY,
                    ))
                }
                None => g.push(Goal::not_measured(
                    goal,
                    self.dask_missing.clone().unwrap_or_else(|| "no round ran it".into()),
                )),
            }
        }
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bench_sweep_file_is_a_valid_sweep_of_64_points() {
        let scenarios = dyncore_scenario::load::default_dir().canonicalize().unwrap();
        for size in [FULL, QUICK] {
            let text = sweep_text(&scenarios, size);
            let dir = tempfile::tempdir().unwrap();
            let f = dir.path().join("s.toml");
            std::fs::write(&f, &text).unwrap();
            let s = dyncore_sweep::Sweep::load(&f, &dyncore_core::policies::Registry::builtin()).unwrap();
            assert_eq!((s.spec.points(), s.seeds.len()), (size.points, size.seeds), "{text}");
            // The work axis reaches the parallel program, and only it.
            let want = size.work_ms.map_or("96000.0".to_string(), |w| format!("{w:.1}"));
            let point = &s.points[size.points / 2].text;
            assert!(point.contains(&format!("work_ms = {want}")), "{point}");
        }
    }
}
