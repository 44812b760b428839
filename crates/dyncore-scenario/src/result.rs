//! What a simulated run produces: per-program results, per-CPU accounting,
//! reconfiguration and proxy counters, the CPU-allocation timeline, and trace
//! events for Perfetto. All times are virtual nanoseconds.

use std::sync::Arc;

use serde::Serialize;

/// Results of a whole scenario, in run order.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub name: String,
    pub title: String,
    pub seed: u64,
    pub runs: Vec<RunResult>,
}

/// One run: one machine, one policy, one workload mix.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub label: String,
    /// The run's series (its `series` field, default its label).
    pub series: String,
    pub machine: String,
    pub policy: String,
    /// `none` when the run cannot reconfigure (Linux-like policy, or a
    /// machine that does not fuse).
    pub reconfig_mechanism: String,
    /// The machine profile a `runtime` mechanism charged: where it came
    /// from, what machine, when measured.
    pub reconfig_profile: Option<String>,
    pub cpus: usize,
    /// Virtual time when the last program finished (or the safety stop).
    pub end_ns: u64,
    /// False if the run hit `max_time_ns` before every program finished.
    pub finished: bool,
    pub programs: Vec<ProgramResult>,
    pub per_cpu: Vec<CpuStats>,
    pub reconfig: ReconfigStats,
    /// IPIs sent (to random CPUs, while a parallel program runs).
    pub ipis: u64,
    /// IPIs addressed to CPUs borrowed into fused objects, handled by their
    /// proxies (none under hotplug: an offline CPU is sent nothing).
    pub proxy_ipis: u64,
    /// Thread migrations between run queues (load balancing and rebalancing).
    pub migrations: u64,
    /// Migrations done by the node manager to defragment.
    pub defrag_migrations: u64,
    /// Simulator events processed.
    pub events: u64,
    /// Scheduler decisions taken (picks, borrow checks, preemption checks).
    pub decisions: u64,
    /// CPU-allocation timeline: a sample at every change of a program's
    /// execution-object size.
    pub allocation: Vec<AllocSample>,
    /// Modelled energy, and what parking CPUs cost in wake-ups.
    pub energy: EnergyStats,
    /// Trace events (not written into results.json; see trace.json).
    #[serde(skip)]
    pub trace: Vec<TraceEvent>,
    /// The policy's events and actions, when the scenario asked for them
    /// (`Scenario::record_policy_trace`).
    #[serde(skip)]
    pub policy_trace: Option<PolicyTrace>,
}

/// A run's policy traffic in the boundary's trace format
/// (`dyncore_core::policy::trace`): JSON lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyTrace {
    pub events: String,
    pub actions: String,
}

/// One program instance.
#[derive(Debug, Clone, Serialize)]
pub struct ProgramResult {
    /// Report label (programs with the same label in a run are averaged).
    pub label: String,
    pub program: String,
    pub instance: u32,
    pub threads: u32,
    pub start_ns: u64,
    pub finish_ns: Option<u64>,
    /// finish - start.
    pub completion_ns: Option<u64>,
    /// Total work, in nanoseconds of one baseline CPU.
    pub work_ns: u64,
    /// work / completion: speedup relative to one baseline CPU.
    pub speedup: Option<f64>,
    /// completion / work: execution time relative to running alone on one baseline CPU.
    pub relative_time: Option<f64>,
    /// Time this program's threads spent running on fused objects.
    pub fused_ns: u64,
}

/// Per-CPU accounting.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CpuStats {
    pub cpu: usize,
    /// Running a thread natively or as the representative of a fused object.
    pub busy_ns: u64,
    /// Borrowed into a fused object (running nothing else).
    pub borrowed_ns: u64,
    /// Reconfiguring (fusing or splitting).
    pub reconfig_ns: u64,
    /// (busy + borrowed) / end.
    pub utilisation: f64,
    /// Parked by a standalone `Offline` (once done) until its `Online`.
    pub offline_ns: u64,
    /// Modelled energy, joules (`RunResult::energy` says how).
    pub energy_j: f64,
}

/// The energy a run's CPUs drew, **modelled** from their states over time
/// (`record::energy`), and what parking them cost: every figure comes from
/// the policy's traffic and the power model, none is measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EnergyStats {
    /// The power model, labelled modelled.
    pub model: String,
    /// Every CPU's energy, summed.
    pub joules: f64,
    /// `joules` over the run's length: the machine's mean power.
    pub mean_w: f64,
    /// CPU time idle and online, summed over CPUs.
    pub idle_ns: u64,
    /// CPU time parked offline, summed over CPUs.
    pub offline_ns: u64,
    /// Standalone `Offline`s (a bulk one counts once) and the CPUs they took.
    pub parks: u64,
    pub parked_cpus: u64,
    /// Standalone `Online`s: wake-ups of parked CPUs.
    pub wakeups: u64,
    /// From each wake-up's request to its `ReconfigDone` (queued time
    /// included): summed, and the longest.
    pub wakeup_ns: u64,
    pub wakeup_max_ns: u64,
    /// Thread time lost to reconfigurations: a thread dispatched on a CPU
    /// while it reconfigures (a fuse, a split, a wake-up) makes no progress.
    pub stalled_ns: u64,
}

/// Reconfiguration counters.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReconfigStats {
    pub fuses: u64,
    pub splits: u64,
    /// Virtual time spent reconfiguring, summed over representative CPUs.
    pub time_ns: u64,
    /// Time threads ran on fused objects, summed.
    pub fused_ns: u64,
}

/// CPUs held by each program's execution objects at a moment.
#[derive(Debug, Clone, Serialize)]
pub struct AllocSample {
    pub t_ns: u64,
    /// (program label with instance, CPUs in its execution object(s)). The
    /// names are shared: one allocation per program, not per sample.
    pub cpus_by_program: Vec<(Arc<str>, u32)>,
}

/// Trace events, turned into Chrome/Perfetto JSON by the command.
#[derive(Debug, Clone, Serialize)]
pub enum TraceEvent {
    /// A thread ran on a CPU (as native or representative) from start to
    /// end. `name` is its program's, shared by all of the program's slices.
    Slice { cpu: usize, thread: usize, name: Arc<str>, start_ns: u64, end_ns: u64, fused: bool },
    /// A fused execution object was active over `cpus` (a cpulist).
    ObjectSpan { object: usize, cpus: String, name: String, start_ns: u64, end_ns: u64 },
    /// A CPU was reconfiguring (fusing or splitting).
    Reconfig { cpu: usize, name: String, start_ns: u64, end_ns: u64 },
    /// A point event (program start/exit, node-manager rebalance).
    Instant { name: String, t_ns: u64 },
}
