//! Helpers shared by the integration tests: the shipped scenarios.

use std::path::PathBuf;

use dyncore_sim::Scenario;

pub fn scenarios_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

/// Names of every shipped scenario, sorted.
pub fn shipped_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(scenarios_dir())
        .expect("scenarios/")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 8, "{names:?}");
    names
}

/// Reads and validates shipped scenario `name`.
pub fn load(name: &str) -> Scenario {
    let path = scenarios_dir().join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut s = Scenario::from_toml(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    s.load_profiles(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    s.validate().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    s
}
