//! What the simulator really executed, for the execution checker
//! (`dyncore_core::policy::execution`): the slices in which each thread
//! progressed on a CPU (at a non-zero rate: dispatched there, the CPU's
//! speed set, not reconfiguring) and when each CPU stopped and started
//! again for an `Offline` or `Online` (the start of the stall of an
//! `Offline`, serialised behind an earlier reconfiguration of the same
//! CPUs; the end of the stall of an `Online`). The engine keeps this
//! record when the scenario records its policy traffic
//! (`Scenario::record_policy_trace`) and holds it against the actions at
//! the end of the run: a violation is a defect of the engine, asserted
//! like its other invariants.
//!
//! The simulator acts at once: every action is applied at its own time,
//! and a slice's last "step" starts where it ends (progress is continuous),
//! so its actuation bound is exact — a slice ends by the end of its window.

use dyncore_core::policy::Action;
use dyncore_core::policy::execution::{CpuChange, ExecSlice, Execution, ExecutionChecker, Verdict};
use dyncore_core::{CpuId, Nanos};

/// Most slices kept; later ones are counted as lost.
pub const SLICE_CAP: usize = 1 << 20;

#[derive(Debug, Default)]
pub(crate) struct ExecRecord {
    /// Per thread: the CPU it progresses on and since when.
    open: Vec<Option<(CpuId, Nanos)>>,
    exec: Execution,
    checker: ExecutionChecker,
}

impl ExecRecord {
    /// Thread `t` progresses on `on` from `now` (`None`: nowhere).
    pub(crate) fn progress(&mut self, t: usize, on: Option<CpuId>, now: Nanos) {
        if t >= self.open.len() {
            self.open.resize(t + 1, None);
        }
        match (self.open[t], on) {
            (Some((c, _)), Some(n)) if c == n => {}
            (was, now_on) => {
                if let Some((cpu, since)) = was {
                    self.slice(t, cpu, since, now);
                }
                self.open[t] = now_on.map(|c| (c, now));
            }
        }
    }

    fn slice(&mut self, thread: usize, cpu: CpuId, start: Nanos, end: Nanos) {
        if end <= start {
            return;
        }
        if self.exec.slices.len() < SLICE_CAP {
            let s = ExecSlice {
                thread,
                cpu,
                start_ns: start,
                last_start_ns: end,
                end_ns: end,
                steps: 1,
                os_cpus: 0,
            };
            self.exec.slices.push(s);
        } else {
            self.exec.lost += 1;
        }
    }

    /// `cpus` stopped (`online: false`) or started again at `at`.
    pub(crate) fn change(&mut self, cpus: impl Iterator<Item = CpuId>, at: Nanos, online: bool) {
        self.exec.changes.extend(cpus.map(|cpu| CpuChange { cpu, at_ns: at, online }));
    }

    /// An action executed at `now` (at once).
    pub(crate) fn action(&mut self, now: Nanos, a: &Action) {
        self.checker.action(now, now, a);
    }

    /// The verdict, the run ending at `now`.
    pub(crate) fn finish(mut self, now: Nanos) -> Verdict {
        for t in 0..self.open.len() {
            self.progress(t, None, now);
        }
        // An `Online` asked at the very end takes effect at the end of its
        // stall, which may come after the run stopped (when the last
        // program finished): it is still its effect.
        self.checker.finish(now, &self.exec)
    }
}
