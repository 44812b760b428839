// SPDX-License-Identifier: GPL-2.0-only
//! The scheduler's mirror of the policy: the kernel's events turned into
//! the policy's (`Spawn`, `Wake`, `Block`, `Exit`, `Tick`), its actions
//! turned into the `assign` map and kicks, the reconfigurations answered
//! when the kernel shows them done, and the record of what ran where
//! (module `scheduler` has the tables).
//!
//! Invariants (asserted where they can break): after each call's actions,
//! the map holds exactly the CPU of every thread the policy runs on a CPU
//! that is not down, and none for any other; a thread is on at most one
//! CPU in the mirror; `now` never decreases; an `Offline` is answered only
//! when the kernel shows no command task running on, or moved to, its
//! CPUs; one CPU's reconfigurations are answered in order.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io::Write;
use std::sync::atomic::Ordering;

use anyhow::{Result, bail};

use dyncore_core::policy::execution::{ExecSlice, os_cpu_bit};
use dyncore_core::policy::{Action, CpuState, Event, Policy, ThreadId};
use dyncore_core::speed::Duty;
use dyncore_core::{CpuId, Nanos};

use crate::bpf_intf::{self, dync_assign, dync_event};
use crate::plan::{Plan, slice_for};
use crate::record::{Counters, ExitInfo, Record, ThreadRecord, Timed};
use crate::scheduler::{IN_CALL, Io, monotonic_ns};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Life {
    Runnable,
    Blocked,
    Exited,
}

/// What the scheduler knows of one thread.
struct Thread {
    rec: ThreadRecord,
    life: Life,
    /// The open run: (real CPU, start ns from the run's start, forced:
    /// the kernel kept it there, its migration disabled).
    running: Option<(CpuId, Nanos, bool)>,
    cpus: BTreeSet<CpuId>,
}

/// The policy, its mirror of the CPUs, and the record.
/// A call's `Dispatch`es that took threads off CPUs: its first action,
/// one past its last, and the (tid, real CPU) of each thread taken off.
type Unapplied = (usize, usize, Vec<(i32, CpuId)>);

pub(crate) struct State {
    policy: Box<dyn Policy + Send>,
    t0: u64,
    last_now: Nanos,
    cpus: Vec<CpuId>,
    runtime_of: HashMap<CpuId, CpuId>,
    baseline: Duty,
    tick_ns: Nanos,
    /// Each command's thread spec.
    specs: Vec<dyncore_core::policy::ThreadSpec>,
    /// The command of each process seen (tgid -> index), from the control
    /// pipe and from each new process's parent.
    command_of: HashMap<i32, usize>,
    control: Control,
    by_tid: HashMap<i32, ThreadId>,
    threads: Vec<Thread>,
    occupant: Vec<Option<ThreadId>>,
    duty: Vec<Duty>,
    /// What the map holds for each thread: (real CPU or -1, slice, limited).
    written: HashMap<ThreadId, (i32, u64, bool)>,
    actions: Vec<Timed>,
    slices: Vec<ExecSlice>,
    /// Runs the kernel forced (see `Record::forced`).
    forced: Vec<ExecSlice>,
    replies: VecDeque<Event>,
    /// Offline/Online actions not yet done, in order: (id, real CPUs,
    /// online, index in `actions`). An Offline is done when no command task
    /// runs on its CPUs any more (seen in the kernel's stopping callbacks);
    /// one CPU's reconfigurations are done in order.
    pending: Vec<(dyncore_core::policy::ReconfigId, Vec<CpuId>, bool, usize)>,
    /// Real CPUs whose last answered reconfiguration is an `Offline`. With
    /// the CPUs of every pending one, they are *down*: no task is assigned
    /// there, whatever the policy dispatches (a thread dispatched in the
    /// call that brings a CPU online starts when the online is done, as the
    /// boundary's contract says).
    parked: BTreeSet<CpuId>,
    /// Calls whose `Dispatch`es took threads off CPUs: (first action, end,
    /// (tid, real CPU) taken off). Applied once the kernel shows none of
    /// them running on, or on its way to, the CPU it left.
    unapplied: Vec<Unapplied>,
    /// When each reconfiguration was seen done, in runtime CPUs: the
    /// record's CPU changes.
    changes: Vec<dyncore_core::policy::execution::CpuChange>,
    /// The longest policy call, and the longest pass of the loop (events
    /// in, actions applied), in ns.
    max_call_ns: u64,
    pub(crate) max_pass_ns: u64,
    /// Passes that read a whole BATCH (events came faster than one pass).
    pub(crate) full_batches: u64,
    /// Kernel events, by kind (index: `dync_event_kind`).
    by_kind: [u64; 8],
    /// Every call's traffic, held against the boundary's contract; the
    /// first break (a backend bug), if any.
    contract: dyncore_core::policy::contract::Checker,
    contract_error: Option<String>,
    /// `DYNCORE_SCX_EVENT_LOG=FILE`: every event handed to the policy, as
    /// JSON lines, written as it is handed (to replay a run that hung).
    event_log: Option<std::io::BufWriter<std::fs::File>>,
    ticks: u64,
    pub(crate) late_ticks: u64,
}

impl State {
    pub(crate) fn new(plan: &Plan, policy: Box<dyn Policy + Send>, t0: u64) -> State {
        let n = plan.cpus.len();
        State {
            policy,
            t0,
            last_now: 0,
            cpus: plan.cpus.clone(),
            runtime_of: plan.cpus.iter().enumerate().map(|(i, &c)| (c, i)).collect(),
            baseline: plan.baseline,
            tick_ns: plan.ctx.tick_ns,
            specs: plan.commands.iter().map(|c| c.spec.clone()).collect(),
            command_of: HashMap::new(),
            control: Control::stdin(),
            by_tid: HashMap::new(),
            threads: Vec::new(),
            occupant: vec![None; n],
            duty: vec![Duty::FULL; n],
            written: HashMap::new(),
            actions: Vec::new(),
            slices: Vec::new(),
            forced: Vec::new(),
            replies: VecDeque::new(),
            pending: Vec::new(),
            parked: BTreeSet::new(),
            unapplied: Vec::new(),
            changes: Vec::new(),
            max_call_ns: 0,
            max_pass_ns: 0,
            full_batches: 0,
            by_kind: [0; 8],
            contract: dyncore_core::policy::contract::Checker::with_cpus(n),
            contract_error: None,
            event_log: std::env::var_os("DYNCORE_SCX_EVENT_LOG")
                .and_then(|p| std::fs::File::create(p).ok())
                .map(std::io::BufWriter::new),
            ticks: 0,
            late_ticks: 0,
        }
    }

    /// The policy's clock: ns since the run started, never decreasing.
    pub(crate) fn now(&mut self) -> Nanos {
        let n = monotonic_ns().saturating_sub(self.t0).max(self.last_now);
        self.last_now = n;
        n
    }

    fn ktime(&self, ts: u64) -> Nanos {
        ts.saturating_sub(self.t0)
    }

    /// The checker's CPU for a real CPU: its runtime index, or one past
    /// the run's for a CPU outside it (no window there: a violation).
    fn checker_cpu(&self, real: CpuId) -> CpuId {
        self.runtime_of.get(&real).copied().unwrap_or(self.cpus.len() + real)
    }

    fn thread_of(&mut self, e: &dync_event, io: &mut Io) -> Result<ThreadId> {
        if let Some(&t) = self.by_tid.get(&e.pid) {
            return Ok(t);
        }
        let id = self.threads.len();
        let now = self.now();
        let command = self.command_for(e).filter(|&c| c < self.specs.len());
        let spec = self.specs[command.unwrap_or(0)].clone();
        self.threads.push(Thread {
            rec: ThreadRecord {
                thread: id,
                command,
                tid: e.pid,
                tgid: e.tgid,
                comm: comm(&e.comm),
                spawned_ns: now,
                ..Default::default()
            },
            life: Life::Runnable,
            running: None,
            cpus: BTreeSet::new(),
        });
        self.by_tid.insert(e.pid, id);
        self.feed(Event::Spawn { thread: id, spec }, io)?;
        Ok(id)
    }

    /// The command a new task is of: its process's, else its parent's
    /// (a process the command forked), else the one the supervisor named
    /// on the control pipe (a command's first process: named before it
    /// joined sched_ext, so the line is there by the time its event is).
    fn command_for(&mut self, e: &dync_event) -> Option<usize> {
        for pass in 0..2 {
            if pass == 1 {
                self.control.drain(&mut self.command_of);
            }
            if let Some(&c) = self.command_of.get(&e.tgid) {
                return Some(c);
            }
            if let Some(&c) = self.command_of.get(&e.ptgid).filter(|_| e.ptgid != 0) {
                self.command_of.insert(e.tgid, c);
                return Some(c);
            }
        }
        // One command: every task is its (`exec`).
        (self.specs.len() == 1).then_some(0)
    }

    pub(crate) fn kernel_event(&mut self, e: &dync_event, io: &mut Io) -> Result<()> {
        io.counters.events += 1;
        self.by_kind[(e.kind as usize).min(7)] += 1;
        let at = self.ktime(e.ts);
        match e.kind {
            k if k == bpf_intf::dync_event_kind_DYNC_EV_ENABLE => {
                self.thread_of(e, io)?;
            }
            k if k == bpf_intf::dync_event_kind_DYNC_EV_RUNNABLE => {
                let t = self.thread_of(e, io)?;
                if self.threads[t].life == Life::Blocked {
                    self.threads[t].life = Life::Runnable;
                    self.feed(Event::Wake { thread: t }, io)?;
                }
            }
            k if k == bpf_intf::dync_event_kind_DYNC_EV_QUIESCENT => {
                if let Some(&t) = self.by_tid.get(&e.pid)
                    && self.threads[t].life == Life::Runnable
                {
                    self.threads[t].life = Life::Blocked;
                    self.threads[t].rec.blocks += 1;
                    self.feed(Event::Block { thread: t }, io)?;
                }
            }
            k if k == bpf_intf::dync_event_kind_DYNC_EV_EXIT => {
                if let Some(t) = self.by_tid.remove(&e.pid) {
                    self.close_run(t, at);
                    let name = comm(&e.comm);
                    let th = &mut self.threads[t];
                    if !name.is_empty() {
                        th.rec.comm = name;
                    }
                    if th.life != Life::Exited {
                        th.life = Life::Exited;
                        th.rec.exited_ns = Some(at);
                        self.feed(Event::Exit { thread: t }, io)?;
                    }
                    // The kernel deleted its assignment at exit; a write
                    // since (the policy placed it before it saw the exit)
                    // would leave one for a task that no longer exists.
                    if self.written.remove(&t).is_some() {
                        io.forget(e.pid)?;
                    }
                }
            }
            k if k == bpf_intf::dync_event_kind_DYNC_EV_RUNNING => {
                let t = self.thread_of(e, io)?;
                self.close_run(t, at);
                let forced = e.arg & u64::from(bpf_intf::DYNC_RUN_FORCED) != 0;
                self.threads[t].running = Some((e.cpu as CpuId, at, forced));
            }
            k if k == bpf_intf::dync_event_kind_DYNC_EV_STOPPING => {
                if let Some(&t) = self.by_tid.get(&e.pid) {
                    self.close_run(t, at);
                }
            }
            k => bail!("unknown event kind {k} from the BPF half"),
        }
        Ok(())
    }

    /// Ends thread `t`'s open run at `at`: one slice for the checker.
    fn close_run(&mut self, t: ThreadId, at: Nanos) {
        let Some((real, start, forced)) = self.threads[t].running.take() else { return };
        let end = at.max(start);
        let cpu = self.checker_cpu(real);
        let th = &mut self.threads[t];
        th.rec.cpu_ns += end - start;
        th.rec.runs += 1;
        th.cpus.insert(real);
        let into = if forced { &mut self.forced } else { &mut self.slices };
        into.push(ExecSlice {
            thread: t,
            cpu,
            start_ns: start,
            last_start_ns: start,
            end_ns: end,
            steps: 1,
            os_cpus: os_cpu_bit(real),
        });
    }

    pub(crate) fn ticks(&mut self, io: &mut Io) -> Result<()> {
        self.ticks += 1;
        for c in 0..self.cpus.len() {
            self.feed(Event::Tick { cpu: c }, io)?;
        }
        // A new period: throttled threads may run again.
        let limited: Vec<ThreadId> =
            self.written.iter().filter(|(_, w)| w.2 && w.0 >= 0).map(|(&t, _)| t).collect();
        for t in limited {
            let (cpu, slice, lim) = self.written[&t];
            let tid = self.threads[t].rec.tid;
            io.write(tid, &dync_assign { cpu, limited: lim as u32, slice_ns: slice, throttled: 0, pad: 0 })?;
            io.kick(cpu as CpuId)?;
        }
        Ok(())
    }

    /// Hands `event` to the policy and carries out its actions, then any
    /// `ReconfigDone` they call for, each as a call of its own.
    fn feed(&mut self, event: Event, io: &mut Io) -> Result<()> {
        self.replies.push_back(event);
        while let Some(ev) = self.replies.pop_front() {
            let at = self.now();
            let mut out = Vec::new();
            if let Some(w) = &mut self.event_log {
                let _ = writeln!(w, "{}", serde_json::json!({"now": at, "event": ev}));
                let _ = w.flush();
            }
            let call = monotonic_ns().max(1);
            IN_CALL.store(call, Ordering::SeqCst);
            self.policy.handle(at, &ev, &mut out);
            IN_CALL.store(0, Ordering::SeqCst);
            self.max_call_ns = self.max_call_ns.max(monotonic_ns() - call);
            if self.contract_error.is_none()
                && let Err(e) = self.contract.step(at, &ev, &out)
            {
                eprintln!("dyncore-scx: the backend's traffic breaks the policy boundary's contract: {e}");
                self.contract_error = Some(e);
            }
            let first = self.actions.len();
            for a in out {
                match &a {
                    Action::Dispatch { cpu, state } => {
                        self.occupant[*cpu] = match state {
                            CpuState::Running { thread, .. } => Some(*thread),
                            CpuState::Idle | CpuState::Borrowed { .. } => None,
                        };
                    }
                    Action::SetSpeed { cpu, duty } => self.duty[*cpu] = *duty,
                    Action::Offline { id, cpus, .. } | Action::Online { id, cpus, .. } => {
                        let real: Vec<CpuId> = cpus.iter().map(|c| self.cpus[c]).collect();
                        let online = matches!(a, Action::Online { .. });
                        self.pending.push((*id, real, online, self.actions.len()));
                    }
                    Action::Place { .. } => {
                        bail!("the policy emitted `place`, which this backend refused to run")
                    }
                    Action::Fuse { .. }
                    | Action::Split { .. }
                    | Action::Migrate { .. }
                    | Action::Object { .. } => {}
                }
                self.actions.push(Timed { at_ns: at, applied_ns: at, action: a });
            }
            let removed = self.sync(io)?;
            let applied = self.now();
            for t in &mut self.actions[first..] {
                t.applied_ns = applied;
            }
            if !removed.is_empty() {
                self.unapplied.push((first, self.actions.len(), removed));
            }
        }
        Ok(())
    }

    /// Answers every reconfiguration that is done (see `pending`) with its
    /// `ReconfigDone`, the action's applied time set to when it was seen done.
    fn settle(&mut self, io: &Io) {
        let mut busy: BTreeSet<CpuId> = BTreeSet::new();
        // The kernel's own view: what runs on each CPU, what is on its way.
        // Read first; the time is taken after, so that what is answered as
        // done was seen done at or before its time.
        let inflight = io.inflight();
        let running_now: Vec<(CpuId, i32)> = self.cpus.iter().map(|&c| (c, io.running_on(c))).collect();
        let now = self.now();
        let on = |c: CpuId| running_now.iter().find(|r| r.0 == c).map_or(0, |r| r.1);
        self.unapplied.retain(|(first, end, removed)| {
            let gone = removed.iter().all(|&(tid, c)| on(c) != tid && !inflight.contains(&(tid, c)));
            if gone {
                for t in &mut self.actions[*first..*end] {
                    if matches!(t.action, Action::Dispatch { .. }) {
                        t.applied_ns = t.applied_ns.max(now);
                    }
                }
            }
            !gone
        });
        let running: BTreeSet<CpuId> = self
            .cpus
            .iter()
            .copied()
            .filter(|&c| on(c) != 0 || inflight.iter().any(|&(_, f)| f == c))
            .collect();
        let mut done = Vec::new();
        for (i, (_, cpus, online, _)) in self.pending.iter().enumerate() {
            let blocked = cpus.iter().any(|c| busy.contains(c));
            let empty = *online || cpus.iter().all(|c| !running.contains(c));
            if !blocked && empty {
                done.push(i);
            } else {
                busy.extend(cpus.iter().copied());
            }
        }
        if done.is_empty() {
            return;
        }
        let mut answered: Vec<_> = done.into_iter().rev().map(|i| self.pending.remove(i)).collect();
        answered.reverse();
        for (id, cpus, online, idx) in answered {
            for &c in &cpus {
                if online {
                    self.parked.remove(&c);
                } else {
                    self.parked.insert(c);
                }
                let cpu = self.runtime_of[&c];
                self.changes.push(dyncore_core::policy::execution::CpuChange { cpu, at_ns: now, online });
            }
            let t = &mut self.actions[idx];
            t.applied_ns = t.applied_ns.max(now);
            let took_ns = t.applied_ns - t.at_ns;
            self.replies.push_back(Event::ReconfigDone { id, took_ns });
        }
    }

    /// Answers what became done, once every event consumed so far has
    /// been applied (never in the middle of a batch: a `running` later in
    /// the batch may show a CPU busy that looks empty before it).
    pub(crate) fn settle_and_feed(&mut self, io: &mut Io) -> Result<()> {
        loop {
            self.settle(io);
            let Some(ev) = self.replies.pop_front() else { return Ok(()) };
            self.feed(ev, io)?;
        }
    }

    /// Makes the map say what the mirror says; kicks every CPU whose task
    /// changed. Returns the (tid, real CPU) of every thread taken off a CPU.
    fn sync(&mut self, io: &mut Io) -> Result<Vec<(i32, CpuId)>> {
        let mut removed = Vec::new();
        let mut want: HashMap<ThreadId, (i32, u64, bool)> = HashMap::new();
        for (c, occ) in self.occupant.iter().enumerate() {
            let real = self.cpus[c];
            if self.parked.contains(&real) || self.pending.iter().any(|p| p.1.contains(&real)) {
                continue;
            }
            if let Some(t) = occ {
                let (slice, limited) = slice_for(self.duty[c], self.baseline, self.tick_ns);
                let prev = want.insert(*t, (self.cpus[c] as i32, slice, limited));
                assert!(prev.is_none(), "thread {t} dispatched on two CPUs at once");
            }
        }
        let mut kick = BTreeSet::new();
        let mut changed: Vec<(ThreadId, (i32, u64, bool))> = Vec::new();
        for (&t, &w) in &want {
            if self.written.get(&t) != Some(&w) {
                changed.push((t, w));
            }
        }
        for (&t, &w) in &self.written {
            if w.0 >= 0 && !want.contains_key(&t) {
                changed.push((t, (-1, self.tick_ns, false)));
            }
        }
        changed.sort_unstable();
        for (t, w) in changed {
            if self.threads[t].life == Life::Exited {
                continue;
            }
            if let Some(old) = self.written.get(&t)
                && old.0 >= 0
            {
                kick.insert(old.0 as CpuId);
                if old.0 != w.0 {
                    removed.push((self.threads[t].rec.tid, old.0 as CpuId));
                }
            }
            if w.0 >= 0 {
                kick.insert(w.0 as CpuId);
            }
            io.write(
                self.threads[t].rec.tid,
                &dync_assign { cpu: w.0, limited: w.2 as u32, slice_ns: w.1, throttled: 0, pad: 0 },
            )?;
            self.written.insert(t, w);
        }
        for c in kick {
            io.kick(c)?;
        }
        Ok(removed)
    }

    pub(crate) fn finish(mut self, plan: &Plan, counters: Counters, exit: Option<ExitInfo>) -> Record {
        let end = self.now();
        for t in 0..self.threads.len() {
            self.close_run(t, end);
        }
        let policy_check = self.policy.check().err();
        let threads = self
            .threads
            .into_iter()
            .map(|mut t| {
                t.rec.cpus = t.cpus.into_iter().collect();
                t.rec
            })
            .collect();
        Record {
            policy: plan.policy.clone(),
            tick_ns: self.tick_ns,
            end_ns: end,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap_or_default()
                .trim()
                .to_string(),
            ops: "dyncore".into(),
            siblings: self
                .cpus
                .iter()
                .map(|c| {
                    let f = format!("/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list");
                    std::fs::read_to_string(f).unwrap_or_default().trim().to_string()
                })
                .collect(),
            threads,
            actions: self.actions,
            slices: self.slices,
            forced: self.forced,
            ticks: self.ticks,
            late_ticks: self.late_ticks,
            max_call_ns: self.max_call_ns,
            max_pass_ns: self.max_pass_ns,
            full_batches: self.full_batches,
            events_by_kind: [
                ("enable", 1),
                ("exit", 2),
                ("runnable", 3),
                ("running", 4),
                ("stopping", 5),
                ("quiescent", 6),
            ]
            .iter()
            .map(|&(k, i)| (k.to_string(), self.by_kind[i]))
            .collect(),
            contract_error: self.contract_error,
            changes: self.changes,
            cpus: self.cpus,
            counters,
            exit,
            policy_check,
        }
    }
}

/// The control pipe (the scheduler's stdin): "PID INDEX" for each command
/// the supervisor starts, written before the command joins sched_ext.
struct Control {
    buf: Vec<u8>,
    open: bool,
}

impl Control {
    fn stdin() -> Control {
        // SAFETY: fcntl on fd 0, which this process owns.
        let open = unsafe {
            let flags = libc::fcntl(0, libc::F_GETFL);
            flags >= 0 && libc::fcntl(0, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
        };
        Control { buf: Vec::new(), open }
    }

    /// Reads what the pipe holds; every whole line into `into`.
    fn drain(&mut self, into: &mut HashMap<i32, usize>) {
        let mut chunk = [0u8; 4096];
        while self.open {
            // SAFETY: reading into a local buffer of its length.
            let n = unsafe { libc::read(0, chunk.as_mut_ptr().cast(), chunk.len()) };
            if n <= 0 {
                // 0: the supervisor closed it; < 0: nothing more now (EAGAIN).
                self.open = n < 0;
                break;
            }
            self.buf.extend_from_slice(&chunk[..n as usize]);
        }
        while let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line);
            let mut words = text.split_whitespace().map(str::parse::<i64>);
            if let (Some(Ok(pid)), Some(Ok(index))) = (words.next(), words.next()) {
                into.insert(pid as i32, index as usize);
            }
        }
    }
}

fn comm(raw: &[std::os::raw::c_char]) -> String {
    let bytes: Vec<u8> = raw.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
