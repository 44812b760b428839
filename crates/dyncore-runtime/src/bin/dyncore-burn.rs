//! `dyncore-burn`: a small CPU-bound test program for the arbiter's tests
//! and benches (built with the workspace, nothing downloaded).
//!
//! ```text
//! dyncore-burn spin                 burn CPU on one thread until killed
//! dyncore-burn work UNITS [THREADS] do UNITS of work on each of THREADS threads (default 1), then exit 0
//! dyncore-burn churn N GAP_MS WORK  start N threads one after another, GAP_MS apart, each doing WORK units;
//!                                   print `CREATED <tid> <CLOCK_MONOTONIC ns>` as each starts
//! dyncore-burn fork N UNITS         fork N processes that each do UNITS of work; wait for them
//! dyncore-burn exec PROGRAM ARGS..  replace this process with PROGRAM (from a second thread)
//! dyncore-burn exit CODE            exit with CODE
//! dyncore-burn crash                abort (SIGABRT)
//! ```
//!
//! A unit is 10 000 rounds of xorshift64: a few µs of integer work that
//! touches no memory, so its time is the CPU's and the duty cycle's alone.
//! `work` prints `DONE <units> <checksum>`; every thread prints
//! `THREAD <tid>` as it starts, so a test knows which ids to watch.

use std::hint::black_box;
use std::io::Write as _;

fn work(units: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..units {
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        x = black_box(x);
    }
    x
}

fn tid() -> i64 {
    // SAFETY: gettid takes no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

fn mono_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec for clock_gettime to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn say(line: String) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> T {
    args.get(i).and_then(|a| a.parse().ok()).unwrap_or_else(|| {
        eprintln!("dyncore-burn: expected {what} as argument {i}");
        std::process::exit(2)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("spin") => {
            say(format!("THREAD {}", tid()));
            loop {
                black_box(work(1_000));
            }
        }
        Some("work") => {
            let units: u64 = arg(&args, 2, "UNITS");
            let threads: usize = if args.len() > 3 { arg(&args, 3, "THREADS") } else { 1 };
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    std::thread::spawn(move || {
                        say(format!("THREAD {}", tid()));
                        work(units)
                    })
                })
                .collect();
            let sum = handles.into_iter().map(|h| h.join().unwrap()).fold(0, u64::wrapping_add);
            say(format!("DONE {units} {sum:x}"));
        }
        Some("churn") => {
            let n: usize = arg(&args, 2, "N");
            let gap_ms: u64 = arg(&args, 3, "GAP_MS");
            let units: u64 = arg(&args, 4, "WORK");
            for _ in 0..n {
                let h = std::thread::spawn(move || {
                    say(format!("CREATED {} {}", tid(), mono_ns()));
                    work(units)
                });
                std::thread::sleep(std::time::Duration::from_millis(gap_ms));
                black_box(h.join().unwrap());
            }
            say("DONE churn".into());
        }
        Some("fork") => {
            let n: usize = arg(&args, 2, "N");
            let units: u64 = arg(&args, 3, "UNITS");
            let mut children = Vec::new();
            for _ in 0..n {
                // SAFETY: this process is single-threaded here; the child
                // only computes and exits.
                let pid = unsafe { libc::fork() };
                if pid == 0 {
                    say(format!("THREAD {}", tid()));
                    black_box(work(units));
                    // SAFETY: _exit ends the child without running the
                    // parent's destructors twice.
                    unsafe { libc::_exit(0) };
                }
                children.push(pid);
            }
            for pid in children {
                let mut status = 0;
                // SAFETY: `status` is valid; `pid` is our child.
                unsafe { libc::waitpid(pid, &mut status, 0) };
            }
            say("DONE fork".into());
        }
        Some("exec") => {
            use std::os::unix::process::CommandExt as _;
            // exec from a thread that is not the leader: the kernel gives it
            // the leader's id (a case the arbiter must follow).
            let rest = args[2..].to_vec();
            let h = std::thread::spawn(move || {
                let e = std::process::Command::new(&rest[0]).args(&rest[1..]).exec();
                eprintln!("dyncore-burn: exec {}: {e}", rest[0]);
                std::process::exit(127)
            });
            let _ = h.join();
        }
        Some("exit") => std::process::exit(arg(&args, 2, "CODE")),
        Some("crash") => std::process::abort(),
        _ => {
            eprintln!(
                "usage: dyncore-burn spin | work UNITS [THREADS] | churn N GAP_MS WORK | fork N UNITS | exec PROGRAM ARGS.. | exit CODE | crash"
            );
            std::process::exit(2)
        }
    }
}
