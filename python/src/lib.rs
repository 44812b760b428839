//! `dyncore._native`: the Rust side of the `dyncore` Python package. Every
//! function takes a scenario or sweep as a path and, optionally, its text
//! (so a cluster's worker needs no file), runs through `dyncore_sweep`, and
//! returns bytes: Parquet for whole tables (the bytes `dyncore sweep`
//! writes, always made by `dyncore_sweep::table::parquet_bytes`, which the
//! Python side reads with pyarrow) and part files for units run on a Dask
//! worker (the bytes `dyncore sweep` keeps in its parts folder).
//!
//! Bad input raises `dyncore.ScenarioError` (a `ValueError`) whose message
//! is the command's `file:line:col: field: message`. The GIL is released
//! while the simulator runs.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use dyncore_run::Registry;
use dyncore_sweep::{Sweep, exec, table};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

pyo3::create_exception!(
    _native,
    ScenarioError,
    PyValueError,
    "A scenario or sweep that dyncore refuses; the message is `file:line:col: field: what is accepted; found X`."
);

fn bad_input(e: dyncore_run::BadInput) -> PyErr {
    ScenarioError::new_err(e.to_string())
}

fn runtime(e: impl std::fmt::Display) -> PyErr {
    PyRuntimeError::new_err(e.to_string())
}

fn jobs_or_all(jobs: Option<usize>) -> usize {
    jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1)
}

fn load_sweep(path: &str, text: Option<&str>, base: Option<&str>) -> PyResult<Sweep> {
    let path = Path::new(path);
    let owned;
    let text = match text {
        Some(t) => t,
        None => {
            owned = std::fs::read_to_string(path)
                .map_err(|e| ScenarioError::new_err(format!("{}: cannot read: {e}", path.display())))?;
            &owned
        }
    };
    Sweep::parse_with_base(path, text, base, &Registry::builtin()).map_err(bad_input)
}

fn parquet_of(
    py: Python<'_>,
    sweep: &Sweep,
    units: &[(usize, u64, Vec<exec::Row>)],
) -> PyResult<Py<PyBytes>> {
    let bytes = table::parquet_bytes(sweep, units).map_err(runtime)?;
    Ok(PyBytes::new(py, &bytes).unbind())
}

/// Validates a scenario (`path`, or `text` named `path`) or a sweep file
/// (`sweep=True`); returns one line describing it, raises ScenarioError.
#[pyfunction]
#[pyo3(signature = (path, text=None, sweep=false))]
fn check(path: &str, text: Option<&str>, sweep: bool) -> PyResult<String> {
    if sweep {
        let s = load_sweep(path, text, None)?;
        return Ok(format!(
            "ok  {}  (sweep {}: {} points × {} seeds)",
            path,
            s.spec.name,
            s.points.len(),
            s.seeds.len()
        ));
    }
    let s = Sweep::single(Path::new(path), text, None, 1, &Registry::builtin()).map_err(bad_input)?;
    let runs = match &s.points[0].scenario {
        dyncore_sweep::PointScenario::Sim(sc) => (sc.name.clone(), sc.runs.len()),
        dyncore_sweep::PointScenario::Net(sc) => (sc.name.clone(), sc.runs.len()),
    };
    Ok(format!("ok  {path}  ({}: {} runs)", runs.0, runs.1))
}

/// Runs a scenario with `seeds` seeds on `jobs` threads; the table's Parquet bytes.
#[pyfunction]
#[pyo3(signature = (path, text=None, seeds=5, seed=None, jobs=None))]
fn run(
    py: Python<'_>,
    path: &str,
    text: Option<&str>,
    seeds: u32,
    seed: Option<u64>,
    jobs: Option<usize>,
) -> PyResult<Py<PyBytes>> {
    let max = dyncore_sim::Scenario::MAX_SEEDS;
    if !(1..=max).contains(&seeds) {
        return Err(ScenarioError::new_err(format!(
            "seeds: expected a whole number from 1 to {max}; found {seeds}"
        )));
    }
    let s = Sweep::single(Path::new(path), text, seed, seeds, &Registry::builtin()).map_err(bad_input)?;
    let stop = AtomicBool::new(false);
    let units = py.detach(|| exec::run_units(&s, &s.units(), jobs_or_all(jobs), &stop)).map_err(runtime)?;
    parquet_of(py, &s, &units)
}

/// Runs a whole sweep on `jobs` threads; the Parquet bytes `dyncore sweep` writes.
#[pyfunction]
#[pyo3(signature = (path, text=None, jobs=None))]
fn sweep(py: Python<'_>, path: &str, text: Option<&str>, jobs: Option<usize>) -> PyResult<Py<PyBytes>> {
    let s = load_sweep(path, text, None)?;
    let stop = AtomicBool::new(false);
    let units = py.detach(|| exec::run_units(&s, &s.units(), jobs_or_all(jobs), &stop)).map_err(runtime)?;
    parquet_of(py, &s, &units)
}

/// A sweep's plan: (points, seeds per point, the base's text). Raises ScenarioError.
#[pyfunction]
#[pyo3(signature = (path, text=None))]
fn sweep_plan(path: &str, text: Option<&str>) -> PyResult<(usize, usize, String)> {
    let s = load_sweep(path, text, None)?;
    let base = std::fs::read_to_string(&s.spec.base).map_err(runtime)?;
    Ok((s.points.len(), s.seeds.len(), base))
}

/// The Parquet bytes of a sweep's table from its units' parts ((point,
/// seed, the bytes [`sweep_point_parts`] made), every unit once, any
/// order): the same bytes as the local sweep's. A part that is not its
/// unit's (another build of dyncore, torn bytes) raises RuntimeError.
#[pyfunction]
#[pyo3(signature = (path, text, base, parts))]
fn sweep_assemble(
    py: Python<'_>,
    path: &str,
    text: &str,
    base: &str,
    parts: Vec<(usize, u64, Vec<u8>)>,
) -> PyResult<Py<PyBytes>> {
    let s = load_sweep(path, Some(text), Some(base))?;
    let units = exec::units_from_parts(&s, parts).map_err(|e| runtime(format!("{e:#}")))?;
    parquet_of(py, &s, &units)
}

/// A sweep folder (`out`) that any engine fills and resumes: the one
/// `dyncore sweep --out OUT` uses, its parts keyed as the command keys them
/// (`.sweep-NAME.parts/`), locked while this object lives (as the command
/// locks it), and finished into the same `sweep-NAME/` report folder.
#[pyclass(unsendable)]
struct SweepFolder {
    sweep: Sweep,
    out: std::path::PathBuf,
    parts: std::path::PathBuf,
    /// The rows of the parts this object wrote or put, so that `finish`
    /// reads back only the parts kept from earlier runs.
    in_hand: Mutex<dyncore_sweep::cmd::InHand>,
    _held: dyncore_report::outdir::OutDir,
}

/// Opens (creates, locks) sweep folder `out` for the sweep at `path` (or
/// `text` named `path`); `fresh` drops the parts of earlier runs.
#[pyfunction]
#[pyo3(signature = (path, text, out, fresh=false))]
fn sweep_folder(path: &str, text: Option<&str>, out: &str, fresh: bool) -> PyResult<SweepFolder> {
    let sweep = load_sweep(path, text, None)?;
    let out = std::path::PathBuf::from(out);
    let held = dyncore_run::runner::open_out(&out).map_err(|e| ScenarioError::new_err(format!("{e:#}")))?;
    let parts = dyncore_sweep::cmd::parts_dir(&out, &sweep.folder());
    if fresh && parts.exists() {
        std::fs::remove_dir_all(&parts).map_err(runtime)?;
    }
    std::fs::create_dir_all(&parts).map_err(|e| runtime(format!("creating {}: {e}", parts.display())))?;
    Ok(SweepFolder { sweep, out, parts, in_hand: Mutex::default(), _held: held })
}

#[pymethods]
impl SweepFolder {
    /// What is left to run: (the units (point, seed) without a part of
    /// their own, how many are kept, a line saying why parts of an earlier
    /// run run again or None).
    fn todo(&self) -> (Vec<(usize, u64)>, usize, Option<String>) {
        let r = dyncore_sweep::cmd::Resume::of(&self.sweep, &self.parts);
        let line = r.stale_line(&self.sweep);
        (r.todo, r.kept, line)
    }

    /// Runs `units` on `jobs` threads here, each unit's part written as it
    /// finishes (a client killed midway keeps them); how many ran.
    #[pyo3(signature = (units, jobs=None))]
    fn run_local(&self, py: Python<'_>, units: Vec<(usize, u64)>, jobs: Option<usize>) -> PyResult<usize> {
        let stop = AtomicBool::new(false);
        let (sweep, parts) = (&self.sweep, &self.parts);
        let sink = |p: usize, seed: u64, rows: Vec<exec::Row>| {
            exec::write_part(parts, sweep, p, seed, &rows)?;
            self.in_hand.lock().unwrap_or_else(|e| e.into_inner()).insert((p, seed), rows);
            Ok(())
        };
        let outcome = py.detach(|| {
            exec::run_pool(sweep, &units, &exec::Options { jobs: jobs_or_all(jobs), stop: &stop }, &sink)
        });
        match outcome.error {
            Some(e) => Err(runtime(e)),
            None => Ok(outcome.done),
        }
    }

    /// Puts parts made by workers ([`sweep_point_parts`]) in place: each is
    /// kept only if it reads as this sweep's part of that unit.
    fn put_parts(&self, parts: Vec<(usize, u64, Vec<u8>)>) -> PyResult<()> {
        for (p, seed, bytes) in parts {
            let rows = exec::put_part(&self.parts, &self.sweep, p, seed, &bytes)
                .map_err(|e| runtime(format!("{e:#}")))?;
            self.in_hand.lock().unwrap_or_else(|e| e.into_inner()).insert((p, seed), rows);
        }
        Ok(())
    }

    /// Writes the report folder from the parts (all must be there), as the
    /// command does; the Parquet bytes.
    fn finish(&self, py: Python<'_>, command: &str) -> PyResult<Py<PyBytes>> {
        let in_hand = std::mem::take(&mut *self.in_hand.lock().unwrap_or_else(|e| e.into_inner()));
        let (_, parquet, _) =
            dyncore_sweep::cmd::write_folder(&self.sweep, &self.out, &self.parts, command, in_hand)
                .map_err(|e| runtime(format!("{e:#}")))?;
        Ok(PyBytes::new(py, &parquet).unbind())
    }

    /// The base scenario's text (for the workers).
    fn base_text(&self) -> PyResult<String> {
        std::fs::read_to_string(&self.sweep.spec.base).map_err(runtime)
    }

    /// The report folder's name (`sweep-NAME`).
    fn folder(&self) -> String {
        self.sweep.folder()
    }
}

/// Sweeps this process loaded for the tasks of a Dask sweep, each under
/// the client's token for that sweep call and its texts. Loading a sweep
/// parses and validates every point (a sweep of 64 points: about as long
/// as running one of them), so a worker loads each call's sweep once, not
/// once per task. A new call has a new token and loads afresh: a machine
/// profile changed between two calls is read again.
type Loaded = (String, String, String, String, Arc<Sweep>);
static LOADED: Mutex<Vec<Loaded>> = Mutex::new(Vec::new());
/// Sweeps kept by a worker process (the most recent calls').
const KEPT_SWEEPS: usize = 4;

/// The sweep of call `call` (its texts as given), loaded once per process.
fn call_sweep(call: &str, path: &str, text: &str, base: &str) -> PyResult<Arc<Sweep>> {
    let same = |l: &Loaded| l.0 == call && l.1 == path && l.2 == text && l.3 == base;
    if let Some(l) = LOADED.lock().unwrap_or_else(|e| e.into_inner()).iter().find(|l| same(l)) {
        return Ok(l.4.clone());
    }
    // Loaded without the lock: two tasks of one call may both load it once.
    let s = Arc::new(load_sweep(path, Some(text), Some(base))?);
    let mut kept = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if !kept.iter().any(same) {
        kept.insert(0, (call.into(), path.into(), text.into(), base.into(), s.clone()));
        kept.truncate(KEPT_SWEEPS);
    }
    Ok(s)
}

/// Units of one point, on one thread (a Dask task): each unit's part file
/// bytes, as `dyncore sweep` writes them, with its seed. `seeds` None: all
/// the sweep's seeds. `call`: the client's token for this sweep call (its
/// tasks share one load of the sweep per worker); None loads it here.
#[pyfunction]
#[pyo3(signature = (path, text, base, point, seeds=None, call=None))]
fn sweep_point_parts(
    py: Python<'_>,
    path: &str,
    text: &str,
    base: &str,
    point: usize,
    seeds: Option<Vec<u64>>,
    call: Option<&str>,
) -> PyResult<Vec<(u64, Py<PyBytes>)>> {
    let s = match call {
        Some(call) => call_sweep(call, path, text, base)?,
        None => Arc::new(load_sweep(path, Some(text), Some(base))?),
    };
    if point >= s.points.len() {
        return Err(PyValueError::new_err(format!("point {point}: the sweep has {} points", s.points.len())));
    }
    let seeds = seeds.unwrap_or_else(|| s.seeds.clone());
    let units: Vec<(usize, u64)> = seeds.iter().map(|&seed| (point, seed)).collect();
    let stop = AtomicBool::new(false);
    let rows = py.detach(|| exec::run_units(&s, &units, 1, &stop)).map_err(runtime)?;
    rows.into_iter()
        .map(|(p, seed, rows)| {
            let bytes = exec::part_bytes(&s, p, seed, &rows).map_err(runtime)?;
            Ok((seed, PyBytes::new(py, &bytes).unbind()))
        })
        .collect()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(sweep, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_plan, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_assemble, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_folder, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_point_parts, m)?)?;
    m.add_class::<SweepFolder>()?;
    Ok(())
}
