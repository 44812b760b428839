//! Helpers shared by the command's integration tests: run the binary, make
//! a temporary folder, read stderr.

#![allow(dead_code)] // each test file uses some of them

use std::process::{Command, Output};

/// Runs `dyncore` with `args` from the crate's folder.
pub fn dyncore(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dyncore"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the dyncore binary runs")
}

/// A fresh folder, removed when the returned guard drops (also when the
/// test fails), so `cargo test` leaves nothing in /tmp.
pub fn tmp(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("dyncore-test-{name}-")).tempdir().unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
