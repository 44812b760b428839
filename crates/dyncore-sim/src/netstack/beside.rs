//! Work beside the stack on the model's CPUs: the threads that share the
//! real CPUs with the stack's components in the live bench (the sending
//! application, the receiving stack), so that a prediction of `dyncore
//! bench stack` models the layout that really runs (see [`super::predict`]).
//!
//! * **The application** makes the data before the stack can take it: a
//!   chunk of [`Beside::app_chunk`] bytes costs `app_cycles_per_byte ×
//!   chunk` on its CPU (the live sender fills its buffer from the stream
//!   generator and hashes it), and it makes the next chunk only once the
//!   stack has taken the last (one send call outstanding). Where the stack
//!   has a syscall server, the chunk reaches it as **one send call**: the
//!   server's job takes the whole chunk and costs two of its messages (the
//!   call and its reply, as the live server counts them), not one message
//!   per segment. It takes the call once the chunk fits in TCP's send
//!   buffer (unsent and unacknowledged bytes within the window): the live
//!   TCP replies once it has copied the whole chunk, and only then does the
//!   application make its next.
//! * **The receiver** turns each segment around on its CPU: a job of
//!   `receiver_cycles_per_segment + receiver_cycles_per_byte × bytes`
//!   (its stack's receive path and its application's copy and hash). It
//!   **acknowledges once it has drained** the segments waiting for it, as a
//!   smoltcp poll takes every frame in and then sends one ACK: after a
//!   segment whose CPU's next job beside the stack is another segment it
//!   only counts it; after the last one of such a run its
//!   acknowledgment logic runs as without it (an ACK at `ack_every`
//!   unacknowledged segments, else the delayed ACK).
//!
//! A CPU with such work shares its time between it and its components: when
//! both have work they take turns job by job (the stack CPU's worker and
//! the other thread time-sharing one real CPU), a switch between them
//! costing a turn like any other; a CPU with only this work sleeps and
//! wakes like any other.
//!
//! **The stack's worker parks apart from the work beside it** ([`Worker`]):
//! it is a thread of its own, which parks once its components have nothing
//! to do, whatever else runs on its real CPU. So when a job beside the
//! stack takes the CPU while no component has work, the worker parks; a
//! message for its components then wakes it (the measured wake-up,
//! `wakeup_ns`, counted as one of the CPU's wake-ups), and until it is
//! awake its components wait, even though the real CPU is busy. (The live
//! worker polls a few microseconds before it parks, and the kernel decides
//! when the other thread gets the CPU; the model parks it as the job
//! starts.) Without this, a message reaching a CPU busy beside the stack
//! was taken at the job's end with no wake-up: with the costs of the bench
//! run of 17:34 on 2026-11-26 and a 25 µs wake-up, the model woke the
//! spread stack's CPUs 25 times per MB where the live ones woke 56; with
//! it, 46 (at the same bitrate, 2.89 Gbps).
//!
//! **The threads beside the stack park too.** The live application's and
//! receiver's threads poll a few hundred times with nothing to do, then
//! park on their bell (`dyncore_net::host`). So a job for a thread that has
//! had nothing to do for longer than it polls (`spin_ns`) runs only once
//! the thread is woken (`wakeup_ns` later), unless its CPU sleeps, whose
//! wake-up is that same one. (Its polling's own CPU time is not charged.)

use std::collections::VecDeque;

use dyncore_core::Nanos;

use super::sim::{CpuState, Ev, Job, Sim};

/// The work beside the stack, and where it runs (indices of the run's CPUs).
/// With an application, a syscall server takes each of its chunks as one
/// send call (two of the server's messages); with a receiver, an ACK goes
/// out once the receiver has drained the segments waiting for it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Beside {
    /// The application's CPU and its cost per byte made.
    pub app: Option<(usize, f64)>,
    /// Bytes the application makes at a time (a send call's buffer).
    pub app_chunk: u64,
    /// The receiver's CPU, its cycles per segment and per payload byte.
    pub receiver: Option<(usize, f64, f64)>,
}

/// The stack's worker on a CPU with work beside it (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Worker {
    /// Runs its components when the CPU is its.
    Running,
    /// Parked while a job beside the stack runs: a message wakes it.
    Parked,
    /// Woken; runs at its `WorkerAwake` event.
    Waking,
}

/// A job beside the stack.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Foreign {
    /// The application makes this many bytes.
    App(u64),
    /// The receiver takes a segment of this many bytes.
    Recv(u32),
}

impl Foreign {
    /// The thread it runs on: 0 the application's, 1 the receiver's.
    fn thread(self) -> usize {
        match self {
            Foreign::App(_) => 0,
            Foreign::Recv(_) => 1,
        }
    }
}

/// Per CPU: its queue of work beside the stack, whether its last job was
/// such work, and per thread beside the stack (the application's, the
/// receiver's; module docs) since when it has had nothing to do (`None`:
/// it has a job) and from when it runs (after a wake-up).
#[derive(Debug, Default)]
pub(super) struct ForeignQueue {
    pub(super) jobs: VecDeque<Foreign>,
    pub(super) last: bool,
    idle_since: [Option<Nanos>; 2],
    runs_from: [Nanos; 2],
}

impl ForeignQueue {
    /// The first job whose thread is awake at `now`.
    fn runnable(&self, now: Nanos) -> Option<usize> {
        self.jobs.iter().position(|f| self.runs_from[f.thread()] <= now)
    }
}

impl Sim<'_> {
    /// Whether the application makes data (the model runs it), rather than
    /// having it all at once.
    pub(super) fn app_modelled(&self) -> bool {
        self.beside.app.is_some() && self.app_rate_gbps.is_none()
    }

    /// With a modelled application: whether a segment's worth is ready; if
    /// not, and no chunk is being made, queues the next chunk.
    pub(super) fn app_ready_for_segment(&mut self) -> bool {
        let mss = u64::from(self.net.mss);
        if self.app_ready >= mss {
            return true;
        }
        if !self.app_making
            && let Some((cpu, _)) = self.beside.app
        {
            self.app_making = true;
            self.foreign_queue(cpu, Foreign::App(self.beside.app_chunk.max(mss)));
        }
        false
    }

    /// Whether the syscall server has the application's send call to take:
    /// a chunk is ready and fits in TCP's send buffer (the window: bytes
    /// not yet sent and bytes not yet acknowledged), so that TCP's copy
    /// completes and the reply lets the application make its next chunk,
    /// as the live TCP replies once it copied the whole chunk. A chunk
    /// larger than the buffer goes when TCP holds less than a segment (the
    /// model sends full segments only: a remainder waits for the next
    /// chunk).
    pub(super) fn syscall_has_call(&mut self) -> bool {
        if !self.app_ready_for_segment() {
            return false;
        }
        let held = self.sock_bytes + self.inflight;
        held < u64::from(self.net.mss) || held + self.app_ready <= self.window
    }

    /// The syscall server takes the application's ready chunk as one send
    /// call (module docs); returns the job's cycles: the call and its
    /// reply, each a message through a channel.
    pub(super) fn syscall_takes_call(&mut self) -> f64 {
        debug_assert!(self.app_modelled() && self.app_ready > 0);
        self.sock_bytes += self.app_ready;
        self.app_ready = 0;
        let cost = self.costs.component(dyncore_core::placement::ComponentKind::Syscall);
        2.0 * (cost.cycles_per_packet + self.costs.channel_cycles_per_msg)
    }

    /// A segment of the application's data taken by the stack.
    pub(super) fn app_took_segment(&mut self) {
        if self.app_modelled() {
            self.app_ready -= u64::from(self.net.mss);
        }
    }

    /// A segment reached the receiver: its turnaround job, or straight to
    /// its acknowledgment logic.
    pub(super) fn arrive(&mut self, bytes: u32) {
        match self.beside.receiver {
            Some((cpu, ..)) => self.foreign_queue(cpu, Foreign::Recv(bytes)),
            None => self.remote(bytes),
        }
    }

    /// Queues `f` on `cpu`, which is woken by an event (this may be called
    /// while `cpu` is choosing its next job). A thread that had nothing to
    /// do for longer than it polls has parked: it runs once woken
    /// (`wakeup_ns`), unless its CPU sleeps, whose wake-up is the same one.
    fn foreign_queue(&mut self, cpu: usize, f: Foreign) {
        let (t, now, spin) = (f.thread(), self.now, self.net.spin_ns);
        let asleep = self.cpus[cpu].state == CpuState::Asleep;
        let q = &mut self.foreign[cpu];
        let parked = q.idle_since[t].is_some_and(|since| now.saturating_sub(since) > spin);
        q.idle_since[t] = None;
        q.jobs.push_back(f);
        let from = if parked && !asleep { now + self.costs.wakeup_ns.round() as Nanos } else { now };
        q.runs_from[t] = q.runs_from[t].max(from);
        self.push(from, Ev::Beside(cpu));
    }

    /// Whether `cpu` has work beside the stack that can run now.
    #[inline]
    pub(super) fn foreign_work(&self, cpu: usize) -> bool {
        let q = &self.foreign[cpu];
        !q.jobs.is_empty() && q.runnable(self.now).is_some()
    }

    /// Whether `cpu`'s next job is work beside the stack: it has some, and
    /// its last job was a component's (turns alternate) or no component
    /// has work.
    pub(super) fn foreign_turn(&mut self, cpu: usize) -> bool {
        if !self.foreign_work(cpu) {
            return false;
        }
        if !self.foreign[cpu].last || self.cpus[cpu].worker != Worker::Running {
            return true;
        }
        !self.components_have_work(cpu)
    }

    /// Starts the next job beside the stack on idle `cpu`.
    pub(super) fn run_foreign(&mut self, cpu: usize) {
        self.stop_polling(cpu);
        let i = self.foreign[cpu].runnable(self.now).expect("checked by foreign_turn");
        let f = self.foreign[cpu].jobs.remove(i).expect("a runnable job");
        if !self.cpus[cpu].comps.is_empty() && !self.components_have_work(cpu) {
            // Module docs: its components have nothing to do, so the worker parks.
            self.cpus[cpu].worker = Worker::Parked;
        }
        let mut cycles = match f {
            Foreign::App(b) => self.beside.app.map_or(0.0, |(_, c)| c) * b as f64,
            Foreign::Recv(b) => self.beside.receiver.map_or(0.0, |(_, p, c)| p + c * f64::from(b)),
        };
        if !self.foreign[cpu].last {
            cycles += self.net.turn_cycles;
        }
        self.foreign[cpu].last = true;
        self.cpus[cpu].last_comp = None;
        let ns = ((cycles * 1000.0 / f64::from(self.cpus[cpu].step.mhz)).round() as Nanos).max(1);
        let c = &mut self.cpus[cpu];
        c.state = CpuState::Busy;
        c.job = Some(Job::Foreign(f));
        c.busy_since = self.now;
        self.push_after(ns, Ev::JobDone(cpu));
    }

    /// Whether any component on `cpu` has work.
    pub(super) fn components_have_work(&mut self, cpu: usize) -> bool {
        // By index: `has_work` may arm an event, not move a component.
        (0..self.cpus[cpu].comps.len()).any(|k| {
            let c = self.cpus[cpu].comps[k];
            self.has_work(c)
        })
    }

    /// Whether `cpu`'s worker can run its components now; a parked worker
    /// whose components have work starts waking (module docs).
    #[inline]
    pub(super) fn wake_worker_for_work(&mut self, cpu: usize) -> bool {
        match self.cpus[cpu].worker {
            Worker::Running => true,
            Worker::Waking => false,
            Worker::Parked => {
                self.wake_parked_worker(cpu);
                false
            }
        }
    }

    /// A parked worker whose components have work starts waking.
    fn wake_parked_worker(&mut self, cpu: usize) {
        if self.components_have_work(cpu) {
            self.cpus[cpu].worker = Worker::Waking;
            self.cpus[cpu].wakeups += 1;
            self.push_after(self.costs.wakeup_ns.round() as Nanos, Ev::WorkerAwake(cpu));
        }
    }

    /// `cpu`'s worker is awake: its components run at the CPU's next turn.
    pub(super) fn worker_awake(&mut self, cpu: usize) {
        debug_assert_eq!(self.cpus[cpu].worker, Worker::Waking);
        self.cpus[cpu].worker = Worker::Running;
        self.kick(cpu);
    }

    /// A job beside the stack ended.
    pub(super) fn foreign_done(&mut self, f: Foreign) {
        let cpu = match f {
            Foreign::App(_) => self.beside.app.map(|a| a.0),
            Foreign::Recv(_) => self.beside.receiver.map(|r| r.0),
        };
        if let Some(cpu) = cpu {
            let q = &mut self.foreign[cpu];
            if !q.jobs.iter().any(|j| j.thread() == f.thread()) {
                q.idle_since[f.thread()] = Some(self.now);
            }
        }
        match f {
            Foreign::App(b) => {
                self.app_ready += b;
                self.app_making = false;
                let first = self.first_comp();
                let cpu = self.comps[first].cpu;
                self.kick(cpu);
            }
            Foreign::Recv(b) => {
                // Module docs: one ACK after the receiver drained its segments.
                let cpu = self.beside.receiver.map(|(cpu, ..)| cpu).expect("a receiver job has a receiver");
                if matches!(self.foreign[cpu].jobs.front(), Some(Foreign::Recv(_))) {
                    self.unacked_segs += 1;
                    self.unacked_bytes += b;
                } else {
                    self.remote(b);
                }
            }
        }
    }
}
