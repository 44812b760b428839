//! The claims' verdicts are pinned (issue 33): the default run writes
//! `claims.lock` (every claim's scenario, id, kind and verdict, under the
//! summary line), and it must equal the committed `scenarios/claims.lock`.
//! A change that flips a verdict fails here, naming the claims that
//! changed, until the lock file changes with it:
//! `DYNCORE_BLESS=1 cargo test -p dyncore --test claims_lock` rewrites it.
//! Simulator only: no real CPU is used.

mod common;

use std::collections::BTreeMap;

use common::{dyncore, stderr, tmp};

/// `(scenario, id)` → `kind verdict`, and the summary line.
fn parse(text: &str) -> (BTreeMap<(String, String), String>, String) {
    let mut map = BTreeMap::new();
    let mut summary = String::new();
    for line in text.lines() {
        if let Some(c) = line.strip_prefix("# ") {
            if c.contains("predictions checked") || c.contains("prediction checked") {
                summary = c.to_string();
            }
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 4, "a lock line is scenario, id, kind, verdict: {line:?}");
        map.insert((f[0].to_string(), f[1].to_string()), format!("{} {}", f[2], f[3]));
    }
    (map, summary)
}

#[test]
fn the_default_runs_verdicts_match_scenarios_claims_lock() {
    let out = tmp("claims-lock");
    let o = dyncore(&["run", "--quiet", "--out", &out.path().to_string_lossy()]);
    assert!(o.status.success(), "the default run failed: {}", stderr(&o));
    let now = std::fs::read_to_string(out.path().join("claims.lock")).expect("the run writes claims.lock");
    let lock_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/claims.lock");
    if std::env::var_os("DYNCORE_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(lock_path, &now).unwrap();
        eprintln!("wrote {lock_path}");
        return;
    }
    let pinned = std::fs::read_to_string(lock_path).unwrap_or_default();
    let ((was, was_summary), (is, is_summary)) = (parse(&pinned), parse(&now));
    let mut changes = Vec::new();
    for (k, v) in &is {
        match was.get(k) {
            Some(w) if w == v => {}
            Some(w) => changes.push(format!("  {} `{}`: {w} -> {v}", k.0, k.1)),
            None => changes.push(format!("  {} `{}`: new, {v}", k.0, k.1)),
        }
    }
    for (k, w) in &was {
        if !is.contains_key(k) {
            changes.push(format!("  {} `{}`: {w} -> gone", k.0, k.1));
        }
    }
    assert!(
        changes.is_empty() && was_summary == is_summary && pinned == now,
        "the claims' verdicts differ from scenarios/claims.lock ({} changed):\n{}\nsummary: {was_summary:?} -> \
         {is_summary:?}\nIf the change is meant, regenerate the file in the same commit: DYNCORE_BLESS=1 cargo test \
         -p dyncore --test claims_lock",
        changes.len(),
        changes.join("\n")
    );
}
