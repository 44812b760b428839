//! Shared by the arbiter's tests on the real machine: policies, specs,
//! the test program, and whether this machine can run them at all.

#![allow(dead_code)]

use std::ffi::OsString;
use std::sync::atomic::AtomicBool;

use dyncore_core::CpuId;
use dyncore_core::policy::ThreadSpec;
use dyncore_core::reconfig::Mode;
use dyncore_core::sched::{ClusterScheduler, Config};
use dyncore_core::speed::{SpeedClass, SpeedModel};
use dyncore_core::topology::Topology;
use dyncore_runtime::arbiter::{Arbiter, ArbiterConfig, Flavor, Probe, Want};

pub const MS: u64 = 1_000_000;

/// The test program built with this package.
pub fn burn() -> OsString {
    OsString::from(env!("CARGO_BIN_EXE_dyncore-burn"))
}

pub fn argv(args: &[&str]) -> Vec<OsString> {
    let mut v = vec![burn()];
    v.extend(args.iter().map(OsString::from));
    v
}

pub fn spec(want_cpus: usize) -> ThreadSpec {
    ThreadSpec { nice: 0, tax: 1.0, want_cpus, weight: 1.5, affinity: None, class: SpeedClass::High }
}

/// Chameleon's cluster scheduler on `n` CPUs that may fuse (Table 2's
/// dynamic processor), or its Linux-like mode at the 50% baseline.
pub fn scheduler(n: usize, chameleon: bool) -> ClusterScheduler {
    ClusterScheduler::new(
        Topology::uniform(1, n),
        Config {
            min_granularity_ns: 16 * MS,
            chameleon,
            notify_on_exit: true,
            max_fuse: n,
            speed: if chameleon { SpeedModel::DYNAMIC } else { SpeedModel::BASELINE },
            reconfig_mode: Mode::Bolt,
        },
    )
}

pub use dyncore_runtime::testing::{Need, skip};

/// Whether this runs in a guest of `dyncore vm` under TCG (emulated CPUs,
/// whose timers fire late): its figures are functional, never timings.
pub fn tcg_guest() -> bool {
    std::env::var("DYNCORE_VM_ACCEL").is_ok_and(|v| v == "tcg")
}

/// The real CPUs to use: the first `n` this process may use, or `None`
/// (the test says why and skips) when there are fewer.
pub fn cpus(n: usize) -> Option<Vec<CpuId>> {
    let allowed = dyncore_runtime::affinity::allowed_cpus().expect("the affinity mask is readable");
    let v: Vec<CpuId> = allowed.iter().take(n).collect();
    if v.len() < n {
        skip(Need::Cpus(n), &format!("needs {n} CPUs, this process may use only CPU(s) {allowed}"));
        return None;
    }
    Some(v)
}

/// Whether cgroups are usable here (root and a v1 or v2 layout with the
/// controllers); says why not otherwise ([`skip`]).
pub fn cgroups_usable() -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let euid = rustix::process::geteuid().as_raw();
    let probe = Probe::run(&dyncore_runtime::arbiter::probe::ProbeInput {
        mounts: &mounts,
        prefix: "/".as_ref(),
        euid,
    });
    match probe.choose(Want::Auto) {
        Ok((Flavor::Affinity, notes)) => {
            skip(Need::Cgroups, &format!("no usable cgroups here (the cgroup part of the test): {notes:?}"));
            false
        }
        Ok(_) => true,
        Err(e) => {
            skip(Need::Cgroups, &format!("no usable cgroups here (the cgroup part of the test): {e}"));
            false
        }
    }
}

pub fn config(name: &str, cpus: Vec<CpuId>, want: Want) -> ArbiterConfig {
    let mut cfg = ArbiterConfig::new(name, cpus);
    cfg.want = want;
    cfg
}

pub fn no_stop() -> AtomicBool {
    AtomicBool::new(false)
}

/// Runs `a` for `ms` more milliseconds of its clock.
pub fn run_for<P: dyncore_core::policy::Policy + ?Sized>(a: &mut Arbiter<P>, ms: u64) {
    let until = a.now_ns() + ms * MS;
    a.run_until(until, false, &no_stop()).expect("the arbiter runs");
}

/// Whether process `pid` exists (a zombie counts as gone).
pub fn process_alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(')').map(|(_, r)| !r.trim_start().starts_with('Z')))
        .unwrap_or(false)
}
