//! `dyncore exec` as a user runs it: the command's output and exit status
//! passed through; a missing or non-executable command 127/126 and bad
//! arguments 2, with nothing created; SIGTERM, SIGINT and SIGHUP ending
//! the run with 143/130/129, the command's whole tree signalled and reaped
//! and the groups removed; a second run on overlapping CPUs refused, one
//! on other CPUs run beside it; a run whose dyncore dies without its
//! teardown (SIGKILL, SIGQUIT, SIGABRT, SIGUSR1) ended by its warden; the trace and the report folder written.
//! Nothing here asserts a time.

mod common;

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::exec::{Need, alive, allowed, left_by, skip};
use common::{command, stderr, tmp};

fn exec(extra: &[&str], cmd: &[&str]) -> std::process::Command {
    let cpu = allowed()[0].to_string();
    let mut args = vec!["exec", "--policy", "linux", "--cpus", &cpu];
    args.extend_from_slice(extra);
    args.push("--");
    args.extend_from_slice(cmd);
    command(&args)
}

/// Runs to the end: (status, stdout, stderr, dyncore's pid).
fn run(extra: &[&str], cmd: &[&str]) -> (i32, String, String, u32) {
    let child = exec(extra, cmd).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let status = out.status.code().expect("dyncore exited, not killed");
    (status, String::from_utf8_lossy(&out.stdout).into_owned(), stderr(&out), pid)
}

#[test]
fn the_command_s_output_and_exit_status_pass_through_and_nothing_is_left() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let (status, out, err, pid) = run(&[], &["sh", "-c", "echo hello; echo oops >&2; exit 7"]);
    assert_eq!(status, 7, "{err}");
    assert_eq!(out, "hello\n", "the command's stdout, and nothing of dyncore's");
    assert!(err.starts_with("oops\n"), "the command's stderr first: {err}");
    assert!(err.contains("dyncore exec: policy `linux` on CPUs"), "{err}");
    assert!(err.contains("): exit 7, wall "), "{err}");
    assert!(left_by(pid).is_empty(), "left behind: {:?}", left_by(pid));
    // A crash: 128 + the signal, as a shell says.
    let (status, _, err, pid) = run(&["--quiet"], &["sh", "-c", "kill -SEGV $$"]);
    assert_eq!(status, 128 + libc::SIGSEGV, "{err}");
    assert_eq!(err, "", "--quiet prints nothing of dyncore's");
    assert!(left_by(pid).is_empty(), "left behind: {:?}", left_by(pid));
}

#[test]
fn a_missing_or_non_executable_command_exits_127_or_126_in_one_line_and_creates_nothing() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let (status, out, err, pid) = run(&[], &["dyncore-no-such-command", "x"]);
    assert_eq!((status, out.as_str()), (127, ""));
    assert_eq!(err, "dyncore exec: dyncore-no-such-command: command not found\n");
    assert!(left_by(pid).is_empty());
    let dir = tmp("exec-noexec");
    let file = dir.path().join("script");
    std::fs::write(&file, "#!/bin/sh\n").unwrap();
    let (status, _, err, pid) = run(&[], &[file.to_str().unwrap()]);
    assert_eq!(status, 126, "{err}");
    assert_eq!(err, format!("dyncore exec: {}: not an executable file\n", file.display()));
    assert!(left_by(pid).is_empty());
}

#[test]
fn bad_arguments_exit_2_in_one_line_and_create_nothing() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let cpu = allowed()[0].to_string();
    for (args, says) in [
        (
            vec!["--policy", "nope", "--cpus", &cpu],
            "dyncore exec: --policy: unknown policy `nope`; known policies: ",
        ),
        (vec!["--policy", "linux", "--param", "x=1", "--cpus", &cpu], "dyncore exec: --param x: "),
        (vec!["--policy", "linux", "--cpus", "99999"], "dyncore exec: --cpus 99999: "),
        (
            vec!["--policy", "linux", "--cpus", &cpu, "--class", "huge"],
            "error: invalid value 'huge' for '--class <CLASS>'",
        ),
        (vec!["--cpus", &cpu], "error: the following required arguments were not provided"),
    ] {
        let mut all = vec!["exec"];
        all.extend_from_slice(&args);
        all.extend_from_slice(&["--", "true"]);
        let child = command(&all).stderr(Stdio::piped()).spawn().unwrap();
        let pid = child.id();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).starts_with(says), "{args:?}: {}", stderr(&out));
        assert!(left_by(pid).is_empty());
    }
    let out = command(&["exec", "--policy", "linux", "--cpus", &cpu]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "no command: {}", stderr(&out));
}

/// Starts `dyncore exec` on `cpus` over a shell that prints its pid and
/// its background child's, then waits; returns dyncore and those pids.
fn start_tree(cpus: &str) -> (Child, Vec<i32>) {
    start_tree_with(cpus, "auto")
}

/// [`start_tree`] with `--mechanism`.
fn start_tree_with(cpus: &str, mechanism: &str) -> (Child, Vec<i32>) {
    start_script(cpus, mechanism, TREE, 2)
}

/// `dyncore exec` over `sh -c script` on `cpus` with `--mechanism`; the
/// first `pids` lines the script prints, as pids.
fn start_script(cpus: &str, mechanism: &str, script: &str, pids: usize) -> (Child, Vec<i32>) {
    let mut child = command(&[
        "exec",
        "--policy",
        "linux",
        "--cpus",
        cpus,
        "--mechanism",
        mechanism,
        "--",
        "sh",
        "-c",
        script,
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let pids = (0..pids).map(|_| lines.next().unwrap().unwrap().trim().parse().unwrap()).collect();
    (child, pids)
}

/// A shell with a background child, both sleeping until signalled (the
/// background one ignores SIGINT, as a non-interactive shell's do: the
/// grace period ends it).
const TREE: &str = "sleep 300 & echo $!; echo $$; wait";

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) takes no pointers.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

#[test]
fn sigterm_sigint_and_sighup_end_the_run_with_the_tree_reaped_and_the_groups_removed() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let cpu = allowed()[0].to_string();
    for (sig, mechanism) in
        [libc::SIGTERM, libc::SIGINT, libc::SIGHUP].into_iter().flat_map(|s| [(s, "auto"), (s, "affinity")])
    {
        let (child, pids) = start_tree_with(&cpu, mechanism);
        let pid = child.id();
        assert!(!left_by(pid).is_empty(), "a running exec has its groups (or its claim)");
        signal(&child, sig);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(128 + sig), "{}", stderr(&out));
        for p in pids {
            assert!(!alive(p), "process {p} of the tree outlived dyncore (signal {sig}, {mechanism})");
        }
        assert!(left_by(pid).is_empty(), "left behind: {:?}", left_by(pid));
        assert!(stderr(&out).contains("teardown: sent SIG"), "{}", stderr(&out));
        eprintln!("{mechanism}, {}: left behind: 0", dyncore_runtime::arbiter::signal_name(sig));
    }
}

#[test]
fn a_second_run_on_overlapping_cpus_is_refused_and_one_on_other_cpus_runs_beside() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let cpus = allowed();
    let first = cpus[0].to_string();
    let (child, _) = start_tree(&first);
    let (status, _, err, pid) = run(&[], &["true"]);
    assert_eq!(status, 2, "{err}");
    let says =
        format!("dyncore exec: CPUs {first} are already arbitrated by run dyncore.exec.{}.", child.id());
    assert!(err.starts_with(&says), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(left_by(pid).is_empty());
    if let Some(other) = cpus.get(1) {
        let other = other.to_string();
        let out = command(&["exec", "-q", "--policy", "linux", "--cpus", &other, "--", "sh", "-c", "exit 3"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    } else {
        eprintln!("one CPU: the run beside is not tried");
    }
    signal(&child, libc::SIGTERM);
    assert_eq!(child.wait_with_output().unwrap().status.code(), Some(143));
}

/// `--out` takes the folder as `dyncore run` does: a second exec into the
/// folder a running one writes is refused (exit 2), naming the first.
#[test]
fn a_second_exec_into_a_held_report_folder_is_refused() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let cpus = allowed();
    let dir = tmp("exec-held-out");
    let out = dir.path().join("report");
    let out = out.to_str().unwrap();
    let first_cpu = cpus[0].to_string();
    let mut first =
        command(&["--out", out, "exec", "--policy", "linux", "--cpus", &first_cpu, "--", "sh", "-c", TREE])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    let mut lines = BufReader::new(first.stdout.take().unwrap()).lines();
    let _ = lines.next();
    let other = cpus.last().unwrap().to_string();
    let o = command(&["--out", out, "exec", "--policy", "linux", "--cpus", &other, "--", "true"])
        .output()
        .unwrap();
    let pid = first.id();
    signal(&first, libc::SIGTERM);
    let _ = first.wait_with_output();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&format!("another dyncore run (pid {pid})")), "{}", stderr(&o));
}

/// A tree with a double-forked, `setsid` orphan (reparented to dyncore, a
/// child subreaper): prints the background child's pid, the orphan's, then
/// the shell's, and waits.
const TREE_WITH_ORPHAN: &str = "sleep 300 & echo $!; (setsid sleep 300 & echo $!); echo $$; wait";

/// Every death of dyncore that runs no teardown (SIGKILL, which the OOM
/// killer sends too; SIGQUIT and SIGABRT, which dump core; SIGUSR1, which
/// it does not handle), in both mechanisms: the run's warden kills the
/// whole tree, the double-forked orphan included, thaws and removes the
/// groups and the claim, with no next start. Nothing stays frozen.
#[test]
fn every_death_of_dyncore_leaves_nothing_behind() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let cpu = allowed()[0].to_string();
    for mechanism in ["auto", "affinity"] {
        for sig in [libc::SIGKILL, libc::SIGQUIT, libc::SIGABRT, libc::SIGUSR1] {
            let (child, pids) = start_script(&cpu, mechanism, TREE_WITH_ORPHAN, 3);
            let pid = child.id();
            let case = format!("{mechanism}, {}", dyncore_runtime::arbiter::signal_name(sig));
            // The orphan is adopted by dyncore, then found by the arbiter.
            let deadline = Instant::now() + Duration::from_secs(10);
            while parent(pids[1]) != Some(pid as i32) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            assert_eq!(parent(pids[1]), Some(pid as i32), "{case}: the orphan's parent is dyncore");
            std::thread::sleep(Duration::from_millis(100));
            signal(&child, sig);
            let out = child.wait_with_output().unwrap();
            use std::os::unix::process::ExitStatusExt as _;
            assert_eq!(out.status.signal(), Some(sig), "{case}: {}", stderr(&out));
            let deadline = Instant::now() + Duration::from_secs(15);
            while (pids.iter().any(|&p| alive(p)) || !left_by(pid).is_empty()) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            for &p in &pids {
                assert!(!alive(p), "{case}: process {p} of the tree outlived dyncore: {}", stderr(&out));
            }
            assert!(left_by(pid).is_empty(), "{case}: left behind: {:?}", left_by(pid));
            assert!(
                stderr(&out).contains(&format!("dyncore warden: run dyncore.exec.{pid}.")),
                "{case}: the warden says what it did: {}",
                stderr(&out)
            );
            eprintln!("{case}: left behind: 0 ({})", stderr(&out).lines().last().unwrap_or(""));
        }
    }
}

/// A memory group of its own for process `pid`, with a 64 KiB limit: the
/// next pages it touches make the kernel's OOM killer kill it. Returns the
/// group and the file whose `oom_kill` line counts the kills; `None`
/// where there is no memory controller to use.
fn oom_group(pid: u32) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let v1 = std::path::Path::new("/sys/fs/cgroup/memory");
    let v2 = std::path::Path::new("/sys/fs/cgroup");
    let name = format!("dyncore-test-oom-{pid}");
    let (dir, limit, value, events) = if v1.join("memory.limit_in_bytes").exists() {
        (v1.join(&name), "memory.limit_in_bytes", "65536", "memory.oom_control")
    } else if std::fs::read_to_string(v2.join("cgroup.subtree_control")).is_ok_and(|c| c.contains("memory")) {
        (v2.join(&name), "memory.max", "65536", "memory.events")
    } else {
        return None;
    };
    std::fs::create_dir(&dir).ok()?;
    let _ = std::fs::write(dir.join("memory.swappiness"), "0");
    std::fs::write(dir.join(limit), value).ok()?;
    std::fs::write(dir.join("cgroup.procs"), pid.to_string()).ok()?;
    Some((dir.clone(), dir.join(events)))
}

/// A real OOM kill of dyncore (its memory group's limit lowered under
/// it): the kernel's SIGKILL, which no handler sees; the warden ends the
/// run (the warden is in no such group, and as root is never the OOM
/// killer's choice).
#[test]
fn an_oom_killed_dyncore_leaves_nothing_behind() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let cpu = allowed()[0].to_string();
    for mechanism in ["auto", "affinity"] {
        let (child, pids) = start_tree_with(&cpu, mechanism);
        let pid = child.id();
        let Some((group, events)) = oom_group(pid) else {
            signal(&child, libc::SIGTERM);
            let _ = child.wait_with_output();
            skip(
                Need::Cgroups,
                "no memory controller (v1 `memory`, or v2 `memory` enabled at the root) to OOM-kill dyncore with",
            );
            return;
        };
        let out = child.wait_with_output().unwrap();
        let kills = std::fs::read_to_string(&events).unwrap_or_default();
        let deadline = Instant::now() + Duration::from_secs(15);
        while (pids.iter().any(|&p| alive(p)) || !left_by(pid).is_empty()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir(&group);
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(out.status.signal(), Some(libc::SIGKILL), "{mechanism}: {}", stderr(&out));
        let oom_kills: u64 = kills
            .lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        assert!(oom_kills >= 1, "{mechanism}: the OOM killer did it ({kills})");
        for &p in &pids {
            assert!(!alive(p), "{mechanism}: process {p} outlived the OOM-killed dyncore: {}", stderr(&out));
        }
        assert!(left_by(pid).is_empty(), "{mechanism}: left behind: {:?}", left_by(pid));
        assert!(stderr(&out).contains("dyncore warden: run"), "{mechanism}: {}", stderr(&out));
        eprintln!("{mechanism}, OOM kill: left behind: 0 ({})", stderr(&out).lines().last().unwrap_or(""));
    }
}

/// The parent of process `pid`.
fn parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn the_trace_and_the_report_folder_are_written_and_the_traffic_replays() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let dir = tmp("exec-out");
    let trace = dir.path().join("t.json");
    let report = dir.path().join("report");
    let cpus = allowed();
    let list = cpus.iter().take(2).map(|c| c.to_string()).collect::<Vec<_>>().join(",");
    let out = command(&[
        "exec",
        "--policy",
        "chameleon",
        "--cpus",
        &list,
        "--trace",
        trace.to_str().unwrap(),
        "--out",
        report.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done",
    ])
    .output()
    .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let t: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let events = t["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| e["ph"] == "X" && e["name"].as_str().unwrap().starts_with("sh [")));
    for f in ["report.md", "summary.txt", "threads.csv", "events.jsonl", "actions.jsonl", "trace.json"] {
        assert!(report.join(f).is_file(), "{f} missing");
    }
    let csv = std::fs::read_to_string(report.join("threads.csv")).unwrap();
    assert!(csv.lines().count() >= 2, "{csv}");
    // The traffic replays through a fresh policy, action for action.
    let events = std::fs::read_to_string(report.join("events.jsonl")).unwrap();
    let actions = std::fs::read_to_string(report.join("actions.jsonl")).unwrap();
    let n = cpus.len().min(2);
    let ctx = dyncore_core::policies::RunContext {
        topology: dyncore_core::topology::Topology::uniform(1, n),
        speed: dyncore_core::speed::SpeedModel::DYNAMIC,
        max_fuse: if n >= 2 { 2 } else { 1 },
        tick_ns: 4_000_000,
        min_granularity_ns: 16_000_000,
        notify_on_exit: true,
        reconfig_mode: dyncore_core::reconfig::Mode::Bolt,
        seed: 0,
    };
    let registry = dyncore_core::policies::Registry::builtin();
    let params = registry.validate("chameleon", &[]).unwrap();
    let mut policy = registry.build("chameleon", &ctx, &params).unwrap();
    let parsed = dyncore_core::policy::trace::parse_events(&events).unwrap();
    assert!(!parsed.is_empty());
    let replayed = dyncore_core::policy::trace::replay(&parsed, &mut policy);
    assert!(replayed == actions, "the recorded traffic is the policy's own: the replay differs");
}

#[test]
fn with_affinity_only_the_command_runs_and_its_status_passes_through() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let (status, _, err, pid) = run(&["--mechanism", "affinity"], &["sh", "-c", "exit 4"]);
    assert_eq!(status, 4, "{err}");
    assert!(err.contains("mechanism: sched_setaffinity only"), "{err}");
    assert!(left_by(pid).is_empty());
}

/// Every registered policy runs real programs: under `exec` with each
/// mechanism this machine has (cgroups if it has them, and CPU affinity),
/// and as a live scenario's command workload. A policy that works in the
/// simulator but not on real programs fails here (park-idle's standalone
/// `Offline`, with no Fuse before it, once ended every exec with 125).
#[test]
fn every_registered_policy_runs_a_command_under_exec_and_in_a_live_scenario() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let cpus = allowed();
    let n = cpus.len().min(2);
    let list: Vec<String> = cpus[..n].iter().map(ToString::to_string).collect();
    let list = list.join(",");
    let dir = tmp("exec-every-policy");
    for policy in dyncore::Registry::builtin().names() {
        for mechanism in ["auto", "affinity"] {
            let o = command(&[
                "exec",
                "--policy",
                policy,
                "--cpus",
                &list,
                "--mechanism",
                mechanism,
                "--quiet",
                "--",
                "sh",
                "-c",
                "sleep 0.2; echo done",
            ])
            .output()
            .unwrap();
            assert_eq!(o.status.code(), Some(0), "{policy} ({mechanism}): {}", stderr(&o));
            assert_eq!(String::from_utf8_lossy(&o.stdout), "done\n", "{policy} ({mechanism})");
        }
        let text = format!(
            "name = \"every-{policy}\"\ntitle = \"{policy} on a command\"\nseed = 1\n\n[[run]]\nlabel = \
             \"{policy}\"\nmachine = \"uniform\"\ncpus_per_node = {n}\nmax_fuse = {n}\npolicy = \
             \"{policy}\"\n[[run.workload]]\ncommand = [\"sh\", \"-c\", \"sleep 0.2\"]\nlabel = \"sleep\"\nmodel \
             = \"nqueen\"\nwork_ms = 10\n"
        );
        let f = common::write(dir.path(), &format!("{policy}.toml"), &text);
        let out = dir.path().join(format!("out-{policy}"));
        let o = command(&[
            "run",
            "--backend",
            "live",
            "--real-cpus",
            &list,
            "--quiet",
            "--out",
            out.to_str().unwrap(),
            &f,
        ])
        .output()
        .unwrap();
        assert_eq!(o.status.code(), Some(0), "{policy} live: {}", stderr(&o));
        let results = std::fs::read_to_string(out.join(format!("every-{policy}/results.json"))).unwrap();
        assert!(!results.contains("\"finished\": false"), "{policy} live: a run did not finish: {results}");
    }
}

/// A double-forked grandchild in a session of its own (`setsid`), whose
/// parent exits at once, is the run's: dyncore is a child subreaper, so
/// the orphan is reparented to it, not to init; it is killed and reaped at
/// the end of the run, in both mechanisms (with cgroups its group holds it
/// as well; with affinity only nothing else would have found it).
#[test]
fn a_double_forked_setsid_grandchild_is_kept_and_killed_in_every_mechanism() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let dir = tmp("exec-orphan");
    for mechanism in ["auto", "affinity"] {
        let file = dir.path().join(format!("{mechanism}.pid"));
        let parent = dir.path().join(format!("{mechanism}.ppid"));
        // The orphan's parent once its own has exited: dyncore, not init.
        let script = format!(
            "(setsid sleep 30 & echo $! > {f}) ; sleep 0.5; grep PPid /proc/$(cat {f})/status > {p}",
            f = file.display(),
            p = parent.display()
        );
        let (status, _, err, pid) = run(&["--mechanism", mechanism], &["sh", "-c", &script]);
        assert_eq!(status, 0, "{mechanism}: {err}");
        let orphan: i32 = std::fs::read_to_string(&file).unwrap().trim().parse().unwrap();
        let ppid = std::fs::read_to_string(&parent).unwrap();
        assert_eq!(
            ppid.split_whitespace().nth(1),
            Some(pid.to_string().as_str()),
            "{mechanism}: adopted by {ppid}"
        );
        assert!(!alive(orphan), "{mechanism}: the orphan {orphan} outlived the run: {err}");
        assert!(left_by(pid).is_empty(), "{mechanism}: left behind: {:?}", left_by(pid));
    }
}

/// A test that needs the real CPUs waits for a run outside the tests (a
/// user's `dyncore exec` on the same CPUs) to end, and only then goes on;
/// it once failed at once with `Overlap` beside it.
#[test]
fn a_test_waits_for_a_users_run_on_its_cpus_instead_of_failing() {
    use dyncore_runtime::arbiter::SystemPaths;
    use dyncore_runtime::arbiter::registry::claims_now;
    let first = dyncore_runtime::testing::real_cpus();
    let list: Vec<String> = allowed().iter().map(ToString::to_string).collect();
    // Started as a user starts it, not through the tests' helper: it
    // stands for a run outside the tests.
    let mut user = std::process::Command::new(env!("CARGO_BIN_EXE_dyncore"))
        .args(["exec", "--policy", "linux", "--cpus", &list.join(","), "--quiet", "--", "sleep", "1.5"])
        .spawn()
        .unwrap();
    let state = SystemPaths::default().state_dir;
    let mine = |c: &(String, dyncore::core::CpuSet, Option<u32>)| c.2 == Some(user.id());
    let t = Instant::now();
    while !claims_now(&state).iter().any(mine) {
        assert!(t.elapsed() < Duration::from_secs(60), "the user's run never claimed its CPUs");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(first);
    let _second = dyncore_runtime::testing::real_cpus();
    assert!(!claims_now(&state).iter().any(mine), "the guard was given while the user's run held the CPUs");
    assert!(user.wait().unwrap().success());
}
