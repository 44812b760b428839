//! The shape of the source tree (issue 35): the `dyncore` crate is only
//! the command line (at most 15% of the Rust lines; the work is in the
//! library crates), and no Rust file is over 800 lines. (No function is
//! over 120 lines: clippy's `too_many_lines`, with the threshold in
//! `clippy.toml`, denied in CI.)

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, skipping build folders.
fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.map(Result::unwrap) {
        let p = e.path();
        let name = e.file_name();
        if p.is_dir() {
            if name != "target" && name != "out" && !name.to_string_lossy().starts_with('.') {
                rust_files(&p, into);
            }
        } else if p.extension().is_some_and(|x| x == "rs") {
            into.push(p);
        }
    }
}

fn lines(p: &Path) -> usize {
    std::fs::read_to_string(p).unwrap().lines().count()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Ours: the crates, the example and the Python package's native module
/// (not the vendored third-party code).
fn our_files() -> Vec<PathBuf> {
    let root = root();
    let mut files = Vec::new();
    for d in ["crates", "examples", "python/src"] {
        rust_files(&root.join(d), &mut files);
    }
    assert!(files.len() > 100, "found only {} Rust files under {}", files.len(), root.display());
    files
}

#[test]
fn no_rust_file_is_over_800_lines() {
    let root = root();
    let long: Vec<String> = our_files()
        .iter()
        .map(|p| (p, lines(p)))
        .filter(|&(_, n)| n > 800)
        .map(|(p, n)| format!("{} ({n} lines)", p.strip_prefix(&root).unwrap().display()))
        .collect();
    assert!(long.is_empty(), "files over 800 lines; split them: {long:#?}");
}

#[test]
fn the_binary_crate_is_at_most_15_percent_of_the_lines() {
    let root = root();
    let files = our_files();
    let total: usize = files.iter().map(|p| lines(p)).sum();
    let cli: usize =
        files.iter().filter(|p| p.starts_with(root.join("crates/dyncore/"))).map(|p| lines(p)).sum();
    let share = cli as f64 / total as f64;
    eprintln!("crates/dyncore: {cli} of {total} lines of Rust ({:.1}%)", 100.0 * share);
    assert!(cli > 0, "crates/dyncore has no Rust lines: the walk is wrong");
    assert!(share <= 0.15, "crates/dyncore is {:.1}% of the Rust lines (at most 15%)", 100.0 * share);
}
