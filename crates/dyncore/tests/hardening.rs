//! Hostile use of `dyncore run`, `check` and `bench` beyond the scenario's
//! own fields: the report folder (`--out`), inputs read once, files a
//! scenario names, options that do not apply, names the command writes
//! itself, and runs in which nothing finished. Each is refused early, in
//! our own words, with exit 2 (or 3 for "nothing finished").

mod common;

use std::path::Path;
use std::process::Command;

use common::{command, dyncore, stderr, stdout, tmp, write};

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
"#;

/// No Rust, serde, clap or OS-internal wording in what the user reads.
fn ours(e: &str) {
    for internal in ["os error", "invalid digit", "tip:", "expected u", "ParseIntError", "panicked"] {
        assert!(!e.contains(internal), "`{internal}` in: {e}");
    }
}

#[test]
fn an_out_that_cannot_hold_reports_is_refused_before_any_work() {
    // `bench` takes the real CPUs' guard even though it is refused first.
    let _cpus = dyncore_runtime::testing::real_cpus();
    let guard = tmp("out");
    let d = guard.path();
    let f = write(d, "tiny.toml", GOOD);
    let file = write(d, "plain", "x");
    let cases = [
        (file.clone(), "is a file, not a folder"),
        ("/dev/null".to_string(), "is a device"),
        (format!("{file}/sub"), "a part of the path is a file"),
        ("/proc/self".to_string(), "cannot write into the folder"),
        // It exists: the reason is its file system, not a missing folder.
        ("/proc".to_string(), "its file system does not hold files of ours"),
    ];
    for (out, want) in &cases {
        for args in [vec!["run", &f, "--out", out], vec!["--out", out, "bench", "sim", "--quick"]] {
            let o = command(&args).output().unwrap();
            let e = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
            assert!(e.contains(&format!("--out {out}: ")) && e.contains(want), "{args:?}: {e}");
            assert!(!stdout(&o).contains("tiny"), "nothing ran: {}", stdout(&o));
            ours(&e);
        }
    }
}

/// The folder is held by another process, this test binary run as
/// [`holds_a_report_folder_for_its_parent`]. A holder in this process would
/// not do: a `flock` belongs to the open file description, and a child that
/// another test's thread forks shares it until its `exec`, so dropping an
/// in-process holder does not free the folder at once (a soak caught the
/// second run refused, naming this process). A holder process that has
/// exited has closed its descriptor for good.
#[test]
fn a_second_run_into_a_held_folder_is_refused_naming_the_first() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let guard = tmp("lock");
    let d = guard.path();
    let f = write(d, "tiny.toml", GOOD);
    let out = d.join("out");
    let mut holder = Command::new(std::env::current_exe().unwrap())
        .args(["holds_a_report_folder_for_its_parent", "--exact", "--ignored", "--nocapture"])
        .env(HOLD, &out)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
    while lines.next().expect("the holder exited before it held the folder").unwrap() != "HOLDING" {}
    let o = dyncore(&["run", &f, "--out", out.to_str().unwrap()]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains(&format!("(pid {})", holder.id())) && e.contains("another dyncore run"), "{e}");
    assert!(!out.join("tiny").exists());
    drop(holder.stdin.take());
    assert!(holder.wait().unwrap().success(), "the holder failed");
    let o = dyncore(&["run", &f, "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.join("tiny/report.md").exists());
}

/// The folder [`a_second_run_into_a_held_folder_is_refused_naming_the_first`]
/// names, held for the parent test until its standard input closes.
const HOLD: &str = "DYNCORE_TEST_HOLD_OUT";

#[test]
#[ignore = "run by a_second_run_into_a_held_folder_is_refused_naming_the_first as its holder"]
fn holds_a_report_folder_for_its_parent() {
    let Some(out) = std::env::var_os(HOLD) else { return };
    let held = dyncore::report::outdir::OutDir::open(Path::new(&out)).unwrap();
    println!("HOLDING");
    std::io::stdin().read_line(&mut String::new()).unwrap();
    drop(held);
}

#[test]
fn a_killed_runs_half_written_folder_is_removed_by_the_next_run() {
    let guard = tmp("stale");
    let d = guard.path();
    let f = write(d, "tiny.toml", GOOD);
    let out = d.join("out");
    let stale = out.join(".tiny.tmp-4000000");
    std::fs::create_dir_all(&stale).unwrap();
    std::fs::write(stale.join("report.md"), "half").unwrap();
    let o = dyncore(&["run", &f, "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("removed {}", stale.display())), "{}", stderr(&o));
    assert!(!stale.exists());
    let left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp") || n.contains(".old-"))
        .collect();
    assert!(left.is_empty(), "nothing staged is left: {left:?}");
}

#[test]
fn a_pipe_is_read_once() {
    let guard = tmp("pipe");
    let d = guard.path();
    let f = write(d, "tiny.toml", GOOD);
    let net = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/newtos/single.toml");
    for file in [f.as_str(), net.to_str().unwrap()] {
        let script = format!("exec \"$0\" check <(cat '{file}')");
        let o =
            Command::new("bash").arg("-c").arg(&script).arg(env!("CARGO_BIN_EXE_dyncore")).output().unwrap();
        assert!(o.status.success(), "{file}: {}", stderr(&o));
        assert!(stdout(&o).starts_with("ok  /dev/fd/"), "{}", stdout(&o));
    }
}

#[test]
fn a_profile_is_read_under_the_scenarios_limits() {
    let guard = tmp("profile");
    let d = guard.path();
    std::fs::create_dir(d.join("folder")).unwrap();
    std::fs::write(d.join("big.toml"), vec![b'#'; (1 << 20) + 10]).unwrap();
    std::fs::write(d.join("bad.toml"), "[cost\n").unwrap();
    let cases = [
        ("/dev/zero", "is a character device"),
        ("folder", "is a folder"),
        ("big.toml", "larger than 1 MiB"),
        ("missing.toml", "no such file or folder"),
        ("bad.toml", "bad.toml:1:"),
    ];
    for (profile, want) in cases {
        let text = GOOD.replace("\n[[run]]", &format!("\n[sim]\nprofile = \"{profile}\"\n\n[[run]]"));
        let f = write(d, "p.toml", &text);
        let o = dyncore(&["check", &f]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{profile}: {e}");
        assert!(e.contains(&format!("{f}:5:11: sim.profile: the machine profile")), "{profile}: {e}");
        assert!(e.contains(want), "{profile}: {e}");
        ours(&e);
    }
}

#[test]
fn options_that_do_not_apply_to_network_stack_scenarios_are_refused() {
    let net = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/newtos/single.toml");
    let net = net.to_str().unwrap();
    let guard = tmp("netflags");
    let out = guard.path().join("out");
    let out = out.to_str().unwrap();
    let o = dyncore(&["run", net, "--time-scale", "0.5", "--out", out]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--time-scale: a network-stack scenario"), "{}", stderr(&o));
    // The refusal comes before any real CPU is used; the guard is what
    // every command with a live backend takes.
    let _cpus = dyncore_runtime::testing::real_cpus();
    let o = command(&["run", "--backend", "live", net, "--out", out]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--backend live|both: a network-stack scenario runs on the simulator only"));
}

#[test]
fn names_the_command_writes_itself_are_refused_for_every_kind_of_scenario() {
    let guard = tmp("reserved");
    let d = guard.path();
    let net = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/newtos/single.toml"),
    )
    .unwrap();
    let net_name = net.lines().find(|l| l.starts_with("name")).unwrap().to_string();
    for name in ["bench-stack", "BENCH-newtos", "bench-arbiter", "sweep-tax", "index.html"] {
        let f = write(d, "a.toml", &GOOD.replace("name = \"tiny\"", &format!("name = \"{name}\"")));
        let g = write(d, "b.toml", &net.replacen(&net_name, &format!("name = \"{name}\""), 1));
        for file in [f, g] {
            let o = dyncore(&["check", &file]);
            assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
            assert!(stderr(&o).contains("is a name the command itself writes"), "{}", stderr(&o));
        }
    }
}

#[test]
fn a_run_in_which_nothing_finished_exits_3_and_warns_on_stderr() {
    let guard = tmp("unfinished");
    let d = guard.path();
    let f = write(d, "t.toml", &GOOD.replace("\n[[run]]", "\n[sim]\nmax_time_ns = 1000000\n\n[[run]]"));
    let out = d.join("out");
    let o = dyncore(&["run", &f, "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("hit max_time_ns before every program finished"), "{e}");
    assert!(e.contains("no program finished in any run"), "{e}");
    assert!(!stdout(&o).contains("warning"), "warnings go to stderr: {}", stdout(&o));
    assert!(out.join("tiny/report.md").exists(), "the report is written all the same");
}

#[test]
fn numbers_in_flags_are_judged_in_our_words() {
    let guard = tmp("flags");
    let f = write(guard.path(), "tiny.toml", GOOD);
    for (args, want) in [
        (vec!["run", &f, "--seed", "-1"], "`-1` is not a seed"),
        (vec!["run", &f, "--seed", "18446744073709551616"], "is not a seed"),
        (vec!["run", &f, "--seeds", "0"], "`0` is not a number of seeds"),
        (vec!["run", &f, "--seeds", "1e300"], "is not a number of seeds"),
        (vec!["run", &f, "--time-scale", "abc"], "`abc` is not a number"),
    ] {
        let o = dyncore(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {e}");
        ours(&e);
    }
}

/// Every value of every shipped scenario (Chameleon's and the network
/// stack's) replaced by hostile ones: whatever the reader says is in our
/// words, never serde's or Rust's.
#[test]
fn every_error_the_scenario_readers_give_is_in_our_words() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut files: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .chain(std::fs::read_dir(root.join("newtos")).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let hostile =
        ["\"x\"", "-1", "1e300", "-1e300", "1e-300", "18446744073709551616", "true", "[]", "{}", "nan"];
    let internal = [
        "invalid type",
        "invalid value",
        "expected u",
        "expected i8",
        "expected i16",
        "expected i32",
        "expected i64",
        "expected f",
        "number too large",
        "wanted ",
        "untagged",
        "..=",
        "did not match",
        "struct ",
    ];
    let (mut tried, mut refused) = (0, 0);
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let net = dyncore::sim::netstack::scenario::is_net_scenario(&text);
        for (i, line) in text.lines().enumerate() {
            let Some((key, _)) = line.split_once('=') else { continue };
            if line.trim_start().starts_with(['#', '[', '"']) || key.contains('{') {
                continue;
            }
            for value in hostile {
                let mut lines: Vec<&str> = text.lines().collect();
                let replaced = format!("{key}= {value}");
                lines[i] = &replaced;
                let bad = lines.join("\n");
                tried += 1;
                let message = if net {
                    dyncore::report::newtos::parse(file, &bad).err().map(|e| e.to_string())
                } else {
                    dyncore::scenario::load::parse(file, &bad).err().map(|e| e.to_string())
                };
                let Some(m) = message else { continue };
                refused += 1;
                for w in internal {
                    assert!(!m.contains(w), "{}:{}: `{replaced}` gave `{w}`: {m}", file.display(), i + 1);
                }
            }
        }
    }
    assert!(tried > 1000 && refused > tried / 2, "{refused} of {tried} hostile values refused");
    eprintln!("{refused} of {tried} hostile values refused, all in our words");
}

/// Numbers a bench cannot use, and outputs that cannot be written (a
/// folder, `/proc`, a device), are refused before any work, exit 2 in our
/// words, never a panic (these once panicked, exited 1, or lost the output
/// after the work).
#[test]
fn bench_numbers_and_unwritable_outputs_are_refused_before_any_work() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let guard = tmp("bench-numbers");
    let out = guard.path().join("out");
    let out = out.to_str().unwrap();
    for (args, want) in [
        (vec!["bench", "sidecall", "--quick", "--throughput-secs", "1e308"], "--throughput-secs 1e308"),
        (vec!["bench", "sidecall", "--quick", "--throughput-secs", "nan"], "--throughput-secs NaN"),
        (vec!["bench", "sidecall", "--quick", "--server-cpu", "100000"], "CPU 100000 is not in"),
        (vec!["bench", "reconfig", "--quick", "--cpus", "100000"], "--cpus 100000: expected 2 to 4096"),
        (vec!["bench", "reconfig", "--quick", "--cpus", "0"], "--cpus 0: expected 2 to 4096"),
        (vec!["bench", "reconfig", "--quick", "--repeats", "0"], "--repeats must be at least 1"),
        (
            vec!["bench", "sim", "--quick", "--rounds", "0"],
            "'--rounds <ROUNDS>': expected a whole number of at least 1",
        ),
        (
            vec!["bench", "arbiter", "--rounds", "0"],
            "'--rounds <ROUNDS>': expected a whole number of at least 1",
        ),
        (vec!["bench", "arbiter", "--cpu", "100000"], "--cpu 100000: not a CPU this process may use"),
        (vec!["bench", "stack", "--bytes", "0"], "'--bytes <BYTES>': `0` is not a size"),
        // A size with a suffix is taken, as `stack --bytes` takes it: the
        // refusal is the next flag's.
        (vec!["bench", "stack", "--bytes", "1M", "--runs", "0"], "--runs must be at least 1"),
        (vec!["topology", "--allowed", ""], "an empty CPU list"),
        (
            vec!["stack", "--wire", "tun", "--peer", "mono"],
            "--peer mono: over --wire tun the peer is Linux's own",
        ),
        // Outputs that cannot be written, found before any work.
        (
            vec!["bench", "reconfig", "--quick", "--write-profile", "/tmp"],
            "--write-profile /tmp: is a folder",
        ),
        (
            vec!["bench", "reconfig", "--quick", "--write-profile", "/proc/x.toml"],
            "folder /proc takes no new files",
        ),
        (vec!["bench", "stack", "--quick", "--write-profile", "/dev/full"], "is not a regular file"),
        (vec!["stack", "--trace", "/tmp"], "--trace /tmp: is a folder"),
        (vec!["exec", "--policy", "linux", "--trace", "/dev/full", "--", "true"], "is not a regular file"),
        (
            vec!["exec", "--policy", "linux", "--trace", "/proc/x.json", "--", "true"],
            "folder /proc takes no new files",
        ),
    ] {
        let mut all = vec!["--out", out];
        all.extend_from_slice(&args);
        let o = dyncore(&all);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {e}");
        ours(&e);
        assert!(!Path::new(out).exists(), "{args:?}: a refused bench created {out}");
    }
}
