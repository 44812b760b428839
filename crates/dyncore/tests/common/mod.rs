//! Helpers shared by the command's integration tests: run the binary, make
//! a temporary folder, write a file into it, read stdout and stderr.

#![allow(dead_code)] // each test file uses some of them

use std::path::Path;
use std::process::{Command, Output};

pub mod exec;

/// Runs `dyncore` with `args` from the crate's folder.
pub fn dyncore(args: &[&str]) -> Output {
    command(args).output().expect("the dyncore binary runs")
}

/// The command `dyncore args`, run from the crate's folder. A command that
/// uses this machine's real CPUs (a live run, the stack, a bench) may only
/// be started by a test that holds the real-CPU guard
/// (`dyncore_runtime::testing`): this asserts it.
pub fn command(args: &[&str]) -> Command {
    if uses_real_cpus(args) {
        dyncore_runtime::testing::assert_held_here(&format!("running `dyncore {}`", args.join(" ")));
    }
    let mut c = Command::new(env!("CARGO_BIN_EXE_dyncore"));
    c.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// Whether `dyncore args` runs anything on real CPUs: a live or both run,
/// the stack on runtime CPUs, or a bench.
pub fn uses_real_cpus(args: &[&str]) -> bool {
    args.iter().any(|a| matches!(*a, "stack" | "bench" | "exec"))
        || args.windows(2).any(|w| w[0] == "--backend" && w[1] != "sim")
        || args.iter().any(|a| a.starts_with("--backend=") && *a != "--backend=sim")
}

/// A fresh folder, removed when the returned guard drops (also when the
/// test fails), so `cargo test` leaves nothing in /tmp.
pub fn tmp(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("dyncore-test-{name}-")).tempdir().unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Writes `text` to `dir/name`; returns the file's path.
pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}
