//! Design-space sweeps: `dyncore sweep FILE --out DIR --jobs N`.
//!
//! A sweep file ([`spec`]) names a base scenario and a grid of field paths
//! ([`paths`]) with their values; the points are the product of the grid's
//! axes (and one axis of paired `[zip]` lists). [`Sweep::load`] builds and
//! validates **every** point before anything runs: a point the scenario's
//! own validation refuses is reported at the sweep file's value that made
//! it (`sweep.toml:7:30: grid."run.*.cpu.0.mhz"[0]: point 3: …`), exit 2.
//!
//! Then every point × seed (a *unit*) runs on `--jobs` worker threads
//! ([`exec`]); each finished unit's rows are written atomically into
//! `OUT/.sweep-NAME.parts/` under a key of everything that can change its
//! bytes ([`exec::KeyParts`]): the point's scenario text (the base with its
//! values set), every file the scenario reads (its machine profiles, as
//! read), the build of dyncore (`build.rs`: the git revision and a hash of
//! how the tree differs from it), and the seed. That folder is the record
//! of what is done: a rerun of the same sweep (after Ctrl-C, a crash, or
//! `kill -9`) runs only the units without a part that matches and reads
//! back whole (rows, their width, finite figures, no row twice); it says
//! how many parts it runs again, and why. The table ([`table`]) is always built
//! from the parts, in (point, seed, run, series) order, so its bytes are the
//! same whatever `--jobs`, whatever was resumed. The report folder
//! `OUT/sweep-NAME/` (`results.parquet`, `results.csv`, `report.md`, one
//! plot per swept field: [`summary`]) is staged and renamed into place whole.
//!
//! **Invariants:** a unit's rows depend only on its key (the simulator is
//! deterministic); a part file is complete or
//! absent (written to a temporary name, synced, renamed); the table has one
//! row per unit × run × series, in unit order.

#[macro_use]
extern crate dyncore_run;

pub mod cmd;
pub mod exec;
pub mod paths;
pub mod spec;
pub mod summary;
pub mod table;

use std::path::{Path, PathBuf};

use anyhow::Result;
use dyncore_core::policies::Registry;
use dyncore_report::newtos;
use dyncore_scenario::load::LoadError;
use dyncore_sim::Scenario;
use dyncore_sim::netstack::scenario::{NetScenario, is_net_scenario};
use toml_edit::DocumentMut;

pub use cmd::Interrupted;
pub use exec::{Options, Outcome, Row};
pub use spec::Spec;

use dyncore_run::BadInput;

/// A point's scenario, loaded and validated.
#[derive(Debug, Clone)]
pub enum PointScenario {
    Sim(Box<Scenario>),
    Net(Box<NetScenario>),
}

/// One point of the grid.
#[derive(Debug, Clone)]
pub struct Point {
    pub index: usize,
    /// The value index of each axis.
    pub coords: Vec<usize>,
    /// The scenario text the point runs (the base with its values set).
    pub text: String,
    pub scenario: PointScenario,
}

/// Which simulator the base runs on: the figures of its rows differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A Chameleon-style scenario: a row per program label.
    Sim,
    /// A network-stack (NewtOS) scenario: a row per run.
    Net,
}

/// A sweep, every point built and validated.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub spec: Spec,
    pub kind: Kind,
    pub seeds: Vec<u64>,
    pub points: Vec<Point>,
}

impl Sweep {
    /// Reads, parses and validates the sweep file at `path` and every point.
    pub fn load(path: &Path, registry: &Registry) -> Result<Sweep, BadInput> {
        let text = dyncore_scenario::load::read_text(path).map_err(|e| BadInput(vec![e]))?;
        Sweep::parse(path, &text, registry)
    }

    /// [`Sweep::load`] of sweep text (`path` names it in errors and is the
    /// folder a relative `base` is read from).
    pub fn parse(path: &Path, text: &str, registry: &Registry) -> Result<Sweep, BadInput> {
        Sweep::parse_with_base(path, text, None, registry)
    }

    /// [`Sweep::parse`] with the base scenario's text given (a worker of a
    /// cluster that has the text but not the file); `None` reads the file.
    pub fn parse_with_base(
        path: &Path,
        text: &str,
        base: Option<&str>,
        registry: &Registry,
    ) -> Result<Sweep, BadInput> {
        let spec = spec::parse(path, text).map_err(BadInput)?;
        build(spec, registry, base)
    }

    /// One scenario, not swept: the scenario at `path` (or `text`, named
    /// `path` in errors) run with `seeds` seeds from its own first seed
    /// (or `seed`). Its table has the sweep table's columns, `point` 0.
    pub fn single(
        path: &Path,
        text: Option<&str>,
        seed: Option<u64>,
        seeds: u32,
        registry: &Registry,
    ) -> Result<Sweep, BadInput> {
        let name =
            path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "scenario".into());
        let spec = Spec {
            file: path.to_path_buf(),
            text: String::new(),
            name,
            title: String::new(),
            description: String::new(),
            base: path.to_path_buf(),
            runs: None,
            seed,
            seeds: Some(seeds),
            plot: None,
            axes: Vec::new(),
        };
        build(spec, registry, text)
    }

    /// The units (point, seed) in table order.
    pub fn units(&self) -> Vec<(usize, u64)> {
        self.points.iter().flat_map(|p| self.seeds.iter().map(move |&s| (p.index, s))).collect()
    }

    /// The report folder's name: `sweep-NAME`.
    pub fn folder(&self) -> String {
        format!("sweep-{}", self.spec.name)
    }
}

/// The base, checked as a scenario of its own.
fn base_text(spec: &Spec, registry: &Registry, given: Option<&str>) -> Result<(String, Kind), BadInput> {
    let text = match given {
        Some(t) => t.to_string(),
        None => dyncore_scenario::load::read_text(&spec.base).map_err(|mut e| {
            e.message = format!("the sweep's base: {}", e.message);
            BadInput(vec![e])
        })?,
    };
    let kind = if is_net_scenario(&text) { Kind::Net } else { Kind::Sim };
    let checked = match kind {
        Kind::Net => newtos::parse(&spec.base, &text).map(|_| ()),
        Kind::Sim => dyncore_scenario::load::parse_with(&spec.base, &text, registry).map(|_| ()),
    };
    checked.map_err(|e| BadInput(vec![e]))?;
    Ok((text, kind))
}

/// The base document a point starts from: claims dropped (a sweep reports
/// figures, and a claim about a run's label says nothing once a field of the
/// run is swept), and only the `runs` the sweep keeps.
fn base_doc(spec: &Spec, text: &str) -> Result<DocumentMut, BadInput> {
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        BadInput(vec![LoadError::new(&spec.base, e.message().trim().to_string())])
    })?;
    doc.remove("paper");
    doc.remove("expect");
    let Some(keep) = &spec.runs else { return Ok(doc) };
    let labels: Vec<String> = doc
        .get("run")
        .and_then(|r| r.as_array_of_tables())
        .map(|a| {
            a.iter().map(|t| t.get("label").and_then(|l| l.as_str()).unwrap_or("").to_string()).collect()
        })
        .unwrap_or_default();
    let mut errs = Vec::new();
    for (i, (l, at)) in keep.iter().enumerate() {
        if !labels.contains(l) {
            let message = format!(
                "the base has no run labelled \"{l}\"; its runs are {}",
                labels.iter().map(|x| format!("\"{x}\"")).collect::<Vec<_>>().join(", ")
            );
            errs.push(spec.error(*at, &format!("runs[{i}]"), message));
        }
    }
    if !errs.is_empty() {
        return Err(BadInput(errs));
    }
    if let Some(a) = doc.get_mut("run").and_then(|r| r.as_array_of_tables_mut()) {
        a.retain(|t| keep.iter().any(|(l, _)| t.get("label").and_then(|x| x.as_str()) == Some(l)));
    }
    Ok(doc)
}

/// Every point's text, loaded and validated.
fn build(spec: Spec, registry: &Registry, base: Option<&str>) -> Result<Sweep, BadInput> {
    let (text, kind) = base_text(&spec, registry, base)?;
    let doc = base_doc(&spec, &text)?;
    let mut errs = Vec::new();
    // Every figure to plot is one the table has (a misspelt one would be
    // dropped from the summary).
    let known = exec::figures(kind);
    for (name, at) in spec.plot.iter().flatten() {
        if !known.contains(&name.as_str()) {
            let message = format!("unknown figure `{name}`; the table's figures: {}", known.join(", "));
            errs.push(spec.error(*at, "plot", message));
        }
    }
    // Each path must exist in the base: checked once, at its first value.
    for f in spec.fields() {
        let mut probe = doc.clone();
        if let Err(m) = paths::set(&mut probe, &f.segs, &f.values[0]) {
            let message = format!("not a field of the base {}: {m}", spec.base.display());
            errs.push(spec.error(f.at[0], &format!("{}.\"{}\"", f.table, f.path), message));
        }
    }
    if !errs.is_empty() {
        return Err(BadInput(errs));
    }
    let mut points = Vec::new();
    let mut failed = 0usize;
    for p in 0..spec.points() {
        let coords = spec.coords(p);
        let mut d = doc.clone();
        for (a, &c) in spec.axes.iter().zip(&coords) {
            for f in &a.fields {
                paths::set(&mut d, &f.segs, &f.values[c]).expect("every path was set on the base above");
            }
        }
        let text = d.to_string();
        let loaded =
            match kind {
                // A sweep runs on the simulator: as `run` does, it refuses a
                // command workload that gives no `model`.
                Kind::Sim => dyncore_scenario::load::parse_with(&spec.base, &text, registry).and_then(|s| {
                    match s.unmodelled_command() {
                        Some(at) => Err(dyncore_scenario::load::error_in(
                            &spec.base,
                            &text,
                            &at,
                            dyncore_run::runner::UNMODELLED.into(),
                        )),
                        None => Ok(PointScenario::Sim(Box::new(s))),
                    }
                }),
                Kind::Net => newtos::parse(&spec.base, &text).map(|s| PointScenario::Net(Box::new(s))),
            };
        match loaded {
            Ok(scenario) => points.push(Point { index: p, coords, text, scenario }),
            Err(e) => {
                failed += 1;
                if errs.len() < 20 {
                    errs.push(point_error(&spec, p, &coords, &e));
                }
            }
        }
    }
    if failed > errs.len() {
        let more = failed - errs.len();
        errs.push(LoadError::new(
            &spec.file,
            format!("… and {more} more points fail the same way or another"),
        ));
    }
    if !errs.is_empty() {
        return Err(BadInput(errs));
    }
    let first = spec.seed.unwrap_or(match &points[0].scenario {
        PointScenario::Sim(s) => s.seed,
        PointScenario::Net(s) => s.seed,
    });
    let n = spec.seeds.unwrap_or(dyncore_sim::seeds::DEFAULT_SEEDS);
    let max = match kind {
        Kind::Sim => Scenario::MAX_SEEDS,
        Kind::Net => dyncore_sim::netstack::scenario::MAX_SEEDS,
    };
    let seeds = dyncore_sim::seeds::seed_list(first, n).filter(|_| n <= max).ok_or_else(|| {
        let at = spec::locate(&spec.text, "seeds");
        BadInput(vec![spec.error(at, "seeds", format!("expected 1 to {max} seeds, the first plus the count within 64 bits; found seed {first}, {n} seeds"))])
    })?;
    Ok(Sweep { spec, kind, seeds, points })
}

/// A point the scenario refused, located at the sweep file's value that
/// made it: the field the error names if it is a swept one, else the
/// point's first value.
fn point_error(spec: &Spec, p: usize, coords: &[usize], e: &LoadError) -> LoadError {
    let fields: Vec<(&spec::Field, usize)> =
        spec.axes.iter().zip(coords).flat_map(|(a, &c)| a.fields.iter().map(move |f| (f, c))).collect();
    let culprit = e
        .field
        .as_deref()
        .and_then(|name| fields.iter().find(|(f, _)| paths::matches(&f.segs, name)))
        .unwrap_or(&fields[0]);
    let (f, c) = *culprit;
    let values: Vec<String> = fields.iter().map(|(f, c)| format!("{} = {}", f.path, f.values[*c])).collect();
    let what = match &e.field {
        Some(field) => format!("{field}: {}", e.message),
        None => e.message.clone(),
    };
    spec.error(
        f.at[c],
        &f.field_name(c),
        format!("point {p} ({}) is not a valid scenario: {what}", values.join(", ")),
    )
}

/// What `dyncore sweep` was asked.
#[derive(Debug, Clone)]
pub struct SweepArgs {
    pub file: PathBuf,
    /// Worker threads (default: every CPU this process may use).
    pub jobs: Option<usize>,
    /// Forget the parts of earlier runs of this sweep and run every unit.
    pub fresh: bool,
    pub quiet: bool,
    /// Print this point's scenario text and run nothing.
    pub show_point: Option<usize>,
}
