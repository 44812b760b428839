//! Property test: hostile input never crashes.
//!
//! Random scenarios and random mutations of the shipped ones (a field set to
//! an edge value of any type, a field removed, an unknown field added), valid
//! and invalid, go through the command's own `parse` (TOML, serde, validate)
//! and, when accepted, through the simulator:
//!
//! * a refused scenario gives an error with a field path and a line, in
//!   words (no serde internals);
//! * an accepted one runs to its end without a panic, or stops at its event
//!   budget with an error naming `max_events`, and its results keep the
//!   simulator's invariants (checked here from the outside; the engine and
//!   scheduler also assert their own as they run).
//!
//! Cases: 48 by default (seconds in the test profile);
//! `DYNCORE_PROPTEST_CASES=N` runs more. The seed is printed (the harness
//! shows it when the test fails); `DYNCORE_PROPTEST_SEED=S` replays it.
//! Nothing is persisted into the source tree: a failure prints its minimal
//! input (the base scenario and the mutations) and the TOML text.

use std::path::Path;
use std::sync::OnceLock;

use dyncore_sim::scenario::limits::MAX_RUN_THREADS;
use dyncore_sim::{EventBudgetExceeded, Scenario, ScenarioResult};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError};
use toml_edit::{DocumentMut, Item, Table};

use dyncore_scenario::load::{LoadError, parse};

/// Event budget of every run in this test, so that a mutation asking for a
/// day of virtual time costs a bounded number of events (and exercises the
/// budget's error).
const TEST_MAX_EVENTS: u64 = 60_000;

fn config() -> Config {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let cases = env("DYNCORE_PROPTEST_CASES").unwrap_or(48) as u32;
    let seed = env("DYNCORE_PROPTEST_SEED").unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        t.as_nanos() as u64 ^ u64::from(std::process::id())
    });
    eprintln!(
        "hostile-scenario property test: {cases} cases, seed {seed} (replay: DYNCORE_PROPTEST_SEED={seed})"
    );
    Config { cases, rng_seed: RngSeed::Fixed(seed), failure_persistence: None, ..Config::default() }
}

/// The shipped scenarios' text, read once.
fn shipped() -> &'static [String] {
    static TEXTS: OnceLock<Vec<String>> = OnceLock::new();
    TEXTS.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .expect("shipped scenarios")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        files.iter().map(|p| std::fs::read_to_string(p).expect("readable")).collect()
    })
}

/// Which kind of table a mutation targets, and the keys it knows.
const TABLES: [(&str, &[&str]); 6] = [
    ("", &["name", "title", "description", "seed", "expect", "sim", "report", "paper", "run"]),
    (
        "sim",
        &[
            "tick_ns",
            "min_granularity_ns",
            "reconfig",
            "notify_on_exit",
            "max_time_ns",
            "ipi_rate_per_cpu_s",
            "max_events",
        ],
    ),
    ("report", &["kind", "metric", "group_by", "timeline_run"]),
    ("paper", &["x", "series", "value", "source"]),
    (
        "run",
        &["label", "series", "machine", "policy", "nodes", "cpus_per_node", "max_fuse", "sim", "workload"],
    ),
    (
        "workload",
        &[
            "program",
            "label",
            "count",
            "start_ms",
            "threads",
            "work_ms",
            "nice",
            "seq_level",
            "weight",
            "tax",
            "pin",
            "smt_factor",
        ],
    ),
];

/// Values at the edges of every field's type and range, and of other types.
const VALUES: [&str; 46] = [
    "0",
    "1",
    "2",
    "3",
    "4",
    "-1",
    "7",
    "16",
    "4096",
    "4097",
    "65536",
    "4294967295",
    "9223372036854775807",
    "-9223372036854775808",
    "0.0",
    "-0.0",
    "0.001",
    "0.5",
    "1.5",
    "100.0",
    "1e-300",
    "1e300",
    "nan",
    "inf",
    "-inf",
    "\"\"",
    "\"fast\"",
    "\"auto\"",
    "\"0-3\"",
    "\"1\"",
    "\"100-200\"",
    "\"0-999\"",
    "\"100000000000000\"",
    "\"../escape\"",
    "\"index.md\"",
    "\"a\\nb\"",
    "\"chameleon\"",
    "\"linux\"",
    "\"fibonacci\"",
    "\"gcc\"",
    "\"dynamic\"",
    "\"smt\"",
    "\"free\"",
    "true",
    "[]",
    "{}",
];

#[derive(Debug, Clone)]
enum Edit {
    /// Set a key of the table kind's known keys (or, if `unknown`, a key
    /// no table has) to `VALUES[value]`.
    Set {
        key: usize,
        unknown: bool,
        value: usize,
    },
    Remove {
        key: usize,
    },
}

#[derive(Debug, Clone)]
struct Mutation {
    /// Which table of the document (by index over all its tables).
    table: prop::sample::Index,
    edit: Edit,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let edit = prop_oneof![
        4 => (0..16usize, prop::bool::weighted(0.1), 0..VALUES.len())
            .prop_map(|(key, unknown, value)| Edit::Set { key, unknown, value }),
        1 => (0..16usize).prop_map(|key| Edit::Remove { key }),
    ];
    (any::<prop::sample::Index>(), edit).prop_map(|(table, edit)| Mutation { table, edit })
}

/// A small random scenario, usually valid, as TOML text.
fn random_scenario() -> impl Strategy<Value = String> {
    let workload = (
        prop::sample::select(vec![
            "fibonacci",
            "pmake",
            "blackscholes",
            "mandelbrot-sb",
            "mandelbrot-db",
            "gcc",
            "sjeng",
            "lbm",
        ]),
        1u32..4,
        prop::option::of(1u32..9),
        1.0f64..400.0,
        0.0f64..200.0,
        prop::option::of(prop::sample::select(vec!["0.01", "1.0", "100.0", "\"auto\""])),
        prop::option::of(0u32..3),
        prop::option::of(prop::sample::select(vec!["\"fast\"", "\"0\"", "\"0-1\"", "\"1-3\""])),
    );
    let run = (
        prop::sample::select(vec!["cmp", "acmp-3", "acmp-6", "dynamic", "smt", "uniform"]),
        prop::sample::select(vec!["linux", "chameleon"]),
        prop::option::of((1usize..3, prop::sample::select(vec![2usize, 4, 6, 8]))),
        prop::sample::select(vec!["proxy-apic", "proxy-logical", "hotplug", "free"]),
        prop::collection::vec(workload, 1..4),
    );
    (any::<u16>(), prop::collection::vec(run, 1..4)).prop_map(|(seed, runs)| {
        let mut t = format!("name = \"random\"\ntitle = \"random\"\nseed = {seed}\n");
        for (i, (machine, policy, size, reconfig, workloads)) in runs.into_iter().enumerate() {
            t += &format!("\n[[run]]\nlabel = \"r{i}\"\nmachine = \"{machine}\"\npolicy = \"{policy}\"\n");
            if let Some((nodes, per_node)) = size {
                t += &format!("nodes = {nodes}\ncpus_per_node = {per_node}\n");
            }
            t += &format!("[run.sim]\nreconfig = \"{reconfig}\"\n");
            for (program, count, threads, work_ms, start_ms, tax, seq_level, pin) in workloads {
                t += &format!(
                    "[[run.workload]]\nprogram = \"{program}\"\ncount = {count}\nwork_ms = {work_ms}\nstart_ms = {start_ms}\n"
                );
                if let Some(n) = threads.filter(|_| !matches!(program, "gcc" | "sjeng" | "lbm")) {
                    t += &format!("threads = {n}\n");
                }
                if let Some(x) = tax {
                    t += &format!("tax = {x}\n");
                }
                if let Some(l) = seq_level {
                    t += &format!("seq_level = {l}\n");
                }
                if let Some(p) = pin {
                    t += &format!("pin = {p}\n");
                }
            }
        }
        t
    })
}

fn base() -> impl Strategy<Value = String> {
    prop_oneof![(0..shipped().len()).prop_map(|i| shipped()[i].clone()), random_scenario(),]
}

/// Where a table is: keys, and indices into arrays of tables.
#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

/// Every table of the document that a mutation may edit, with its kind (an
/// index into [`TABLES`]) and its path.
fn tables(root: &Table) -> Vec<(usize, Vec<Seg>)> {
    fn walk(kind: usize, t: &Table, path: &mut Vec<Seg>, out: &mut Vec<(usize, Vec<Seg>)>) {
        out.push((kind, path.clone()));
        for (k, item) in t.iter() {
            let Some(sub_kind) = TABLES.iter().position(|(n, _)| *n == k) else { continue };
            path.push(Seg::Key(k.to_string()));
            match item {
                Item::Table(sub) => walk(sub_kind, sub, path, out),
                Item::ArrayOfTables(a) => {
                    for (i, sub) in a.iter().enumerate() {
                        path.push(Seg::Index(i));
                        walk(sub_kind, sub, path, out);
                        path.pop();
                    }
                }
                _ => {}
            }
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(0, root, &mut Vec::new(), &mut out);
    out
}

fn table_at<'a>(root: &'a mut Table, path: &[Seg]) -> &'a mut Table {
    let mut t = root;
    let mut i = 0;
    while i < path.len() {
        let Seg::Key(k) = &path[i] else { unreachable!("paths alternate keys and indices") };
        t = match (t.get_mut(k).expect("path from tables()"), path.get(i + 1)) {
            (Item::ArrayOfTables(a), Some(Seg::Index(j))) => {
                i += 1;
                a.get_mut(*j).expect("path from tables()")
            }
            (Item::Table(sub), _) => sub,
            _ => unreachable!("tables() lists tables only"),
        };
        i += 1;
    }
    t
}

/// Applies `edit` to the `table`-th table of `doc`.
fn apply(doc: &mut DocumentMut, table: usize, edit: &Edit) {
    let all = tables(doc.as_table());
    let (kind, path) = &all[table % all.len()];
    let keys = TABLES[*kind].1;
    let t = table_at(doc.as_table_mut(), path);
    match edit {
        Edit::Set { key, unknown, value } => {
            let v: toml_edit::Value = VALUES[*value].parse().expect("the values parse");
            t.insert(if *unknown { "no_such_field" } else { keys[key % keys.len()] }, Item::Value(v));
        }
        Edit::Remove { key } => {
            t.remove(keys[key % keys.len()]);
        }
    }
}

/// `text` with `mutations` applied.
fn mutate(text: &str, mutations: &[Mutation]) -> String {
    let mut doc: DocumentMut = text.parse().expect("the bases parse");
    for m in mutations {
        let n = tables(doc.as_table()).len();
        apply(&mut doc, m.table.index(n), &m.edit);
    }
    doc.to_string()
}

/// What must hold of a refused scenario.
fn check_refusal(text: &str, e: &LoadError) -> Result<(), TestCaseError> {
    prop_assert!(e.field.is_some(), "refused without a field path: {e}\n{text}");
    prop_assert!(e.at.is_some(), "refused without a line: {e}\n{text}");
    for internal in ["u32", "u64", "usize", "i32", "f64", "untagged", "variant", "target type"] {
        prop_assert!(!e.message.contains(internal), "serde internals in: {e}\n{text}");
    }
    Ok(())
}

/// What must hold of an accepted scenario's run.
fn check_run(
    text: &str,
    s: &Scenario,
    result: Result<ScenarioResult, EventBudgetExceeded>,
) -> Result<(), TestCaseError> {
    let r = match result {
        Ok(r) => r,
        Err(e) => {
            prop_assert!(e.max_events <= TEST_MAX_EVENTS && e.field().ends_with(&["max_events".to_string()]));
            return Ok(());
        }
    };
    prop_assert_eq!(r.runs.len(), s.runs.len());
    for (spec, run) in s.runs.iter().zip(&r.runs) {
        let params = s.sim.with(&spec.sim);
        let ctx = format!("run `{}` of\n{text}", run.label);
        prop_assert!(run.events <= params.max_events, "{}", ctx);
        prop_assert!(run.end_ns <= params.max_time_ns, "{}", ctx);
        let programs: u32 = spec.workloads.iter().map(|w| w.count).sum();
        prop_assert_eq!(run.programs.len() as u32, programs, "{}", ctx);
        let threads: u64 = run.programs.iter().map(|p| u64::from(p.threads)).sum();
        prop_assert!(threads <= MAX_RUN_THREADS, "{}", ctx);
        for c in &run.per_cpu {
            prop_assert!(c.busy_ns + c.borrowed_ns <= run.end_ns.max(1), "{}", ctx);
            prop_assert!((0.0..=1.0).contains(&c.utilisation), "{}", ctx);
        }
        for p in &run.programs {
            prop_assert!(p.threads >= 1 || !run.finished, "{}", ctx);
            prop_assert_eq!(p.finish_ns.is_some(), p.completion_ns.is_some(), "{}", ctx);
            if run.finished {
                prop_assert!(p.finish_ns.is_some(), "a finished run has every program finished: {}", ctx);
            }
            if let Some(c) = p.completion_ns {
                // No CPU runs faster than twice the baseline (100% duty vs 50%):
                // work cannot be done faster than that on `threads` CPUs.
                let most = 2.0 * f64::from(p.threads.max(1)) * c as f64 + 1.0;
                prop_assert!(
                    (p.work_ns as f64) <= most,
                    "{} did {} ns of work in {} ns: {}",
                    p.label,
                    p.work_ns,
                    c,
                    ctx
                );
                prop_assert!(p.finish_ns.is_some_and(|f| f <= run.end_ns && f >= p.start_ns), "{}", ctx);
            }
        }
    }
    Ok(())
}

/// Caps every run's budget at [`TEST_MAX_EVENTS`].
fn cap_budget(s: &mut Scenario) {
    s.sim.max_events = s.sim.max_events.min(TEST_MAX_EVENTS);
    for r in &mut s.runs {
        r.sim.max_events = r.sim.max_events.map(|m| m.min(TEST_MAX_EVENTS));
    }
}

/// How a case ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Refused,
    Finished,
    /// Accepted; some run hit `max_time_ns` (reported as not finished).
    Unfinished,
    /// Accepted; a run stopped at its event budget.
    Budget,
}

/// One case: parse and validate `text`; if accepted, run it.
fn case(text: &str) -> Result<Outcome, TestCaseError> {
    match parse(Path::new("prop.toml"), text) {
        Err(e) => {
            check_refusal(text, &e)?;
            Ok(Outcome::Refused)
        }
        Ok(mut s) => {
            cap_budget(&mut s);
            let result = dyncore_sim::run_quietly(&s);
            let outcome = match &result {
                Err(_) => Outcome::Budget,
                Ok(r) if r.runs.iter().all(|r| r.finished) => Outcome::Finished,
                Ok(_) => Outcome::Unfinished,
            };
            check_run(text, &s, result)?;
            Ok(outcome)
        }
    }
}

fn hostile() -> impl Strategy<Value = String> {
    (base(), prop::collection::vec(mutation(), 0..4)).prop_map(|(base, mutations)| mutate(&base, &mutations))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn hostile_scenarios_are_refused_with_a_path_or_run_without_panic(text in hostile()) {
        case(&text)?;
    }
}

/// The generator is worth running: with a fixed seed, a fair share of its
/// cases is refused, a fair share runs to the end, and some reach the
/// budget. (Guards the property test against drifting into testing only
/// one side.)
#[test]
fn hostile_cases_cover_refusals_runs_and_budget_stops() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = hostile();
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..200 {
        let text = strategy.new_tree(&mut runner).expect("generates").current();
        *seen.entry(case(&text).expect("holds")).or_insert(0) += 1;
    }
    let n = |o: Outcome| seen.get(&o).copied().unwrap_or(0);
    assert!(n(Outcome::Refused) >= 40 && n(Outcome::Finished) >= 40 && n(Outcome::Budget) >= 1, "{seen:?}");
}

#[test]
fn mutations_reach_every_kind_of_table() {
    let text = &shipped()[0];
    let mut doc: DocumentMut = text.parse().unwrap();
    let kinds: std::collections::BTreeSet<usize> = tables(doc.as_table()).iter().map(|(k, _)| *k).collect();
    // A top level, runs and workloads at least.
    assert!(kinds.is_superset(&[0, 4, 5].into()), "{kinds:?}");
    let escape = VALUES.iter().position(|v| *v == "\"../escape\"").unwrap();
    apply(&mut doc, 0, &Edit::Set { key: 0, unknown: false, value: escape });
    assert!(doc.to_string().starts_with("name = \"../escape\""), "{doc}");
}
