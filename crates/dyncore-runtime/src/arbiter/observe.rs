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
//! * **CPU changes.** An `Offline`'s CPUs stopped when the kernel reported
//!   their groups frozen (`freezer.state` reads `FROZEN`, `cgroup.events`
//!   `frozen 1`), an `Online`'s started again when it reported them
//!   thawed: [`CpuChange`]s at the time the arbiter first read that, right
//!   after its write or at a later tick round. A group the kernel never
//!   reports frozen gives no change, and the checker's rule 4 fails. (With
//!   affinity only there is no group: the arbiter's own time.)
//! * **Frozen groups' usage.** Every tick round, each offline CPU's group
//!   usage as the kernel accounts it (v2 `cpu.stat`, v1 `cpuacct.usage`
//!   where a hierarchy of the run has `cpuacct`): the group is empty and
//!   frozen, so after the first look its usage may not grow. A look that
//!   finds it grown is a violation ([`ExecutionCheck::frozen_grew`]).
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
//! machine): an interval that ends with it in `held` and began before the
//! kernel reported `held` wholly frozen makes no slice; its CPU time is
//! summed (`held_cpu_ns`, in the summary). One that began with it in
//! `held` and `held` reported frozen at that sample and the one before
//! (right after a move, cgroup v2 can report the group frozen before the
//! newcomer has reached the freezer), and in which it used more than
//! [`FROZEN_SLACK_NS`], is a violation: a held thread that kept running
//! ([`ExecutionCheck::held_ran`]).
//! Not checked: a thread before the arbiter first placed it (it runs in
//! its creator's group, module doc), a thread the policy was told is
//! asleep (`Block`: it may run up to a tick where it slept, the one
//! documented window; counted as `asleep_ran`), and, with affinity only,
//! held threads (`SCHED_IDLE`, not stopped: they may run). Placed threads
//! are checked with affinity only as with groups.
//! A thread seen on a real CPU outside the run's is counted
//! (`outside_run`) and is a violation of the run.

use dyncore_core::policy::execution::{CpuChange, ExecSlice, Execution, ExecutionChecker, Verdict};
use dyncore_core::policy::{Action, ThreadId};
use dyncore_core::{CpuId, Nanos};

use super::Tid;
use super::discover::{cpu_time_ns, last_cpu_and_state};

/// CPU time a frozen thread may use in one interval without being said to
/// have run: a frozen task woken by a signal re-enters the freezer in
/// microseconds (cgroup v2's freezer traps it again); a freezer that let it
/// run gives it milliseconds.
pub const FROZEN_SLACK_NS: u64 = 200_000;

/// A thread's last sample.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Nanos,
    cpu_ns: u64,
    asleep: bool,
    /// It was in `held`, and the kernel reported `held` wholly frozen.
    frozen: bool,
    /// `frozen`, and so was the sample before: the report cannot be the
    /// one the kernel gives while this thread is still on its way in.
    settled: bool,
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
    /// Held threads are frozen (cgroups): one that uses CPU time in an
    /// interval that began with it in `held` and `held` reported wholly
    /// frozen by the kernel ran while frozen, a violation. With affinity
    /// only they are `SCHED_IDLE` and may run.
    pub held_frozen: bool,
    /// Intervals in which a frozen held thread ran, and the CPU time it
    /// used in them.
    pub held_ran: u64,
    pub held_ran_ns: u64,
    /// The first violation of that kind, for the summary.
    pub held_ran_first: Option<String>,
    /// Each offline CPU's group usage at the first look after it went
    /// offline (the kernel's own accounting).
    frozen_base: Vec<Option<u64>>,
    /// Looks at offline CPUs' group usage, and those that found it grown.
    pub frozen_looks: u64,
    pub frozen_grew: u64,
    pub frozen_grew_ns: u64,
    /// Whether the group usage could be read at all (None: never asked).
    pub usage_observable: Option<bool>,
}

/// The execution check of a finished run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionCheck {
    pub verdict: Verdict,
    pub asleep_ran: u64,
    pub outside_run: u64,
    pub samples: u64,
    pub held_cpu_ns: u64,
    /// Held threads are frozen (cgroups) and checked not to run.
    pub held_frozen: bool,
    /// Intervals in which a frozen held thread ran (violations).
    pub held_ran: u64,
    pub held_ran_first: Option<String>,
    /// Looks at offline CPUs' group usage (0: not observable here), and
    /// those that found it grown (violations).
    pub frozen_looks: u64,
    pub frozen_grew: u64,
    pub frozen_grew_ns: u64,
    pub usage_observable: Option<bool>,
}

impl ExecutionCheck {
    /// Whether the run did what it was told (no violation, nothing seen
    /// outside the run's CPUs).
    pub fn ok(&self) -> bool {
        self.verdict.ok() && self.outside_run == 0 && self.held_ran == 0 && self.frozen_grew == 0
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
        let held = if self.held_frozen {
            format!("{} interval(s) in which a frozen held thread ran (violations)", self.held_ran)
        } else {
            "held threads are SCHED_IDLE (affinity only) and may run: not checked".into()
        };
        let frozen = match self.usage_observable {
            Some(true) => format!(
                "{} look(s) at offline CPUs' group usage, {} found it grown by {:.1} µs in all (violations)",
                self.frozen_looks,
                self.frozen_grew,
                self.frozen_grew_ns as f64 / 1e3
            ),
            Some(false) => {
                "offline CPUs' group usage not observable here (no cpuacct in the run's hierarchies)".into()
            }
            None => "no CPU was offline at a tick".into(),
        };
        s += &format!("  {held}; {frozen}\n");
        for x in v.violations.iter().take(3) {
            s += &format!("  violation: {}\n", x.message);
        }
        if let Some(m) = &self.held_ran_first {
            s += &format!("  violation: {m}\n");
        }
        s
    }
}

impl Observer {
    /// An observer; `held_frozen`: held threads are frozen (cgroups), and
    /// one that runs once frozen is a violation.
    pub(crate) fn new(held_frozen: bool) -> Observer {
        Observer { held_frozen, ..Observer::default() }
    }

    /// The actions of one call, decided at `at`, applied by `applied`.
    pub(crate) fn actions(&mut self, at: Nanos, applied: Nanos, actions: &[Action]) {
        for a in actions {
            self.checker.action(at, applied, a);
        }
    }

    /// CPU `cpu` stopped (`online: false`) or started again at `at`, as
    /// the kernel reported it (its group seen frozen, or thawed).
    pub(crate) fn change(&mut self, cpu: CpuId, at: Nanos, online: bool) {
        self.exec.changes.push(CpuChange { cpu, at_ns: at, online });
        if self.frozen_base.len() <= cpu {
            self.frozen_base.resize(cpu + 1, None);
        }
        self.frozen_base[cpu] = None;
    }

    /// A look at offline CPU `cpu`'s group usage (`None`: not readable).
    /// The first look after it went offline is the base: the group is empty
    /// and frozen, so its usage may not grow after it.
    pub(crate) fn frozen_usage(&mut self, cpu: CpuId, usage: Option<u64>) {
        let Some(now) = usage else {
            self.usage_observable.get_or_insert(false);
            return;
        };
        self.usage_observable = Some(true);
        if self.frozen_base.len() <= cpu {
            self.frozen_base.resize(cpu + 1, None);
        }
        self.frozen_looks += 1;
        match self.frozen_base[cpu] {
            None => self.frozen_base[cpu] = Some(now),
            Some(base) if now > base => {
                self.frozen_grew += 1;
                self.frozen_grew_ns += now - base;
                self.frozen_base[cpu] = Some(now);
            }
            Some(_) => {}
        }
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
        held_frozen_now: bool,
    ) {
        let (Some(cpu_ns), Some((processor, _))) = (cpu_time_ns(tid), last_cpu_and_state(pid, tid)) else {
            return;
        };
        self.samples += 1;
        if self.last.len() <= thread {
            self.last.resize(thread + 1, None);
        }
        let frozen = held && held_frozen_now;
        // Right after a move into `held`, the kernel may still report it
        // frozen while the thread runs on to the freezer (cgroup v2 counts
        // the group's frozen tasks before the newcomer is among its tasks;
        // seen in a TCG guest, 7 ms of CPU time after such a report): only
        // a second report in a row, a sample later, is trusted.
        let settled = frozen && self.last.get(thread).copied().flatten().is_some_and(|p| p.frozen);
        let prev = self.last[thread].replace(Sample { at: now, cpu_ns, asleep, frozen, settled });
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
        // Held, and frozen (the kernel said so) when the interval began,
        // and still held: frozen all through it, and it ran.
        if held {
            if self.held_frozen && prev.settled && cpu_ns - prev.cpu_ns > FROZEN_SLACK_NS {
                self.held_ran += 1;
                self.held_ran_ns += cpu_ns - prev.cpu_ns;
                self.held_ran_first.get_or_insert_with(|| {
                    format!(
                        "thread {thread} (tid {tid}), held and frozen, used {} ns of CPU between {} and {now} ns \
                         (last on real CPU {processor})",
                        cpu_ns - prev.cpu_ns,
                        prev.at
                    )
                });
            } else {
                self.held_cpu_ns += cpu_ns - prev.cpu_ns;
            }
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
            held_frozen: self.held_frozen,
            held_ran: self.held_ran,
            held_ran_first: self.held_ran_first,
            frozen_looks: self.frozen_looks,
            frozen_grew: self.frozen_grew,
            frozen_grew_ns: self.frozen_grew_ns,
            usage_observable: self.usage_observable,
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

    /// A thread of this process that spins until told to stop; its tid.
    fn spinner(stop: &'static std::sync::atomic::AtomicBool) -> (std::thread::JoinHandle<()>, Tid) {
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            tx.send(rustix::thread::gettid().as_raw_nonzero().get()).unwrap();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        (h, rx.recv().unwrap())
    }

    #[test]
    fn a_held_thread_that_runs_once_frozen_is_a_violation_with_groups_only() {
        static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        let (h, tid) = spinner(&STOP);
        let pid = std::process::id() as Tid;
        let real: Vec<CpuId> = (0..4096).collect();
        // The injected defect: the kernel says `held` is frozen, yet the
        // thread keeps running (it spins here, unfrozen).
        let mut frozen = Observer::new(true);
        let mut idle = Observer::new(false);
        for o in [&mut frozen, &mut idle] {
            // Reported frozen at two samples in a row, then the interval
            // after the second is checked.
            o.sample(0, 0, pid, tid, &real, false, true, true);
            o.sample(1, 0, pid, tid, &real, false, true, true);
            std::thread::sleep(std::time::Duration::from_millis(20));
            o.sample(20_000_000, 0, pid, tid, &real, false, true, true);
        }
        STOP.store(true, std::sync::atomic::Ordering::Relaxed);
        h.join().unwrap();
        let v = frozen.finish(30_000_000);
        assert_eq!(v.held_ran, 1, "{}", v.summary());
        assert!(!v.ok() && v.summary().contains("held and frozen, used"), "{}", v.summary());
        // With affinity only, held threads are SCHED_IDLE: summed, not flagged.
        let v = idle.finish(30_000_000);
        assert!(v.ok() && v.held_cpu_ns > 0, "{}", v.summary());
        // A thread still on its way in (held, not yet reported frozen) is
        // summed too.
        let mut o = Observer::new(true);
        o.sample(0, 0, pid, rustix::thread::gettid().as_raw_nonzero().get(), &real, false, true, false);
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_millis(5) {}
        o.sample(1, 0, pid, rustix::thread::gettid().as_raw_nonzero().get(), &real, false, true, true);
        assert!(o.finish(2).ok());
        // And one that runs on after the first report that `held` is
        // frozen (cgroup v2 reports it before a newcomer reaches the
        // freezer): only a second report in a row is trusted.
        let me = rustix::thread::gettid().as_raw_nonzero().get();
        let mut o = Observer::new(true);
        o.sample(0, 0, pid, me, &real, false, true, true);
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_millis(5) {}
        o.sample(1, 0, pid, me, &real, false, true, true);
        let v = o.finish(2);
        assert!(v.ok() && v.held_ran == 0 && v.held_cpu_ns > 0, "{}", v.summary());
    }

    #[test]
    fn an_offline_cpu_s_group_whose_usage_grows_is_a_violation() {
        let mut o = Observer::new(true);
        o.frozen_usage(1, Some(5_000));
        o.frozen_usage(1, Some(5_000));
        assert!(Observer { ..Observer::new(true) }.finish(0).ok());
        o.frozen_usage(1, Some(9_000));
        // Online again: the next offline period starts a new base.
        o.change(1, 10, true);
        o.frozen_usage(1, Some(20_000));
        let v = o.finish(100);
        assert_eq!((v.frozen_looks, v.frozen_grew, v.frozen_grew_ns), (4, 1, 4_000), "{}", v.summary());
        assert!(!v.ok());
        let mut o = Observer::new(true);
        o.frozen_usage(0, None);
        let v = o.finish(1);
        assert!(v.ok() && v.summary().contains("not observable"), "{}", v.summary());
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
