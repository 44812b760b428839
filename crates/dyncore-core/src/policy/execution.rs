//! The execution checker: what a backend really ran, from its own record,
//! held against the actions it was given.
//!
//! The replay test (`trace`) proves a policy deterministic; it cannot catch
//! a backend doing the wrong thing, because both backends record the
//! policy's own output. This is the other half. A backend records, from its
//! own execution:
//!
//! * **executed slices** ([`ExecSlice`]): thread T's kernel was stepped on
//!   CPU c from the start of a first step to the end of a last one, all by
//!   one placement (the live runtime's runner of one `Dispatch`; the
//!   simulator's stretch of progress at a non-zero rate);
//! * **CPU changes** ([`CpuChange`]): when a CPU really stopped running
//!   anything (the live runtime: its worker was seen stopped, no step can
//!   start) and when it really started again.
//!
//! The checker ([`ExecutionChecker`]) is fed every action with its time and
//! the time the backend had applied it (a backend that applies actions at
//! once gives the same time twice), then the record, and returns a
//! [`Verdict`]. Pure: records in, verdict out; no clock, no I/O.
//!
//! ## What is checked
//! 1. **Every slice lies in a window.** A window of thread T on CPU c runs
//!    from a `Dispatch { c, Running T }` to the next `Dispatch` of c that
//!    does not keep T there (adjacent windows of T on c, differing only in
//!    the object's size, are one). A slice of T on c must start at or after
//!    the window's start, and its *last step must start* no later than the
//!    time the backend had applied the `Dispatch` that ended the window.
//!    That is the backend's stated actuation bound: a step in progress when
//!    the `Dispatch` takes effect finishes (steps are not interrupted), and
//!    no step starts after it. How far slices ran past the end of their
//!    windows is reported ([`Verdict::stop`]), not hidden.
//! 2. **Nothing runs on a CPU between its `Offline` and its `Online`**
//!    (from the time the backend had applied the `Offline` to the time of
//!    the `Online`), and nothing runs while the backend's own record says
//!    the CPU was offline.
//! 3. **A borrowed CPU runs nothing**: a slice in a `Borrowed` window is
//!    reported as such.
//! 4. Every `Offline`/`Online` took effect (a matching change in the
//!    record, in order), and the record has no change nobody asked for.
//!
//! **Runs the kernel forced** ([`Execution::forced`]): a backend that
//! shares the CPUs with a kernel (sched_ext) may see a thread run where
//! it was because the kernel would not let it leave that CPU then (its
//! migration was disabled, in the kernel, when it was preempted). The
//! backend did not place such a run and could not stop it. These runs are
//! held to rules 1–3 like any other, but one that breaks them is reported
//! apart ([`Verdict::forced_outside`], [`Verdict::forced_runs`]), never
//! dropped and never counted as the backend's violation.
//!
//! ## What is reported
//! The actuation delay, from an action to its effect, as p50 and p99:
//! `Dispatch { c, Running T }` to T's first step on c ([`Verdict::start`]),
//! the `Dispatch` that ends a window to the end of T's last step there
//! ([`Verdict::stop`]: 0 when no step was in progress), `Offline` to the
//! CPU stopped ([`Verdict::offline`]) and `Online` to it running again
//! ([`Verdict::online`]); and how long the backend took to apply each
//! `Dispatch` ([`Verdict::apply`]).
//!
//! Invariants (asserted in the tests): a verdict with no violation has
//! every slice matched to one window; each violation names its CPU, its
//! time and what the CPU was dispatched to do then; a record that lost
//! entries says so ([`Verdict::lost`]) rather than passing silently.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Action, CpuState, ThreadId};
use crate::{CpuId, Nanos};

/// Thread `thread`'s kernel was stepped on `cpu`, by one placement: the
/// first step started at `start_ns`, the last started at `last_start_ns`
/// and ended at `end_ns`. A backend that runs threads continuously (the
/// simulator) gives `last_start_ns == end_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecSlice {
    pub thread: ThreadId,
    pub cpu: CpuId,
    pub start_ns: Nanos,
    pub last_start_ns: Nanos,
    pub end_ns: Nanos,
    pub steps: u64,
    /// The OS CPUs its steps really ran on, as a bitmask (bit `c` for OS
    /// CPU `c` < 64), where the backend knows them (the live runtime asks
    /// the kernel at every step); 0 when it does not.
    #[serde(default)]
    pub os_cpus: u64,
}

/// The bit of OS CPU `cpu` in [`ExecSlice::os_cpus`] (none from 64 on).
pub fn os_cpu_bit(cpu: CpuId) -> u64 {
    1u64.checked_shl(u32::try_from(cpu).unwrap_or(u32::MAX)).unwrap_or(0)
}

/// `cpu` really stopped running anything (`online: false`) or really
/// started again (`online: true`) at `at_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuChange {
    pub cpu: CpuId,
    pub at_ns: Nanos,
    pub online: bool,
}

/// What a backend really executed, from its own record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Execution {
    pub slices: Vec<ExecSlice>,
    pub changes: Vec<CpuChange>,
    /// Entries the backend's bounded record dropped. With any lost, the
    /// verdict says so; the slices kept are still checked.
    pub lost: u64,
    /// Runs the backend did not place: the kernel kept the thread on its
    /// CPU because it could not leave it then (see the module docs).
    pub forced: Vec<ExecSlice>,
}

/// Quantiles of a set of delays.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delays {
    pub n: usize,
    pub p50_ns: Nanos,
    pub p99_ns: Nanos,
    pub max_ns: Nanos,
}

impl Delays {
    /// The quantiles of `v` (nearest rank; 0 for an empty set).
    pub fn of(mut v: Vec<Nanos>) -> Delays {
        v.sort_unstable();
        let q = |q: f64| v.get(((v.len().max(1) - 1) as f64 * q).round() as usize).copied().unwrap_or(0);
        Delays { n: v.len(), p50_ns: q(0.5), p99_ns: q(0.99), max_ns: v.last().copied().unwrap_or(0) }
    }
}

/// What kind of rule a violation broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// A thread ran on a CPU outside every window of it there.
    OutsideDispatch,
    /// A thread ran on a CPU dispatched `Borrowed`.
    OnBorrowed,
    /// A thread ran on a CPU between its `Offline` and `Online`, or while
    /// the backend's own record says it was offline.
    WhileOffline,
    /// An `Offline`/`Online` with no change in the record, or a change
    /// nobody asked for.
    Reconfiguration,
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    pub kind: ViolationKind,
    pub cpu: CpuId,
    pub thread: Option<ThreadId>,
    pub at_ns: Nanos,
    pub message: String,
}

/// Violations kept in a verdict (the count is exact).
pub const KEPT_VIOLATIONS: usize = 20;

/// The checker's verdict on one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub slices: usize,
    /// Windows of a thread on a CPU (adjacent ones merged).
    pub windows: usize,
    /// Windows in which the thread never ran (dispatched and moved again
    /// before a step).
    pub never_ran: usize,
    pub violation_count: usize,
    /// The first [`KEPT_VIOLATIONS`], in time order.
    pub violations: Vec<Violation>,
    /// `Dispatch { c, Running T }` → T's first step on c.
    pub start: Delays,
    /// The `Dispatch` ending a window → the end of T's last step there.
    pub stop: Delays,
    /// `Offline` → the CPU stopped; `Online` → it runs again.
    pub offline: Delays,
    pub online: Delays,
    /// A `Dispatch` → the backend had applied it.
    pub apply: Delays,
    /// Entries the backend's record lost.
    pub lost: u64,
    /// Runs the kernel forced ([`Execution::forced`]), and how many of them
    /// lay outside the policy's windows (the first [`KEPT_VIOLATIONS`] of
    /// those in `forced_runs`, in time order).
    #[serde(default)]
    pub forced: usize,
    #[serde(default)]
    pub forced_outside: usize,
    #[serde(default)]
    pub forced_runs: Vec<Violation>,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.violation_count == 0
    }

    /// One line: the counts, the delays, and the first violation if any.
    pub fn summary(&self) -> String {
        let us = |ns: Nanos| ns as f64 / 1e3;
        let mut s = format!(
            "{} slice(s) in {} window(s): {} violation(s); actuation delay (action → effect) p50/p99: \
             dispatch → running {:.1}/{:.1} µs, → stopped {:.1}/{:.1} µs, offline {:.1}/{:.1} µs, online \
             {:.1}/{:.1} µs",
            self.slices,
            self.windows,
            self.violation_count,
            us(self.start.p50_ns),
            us(self.start.p99_ns),
            us(self.stop.p50_ns),
            us(self.stop.p99_ns),
            us(self.offline.p50_ns),
            us(self.offline.p99_ns),
            us(self.online.p50_ns),
            us(self.online.p99_ns),
        );
        if self.lost > 0 {
            s += &format!("; the record lost {} entr(ies)", self.lost);
        }
        if self.forced > 0 {
            s += &format!(
                "; {} run(s) the kernel kept on their CPU (migration disabled), {} of them outside the policy's \
                 windows",
                self.forced, self.forced_outside
            );
        }
        if let Some(v) = self.violations.first() {
            s += &format!("; first: {}", v.message);
        }
        s
    }
}

/// A CPU's state over `[start, end)`; the `Dispatch` that ended it was
/// applied at `end_applied`.
#[derive(Debug, Clone, Copy)]
struct Window {
    state: CpuState,
    start: Nanos,
    end: Nanos,
    end_applied: Nanos,
    /// Ended by a `Dispatch` (not by the end of the run).
    dispatched_end: bool,
}

/// An `Offline` or `Online` action of one CPU.
#[derive(Debug, Clone, Copy)]
struct Reconf {
    at: Nanos,
    applied: Nanos,
    online: bool,
}

#[derive(Debug, Clone, Copy)]
struct Open {
    state: CpuState,
    since: Nanos,
}

/// Builds the windows from the actions as a backend executes them, then
/// checks the backend's record against them. See the module docs.
#[derive(Debug, Clone, Default)]
pub struct ExecutionChecker {
    open: Vec<Open>,
    windows: Vec<Vec<Window>>,
    reconfs: Vec<Vec<Reconf>>,
    apply: Vec<Nanos>,
    /// The time of the last action fed.
    last: Nanos,
}

impl ExecutionChecker {
    pub fn new() -> ExecutionChecker {
        ExecutionChecker::default()
    }

    fn cpu(&mut self, cpu: CpuId) {
        if cpu >= self.open.len() {
            self.open.resize(cpu + 1, Open { state: CpuState::Idle, since: 0 });
            self.windows.resize(cpu + 1, Vec::new());
            self.reconfs.resize(cpu + 1, Vec::new());
        }
    }

    /// `action`, decided at `at`, had been applied by the backend at
    /// `applied` (≥ `at`). Actions come in the order the backend executed
    /// them (asserted: their times never decrease). Only `Dispatch`,
    /// `Offline` and `Online` matter.
    pub fn action(&mut self, at: Nanos, applied: Nanos, action: &Action) {
        assert!(at >= self.last, "actions are fed in time order: {at} ns after {} ns", self.last);
        self.last = at;
        let applied = applied.max(at);
        match action {
            Action::Dispatch { cpu, state } => {
                let cpu = *cpu;
                self.cpu(cpu);
                self.apply.push(applied - at);
                let o = self.open[cpu];
                let w = Window {
                    state: o.state,
                    start: o.since,
                    end: at,
                    end_applied: applied,
                    dispatched_end: true,
                };
                self.windows[cpu].push(w);
                self.open[cpu] = Open { state: *state, since: at };
            }
            Action::Offline { cpus, .. } | Action::Online { cpus, .. } => {
                let online = matches!(action, Action::Online { .. });
                for c in cpus.iter() {
                    self.cpu(c);
                    self.reconfs[c].push(Reconf { at, applied, online });
                }
            }
            _ => {}
        }
    }

    /// The run ended at `end` (every thread stopped, applied by then):
    /// checks `exec` against the actions seen.
    pub fn finish(mut self, end: Nanos, exec: &Execution) -> Verdict {
        let ncpus = exec
            .slices
            .iter()
            .map(|s| s.cpu + 1)
            .chain(exec.changes.iter().map(|c| c.cpu + 1))
            .max()
            .unwrap_or(0);
        self.cpu(ncpus.saturating_sub(1));
        for (cpu, o) in self.open.iter().enumerate() {
            let end = end.max(o.since);
            let w = Window { state: o.state, start: o.since, end, end_applied: end, dispatched_end: false };
            self.windows[cpu].push(w);
        }
        let windows: Vec<Vec<Window>> = self.windows.iter().map(|w| merged(w)).collect();
        // A backend may apply a later Dispatch before an earlier one (one
        // that takes a thread off a CPU is applied only when seen done):
        // how far back a slice's window may lie is the running maximum of
        // the applied ends, not the window before it.
        let reach: Vec<Vec<Nanos>> = windows
            .iter()
            .map(|ws| {
                ws.iter()
                    .scan(0, |m, w| {
                        *m = (*m).max(w.end_applied);
                        Some(*m)
                    })
                    .collect()
            })
            .collect();
        let mut v = Check { windows: &windows, reach, violations: Vec::new(), ..Check::default() };
        v.slices(&exec.slices);
        v.offline_rules(&self.reconfs, &exec.changes, &exec.slices);
        v.forced(&self.reconfs, &exec.changes, &exec.forced);
        v.finish(exec, Delays::of(std::mem::take(&mut self.apply)))
    }
}

/// Adjacent windows that run one thread (or hold one state) become one.
fn merged(ws: &[Window]) -> Vec<Window> {
    let mut out: Vec<Window> = Vec::with_capacity(ws.len());
    for w in ws {
        if let Some(last) = out.last_mut()
            && same(&last.state, &w.state)
            && last.end == w.start
        {
            (last.end, last.end_applied, last.dispatched_end) = (w.end, w.end_applied, w.dispatched_end);
            continue;
        }
        out.push(*w);
    }
    out
}

fn same(a: &CpuState, b: &CpuState) -> bool {
    match (a, b) {
        (CpuState::Running { thread: x, .. }, CpuState::Running { thread: y, .. }) => x == y,
        _ => a == b,
    }
}

fn describe(state: &CpuState) -> String {
    match state {
        CpuState::Idle => "idle".into(),
        CpuState::Running { thread, .. } => format!("running thread {thread}"),
        CpuState::Borrowed { by } => format!("borrowed by thread {by}"),
    }
}

#[derive(Default)]
struct Check<'a> {
    windows: &'a [Vec<Window>],
    /// Per CPU, per window: the latest applied end of it and every window
    /// before it.
    reach: Vec<Vec<Nanos>>,
    violations: Vec<Violation>,
    slices: usize,
    never_ran: usize,
    start: Vec<Nanos>,
    stop: Vec<Nanos>,
    offline: Vec<Nanos>,
    online: Vec<Nanos>,
    /// Rule breaks by runs the kernel forced (reported apart).
    forced_runs: Vec<Violation>,
}

impl Check<'_> {
    fn violate(
        &mut self,
        kind: ViolationKind,
        cpu: CpuId,
        thread: Option<ThreadId>,
        at_ns: Nanos,
        message: String,
    ) {
        self.violations.push(Violation { kind, cpu, thread, at_ns, message });
    }

    /// The window of `cpu` in force at `t` (the last that started at or
    /// before it).
    fn window_at(&self, cpu: CpuId, t: Nanos) -> Option<(usize, &Window)> {
        let ws = self.windows.get(cpu)?;
        let i = ws.partition_point(|w| w.start <= t).checked_sub(1)?;
        Some((i, &ws[i]))
    }

    /// Rule 1 and 3, and the start and stop delays.
    fn slices(&mut self, slices: &[ExecSlice]) {
        self.slices = slices.len();
        // Per window: the first start and the last end of its slices.
        let mut ran: BTreeMap<(CpuId, usize), (Nanos, Nanos)> = BTreeMap::new();
        for s in slices {
            if let Some(j) = self.place(s) {
                let e = ran.entry((s.cpu, j)).or_insert((s.start_ns, s.end_ns));
                (e.0, e.1) = (e.0.min(s.start_ns), e.1.max(s.end_ns));
            }
        }
        for (cpu, ws) in self.windows.iter().enumerate() {
            for (i, w) in ws.iter().enumerate() {
                if !matches!(w.state, CpuState::Running { .. }) {
                    continue;
                }
                match ran.get(&(cpu, i)) {
                    None => self.never_ran += 1,
                    Some(&(first, last)) => {
                        self.start.push(first - w.start);
                        if w.dispatched_end {
                            self.stop.push(last.saturating_sub(w.end));
                        }
                    }
                }
            }
        }
    }

    /// Rules 1 and 3 for one slice: the window it lies in, or a violation.
    fn place(&mut self, s: &ExecSlice) -> Option<usize> {
        let Some((i, _)) = self.window_at(s.cpu, s.start_ns) else {
            let m =
                format!("CPU {} ran thread {} at {} ns, before any dispatch", s.cpu, s.thread, s.start_ns);
            self.violate(ViolationKind::OutsideDispatch, s.cpu, Some(s.thread), s.start_ns, m);
            return None;
        };
        match self.home(s, i) {
            Ok(j) => Some(j),
            Err((t, w)) => {
                self.outside(s, t, &w);
                None
            }
        }
    }

    /// Rules 1 to 3 for the runs the kernel forced: their breaks reported
    /// apart; no delays taken from them.
    fn forced(&mut self, reconfs: &[Vec<Reconf>], changes: &[CpuChange], forced: &[ExecSlice]) {
        let n = self.violations.len();
        for s in forced {
            self.place(s);
        }
        self.none_offline(reconfs, changes, forced);
        let outside: Vec<Violation> = self.violations.drain(n..).collect();
        self.forced_runs.extend(outside);
    }

    /// The window (an index in its CPU's) that slice `s` lies in, looking
    /// back from `i`, the window in force at its start: a window of its
    /// thread that started by the slice's start and whose end was applied
    /// no earlier than the start of its last step. Else the time it went
    /// wrong and the window in force then.
    fn home(&self, s: &ExecSlice, i: usize) -> Result<usize, (Nanos, Window)> {
        let ws = &self.windows[s.cpu];
        let mine = |w: &Window| matches!(w.state, CpuState::Running { thread, .. } if thread == s.thread);
        // Earlier windows whose end was applied after the slice started may
        // still hold it (a step that started before the end was applied),
        // however many windows lie between (ends are not applied in order).
        let mut j = i;
        loop {
            let w = &ws[j];
            if mine(w) && w.start <= s.start_ns && w.end_applied >= s.start_ns {
                if s.last_start_ns <= w.end_applied {
                    return Ok(j);
                }
                let (_, later) = self.window_at(s.cpu, s.last_start_ns).expect("a window at a later time");
                return Err((s.last_start_ns, *later));
            }
            if j == 0 || self.reach[s.cpu][j - 1] < s.start_ns {
                return Err((s.start_ns, ws[i]));
            }
            j -= 1;
        }
    }

    /// A slice of `s.thread` ran at `t` on a CPU dispatched as `w` says.
    fn outside(&mut self, s: &ExecSlice, t: Nanos, w: &Window) {
        let kind = match w.state {
            CpuState::Borrowed { .. } => ViolationKind::OnBorrowed,
            _ => ViolationKind::OutsideDispatch,
        };
        let m = format!(
            "CPU {} ran thread {} at {t} ns (a slice of {} step(s), {}–{} ns) while dispatched {} since {} ns{}",
            s.cpu,
            s.thread,
            s.steps,
            s.start_ns,
            s.end_ns,
            describe(&w.state),
            w.start,
            if w.start > 0 || w.dispatched_end { "" } else { " (the start)" }
        );
        self.violate(kind, s.cpu, Some(s.thread), t, m);
    }

    /// Rules 2 and 4, and the offline and online delays.
    fn offline_rules(&mut self, reconfs: &[Vec<Reconf>], changes: &[CpuChange], slices: &[ExecSlice]) {
        self.none_offline(reconfs, changes, slices);
        for (cpu, asked) in reconfs.iter().enumerate() {
            let seen: Vec<CpuChange> = changes.iter().filter(|c| c.cpu == cpu).copied().collect();
            self.matched(cpu, asked, &seen);
        }
    }

    /// Rule 2 for `slices`: none on a CPU from its applied `Offline` to its
    /// `Online`, nor while the record says it was offline.
    fn none_offline(&mut self, reconfs: &[Vec<Reconf>], changes: &[CpuChange], slices: &[ExecSlice]) {
        for (cpu, asked) in reconfs.iter().enumerate() {
            let mine: Vec<&ExecSlice> = slices.iter().filter(|s| s.cpu == cpu).collect();
            // Offline from the applied Offline to the Online (or the end).
            for (k, r) in asked.iter().enumerate().filter(|(_, r)| !r.online) {
                let until = asked[k + 1..].iter().find(|x| x.online).map_or(Nanos::MAX, |x| x.at);
                self.none_between(cpu, &mine, r.applied, until, "between its Offline and Online");
            }
            let seen: Vec<&CpuChange> = changes.iter().filter(|c| c.cpu == cpu).collect();
            for (k, c) in seen.iter().enumerate().filter(|(_, c)| !c.online) {
                let until = seen[k + 1..].iter().find(|x| x.online).map_or(Nanos::MAX, |x| x.at_ns);
                self.none_between(
                    cpu,
                    &mine,
                    c.at_ns,
                    until,
                    "while the backend's record says it was offline",
                );
            }
        }
    }

    fn none_between(&mut self, cpu: CpuId, mine: &[&ExecSlice], from: Nanos, until: Nanos, what: &str) {
        for s in mine.iter().filter(|s| s.end_ns > from && s.start_ns < until) {
            let m = format!(
                "CPU {cpu} ran thread {} ({}–{} ns) {what} ({from}–{})",
                s.thread,
                s.start_ns,
                s.end_ns,
                if until == Nanos::MAX { "the end".to_string() } else { until.to_string() }
            );
            self.violate(ViolationKind::WhileOffline, cpu, Some(s.thread), s.start_ns.max(from), m);
        }
    }

    /// Rule 4: each asked change has its effect, in order; none unasked.
    fn matched(&mut self, cpu: CpuId, asked: &[Reconf], seen: &[CpuChange]) {
        for (k, r) in asked.iter().enumerate() {
            let word = if r.online { "Online" } else { "Offline" };
            match seen.get(k) {
                Some(c) if c.online == r.online && c.at_ns >= r.at => {
                    let d = c.at_ns - r.at;
                    if r.online { self.online.push(d) } else { self.offline.push(d) }
                }
                Some(c) => {
                    let m = format!(
                        "CPU {cpu}: the {word} at {} ns was answered by the record with {} at {} ns",
                        r.at,
                        if c.online { "online" } else { "offline" },
                        c.at_ns
                    );
                    self.violate(ViolationKind::Reconfiguration, cpu, None, r.at, m);
                    return;
                }
                None => {
                    let m =
                        format!("CPU {cpu}: the {word} at {} ns had no effect in the backend's record", r.at);
                    self.violate(ViolationKind::Reconfiguration, cpu, None, r.at, m);
                    return;
                }
            }
        }
        if let Some(c) = seen.get(asked.len()) {
            let m = format!(
                "CPU {cpu} went {} at {} ns with no action asking for it",
                if c.online { "online" } else { "offline" },
                c.at_ns
            );
            self.violate(ViolationKind::Reconfiguration, cpu, None, c.at_ns, m);
        }
    }

    fn finish(mut self, exec: &Execution, apply: Delays) -> Verdict {
        self.violations.sort_by_key(|v| v.at_ns);
        let violation_count = self.violations.len();
        self.violations.truncate(KEPT_VIOLATIONS);
        self.forced_runs.sort_by_key(|v| v.at_ns);
        let forced_outside = self.forced_runs.len();
        self.forced_runs.truncate(KEPT_VIOLATIONS);
        Verdict {
            slices: self.slices,
            windows: self
                .windows
                .iter()
                .flatten()
                .filter(|w| matches!(w.state, CpuState::Running { .. }))
                .count(),
            never_ran: self.never_ran,
            violation_count,
            violations: self.violations,
            start: Delays::of(self.start),
            stop: Delays::of(self.stop),
            offline: Delays::of(self.offline),
            online: Delays::of(self.online),
            apply,
            lost: exec.lost,
            forced: exec.forced.len(),
            forced_outside,
            forced_runs: self.forced_runs,
        }
    }
}

/// Checks `exec` against an action trace whose actions were applied at
/// their own times (a backend that acts at once, or a recorded trace),
/// the run ending at `end`.
pub fn check_trace<'a>(
    actions: impl IntoIterator<Item = &'a (Nanos, Action)>,
    end: Nanos,
    exec: &Execution,
) -> Verdict {
    let mut c = ExecutionChecker::new();
    for (t, a) in actions {
        c.action(*t, *t, a);
    }
    c.finish(end, exec)
}

#[cfg(test)]
mod tests;
