//! What really ran where, for the execution checker
//! (`dyncore_core::policy::execution`): the arbiter's own record of the
//! kernel's, held against the actions it was given.
//!
//! ## What is recorded
//! * **Samples.** Every tick round, and just before the arbiter moves a
//!   thread (into a CPU's group or `held`), each placed thread's CPU time
//!   (`/proc/<pid>/task/<tid>/schedstat`) and the CPU it last ran on (its
//!   `stat`'s `processor` field). Between two samples at `t0 < t1` in
//!   which the CPU time grew, the thread ran, and the last CPU it ran on
//!   is the one `t1` reads: recorded as an [`ExecSlice`] of that runtime
//!   CPU at `t0` (a point: `start = last_start = end = t0`).
//! * **CPU changes.** An `Offline`'s CPUs stopped when their groups were
//!   frozen, an `Online`'s started again when thawed: [`CpuChange`]s at
//!   those times.
//! * **Actions.** Every action of a call, at the call's time and at the
//!   time the call had made the threads match (`applied`).
//!
//! ## Why a point at `t0` is sound (no violation from a correct run)
//! A window of thread T on CPU c opens at the `Dispatch`'s time `at` and
//! the arbiter samples T when it moves it there, at `ts ≥ at`; it closes
//! at the next `Dispatch`'s `at'`, and the arbiter samples T again when it
//! moves it out, at `ts' ≥ at'`, with the call applied at `applied' ≥
//! ts'`. So every interval between two samples lies in one placement: a
//! point at its start is inside T's window on c (`at ≤ ts`), or — for the
//! interval after the move out, in which T may still run on c until the
//! freezer stops it — at `ts' ≤ applied'`, which the checker allows.
//!
//! ## The bound: what sampling cannot see
//! Only the last CPU of each interval is known, and only that the thread
//! ran in it, not when: a thread that ran somewhere it should not and
//! came back within one interval (at most a tick, 4 ms, plus the time to
//! the next move) is not seen; one that stays is seen at the next sample.
//! The delays the verdict reports (dispatch → running, → stopped) are
//! therefore sample times, not the kernel's: they are bounded by a tick.
//! A thread in `held` may still use CPU time on its last CPU until the
//! freezer stops it (in the kernel, on its way: when it was waiting for a
//! CPU at the move, that can take longer than a tick on a loaded
//! machine). An interval that ends with the thread in `held` makes no
//! slice: its CPU time is summed (`held_cpu_ns`, in the summary), so a
//! freezer that let a held thread run would show there, not as a
//! violation of a window.
//! Not checked: a thread before the arbiter first placed it (it runs in
//! its creator's group, module doc), a thread the policy was told is
//! asleep (`Block`: it may run up to a tick where it slept, the one
//! documented window; counted as `asleep_ran`), and runs with affinity
//! only (held threads are `SCHED_IDLE`, not stopped: they may run).
//! A thread seen on a real CPU outside the run's is counted
//! (`outside_run`) and is a violation of the run.

use dyncore_core::policy::execution::{CpuChange, ExecSlice, Execution, ExecutionChecker, Verdict};
use dyncore_core::policy::{Action, ThreadId};
use dyncore_core::{CpuId, Nanos};

use super::Tid;
use super::discover::{cpu_time_ns, last_cpu_and_state};

/// A thread's last sample.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Nanos,
    cpu_ns: u64,
    asleep: bool,
}

/// The execution record of one arbiter run, and the checker it feeds.
#[derive(Debug, Default)]
pub(crate) struct Observer {
    last: Vec<Option<Sample>>,
    exec: Execution,
    checker: ExecutionChecker,
    /// Intervals in which a thread the policy had as asleep ran.
    pub asleep_ran: u64,
    /// Samples that found a thread on a real CPU outside the run's.
    pub outside_run: u64,
    /// Samples taken.
    pub samples: u64,
    /// CPU time threads used in intervals that ended with them in `held`
    /// (on their way into the freezer).
    pub held_cpu_ns: u64,
}

/// The execution check of a finished run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionCheck {
    pub verdict: Verdict,
    pub asleep_ran: u64,
    pub outside_run: u64,
    pub samples: u64,
    pub held_cpu_ns: u64,
}

impl ExecutionCheck {
    /// Whether the run did what it was told (no violation, nothing seen
    /// outside the run's CPUs).
    pub fn ok(&self) -> bool {
        self.verdict.ok() && self.outside_run == 0
    }

    /// Lines for the run's summary: violations, then the delays.
    pub fn summary(&self) -> String {
        let v = &self.verdict;
        let us = |ns: Nanos| ns as f64 / 1e3;
        let mut s = format!(
            "execution check ({} samples of /proc, every tick and before every move): {} violation(s) in {} \
             sampled slice(s) over {} window(s); {} seen outside the run's CPUs; {} in which an asleep thread ran \
             where it slept (allowed, up to a tick); held threads used {:.1} µs of CPU on their way into the \
             freezer\n",
            self.samples,
            v.violation_count,
            v.slices,
            v.windows,
            self.outside_run,
            self.asleep_ran,
            self.held_cpu_ns as f64 / 1e3
        );
        s += &format!(
            "  dispatch applied (policy's action → threads moved and frozen): p50 {:.1} µs, p99 {:.1} µs ({}); \
             offline → CPU stopped p50 {:.1} µs, p99 {:.1} µs; online → running p50 {:.1} µs, p99 {:.1} µs\n",
            us(v.apply.p50_ns),
            us(v.apply.p99_ns),
            v.apply.n,
            us(v.offline.p50_ns),
            us(v.offline.p99_ns),
            us(v.online.p50_ns),
            us(v.online.p99_ns)
        );
        for x in v.violations.iter().take(3) {
            s += &format!("  violation: {}\n", x.message);
        }
        s
    }
}

impl Observer {
    /// The actions of one call, decided at `at`, applied by `applied`.
    pub(crate) fn actions(&mut self, at: Nanos, applied: Nanos, actions: &[Action]) {
        for a in actions {
            self.checker.action(at, applied, a);
        }
    }

    /// CPU `cpu` stopped (`online: false`) or started again at `at`.
    pub(crate) fn change(&mut self, cpu: CpuId, at: Nanos, online: bool) {
        self.exec.changes.push(CpuChange { cpu, at_ns: at, online });
    }

    /// Samples thread `thread` (`pid`/`tid`) at `now`; `real` are the
    /// run's real CPUs (runtime CPU i is `real[i]`); `asleep`: the policy
    /// has it as asleep; `held`: the arbiter has it in `held`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sample(
        &mut self,
        now: Nanos,
        thread: ThreadId,
        pid: Tid,
        tid: Tid,
        real: &[CpuId],
        asleep: bool,
        held: bool,
    ) {
        let (Some(cpu_ns), Some((processor, _))) = (cpu_time_ns(tid), last_cpu_and_state(pid, tid)) else {
            return;
        };
        self.samples += 1;
        if self.last.len() <= thread {
            self.last.resize(thread + 1, None);
        }
        let prev = self.last[thread].replace(Sample { at: now, cpu_ns, asleep });
        let Some(prev) = prev else { return };
        if cpu_ns <= prev.cpu_ns {
            return;
        }
        if prev.asleep || asleep {
            self.asleep_ran += 1;
            return;
        }
        // In `held` now: what it used since the last sample (taken just
        // before its move, or in `held` already) is on its way into the
        // freezer, from where it was.
        if held {
            self.held_cpu_ns += cpu_ns - prev.cpu_ns;
            return;
        }
        let at = prev.at;
        match real.iter().position(|&r| r == processor) {
            Some(cpu) => self.exec.slices.push(ExecSlice {
                thread,
                cpu,
                start_ns: at,
                last_start_ns: at,
                end_ns: at,
                steps: 1,
                os_cpus: dyncore_core::policy::execution::os_cpu_bit(processor),
            }),
            None => self.outside_run += 1,
        }
    }

    /// The verdict on the run, ended at `end`.
    pub(crate) fn finish(self, end: Nanos) -> ExecutionCheck {
        let mut exec = self.exec;
        exec.slices.sort_by_key(|s| (s.start_ns, s.cpu, s.thread));
        exec.changes.sort_by_key(|c| (c.at_ns, c.cpu));
        ExecutionCheck {
            verdict: self.checker.finish(end, &exec),
            asleep_ran: self.asleep_ran,
            outside_run: self.outside_run,
            samples: self.samples,
            held_cpu_ns: self.held_cpu_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dyncore_core::policy::CpuState;

    fn run(thread: ThreadId, cpu: CpuId) -> Action {
        Action::Dispatch { cpu, state: CpuState::Running { thread, object_cpus: 1 } }
    }

    /// Feeds samples by hand (what `sample` records from /proc).
    fn slice(o: &mut Observer, thread: ThreadId, cpu: CpuId, t0: Nanos) {
        o.exec.slices.push(ExecSlice {
            thread,
            cpu,
            start_ns: t0,
            last_start_ns: t0,
            end_ns: t0,
            steps: 1,
            os_cpus: 0,
        });
    }

    #[test]
    fn a_point_inside_its_window_passes_and_one_on_another_cpu_is_a_violation() {
        let mut o = Observer::default();
        o.actions(100, 150, &[run(0, 0), run(1, 1)]);
        slice(&mut o, 0, 0, 150);
        slice(&mut o, 1, 1, 150);
        // Thread 0 moved to CPU 1 at 1000 (thread 1 held): seen on CPU 0
        // in the interval after the move out, which starts at the move.
        o.actions(1000, 1100, &[run(0, 1), Action::Dispatch { cpu: 0, state: CpuState::Idle }]);
        slice(&mut o, 0, 0, 1050);
        slice(&mut o, 0, 1, 1100);
        let v = o.finish(2000);
        assert!(v.ok(), "{}", v.summary());
        // The defect: thread 1 found on CPU 0, where it was never dispatched.
        let mut o = Observer::default();
        o.actions(100, 150, &[run(0, 0), run(1, 1)]);
        slice(&mut o, 1, 0, 500);
        let v = o.finish(2000);
        assert!(!v.ok());
        assert_eq!(v.verdict.violations[0].thread, Some(1), "{}", v.summary());
    }
}
