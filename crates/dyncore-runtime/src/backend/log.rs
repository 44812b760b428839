//! What the live backend measured while it executed a policy: the slices
//! each CPU ran, every reconfiguration with what it really took, every
//! fuse with the mechanism that carried it out, each thread's life and
//! units, and how late the ticks came. Times are ns since the executor
//! started (the policy's clock), from the runtime's monotonic clock.

use dyncore_core::exec::ExecObject;
use dyncore_core::policy::execution::{CpuChange, ExecSlice, Verdict};
use dyncore_core::policy::{ReconfigId, ThreadId};
use dyncore_core::reconfig::Mode;
use dyncore_core::{CpuId, CpuSet, Nanos};

use crate::cpu::DutyReport;
use crate::machine::fuse::FuseMechanism;

/// A thread ran on a CPU (as the policy dispatched it) from start to end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    pub cpu: CpuId,
    pub thread: ThreadId,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    /// CPUs of the object it ran on (1 = native).
    pub object_cpus: usize,
}

/// One `Offline` or `Online`, executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconfigRecord {
    pub id: ReconfigId,
    /// `Online` (a split) rather than `Offline` (a fuse).
    pub online: bool,
    pub cpus: CpuSet,
    /// The mode the action asked for (Bolt: proxies installed).
    pub mode: Mode,
    /// The representative of the object fused or split.
    pub representative: CpuId,
    /// The call's start and the end of its critical steps.
    pub started_ns: Nanos,
    pub finished_ns: Nanos,
    /// What the runtime reported as its critical path (what the policy's
    /// `ReconfigDone` says it took).
    pub critical_ns: Nanos,
    /// Each critical step (`Step::name`) and what it took.
    pub steps_ns: Vec<(&'static str, Nanos)>,
}

/// A fused object's life, and how the fuse was carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuseRecord {
    pub thread: ThreadId,
    pub object: ExecObject,
    pub fused_ns: Nanos,
    /// When the executor had applied the first `Dispatch` that runs the
    /// thread on the object (from then on its runner anywhere else starts
    /// no step); `None`: it never ran there.
    pub dispatched_ns: Option<Nanos>,
    /// When it was split (`None`: still fused when the run ended).
    pub split_ns: Option<Nanos>,
    /// Chameleon §5.5: a real SMT core (the sibling parked) or throttling.
    pub mechanism: FuseMechanism,
}

/// A thread's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadRecord {
    pub spawned_ns: Nanos,
    /// When its kernel finished its work (`None`: it did not).
    pub done_ns: Option<Nanos>,
    /// Its kernel panicked.
    pub failed: bool,
    /// Units done (all of its work once done).
    pub units: u64,
}

/// How punctual the ticks were. A tick round (every CPU's tick) is due
/// every `tick_ns`; it is fed when the controller gets to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickStats {
    pub tick_ns: Nanos,
    /// Rounds fed.
    pub rounds: u64,
    /// Rounds skipped because the controller came more than a tick late
    /// (the next round is fed instead).
    pub missed: u64,
    /// Lateness of each round fed (ns after it was due).
    pub late_ns: Vec<Nanos>,
}

impl TickStats {
    /// A tick round fed at `now`, due at `due_ns` (every `tick_ns`):
    /// counted, with the rounds skipped because it came a tick late or
    /// more, and its lateness past the last round due. Returns when the
    /// next round is due (`now` < it ≤ `now` + `tick_ns`).
    pub fn round_fed(&mut self, now: Nanos, due_ns: Nanos, tick_ns: Nanos) -> Nanos {
        let late = now - due_ns;
        let missed = late / tick_ns;
        self.rounds += 1;
        self.missed += missed;
        self.late_ns.push(late - missed * tick_ns);
        due_ns + (missed + 1) * tick_ns
    }

    pub fn mean_late_ns(&self) -> f64 {
        self.late_ns.iter().sum::<u64>() as f64 / self.late_ns.len().max(1) as f64
    }

    /// The `q`-quantile (0..=1) of the lateness.
    pub fn late_quantile_ns(&self, q: f64) -> Nanos {
        quantile(&self.late_ns, q)
    }
}

/// A quantile (0..=1) of `samples` (the nearest rank), 0 if there are none.
pub fn quantile(samples: &[u64], q: f64) -> u64 {
    let mut v = samples.to_vec();
    v.sort_unstable();
    v.get(((v.len().max(1) - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize).copied().unwrap_or(0)
}

/// Everything the executor measured.
#[derive(Debug, Clone, Default)]
pub struct RunLog {
    pub slices: Vec<Slice>,
    pub reconfigs: Vec<ReconfigRecord>,
    pub fuses: Vec<FuseRecord>,
    pub threads: Vec<ThreadRecord>,
    /// Per CPU, time borrowed into a fused object (offline).
    pub borrowed_ns: Vec<Nanos>,
    pub ticks: TickStats,
    /// Times a CPU went offline under a thread the policy had placed there
    /// and the runtime moved its runner (it then waited for the policy's
    /// next `Dispatch`).
    pub displaced: u64,
    /// CPU time the controller thread used (the policy and the executor).
    pub controller_cpu_ns: Nanos,
    /// Time in the contract's checker, over every call.
    pub contract_ns: Nanos,
    /// Time the execution checker took at the end of the run.
    pub check_ns: Nanos,
    /// What the workers really executed (each slice with the OS CPUs its
    /// steps ran on) and when the runtime's CPUs really stopped and
    /// started again, in executor time: what the execution check held
    /// against the actions.
    pub executed: Vec<ExecSlice>,
    pub cpu_changes: Vec<CpuChange>,
}

/// A finished (or stopped) live run.
#[derive(Debug, Clone)]
pub struct LiveRun {
    pub log: RunLog,
    /// The policy's traffic in the trace format of
    /// `dyncore_core::policy::trace`: JSON lines.
    pub events: String,
    pub actions: String,
    /// When the run ended (ns since the executor started).
    pub end_ns: Nanos,
    /// How well each runtime CPU kept its duty cycles over the run (its
    /// `busy_ns` is the CPU's time in task steps over the run).
    pub duty: Vec<DutyReport>,
    /// What the runtime really executed, held against the actions
    /// (`dyncore_core::policy::execution`), with the actuation delays.
    pub execution: Verdict,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_counts_the_rounds_it_skipped_and_its_lateness() {
        let mut t = TickStats::default();
        // On time: the next round a tick later.
        assert_eq!(t.round_fed(100, 100, 10), 110);
        // 3 ns late: the next round still on the grid.
        assert_eq!(t.round_fed(113, 110, 10), 120);
        // 25 ns late: two rounds skipped, 5 ns late past the last one due.
        assert_eq!(t.round_fed(145, 120, 10), 150);
        assert_eq!((t.rounds, t.missed, t.late_ns.clone()), (3, 2, vec![0, 3, 5]));
        assert_eq!(t.late_quantile_ns(1.0), 5);
    }
}
