//! The `dyncore` command as a user runs it: exit statuses, error messages
//! that name file, line and field, and byte-identical reports.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{dyncore, stderr, tmp, write};

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

const GOOD: &str = r#"name = "tiny"
title = "tiny"

[[run]]
label = "Chameleon"
machine = "dynamic"
policy = "chameleon"
nodes = 1
cpus_per_node = 4
[[run.workload]]
program = "sjeng"
work_ms = 20
[[run.workload]]
program = "gcc"
work_ms = 20
start_ms = 5
"#;

#[test]
fn check_accepts_every_shipped_scenario() {
    let o = dyncore(&["check"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let shipped = std::fs::read_dir(scenarios_dir())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "toml"))
        .count();
    let newtos = std::fs::read_dir(scenarios_dir().join("newtos"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "toml"))
        .count();
    let ok_lines = String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.starts_with("ok")).count();
    assert!(shipped >= 8, "the issue asks for 8 scenarios, found {shipped}");
    assert!(newtos >= 6, "issue 11 ships the NewtOS scenarios, found {newtos}");
    assert_eq!(ok_lines, shipped + newtos);
}

#[test]
fn unknown_program_exits_2_naming_file_line_and_field() {
    let guard = tmp("badprog");
    let d = guard.path();
    let f = write(d, "bad.toml", &GOOD.replace("\"gcc\"", "\"gccc\""));
    let o = dyncore(&["check", &f]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    // `program = "gccc"` is line 14 of the file; its value starts at column 11.
    assert!(e.contains(&format!("{f}:14:11: run[0].workload[1].program: unknown program `gccc`")), "{e}");
    assert!(e.contains("known programs: ") && e.contains("mandelbrot-db"), "{e}");
}

#[test]
fn unknown_machine_lists_the_known_ones() {
    let guard = tmp("badarch");
    let d = guard.path();
    let f = write(d, "bad.toml", &GOOD.replace("\"dynamic\"", "\"quantum\""));
    let o = dyncore(&["run", &f, "--out", d.join("out").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains(":6:11: run[0].machine:"), "{e}");
    assert!(e.contains("acmp-3") && e.contains("smt"), "{e}");
    assert!(!d.join("out").join("tiny").exists(), "nothing runs when a scenario is bad");
}

#[test]
fn impossible_machine_is_refused_with_the_reason() {
    let guard = tmp("badfuse");
    let d = guard.path();
    let f = write(d, "bad.toml", &GOOD.replace("cpus_per_node = 4", "cpus_per_node = 4\nmax_fuse = 8"));
    let o = dyncore(&["check", &f]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("run[0].max_fuse"), "{}", stderr(&o));
    let f = write(d, "zero.toml", &GOOD.replace("cpus_per_node = 4", "cpus_per_node = 0"));
    let o = dyncore(&["check", &f]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(":9:17: run[0].cpus_per_node"), "{}", stderr(&o));
}

#[test]
fn syntax_errors_and_wrong_types_name_the_line() {
    let guard = tmp("syntax");
    let d = guard.path();
    let f = write(d, "bad.toml", &GOOD.replace("work_ms = 20\nstart_ms", "work_ms = \"20\"\nstart_ms"));
    let o = dyncore(&["check", &f]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!("{f}:15:11: run[0].workload[1].work_ms: expected a number of ms")),
        "{}",
        stderr(&o)
    );
}

#[test]
fn every_bad_file_is_reported_not_only_the_first() {
    let guard = tmp("two");
    let d = guard.path();
    let a = write(d, "a.toml", &GOOD.replace("\"gcc\"", "\"nope\""));
    let b = write(d, "b.toml", "name = 3\n");
    let o = dyncore(&["check", d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains(&a) && e.contains(&b), "{e}");
}

#[test]
fn missing_file_exits_2() {
    let o = dyncore(&["check", "/nonexistent/x.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/x.toml: no such file"), "{}", stderr(&o));
}

#[test]
fn run_writes_the_report_folder() {
    let guard = tmp("run");
    let d = guard.path();
    let f = write(d, "tiny.toml", GOOD);
    let out = d.join("out");
    let o = dyncore(&["run", &f, "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for file in ["report.md", "results.json", "plot.png", "plot.svg", "trace.json"] {
        let p = out.join("tiny").join(file);
        assert!(std::fs::metadata(&p).map(|m| m.len() > 0).unwrap_or(false), "{} missing", p.display());
    }
    // The index says what was run: this file, not "every shipped scenario".
    let index = std::fs::read_to_string(out.join("index.md")).unwrap();
    assert!(
        index.contains(&format!("The scenarios of `{f}`")) && !index.contains("Every shipped"),
        "{index}"
    );
    assert!(out.join("index.md").exists() && out.join("index.html").exists());
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("tiny/results.json")).unwrap()).unwrap();
    // Five seeds by default, each with the scenario's one run.
    assert_eq!(json["seeds"], serde_json::json!([1, 2, 3, 4, 5]));
    let per_seed = json["results"].as_array().unwrap();
    assert_eq!(per_seed.len(), 5);
    assert!(per_seed.iter().all(|r| r["runs"].as_array().unwrap().len() == 1));
    // The table printed on the terminal names both programs.
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("sjeng") && stdout.contains("gcc"), "{stdout}");
}

/// Every shipped scenario, run twice with the default seeds (several, run
/// in parallel): byte-identical reports, plots and pages.
#[test]
fn shipped_reports_are_byte_identical_across_runs() {
    let guard = tmp("det");
    let d = guard.path();
    let (a, b) = (d.join("a"), d.join("b"));
    for out in [&a, &b] {
        let o = dyncore(&["run", "--quiet", "--out", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let mut compared = 0;
    for e in std::fs::read_dir(&a).unwrap() {
        let e = e.unwrap();
        if !e.path().is_dir() {
            continue;
        }
        for file in ["results.json", "report.md", "trace.json", "plot.svg", "plot.png"] {
            let x = std::fs::read(e.path().join(file)).unwrap();
            let y = std::fs::read(b.join(e.file_name()).join(file)).unwrap();
            assert!(x == y, "{}/{file} differs between two runs", e.file_name().to_string_lossy());
            compared += 1;
        }
    }
    assert!(compared >= 8 * 5);
    // The index's "reproduce" command names the --out it was given.
    let read = |dir: &Path, file: &str| {
        String::from_utf8(std::fs::read(dir.join(file)).unwrap())
            .unwrap()
            .replace(dir.to_str().unwrap(), "OUT")
    };
    for file in ["index.md", "index.html"] {
        let (x, y) = (read(&a, file), read(&b, file));
        assert!(x.contains("--out OUT") || file == "index.html", "{file} names the --out: {x}");
        assert!(x == y, "{file} differs");
    }
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(a.join("fig7-underprovisioned/results.json")).unwrap())
            .unwrap();
    assert!(json["seeds"].as_array().unwrap().len() > 1, "the default run uses several seeds");
}

#[test]
fn bench_sim_quick_writes_a_report_with_goals() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let guard = tmp("benchsim");
    let d = guard.path();
    let o = dyncore(&["--out", d.to_str().unwrap(), "bench", "sim", "--quick"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let dir = d.join("bench-sim");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let rows = j["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for r in rows {
        assert!(r["events"].as_u64().unwrap() > 0 && r["decisions"].as_u64().unwrap() > 0, "{r}");
        assert!(r["events_per_s"].as_f64().unwrap() > 0.0, "{r}");
    }
    let goals = j["goals"].as_array().unwrap();
    let names: Vec<&str> = goals.iter().map(|g| g["goal"].as_str().unwrap()).collect();
    // Events/s; each Chameleon row of the dynamic machine against the
    // queue floor (24 CPUs, and 256 with --quick); the whole run; the
    // NewtOS model; the two sweep engines against --jobs 1.
    assert_eq!(goals.len(), 7, "{names:#?}");
    assert_eq!(names.iter().filter(|n| n.contains("event-queue floor")).count(), 2, "{names:#?}");
    let newtos = goals.iter().find(|g| g["goal"].as_str().unwrap().contains("NewtOS")).unwrap();
    assert!(newtos["measured"].as_str().unwrap().contains("packets"), "{newtos:?}");
    assert_eq!(names.iter().filter(|n| n.contains("parallel efficiency")).count(), 2, "{names:#?}");
    // The sweep row ran the command both ways (8 points with --quick),
    // whether or not a Python with Dask was there.
    assert_eq!(j["sweep"]["points"], 8, "{}", j["sweep"]);
    for e in j["sweep"]["engines"].as_array().unwrap().iter().take(2) {
        assert_eq!(e["wall_ns_by_round"].as_array().unwrap().len(), 2, "{e}");
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("PASS") || md.contains("MISS"), "{md}");
    assert!(md.contains("## Sweep throughput"), "{md}");
    assert!(dir.join("plot.png").exists() && dir.join("plot.svg").exists());
}

/// Names that would put a report outside `--out`, or clash with what the
/// command writes there, are refused by `check` and `run` alike; nothing is
/// written anywhere and no `.tmp` file is left behind.
#[test]
fn names_that_escape_the_report_folder_are_refused_and_nothing_is_written() {
    let guard = tmp("names");
    let d = guard.path();
    let abs = d.join("abs");
    let abs_name = abs.to_str().unwrap().to_string();
    for (i, name) in
        ["../escape", "..", ".", "index.md", "a\\nb", abs_name.as_str(), "/tmp"].iter().enumerate()
    {
        let f = write(
            d,
            &format!("bad{i}.toml"),
            &GOOD.replace("name = \"tiny\"", &format!("name = \"{name}\"")),
        );
        for cmd in ["check", "run"] {
            let o = dyncore(&[cmd, &f, "--out", d.join("out").to_str().unwrap()]);
            assert_eq!(o.status.code(), Some(2), "{cmd} {name}: {}", stderr(&o));
            assert!(stderr(&o).contains(&format!("{f}:1:8: name: ")), "{cmd} {name}: {}", stderr(&o));
        }
    }
    // Only the scenario files exist: no report folder, no escape, no `.tmp`.
    let mut found: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    assert!(found.iter().all(|f| f.starts_with("bad") && f.ends_with(".toml")), "{found:?}");
    assert!(!abs.exists() && !d.parent().unwrap().join("escape").exists());
}

#[test]
fn two_scenarios_with_one_name_are_refused() {
    let guard = tmp("dupname");
    let d = guard.path();
    write(d, "a.toml", GOOD);
    let b = write(d, "b.toml", &GOOD.replace("name = \"tiny\"", "name = \"TINY\""));
    let o = dyncore(&["check", d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(&format!("{b}:1:8: name: `TINY` is also the name of")), "{}", stderr(&o));
}

/// Each hostile input of issue 12 exits 2 with `file:line:col: field: message`.
#[test]
fn hostile_values_exit_2_with_file_line_col_and_field() {
    let guard = tmp("hostile");
    let d = guard.path();
    let sim = |line: &str| GOOD.replace("\n[[run]]", &format!("\n[sim]\n{line}\n\n[[run]]"));
    let wl = |line: &str| {
        GOOD.replace("work_ms = 20\n[[run.workload]]", &format!("work_ms = 20\n{line}\n[[run.workload]]"))
    };
    for (text, at, field) in [
        (wl("pin = \"100000000000000\""), "13:7", "run[0].workload[0].pin"),
        (wl("pin = \"100-200\""), "13:7", "run[0].workload[0].pin"),
        (wl("pin = \"0-999\""), "13:7", "run[0].workload[0].pin"),
        (wl("threads = 4294967295"), "13:11", "run[0].workload[0].threads"),
        (wl("count = 1000000000"), "13:9", "run[0].workload[0].count"),
        (wl("tax = \"x\""), "13:7", "run[0].workload[0].tax"),
        (GOOD.replace("nodes = 1", "nodes = 4611686018427387904"), "8:9", "run[0].nodes"),
        (sim("tick_ns = 1"), "5:11", "sim.tick_ns"),
        (sim("ipi_rate_per_cpu_s = 1e12"), "5:22", "sim.ipi_rate_per_cpu_s"),
        (sim("ipi_rate_per_cpu_s = nan"), "5:22", "sim.ipi_rate_per_cpu_s"),
        (sim("max_time_ns = 9000000000000000000"), "5:15", "sim.max_time_ns"),
        (
            format!("{GOOD}[[paper]]\nx = \"a\"\nseries = \"b\"\nkind = \"prediction\"\nvalue = 0\n"),
            "21:9",
            "paper[0].value",
        ),
        // Issue 33: a claim without a kind, and a self-comparison.
        (format!("{GOOD}[[paper]]\nx = \"a\"\nseries = \"b\"\nvalue = 1\n"), "17:1", "paper[0].kind"),
        (
            format!(
                "{GOOD}[[paper]]\nx = \"a\"\nseries = \"b\"\nkind = \"prediction\"\nrelation = \">\"\nthan = {{}}\n"
            ),
            "22:8",
            "paper[0].than",
        ),
        (GOOD.replace("policy = ", "polcy = "), "7:1", "run[0].polcy"),
    ] {
        let f = write(d, "h.toml", &text);
        let o = dyncore(&["check", &f]);
        assert_eq!(o.status.code(), Some(2), "{field}: {}", stderr(&o));
        assert!(stderr(&o).contains(&format!("{f}:{at}: {field}: ")), "{field}: {}", stderr(&o));
    }
}

#[test]
fn devices_fifos_and_bad_bytes_exit_2_with_what_they_are() {
    let o = dyncore(&["check", "/dev/zero"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/dev/zero: is a character device"), "{}", stderr(&o));
    let guard = tmp("fifo");
    let d = guard.path();
    let fifo = d.join("fifo.toml");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let o = dyncore(&["check", fifo.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "a FIFO with no writer does not block");
    assert!(stderr(&o).contains("pipe that gave nothing to read"), "{}", stderr(&o));
    let bad = d.join("utf8.toml");
    std::fs::write(&bad, b"name = \"t\"\ntitle = \"\xff\"\n").unwrap();
    let o = dyncore(&["check", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!("{}:2:10: byte 0xff is not UTF-8", bad.display())),
        "{}",
        stderr(&o)
    );
}

/// A run past its event budget stops with an error naming the field to
/// change, exit 2, and writes nothing for that scenario (nor the index).
#[test]
fn a_run_past_its_event_budget_stops_and_writes_nothing() {
    let guard = tmp("budget");
    let d = guard.path();
    let f = write(d, "long.toml", &GOOD.replace("\n[[run]]", "\n[sim]\nmax_events = 10\n\n[[run]]"));
    let out = d.join("out");
    let o = dyncore(&["run", &f, "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(&format!(
            "{f}:5:14: sim.max_events: run[0] `Chameleon` stopped at its event budget of 10"
        )),
        "{e}"
    );
    assert!(!out.join("tiny").exists() && !out.join("index.md").exists());
    // Where the file sets no budget, the error points at the run, and still
    // names the field to add.
    let f = write(
        d,
        "long2.toml",
        &GOOD.replace("cpus_per_node = 4", "cpus_per_node = 4\n[run.sim]\nmax_events = 10"),
    );
    let o = dyncore(&["check", &f]);
    assert!(o.status.success(), "the budget is only known by running: {}", stderr(&o));
    let o = dyncore(&["run", &f, "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(&format!("{f}:11:14: run[0].sim.max_events: ")), "{}", stderr(&o));
}

#[test]
fn stack_runs_on_runtime_cpus_with_placement_speed_and_changes_and_explains_them() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let o = dyncore(&[
        "stack",
        "--bytes",
        "4M",
        "--cpus",
        "0",
        "--placement",
        "consolidate",
        "--speed",
        "0=1600",
        "--at",
        "0ms:crash=driver",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}{out}", stderr(&o));
    for needle in [
        "the stream checksums match",
        "run syscall+tcp+ip+filter+driver together on cpu 0",
        "set cpu 0 to 1600 MHz  — requested by hand",
        "1600 MHz (706‰)",
        "wake-ups",
        "modelled",
    ] {
        assert!(out.contains(needle), "no `{needle}` in {out}");
    }
    let o = dyncore(&["stack", "--help"]);
    let out = String::from_utf8_lossy(&o.stdout);
    for needle in ["efficient[:GBPS]", "manual:COMP=CPU", "2267, 1867 or", "duty cycle", "--at"] {
        assert!(out.contains(needle), "--help lacks `{needle}`: {out}");
    }
}

/// Ctrl-C during a stream: the sender closes the connection, the report
/// says so with matching checksums, no stack CPU thread is left, and the
/// exit status is 130.
#[test]
fn stack_ctrl_c_closes_the_stream_cleanly() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let guard = tmp("stack-trace");
    let trace = guard.path().join("trace.json");
    let mut child = common::command(&[
        "stack",
        "--bytes",
        "64G",
        "--cpus",
        "0",
        "--placement",
        "dynamic",
        "--trace",
        trace.to_str().unwrap(),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let pid = child.id();
    let cpu_threads = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| {
                d.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                    .filter(|c| c.starts_with("stack-cpu"))
                    .count()
            })
            .unwrap_or(0)
    };
    while cpu_threads() == 0 {
        assert!(child.try_wait().unwrap().is_none(), "the stream ended before it was interrupted");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) with a pid we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGINT) }, 0);
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < Duration::from_secs(60), "still running a minute after Ctrl-C");
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(130), "{}{out}", stderr(&o));
    assert!(out.contains("interrupted: the stream was cut short and the connection closed"), "{out}");
    assert!(out.contains("the stream checksums match"), "{out}");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let ev = doc["traceEvents"].as_array().unwrap();
    assert!(
        ev.iter()
            .any(|e| e["ph"] == "i" && e["args"]["reason"].as_str().unwrap_or("").contains("mode dynamic")),
        "no decision with its reason in the trace"
    );
    assert!(ev.iter().any(|e| e["name"] == "throughput (Gbps)"));
}

#[test]
fn stack_streams_through_the_split_stack_and_refuses_bad_input() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let o = dyncore(&["stack", "--bytes", "4M", "--crash", "ip", "--crash-every-ms", "1"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}{out}", stderr(&o));
    assert!(out.contains("the stream checksums match") && out.contains("restarts"), "{out}");
    for (args, needle) in [
        (&["stack", "--crash", "nic"][..], "unknown component `nic`; known components: syscall, tcp, ip"),
        (&["stack", "--crash", "tcp", "--peer", "mono"][..], "the monolithic peer takes one connection"),
        (&["stack", "--streams", "0"][..], "expected a whole number from 1 to 64; found 0"),
        (&["stack", "--faults", "0"][..], "expected a whole number of at least 1; found 0"),
        (&["stack", "--at", "1s:update=tcp"][..], "TCP cannot be updated live"),
        (&["stack", "--at", "1s:update=filter@3"][..], "filter has no version 3"),
        (&["stack", "--filter", "permit in"][..], "expected `allow` or `deny`"),
        (&["stack", "--placement", "manual:nic=0"][..], "unknown component `nic`"),
        (&["stack", "--placement", "sideways"][..], "unknown placement `sideways`"),
        (&["stack", "--cpus", "1000"][..], "CPU 1000 is not one this process may use"),
        (
            &["stack", "--cpus", "0", "--placement", "manual:tcp=1000"][..],
            "CPU 1000 is not one this process may use",
        ),
        (&["stack", "--cpus", "0", "--speed", "0=1500"][..], "no speed step of 1500 MHz; the steps are 2267"),
        (&["stack", "--at", "2s:speed=0=999"][..], "no speed step of 999 MHz"),
        (&["stack", "--at", "soon:crash=ip"][..], "`soon` is not a time"),
    ] {
        let o = dyncore(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

/// Four streams; a live update of the filter to version 2, then a TCP
/// crash: the four connections TCP held are reset, their prefixes intact,
/// new ones carry the rest, and the frame audit at rest balances.
#[test]
fn stack_contains_a_tcp_crash_and_updates_the_filter_live() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let o = dyncore(&[
        "stack",
        "--bytes",
        "64M",
        "--streams",
        "4",
        "--at",
        "10ms:update=filter@2",
        "--at",
        "50ms:crash=tcp",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}{out}", stderr(&o));
    for needle in [
        "update filter: version 1 → 2",
        "reset by TCP restarts",
        "prefix intact",
        "the stream checksums match",
        "lost 0, duplicated 0",
        "buffers out: 0",
    ] {
        assert!(out.contains(needle), "no `{needle}` in {out}");
    }
}

/// Four streams with `--tcp-crash recover`; TCP crashes twice while they
/// flow: every connection is resumed from TCP's checkpoints (none reset),
/// the report says so per connection, the checksums match, and the frame
/// audit at rest balances.
#[test]
fn stack_recovers_the_connections_of_a_crashed_tcp() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let o = dyncore(&[
        "stack",
        "--bytes",
        "64M",
        "--streams",
        "4",
        "--tcp-crash",
        "recover",
        "--at",
        "100ms:crash=tcp",
        "--at",
        "300ms:crash=tcp",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}{out}", stderr(&o));
    for needle in [
        "(recovered)",
        "connections recovered by TCP restarts: ",
        "4 connections checked: the stream checksums match",
        "lost 0, duplicated 0",
        "buffers out: 0",
    ] {
        assert!(out.contains(needle), "no `{needle}` in {out}");
    }
    assert!(!out.contains("reset by TCP restarts"), "a connection was reset: {out}");
}

/// A bounded fault campaign from the command line: it reports the crashes
/// per component, the restart times, and the audit, with nothing lost.
#[test]
fn stack_runs_a_fault_campaign_and_reports_what_was_lost() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let o = dyncore(&["stack", "--faults", "150", "--seed", "3"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}{out}", stderr(&o));
    for needle in [
        "fault campaign (seed 3): ",
        "restart times over all components",
        "lost 0, duplicated 0",
        "buffers out: 0",
        "the stream checksums match",
    ] {
        assert!(out.contains(needle), "no `{needle}` in {out}");
    }
}

/// A NewtOS scenario with a bad value: file:line:col, the field, exit 2.
#[test]
fn a_bad_newtos_scenario_names_file_line_and_field() {
    let guard = tmp("newtos-bad");
    let d = guard.path();
    let good = std::fs::read_to_string(scenarios_dir().join("newtos/single.toml")).unwrap();
    for (from, to, field) in [
        ("wakeup_ns = 0.0", "wakeup_ns = -5", "stack.wakeup_ns"),
        ("mhz = 1600", "mhz = 1700", "run[1].cpu[0].mhz"),
    ] {
        assert!(good.contains(from), "{from}");
        let p = d.join("bad.toml");
        std::fs::write(&p, good.replacen(from, to, 1)).unwrap();
        let o = dyncore(&["check", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let e = stderr(&o);
        let line = good.lines().position(|l| l.contains(from)).unwrap() + 1;
        assert!(e.contains(&format!("bad.toml:{line}:")) && e.contains(field), "{e}");
    }
}

/// `--seed` and `--seeds` apply to the network-stack scenarios as to the
/// others: the report names the seeds and how to reproduce them.
#[test]
fn seeds_apply_to_network_stack_scenarios() {
    let guard = tmp("newtos-seeds");
    let d = guard.path();
    let out = d.join("out");
    let f = scenarios_dir().join("newtos/single.toml");
    let o = dyncore(&[
        "run",
        "--quiet",
        f.to_str().unwrap(),
        "--seed",
        "7",
        "--seeds",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("newtos-single/results.json")).unwrap()).unwrap();
    assert_eq!(json["seeds"], serde_json::json!([7, 8]));
    let md = std::fs::read_to_string(out.join("newtos-single/report.md")).unwrap();
    assert!(md.contains("seeds 7–8") && md.contains("--seed 7 --seeds 2"), "{md}");
    // More seeds than a network-stack scenario takes: exit 2, nothing run.
    let o =
        dyncore(&["run", "--quiet", f.to_str().unwrap(), "--seeds", "101", "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("at most 100 seeds"), "{}", stderr(&o));
}

/// A bench's bad arguments exit 2 with the flag and what is accepted, before
/// anything is measured, and `bench stack` makes no report folder for them.
#[test]
fn bad_bench_arguments_exit_2_naming_the_flag() {
    // They are refused before any CPU is used, but a bench command holds
    // the guard whatever it does.
    let _cpus = dyncore_runtime::testing::real_cpus();
    let dir = tmp("bench-bad-args");
    let out = dir.path().to_str().unwrap();
    for (args, says) in [
        (vec!["bench", "stack", "--runs", "0"], "error: --runs must be at least 1"),
        (vec!["bench", "stack", "--mtu", "100"], "error: --mtu 100 is outside 576..=65535"),
        (
            vec!["bench", "stack", "--sender-cpu", "99999"],
            "error: CPU 99999 is not in this process's affinity mask",
        ),
        (vec!["bench", "reconfig", "--rounds", "0"], "error: --rounds must be at least 1"),
        (vec!["bench", "sidecall", "--rounds", "0"], "error: --rounds must be at least 1"),
    ] {
        let mut all = args.clone();
        all.extend_from_slice(&["--out", out]);
        let o = dyncore(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).starts_with(says), "{args:?}: {}", stderr(&o));
    }
    assert!(!dir.path().join("bench-stack").exists(), "a refused bench stack made its report folder");
}

/// The line (1-based) of the `metric` of the `n`th `[[paper]]` entry of
/// `text`.
fn paper_metric_line(text: &str, n: usize) -> usize {
    let mut seen = 0;
    let mut in_entry = false;
    for (i, l) in text.lines().enumerate() {
        if l.trim() == "[[paper]]" {
            in_entry = seen == n;
            seen += 1;
        } else if in_entry && l.starts_with("metric =") {
            return i + 1;
        }
    }
    panic!("no metric in paper entry {n}");
}

/// Issue 33: a claim declared a prediction whose figures are all computed
/// from the scenario's inputs (NewtOS's `resources`: the configured MHz over
/// 4800) is refused, exit 2, with the file, line and field; declared an input
/// (as shipped) it loads.
#[test]
fn a_prediction_of_an_input_only_metric_is_refused_with_file_and_line() {
    let d = tmp("input-only");
    let d = d.path();
    let shipped =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/newtos/fig2.toml"))
            .unwrap();
    let ok = write(d, "fig2.toml", &shipped);
    assert_eq!(dyncore(&["check", &ok]).status.code(), Some(0), "the shipped file loads");
    let start =
        shipped.find("{ claim = \"resources\", kind = \"input\", basis = ").expect("the resources claim");
    let end = start + shipped[start..].find(" text = ").unwrap();
    let lied =
        format!("{}{{ claim = \"resources\", kind = \"prediction\",{}", &shipped[..start], &shipped[end..]);
    let f = write(d, "lied.toml", &lied);
    let o = dyncore(&["check", &f]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // The first entry of the claim `resources` is [[paper]] 3.
    let line = paper_metric_line(&lied, 3);
    let want = format!(
        "{f}:{line}:10: paper[3].metric: declared a `prediction`, but `resources` is the configured MHz"
    );
    assert!(stderr(&o).contains(&want), "want {want:?} in: {}", stderr(&o));
    // Table 2's chip watts (a closed form fitted to Table 2), likewise.
    let shipped =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/newtos/table2.toml"))
            .unwrap();
    let start = shipped.find("{ claim = \"chip\", kind = \"fitted\", basis = ").expect("the chip claim");
    let end = start + shipped[start..].find(" text = ").unwrap();
    let lied = format!("{}{{ claim = \"chip\", kind = \"prediction\",{}", &shipped[..start], &shipped[end..]);
    let f = write(d, "chip.toml", &lied);
    let o = dyncore(&["check", &f]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("metric: declared a `prediction`, but `chip_w` is a closed form"),
        "{}",
        stderr(&o)
    );
}

/// Issue 33: a comparison of a figure with itself always holds, so it is
/// refused, exit 2, with the file and line: an empty `than`/`from`, or one
/// that names the entry's own run and metric.
#[test]
fn a_self_comparison_is_refused_with_file_and_line() {
    let d = tmp("self-comparison");
    let d = d.path();
    let shipped =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/newtos/fig5.toml"))
            .unwrap();
    for (from, to) in [
        ("than = { run = \"#1 200/200\" }", "than = {}"),
        ("than = { run = \"#1 200/200\" }", "than = { run = \"#2 200/200\" }"),
        ("from = { run = \"#1 1600/600\" }", "from = { run = \"#1 1600/800\", metric = \"mbps\" }"),
    ] {
        assert!(shipped.contains(from), "{from}");
        let text = shipped.replacen(from, to, 1);
        let f = write(d, "self.toml", &text);
        let o = dyncore(&["check", &f]);
        assert_eq!(o.status.code(), Some(2), "{to}: {}", stderr(&o));
        let line = text.lines().position(|l| l == to).unwrap() + 1;
        let field = &to[..4];
        assert!(
            stderr(&o).contains(&format!("{f}:{line}:8: paper["))
                && stderr(&o).contains(&format!("].{field}: `{field}` names the entry's own figure")),
            "{to}: {}",
            stderr(&o)
        );
    }
}
