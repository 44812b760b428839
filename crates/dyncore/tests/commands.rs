//! Scenario workloads that name a command (`command = [...]`), as a user
//! runs them: bad commands refused before anything starts (`file:line:col:
//! run[i].workload[j].command`, exit 2), the simulator refusing a command
//! with no `model` in one line, a live run's report (each program's
//! completion and speedup against the command alone, the Linux baseline,
//! the prediction from the models), and nothing left behind on SIGTERM or
//! SIGINT in the middle of a run. Nothing here asserts a time.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::exec::hierarchies;
use common::{command, dyncore, stderr, tmp};

fn scenario(workloads: &str) -> String {
    format!(
        "name = \"cmds\"\ntitle = \"commands\"\n\n[[run]]\nlabel = \"pinned\"\nmachine = \"uniform\"\n\
         cpus_per_node = 1\nmax_fuse = 1\npolicy = \"pinned\"\n{workloads}"
    )
}

fn write(dir: &Path, text: &str) -> String {
    common::write(dir, "cmds.toml", text)
}

/// Every group and claim a dyncore process `pid` made (any run name).
fn left_by(pid: u32) -> Vec<std::path::PathBuf> {
    let mid = format!(".{pid}.");
    let mut dirs = hierarchies();
    dirs.push("/run/dyncore".into());
    dirs.iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("dyncore.") && n.contains(&mid)
        })
        .map(|e| e.path())
        .collect()
}

fn cgroups_v1_as_root() -> bool {
    rustix::process::geteuid().is_root() && Path::new("/sys/fs/cgroup/freezer").is_dir()
}

#[test]
fn bad_commands_are_refused_with_their_place_in_the_file_and_nothing_starts() {
    let guard = tmp("cmd-bad");
    let d = guard.path();
    let out = d.join("out");
    let out = out.to_str().unwrap();
    // An empty argv: refused when the file is read, whatever the backend.
    let f = write(d, &scenario("[[run.workload]]\ncommand = []\n"));
    let o = dyncore(&["check", &f]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains(&format!("{f}:11:11: run[0].workload[0].command: expected a non-empty argv")), "{e}");
    // Both a program and a command; a model of no known program.
    let f = write(d, &scenario("[[run.workload]]\nprogram = \"gcc\"\ncommand = [\"true\"]\n"));
    let e = stderr(&dyncore(&["check", &f]));
    assert!(e.contains("run[0].workload[0].program: a workload names a `program` or a `command`"), "{e}");
    let f = write(d, &scenario("[[run.workload]]\ncommand = [\"true\"]\nmodel = \"gccc\"\n"));
    let e = stderr(&dyncore(&["check", &f]));
    assert!(e.contains(":12:9: run[0].workload[0].model: unknown program `gccc`"), "{e}");
    // The simulator cannot run a command without a model: one line, exit 2.
    let f = write(d, &scenario("[[run.workload]]\ncommand = [\"true\"]\n"));
    let o = dyncore(&["run", &f, "--out", out]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.contains(&format!("{f}:11:11: run[0].workload[0].command: the simulator cannot run a command")),
        "{e}"
    );
    // With a model, it simulates the model.
    let f = write(d, &scenario("[[run.workload]]\ncommand = [\"true\"]\nmodel = \"gcc\"\nwork_ms = 10\n"));
    let o = dyncore(&["run", &f, "--out", out, "--quiet"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A command not on PATH: refused live before anything starts.
    let _cpus = dyncore_runtime::testing::real_cpus();
    let f = write(d, &scenario("[[run.workload]]\ncommand = [\"dyncore-no-such-command\"]\n"));
    let live_out = d.join("live-out");
    let c = command(&["run", "--backend", "live", &f, "--out", live_out.to_str().unwrap()]).output().unwrap();
    assert_eq!(c.status.code(), Some(2));
    let e = stderr(&c);
    assert!(
        e.contains(&format!("{f}:11:11: run[0].workload[0].command: expected a program found on PATH")),
        "{e}"
    );
    assert!(e.contains("dyncore-no-such-command: command not found"), "{e}");
    assert!(!live_out.exists(), "nothing ran, no report folder made");
}

#[test]
fn a_live_run_of_commands_reports_each_against_itself_alone_and_leaves_nothing() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let guard = tmp("cmd-live");
    let d = guard.path();
    let out = d.join("out");
    let f = write(
        d,
        &scenario(
            "[[run.workload]]\ncommand = [\"seq\", \"1\", \"300000\"]\nlabel = \"seq\"\nmodel = \"gcc\"\n\
             work_ms = 50\n[[run.workload]]\ncommand = [\"sh\", \"-c\", \"seq 1 100000 | sort -n | tail -1\"]\n\
             label = \"pipeline\"\nstart_ms = 20\n",
        ),
    );
    let child = command(&["run", "--backend", "both", &f, "--out", out.to_str().unwrap()]).output().unwrap();
    let e = stderr(&child);
    assert_eq!(child.status.code(), Some(0), "{e}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("cmds/results.json")).unwrap()).unwrap();
    let programs = json["live"][0]["programs"].as_array().unwrap();
    assert_eq!(programs.len(), 2);
    for p in programs {
        // Completed, measured against its own time alone (its `work_ns`).
        assert!(p["completion_ns"].as_u64().unwrap() > 0, "{p}");
        assert!(p["work_ns"].as_u64().unwrap() > 0, "{p}");
        assert!(p["speedup"].as_f64().unwrap() > 0.0, "{p}");
        assert!(p["threads"].as_u64().unwrap() >= 1, "{p}");
    }
    // The pipeline's processes were followed (sh, seq, sort, tail).
    assert!(programs[1]["threads"].as_u64().unwrap() >= 3, "{}", programs[1]);
    assert_eq!(json["alone"].as_array().unwrap().len(), 2);
    assert!(json["alone"][0]["after_ns"].as_u64().is_some());
    assert_eq!(json["linux_baseline"][0]["exit"], serde_json::json!([0, 0]));
    // Not every command has a model: no prediction, and the report says so.
    assert!(json["simulator"].is_null());
    let md = std::fs::read_to_string(out.join("cmds/report.md")).unwrap();
    assert!(md.contains("No simulated prediction: not every command gives a `model`"), "{md}");
    assert!(md.contains("| pinned | seq |"), "{md}");
    assert!(md.contains("the arbiter's summary"), "{md}");
    // What ran where, held against the actions (cgroups only).
    let summary = json["summaries"][0].as_str().unwrap();
    if cgroups_v1_as_root() {
        assert!(summary.contains("execution check") && summary.contains(": 0 violation(s)"), "{summary}");
    }
}

/// A run stopped by `sig` in the middle: a nonzero exit, and no group,
/// claim or process of it left.
fn stopped_by(sig: i32, d: &Path) {
    let marker = format!("dyncore-cmd-test-{}-{sig}", std::process::id());
    let f = write(
        d,
        &scenario(&format!(
            "[[run.workload]]\ncommand = [\"sh\", \"-c\", \"sleep 30 & sleep 30; : {marker}\"]\nlabel = \"sleepy\"\n"
        )),
    );
    let out = d.join(format!("out-{sig}"));
    let mut child = command(&["run", "--backend", "live", &f, "--out", out.to_str().unwrap(), "--quiet"])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait until the command runs (alone, the first step), then signal.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !pgrep(&marker) {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) takes no pointers.
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
    let status = child.wait().unwrap();
    assert_ne!(status.code(), Some(0), "stopped by signal {sig}");
    assert!(left_by(pid).is_empty(), "left behind after signal {sig}: {:?}", left_by(pid));
    assert!(!pgrep(&marker), "the command's tree outlived signal {sig}");
}

fn pgrep(marker: &str) -> bool {
    let o = std::process::Command::new("pgrep").args(["-f", marker]).output().unwrap();
    !o.stdout.is_empty()
}

#[test]
fn sigterm_and_sigint_in_the_middle_leave_no_group_and_no_process() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    if !cgroups_v1_as_root() {
        dyncore_runtime::testing::skip(
            dyncore_runtime::testing::Need::Cgroups,
            "needs root and cgroup v1 (the groups are what is checked)",
        );
        return;
    }
    let guard = tmp("cmd-signal");
    for sig in [libc::SIGTERM, libc::SIGINT] {
        stopped_by(sig, guard.path());
    }
}

/// `dyncore run --backend scx` refuses, exit 2 with one reason and nothing
/// created, what it cannot run: a scenario of built-in programs (anywhere),
/// and any scenario on a kernel without sched_ext or where `dyncore-scx`
/// is not built. (It runs for real in the VM rig's guest: .ci/vm-scx.)
#[test]
fn the_sched_ext_backend_refuses_what_it_cannot_run_and_creates_nothing() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let guard = tmp("cmd-scx");
    let d = guard.path();
    let out = d.join("out");
    let o = dyncore(&[
        "run",
        "--backend",
        "scx",
        "--out",
        out.to_str().unwrap(),
        "../../scenarios/fig3-taxation.toml",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("every run's workloads must be commands"), "{}", stderr(&o));
    assert!(!out.exists(), "a refused run created its folder");
    let f = write(d, &scenario("[[run.workload]]\ncommand = [\"true\"]\nmodel = \"gcc\"\nwork_ms = 10\n"));
    let o = dyncore(&["run", "--backend", "scx", "--out", out.to_str().unwrap(), &f]);
    if Path::new("/sys/kernel/sched_ext").is_dir() && o.status.success() {
        println!(
            "this kernel has sched_ext and dyncore-scx is built: the run ran (its checks are .ci/vm-scx's)"
        );
        return;
    }
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("--backend scx: ") && e.contains("sched_ext"), "{e}");
    assert!(!out.exists(), "a refused run created its folder");
}
