//! Hostile values in every number of a network-stack scenario never panic
//! (issue 21, class 2): each is refused with the field's path, a line and a
//! column, and the range the field accepts, or the scenario runs to its end
//! with finite results.
//!
//! * `every_number_at_every_extreme`: each number of a scenario that uses
//!   every field (`[stack]`, every `[net]` field, a layout run with a core
//!   and a load, a policy run with all its fields, a paper value) set in
//!   turn to each of [`EXTREMES`] (0, -1, 1e300, 1e-300, 2^64, i64::MAX,
//!   infinities, NaN, a fraction, a string, a boolean);
//! * `hostile_combinations` (property test): up to three of them at once,
//!   on the shipped `scenarios/newtos/*.toml` too. `DYNCORE_PROPTEST_CASES`
//!   and `DYNCORE_PROPTEST_SEED` as in `scenario_props.rs`.
//!
//! An accepted scenario's runs are run for at most [`RUN_MS`] of virtual
//! time (its limits are checked on the file as written): what this test
//! holds is that no value accepted can make virtual time overflow, which
//! the engine asserts ("virtual time went backwards").

use std::path::Path;

use dyncore_scenario::load::{LoadError, error_in, syntax_error};
use dyncore_sim::netstack::policy::simulate_policy;
use dyncore_sim::netstack::scenario::NetScenario;
use dyncore_sim::netstack::{RunInput, simulate};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError};
use toml_edit::{DocumentMut, Item, Value};

/// Virtual time each accepted run is run for, at most.
const RUN_MS: f64 = 2.0;

/// Hostile values, as TOML text.
const EXTREMES: [&str; 15] = [
    "0",
    "-1",
    "1e300",
    "-1e300",
    "1e-300",
    "18446744073709551615",
    "1.8446744073709552e19",
    "9223372036854775807",
    "-9223372036854775808",
    "inf",
    "-inf",
    "nan",
    "0.5",
    "\"x\"",
    "true",
];

/// A scenario that has every field of a network-stack scenario.
const EVERY_FIELD: &str = r#"
name = "every-field"
title = "t"
seed = 1
seeds = 2
[stack]
cpu_mhz = 2267
channel_cycles_per_msg = 50
wakeup_ns = 10000
syscall = { cycles_per_packet = 100, cycles_per_byte = 0 }
tcp = { cycles_per_packet = 800, cycles_per_byte = 1.0 }
ip = { cycles_per_packet = 900, cycles_per_byte = 0 }
filter = { cycles_per_packet = 100, cycles_per_byte = 0 }
driver = { cycles_per_packet = 900, cycles_per_byte = 0 }
[net]
link_gbps = 10.0
mss = 1448
frame_overhead = 90
streams = 8
window_bytes = 65535
remote_ns = 30000
remote_jitter_ns = 5000
ack_every = 2
delack_ns = 200000
batch = 1
spin_ns = 1000
turn_cycles = 1000.0
smt_factor = 1.3
governor = "always-c6"
duration_ms = 5.0
warmup_ms = 1.0
[[run]]
label = "a"
load = [{ at_ms = 0, gbps = 2.0 }, { at_ms = 2, gbps = 5.0 }]
[[run.cpu]]
mhz = 1600
core = 0
components = ["syscall", "tcp"]
[[run.cpu]]
mhz = 1600
core = 0
components = ["ip", "filter", "driver"]
[[run]]
label = "p"
policy = "efficient"
policy_cpus = 3
target_gbps = 3.0
sample_ms = 0.5
components = ["tcp", "ip", "driver"]
load = [{ at_ms = 0, gbps = 1.0 }]
[[paper]]
kind = "prediction"
run = "a"
metric = "mbps"
relation = ">"
value = 1.5
[[paper]]
kind = "prediction"
run = "a"
metric = "mbps"
change_pct = -9
about = "about 9%"
tolerance_pts = 3
from = { run = "p", metric = "mbps" }
"#;

/// What a hostile case came to.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Outcome {
    Refused,
    Ran,
}

fn file() -> &'static Path {
    Path::new("hostile.toml")
}

/// Parses and validates as `dyncore check` does (dyncore_report::newtos::load).
fn load(text: &str) -> Result<NetScenario, LoadError> {
    let sc = NetScenario::from_toml(text).map_err(|e| syntax_error(file(), text, &e))?;
    sc.validate().map_err(|e| error_in(file(), text, &e.path, e.message))?;
    Ok(sc)
}

/// Words that are Rust's or serde's, not ours, in a message of `validate`.
const NOT_OURS: [&str; 8] =
    ["..=", "expected u", "expected i", "expected f64", "invalid type", "Some(", "None", "panicked"];

fn case(text: &str) -> Result<Outcome, String> {
    let sc = match load(text) {
        Err(e) => {
            let shown = e.to_string();
            if e.at.is_none() || e.field.is_none() {
                return Err(format!("refused without a line or a field: {shown}"));
            }
            if e.message.is_empty() {
                return Err(format!("refused without a reason: {shown}"));
            }
            // The meaning checks speak our words (serde's are the reader's
            // to translate, with the other scenarios').
            let validated = NetScenario::from_toml(text).is_ok();
            if let Some(w) = NOT_OURS.iter().find(|w| validated && e.message.contains(**w)) {
                return Err(format!("`{w}` in a refusal: {shown}"));
            }
            return Ok(Outcome::Refused);
        }
        Ok(sc) => sc,
    };
    // The validated limits hold; run a short piece of each kind of run.
    let mut net = sc.net.clone();
    net.duration_ms = net.duration_ms.min(RUN_MS);
    net.warmup_ms = net.warmup_ms.min(net.duration_ms - 1.0);
    for r in &sc.runs {
        let (mbps, power) = if r.policy.is_some() {
            let o = simulate_policy(&sc.stack, &net, r, sc.seed);
            (o.mbps, o.power_w)
        } else {
            let o = simulate(&RunInput {
                costs: &sc.stack,
                net: &net,
                cpus: &r.cpus,
                load: &r.load,
                seed: sc.seed,
                beside: Default::default(),
            });
            (o.mbps, o.power_w)
        };
        if !(mbps.is_finite() && mbps >= 0.0 && power.is_finite() && power >= 0.0) {
            return Err(format!("run {}: {mbps} Mbit/s, {power} W", r.label));
        }
    }
    Ok(Outcome::Ran)
}

/// Every number's place in `doc`: (table path, key), where a path step is a
/// key or an index into an array of tables or of inline tables.
fn numbers(text: &str) -> Vec<Vec<String>> {
    fn walk_value(v: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        match v {
            Value::Integer(_) | Value::Float(_) => out.push(path.clone()),
            Value::InlineTable(t) => {
                for (k, v) in t.iter() {
                    path.push(k.to_string());
                    walk_value(v, path, out);
                    path.pop();
                }
            }
            Value::Array(a) => {
                for (i, v) in a.iter().enumerate() {
                    path.push(format!("#{i}"));
                    walk_value(v, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    fn walk(item: &Item, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        match item {
            Item::Value(v) => walk_value(v, path, out),
            Item::Table(t) => {
                for (k, v) in t.iter() {
                    path.push(k.to_string());
                    walk(v, path, out);
                    path.pop();
                }
            }
            Item::ArrayOfTables(a) => {
                for (i, t) in a.iter().enumerate() {
                    path.push(format!("#{i}"));
                    for (k, v) in t.iter() {
                        path.push(k.to_string());
                        walk(v, path, out);
                        path.pop();
                    }
                    path.pop();
                }
            }
            Item::None => {}
        }
    }
    let doc: DocumentMut = text.parse().expect("a base scenario parses");
    let mut out = Vec::new();
    walk(doc.as_item(), &mut Vec::new(), &mut out);
    out
}

/// A number no base scenario has, replaced by the hostile value's raw text
/// (which may not be valid TOML: 2^64 is not).
const MARK: i64 = 777_123_457;

/// `text` with the number at `path` set to `value` (raw TOML text).
fn set(text: &str, path: &[String], value: &str) -> String {
    fn in_item(item: &mut Item, path: &[String]) {
        let Some((step, rest)) = path.split_first() else {
            *item = Item::Value(Value::from(MARK));
            return;
        };
        match (item, step.strip_prefix('#')) {
            (Item::ArrayOfTables(a), Some(i)) => {
                let t = a.get_mut(i.parse::<usize>().expect("an index")).expect("in range");
                let (k, rest) = rest.split_first().expect("a key in the table");
                in_item(&mut t[k.as_str()], rest);
            }
            (Item::Value(v), _) => in_value(v, path),
            (Item::Table(t), None) => in_item(&mut t[step.as_str()], rest),
            (other, _) => panic!("{step}: not a container: {other}"),
        }
    }
    fn in_value(v: &mut Value, path: &[String]) {
        let Some((step, rest)) = path.split_first() else {
            *v = Value::from(MARK);
            return;
        };
        match (v, step.strip_prefix('#')) {
            (Value::Array(a), Some(i)) => {
                in_value(a.get_mut(i.parse::<usize>().expect("an index")).expect("in range"), rest)
            }
            (Value::InlineTable(t), None) => in_value(t.get_mut(step).expect("a key"), rest),
            (other, _) => panic!("{step}: not a container: {other}"),
        }
    }
    let mut doc: DocumentMut = text.parse().expect("parses");
    in_item(doc.as_item_mut(), path);
    let out = doc.to_string();
    assert_eq!(out.matches(&MARK.to_string()).count(), 1, "{path:?}");
    out.replace(&MARK.to_string(), value)
}

fn every_case() -> Vec<(Vec<String>, &'static str)> {
    numbers(EVERY_FIELD).into_iter().flat_map(|p| EXTREMES.iter().map(move |v| (p.clone(), *v))).collect()
}

#[test]
fn every_number_at_every_extreme() {
    let cases = every_case();
    assert!(cases.len() >= 45 * EXTREMES.len() / 2, "the base covers every field: {} cases", cases.len());
    let (mut refused, mut ran) = (0, 0);
    for (path, value) in &cases {
        let text = set(EVERY_FIELD, path, value);
        match case(&text) {
            Ok(Outcome::Refused) => refused += 1,
            Ok(Outcome::Ran) => ran += 1,
            Err(e) => panic!("{} = {value}: {e}\n{text}", path.join(".")),
        }
    }
    eprintln!("{} hostile values: {refused} refused, {ran} ran to the end", cases.len());
    assert!(refused > 0 && ran > 0);
}

fn config() -> Config {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let cases = env("DYNCORE_PROPTEST_CASES").unwrap_or(48) as u32;
    let seed = env("DYNCORE_PROPTEST_SEED").unwrap_or_else(|| {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        t.as_nanos() as u64 ^ u64::from(std::process::id())
    });
    eprintln!(
        "hostile network-stack property test: {cases} cases, seed {seed} (replay: DYNCORE_PROPTEST_SEED={seed})"
    );
    Config { cases, rng_seed: RngSeed::Fixed(seed), failure_persistence: None, ..Config::default() }
}

/// The shipped network-stack scenarios and [`EVERY_FIELD`].
fn bases() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/newtos");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("shipped network-stack scenarios")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut v: Vec<String> = files.iter().map(|p| std::fs::read_to_string(p).expect("readable")).collect();
    v.push(EVERY_FIELD.to_string());
    v
}

/// A base and up to three (number, hostile value) pairs, by index.
fn hostile() -> impl Strategy<Value = String> {
    let bases = bases();
    (0..bases.len(), prop::collection::vec((any::<prop::sample::Index>(), 0..EXTREMES.len()), 1..=3))
        .prop_map(move |(b, edits)| {
            let mut text = bases[b].clone();
            for (at, v) in edits {
                let places = numbers(&text);
                if places.is_empty() {
                    break;
                }
                text = set(&text, &places[at.index(places.len())], EXTREMES[v]);
                if text.parse::<DocumentMut>().is_err() {
                    break; // not TOML any more: one refusal is enough
                }
            }
            text
        })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn hostile_combinations(text in hostile()) {
        if let Err(e) = case(&text) {
            return Err(TestCaseError::fail(format!("{e}\n{text}")));
        }
    }
}
