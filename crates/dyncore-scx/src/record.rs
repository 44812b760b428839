// SPDX-License-Identifier: GPL-2.0-only
//! A run's record, as the scheduler process writes it (JSON) and the
//! supervisor reads it: what the policy decided, when it was applied, and
//! what the kernel's callbacks say really ran where.

use serde::{Deserialize, Serialize};

use dyncore_core::policy::execution::{CpuChange, ExecSlice, Execution, ExecutionChecker, Verdict};
use dyncore_core::policy::{Action, ThreadId};
use dyncore_core::{CpuId, Nanos};

/// One action: decided at `at_ns`, applied (the map written, the CPUs
/// kicked) at `applied_ns`; both from the run's start, CLOCK_MONOTONIC.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timed {
    pub at_ns: Nanos,
    pub applied_ns: Nanos,
    pub action: Action,
}

/// One thread of the command, as the kernel showed it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ThreadRecord {
    pub thread: ThreadId,
    /// The command it is of (its index in the run's), if known.
    #[serde(default)]
    pub command: Option<usize>,
    pub tid: i32,
    pub tgid: i32,
    pub comm: String,
    /// From `ops.running` to `ops.stopping`, summed.
    pub cpu_ns: Nanos,
    /// The real CPUs it ran on.
    pub cpus: Vec<CpuId>,
    pub runs: u64,
    pub spawned_ns: Nanos,
    pub exited_ns: Option<Nanos>,
    pub blocks: u64,
}

/// Counters of the BPF half (its `.bss`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Counters {
    pub events: u64,
    /// Events the ring buffer had no room for (the record is incomplete).
    pub dropped: u64,
    /// Enqueues of tasks the policy runs nowhere / on a CPU (kicked).
    pub held: u64,
    pub direct: u64,
    /// Held tasks moved to their CPU by its dispatch.
    pub moved: u64,
    pub refills: u64,
    /// Running tasks the tick found on a CPU the policy had taken them off.
    pub tick_preempts: u64,
    /// Assignments to a CPU outside the task's affinity (not carried out).
    pub bad_cpu: u64,
    /// Slices not refilled: the CPU's duty was used up for the period.
    pub throttles: u64,
    /// Tasks that started on a CPU the policy had moved them off between
    /// their dispatch and their start (taken off at once).
    pub misplaced: u64,
    /// CPUs a higher class (fair) took, their local DSQs sent back through
    /// enqueue.
    #[serde(default)]
    pub released: u64,
    pub kicks: u64,
    pub map_writes: u64,
}

/// Why the BPF scheduler was unloaded, as the kernel says (`scx_exit_info`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExitInfo {
    pub kind: i32,
    pub reason: String,
    pub message: String,
}

impl ExitInfo {
    /// The kernel unloaded it for an error (a stall the watchdog caught, a
    /// BPF error), not because user space asked (kind >= 1024: SCX_EXIT_ERROR).
    pub fn is_error(&self) -> bool {
        self.kind >= 1024
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Record {
    pub policy: String,
    /// Runtime CPU i is real CPU `cpus[i]`.
    pub cpus: Vec<CpuId>,
    pub tick_ns: Nanos,
    pub end_ns: Nanos,
    pub kernel: String,
    pub ops: String,
    /// For each run CPU, its SMT siblings as the kernel lists them
    /// (`thread_siblings_list`).
    pub siblings: Vec<String>,
    pub threads: Vec<ThreadRecord>,
    pub actions: Vec<Timed>,
    /// Every run of a command task, from the kernel's callbacks; a run on
    /// a real CPU outside the run's has `cpu` = `cpus.len()` + that CPU.
    pub slices: Vec<ExecSlice>,
    /// Runs the kernel forced: the task started with its migration
    /// disabled, put back on its CPU by the kernel itself when it was
    /// preempted, whatever its assignment said. Checked apart (see
    /// `dyncore_core::policy::execution`).
    #[serde(default)]
    pub forced: Vec<ExecSlice>,
    /// When each `Offline` was seen done (no command task running on its
    /// CPUs, from the kernel's stopping callbacks) and each `Online` was
    /// (at once, or after the `Offline` before it): runtime CPUs.
    pub changes: Vec<CpuChange>,
    pub ticks: u64,
    pub late_ticks: u64,
    /// The longest policy call and the longest pass of the scheduler's
    /// loop (events in, actions applied), ns.
    pub max_call_ns: u64,
    pub max_pass_ns: u64,
    /// Passes that read the most events a pass reads (events came faster
    /// than one pass handles them).
    pub full_batches: u64,
    /// The kernel's events, by callback.
    pub events_by_kind: Vec<(String, u64)>,
    /// The first call whose traffic broke the boundary's contract (a
    /// backend bug), if any.
    pub contract_error: Option<String>,
    pub counters: Counters,
    /// Set when the kernel unloaded the scheduler itself.
    pub exit: Option<ExitInfo>,
    pub policy_check: Option<String>,
}

impl Record {
    /// The execution checker's verdict on the kernel's record.
    pub fn verdict(&self) -> Verdict {
        let mut checker = ExecutionChecker::new();
        for t in &self.actions {
            checker.action(t.at_ns, t.applied_ns, &t.action);
        }
        let exec = Execution {
            slices: self.slices.clone(),
            changes: self.changes.clone(),
            lost: self.counters.dropped,
            forced: self.forced.clone(),
        };
        checker.finish(self.end_ns, &exec)
    }

    /// Reconfigurations, by kind.
    pub fn count(&self, kind: dyncore_core::policy::ActionKind) -> usize {
        self.actions.iter().filter(|t| t.action.kind() == kind).count()
    }
}
