//! The arbiter leaves nothing behind, whatever happens: a normal end,
//! commands that exit non-zero, crash, fork, exec and churn threads, a
//! dyncore panic (the drop guard), `SIGINT`/`SIGTERM` (the tree signalled
//! and reaped), `SIGKILL` (the run's warden; and, the warden killed too,
//! the next start's sweep); and it refuses a second
//! run on overlapping CPUs while letting disjoint ones run side by side.

mod arbiter_common;

use std::io::BufReader;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use arbiter_common::*;
use dyncore_core::Nanos;
use dyncore_core::policy::{Action, Event, Policy};
use dyncore_core::sched::ClusterScheduler;
use dyncore_runtime::arbiter::{Arbiter, ArbiterError, Ending, Exit, LaunchError, Loc, Signals, Want};
use dyncore_runtime::testing::{ChildTest, start_child_test};

fn assert_gone(dirs: &[PathBuf]) {
    for d in dirs {
        assert!(!d.exists(), "{} was left behind", d.display());
    }
}

/// Runs `a` until its commands have all exited (a generous safety limit).
fn run_to_idle<P: Policy + ?Sized>(a: &mut Arbiter<P>) {
    let until = a.now_ns() + 60_000 * MS;
    a.run_until(until, true, &no_stop()).expect("the arbiter runs");
    assert_eq!(a.running_commands(), 0, "a command did not finish in 60 s");
}

#[test]
fn commands_that_exit_crash_fork_exec_and_churn_all_work_and_nothing_is_left() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let Some(cpus) = cpus(2) else { return };
    let usable = cgroups_usable();
    // With the kernel's process events and without (discovery passes
    // only), with cgroups and with affinity only.
    for (want, events) in [(Want::Auto, true), (Want::Auto, false), (Want::Affinity, true)] {
        if want == Want::Auto && !usable {
            continue;
        }
        let mut cfg = config("commands", cpus.clone(), want);
        cfg.events = events;
        commands_run(cfg);
    }
}

fn commands_run(cfg: dyncore_runtime::arbiter::ArbiterConfig) {
    let mut a = Arbiter::new(Box::new(scheduler(2, false)), cfg).unwrap();
    let parents = a.parent_groups();
    assert!(parents.iter().all(|p| p.is_dir()));
    eprintln!("{} {:?}", a.flavor(), a.notes());
    let cases: [(&[&str], Exit); 6] = [
        (&["exit", "3"], Exit::Code(3)),
        (&["crash"], Exit::Signal(libc::SIGABRT)),
        (&["fork", "3", "3000"], Exit::Code(0)),
        (&["exec", "sh", "-c", "exit 4"], Exit::Code(4)),
        (&["churn", "8", "5", "300"], Exit::Code(0)),
        (&["work", "2000", "2"], Exit::Code(0)),
    ];
    for (i, (args, want)) in cases.iter().enumerate() {
        assert_eq!(a.start(&argv(args), spec(1)).unwrap(), i);
        run_to_idle(&mut a);
        assert_eq!(a.commands()[i].exit, Some(*want), "{args:?}: {:?}", a.commands()[i]);
        a.check().expect("the kernel's groups match the policy");
    }
    // A command that does not exist, or is not executable, starts nothing.
    let e = a.start(&[std::ffi::OsString::from("dyncore-no-such-command")], spec(1)).unwrap_err();
    assert!(matches!(e, ArbiterError::Launch(LaunchError::NotFound(_))), "{e}");
    assert_eq!(e.to_string(), "dyncore-no-such-command: command not found");
    let e = a.start(&[std::ffi::OsString::from("/proc/self/status")], spec(1)).unwrap_err();
    assert!(matches!(e, ArbiterError::Launch(LaunchError::NotExecutable(_))), "{e}");
    assert_eq!(a.commands().len(), cases.len());
    let run = a.finish(Ending::Kill);
    assert_gone(&parents);
    let threads_of = |c: usize| run.log.threads.iter().filter(|t| t.command == c).collect::<Vec<_>>();
    // The forked children were followed as processes of their own.
    let fork_pids: std::collections::BTreeSet<_> = threads_of(2).iter().map(|t| t.pid).collect();
    assert!(fork_pids.len() >= 2, "fork: {:?}", threads_of(2));
    // The churned threads were followed as they came and went (each lives
    // a few ms, longer than a discovery pass).
    assert!(threads_of(4).len() >= 3, "churn: {:?}", threads_of(4));
    // The first thread of each command is named after its program: the
    // launch returns once `dyncore-burn` is exec'd, before any discovery.
    // Only the `exec` case may be seen first under its next program: its
    // `sh` can replace `dyncore-burn` before the first discovery pass reads
    // the name (a loaded machine delays discovery by milliseconds). (After
    // an exec from another thread, the process comes back as a new thread,
    // named after its new program: `sh`.)
    for (c, (args, _)) in cases.iter().enumerate() {
        let first = &threads_of(c)[0];
        let names: &[&str] = if args[0] == "exec" { &["dyncore-burn", "sh"] } else { &["dyncore-burn"] };
        assert!(names.contains(&first.comm.as_str()), "command {c}: {first:?} is none of {names:?}");
    }
    assert!(run.log.threads.iter().all(|t| t.exited_ns.is_some()), "every thread exited before the end");
    assert!(run.teardown.is_empty(), "{:?}", run.teardown);
    let latency: Vec<u64> =
        run.log.threads.iter().filter_map(|t| t.spawned_mono_ns.checked_sub(t.created_mono_ns?)).collect();
    eprintln!(
        "{} threads over {} commands; {} corrections; discovery latency of {} threads: p50 {:.1} µs, max {:.1} µs",
        run.log.threads.len(),
        cases.len(),
        run.log.corrections,
        latency.len(),
        dyncore_runtime::arbiter::quantile(&latency, 0.5) as f64 / 1e3,
        dyncore_runtime::arbiter::quantile(&latency, 1.0) as f64 / 1e3,
    );
}

/// Chameleon's scheduler, which panics at its 50th tick: a dyncore bug.
struct PanicsAtTick50(ClusterScheduler, u32);

impl Policy for PanicsAtTick50 {
    fn handle(&mut self, now: Nanos, event: &Event, out: &mut Vec<Action>) {
        if matches!(event, Event::Tick { .. }) {
            self.1 += 1;
            assert!(self.1 < 50, "a policy bug");
        }
        self.0.handle(now, event, out);
    }
}

#[test]
fn a_panic_in_dyncore_kills_the_command_and_removes_the_groups() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let Some(cpus) = cpus(2) else { return };
    for want in [Want::Auto, Want::Affinity] {
        if want == Want::Auto && !cgroups_usable() {
            continue;
        }
        let pid = AtomicI32::new(0);
        let mut parents = Vec::new();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let policy: Box<dyn Policy> = Box::new(PanicsAtTick50(scheduler(2, true), 0));
            let mut a = Arbiter::new(policy, config("panic", cpus.clone(), want)).unwrap();
            parents = a.parent_groups();
            a.start(&argv(&["spin"]), spec(2)).unwrap();
            pid.store(a.commands()[0].pid, Ordering::SeqCst);
            run_for(&mut a, 10_000);
        }));
        assert!(r.is_err(), "the policy panicked");
        let pid = pid.load(Ordering::SeqCst);
        assert!(pid > 0 && !process_alive(pid), "{want:?}: the command {pid} outlived the panic");
        assert_gone(&parents);
    }
}

#[test]
fn two_runs_on_overlapping_cpus_are_refused_and_disjoint_ones_run_side_by_side() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let Some(cpus) = cpus(2) else { return };
    let want = if cgroups_usable() { Want::Auto } else { Want::Affinity };
    let mut a = Arbiter::new(Box::new(scheduler(1, false)), config("left", vec![cpus[0]], want)).unwrap();
    let e = Arbiter::new(Box::new(scheduler(2, false)), config("both", cpus.clone(), want)).err().unwrap();
    let msg = e.to_string();
    assert!(matches!(e, ArbiterError::Overlap(_)), "{msg}");
    assert!(
        msg.starts_with(&format!("CPUs {} are already arbitrated by run dyncore.left.", cpus[0])),
        "{msg}"
    );
    let mut b = Arbiter::new(Box::new(scheduler(1, false)), config("right", vec![cpus[1]], want)).unwrap();
    a.start(&argv(&["spin"]), spec(1)).unwrap();
    b.start(&argv(&["spin"]), spec(1)).unwrap();
    for _ in 0..10 {
        run_for(&mut a, 20);
        run_for(&mut b, 20);
    }
    for (arb, cpu) in [(&a, cpus[0]), (&b, cpus[1])] {
        let p = arb.placements();
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!((p[0].loc, p[0].real_cpu), (Some(Loc::Cpu(0)), Some(cpu)));
    }
    let (ra, rb) = (a.finish(Ending::Kill), b.finish(Ending::Kill));
    assert!(ra.log.threads[0].cpu_ns > 0 && rb.log.threads[0].cpu_ns > 0);
}

// ---- Signals and SIGKILL, with the test binary itself as dyncore ----

/// Runs an arbiter over `spin` until SIGINT or SIGTERM (through the
/// arbiter's `Signals`), ends the run as they say, and exits 128 + the
/// signal. Prints `READY <command pid> <parent groups...>`, then `DONE`
/// with the command's exit, the ending and what the teardown did.
#[test]
#[ignore = "run by the signal and SIGKILL tests in a child process"]
fn arbiter_child() {
    if std::env::var_os("DYNCORE_ARBITER_CHILD").is_none() {
        eprintln!("skipped: runs only as the child of the signal and SIGKILL tests (it waits for a signal)");
        return;
    }
    let _cpus = dyncore_runtime::testing::real_cpus();
    let signals = Signals::install().unwrap();
    let want = if std::env::var("ARBITER_CHILD_AFFINITY").is_ok() { Want::Affinity } else { Want::Auto };
    let cpus = cpus(2).expect("checked by the parent");
    let mut a = Arbiter::new(Box::new(scheduler(2, true)), config("child", cpus, want)).unwrap();
    a.start(&argv(&["spin"]), spec(2)).unwrap();
    let parents: Vec<String> = a.parent_groups().iter().map(|p| p.display().to_string()).collect();
    let warden = a.warden_pid().expect("the run has a warden");
    println!("READY {} {warden} {}", a.commands()[0].pid, parents.join(" "));
    let _ = a.run_until(u64::MAX, true, signals.stop_flag());
    let ending = signals.ending().unwrap_or(Ending::Kill);
    let sig = signals.received().map_or(0, |r| r.signal);
    let run = a.finish(ending);
    println!("DONE exit={:?} ending={ending:?} teardown={:?}", run.log.commands[0].exit, run.teardown);
    std::process::exit(128 + sig);
}

struct Child {
    child: std::process::Child,
    cmd_pid: i32,
    warden_pid: i32,
    parents: Vec<PathBuf>,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    /// The master side of the child's controlling terminal, if it has one.
    terminal: Option<std::fs::File>,
}

/// Starts the test binary running `arbiter_child`: with affinity only if
/// asked, and on a terminal of its own (a pty, its controlling terminal,
/// whose foreground process group it leads) if asked.
fn start_child(affinity: bool, on_terminal: bool) -> Child {
    use std::os::fd::FromRawFd as _;
    use std::os::unix::process::CommandExt as _;
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    dyncore_runtime::testing::held_by_parent(&mut cmd);
    cmd.env("DYNCORE_ARBITER_CHILD", "1");
    if affinity {
        cmd.env("ARBITER_CHILD_AFFINITY", "1");
    }
    let mut terminal = None;
    if on_terminal {
        let (mut master, mut slave) = (0, 0);
        // SAFETY: openpty writes the two descriptors; the other arguments
        // may be null.
        let rc = unsafe {
            libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), std::ptr::null())
        };
        assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: fresh descriptors that nothing else owns.
        terminal = Some(unsafe { std::fs::File::from_raw_fd(master) });
        cmd.stdin(unsafe { Stdio::from_raw_fd(slave) });
        // SAFETY: setsid and ioctl are async-signal-safe; the child makes
        // its stdin (the pty) its controlling terminal.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
    }
    let ChildTest { child, lines, ready } = start_child_test(&mut cmd, "arbiter_child");
    let mut words = ready.iter();
    let cmd_pid = words.next().unwrap().parse().unwrap();
    let warden_pid = words.next().unwrap().parse().unwrap();
    let parents = words.map(PathBuf::from).collect();
    Child { child, cmd_pid, warden_pid, parents, lines, terminal }
}

fn wait_exit(child: &mut std::process::Child) -> std::process::ExitStatus {
    dyncore_runtime::testing::wait_exit(child, Duration::from_secs(30))
}

#[test]
fn sigint_and_sigterm_end_the_tree_reap_it_and_exit_130_and_143() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    if cpus(2).is_none() {
        return;
    }
    let usable = cgroups_usable();
    // (signal, affinity only, from a terminal's Ctrl-C rather than kill)
    for (sig, affinity, terminal) in [
        (libc::SIGINT, false, false),
        (libc::SIGTERM, false, false),
        (libc::SIGINT, true, false),
        (libc::SIGINT, false, true),
    ] {
        if !affinity && !usable {
            continue;
        }
        let mut c = start_child(affinity, terminal);
        assert!(process_alive(c.cmd_pid));
        assert!(c.parents.iter().all(|p| p.is_dir()));
        std::thread::sleep(Duration::from_millis(200));
        match &mut c.terminal {
            // Ctrl-C: the terminal signals its whole foreground process
            // group, the command included.
            Some(master) => std::io::Write::write_all(master, b"\x03").unwrap(),
            // kill: dyncore alone.
            // SAFETY: kill(2) takes no pointers.
            None => assert_eq!(unsafe { libc::kill(c.child.id() as i32, sig) }, 0),
        }
        let rest: Vec<String> = c.lines.by_ref().map_while(Result::ok).collect();
        let status = wait_exit(&mut c.child);
        let done = rest.iter().find(|l| l.contains("DONE ")).expect("the child reported").clone();
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.code(), Some(128 + sig), "{status:?}: {done}");
        assert!(status.signal().is_none());
        assert!(
            done.contains(&format!("exit=Some(Signal({sig}))")),
            "the command died of the signal: {done}"
        );
        if terminal {
            // The terminal signalled the command itself: dyncore waited
            // for it and sent nothing.
            assert!(done.contains("ending=Wait") && !done.contains("sent SIG"), "{done}");
        } else {
            assert!(done.contains(&format!("ending=Signal({sig})")), "{done}");
        }
        assert!(!process_alive(c.cmd_pid), "the command outlived dyncore");
        assert_gone(&c.parents);
    }
}

/// Waits (bounded) until `pred` holds.
fn eventually(limit: Duration, mut pred: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !pred() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

#[test]
fn after_a_sigkill_the_warden_kills_the_command_and_removes_the_groups_with_no_next_start() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    if cpus(2).is_none() {
        return;
    }
    for affinity in [false, true] {
        if !affinity && !cgroups_usable() {
            continue;
        }
        let mut c = start_child(affinity, false);
        std::thread::sleep(Duration::from_millis(100));
        assert!(process_alive(c.warden_pid));
        c.child.kill().unwrap(); // SIGKILL: no teardown runs
        c.child.wait().unwrap();
        assert!(
            eventually(Duration::from_secs(15), || !process_alive(c.cmd_pid) && !process_alive(c.warden_pid)),
            "affinity {affinity}: the command outlived dyncore, or the warden did not finish"
        );
        assert_gone(&c.parents);
    }
}

#[test]
fn after_a_sigkill_of_dyncore_and_its_warden_the_next_start_removes_what_was_left() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    if !cgroups_usable() {
        return;
    }
    let Some(cpus) = cpus(2) else { return };
    let mut c = start_child(false, false);
    std::thread::sleep(Duration::from_millis(100));
    // The warden first (it would clean up), then dyncore.
    // SAFETY: kill(2) on the warden, a live child of the test's child.
    assert_eq!(unsafe { libc::kill(c.warden_pid, libc::SIGKILL) }, 0);
    assert!(eventually(Duration::from_secs(5), || !process_alive(c.warden_pid)));
    c.child.kill().unwrap(); // SIGKILL
    c.child.wait().unwrap();
    // Left behind: the groups, and the command (frozen or running).
    assert!(c.parents.iter().all(|p| p.is_dir()), "the groups are there until the next start");
    assert!(process_alive(c.cmd_pid));
    let name = c.parents[0].file_name().unwrap().to_string_lossy().into_owned();
    let a = Arbiter::new(Box::new(scheduler(2, false)), config("after-kill", cpus, Want::Auto)).unwrap();
    let swept = a.swept().to_vec();
    drop(a);
    assert!(
        swept.iter().any(|l| l.contains(&format!("removed the groups of dead run {name}"))
            && l.contains("killing 1 process")),
        "{swept:?}"
    );
    assert_gone(&c.parents);
    assert!(
        eventually(Duration::from_secs(5), || !process_alive(c.cmd_pid)),
        "the orphaned command was killed"
    );
}

#[test]
fn a_command_cannot_make_itself_real_time_in_the_run_s_groups() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    if !cgroups_usable() {
        return;
    }
    if dyncore_runtime::arbiter::resolve("chrt".as_ref()).is_err() {
        skip(Need::Tool, "no `chrt` in PATH (util-linux) to try real-time priority with");
        return;
    }
    let Some(cpus) = cpus(2) else { return };
    let mut a = Arbiter::new(Box::new(scheduler(2, false)), config("realtime", cpus, Want::Auto)).unwrap();
    let parents = a.parent_groups();
    // chrt runs inside the run's groups, which (with the kernel's real-time
    // group scheduling, as here) have no real-time budget: it is refused,
    // says so, and exits non-zero; nothing of it runs at real-time
    // priority on the run's CPUs.
    let mut cmd = vec![std::ffi::OsString::from("chrt"), "-f".into(), "1".into()];
    cmd.extend(argv(&["work", "1000", "1"]));
    a.start(&cmd, spec(1)).unwrap();
    run_to_idle(&mut a);
    let exit = a.commands()[0].exit;
    let rt_budget = std::path::Path::new("/sys/fs/cgroup/cpu/cpu.rt_runtime_us").exists();
    let run = a.finish(Ending::Kill);
    assert_gone(&parents);
    eprintln!("chrt -f 1 under the arbiter: {exit:?} (real-time group scheduling: {rt_budget})");
    if rt_budget {
        assert_eq!(exit, Some(Exit::Code(1)), "{:?}", run.log.commands);
    }
}
