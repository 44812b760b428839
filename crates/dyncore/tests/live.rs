//! `dyncore run --backend live|both` as a user runs it: bad input refused
//! before anything starts (exit status 2), an oversubscribed run labelled
//! and never counted as agreeing, and Ctrl-C leaving a report marked
//! INCOMPLETE and no thread behind. The runs that go live need real-time
//! priority and two CPUs; without them those tests say so and skip.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{command, dyncore, stderr, tmp};

fn scenarios() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

fn scenario(name: &str) -> String {
    scenarios().join(name).to_string_lossy().into_owned()
}

/// Why a live run cannot go here, if it cannot.
fn cannot_run_live() -> Option<String> {
    let allowed = std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list:"))
        .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())?;
    let n: usize = allowed
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap_or(0) + 1 - a.parse::<usize>().unwrap_or(0),
            None => 1,
        })
        .sum();
    if n < 2 {
        return Some(format!("needs 2 CPUs; this process may use {allowed}"));
    }
    // Real-time priority: try it on a thread of our own.
    let rt = std::thread::spawn(|| {
        let param = libc::sched_param { sched_priority: 1 };
        // SAFETY: a valid `sched_param` that outlives the call; pid 0 is
        // this (short-lived) thread.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) }
    })
    .join()
    .unwrap();
    (rt != 0).then(|| "needs real-time priority (root or CAP_SYS_NICE)".into())
}

macro_rules! skip_unless_live {
    () => {
        if let Some(why) = cannot_run_live() {
            dyncore_runtime::testing::skip(dyncore_runtime::testing::Need::Root, &why);
            return;
        }
    };
}

#[test]
fn the_live_scenarios_are_valid() {
    let o = dyncore(&["check", &scenario("live")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ok = String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.starts_with("ok ")).count();
    assert!(ok >= 3, "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn bad_live_options_exit_2_before_anything_starts() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let out = tmp("bad");
    let out = out.path().to_str().unwrap();
    let fig3 = scenario("fig3-taxation.toml");
    let fig5 = scenario("fig5-sequential.toml");
    let cases: [(&[&str], &str); 9] = [
        (&["--time-scale", "0"], "must be a positive number"),
        (&["--time-scale=-2"], "must be a positive number"),
        (&["--time-scale", "NaN"], "must be a positive number"),
        (&["--time-scale", "5000"], "times as long"),
        (&["--time-scale", "0.00001"], "sim.tick_ns"),
        (&["--baseline-duty", "0"], "--baseline-duty 0"),
        (&["--baseline-duty", "150"], "--baseline-duty 150"),
        (&["--real-cpus", "0-4095"], "may not use CPU(s)"),
        (&["--seeds", "3"], "one seed"),
    ];
    for (extra, want) in cases {
        let mut args = vec!["run", "--backend", "live", "--out", out, &fig3];
        args.extend_from_slice(extra);
        let o = dyncore(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{extra:?}: {}", stderr(&o));
    }
    // A baseline that Table 2's faster duties cannot be scaled with (at
    // 60%, ACMP-3's 87.5% becomes 105%), named with the run and the duty.
    let o = dyncore(&["run", "--backend", "both", "--baseline-duty", "60", "--out", out, &fig5]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("87.5% duty (medium speed class on 1 CPU(s)), which becomes 105.0%"),
        "{}",
        stderr(&o)
    );
    // Live-only options on the simulator.
    let o = dyncore(&["run", "--real-cpus", "0", "--out", out, &fig3]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // Nothing was written.
    assert!(!Path::new(out).join("fig3-taxation").exists());
}

#[test]
fn an_oversubscribed_run_is_labelled_and_never_counted() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    skip_unless_live!();
    let out = tmp("over");
    let o = dyncore(&[
        "run",
        "--backend",
        "both",
        "--time-scale",
        "0.1",
        "--real-cpus",
        "0",
        "--out",
        out.path().to_str().unwrap(),
        &scenario("live/live-exit-notify.toml"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = std::fs::read_to_string(out.path().join("live-exit-notify/report.md")).unwrap();
    let top = md.split("## ").next().unwrap();
    assert!(top.contains("**OVERSUBSCRIBED**"), "at the top:\n{top}");
    // Beside every figure, and none counted.
    let side = md.split("## Live beside the simulator").nth(1).unwrap().split("\n\n").nth(1).unwrap();
    let rows: Vec<&str> = side.lines().skip(2).collect();
    assert_eq!(rows.len(), 4, "{side}");
    assert!(rows.iter().all(|r| r.contains("(OVERSUBSCRIBED)") && r.contains("not counted")), "{side}");
    assert!(md.contains("0 of 0 live figure(s) agree"), "{md}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("live-exit-notify/results.json")).unwrap())
            .unwrap();
    assert!(json["side_by_side"].as_array().unwrap().iter().all(|s| s["agrees"] == false));
}

/// The worker threads (`dyncore-cpu*`) of process `pid` now.
fn workers(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|c| c.starts_with("dyncore-cpu"))
        .count()
}

#[test]
fn ctrl_c_stops_every_worker_and_writes_an_incomplete_report() {
    interrupt_a_live_run(libc::SIGINT, 130, "SIGINT (Ctrl-C)");
}

/// SIGTERM, as `timeout` or a service manager sends it, is handled as
/// Ctrl-C is: the same clean stop, with 143.
#[test]
fn sigterm_stops_every_worker_and_writes_an_incomplete_report() {
    interrupt_a_live_run(libc::SIGTERM, 143, "SIGTERM");
}

/// Sends `signal` to a long live run once its workers run, then checks the
/// clean stop: exit `status`, no worker left, the report INCOMPLETE naming
/// the signal, the interrupted run's traffic kept and the index written.
fn interrupt_a_live_run(signal: i32, status: i32, name: &str) {
    let _cpus = dyncore_runtime::testing::real_cpus();
    skip_unless_live!();
    let out = tmp(&format!("signal-{signal}"));
    // A long run: 4 times the scenario (6 s of work per run).
    let mut child = command(&[
        "run",
        "--backend",
        "live",
        "--time-scale",
        "4",
        "--out",
        out.path().to_str().unwrap(),
        &scenario("live/live-fuse-pair.toml"),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let pid = child.id();
    // Its runtime CPUs exist once the run is under way (the handler is
    // installed before); then wait for the calibration to be over.
    while workers(pid) == 0 {
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it was interrupted");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(800));
    // SAFETY: kill(2) with a pid we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
    // It must stop by itself, not hang: the workers are joined.
    let started = Instant::now();
    let ended = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "still running a minute after {name}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let o = child.wait_with_output().unwrap();
    assert_eq!(ended.code(), Some(status), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("interrupted by {name}: every worker stopped")), "{}", stderr(&o));
    let md = std::fs::read_to_string(out.path().join("live-fuse-pair/report.md")).unwrap();
    assert!(md.contains(&format!("**INCOMPLETE**: interrupted by {name} during run `gcc on DYN-2`")), "{md}");
    assert!(md.contains("the 3 run(s) after it did not run"), "{md}");
    // The interrupted run's policy traffic is kept, and the index written.
    assert!(out.path().join("live-fuse-pair/live-0-events.jsonl").is_file());
    assert!(out.path().join("index.html").is_file());
}
