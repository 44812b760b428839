//! NewtOS's split network stack in the simulator (Hruby et al., "When
//! Slower is Faster", and issue 11): an event-driven model of a TCP sender
//! whose components (syscall server, TCP, IP, packet filter, driver) run on
//! CPUs of chosen speeds, joined by channels, feeding a 10 Gbps NIC.
//!
//! # The model
//!
//! * **Components** cost cycles per packet and per payload byte
//!   ([`StackCosts`], the same numbers a machine profile's `[stack]` holds);
//!   each message a component takes from a channel costs
//!   `channel_cycles_per_msg` more. A CPU that hosts several components runs
//!   them round-robin, each for up to [`NetParams::batch`] messages a turn.
//!   A turn that starts after the CPU slept, or on a different component
//!   than the CPU ran last, costs [`NetParams::turn_cycles`] more: a core
//!   that sleeps less, or carries one component, amortises it over more
//!   messages.
//! * **Data path:** (syscall server →) TCP → IP (→ filter) → driver → the
//!   NIC's FIFO, which serialises frames onto a [`NetParams::link_gbps`]
//!   link. TCP sends a segment whenever its window (`streams ×
//!   window_bytes`) has room and the application has data (unlimited, or an
//!   offered load). **ACK path:** the receiver acknowledges every
//!   `ack_every` segments after `remote_ns` (plus seeded jitter); the ACK
//!   goes NIC → driver → (filter →) IP → TCP, which opens the window.
//! * **Sleep and wake-up:** a CPU with nothing to do sleeps (MWAIT). A
//!   message for a sleeping CPU starts being served only `wakeup_ns` later;
//!   a hyperthread whose sibling is awake wakes in `smt_wakeup_fraction` of
//!   that (the core never slept). This is the paper's explanation of
//!   "slower is faster": a busier core sleeps less, so fewer wake-ups add to
//!   the round trip of window-limited streams.
//! * **Machine:** each CPU has a speed step of
//!   [`SpeedTable::newtos`](dyncore_core::power::SpeedTable::newtos); a job's
//!   time is its cycles over the step's effective MHz. Two CPUs with the
//!   same `core` are hyperthreads of one core: a job that starts while the
//!   sibling is busy runs `smt_factor` times slower.
//! * **Power** per core from
//!   [`PowerModel::newtos`](dyncore_core::power::PowerModel): busy at its
//!   step while either thread runs, asleep otherwise; cores that host
//!   nothing are power-gated (0 W).
//!
//! Determinism: virtual nanoseconds, one event queue ordered by (time,
//! sequence number), one ChaCha generator seeded from the run's seed (the
//! receiver's ACK jitter). The same inputs give the same [`Outcome`].
//!
//! Invariants (asserted): virtual time never goes backwards; bytes in flight
//! never exceed the window; a CPU runs one job at a time; busy time never
//! exceeds elapsed time.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use dyncore_core::Nanos;
use dyncore_core::placement::{ComponentKind, ComponentSample, Layout, LoadSample};
use dyncore_core::power::{PowerModel, SpeedStep, SpeedTable};
use dyncore_core::profile::StackCosts;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

pub mod calibrate;
pub mod claims;
pub mod policy;
pub mod predict;
pub mod run;
pub mod scale;
pub mod scenario;

/// Traffic and machine parameters of the model; every field has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetParams {
    /// Link speed, Gbit/s.
    pub link_gbps: f64,
    /// Payload bytes per segment.
    pub mss: u32,
    /// Bytes a frame adds on the wire (headers, preamble, gap).
    pub frame_overhead: u32,
    /// Concurrent TCP streams.
    pub streams: u32,
    /// Window of each stream, bytes (lwIP: no window scaling, 64 KiB).
    pub window_bytes: u64,
    /// From the last bit of a segment on the wire to its ACK reaching the
    /// NIC: propagation and the receiver's turnaround, ns.
    pub remote_ns: Nanos,
    /// Mean of the exponential jitter added to `remote_ns`, ns.
    pub remote_jitter_ns: Nanos,
    /// The receiver acknowledges every this many segments.
    pub ack_every: u32,
    /// ... or this long after an unacknowledged segment, ns.
    pub delack_ns: Nanos,
    /// Messages a component handles in one turn on a shared CPU.
    pub batch: u32,
    /// Cycles a component's turn costs before its first message: after the
    /// CPU slept (caches and TLB refilled, channels checked) or when the CPU
    /// switches to it from another component (a context switch).
    pub turn_cycles: f64,
    /// Slowdown of a job that starts while its sibling hyperthread is busy.
    pub smt_factor: f64,
    /// A hyperthread whose sibling is awake wakes in this fraction of
    /// `wakeup_ns`.
    pub smt_wakeup_fraction: f64,
    /// Simulated time, ms.
    pub duration_ms: f64,
    /// Time before measuring starts, ms.
    pub warmup_ms: f64,
}

impl Default for NetParams {
    fn default() -> Self {
        NetParams {
            link_gbps: 10.0,
            mss: 1448,
            frame_overhead: 90,
            streams: 8,
            window_bytes: 65535,
            remote_ns: 30_000,
            remote_jitter_ns: 5_000,
            ack_every: 2,
            delack_ns: 200_000,
            batch: 1,
            turn_cycles: 1000.0,
            smt_factor: 1.3,
            smt_wakeup_fraction: 0.25,
            duration_ms: 20.0,
            warmup_ms: 4.0,
        }
    }
}

/// One CPU of a layout: its speed and the components it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuSpec {
    /// Effective MHz: a step of the machine's speed table.
    pub mhz: u32,
    pub components: Vec<ComponentKind>,
    /// CPUs with the same core are hyperthreads of one core (default: a
    /// core of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<u32>,
}

/// An application that offers `gbps` (payload) from `at_ms` on; unlimited
/// (`None`) before the first entry.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadStep {
    pub at_ms: f64,
    pub gbps: f64,
}

/// What one component did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ComponentOutcome {
    /// Fraction of the measured time it ran on its CPU.
    pub busy: f64,
    /// Messages it handled.
    pub msgs: u64,
}

/// What one CPU did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuOutcome {
    pub mhz: u32,
    pub components: Vec<ComponentKind>,
    /// Fraction of the measured time it ran jobs.
    pub busy: f64,
    /// Times it woke from sleep.
    pub wakeups: u64,
}

/// The result of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Payload acknowledged per second over the measured time, Mbit/s.
    pub mbps: f64,
    /// Modelled power of the cores that host components, W.
    pub power_w: f64,
    /// Sum of the CPUs' MHz over 3 × 1600 MHz (the paper's Figure 2 bars).
    pub resources: f64,
    /// Each core's busy fraction times its MHz, summed, over 3 × 1600 MHz
    /// (the paper's Figure 5 bars: "CPU utilization ... normalized to 3
    /// cores running unthrottled at 1600 MHz").
    pub normalised_utilisation: f64,
    pub cpus: Vec<CpuOutcome>,
    pub components: BTreeMap<ComponentKind, ComponentOutcome>,
    /// Segments sent in the whole run (warm-up included).
    pub packets: u64,
    /// Events the engine handled.
    pub events: u64,
}

/// Resources of the paper's Figure 2: 100% is 3 cores at 1600 MHz.
pub const FULL_RESOURCES_MHZ: f64 = 3.0 * 1600.0;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Msg {
    Data(u32),
    Ack(u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
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
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum CpuState {
    Asleep,
    Waking,
    Idle,
    Busy,
}

#[derive(Debug, Clone, Copy)]
enum Job {
    /// A component handles a message (or TCP sends / the syscall server
    /// takes a write).
    Msg { comp: usize, msg: Option<Msg> },
}

struct Cpu {
    step: SpeedStep,
    comps: Vec<usize>,
    core: u32,
    sibling: Option<usize>,
    state: CpuState,
    job: Option<Job>,
    /// Index into `comps` of the component whose turn it is.
    turn: usize,
    /// Jobs the current component has run this turn.
    in_turn: u32,
    last_comp: Option<usize>,
    busy_since: Nanos,
    busy_ns: Nanos,
    wakeups: u64,
}

struct Comp {
    kind: ComponentKind,
    cpu: usize,
    queue: VecDeque<Msg>,
    busy_ns: Nanos,
    msgs: u64,
    /// Largest queue length seen since the last sample.
    peak_queue: usize,
}

/// A run's inputs.
#[derive(Debug, Clone)]
pub struct RunInput<'a> {
    pub costs: &'a StackCosts,
    pub net: &'a NetParams,
    pub cpus: &'a [CpuSpec],
    pub load: &'a [LoadStep],
    pub seed: u64,
}

/// The simulation state of one stack. [`policy`] drives a placement policy
/// over it between samples.
pub struct Sim<'a> {
    costs: &'a StackCosts,
    net: &'a NetParams,
    load: &'a [LoadStep],
    table: SpeedTable,
    cpus: Vec<Cpu>,
    comps: Vec<Comp>,
    /// Pipeline order of the components (indices into `comps`).
    order: Vec<usize>,
    tcp: usize,
    syscall: Option<usize>,
    queue: BinaryHeap<Reverse<(Nanos, u64, Ev)>>,
    seq: u64,
    now: Nanos,
    rng: ChaCha8Rng,
    // TCP and the application.
    inflight: u64,
    window: u64,
    /// Bytes the application has handed over and TCP has not sent.
    app_bytes: u64,
    /// Bytes written through the syscall server waiting for TCP.
    sock_bytes: u64,
    app_rate_gbps: Option<f64>,
    app_last: Nanos,
    app_pending: bool,
    // NIC.
    nic: VecDeque<u32>,
    nic_busy: bool,
    // Receiver.
    unacked_segs: u32,
    unacked_bytes: u32,
    delack_gen: u64,
    // Measurement.
    measure_from: Nanos,
    acked_bytes: u64,
    packets: u64,
    events: u64,
    // Sampling (for policies).
    sample_acked: u64,
    sample_busy: Vec<Nanos>,
    sample_cpu_busy: Vec<Nanos>,
}

impl<'a> Sim<'a> {
    /// A stack laid out as `input.cpus` says. The layout must have passed
    /// [`scenario`]'s validation: known speeds, each of TCP, IP and the
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
                comps.push(Comp {
                    kind: k,
                    cpu: i,
                    queue: VecDeque::new(),
                    busy_ns: 0,
                    msgs: 0,
                    peak_queue: 0,
                });
            }
            cpus.push(Cpu {
                step,
                comps: ids,
                core: spec.core.unwrap_or(10_000 + i as u32),
                sibling: None,
                state: CpuState::Asleep,
                job: None,
                turn: 0,
                in_turn: 0,
                last_comp: None,
                busy_since: 0,
                busy_ns: 0,
                wakeups: 0,
            });
        }
        for i in 0..cpus.len() {
            cpus[i].sibling = (0..cpus.len()).find(|&j| j != i && cpus[j].core == cpus[i].core);
        }
        let mut order: Vec<usize> = (0..comps.len()).collect();
        order.sort_by_key(|&c| comps[c].kind);
        let find = |k| comps.iter().position(|c| c.kind == k);
        let tcp = find(ComponentKind::Tcp).expect("validated: TCP is placed");
        let syscall = find(ComponentKind::Syscall);
        let net = input.net;
        let ncomp = comps.len();
        let mut sim = Sim {
            costs: input.costs,
            net,
            load: input.load,
            table,
            cpus,
            comps,
            order,
            tcp,
            syscall,
            queue: BinaryHeap::new(),
            seq: 0,
            now: 0,
            rng: ChaCha8Rng::seed_from_u64(input.seed),
            inflight: 0,
            window: u64::from(net.streams) * net.window_bytes,
            app_bytes: 0,
            sock_bytes: 0,
            app_rate_gbps: None,
            app_last: 0,
            app_pending: false,
            nic: VecDeque::new(),
            nic_busy: false,
            unacked_segs: 0,
            unacked_bytes: 0,
            delack_gen: 0,
            measure_from: ms(net.warmup_ms),
            acked_bytes: 0,
            packets: 0,
            events: 0,
            sample_acked: 0,
            sample_busy: vec![0; ncomp],
            sample_cpu_busy: vec![0; input.cpus.len()],
        };
        sim.push(sim.measure_from, Ev::Measure);
        if let Some(first) = sim.load.first() {
            sim.push(ms(first.at_ms), Ev::App);
        }
        for i in 1..sim.load.len() {
            sim.push(ms(sim.load[i].at_ms), Ev::App);
        }
        for c in 0..sim.cpus.len() {
            sim.kick(c);
        }
        sim
    }

    fn push(&mut self, at: Nanos, ev: Ev) {
        debug_assert!(at >= self.now, "an event in the past");
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq, ev)));
    }

    /// Runs until `until` (virtual ns) or the end of the run.
    pub fn run_until(&mut self, until: Nanos) {
        while let Some(&Reverse((t, _, _))) = self.queue.peek() {
            if t > until {
                break;
            }
            let Reverse((t, _, ev)) = self.queue.pop().expect("peeked");
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
                self.push(self.now, Ev::Remote(bytes));
                self.nic_busy = false;
                self.nic_next();
            }
            Ev::Remote(bytes) => self.remote(bytes),
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
                self.app_rate_gbps = self.load.iter().rev().find(|l| ms(l.at_ms) <= self.now).map(|l| l.gbps);
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
                    cpu.wakeups = 0;
                }
                self.acked_bytes = 0;
            }
        }
    }

    /// The component the application hands data to.
    fn first_comp(&self) -> usize {
        self.syscall.unwrap_or(self.tcp)
    }

    /// The component that talks to the NIC (the last in pipeline order).
    fn down_end(&self) -> usize {
        *self.order.last().expect("a stack has components")
    }

    /// The next component towards the wire, or `None` for the NIC.
    fn down(&self, c: usize) -> Option<usize> {
        let i = self.order.iter().position(|&o| o == c).expect("placed");
        self.order.get(i + 1).copied()
    }

    /// The next component towards TCP on the ACK path.
    fn up(&self, c: usize) -> Option<usize> {
        if c == self.tcp {
            return None;
        }
        let i = self.order.iter().position(|&o| o == c).expect("placed");
        Some(self.order[i - 1])
    }

    /// Credits the application's data up to now under an offered load.
    fn refill_app(&mut self) {
        if let Some(g) = self.app_rate_gbps {
            let dt = self.now - self.app_last;
            let add = (g * dt as f64 / 8.0) as u64;
            // Keep at most one window of backlog: the application blocks.
            self.app_bytes = (self.app_bytes + add).min(self.window);
        }
        self.app_last = self.now;
    }

    /// Whether the application has a segment's worth of data now; if not,
    /// arms the event at which it will.
    fn app_has(&mut self) -> bool {
        let mss = u64::from(self.net.mss);
        if self.app_rate_gbps.is_none() {
            return true;
        }
        self.refill_app();
        if self.app_bytes >= mss {
            return true;
        }
        let g = self.app_rate_gbps.unwrap_or(0.0);
        if g > 0.0 && !self.app_pending {
            let need = (mss - self.app_bytes) as f64 * 8.0 / g;
            self.app_pending = true;
            self.push(self.now + need.ceil() as Nanos + 1, Ev::App);
        }
        false
    }

    fn has_work(&mut self, c: usize) -> bool {
        if !self.comps[c].queue.is_empty() {
            return true;
        }
        let mss = u64::from(self.net.mss);
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

    fn enqueue(&mut self, c: usize, m: Msg) {
        let comp = &mut self.comps[c];
        comp.queue.push_back(m);
        comp.peak_queue = comp.peak_queue.max(comp.queue.len());
        let cpu = comp.cpu;
        self.kick(cpu);
    }

    /// Wakes `cpu` if it sleeps and has work; dispatches it if idle.
    fn kick(&mut self, cpu: usize) {
        match self.cpus[cpu].state {
            CpuState::Busy | CpuState::Waking => {}
            CpuState::Idle => self.dispatch(cpu),
            CpuState::Asleep => {
                let comps = self.cpus[cpu].comps.clone();
                if comps.into_iter().any(|c| self.has_work(c)) {
                    let sibling_awake = self.cpus[cpu]
                        .sibling
                        .is_some_and(|s| matches!(self.cpus[s].state, CpuState::Busy | CpuState::Idle));
                    let frac = if sibling_awake { self.net.smt_wakeup_fraction } else { 1.0 };
                    let lat = (self.costs.wakeup_ns * frac).round() as Nanos;
                    self.cpus[cpu].state = CpuState::Waking;
                    self.cpus[cpu].wakeups += 1;
                    self.push(self.now + lat, Ev::Awake(cpu));
                }
            }
        }
    }

    /// Starts the next job on an idle CPU, or puts it to sleep.
    fn dispatch(&mut self, cpu: usize) {
        debug_assert_eq!(self.cpus[cpu].state, CpuState::Idle);
        let n = self.cpus[cpu].comps.len();
        if n == 0 {
            self.cpus[cpu].state = CpuState::Asleep;
            return;
        }
        // Stay with the current component for up to `batch` jobs.
        let mut pick = None;
        for k in 0..n {
            let i = (self.cpus[cpu].turn + k) % n;
            if k == 0 && self.cpus[cpu].in_turn >= self.net.batch.max(1) {
                continue;
            }
            let c = self.cpus[cpu].comps[i];
            if self.has_work(c) {
                pick = Some((i, c));
                break;
            }
        }
        if pick.is_none() && self.cpus[cpu].in_turn >= self.net.batch.max(1) {
            // Only the component whose turn ended has work: it goes on.
            let i = self.cpus[cpu].turn % n;
            let c = self.cpus[cpu].comps[i];
            if self.has_work(c) {
                pick = Some((i, c));
            }
        }
        let Some((i, c)) = pick else {
            self.cpus[cpu].state = CpuState::Asleep;
            self.cpus[cpu].in_turn = 0;
            self.cpus[cpu].last_comp = None;
            return;
        };
        if i != self.cpus[cpu].turn % n || self.cpus[cpu].in_turn >= self.net.batch.max(1) {
            self.cpus[cpu].turn = i;
            self.cpus[cpu].in_turn = 0;
        }
        self.cpus[cpu].in_turn += 1;
        let msg = self.comps[c].queue.pop_front();
        let mss = self.net.mss;
        let cost = self.costs.component(self.comps[c].kind);
        let mut cycles = match msg {
            Some(Msg::Data(b)) => cost.cycles(u64::from(b)) + self.costs.channel_cycles_per_msg,
            Some(Msg::Ack(_)) => cost.cycles_per_packet + self.costs.channel_cycles_per_msg,
            // TCP sends a segment of the application's data; the syscall
            // server takes a write of one segment.
            None => cost.cycles(u64::from(mss)),
        };
        if msg.is_none() {
            if c == self.tcp {
                self.inflight += u64::from(mss);
                assert!(self.inflight <= self.window, "bytes in flight exceed the window");
                match self.syscall {
                    Some(_) => self.sock_bytes -= u64::from(mss),
                    None if self.app_rate_gbps.is_some() => self.app_bytes -= u64::from(mss),
                    None => {}
                }
                self.packets += 1;
            } else {
                self.sock_bytes += u64::from(mss);
                if self.app_rate_gbps.is_some() {
                    self.app_bytes -= u64::from(mss);
                }
            }
        }
        if self.cpus[cpu].last_comp != Some(c) {
            cycles += self.net.turn_cycles;
            self.cpus[cpu].last_comp = Some(c);
        }
        let mut ns = cycles * 1000.0 / f64::from(self.cpus[cpu].step.mhz);
        if self.cpus[cpu].sibling.is_some_and(|s| self.cpus[s].state == CpuState::Busy) {
            ns *= self.net.smt_factor;
        }
        let ns = (ns.round() as Nanos).max(1);
        let cpu_ref = &mut self.cpus[cpu];
        cpu_ref.state = CpuState::Busy;
        cpu_ref.job = Some(Job::Msg { comp: c, msg });
        cpu_ref.busy_since = self.now;
        self.push(self.now + ns, Ev::JobDone(cpu));
    }

    fn job_done(&mut self, cpu: usize) {
        let Some(Job::Msg { comp: c, msg }) = self.cpus[cpu].job.take() else {
            unreachable!("a job ends only on a busy CPU")
        };
        let ran = self.now - self.cpus[cpu].busy_since;
        if self.now > self.measure_from {
            let since = self.cpus[cpu].busy_since.max(self.measure_from);
            let d = self.now - since;
            self.cpus[cpu].busy_ns += d;
            self.comps[c].busy_ns += d;
            self.comps[c].msgs += 1;
        }
        self.sample_busy[c] += ran;
        self.sample_cpu_busy[cpu] += ran;
        self.cpus[cpu].state = CpuState::Idle;
        match msg {
            Some(Msg::Data(b)) => match self.down(c) {
                Some(d) => self.enqueue(d, Msg::Data(b)),
                None => {
                    self.nic.push_back(b);
                    self.nic_next();
                }
            },
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

    fn nic_next(&mut self) {
        if self.nic_busy {
            return;
        }
        if let Some(&b) = self.nic.front() {
            let bits = f64::from(b + self.net.frame_overhead) * 8.0;
            let ns = (bits / self.net.link_gbps).round() as Nanos;
            self.nic_busy = true;
            self.push(self.now + ns.max(1), Ev::NicDone);
        }
    }

    fn remote(&mut self, bytes: u32) {
        self.unacked_segs += 1;
        self.unacked_bytes += bytes;
        if self.unacked_segs >= self.net.ack_every.max(1) {
            self.send_ack();
        } else {
            self.delack_gen += 1;
            let g = self.delack_gen;
            self.push(self.now + self.net.delack_ns, Ev::DelAck(g));
        }
    }

    fn send_ack(&mut self) {
        let b = self.unacked_bytes;
        self.unacked_segs = 0;
        self.unacked_bytes = 0;
        self.delack_gen += 1;
        let jitter = if self.net.remote_jitter_ns > 0 {
            let u: f64 = self.rng.random::<f64>();
            (-(1.0 - u).ln() * self.net.remote_jitter_ns as f64) as Nanos
        } else {
            0
        };
        self.push(self.now + self.net.remote_ns + jitter, Ev::AckIn(b));
    }

    /// The outcome so far (measured from the end of the warm-up).
    pub fn outcome(&self) -> Outcome {
        let span = self.now.saturating_sub(self.measure_from).max(1) as f64;
        let power = PowerModel::newtos();
        let mut cpus = Vec::new();
        let mut cores: BTreeMap<u32, (SpeedStep, f64)> = BTreeMap::new();
        for cpu in &self.cpus {
            let mut busy = cpu.busy_ns;
            if cpu.state == CpuState::Busy && self.now > self.measure_from {
                busy += self.now - cpu.busy_since.max(self.measure_from);
            }
            let busy = busy as f64 / span;
            assert!(busy <= 1.0 + 1e-9, "a CPU busier than the time that passed");
            cpus.push(CpuOutcome {
                mhz: cpu.step.mhz,
                components: cpu.comps.iter().map(|&c| self.comps[c].kind).collect(),
                busy,
                wakeups: cpu.wakeups,
            });
            if !cpu.comps.is_empty() {
                let e = cores.entry(cpu.core).or_insert((cpu.step, 0.0));
                if cpu.step.mhz > e.0.mhz {
                    e.0 = cpu.step;
                }
                e.1 = (e.1 + busy).min(1.0);
            }
        }
        let power_w = cores.values().map(|(s, b)| power.core_w(*s, *b)).sum();
        let normalised_utilisation =
            cores.values().map(|(s, b)| b * f64::from(s.mhz)).sum::<f64>() / FULL_RESOURCES_MHZ;
        let resources =
            self.cpus.iter().filter(|c| !c.comps.is_empty()).map(|c| f64::from(c.step.mhz)).sum::<f64>()
                / FULL_RESOURCES_MHZ;
        let components = self
            .comps
            .iter()
            .map(|c| (c.kind, ComponentOutcome { busy: c.busy_ns as f64 / span, msgs: c.msgs }))
            .collect();
        Outcome {
            mbps: self.acked_bytes as f64 * 8.0 / span * 1e3,
            power_w,
            resources,
            normalised_utilisation,
            cpus,
            components,
            packets: self.packets,
            events: self.events,
        }
    }
}

impl Sim<'_> {
    /// The load since the previous call, over `period_ns`, as a placement
    /// policy sees it, and each CPU's busy fraction. `channel_slots` is the
    /// capacity a channel's fill is measured against.
    pub fn take_sample(&mut self, period_ns: Nanos, channel_slots: usize) -> (LoadSample, Vec<f64>) {
        let p = period_ns.max(1) as f64;
        let mut s =
            LoadSample { components: BTreeMap::new(), bits_per_s: self.sample_acked as f64 * 8.0 / p * 1e9 };
        for (i, c) in self.comps.iter_mut().enumerate() {
            let busy = (self.sample_busy[i] as f64 / p).min(1.0);
            let fill = (c.peak_queue as f64 / channel_slots.max(1) as f64).min(1.0);
            s.components.insert(c.kind, ComponentSample { busy, fill, behind: false });
            c.peak_queue = c.queue.len();
            self.sample_busy[i] = 0;
        }
        let cpus = self.sample_cpu_busy.iter().map(|&b| (b as f64 / p).min(1.0)).collect();
        self.sample_cpu_busy.iter_mut().for_each(|b| *b = 0);
        self.sample_acked = 0;
        (s, cpus)
    }

    /// Moves components and sets speeds as `layout` says (CPU ids index
    /// this run's CPUs). A job in progress ends where it started; a CPU's
    /// new speed applies from its next job.
    pub fn apply_layout(&mut self, layout: &Layout) {
        for cpu in &mut self.cpus {
            cpu.comps.clear();
        }
        for (i, c) in self.comps.iter_mut().enumerate() {
            if let Some(&cpu) = layout.cpu_of.get(&c.kind) {
                c.cpu = cpu;
            }
            self.cpus[c.cpu].comps.push(i);
        }
        for (&cpu, &step) in &layout.step_of {
            self.cpus[cpu].step = self.table.get(step);
        }
        for cpu in 0..self.cpus.len() {
            let n = self.cpus[cpu].comps.len().max(1);
            self.cpus[cpu].turn %= n;
            self.kick(cpu);
        }
    }

    /// Modelled power of the CPUs now, given each one's busy fraction.
    pub fn power_w(&self, busy: &[f64]) -> f64 {
        let power = PowerModel::newtos();
        self.cpus
            .iter()
            .zip(busy)
            .filter(|(c, _)| !c.comps.is_empty())
            .map(|(c, &b)| power.core_w(c.step, b))
            .sum()
    }

    /// Payload bytes acknowledged since the warm-up ended.
    pub fn acked_bytes(&self) -> u64 {
        self.acked_bytes
    }
}

fn ms(v: f64) -> Nanos {
    (v * 1e6).round() as Nanos
}

/// Runs a fixed layout to the end and returns its outcome.
pub fn simulate(input: &RunInput<'_>) -> Outcome {
    let mut sim = Sim::new(input);
    let end = sim.end_ns();
    sim.run_until(end);
    sim.outcome()
}

#[cfg(test)]
mod tests;
