//! `dyncore stack` and signals, and the options it refuses (issue 21,
//! classes 4 and 8), run as a user runs it:
//!
//! * SIGTERM, as `timeout` or a service manager sends it, ends a stream
//!   over the TUN wire as Ctrl-C does: the connection closed cleanly, the
//!   report printed, the network namespace removed, exit status 143;
//! * a namespace a SIGKILLed run left is removed by the next run, which
//!   names it;
//! * options that cannot mean anything are refused with exit status 2, in
//!   our words, before anything starts.
//!
//! The TUN tests need root (CAP_NET_ADMIN and `/dev/net/tun`); without it
//! they say so and pass.

mod common;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{command, dyncore, stderr};
use dyncore_net::wire::tun;

/// Why the TUN wire cannot be used here, if it cannot.
fn no_tun() -> Option<String> {
    tun::probe().err().map(|e| e.to_string())
}

/// The namespaces of process `pid` (`dyncore-<pid>-<n>`).
fn namespaces_of(pid: u32) -> Vec<String> {
    tun::namespaces().into_iter().filter(|n| n.starts_with(&format!("dyncore-{pid}-"))).collect()
}

#[test]
fn sigterm_ends_a_tun_stream_cleanly_removes_its_namespace_and_exits_143() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    if let Some(why) = no_tun() {
        dyncore_runtime::testing::skip(dyncore_runtime::testing::Need::Root, &why);
        return;
    }
    let mut child = command(&["stack", "--wire", "tun", "--bytes", "64G", "--cpus", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let started = Instant::now();
    while namespaces_of(pid).is_empty() {
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it made its namespace");
        assert!(started.elapsed() < Duration::from_secs(60), "no namespace after a minute");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let ns = namespaces_of(pid);
    // SAFETY: kill(2) with a pid we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(t.elapsed() < Duration::from_secs(60), "still running a minute after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(143), "{}{out}", stderr(&o));
    assert!(stderr(&o).contains("interrupted by SIGTERM"), "{}", stderr(&o));
    assert!(out.contains("interrupted: the stream was cut short and the connection closed"), "{out}");
    let left: Vec<String> = tun::namespaces().into_iter().filter(|n| ns.contains(n)).collect();
    assert!(left.is_empty(), "SIGTERM left {left:?} behind");
}

#[test]
fn a_namespace_a_killed_run_left_is_removed_and_named_by_the_next_run() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    if let Some(why) = no_tun() {
        dyncore_runtime::testing::skip(dyncore_runtime::testing::Need::Root, &why);
        return;
    }
    // A SIGKILLed run: its namespace stays, its process is gone.
    let mut victim = command(&["stack", "--wire", "tun", "--bytes", "64G", "--cpus", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = victim.id();
    let started = Instant::now();
    while namespaces_of(pid).is_empty() {
        assert!(victim.try_wait().unwrap().is_none(), "the run ended before it made its namespace");
        assert!(started.elapsed() < Duration::from_secs(60), "no namespace after a minute");
        std::thread::sleep(Duration::from_millis(20));
    }
    victim.kill().unwrap(); // SIGKILL
    victim.wait().unwrap();
    let stale = namespaces_of(pid);
    assert!(!stale.is_empty(), "SIGKILL cannot be caught: the namespace must still be there");
    let o = dyncore(&["stack", "--wire", "tun", "--bytes", "1M", "--cpus", "0"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}{out}", stderr(&o));
    for ns in &stale {
        assert!(
            out.contains(&format!("removed network namespace {ns}, left by a run that was killed")),
            "the next run does not say it removed {ns}: {out}"
        );
    }
    assert!(namespaces_of(pid).is_empty(), "{:?} still there", namespaces_of(pid));
}

#[test]
fn options_that_cannot_mean_anything_are_refused_with_status_2() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    for (args, needle) in [
        (&["stack", "--cpus", "0", "--speed", "0=2267,0=1600"][..], "CPU 0 is given two speeds"),
        (&["stack", "--speed", "0=2267,1=1867"][..], "the chip runs at one frequency"),
        (&["stack", "--crash", "ip", "--crash-every-ms", "0"][..], "from 1 to 3600000; found 0"),
        (&["stack", "--limit-s", "0"][..], "from 1 to 86400; found 0"),
        (&["stack", "--limit-s", "-1"][..], "from 1 to 86400; found -1"),
        (&["stack", "--placement", "manual:tcp=0,tcp=0"][..], "tcp is placed twice"),
        (&["stack", "--filter", "deny"][..], "drops the stream"),
        (&["stack", "--at", "1e300s:crash=ip"][..], "later than a run may last"),
        (&["stack", "--at", "18446744073709551616ms:crash=ip"][..], "later than a run may last"),
        (&["stack", "--mtu", "18446744073709551616"][..], "from 576 to 65535"),
    ] {
        let o = dyncore(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        for rust in ["number too large", "invalid digit", "-- -1", "panicked"] {
            assert!(!stderr(&o).contains(rust), "{args:?}: `{rust}` in {}", stderr(&o));
        }
        // Refused before anything starts: no stream, no 120 s wait.
        assert!(!String::from_utf8_lossy(&o.stdout).contains("streaming"), "{args:?} started");
    }
}

/// Spread over fewer CPUs than components shares them: the decision log
/// says so, and gives speeds in MHz, without "consolidate" or "step".
#[test]
fn the_decision_log_says_mhz_and_no_consolidate_in_spread_mode() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    let o = dyncore(&["stack", "--bytes", "1M", "--cpus", "0", "--placement", "spread"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}{out}", stderr(&o));
    let log: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("placement decisions")).skip(1).collect();
    let log: Vec<&str> = log.into_iter().take_while(|l| l.starts_with(' ')).collect();
    assert!(log.iter().any(|l| l.contains("run syscall+tcp+ip+filter+driver together on cpu 0")), "{log:?}");
    assert!(log.iter().any(|l| l.contains("set cpu 0 to 2267 MHz")), "{log:?}");
    assert!(log.iter().all(|l| !l.contains("consolidate") && !l.contains("step")), "{log:?}");
}
