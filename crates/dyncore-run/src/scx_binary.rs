//! Where the sched_ext backend's binary, `dyncore-scx`, is (a binary of
//! its own: GPL-2.0-only, and it needs clang and libelf to build), and
//! what it takes to build it when it is not there. `dyncore exec --backend
//! scx` and `dyncore run --backend scx` hand their runs to it.

use std::path::PathBuf;

/// What `dyncore-scx` needs to be built, in one line.
pub const NEEDS: &str = "the sched_ext backend is the separate binary dyncore-scx (GPL-2.0-only), which is not \
                         built here: build it with `(cd crates/dyncore-scx && cargo build \
                         --release)` (it needs clang-19 and libelf-dev: `.ci/scx-deps` \
                         installs them), or name it with DYNCORE_SCX=PATH";

/// Where `dyncore-scx` is: `$DYNCORE_SCX`, beside this binary, in the
/// build tree this binary came from (`target/scx/{release,debug}`), or on
/// `PATH`.
pub fn find() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DYNCORE_SCX") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let mut candidates = vec![dir.join("dyncore-scx")];
    if let Some(target) = dir.parent() {
        candidates.push(target.join("scx/release/dyncore-scx"));
        candidates.push(target.join("scx/debug/dyncore-scx"));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|d| d.join("dyncore-scx")));
    }
    candidates.into_iter().find(|p| p.is_file())
}
