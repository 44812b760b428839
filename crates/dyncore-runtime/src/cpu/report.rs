//! What the runtime's calls return: registry entries, reconfiguration
//! reports and errors, placement errors, grace-period and invalidation
//! reports, and the description of a CPU that did not answer in time.

use dyncore_core::CpuId;
use dyncore_core::CpuSet;
use dyncore_core::reconfig::{Plan, PlanError, Step};

use super::percpu::{CpuCounters, CpuLiveness};

/// What a helper thread is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelperState {
    Running,
    /// Asked to park; it has not seen the request yet.
    ParkRequested,
    Parked,
    /// No thread (naive offline joined it).
    Stopped,
}

/// A CPU's registry entry, as a user reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuInfo {
    pub cpu: CpuId,
    pub name: String,
    pub real_cpu: CpuId,
    pub state: CpuLiveness,
    /// The CPU handling this one's messages, when not itself.
    pub proxied_by: Option<CpuId>,
    /// Blocks in its cache (`None`: no cache).
    pub cache_blocks: Option<usize>,
    pub helper: HelperState,
    /// Watchdog periods in which the worker had work but made no progress.
    pub watchdog_stalls: u64,
    /// Stalled now: the watchdog saw work and no progress, and the worker
    /// has not moved since. While stalled, every controller wait on this CPU
    /// fails at once with [`Unresponsive`], and offline of it is refused.
    pub stalled: Option<Stall>,
    /// Statistics not yet folded into the totals. While the CPU is stalled
    /// inside a step (which holds them), they are not read and show zero,
    /// and `cache_blocks` shows `None`.
    pub stats: CpuCounters,
}

/// A stall the watchdog found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    /// When the worker last went round its loop (runtime clock).
    pub since_ns: u64,
    /// How long ago that was.
    pub for_ns: u64,
}

/// A runtime CPU that did not answer a controller's wait in time, or is
/// known not to (stalled, or its worker thread died), and what state it was
/// in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresponsive {
    pub cpu: CpuId,
    /// What the controller waited for, e.g. "finish its current step".
    pub waited_for: String,
    /// How long it waited (0: it did not wait, the CPU is stalled or dead).
    pub waited_ns: u64,
    pub state: CpuLiveness,
    /// Inside a dispatch section (a task step or message handlers).
    pub running: bool,
    /// Time since the worker last went round its loop.
    pub heartbeat_age_ns: u64,
    pub watchdog_stalls: u64,
    pub stalled: bool,
    /// The worker thread died (a runtime defect: task panics are caught).
    pub worker_dead: bool,
}

impl std::fmt::Display for Unresponsive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = |ns: u64| ns as f64 / 1e9;
        write!(f, "CPU {} did not {}", self.cpu, self.waited_for)?;
        if self.waited_ns > 0 {
            write!(f, " within {:.3} s", secs(self.waited_ns))?;
        }
        write!(
            f,
            " (state {}, {} a dispatch section, worker loop last seen {:.3} s ago, {} watchdog stall(s)",
            self.state,
            if self.running { "inside" } else { "outside" },
            secs(self.heartbeat_age_ns),
            self.watchdog_stalls
        )?;
        if self.stalled {
            f.write_str(", stalled now")?;
        }
        if self.worker_dead {
            f.write_str(", its worker thread died")?;
        }
        f.write_str(")")
    }
}

impl std::error::Error for Unresponsive {}

/// What a reconfiguration did.
#[derive(Debug, Clone)]
#[must_use = "the report says which CPUs changed and which were already there"]
pub struct ReconfigReport {
    pub plan: Plan,
    /// Time from the call's start (waiting for the control lock and
    /// planning included) to the end of its critical steps.
    pub critical_ns: u64,
    /// Time from the call's start until no task ran on the CPUs any more
    /// (Bolt's entry latency); offline only.
    pub entry_ns: Option<u64>,
    /// Each critical step and its time (0 with step timing off, see
    /// [`super::Runtime::set_step_timing`]).
    pub step_ns: Vec<(Step, u64)>,
    /// When the call started and when its critical steps ended, on the
    /// runtime's clock ([`super::Runtime::now_ns`]).
    pub started_at_ns: u64,
    pub finished_at_ns: u64,
}

impl ReconfigReport {
    /// The CPUs that changed state.
    pub fn changed(&self) -> &CpuSet {
        &self.plan.cpus
    }

    /// The CPUs already in the target state (a no-op for them).
    pub fn already(&self) -> &CpuSet {
        &self.plan.already
    }

    /// Nothing changed: every CPU asked for was already there.
    pub fn is_noop(&self) -> bool {
        self.plan.is_noop()
    }
}

/// Why a reconfiguration did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReconfigError {
    /// Refused before any step ran (last online CPU, CPU not owned, empty set).
    Refused(PlanError),
    /// Refused before any step ran: a CPU to take offline is stalled (its
    /// step would never end) or its worker died.
    Unresponsive(Box<Unresponsive>),
    /// A critical step failed; the call was rolled back (`rollback` lists
    /// the undo steps run; `rollback_errors` any that failed in turn). When
    /// the step failed because a CPU did not answer in time, `unresponsive`
    /// says which and in what state.
    StepFailed {
        step: Step,
        index: usize,
        reason: String,
        unresponsive: Option<Box<Unresponsive>>,
        rollback: Vec<Step>,
        rollback_errors: Vec<String>,
    },
}

impl std::fmt::Display for ReconfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReconfigError::Refused(e) => e.fmt(f),
            ReconfigError::Unresponsive(u) => write!(f, "refusing to take CPU {} offline: {u}", u.cpu),
            ReconfigError::StepFailed { step, index, reason, rollback, rollback_errors, .. } => {
                write!(
                    f,
                    "step {index} ({step}) failed: {reason}; rolled back with {} step(s)",
                    rollback.len()
                )?;
                if !rollback_errors.is_empty() {
                    write!(f, ", {} of which failed: {}", rollback_errors.len(), rollback_errors.join("; "))?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ReconfigError {}

/// Why a task or message could not be placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlaceError {
    NotOwned {
        cpu: CpuId,
        owned: usize,
    },
    /// Tasks go to online CPUs only (messages go anywhere: proxies).
    Offline {
        cpu: CpuId,
    },
}

impl std::fmt::Display for PlaceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlaceError::NotOwned { cpu, owned } => {
                write!(f, "CPU {cpu} not owned by this runtime (it owns CPUs 0-{})", owned.saturating_sub(1))
            }
            PlaceError::Offline { cpu } => write!(f, "CPU {cpu} is offline"),
        }
    }
}

impl std::error::Error for PlaceError {}

/// Who a grace period waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncReport {
    /// Online CPUs that passed a quiescent point.
    pub waited_for: CpuSet,
    /// Offline CPUs, reported quiescent by their proxies (they run nothing).
    pub reported_by_proxy: CpuSet,
}

/// Who applied an invalidation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidateReport {
    pub generation: u64,
    /// Online CPUs that applied it before the call returned.
    pub applied: CpuSet,
    /// Offline CPUs (or CPUs that went offline meanwhile); they apply it
    /// when they return.
    pub skipped: CpuSet,
}

/// Why a targeted invalidation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvalidateError {
    /// A CPU in the set is not owned (nothing was posted).
    NotOwned(PlaceError),
    Unresponsive(Unresponsive),
}

impl std::fmt::Display for InvalidateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InvalidateError::NotOwned(e) => e.fmt(f),
            InvalidateError::Unresponsive(u) => u.fmt(f),
        }
    }
}

impl std::error::Error for InvalidateError {}
