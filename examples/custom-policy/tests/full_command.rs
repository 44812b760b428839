//! The whole command line with an out-of-tree policy in it
//! (`src/bin/dyncore-with-first-fit.rs`: `dyncore::cli::main` with this
//! crate's registry): `policies`, `check`, `run` and `exec` know
//! `first-fit` as they know the built-in policies; and the crate builds
//! and runs where a user's copy would be, outside this repository.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use dyncore::runtime::testing::{Need, skip};

const BIN: &str = env!("CARGO_BIN_EXE_dyncore-with-first-fit");

fn run(bin: &str, args: &[&str]) -> Output {
    let o = Command::new(bin).args(args).output().expect("the binary starts");
    eprintln!(
        "$ {bin} {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn scenario() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenario.toml")
}

/// `policies`, `check` and a simulator `run` of the binary know the policy;
/// the stock `dyncore`'s registry does not (the scenario is refused there:
/// the check is not vacuous).
fn the_command_line_knows_the_policy(bin: &str) {
    let o = run(bin, &["policies"]);
    assert!(o.status.success(), "{}", text(&o));
    let listing = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(listing.contains("first-fit") && listing.contains("chameleon"), "{listing}");

    let sc = scenario();
    let sc = sc.to_str().unwrap();
    let o = run(bin, &["check", sc]);
    assert!(o.status.success(), "{}", text(&o));

    let out = tempfile::tempdir().unwrap();
    let out_s = out.path().to_str().unwrap();
    let o = run(bin, &["--out", out_s, "run", "--quiet", "--seeds", "1", sc]);
    assert!(o.status.success(), "{}", text(&o));
    let md = std::fs::read_to_string(out.path().join("custom-first-fit/report.md")).unwrap();
    assert!(md.contains("first-fit"), "{md}");
}

#[test]
fn policies_check_and_run_know_the_policy() {
    the_command_line_knows_the_policy(BIN);
}

#[test]
fn exec_runs_a_real_command_under_the_policy() {
    let _cpus = dyncore::runtime::testing::real_cpus();
    let out = tempfile::tempdir().unwrap();
    let out_s = out.path().join("exec");
    let o = run(
        BIN,
        &[
            "--out",
            out_s.to_str().unwrap(),
            "exec",
            "--policy",
            "first-fit",
            "--",
            "sh",
            "-c",
            "echo placed by first-fit; exit 7",
        ],
    );
    let all = text(&o);
    if o.status.code() == Some(2) && all.contains("mechanism") {
        skip(Need::Cgroups, &format!("exec could not place threads here: {all}"));
        return;
    }
    // The command's own output and exit status, then the report of a run
    // under first-fit.
    assert_eq!(o.status.code(), Some(7), "{all}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("placed by first-fit"), "{all}");
    let md = std::fs::read_to_string(out_s.join("report.md")).unwrap();
    assert!(md.contains("first-fit"), "{md}");
}

/// A copy of this crate in a temporary folder outside the repository,
/// depending on `crates/dyncore` by path as its Cargo.toml tells a user to,
/// with no `[patch]` section: it builds (offline, against the workspace's
/// lock file and build folder, so that only dyncore's own crates compile
/// again) and its binary runs.
#[test]
fn builds_and_runs_outside_the_repository() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here.join("../..").canonicalize().unwrap();
    let copy = tempfile::Builder::new().prefix("dyncore-out-of-tree-").tempdir().unwrap();
    assert!(!copy.path().starts_with(&root), "the copy must be outside the repository");
    // The binary under a name of its own: it is built into the same build
    // folder as this crate's, which other tests run meanwhile.
    for (f, to) in [
        ("src/lib.rs", "src/lib.rs"),
        ("src/main.rs", "src/main.rs"),
        ("src/bin/dyncore-with-first-fit.rs", "src/bin/my-dyncore.rs"),
        ("scenario.toml", "scenario.toml"),
    ] {
        let to = copy.path().join(to);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(here.join(f), &to).unwrap();
    }
    let manifest = std::fs::read_to_string(here.join("Cargo.toml")).unwrap();
    let ours = "dyncore = { path = \"../../crates/dyncore\" }";
    assert!(manifest.contains(ours), "the example's dependency line changed: {manifest}");
    let theirs = format!("dyncore = {{ path = {:?} }}", root.join("crates/dyncore"));
    // A workspace of its own, with the profile the tests are built with, so
    // that the registry's crates are reused from the build folder.
    let root_manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(
        !root_manifest.lines().any(|l| l.trim_start().starts_with("[patch")),
        "the workspace patches a crate: a dependent would not"
    );
    let profiles = &root_manifest[root_manifest.find("\n[profile.").expect("the workspace has profiles")..];
    let manifest = format!("{}\n[workspace]\n{profiles}", manifest.replace(ours, &theirs));
    std::fs::write(copy.path().join("Cargo.toml"), manifest).unwrap();
    std::fs::copy(root.join("Cargo.lock"), copy.path().join("Cargo.lock")).unwrap();

    // This test binary is target/<profile>/deps/NAME: the build folder.
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap().to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let o = Command::new(cargo)
        .current_dir(copy.path())
        .env("CARGO_TARGET_DIR", &target)
        .args(["build", "--offline", "--profile", "test", "--bin", "my-dyncore"])
        .output()
        .expect("cargo runs");
    assert!(o.status.success(), "the out-of-tree copy did not build:\n{}", text(&o));
    let built = target.join("debug/my-dyncore");
    the_command_line_knows_the_policy(built.to_str().unwrap());
}
