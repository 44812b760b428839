//! What an arbiter run measured and recorded: each thread's life and CPU
//! time, each command's exit, the slices each CPU ran, every
//! reconfiguration and fuse, and the actuation delay of each mechanism.
//! Times are ns since the arbiter started (the policy's clock).

use dyncore_core::exec::ExecObject;
use dyncore_core::policy::ThreadId;
use dyncore_core::{CpuId, Nanos};

pub use crate::backend::quantile;
use crate::backend::{ReconfigRecord, Slice, TickStats};

use super::Tid;

/// One thread of a command, as the arbiter followed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadRecord {
    /// The policy's name for it.
    pub thread: ThreadId,
    pub tid: Tid,
    /// Its process.
    pub pid: Tid,
    /// Its name (`comm`) when it was found.
    pub comm: String,
    /// Index of the command it belongs to.
    pub command: usize,
    /// When its `Spawn` was fed, ns since the start and on the system's
    /// monotonic clock (`CLOCK_MONOTONIC`, to compare with a program's own
    /// timestamps: the discovery latency).
    pub spawned_ns: Nanos,
    pub spawned_mono_ns: u64,
    /// When the kernel created it (its process event's time, same clock),
    /// where events were on: `spawned_mono_ns - created_mono_ns` is the
    /// discovery latency.
    pub created_mono_ns: Option<u64>,
    /// When its `Exit` was fed (`None`: alive at the end).
    pub exited_ns: Option<Nanos>,
    /// CPU time it used, from its `schedstat`, as last sampled (at every
    /// move and load sample; a thread that exits between two samples
    /// loses what it used since the last one).
    pub cpu_ns: u64,
    /// Time the policy ran it on a fused object (more than 1 CPU).
    pub fused_ns: Nanos,
    /// Time the policy ran it at all.
    pub dispatched_ns: Nanos,
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

impl Exit {
    /// The status a shell reports: the code, or 128 + the signal.
    pub fn shell_status(self) -> i32 {
        match self {
            Exit::Code(c) => c,
            Exit::Signal(s) => 128 + s,
        }
    }

    pub(crate) fn from_wait(status: i32) -> Exit {
        if libc::WIFSIGNALED(status) {
            Exit::Signal(libc::WTERMSIG(status))
        } else {
            Exit::Code(libc::WEXITSTATUS(status))
        }
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(c) => write!(f, "exit {c}"),
            Exit::Signal(s) => write!(f, "killed by {}", super::teardown::signal_name(*s)),
        }
    }
}

/// One command started under the arbiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRecord {
    pub argv: Vec<String>,
    pub pid: Tid,
    pub started_ns: Nanos,
    /// When the arbiter reaped it, and how it ended.
    pub exited_ns: Option<Nanos>,
    pub exit: Option<Exit>,
    /// User + system CPU time of the process and every descendant it
    /// waited for (`wait4`'s rusage): exact, unlike the per-thread samples.
    pub cpu_ns: u64,
    /// Why its `exec` failed, if it did (it then exits 127).
    pub exec_error: Option<String>,
}

/// A fused object's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuseRecord {
    pub thread: ThreadId,
    pub object: ExecObject,
    pub fused_ns: Nanos,
    pub split_ns: Option<Nanos>,
}

/// Measured actuation delays, one sample per operation, in ns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Actuation {
    /// A CPU's quota written (`cpu.cfs_quota_us` / `cpu.max`; the period
    /// too when it changes): one `SetSpeed`.
    pub quota_write_ns: Vec<u64>,
    /// A thread moved into a CPU's group, every hierarchy (or its affinity
    /// set): one placement.
    pub move_ns: Vec<u64>,
    /// From the start of moving a thread (or a batch of threads) into
    /// `held` until the freezer says they are all frozen.
    pub freeze_ns: Vec<u64>,
    /// Freezes that had not completed by the deadline (the run went on).
    pub freeze_late: u64,
}

impl Actuation {
    /// One line per mechanism: samples, p50 and p99 in µs.
    pub fn summary(&self) -> Vec<String> {
        let line = |name: &str, v: &[u64]| {
            format!(
                "{name}: {} samples, p50 {:.1} µs, p99 {:.1} µs",
                v.len(),
                quantile(v, 0.5) as f64 / 1e3,
                quantile(v, 0.99) as f64 / 1e3
            )
        };
        vec![
            line("quota write", &self.quota_write_ns),
            line("thread move", &self.move_ns),
            format!("{} ({} late)", line("freeze", &self.freeze_ns), self.freeze_late),
        ]
    }
}

/// Everything the arbiter measured.
#[derive(Debug, Clone, Default)]
pub struct ArbiterLog {
    pub slices: Vec<Slice>,
    pub reconfigs: Vec<ReconfigRecord>,
    pub fuses: Vec<FuseRecord>,
    pub threads: Vec<ThreadRecord>,
    pub commands: Vec<CommandRecord>,
    /// Per CPU, time borrowed into a fused object (offline, frozen).
    pub borrowed_ns: Vec<Nanos>,
    pub ticks: TickStats,
    pub actuation: Actuation,
    /// `SetSpeed`s that could not be enforced (affinity-only mode).
    pub duties_not_enforced: u64,
    /// Threads found in another group than the arbiter had put them in
    /// (a thread that `exec`ed from a non-leader thread takes the leader's
    /// id; a process that moved itself), and put back.
    pub corrections: u64,
    /// The kernel's process events read (the whole machine's: most are
    /// other processes'), and how many wakeups of the arbiter they caused.
    pub proc_events: u64,
    pub event_wakeups: u64,
    /// Discovery passes, and what each took.
    pub polls: u64,
    pub poll_ns: Vec<u64>,
    /// CPU time the controller thread used (policy, actuation, discovery).
    pub controller_cpu_ns: Nanos,
    /// Threads handed to the policy as asleep (`Block`) and as awake again
    /// (`Wake`).
    pub blocks: u64,
    pub wakes: u64,
}

impl ArbiterLog {
    /// Time CPU `cpu` ran threads of the policy.
    pub fn cpu_busy_ns(&self, cpu: CpuId) -> Nanos {
        self.slices.iter().filter(|s| s.cpu == cpu).map(|s| s.end_ns - s.start_ns).sum()
    }
}

/// A finished arbiter run.
#[derive(Debug, Clone)]
pub struct ArbiterRun {
    pub log: ArbiterLog,
    /// The policy's traffic, JSON lines (`dyncore_core::policy::trace`).
    pub events: String,
    pub actions: String,
    pub end_ns: Nanos,
    /// The mechanism used, and what the run said about it.
    pub mechanism: String,
    pub notes: Vec<String>,
    /// What the startup sweep removed.
    pub swept: Vec<String>,
    /// What the teardown did (signals sent, errors).
    pub teardown: Vec<String>,
    /// The execution checker's verdict on what really ran where (cgroups
    /// only: `None` with affinity only, whose held threads may run).
    pub execution: Option<super::ExecutionCheck>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exits_read_as_a_shell_reads_them() {
        assert_eq!(Exit::Code(3).shell_status(), 3);
        assert_eq!(Exit::Signal(libc::SIGINT).shell_status(), 130);
        assert_eq!(Exit::Signal(libc::SIGTERM).to_string(), "killed by SIGTERM");
        assert_eq!(Exit::from_wait(2 << 8), Exit::Code(2));
        assert_eq!(Exit::from_wait(libc::SIGKILL), Exit::Signal(libc::SIGKILL));
    }

    #[test]
    fn quantiles_of_samples() {
        assert_eq!(quantile(&[], 0.5), 0);
        assert_eq!(quantile(&[5, 1, 3], 0.5), 3);
        assert_eq!(quantile(&[5, 1, 3], 1.0), 5);
        assert_eq!(quantile(&[5, 1, 3], 0.0), 1);
    }
}
