//! The event-driven engine of the model (module docs of `netstack`): CPUs
//! running components' jobs, channels, sleep and wake-up; the application
//! and the wire (NIC, receiver) are in [`super::traffic`], the event queue
//! in [`super::queue`].

use std::collections::VecDeque;

use dyncore_core::Nanos;
use dyncore_core::idle::Governor;
use dyncore_core::placement::ComponentKind;
use dyncore_core::power::{SpeedStep, SpeedTable};
use dyncore_core::profile::StackCosts;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::beside::{Beside, Foreign, ForeignQueue, Worker};
use super::idle::IdleTrack;
use super::jobtime::JobTimes;
use super::queue::{EventQueue, Lane};
use super::writes::{Client, add_system_core};
use super::{CpuSpec, LoadStep, NetParams, ms};

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Msg {
    Data(u32),
    Ack(u32),
    /// Client `i`'s write (to the syscall server, then to TCP).
    Write(u32),
    /// TCP has copied client `i`'s write (to the server, then the client).
    Written(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Ev {
    JobDone(usize),
    Awake(usize),
    NicDone,
    /// A segment reached the receiver.
    Remote(u32),
    /// An ACK of this many bytes reached the NIC.
    AckIn(u32),
    /// The receiver's delayed-ACK timer, armed at its `generation`.
    DelAck(u64),
    /// The offered load changes (index into the load steps) or the
    /// application has data again.
    App,
    /// The measured time starts.
    Measure,
    /// Work beside the stack was queued on this CPU (see [`Beside`]): wake it.
    Beside(usize),
    /// A CPU that has polled `spin_ns` with nothing to do sleeps, unless
    /// work came since (its idle spell's number).
    Park(usize, u64),
    /// Client `i` writes (see [`super::writes`]).
    Client(u32),
    /// The stack worker of this CPU, parked beside other work, runs again.
    WorkerAwake(usize),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum CpuState {
    Asleep,
    Waking,
    Idle,
    Busy,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Job {
    /// A component handles a message (or TCP sends / the syscall server
    /// takes a write).
    Msg { comp: usize, msg: Option<Msg> },
    /// Work beside the stack (see [`Beside`]).
    Foreign(Foreign),
}

pub(super) struct Cpu {
    pub(super) step: SpeedStep,
    pub(super) comps: Vec<usize>,
    pub(super) core: u32,
    pub(super) sibling: Option<usize>,
    pub(super) state: CpuState,
    pub(super) job: Option<Job>,
    /// Index into `comps` of the component whose turn it is.
    pub(super) turn: usize,
    /// Jobs the current component has run this turn.
    pub(super) in_turn: u32,
    pub(super) last_comp: Option<usize>,
    pub(super) busy_since: Nanos,
    pub(super) busy_ns: Nanos,
    pub(super) wakeups: u64,
    /// Its idle periods: the state, the history the governor reads, the
    /// time in each state.
    pub(super) idle: IdleTrack,
    /// Polling with nothing to do since (`spin_ns`), and the idle spell's
    /// number.
    pub(super) spinning_since: Option<Nanos>,
    pub(super) spell: u64,
    pub(super) polled_ns: Nanos,
    /// The stack's worker thread on this CPU (see [`super::beside`]).
    pub(super) worker: Worker,
    /// The system's core, added for the syscall server (see
    /// [`super::writes`]): not one of the run's CPUs in power and resources.
    pub(super) system: bool,
}

pub(super) struct Comp {
    pub(super) kind: ComponentKind,
    pub(super) cpu: usize,
    pub(super) queue: VecDeque<Msg>,
    pub(super) busy_ns: Nanos,
    pub(super) msgs: u64,
    /// Largest queue length seen since the last sample.
    pub(super) peak_queue: usize,
}

impl Cpu {
    /// A CPU at `step` hosting `comps`, asleep, with nothing done yet;
    /// `system`: the system core added for synchronous writes.
    pub(super) fn new(step: SpeedStep, comps: Vec<usize>, core: u32, system: bool) -> Cpu {
        Cpu {
            step,
            comps,
            core,
            sibling: None,
            state: CpuState::Asleep,
            job: None,
            turn: 0,
            in_turn: 0,
            last_comp: None,
            busy_since: 0,
            busy_ns: 0,
            wakeups: 0,
            idle: IdleTrack::default(),
            spinning_since: None,
            spell: 0,
            polled_ns: 0,
            worker: Worker::Running,
            system,
        }
    }
}

impl Comp {
    /// Component `kind` on CPU `cpu`, with an empty queue.
    pub(super) fn new(kind: ComponentKind, cpu: usize) -> Comp {
        Comp { kind, cpu, queue: VecDeque::new(), busy_ns: 0, msgs: 0, peak_queue: 0 }
    }
}

/// A run's inputs.
#[derive(Debug, Clone)]
pub struct RunInput<'a> {
    pub costs: &'a StackCosts,
    pub net: &'a NetParams,
    pub cpus: &'a [CpuSpec],
    pub load: &'a [LoadStep],
    pub seed: u64,
    /// Work beside the stack on these CPUs (none by default).
    pub beside: Beside,
}

/// The simulation state of one stack. [`policy`](super::policy) drives a placement policy
/// over it between samples.
pub struct Sim<'a> {
    pub(super) costs: &'a StackCosts,
    pub(super) net: &'a NetParams,
    pub(super) load: &'a [LoadStep],
    pub(super) beside: Beside,
    /// Per CPU, the work beside the stack waiting for it.
    pub(super) foreign: Vec<ForeignQueue>,
    /// With a modelled application: bytes it has made that the stack has
    /// not taken, and whether it is making a chunk.
    pub(super) app_ready: u64,
    pub(super) app_making: bool,
    pub(super) table: SpeedTable,
    pub(super) cpus: Vec<Cpu>,
    pub(super) comps: Vec<Comp>,
    /// Pipeline order of the components (indices into `comps`).
    pub(super) order: Vec<usize>,
    /// Per component, the next one in `order` (towards the wire) and the
    /// one before it (`None` at the ends).
    pub(super) next_down: Vec<Option<usize>>,
    pub(super) next_up: Vec<Option<usize>>,
    /// When each load step begins, ns (`load[i].at_ms` in ns).
    pub(super) load_ns: Vec<Nanos>,
    pub(super) tcp: usize,
    pub(super) syscall: Option<usize>,
    pub(super) queue: EventQueue,
    /// Job times computed so far (see [`super::jobtime`]).
    pub(super) job_times: JobTimes,
    pub(super) now: Nanos,
    pub(super) rng: ChaCha8Rng,
    // TCP and the application.
    pub(super) inflight: u64,
    pub(super) window: u64,
    /// Bytes the application has handed over and TCP has not sent.
    pub(super) app_bytes: u64,
    /// Bytes written through the syscall server waiting for TCP.
    pub(super) sock_bytes: u64,
    pub(super) app_rate_gbps: Option<f64>,
    /// The mean gap between its writes at that rate, ns (`mss × 8 / rate`).
    pub(super) app_mean_ns: f64,
    /// When the application's next write of a segment comes (`Nanos::MAX`:
    /// none).
    pub(super) app_next: Nanos,
    pub(super) app_pending: bool,
    // NIC.
    pub(super) nic: VecDeque<u32>,
    pub(super) nic_busy: bool,
    /// The last frame's payload bytes and its time on the link, ns.
    pub(super) nic_frame: Option<(u32, Nanos)>,
    // Receiver.
    pub(super) unacked_segs: u32,
    pub(super) unacked_bytes: u32,
    pub(super) delack_gen: u64,
    // Measurement.
    pub(super) measure_from: Nanos,
    pub(super) acked_bytes: u64,
    pub(super) packets: u64,
    pub(super) events: u64,
    // Sampling (for policies).
    pub(super) sample_acked: u64,
    pub(super) sample_busy: Vec<Nanos>,
    pub(super) sample_cpu_busy: Vec<Nanos>,
    /// When the current load sample began.
    pub(super) sample_from: Nanos,
    /// Picks each sleeping CPU's idle state (`None`: fixed wake-ups).
    pub(super) governor: Option<Box<dyn Governor>>,
    // Synchronous writes (see [`super::writes`]).
    pub(super) clients: Vec<Client>,
    /// Bytes TCP has copied and not sent.
    pub(super) unsent: u64,
    /// Writes TCP holds until its send buffer has room.
    pub(super) waiting_writes: VecDeque<u32>,
    /// The chip's frequency (the clients' and the system core's), MHz.
    pub(super) chip_mhz: u32,
}

impl<'a> Sim<'a> {
    /// A stack laid out as `input.cpus` says. The layout must have passed
    /// [`scenario`](super::scenario)'s validation: known speeds, each of TCP, IP and the
    /// driver on exactly one CPU.
    pub fn new(input: &RunInput<'a>) -> Sim<'a> {
        let table = SpeedTable::newtos();
        let mut cpus = Vec::new();
        let mut comps: Vec<Comp> = Vec::new();
        for (i, spec) in input.cpus.iter().enumerate() {
            let step = table.get(table.by_mhz(spec.mhz).expect("validated speed"));
            let mut ids = Vec::new();
            for &k in &spec.components {
                ids.push(comps.len());
                comps.push(Comp::new(k, i));
            }
            cpus.push(Cpu::new(step, ids, spec.core.unwrap_or(10_000 + i as u32), false));
        }
        let (clients, chip_mhz) = add_system_core(input, &table, &mut cpus, &mut comps);
        for i in 0..cpus.len() {
            let shares =
                |j: usize| j != i && !cpus[i].system && !cpus[j].system && cpus[j].core == cpus[i].core;
            cpus[i].sibling = (0..cpus.len()).find(|&j| shares(j));
        }
        let mut order: Vec<usize> = (0..comps.len()).collect();
        order.sort_by_key(|&c| comps[c].kind);
        let find = |k| comps.iter().position(|c| c.kind == k);
        let tcp = find(ComponentKind::Tcp).expect("validated: TCP is placed");
        let syscall = find(ComponentKind::Syscall);
        let net = input.net;
        let ncomp = comps.len();
        let ncpu = cpus.len();
        let (mut next_down, mut next_up) = (vec![None; ncomp], vec![None; ncomp]);
        for w in order.windows(2) {
            next_down[w[0]] = Some(w[1]);
            next_up[w[1]] = Some(w[0]);
        }
        let mut sim = Sim {
            costs: input.costs,
            net,
            load: input.load,
            beside: input.beside,
            foreign: (0..ncpu).map(|_| ForeignQueue::default()).collect(),
            app_ready: 0,
            app_making: false,
            table,
            cpus,
            comps,
            order,
            next_down,
            next_up,
            load_ns: input.load.iter().map(|l| ms(l.at_ms)).collect(),
            tcp,
            syscall,
            queue: EventQueue::default(),
            job_times: JobTimes::new(net.smt_factor),
            now: 0,
            rng: ChaCha8Rng::seed_from_u64(input.seed),
            inflight: 0,
            window: u64::from(net.streams) * net.window_bytes,
            app_bytes: 0,
            sock_bytes: 0,
            app_rate_gbps: None,
            app_mean_ns: 0.0,
            app_next: Nanos::MAX,
            app_pending: false,
            nic: VecDeque::new(),
            nic_busy: false,
            nic_frame: None,
            unacked_segs: 0,
            unacked_bytes: 0,
            delack_gen: 0,
            measure_from: ms(net.warmup_ms),
            acked_bytes: 0,
            packets: 0,
            events: 0,
            sample_acked: 0,
            sample_busy: vec![0; ncomp],
            sample_cpu_busy: vec![0; ncpu],
            sample_from: 0,
            governor: net.governor.governor(),
            clients: vec![Client::default(); clients],
            unsent: 0,
            waiting_writes: VecDeque::new(),
            chip_mhz,
        };
        sim.queue.push(sim.measure_from, Ev::Measure, Lane::Timer);
        for i in 0..sim.load_ns.len() {
            sim.queue.push(sim.load_ns[i], Ev::App, Lane::Timer);
        }
        sim.start_clients();
        for c in 0..sim.cpus.len() {
            sim.kick(c);
        }
        sim
    }

    pub(super) fn push(&mut self, at: Nanos, ev: Ev) {
        debug_assert!(at >= self.now, "an event in the past");
        let lane = match ev {
            Ev::DelAck(_) => Lane::DelAck,
            Ev::AckIn(_) => Lane::AckIn,
            _ => Lane::Soon,
        };
        self.queue.push(at, ev, lane);
    }

    /// Schedules `ev` `d` ns from now. An event too far ahead for virtual
    /// time (a cost of 10^300 cycles, say) is put at its end, never reached:
    /// time never wraps.
    pub(super) fn push_after(&mut self, d: Nanos, ev: Ev) {
        self.push(self.now.saturating_add(d), ev);
    }

    /// Runs until `until` (virtual ns) or the end of the run.
    pub fn run_until(&mut self, until: Nanos) {
        while let Some((t, ev)) = self.queue.pop_until(until) {
            assert!(t >= self.now, "virtual time went backwards");
            self.now = t;
            self.events += 1;
            self.handle(ev);
        }
        self.now = self.now.max(until);
    }

    pub fn now(&self) -> Nanos {
        self.now
    }

    pub fn end_ns(&self) -> Nanos {
        ms(self.net.duration_ms)
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::JobDone(cpu) => self.job_done(cpu),
            Ev::Awake(cpu) => {
                self.cpus[cpu].state = CpuState::Idle;
                self.dispatch(cpu);
            }
            Ev::NicDone => {
                let bytes = self.nic.pop_front().expect("a frame was on the wire");
                // The segment reaches the receiver now: an event queued now,
                // after every other event at this time. With none (the
                // usual case) it would be the very next one popped, so it
                // is handled here, counted as an event (its sequence number
                // would come before the NIC's next; every later push keeps
                // its order).
                let direct = !self.queue.has_at(self.now);
                if !direct {
                    self.push(self.now, Ev::Remote(bytes));
                }
                self.nic_busy = false;
                self.nic_next();
                if direct {
                    self.events += 1;
                    self.arrive(bytes);
                }
            }
            Ev::Remote(bytes) => self.arrive(bytes),
            Ev::Beside(cpu) => self.kick(cpu),
            Ev::WorkerAwake(cpu) => self.worker_awake(cpu),
            Ev::Client(i) => self.client_writes(i),
            Ev::Park(cpu, spell) => {
                if self.cpus[cpu].state == CpuState::Idle && self.cpus[cpu].spell == spell {
                    self.stop_polling(cpu);
                    self.sleep(cpu);
                }
            }
            Ev::AckIn(bytes) => {
                let d = self.down_end();
                self.enqueue(d, Msg::Ack(bytes));
            }
            Ev::DelAck(generation) => {
                if generation == self.delack_gen && self.unacked_segs > 0 {
                    self.send_ack();
                }
            }
            Ev::App => {
                self.app_pending = false;
                self.refill_app();
                let now = self.now;
                let rate = self.load_ns.iter().rposition(|&at| at <= now).map(|i| self.load[i].gbps);
                if rate != self.app_rate_gbps {
                    self.app_rate_gbps = rate;
                    self.app_mean_ns = rate.map_or(0.0, |g| f64::from(self.net.mss) * 8.0 / g);
                    self.app_next = self.now.saturating_add(self.write_gap());
                }
                let first = self.first_comp();
                let cpu = self.comps[first].cpu;
                self.kick(cpu);
            }
            Ev::Measure => {
                for c in &mut self.comps {
                    c.busy_ns = 0;
                    c.msgs = 0;
                }
                for cpu in &mut self.cpus {
                    cpu.busy_ns = 0;
                    cpu.polled_ns = 0;
                    cpu.wakeups = 0;
                    cpu.idle.reset_measure();
                }
                self.acked_bytes = 0;
            }
        }
    }

    /// The component the application hands data to.
    pub(super) fn first_comp(&self) -> usize {
        self.syscall.unwrap_or(self.tcp)
    }

    /// The component that talks to the NIC (the last in pipeline order).
    fn down_end(&self) -> usize {
        *self.order.last().expect("a stack has components")
    }

    /// The next component towards the wire, or `None` for the NIC.
    fn down(&self, c: usize) -> Option<usize> {
        self.next_down[c]
    }

    /// The next component towards TCP on the ACK path.
    fn up(&self, c: usize) -> Option<usize> {
        if c == self.tcp {
            return None;
        }
        Some(self.next_up[c].expect("placed below TCP"))
    }

    /// Whether component `c` has a job to run now: a message, or (TCP, the
    /// syscall server) its own work; may arm the application's next write.
    #[inline(always)]
    pub(super) fn has_work(&mut self, c: usize) -> bool {
        if !self.comps[c].queue.is_empty() {
            return true;
        }
        if c != self.tcp && Some(c) != self.syscall {
            return false;
        }
        self.has_own_work(c)
    }

    /// TCP's or the syscall server's work besides its queue.
    #[inline]
    fn has_own_work(&mut self, c: usize) -> bool {
        let mss = u64::from(self.net.mss);
        if self.writes_on() {
            return c == self.tcp && self.tcp_has_write_work();
        }
        if Some(c) == self.syscall && self.app_modelled() {
            return self.syscall_has_call();
        }
        if Some(c) == self.syscall {
            return self.sock_bytes < self.window && self.app_has();
        }
        if c == self.tcp {
            let room = self.inflight + mss <= self.window;
            let data = match self.syscall {
                Some(_) => self.sock_bytes >= mss,
                None => self.app_has(),
            };
            return room && data;
        }
        false
    }

    pub(super) fn enqueue(&mut self, c: usize, m: Msg) {
        let comp = &mut self.comps[c];
        comp.queue.push_back(m);
        comp.peak_queue = comp.peak_queue.max(comp.queue.len());
        let cpu = comp.cpu;
        self.kick(cpu);
    }

    /// Wakes `cpu` if it sleeps and has work; dispatches it if idle.
    #[inline(always)]
    pub(super) fn kick(&mut self, cpu: usize) {
        match self.cpus[cpu].state {
            CpuState::Busy => {
                if self.cpus[cpu].worker != Worker::Running {
                    self.wake_worker_for_work(cpu);
                }
            }
            CpuState::Waking => {}
            CpuState::Idle => self.dispatch(cpu),
            CpuState::Asleep => self.wake_if_work(cpu),
        }
    }

    /// Sleeping `cpu` starts waking if it has work.
    fn wake_if_work(&mut self, cpu: usize) {
        if self.foreign_work(cpu) || self.components_have_work(cpu) {
            let sibling_awake = self.cpus[cpu]
                .sibling
                .is_some_and(|s| matches!(self.cpus[s].state, CpuState::Busy | CpuState::Idle));
            let fixed = self.governor.is_none().then_some(self.costs.wakeup_ns);
            let (now, from) = (self.now, (self.measure_from, self.sample_from));
            let lat = self.cpus[cpu].idle.leave(now, from, sibling_awake, fixed);
            self.cpus[cpu].state = CpuState::Waking;
            self.cpus[cpu].wakeups += 1;
            self.push_after(lat, Ev::Awake(cpu));
        }
    }

    /// `cpu` has nothing to do: it polls for `spin_ns`, then sleeps.
    fn idle(&mut self, cpu: usize) {
        if self.net.spin_ns == 0 {
            return self.sleep(cpu);
        }
        if self.cpus[cpu].spinning_since.is_none() {
            let c = &mut self.cpus[cpu];
            c.spinning_since = Some(self.now);
            c.spell += 1;
            let spell = c.spell;
            self.push_after(self.net.spin_ns, Ev::Park(cpu, spell));
        }
    }

    /// The CPU sleeps in the state the governor picks.
    fn sleep(&mut self, cpu: usize) {
        let c = &mut self.cpus[cpu];
        c.state = CpuState::Asleep;
        if c.worker == Worker::Parked {
            c.worker = Worker::Running;
        }
        c.in_turn = 0;
        c.last_comp = None;
        c.idle.enter(self.now, self.governor.as_deref());
    }

    /// Ends a polling spell of `cpu`, counting its measured part.
    pub(super) fn stop_polling(&mut self, cpu: usize) {
        if let Some(t) = self.cpus[cpu].spinning_since.take()
            && self.now > self.measure_from
        {
            self.cpus[cpu].polled_ns += self.now - t.max(self.measure_from);
        }
    }

    /// Starts the next job on an idle CPU, or puts it to sleep.
    fn dispatch(&mut self, cpu: usize) {
        debug_assert_eq!(self.cpus[cpu].state, CpuState::Idle);
        if self.foreign_turn(cpu) {
            self.run_foreign(cpu);
            return;
        }
        let n = self.cpus[cpu].comps.len();
        // A running worker can run its components (`wake_worker_for_work`).
        if n == 0 || (self.cpus[cpu].worker != Worker::Running && !self.wake_worker_for_work(cpu)) {
            self.idle(cpu);
            return;
        }
        // Stay with the current component for up to `batch` jobs.
        let turn = self.cpus[cpu].turn;
        debug_assert!(turn < n, "a CPU's turn is one of its components");
        let spent = self.cpus[cpu].in_turn >= self.net.batch.max(1);
        let mut pick = None;
        for k in 0..n {
            // (turn + k) % n, without a division.
            let i = if turn + k >= n { turn + k - n } else { turn + k };
            if k == 0 && spent {
                continue;
            }
            let c = self.cpus[cpu].comps[i];
            if self.has_work(c) {
                pick = Some((i, c));
                break;
            }
        }
        if pick.is_none() && spent {
            // Only the component whose turn ended has work: it goes on.
            let i = turn;
            let c = self.cpus[cpu].comps[i];
            if self.has_work(c) {
                pick = Some((i, c));
            }
        }
        let Some((i, c)) = pick else {
            self.idle(cpu);
            return;
        };
        self.stop_polling(cpu);
        self.foreign[cpu].last = false;
        let (msg, mut cycles, memory_ns) = self.take_job(c);
        let (now, turn_cycles) = (self.now, self.net.turn_cycles);
        let sibling = self.cpus[cpu].sibling;
        let smt = sibling.is_some_and(|s| self.cpus[s].state == CpuState::Busy);
        let p = &mut self.cpus[cpu];
        if i != turn || spent {
            p.turn = i;
            p.in_turn = 0;
        }
        p.in_turn += 1;
        if p.last_comp != Some(c) {
            cycles += turn_cycles;
            p.last_comp = Some(c);
        }
        p.state = CpuState::Busy;
        p.job = Some(Job::Msg { comp: c, msg });
        p.busy_since = now;
        let ns = self.job_times.get(cycles, memory_ns, p.step, smt);
        self.push_after(ns, Ev::JobDone(cpu));
    }

    /// Takes component `c`'s next job: a message from its queue, or its own
    /// work (TCP sends a segment or takes a waiting write; the syscall
    /// server takes the application's next segment, or with a modelled
    /// application its chunk as one call, see [`super::Beside`]). Returns the message,
    /// the job's cycles and its memory time (ns).
    fn take_job(&mut self, c: usize) -> (Option<Msg>, f64, f64) {
        let mut msg = self.comps[c].queue.pop_front();
        if msg.is_none() && c == self.tcp && self.writes_on() {
            msg = self.tcp_next_write();
            if msg.is_none() {
                self.inflight += u64::from(self.net.mss);
                assert!(self.inflight <= self.window, "bytes in flight exceed the window");
                self.packets += 1;
                // The copy was the write's: a segment costs its packet.
                let p = self.costs.tcp.cycles_per_packet;
                return (None, p, 0.0);
            }
        }
        if msg.is_none() && Some(c) == self.syscall && self.app_modelled() {
            return (None, self.syscall_takes_call(), 0.0);
        }
        let mss = self.net.mss;
        let cost = self.costs.component(self.comps[c].kind);
        let cycles = match msg {
            Some(Msg::Data(b)) => cost.cycles(u64::from(b)) + self.costs.channel_cycles_per_msg,
            Some(Msg::Ack(_)) => cost.cycles_per_packet + self.costs.channel_cycles_per_msg,
            Some(m @ (Msg::Write(_) | Msg::Written(_))) => {
                let (cycles, memory_ns) = self.write_job_cost(c, m);
                return (msg, cycles, memory_ns);
            }
            // TCP sends a segment of the application's data; the syscall
            // server takes a write of one segment.
            None => cost.cycles(u64::from(mss)),
        };
        let mut memory_ns = 0.0;
        if msg.is_none() {
            if c == self.tcp {
                self.inflight += u64::from(mss);
                assert!(self.inflight <= self.window, "bytes in flight exceed the window");
                match self.syscall {
                    Some(_) => self.sock_bytes -= u64::from(mss),
                    None if self.app_rate_gbps.is_some() => self.app_bytes -= u64::from(mss),
                    None => self.app_took_segment(),
                }
                self.packets += 1;
                memory_ns = self.copy_ns(f64::from(mss));
            } else {
                self.sock_bytes += u64::from(mss);
                if self.app_rate_gbps.is_some() {
                    self.app_bytes -= u64::from(mss);
                }
                self.app_took_segment();
            }
        }
        (msg, cycles, memory_ns)
    }

    fn job_done(&mut self, cpu: usize) {
        let (c, msg) = match self.cpus[cpu].job.take() {
            Some(Job::Msg { comp, msg }) => (comp, msg),
            Some(Job::Foreign(f)) => {
                if self.now > self.measure_from {
                    let since = self.cpus[cpu].busy_since.max(self.measure_from);
                    self.cpus[cpu].busy_ns += self.now - since;
                }
                self.sample_cpu_busy[cpu] += self.now - self.cpus[cpu].busy_since;
                self.cpus[cpu].state = CpuState::Idle;
                self.foreign_done(f);
                if self.cpus[cpu].state == CpuState::Idle {
                    self.dispatch(cpu);
                }
                return;
            }
            None => unreachable!("a job ends only on a busy CPU"),
        };
        let (now, from) = (self.now, self.measure_from);
        let p = &mut self.cpus[cpu];
        let ran = now - p.busy_since;
        p.state = CpuState::Idle;
        if now > from {
            let d = now - p.busy_since.max(from);
            p.busy_ns += d;
            let comp = &mut self.comps[c];
            comp.busy_ns += d;
            comp.msgs += 1;
        }
        self.sample_busy[c] += ran;
        self.sample_cpu_busy[cpu] += ran;
        match msg {
            Some(Msg::Data(b)) => match self.down(c) {
                Some(d) => self.enqueue(d, Msg::Data(b)),
                None => {
                    self.nic.push_back(b);
                    self.nic_next();
                }
            },
            Some(m @ (Msg::Write(_) | Msg::Written(_))) => self.write_job_done(c, m),
            Some(Msg::Ack(b)) => match self.up(c) {
                Some(u) => self.enqueue(u, Msg::Ack(b)),
                None => {
                    self.inflight -= u64::from(b);
                    if self.now >= self.measure_from {
                        self.acked_bytes += u64::from(b);
                    }
                    self.sample_acked += u64::from(b);
                    if let Some(s) = self.syscall {
                        let sc = self.comps[s].cpu;
                        self.kick(sc);
                    }
                }
            },
            None if c == self.tcp => {
                let d = self.down(c).expect("validated: components below TCP");
                self.enqueue(d, Msg::Data(self.net.mss));
            }
            None => {
                let t = self.comps[self.tcp].cpu;
                self.kick(t);
            }
        }
        // A sibling's jobs speed up again; the model charges the slowdown at
        // a job's start only.
        if self.cpus[cpu].state == CpuState::Idle {
            self.dispatch(cpu);
        }
    }
}
