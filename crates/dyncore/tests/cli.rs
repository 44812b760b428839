//! The `dyncore` command as a user runs it: exit statuses, error messages
//! that name file, line and field, and byte-identical reports.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn dyncore(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dyncore"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the dyncore binary runs")
}

fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dyncore-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
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

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn check_accepts_every_shipped_scenario() {
    let o = dyncore(&["check"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let shipped = std::fs::read_dir(scenarios_dir())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "toml"))
        .count();
    let ok_lines = String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.starts_with("ok")).count();
    assert!(shipped >= 8, "the issue asks for 8 scenarios, found {shipped}");
    assert_eq!(ok_lines, shipped);
}

#[test]
fn unknown_program_exits_2_naming_file_line_and_field() {
    let d = tmp("badprog");
    let f = write(&d, "bad.toml", &GOOD.replace("\"gcc\"", "\"gccc\""));
    let o = dyncore(&["check", &f]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    // `program = "gccc"` is line 14 of the file; its value starts at column 11.
    assert!(e.contains(&format!("{f}:14:11: run[0].workload[1].program: unknown program `gccc`")), "{e}");
    assert!(e.contains("known programs: ") && e.contains("mandelbrot-db"), "{e}");
}

#[test]
fn unknown_machine_lists_the_known_ones() {
    let d = tmp("badarch");
    let f = write(&d, "bad.toml", &GOOD.replace("\"dynamic\"", "\"quantum\""));
    let o = dyncore(&["run", &f, "--out", d.join("out").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains(":6:11: run[0].machine:"), "{e}");
    assert!(e.contains("acmp-3") && e.contains("smt"), "{e}");
    assert!(!d.join("out").join("tiny").exists(), "nothing runs when a scenario is bad");
}

#[test]
fn impossible_machine_is_refused_with_the_reason() {
    let d = tmp("badfuse");
    let f = write(&d, "bad.toml", &GOOD.replace("cpus_per_node = 4", "cpus_per_node = 4\nmax_fuse = 8"));
    let o = dyncore(&["check", &f]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("run[0].max_fuse"), "{}", stderr(&o));
    let f = write(&d, "zero.toml", &GOOD.replace("cpus_per_node = 4", "cpus_per_node = 0"));
    let o = dyncore(&["check", &f]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(":9:17: run[0].cpus_per_node"), "{}", stderr(&o));
}

#[test]
fn syntax_errors_and_wrong_types_name_the_line() {
    let d = tmp("syntax");
    let f = write(&d, "bad.toml", &GOOD.replace("work_ms = 20\nstart_ms", "work_ms = \"20\"\nstart_ms"));
    let o = dyncore(&["check", &f]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(&format!("{f}:15:")), "{}", stderr(&o));
    assert!(stderr(&o).contains("work_ms"), "{}", stderr(&o));
}

#[test]
fn every_bad_file_is_reported_not_only_the_first() {
    let d = tmp("two");
    let a = write(&d, "a.toml", &GOOD.replace("\"gcc\"", "\"nope\""));
    let b = write(&d, "b.toml", "name = 3\n");
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
    let d = tmp("run");
    let f = write(&d, "tiny.toml", GOOD);
    let out = d.join("out");
    let o = dyncore(&["run", &f, "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    for file in ["report.md", "results.json", "plot.png", "plot.svg", "trace.json"] {
        let p = out.join("tiny").join(file);
        assert!(std::fs::metadata(&p).map(|m| m.len() > 0).unwrap_or(false), "{} missing", p.display());
    }
    assert!(out.join("index.md").exists());
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("tiny/results.json")).unwrap()).unwrap();
    assert_eq!(json["runs"].as_array().unwrap().len(), 1);
    // The table printed on the terminal names both programs.
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("sjeng") && stdout.contains("gcc"), "{stdout}");
}

/// Every shipped scenario, run twice: byte-identical reports.
#[test]
fn shipped_reports_are_byte_identical_across_runs() {
    let d = tmp("det");
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
        for file in ["results.json", "report.md", "trace.json", "plot.svg"] {
            let x = std::fs::read(e.path().join(file)).unwrap();
            let y = std::fs::read(b.join(e.file_name()).join(file)).unwrap();
            assert!(x == y, "{}/{file} differs between two runs", e.file_name().to_string_lossy());
            compared += 1;
        }
    }
    assert!(compared >= 8 * 4);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bench_sim_quick_writes_a_report_with_goals() {
    let d = tmp("benchsim");
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
    assert_eq!(j["goals"].as_array().unwrap().len(), 2);
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("PASS") || md.contains("MISS"), "{md}");
    assert!(dir.join("plot.png").exists() && dir.join("plot.svg").exists());
}

#[test]
fn stack_streams_through_the_split_stack_and_refuses_bad_input() {
    let o = dyncore(&["stack", "--bytes", "4M", "--crash", "ip", "--crash-every-ms", "1"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}{out}", stderr(&o));
    assert!(out.contains("the stream checksums match") && out.contains("restarts"), "{out}");
    for (args, needle) in [
        (&["stack", "--crash", "nic"][..], "unknown component `nic`; known components: syscall, tcp, ip"),
        (&["stack", "--crash", "tcp"][..], "cannot be restarted"),
        (&["stack", "--filter", "permit in"][..], "expected `allow` or `deny`"),
    ] {
        let o = dyncore(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}
