//! `dyncore vm`: the rig's refusals (no guest needed), and guests that run a
//! command, show the topology asked for, panic, hang, and are killed
//! mid-boot, each leaving no QEMU or virtiofsd behind.
//!
//! The guest tests need the rig (`dyncore vm setup`: QEMU, virtiofsd,
//! busybox, the pinned kernel, root). Without it each says so in one line
//! and returns; with `DYNCORE_VM_REQUIRED=1` (set by `.ci/run`, which sets
//! the rig up first) that is a failure, and the first guest test runs
//! `dyncore vm setup` itself. They boot one guest at a time.

mod common;

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{dyncore, stderr, stdout, tmp};

/// One guest at a time: each is a QEMU with its vCPUs on this machine's few
/// CPUs.
static ONE_GUEST: Mutex<()> = Mutex::new(());

/// Whether the rig is set up; says why not (a failure under
/// `DYNCORE_VM_REQUIRED=1`).
fn rig_ready() -> bool {
    let required = std::env::var_os("DYNCORE_VM_REQUIRED").is_some_and(|v| v == "1");
    if required {
        // CI: set the rig up (once per test binary) rather than skip.
        static SETUP: std::sync::Once = std::sync::Once::new();
        SETUP.call_once(|| {
            let o = dyncore(&["vm", "setup"]);
            assert!(o.status.success(), "dyncore vm setup failed:\n{}", stderr(&o));
        });
    }
    let tools = dyncore_vm::HostTools::find();
    let kernel = dyncore_vm::kernel::locate(&rig_dir());
    let root = rustix::process::geteuid().is_root();
    let why = match (tools, kernel, root) {
        (Err(e), _, _) => e.to_string(),
        (_, Err(e), _) => e.to_string(),
        (_, _, false) => "the rig needs root (virtiofsd)".to_string(),
        _ => return true,
    };
    let line = format!("skipped: the VM rig is not set up here: {why}");
    if required {
        panic!("{line} (DYNCORE_VM_REQUIRED=1: a skip is a failure)");
    }
    eprintln!("{line}");
    false
}

/// The rig folder the test binary's `dyncore` uses (`target/vm`).
fn rig_dir() -> std::path::PathBuf {
    std::env::var_os("DYNCORE_VM_DIR").map(Into::into).unwrap_or_else(|| {
        std::path::Path::new(env!("CARGO_BIN_EXE_dyncore")).parent().unwrap().parent().unwrap().join("vm")
    })
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    ONE_GUEST.lock().unwrap_or_else(|e| e.into_inner())
}

/// The processes whose command line names a scratch folder of rig `pid`
/// (its QEMU and virtiofsd).
fn left_by_rig(pid: u32) -> Vec<String> {
    let mark = format!("dyncore-vm.{pid}.");
    let mut left = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else { continue };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        if cmd.contains(&mark) {
            left.push(format!(
                "{}: {}",
                e.file_name().to_string_lossy(),
                cmd.chars().take(120).collect::<String>()
            ));
        }
    }
    left
}

#[test]
fn impossible_topologies_and_bad_options_exit_2_before_anything_boots() {
    for (args, want) in [
        (&["--cpus", "0"][..], "1 to 64 CPUs"),
        (&["--cpus", "65"][..], "1 to 64 CPUs"),
        (&["--cpus", "8", "--smt", "3"][..], "cannot be built"),
        (&["--cpus", "4", "--sockets", "3"][..], "cannot be built"),
        (&["--env", "NOEQUALS"][..], "NAME=VALUE"),
        (&["--timeout", "0"][..], "--timeout 0"),
    ] {
        let mut a = vec!["vm", "run"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["--", "true"]);
        let o = dyncore(&a);
        assert_eq!(o.status.code(), Some(2), "{a:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{a:?}: {}", stderr(&o));
        assert!(stderr(&o).starts_with("dyncore vm: error: "), "{a:?}: {}", stderr(&o));
    }
}

#[test]
fn a_command_that_is_not_there_exits_2_naming_it() {
    let o = dyncore(&["vm", "run", "--", "no-such-command-anywhere"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("`no-such-command-anywhere` is not there"), "{}", stderr(&o));
    let o = dyncore(&["vm", "run", "--", "./not/here"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no executable file"), "{}", stderr(&o));
}

#[test]
fn a_missing_kernel_exits_2_and_says_how_to_get_one() {
    let empty = tmp("vm-nokernel");
    let o =
        common::command(&["vm", "run", "--", "true"]).env("DYNCORE_VM_DIR", empty.path()).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    // Without the tools, the tools are named first; with them, the kernel.
    assert!(e.contains("dyncore vm setup"), "{e}");
    let o = dyncore(&["vm", "run", "--kernel", "/no/such/bzImage", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn a_guest_runs_the_command_with_its_status_output_and_writable_folder() {
    if !rig_ready() {
        return;
    }
    let _g = lock();
    let out = tmp("vm-out");
    let script = "echo to-stdout; echo to-stderr >&2; echo $DYNCORE_VM_ACCEL > written; \
                  cat /sys/fs/cgroup/cgroup.subtree_control; touch /etc/dyncore-vm-ro 2>/dev/null && echo WROTE-ROOT; exit 7";
    let o = Command::new(env!("CARGO_BIN_EXE_dyncore"))
        .args(["vm", "run", "--cpus", "2", "--", "sh", "-c", script])
        .current_dir(out.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(7), "the command's status passes through: {}", stderr(&o));
    let so = stdout(&o);
    assert!(so.starts_with("to-stdout\n"), "quiet when it works: only the command's output: {so:?}");
    assert!(so.contains("cpuset") && so.contains("cpu "), "cgroup v2 with controllers: {so}");
    assert!(!so.contains("WROTE-ROOT"), "the host's root is read-only in the guest");
    assert_eq!(stderr(&o), "to-stderr\n");
    let accel = std::fs::read_to_string(out.path().join("written")).expect("the working folder is writable");
    assert!(matches!(accel.trim(), "tcg" | "kvm"), "{accel}");
}

#[test]
fn the_guest_topology_is_exactly_what_was_asked() {
    if !rig_ready() {
        return;
    }
    let _g = lock();
    let o =
        dyncore(&["vm", "run", "--cpus", "8", "--smt", "2", "--sockets", "2", "--", "dyncore", "topology"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let t = stdout(&o);
    assert!(t.contains("possible CPUs 0-7, online 0-7"), "{t}");
    assert!(t.contains("SMT active; 8 usable CPU(s) in 2 package(s)"), "{t}");
    assert!(t.contains("NUMA nodes: node 0: 0-3; node 1: 4-7"), "{t}");
    for pair in ["0-1 (OS CPUs 0-1)", "2-3 (OS CPUs 2-3)", "4-5 (OS CPUs 4-5)", "6-7 (OS CPUs 6-7)"] {
        assert!(t.contains(pair), "sibling pair {pair}: {t}");
    }
}

#[test]
fn a_panicking_guest_is_an_error_with_the_console_and_a_hung_one_is_stopped() {
    if !rig_ready() {
        return;
    }
    let _g = lock();
    let o = dyncore(&["vm", "run", "--", "sh", "-c", "echo c > /proc/sysrq-trigger; sleep 30"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("the guest kernel panicked"), "{e}");
    assert!(e.contains("the guest console's last lines"), "{e}");
    assert!(e.contains("sysrq") || e.contains("Kernel panic"), "the console's own words: {e}");

    let o = dyncore(&["vm", "run", "--timeout", "20", "--", "sleep", "600"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("past its limit of 20 s"), "{}", stderr(&o));
}

#[test]
fn a_rig_killed_mid_boot_leaves_no_qemu_behind() {
    if !rig_ready() {
        return;
    }
    let _g = lock();
    for (sig, status) in [(libc::SIGINT, Some(130)), (libc::SIGTERM, Some(143)), (libc::SIGKILL, None)] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_dyncore"))
            .args(["vm", "run", "--cpus", "2", "--", "sleep", "600"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        // Mid-boot: once QEMU runs, before the guest can have finished.
        let t0 = Instant::now();
        while left_by_rig(pid).iter().all(|p| !p.contains("qemu-system")) {
            assert!(t0.elapsed() < Duration::from_secs(60), "QEMU never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(1500));
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(pid as i32, sig) };
        let st = child.wait().unwrap();
        assert_eq!(st.code(), status, "signal {sig}");
        let t0 = Instant::now();
        loop {
            let left = left_by_rig(pid);
            if left.is_empty() {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(10), "signal {sig}: left running: {left:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        if status.is_some() {
            let mut e = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut e).unwrap();
            assert!(e.contains("interrupted by signal"), "{e}");
        }
    }
}
