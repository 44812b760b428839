//! Running a sweep's units (point × seed) on worker threads, and the parts
//! that record what is done.
//!
//! **Invariants:** a unit's rows are a function of its point's text and its
//! seed; a part file holds exactly one unit's rows under the unit's key and
//! is written whole or not at all ([`dyncore_report::report::write_file_unsynced`]:
//! a temporary file, renamed; not synced, since a part a power cut tore
//! does not read back as its unit's and is run again); a part whose key does not match the
//! unit (another sweep file, another base, another dyncore) is never used.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use anyhow::{Context, Result};
use dyncore_sim::netstack::run::{SeedRun, run_seed};
use serde::{Deserialize, Serialize};

use super::{Kind, PointScenario, Sweep};

/// The figures of a Chameleon-style row (one per program label of a run):
/// the means over the label's programs that finished, and the run's own.
pub const SIM_FIGURES: &[&str] = &[
    "speedup",
    "relative_time",
    "completion_s",
    "fused_share",
    "finished_share",
    "run_energy_j",
    "run_mean_w",
    "run_end_s",
    "fuses",
    "migrations",
];

/// The figures of a network-stack row (one per run): bitrate, modelled
/// power of the cores in use, energy per bit delivered, a policy run's
/// energy, the MHz-weighted utilisation of a layout by hand, packets.
pub const NET_FIGURES: &[&str] =
    &["mbps", "power_w", "nj_per_bit", "energy_j", "normalised_utilisation", "packets"];

/// The figure columns of rows of `kind`.
pub fn figures(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Sim => SIM_FIGURES,
        Kind::Net => NET_FIGURES,
    }
}

/// One row of a unit: a run's series and its figures (in [`figures`]
/// order; `None` where the figure does not apply or nothing finished).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub run: String,
    pub series: String,
    pub figures: Vec<Option<f64>>,
}

/// Runs one unit: every run of point `p` with `seed`.
pub fn run_unit(sweep: &Sweep, p: usize, seed: u64) -> Result<Vec<Row>, String> {
    let point = &sweep.points[p];
    match &point.scenario {
        PointScenario::Sim(sc) => {
            let mut sc = (**sc).clone();
            sc.seed = seed;
            let mut rows = Vec::new();
            for i in 0..sc.runs.len() {
                let r = dyncore_sim::run_one(&sc, i)
                    .map_err(|e| format!("point {p}, seed {seed}, run `{}`: {e}", sc.runs[i].label))?;
                rows.extend(sim_rows(&r));
            }
            Ok(rows)
        }
        PointScenario::Net(sc) => Ok(sc.runs.iter().map(|r| net_row(sc, r, seed)).collect()),
    }
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// A run's rows: one per program label, in order of first appearance.
fn sim_rows(r: &dyncore_sim::RunResult) -> Vec<Row> {
    let mut labels: Vec<&str> = Vec::new();
    for p in &r.programs {
        if !labels.contains(&p.label.as_str()) {
            labels.push(&p.label);
        }
    }
    labels
        .into_iter()
        .map(|label| {
            let ps: Vec<_> = r.programs.iter().filter(|p| p.label == label).collect();
            let of = |f: &dyn Fn(&dyncore_sim::ProgramResult) -> Option<f64>| {
                mean(&ps.iter().filter_map(|p| f(p)).collect::<Vec<_>>())
            };
            let finished = ps.iter().filter(|p| p.completion_ns.is_some()).count();
            let figures = vec![
                of(&|p| p.speedup),
                of(&|p| p.relative_time),
                of(&|p| p.completion_ns.map(|c| c as f64 / 1e9)),
                of(&|p| p.completion_ns.filter(|&c| c > 0).map(|c| p.fused_ns as f64 / c as f64)),
                Some(finished as f64 / ps.len() as f64),
                r.finished.then_some(r.energy.joules),
                r.finished.then_some(r.energy.mean_w),
                Some(r.end_ns as f64 / 1e9),
                Some(r.reconfig.fuses as f64),
                Some(r.migrations as f64),
            ];
            debug_assert_eq!(figures.len(), SIM_FIGURES.len());
            Row { run: r.label.clone(), series: label.to_string(), figures }
        })
        .collect()
}

/// A network-stack run's row for one seed (what `netstack::run` does per
/// seed, kept per seed).
fn net_row(
    sc: &dyncore_sim::netstack::scenario::NetScenario,
    r: &dyncore_sim::netstack::scenario::NetRun,
    seed: u64,
) -> Row {
    let (mbps, power_w, energy_j, used, packets) = match run_seed(sc, r, seed) {
        SeedRun::Policy(o) => (o.mbps, o.power_w, Some(o.energy_j), None, o.packets),
        SeedRun::Fixed(o) => (o.mbps, o.power_w, None, Some(o.normalised_utilisation), o.packets),
    };
    // W / (Mbit/s) = µJ per Mbit = 1e-6 J per 1e6 bit; in nJ per bit: × 1000.
    let nj_per_bit = (mbps > 0.0).then(|| power_w * 1000.0 / mbps);
    let figures = vec![Some(mbps), Some(power_w), nj_per_bit, energy_j, used, Some(packets as f64)];
    debug_assert_eq!(figures.len(), NET_FIGURES.len());
    Row { run: r.label.clone(), series: "stack".into(), figures }
}

/// This build of dyncore (`build.rs`: the git revision and a hash of
/// how the tree differs from it).
pub const BUILD_ID: &str = env!("DYNCORE_BUILD_ID");

fn fnv(bytes: impl IntoIterator<Item = u8>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// What a unit's part is made of, each part of its key on its own, so
/// that a resume can say why a part is not this unit's any more.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyParts {
    /// The point's scenario: the base with the point's values set (FNV-1a).
    pub scenario: String,
    /// Every file the scenario reads (its machine profiles), as read.
    pub files: String,
    /// The build of dyncore that ran it ([`BUILD_ID`]).
    pub build: String,
    pub seed: u64,
}

/// The key parts unit (`p`, `seed`) must carry.
pub fn key_parts(sweep: &Sweep, p: usize, seed: u64) -> KeyParts {
    let point = &sweep.points[p];
    let files = match &point.scenario {
        super::PointScenario::Sim(sc) => serde_json::to_vec(&sc.profiles).unwrap_or_default(),
        super::PointScenario::Net(_) => Vec::new(),
    };
    KeyParts {
        scenario: format!("{:016x}", fnv(point.text.bytes())),
        files: format!("{:016x}", fnv(files)),
        build: BUILD_ID.to_string(),
        seed,
    }
}

/// The key a unit's part must carry: its key parts in one string.
pub fn unit_key(sweep: &Sweep, p: usize, seed: u64) -> String {
    let k = key_parts(sweep, p, seed);
    format!("{}-{}-{}-{}", k.scenario, k.files, k.build, k.seed)
}

/// Why a part on disk is not this unit's (it is run again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stale {
    /// The point's scenario changed (the base, or what the grid sets in it).
    Scenario,
    /// A file the scenario reads (a machine profile) changed.
    Files,
    /// Another build of dyncore made it (the simulator or a policy may differ).
    Build,
    /// It does not read back as a part of this sweep (torn, edited, or of
    /// an older dyncore): no rows, the wrong width, a figure that is not a
    /// number, a row twice; or not a regular file of bounded size (a FIFO,
    /// a link to a device).
    Invalid,
}

impl Stale {
    pub fn why(self) -> &'static str {
        match self {
            Stale::Scenario => "its point's scenario changed",
            Stale::Files => "a file the scenario reads changed",
            Stale::Build => "another build of dyncore made it",
            Stale::Invalid => {
                "it does not read back whole (no rows, a wrong width, NaN, a duplicate row, not a regular file)"
            }
        }
    }
}

#[derive(Serialize, Deserialize)]
struct PartRow {
    run: String,
    series: String,
    /// Each figure's bits (`f64::to_bits`), so a part reads back exactly.
    bits: Vec<Option<u64>>,
}

#[derive(Serialize, Deserialize)]
struct Part {
    key: String,
    /// Absent in parts of an older dyncore (they are run again).
    #[serde(default)]
    parts: Option<KeyParts>,
    rows: Vec<PartRow>,
}

/// A unit's part file in `dir`.
pub fn part_path(dir: &Path, p: usize, seed: u64) -> PathBuf {
    dir.join(format!("p{p:06}-s{seed}.json"))
}

/// Writes a unit's part, whole or not at all.
pub fn write_part(dir: &Path, sweep: &Sweep, p: usize, seed: u64, rows: &[Row]) -> Result<()> {
    dyncore_report::report::write_file_unsynced(&part_path(dir, p, seed), &part_bytes(sweep, p, seed, rows)?)
}

/// Puts a unit's part made elsewhere (a Dask worker's [`part_bytes`]) in
/// place, whole or not at all, only if it reads as this unit's part
/// ([`parse_part`]): a worker of another build, or bytes torn on the way,
/// make no part. Returns its rows.
pub fn put_part(dir: &Path, sweep: &Sweep, p: usize, seed: u64, bytes: &[u8]) -> Result<Vec<Row>> {
    let rows = parse_part(sweep, p, seed, bytes).map_err(|why| {
        anyhow::anyhow!(
            "the part of point {p}, seed {seed} is not this sweep's: {} (this build: {BUILD_ID})",
            why.why()
        )
    })?;
    dyncore_report::report::write_file_unsynced(&part_path(dir, p, seed), bytes)?;
    Ok(rows)
}

/// A unit's part, as [`write_part`] writes it.
pub fn part_bytes(sweep: &Sweep, p: usize, seed: u64, rows: &[Row]) -> Result<Vec<u8>> {
    let part = Part {
        key: unit_key(sweep, p, seed),
        parts: Some(key_parts(sweep, p, seed)),
        rows: rows
            .iter()
            .map(|r| PartRow {
                run: r.run.clone(),
                series: r.series.clone(),
                bits: r.figures.iter().map(|f| f.map(f64::to_bits)).collect(),
            })
            .collect(),
    };
    serde_json::to_vec(&part).context("encoding a part")
}

/// The most bytes read from one part (a part of a thousand rows is far
/// below): what a part that links to `/dev/zero` can make a resume read.
const MAX_PART_BYTES: u64 = 16 << 20;

/// The bytes of `path` if it is a regular file (after symlinks) of at most
/// `cap` bytes; None for anything else. Opened without blocking, so a
/// FIFO put in its place never hangs a resume, and read with a bound.
fn read_regular(path: &Path, cap: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > cap {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= cap).then_some(bytes)
}

/// A unit's rows from its part, if the part exists and is this unit's.
pub fn read_part(dir: &Path, sweep: &Sweep, p: usize, seed: u64) -> Option<Vec<Row>> {
    check_part(dir, sweep, p, seed).ok().flatten()
}

/// A unit's part: its rows (`Ok(Some)`), none on disk (`Ok(None)`), or why
/// the one on disk is not this unit's (`Err`).
pub fn check_part(dir: &Path, sweep: &Sweep, p: usize, seed: u64) -> Result<Option<Vec<Row>>, Stale> {
    let path = part_path(dir, p, seed);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let bytes = read_regular(&path, MAX_PART_BYTES).ok_or(Stale::Invalid)?;
    parse_part(sweep, p, seed, &bytes).map(Some)
}

/// The rows of unit (`p`, `seed`) from its part's bytes (a file's, or a
/// Dask worker's [`part_bytes`]), or why they are not this unit's part.
pub fn parse_part(sweep: &Sweep, p: usize, seed: u64, bytes: &[u8]) -> Result<Vec<Row>, Stale> {
    if bytes.len() as u64 > MAX_PART_BYTES {
        return Err(Stale::Invalid);
    }
    let part: Part = serde_json::from_slice(bytes).map_err(|_| Stale::Invalid)?;
    if part.key != unit_key(sweep, p, seed) {
        let want = key_parts(sweep, p, seed);
        return Err(match part.parts {
            Some(k) if k.scenario != want.scenario => Stale::Scenario,
            Some(k) if k.files != want.files => Stale::Files,
            Some(k) if k.build != want.build => Stale::Build,
            _ => Stale::Invalid,
        });
    }
    let width = figures(sweep.kind).len();
    let mut seen = std::collections::HashSet::new();
    let whole = !part.rows.is_empty()
        && part.rows.iter().all(|r| {
            r.bits.len() == width
                && r.bits.iter().flatten().all(|&b| f64::from_bits(b).is_finite())
                && seen.insert((r.run.clone(), r.series.clone()))
        });
    if !whole {
        return Err(Stale::Invalid);
    }
    Ok(part
        .rows
        .into_iter()
        .map(|r| Row {
            run: r.run,
            series: r.series,
            figures: r.bits.into_iter().map(|b| b.map(f64::from_bits)).collect(),
        })
        .collect())
}

/// The units of `sweep` from parts made elsewhere ((point, seed, the
/// part's bytes), every unit once, in any order): their rows in unit
/// order, ready for [`super::table::parquet_bytes`]. A part that is not its
/// unit's ([`parse_part`]), a unit missing or given twice, or a unit the
/// sweep does not have, is an error.
pub fn units_from_parts(
    sweep: &Sweep,
    parts: Vec<(usize, u64, Vec<u8>)>,
) -> Result<Vec<(usize, u64, Vec<Row>)>> {
    let mut by_unit: std::collections::HashMap<(usize, u64), Vec<u8>> = std::collections::HashMap::new();
    for (p, seed, bytes) in parts {
        anyhow::ensure!(
            by_unit.insert((p, seed), bytes).is_none(),
            "the part of point {p}, seed {seed} twice"
        );
    }
    let units = sweep.units();
    let mut out = Vec::with_capacity(units.len());
    for (p, seed) in units {
        let bytes = by_unit
            .remove(&(p, seed))
            .with_context(|| format!("the part of point {p}, seed {seed} is missing"))?;
        let rows = parse_part(sweep, p, seed, &bytes).map_err(|why| {
            anyhow::anyhow!(
                "the part of point {p}, seed {seed} is not this sweep's: {} (this build: {BUILD_ID})",
                why.why()
            )
        })?;
        out.push((p, seed, rows));
    }
    if let Some((p, seed)) = by_unit.keys().min() {
        anyhow::bail!("a part of point {p}, seed {seed}, a unit this sweep does not have");
    }
    Ok(out)
}

/// How the workers run.
pub struct Options<'a> {
    /// Worker threads (at least 1).
    pub jobs: usize,
    /// Set (by Ctrl-C) to stop: no worker takes a new unit; those running finish.
    pub stop: &'a AtomicBool,
}

/// What a pool of workers did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Units finished and handed to the sink.
    pub done: usize,
    /// Stopped before every unit ran.
    pub stopped: bool,
    /// The first failure in unit order, if any (a run past its event budget, a
    /// part that could not be written).
    pub error: Option<String>,
}

/// Runs `todo` (indices into `sweep.units()`-style (point, seed) pairs) on
/// `opts.jobs` threads, handing each finished unit to `sink` (from the
/// worker thread). A failure stops the others from taking new units.
pub fn run_pool(
    sweep: &Sweep,
    todo: &[(usize, u64)],
    opts: &Options<'_>,
    sink: &(dyn Fn(usize, u64, Vec<Row>) -> Result<()> + Sync),
) -> Outcome {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let errors: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
    let threads = opts.jobs.clamp(1, todo.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    if opts.stop.load(Ordering::Acquire) || failed.load(Ordering::Acquire) {
                        return;
                    }
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(p, seed)) = todo.get(k) else { return };
                    let r = run_unit(sweep, p, seed)
                        .and_then(|rows| sink(p, seed, rows).map_err(|e| format!("{e:#}")));
                    match r {
                        Ok(()) => {
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => {
                            errors.lock().unwrap_or_else(|p| p.into_inner()).push((k, e));
                            failed.store(true, Ordering::Release);
                        }
                    }
                }
            });
        }
    });
    let mut errors = errors.into_inner().unwrap_or_else(|p| p.into_inner());
    errors.sort();
    let done = done.into_inner();
    Outcome { done, stopped: done < todo.len(), error: errors.into_iter().next().map(|(_, e)| e) }
}

/// Runs `units` on `jobs` threads, writing no parts, and returns their rows
/// in the order of `units` (what a library caller, the Python package or a
/// cluster's worker, needs). Stopped by `stop`: an error saying so.
pub fn run_units(
    sweep: &Sweep,
    units: &[(usize, u64)],
    jobs: usize,
    stop: &AtomicBool,
) -> Result<Vec<(usize, u64, Vec<Row>)>, String> {
    let slot: std::collections::HashMap<(usize, u64), usize> =
        units.iter().enumerate().map(|(i, &u)| (u, i)).collect();
    let rows: Mutex<Vec<Option<Vec<Row>>>> = Mutex::new(vec![None; units.len()]);
    let sink = |p: usize, seed: u64, r: Vec<Row>| -> Result<()> {
        rows.lock().unwrap_or_else(|e| e.into_inner())[slot[&(p, seed)]] = Some(r);
        Ok(())
    };
    let outcome = run_pool(sweep, units, &Options { jobs, stop }, &sink);
    if let Some(e) = outcome.error {
        return Err(e);
    }
    if outcome.stopped {
        return Err(format!("stopped: {} of {} runs done", outcome.done, units.len()));
    }
    let rows = rows.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(units.iter().zip(rows).map(|(&(p, s), r)| (p, s, r.expect("every unit ran"))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_come_back_from_their_parts_in_unit_order() {
        let s = crate::table::tests::small();
        let rows =
            |p: usize| vec![Row { run: format!("r{p}"), series: "stack".into(), figures: vec![None; 6] }];
        let mut parts: Vec<(usize, u64, Vec<u8>)> = s
            .units()
            .iter()
            .map(|&(p, seed)| (p, seed, part_bytes(&s, p, seed, &rows(p)).unwrap()))
            .collect();
        parts.reverse();
        let units = units_from_parts(&s, parts.clone()).unwrap();
        let want: Vec<_> = s.units().into_iter().map(|(p, seed)| (p, seed, rows(p))).collect();
        assert_eq!(units, want);
        // A unit missing, given twice, another unit's part, or torn bytes: an error.
        let err = |parts| units_from_parts(&s, parts).unwrap_err().to_string();
        assert!(err(parts[1..].to_vec()).contains("missing"));
        assert!(err([parts.clone(), parts[..1].to_vec()].concat()).contains("twice"));
        let mut swapped = parts.clone();
        swapped[0].2 = parts[1].2.clone();
        assert!(err(swapped).contains("not this sweep's"), "a part under another unit's name");
        let mut torn = parts.clone();
        torn[0].2.truncate(10);
        assert!(err(torn).contains("does not read back whole"));
        let mut extra = parts.clone();
        extra.push((9, 7, parts[0].2.clone()));
        assert!(err(extra).contains("does not have"));
    }
}
