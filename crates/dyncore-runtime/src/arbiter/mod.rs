//! The arbiter: unmodified Linux processes placed, throttled and "fused"
//! by a dyncore policy, through cgroups (or, failing those, CPU affinity).
//!
//! An [`Arbiter`] drives any [`Policy`] — through the same boundary as the
//! simulator and the runtime's executor — over real CPUs, for commands it
//! starts: it follows every thread of their process trees as it appears
//! and exits, feeds each to the policy as `Spawn`/`Exit` (and as
//! `Block`/`Wake` as it sleeps and wakes), ticks every CPU,
//! and carries out what the policy says on the real threads.
//!
//! ## Mechanisms ([`probe`] chooses; the run reports which and why)
//!
//! | action | cgroup v1 / v2 | affinity only |
//! |---|---|---|
//! | `Dispatch { c, Running { T } }` | T moves into runtime CPU c's group: pinned to c's real CPU (`cpuset.cpus`), under c's quota, thawed | T's affinity = c's real CPU |
//! | T not running (queued, or its CPU went to another) | T moves into the run's frozen `held` group | `SCHED_IDLE` (root) |
//! | T asleep (`S` a whole tick: handed to the policy as `Block`; `Wake` when it runs again, module `sleep`) | T stays in the group it was in (an online CPU's), not frozen, so it can be seen to wake; woken, it runs there until the next tick round | T keeps its CPU |
//! | `SetSpeed { c, duty }` | c's CFS quota = duty × period ([`PERIOD_US`], 20 ms; `cpu.cfs_quota_us` / `cpu.max`; 100% = no quota) | not enforced (counted) |
//! | `Offline { cpus }` (a fuse's borrowed CPUs) | critical path only, Bolt-style: each CPU's threads held, then its group frozen (empty and frozen) | threads held |
//! | `Online { cpus }` | each CPU's group thawed | — |
//! | `Fuse` / `Split` | recorded; the representative's quota (its `SetSpeed`) is the fused duty | same |
//! | `Migrate`, `Object` | recorded in the action trace | same |
//! | `Place` (network-stack components) | refused: [`ArbiterError::Unsupported`] | same |
//!
//! Every `Offline`/`Online` is answered by its `ReconfigDone` with the
//! critical path measured ([`ReconfigRecord`](crate::backend::ReconfigRecord)
//! has its steps: `hold-threads`, `freeze-group`, `thaw-group`). The
//! action's mode (Bolt or naive) is recorded; both are carried out the
//! same way, since a group has no deferred work to defer.
//!
//! ## One call (`Arbiter::feed`), step by step
//! 1. The event is stamped with the arbiter's clock and handed to the
//!    policy; the traffic is recorded (and, in debug builds, checked
//!    against the boundary's contract).
//! 2. The actions are executed in order: `SetSpeed` writes the quota at
//!    once; `Offline`/`Online` hold the CPU's threads and freeze it (or
//!    thaw it) at once; `Dispatch` updates the arbiter's mirror of the
//!    policy's CPUs.
//! 3. Then the real threads are made to match the mirror (`reconcile`):
//!    every thread whose place changes is first moved into `held` (and
//!    the arbiter waits, bounded, until the freezer says it is frozen);
//!    then each thread the policy runs is moved into its CPU's group. So a
//!    thread leaving a CPU runs no more of its code before the next one
//!    starts there (it may still be on its way into the freezer, in the
//!    kernel, when the wait times out: [`Actuation::freeze_late`]), and a
//!    thread moving between CPUs passes through `held`.
//!
//! ## Invariants
//! [`Arbiter::check`] checks 1 and 2 against the kernel's own records (the
//! tests call it between steps); the registry keeps 4; the teardown and
//! the sweep keep 3; in debug builds every call's traffic also goes
//! through the boundary's contract checker.
//! 1. A thread the policy runs on CPU c is in c's group (every hierarchy),
//!    an asleep one in an online CPU's group, and any other thread it does
//!    not run is in `held`, once the call that decided it returns.
//! 2. No thread is in the group of an offline CPU; that group is frozen.
//! 3. Every group the run created is under its one parent group, named
//!    after the run; all are removed, and every process of the run is
//!    killed, when the run ends, however it ends: the teardown; `Drop`;
//!    the run's warden ([`warden`]) when dyncore dies without either
//!    (SIGKILL, the OOM killer, SIGQUIT, an abort); the next run's sweep if
//!    the warden was killed too. Processes are signalled only through
//!    pidfds (module `teardown`).
//! 4. Two live runs never hold a CPU in common ([`registry`]).
//!
//! ## What really ran where
//! The arbiter samples every placed thread's CPU time and last CPU every
//! tick and before every move (from `/proc`, the kernel's record, not its
//! own), records when offline CPUs really stopped and started (when the
//! kernel reports their groups frozen and thawed), looks at offline
//! groups' usage, and holds that against the actions with the execution
//! checker (`dyncore_core::policy::execution`); a held thread that runs
//! once the kernel reports it frozen is a violation too.
//! [`ArbiterRun::execution`], module [`observe`] (and its bound: a sampled
//! check). With affinity only, placed threads are checked the same way;
//! held ones may run (`SCHED_IDLE`).
//!
//! ## Following the threads
//! As root, the arbiter listens to the kernel's process events (the proc
//! connector, `procevents`): it wakes as a thread of one of the run's
//! processes is created or exits, and spawns it to the policy at once; a
//! full pass over the run's groups every `safety_poll_ns` catches anything
//! lost. Without them (not root), a full pass every `poll_ns`. A command's
//! exit wakes the arbiter through a pidfd. What a thread not yet
//! discovered does: it was created in its creator's group, so it runs on
//! its creator's CPU under its creator's quota (or is frozen with it).

mod affinity_only;
mod baseline;
mod cgfs;
mod cgroups;
mod controller;
mod discover;
mod driver;
mod execute;
pub mod observe;
mod one_cpu;
mod poll;
pub mod probe;
mod procevents;
pub mod record;
pub mod registry;
mod signals;
mod sleep;
mod spawn;
mod start;
mod summary;
mod teardown;
pub mod warden;

use std::path::PathBuf;
use std::time::Duration;

use dyncore_core::{CpuId, Nanos};

use crate::backend::DutyScale;

pub use baseline::{AloneRun, Together, run_alone, run_together};
pub use cgroups::{PERIOD_US, bandwidth};
pub use controller::spare_cpu;
pub use discover::{cpu_time_ns, last_cpu_and_state};
pub use driver::{Arbiter, Ending, Placement};
pub use observe::ExecutionCheck;
pub use one_cpu::{OneCpu, command_spec};
pub use probe::{Flavor, Probe, Want};
pub use record::{
    Actuation, ArbiterLog, ArbiterRun, CommandRecord, Exit, FuseRecord, ThreadRecord, quantile,
};
pub use registry::Overlap;
pub use signals::{Received, Signals, interrupt_name, signal_status};
pub use spawn::{LaunchError, resolve};
pub use teardown::signal_name;

#[allow(unused_imports)]
use dyncore_core::policy::Policy;

/// A kernel thread id (`pid_t`).
pub type Tid = i32;

/// Where a thread is: in a runtime CPU's group, or held (frozen).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Loc {
    Cpu(CpuId),
    Held,
}

/// Where the arbiter reads the system from (a real machine by default).
#[derive(Debug, Clone)]
pub struct SystemPaths {
    /// The mount table (`/proc/self/mounts`).
    pub mounts: PathBuf,
    /// Prepended to every mount point (`/`).
    pub prefix: PathBuf,
    /// Where runs keep their claims (`/run/dyncore` as root, else a
    /// directory of the user's in the temporary directory).
    pub state_dir: PathBuf,
}

impl Default for SystemPaths {
    fn default() -> Self {
        let root = rustix::process::geteuid().is_root();
        let state_dir = if root && std::path::Path::new("/run").is_dir() {
            PathBuf::from("/run/dyncore")
        } else {
            std::env::temp_dir().join(format!("dyncore-{}", rustix::process::geteuid().as_raw()))
        };
        SystemPaths { mounts: PathBuf::from("/proc/self/mounts"), prefix: PathBuf::from("/"), state_dir }
    }
}

/// How an arbiter runs.
#[derive(Debug, Clone)]
pub struct ArbiterConfig {
    /// The run's name (its groups are named after it).
    pub run_name: String,
    /// Runtime CPU i is real CPU `cpus[i]` (distinct, allowed to this
    /// process).
    pub cpus: Vec<CpuId>,
    pub want: Want,
    /// Every CPU ticks every `tick_ns`.
    pub tick_ns: Nanos,
    /// Every CPU's load is sampled every `load_sample_ns`.
    pub load_sample_ns: Nanos,
    /// Threads are discovered by a full pass every `poll_ns`, or every
    /// `safety_poll_ns` where the kernel's process events tell the arbiter
    /// of each new thread as it is created (root).
    pub poll_ns: Nanos,
    pub safety_poll_ns: Nanos,
    /// Listen to the kernel's process events where permitted.
    pub events: bool,
    /// How long the arbiter waits for a freeze to complete before it goes
    /// on without waiting (counted in [`Actuation::freeze_late`]). A thread
    /// asked to freeze runs no more of its own code either way: it stops
    /// the next time it returns to user space. It is late when it was
    /// waiting for a CPU (behind another process) when asked: it stops the
    /// moment it gets one.
    pub freeze_deadline: Duration,
    /// The CFS bandwidth period of the CPUs' quotas, µs ([`PERIOD_US`]).
    pub quota_period_us: u64,
    /// At the end, how long the process tree has to exit after the first
    /// signal, before `SIGKILL`.
    pub grace: Duration,
    /// The run's CFS weight against the machine's other processes (1024 =
    /// one nice-0 process; `None`: the kernel's default, 1024). A duty is a
    /// share of wall time: on a shared machine, other processes take from
    /// it unless the run outweighs them (the runtime's workers use
    /// real-time priority for the same reason). A high weight keeps the
    /// duties true; the quota still caps every CPU. Not applied with
    /// affinity only.
    pub weight: Option<u32>,
    /// The duty that stands for one baseline CPU: every duty the policy
    /// sets is scaled with it before it becomes a quota (the live
    /// backend's `--baseline-duty`; the default, 50%, leaves duties as
    /// they are).
    pub duty_scale: DutyScale,
    /// A real CPU outside the run's to pin the controller (the thread
    /// that drives the arbiter) to for the run's life, so that it takes
    /// no time from the run's CPUs, as the live runner does; its affinity
    /// is restored at the end. `None`: it stays where it is (and shares
    /// the run's CPUs if its affinity allows them).
    pub controller_cpu: Option<CpuId>,
    /// Hand threads that sleep to the policy (`Block`/`Wake`, module
    /// `sleep`), so a thread that waits gives its CPU to another.
    pub follow_sleep: bool,
    pub paths: SystemPaths,
}

impl ArbiterConfig {
    /// A configuration over real CPUs `cpus` with the defaults: the
    /// simulator's 4 ms tick and 100 ms load sample, the kernel's process
    /// events with a full discovery pass every 50 ms (every 2 ms without
    /// them), freezes awaited 1 ms, 2 s of grace.
    pub fn new(run_name: &str, cpus: Vec<CpuId>) -> ArbiterConfig {
        ArbiterConfig {
            run_name: run_name.to_string(),
            cpus,
            want: Want::Auto,
            tick_ns: 4_000_000,
            load_sample_ns: 100_000_000,
            poll_ns: 2_000_000,
            safety_poll_ns: 50_000_000,
            events: true,
            freeze_deadline: Duration::from_millis(1),
            quota_period_us: PERIOD_US,
            grace: Duration::from_secs(2),
            weight: None,
            duty_scale: DutyScale::default(),
            controller_cpu: None,
            follow_sleep: true,
            paths: SystemPaths::default(),
        }
    }
}

/// Why an arbiter could not start, or stopped.
#[derive(Debug)]
pub enum ArbiterError {
    /// Bad input (CPUs, periods); the message says what.
    Config(String),
    /// The mechanism asked for is not usable here.
    Unavailable(String),
    /// Another live run holds some of these CPUs.
    Overlap(Overlap),
    /// A command could not be started.
    Launch(LaunchError),
    /// A cgroup or `/proc` operation failed (the message names the file).
    Io(std::io::Error),
    /// An action of a kind the arbiter does not run.
    Unsupported { action: String },
    /// The policy asked for something the boundary's contract forbids.
    Policy(String),
}

impl std::fmt::Display for ArbiterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArbiterError::Config(m) | ArbiterError::Unavailable(m) | ArbiterError::Policy(m) => {
                f.write_str(m)
            }
            ArbiterError::Overlap(o) => write!(f, "{o}"),
            ArbiterError::Launch(e) => write!(f, "{e}"),
            ArbiterError::Io(e) => write!(f, "{e}"),
            ArbiterError::Unsupported { action } => {
                write!(f, "the arbiter runs threads of processes, not {action}")
            }
        }
    }
}

impl std::error::Error for ArbiterError {}

impl From<std::io::Error> for ArbiterError {
    fn from(e: std::io::Error) -> Self {
        ArbiterError::Io(e)
    }
}
