//! The discrete-event engine: feeds the policy events in virtual time,
//! executes the actions it returns, and measures what happens. It keeps no
//! policy of its own: every decision comes from `dyncore_core`'s policy
//! through the boundary (`dyncore_core::policy`); what is here is machine
//! physics, costs and bookkeeping.
//!
//! ## Events of the simulation
//! * `Tick(cpu)` — every `tick_ns` on every CPU: the policy's `Tick`, and
//!   every [`LOAD_SAMPLE_NS`] a `Load` sample of the CPU's busy time.
//! * `Arrive(program)` — a program starts: its threads are spawned.
//! * `Complete(thread, generation)` — the thread's current task is done at
//!   its current progress rate; stale generations are ignored (the rate
//!   changed since the event was scheduled). A thread with no task left
//!   exits (the policy's `Exit`).
//! * `StallEnd(cpu)` — a CPU finished reconfiguring.
//! * `ReconfigDone(id, took)` — the reconfiguration `id` finished: the
//!   policy's `ReconfigDone`.
//! * `Ipi` — an inter-processor interrupt to a random CPU, while a parallel
//!   program runs (Chameleon §2 measured 40 IPIs/s/CPU, reschedules and TLB
//!   shootdowns, under pmake; sequential programs alone send none); if that
//!   CPU is borrowed into a fused object and has a proxy, its proxy handles
//!   it.
//!
//! ## Actions
//! `Dispatch` and `SetSpeed` set what a CPU runs and at which duty; `Fuse`
//! and `Split` are counted and traced; `Offline`/`Online` stall the CPUs of
//! their object for the mechanism's latency ([`crate::reconfigure`]),
//! serialised per CPU, and are answered by `ReconfigDone` when that ends;
//! `Migrate` and `Object` are counted and sampled.
//!
//! The queue is ordered by (time, sequence number), so equal-time events run
//! in the order they were scheduled. Randomness comes from ChaCha
//! generators seeded from the scenario seed and the run index: IPI targets
//! and gaps from the run's, each program's task lengths from its own
//! (`programs::work_rng`, which the live backend uses too, so both deal a
//! program the same tasks). Nothing reads a wall clock.
//!
//! ## Progress
//! A thread's task has `remaining` baseline-nanoseconds of work and advances
//! at `rate` = its CPU's duty over 50% ([`progress_rate`]), times the
//! program's SMT factor when the sibling hyperthread is busy, and 0 while
//! its CPU is reconfiguring. Whenever anything that could change a rate
//! happens on a CPU, the threads on it and on its sibling are brought up to
//! date and their completion re-scheduled.
//!
//! Invariants (asserted): virtual time never goes backwards; work done never
//! exceeds work given; busy + borrowed time of a CPU never exceeds elapsed
//! time; the policy sets a CPU's speed before it runs a thread there.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use dyncore_core::exec::ExecObject;
use dyncore_core::policy::trace::TraceWriter;
use dyncore_core::policy::{Action, CpuState, Event, Policy, ReconfigId, ThreadSpec};
use dyncore_core::reconfig::Mode;
use dyncore_core::sched::{ClusterScheduler, Config};
use dyncore_core::speed::Duty;
use dyncore_core::{CpuSet, Nanos};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::control::{EventBudgetExceeded, RunProgress, Watch};
use crate::cost::Mechanism;
use crate::machine::{MachineSpec, progress_rate};
use crate::programs::{DealtWork, ProgramPlan, deal_work, plan_programs, work_rng};
use crate::reconfigure::Reconfigurer;
use crate::result::{
    AllocSample, CpuStats, PolicyTrace, ProgramResult, ReconfigStats, RunResult, TraceEvent,
};
use crate::scenario::{PolicyKind, RunSpec, Scenario};
use crate::workload::Program;

/// Period of the `Load` samples fed to the policy, per CPU.
pub const LOAD_SAMPLE_NS: Nanos = 100_000_000;

/// Trace events kept per run; beyond this the trace is truncated (the
/// results are not affected).
pub const TRACE_CAP: usize = 400_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Tick(usize),
    Arrive(usize),
    Complete(usize, u64),
    StallEnd(usize),
    /// (reconfiguration id, what it took).
    ReconfigDone(u64, Nanos),
    Ipi,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    t: Nanos,
    seq: u64,
}

struct ProgState {
    label: String,
    /// Name in traces and timelines: the label, with `#instance` when
    /// several programs share it (set once all programs exist).
    name: String,
    instance: u32,
    prog: &'static Program,
    start_ns: Nanos,
    threads: Vec<usize>,
    /// Pool of remaining tasks (dynamic programs), baseline ns.
    pool: Vec<u64>,
    work_ns: u64,
    live: usize,
    finish_ns: Option<Nanos>,
    fused_ns: u64,
    smt_factor: f64,
    wants_object: bool,
    spec_threads: u32,
    /// Spec of each thread, spawned at arrival.
    template: ThreadSpec,
}

struct ThreadState {
    prog: usize,
    remaining: f64,
    rate: f64,
    last: Nanos,
    generation: u64,
    cpu: Option<usize>,
    done: bool,
}

struct CpuSim {
    state: CpuState,
    since: Nanos,
    stall_until: Nanos,
    /// The duty the policy last set (`None`: never set).
    duty: Option<Duty>,
    stats: CpuStats,
    /// Busy time and time at the last `Load` sample.
    sampled_busy_ns: Nanos,
    sampled_at: Nanos,
}

/// A `Fuse` or `Split` whose `Offline`/`Online` comes next.
struct PendingReconfig {
    object: ExecObject,
    fuse: bool,
}

struct Sim {
    /// Which run of the scenario this is, and the scenario's seed.
    index: usize,
    seed: u64,
    now: Nanos,
    seq: u64,
    queue: BinaryHeap<Reverse<(Key, Ev)>>,
    rng: ChaCha8Rng,
    machine: MachineSpec,
    policy: ClusterScheduler,
    reconfigurer: Reconfigurer,
    pending: Option<PendingReconfig>,
    progs: Vec<ProgState>,
    threads: Vec<ThreadState>,
    cpus: Vec<CpuSim>,
    tick_ns: Nanos,
    ipi_mean_gap_ns: f64,
    /// Parallel programs started and not finished: IPIs flow while any runs.
    parallel_live: usize,
    /// An `Ipi` event is queued.
    ipi_queued: bool,
    ipis: u64,
    live_programs: usize,
    pending_arrivals: usize,
    events: u64,
    reconfig: ReconfigStats,
    proxy_ipis: u64,
    migrations: u64,
    defrag_migrations: u64,
    fuse_start: Vec<Option<(Nanos, CpuSet)>>,
    allocation: Vec<AllocSample>,
    trace: Vec<TraceEvent>,
    actions: Vec<Action>,
    /// Scratch list of CPUs whose threads `execute` must refresh.
    touched: Vec<usize>,
    /// The policy's traffic, when the scenario asks for it.
    record: Option<TraceWriter<Vec<u8>, Vec<u8>>>,
}

/// Runs run `index` of a validated scenario, reporting progress to `watch`.
/// A run that reaches its event budget (`max_events`) stops with an error
/// instead of a result.
pub fn run(
    scenario: &Scenario,
    index: usize,
    watch: &mut Watch<'_>,
) -> Result<RunResult, EventBudgetExceeded> {
    let spec = &scenario.runs[index];
    let params = scenario.sim.with(&spec.sim);
    let mut sim = Sim::new(scenario, index);

    let max_time = params.max_time_ns;
    let progress = |sim: &Sim, done: bool| RunProgress {
        run: index,
        runs: scenario.runs.len(),
        now_ns: sim.now,
        max_time_ns: max_time,
        events: sim.events,
        max_events: params.max_events,
        done,
    };
    while let Some(Reverse((key, ev))) = sim.queue.pop() {
        assert!(key.t >= sim.now, "virtual time went backwards");
        if key.t > max_time {
            break;
        }
        if sim.events == params.max_events {
            return Err(EventBudgetExceeded {
                run: index,
                label: spec.label.clone(),
                max_events: params.max_events,
                now_ns: sim.now,
                max_time_ns: max_time,
                run_overrides: spec.sim.max_events.is_some(),
            });
        }
        sim.now = key.t;
        sim.events += 1;
        sim.handle(ev);
        if watch.every_events > 0 && sim.events.is_multiple_of(watch.every_events) {
            (watch.report)(&progress(&sim, false));
        }
        if sim.live_programs == 0 && sim.pending_arrivals == 0 {
            break;
        }
    }
    (watch.report)(&progress(&sim, true));
    Ok(sim.finish(spec, scenario))
}

fn machine_of(spec: &RunSpec) -> MachineSpec {
    MachineSpec::build(spec).unwrap_or_else(|(f, m)| panic!("unvalidated scenario: {f}: {m}"))
}

/// The policy that run `index` of a validated scenario runs: Chameleon's
/// cluster scheduler, or its Linux-like mode, configured for the run's
/// machine. A replay of the run's event trace starts from a fresh one.
pub fn policy_for(scenario: &Scenario, index: usize) -> ClusterScheduler {
    let spec = &scenario.runs[index];
    let params = scenario.sim.with(&spec.sim);
    let machine = machine_of(spec);
    ClusterScheduler::new(
        machine.topology,
        Config {
            min_granularity_ns: params.min_granularity_ns,
            chameleon: spec.policy == PolicyKind::Chameleon,
            notify_on_exit: params.notify_on_exit,
            max_fuse: machine.max_fuse,
            speed: machine.speed,
            reconfig_mode: Mode::Bolt,
        },
    )
}

/// Whether run `spec` can reconfigure at all: Chameleon on a machine that fuses.
fn reconfigures(spec: &RunSpec, machine: &MachineSpec) -> bool {
    spec.policy == PolicyKind::Chameleon && machine.max_fuse > 1
}

impl Sim {
    /// The simulation of run `index`, with its programs' arrivals and the
    /// first ticks queued.
    fn new(scenario: &Scenario, index: usize) -> Sim {
        let spec = &scenario.runs[index];
        let params = scenario.sim.with(&spec.sim);
        let machine = machine_of(spec);
        let ncpus = machine.topology.ncpus();
        let policy = policy_for(scenario, index);
        let profile = (params.reconfig == Mechanism::Runtime).then(|| scenario.profile_for(index));
        // One generator per run: seed mixed with the run index (splitmix64 step).
        let mut z = scenario.seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        let rng = ChaCha8Rng::seed_from_u64(z ^ (z >> 31));

        let mut sim = Sim {
            index,
            seed: scenario.seed,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            rng,
            reconfigurer: Reconfigurer::new(params.reconfig, ncpus, profile.map(|(_, p)| p)),
            pending: None,
            progs: Vec::new(),
            threads: Vec::new(),
            cpus: (0..ncpus)
                .map(|c| CpuSim {
                    state: CpuState::Idle,
                    since: 0,
                    stall_until: 0,
                    duty: None,
                    stats: CpuStats { cpu: c, ..Default::default() },
                    sampled_busy_ns: 0,
                    sampled_at: 0,
                })
                .collect(),
            tick_ns: params.tick_ns,
            ipi_mean_gap_ns: if params.ipi_rate_per_cpu_s > 0.0 {
                1e9 / (params.ipi_rate_per_cpu_s * ncpus as f64)
            } else {
                0.0
            },
            live_programs: 0,
            pending_arrivals: 0,
            events: 0,
            reconfig: ReconfigStats::default(),
            parallel_live: 0,
            ipi_queued: false,
            ipis: 0,
            proxy_ipis: 0,
            migrations: 0,
            defrag_migrations: 0,
            fuse_start: Vec::new(),
            allocation: Vec::new(),
            trace: Vec::new(),
            actions: Vec::new(),
            touched: Vec::new(),
            record: scenario
                .record_policy_trace
                .then(|| TraceWriter::new(Vec::with_capacity(1 << 20), Vec::with_capacity(1 << 20))),
            machine,
            policy,
        };
        for plan in plan_programs(spec, &sim.machine) {
            sim.add_program(plan);
        }
        for cpu in 0..ncpus {
            sim.push(0, Ev::Tick(cpu));
        }
        sim
    }

    /// Queues the arrival of one program instance.
    fn add_program(&mut self, plan: ProgramPlan) {
        let idx = self.progs.len();
        let start_ns = plan.start_ns;
        self.progs.push(ProgState {
            name: plan.name,
            label: plan.label,
            instance: plan.instance,
            prog: plan.program,
            start_ns,
            threads: Vec::new(),
            pool: Vec::new(),
            work_ns: plan.work_ns,
            live: 0,
            finish_ns: None,
            fused_ns: 0,
            smt_factor: plan.smt_factor,
            wants_object: plan.wants_object,
            spec_threads: plan.threads,
            template: plan.template,
        });
        self.pending_arrivals += 1;
        self.live_programs += 1;
        self.push(start_ns, Ev::Arrive(idx));
    }

    fn push(&mut self, t: Nanos, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse((Key { t, seq: self.seq }, ev)));
    }

    /// Queues the next IPI of the Poisson process, unless one is queued or
    /// IPIs are off.
    fn queue_ipi(&mut self) {
        if self.ipi_queued || self.ipi_mean_gap_ns <= 0.0 {
            return;
        }
        let gap = self.exp_gap();
        self.push(self.now + gap, Ev::Ipi);
        self.ipi_queued = true;
    }

    fn exp_gap(&mut self) -> Nanos {
        let u: f64 = self.rng.random::<f64>();
        ((-(1.0 - u).ln()) * self.ipi_mean_gap_ns).max(1.0) as Nanos
    }

    /// Hands one event to the policy and executes what it decides.
    fn feed(&mut self, event: &Event) {
        let mut out = std::mem::take(&mut self.actions);
        self.policy.handle(self.now, event, &mut out);
        if let Some(r) = &mut self.record {
            r.record(self.now, event, &out);
        }
        self.execute(&mut out);
        self.actions = out;
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Tick(cpu) => {
                self.feed(&Event::Tick { cpu });
                self.sample_load(cpu);
                if self.live_programs > 0 || self.pending_arrivals > 0 {
                    // Ticks stay on a grid of tick_ns.
                    self.push(self.now + self.tick_ns, Ev::Tick(cpu));
                }
            }
            Ev::Arrive(p) => self.arrive(p),
            Ev::Complete(t, generation) => {
                if self.threads[t].generation == generation && !self.threads[t].done {
                    self.task_done(t);
                }
            }
            Ev::StallEnd(cpu) => self.refresh_cpu(cpu),
            Ev::ReconfigDone(id, took_ns) => self.feed(&Event::ReconfigDone { id: ReconfigId(id), took_ns }),
            Ev::Ipi => {
                self.ipi_queued = false;
                if self.parallel_live == 0 {
                    return; // the parallel programs are done: no more IPIs
                }
                self.ipis += 1;
                let cpu = self.rng.random_range(0..self.cpus.len());
                if self.reconfigurer.is_proxied(cpu) {
                    // Delivered to the proxy, which runs the handler with the
                    // borrowed CPU's per-CPU state.
                    self.proxy_ipis += 1;
                }
                self.queue_ipi();
            }
        }
    }

    /// Every [`LOAD_SAMPLE_NS`], tells the policy how busy `cpu` was.
    fn sample_load(&mut self, cpu: usize) {
        let c = &self.cpus[cpu];
        let window_ns = self.now - c.sampled_at;
        if window_ns < LOAD_SAMPLE_NS {
            return;
        }
        let running = matches!(c.state, CpuState::Running { .. });
        let busy = c.stats.busy_ns + if running { self.now - c.since } else { 0 };
        let busy_ns = busy - c.sampled_busy_ns;
        let c = &mut self.cpus[cpu];
        c.sampled_busy_ns = busy;
        c.sampled_at = self.now;
        self.feed(&Event::Load { cpu, busy_ns, window_ns });
    }

    fn arrive(&mut self, p: usize) {
        self.pending_arrivals -= 1;
        if !self.progs[p].prog.is_sequential() {
            self.parallel_live += 1;
            self.queue_ipi();
        }
        let (shape, nthreads, work) =
            (self.progs[p].prog.shape, self.progs[p].spec_threads, self.progs[p].work_ns);
        let mut rng = work_rng(self.seed, p);
        let DealtWork { initial, pool } = deal_work(shape, work, nthreads, &mut rng);
        self.progs[p].pool = pool;
        self.trace_push(|s| TraceEvent::Instant { name: format!("start {}", s.progs[p].name), t_ns: s.now });
        for work in initial {
            let tid = self.threads.len();
            self.threads.push(ThreadState {
                prog: p,
                remaining: work as f64,
                rate: 0.0,
                last: self.now,
                generation: 0,
                cpu: None,
                done: false,
            });
            self.progs[p].threads.push(tid);
            self.progs[p].live += 1;
            let spec = self.progs[p].template.clone();
            self.feed(&Event::Spawn { thread: tid, spec });
        }
        self.sample_allocation();
    }

    fn task_done(&mut self, t: usize) {
        self.flush_thread(t);
        let p = self.threads[t].prog;
        if let Some(next) = self.progs[p].pool.pop() {
            // The same thread takes the next task; nothing else changes.
            self.threads[t].remaining = next as f64;
            self.reschedule_completion(t);
            return;
        }
        self.threads[t].done = true;
        self.threads[t].remaining = 0.0;
        self.threads[t].generation += 1;
        self.progs[p].live -= 1;
        self.feed(&Event::Exit { thread: t });
        if self.progs[p].live == 0 {
            self.progs[p].finish_ns = Some(self.now);
            self.live_programs -= 1;
            if !self.progs[p].prog.is_sequential() {
                self.parallel_live -= 1;
            }
            self.trace_push(|s| TraceEvent::Instant {
                name: format!("exit {}", s.progs[p].name),
                t_ns: s.now,
            });
            self.sample_allocation();
        }
    }

    /// Executes the policy's actions, in order.
    fn execute(&mut self, out: &mut Vec<Action>) {
        let mut touched = std::mem::take(&mut self.touched);
        let mut alloc_changed = false;
        for a in out.drain(..) {
            match a {
                Action::Dispatch { cpu, state } => {
                    self.set_cpu_state(cpu, state);
                    touched.push(cpu);
                    if let Some(s) = self.machine.topology.sibling(cpu) {
                        touched.push(s);
                    }
                }
                Action::SetSpeed { cpu, duty } => {
                    self.cpus[cpu].duty = Some(duty);
                    touched.push(cpu);
                }
                Action::Fuse { thread, object } => {
                    touched.push(object.representative);
                    self.fused(thread, object);
                }
                Action::Split { thread, object } => {
                    touched.push(object.representative);
                    self.split(thread, object);
                }
                Action::Offline { id, cpus, mode } => {
                    let p = self
                        .pending
                        .take()
                        .filter(|p| p.fuse)
                        .expect("contract: an Offline follows its Fuse");
                    let cost = self.reconfigurer.offline(&cpus, mode, &p.object);
                    self.stall(&p.object, cost, "fuse", id);
                    touched.extend(p.object.borrowed.iter());
                }
                Action::Online { id, cpus, mode } => {
                    let p = self
                        .pending
                        .take()
                        .filter(|p| !p.fuse)
                        .expect("contract: an Online follows its Split");
                    let cost = self.reconfigurer.online(&cpus, mode, &p.object);
                    self.stall(&p.object, cost, "split", id);
                    touched.extend(p.object.borrowed.iter());
                }
                Action::Migrate { defrag, .. } => {
                    self.migrations += 1;
                    if defrag {
                        self.defrag_migrations += 1;
                    }
                }
                Action::Object { .. } => alloc_changed = true,
                // This engine feeds the cluster scheduler thread events
                // only, and it answers them with thread actions only.
                Action::Place { .. } => unreachable!("the thread engine feeds no stack events"),
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for &cpu in &touched {
            self.refresh_cpu(cpu);
        }
        touched.clear();
        self.touched = touched;
        if alloc_changed {
            self.sample_allocation();
        }
        debug_assert!(self.reconfigurer.check().is_ok());
    }

    /// `thread` fused `object`: counted, its span opened; its `Offline` comes next.
    fn fused(&mut self, thread: usize, object: ExecObject) {
        self.reconfig.fuses += 1;
        if self.fuse_start.len() <= thread {
            self.fuse_start.resize(thread + 1, None);
        }
        self.fuse_start[thread] = Some((self.now, object.cpus()));
        self.pending = Some(PendingReconfig { object, fuse: true });
    }

    /// `thread` split `object`: counted, its span traced; its `Online` comes next.
    fn split(&mut self, thread: usize, object: ExecObject) {
        self.reconfig.splits += 1;
        if let Some(Some((start, set))) = self.fuse_start.get_mut(thread).map(Option::take) {
            self.trace_push(|s| TraceEvent::ObjectSpan {
                object: thread,
                cpus: set.to_string(),
                name: format!("{} on {} CPUs", s.progs[s.threads[thread].prog].name, set.len()),
                start_ns: start,
                end_ns: s.now,
            });
        }
        self.pending = Some(PendingReconfig { object, fuse: false });
    }

    /// Marks the CPUs of `object` as reconfiguring for `cost` ns and answers
    /// reconfiguration `id` when that ends. Reconfigurations of a CPU are
    /// serialised, as the kernel serialises hotplug under one lock: one asked
    /// for while any of the CPUs is still reconfiguring starts when the last
    /// of them is done.
    fn stall(&mut self, object: &ExecObject, cost: Nanos, what: &str, id: ReconfigId) {
        if cost == 0 {
            self.push(self.now, Ev::ReconfigDone(id.0, 0));
            return;
        }
        self.reconfig.time_ns += cost;
        let rep = object.representative;
        let start = std::iter::once(rep)
            .chain(object.borrowed.iter())
            .map(|c| self.cpus[c].stall_until)
            .fold(self.now, Nanos::max);
        let until = start + cost;
        for c in std::iter::once(rep).chain(object.borrowed.iter()) {
            let already = self.cpus[c].stall_until.max(self.now);
            debug_assert!(until > already);
            self.cpus[c].stats.reconfig_ns += until - already;
            self.cpus[c].stall_until = until;
        }
        self.trace_push(|_| TraceEvent::Reconfig {
            cpu: rep,
            name: what.to_string(),
            start_ns: start,
            end_ns: until,
        });
        self.push(until, Ev::StallEnd(rep));
        for c in object.borrowed.iter() {
            self.push(until, Ev::StallEnd(c));
        }
        self.push(until, Ev::ReconfigDone(id.0, cost));
    }

    /// Accounts the time a CPU spent in its previous state and records the new one.
    fn set_cpu_state(&mut self, cpu: usize, state: CpuState) {
        let old = self.cpus[cpu].state;
        if old == state {
            return;
        }
        let since = self.cpus[cpu].since;
        let dt = self.now - since;
        match old {
            CpuState::Running { thread, object_cpus } => {
                self.cpus[cpu].stats.busy_ns += dt;
                let p = self.threads[thread].prog;
                if object_cpus > 1 {
                    self.progs[p].fused_ns += dt;
                    self.reconfig.fused_ns += dt;
                }
                if dt > 0 {
                    self.trace_push(|s| TraceEvent::Slice {
                        cpu,
                        thread,
                        name: s.progs[p].name.clone(),
                        start_ns: since,
                        end_ns: s.now,
                        fused: object_cpus > 1,
                    });
                }
            }
            CpuState::Borrowed { .. } => self.cpus[cpu].stats.borrowed_ns += dt,
            CpuState::Idle => {}
        }
        // A thread that left this CPU stops progressing here.
        if let CpuState::Running { thread, .. } = old {
            let still_here = matches!(state, CpuState::Running { thread: t2, .. } if t2 == thread);
            if !still_here && self.threads[thread].cpu == Some(cpu) {
                self.flush_thread(thread);
                self.threads[thread].cpu = None;
                self.threads[thread].rate = 0.0;
                self.threads[thread].generation += 1;
            }
        }
        if let CpuState::Running { thread, .. } = state {
            if let Some(prev) = self.threads[thread].cpu
                && prev != cpu
            {
                self.flush_thread(thread);
            }
            assert!(
                self.cpus[cpu].duty.is_some(),
                "the policy runs thread {thread} on CPU {cpu} before setting its speed"
            );
            self.threads[thread].cpu = Some(cpu);
        }
        self.cpus[cpu].state = state;
        self.cpus[cpu].since = self.now;
    }

    /// Brings the thread on `cpu` up to date and re-plans its completion.
    fn refresh_cpu(&mut self, cpu: usize) {
        if let CpuState::Running { thread, .. } = self.cpus[cpu].state {
            self.flush_thread(thread);
            self.reschedule_completion(thread);
        }
    }

    fn rate_of(&self, t: usize) -> f64 {
        let Some(cpu) = self.threads[t].cpu else { return 0.0 };
        if self.cpus[cpu].stall_until > self.now {
            return 0.0;
        }
        let duty = self.cpus[cpu].duty.expect("a running CPU has a speed");
        let sibling_busy = self.machine.smt
            && self
                .machine
                .topology
                .sibling(cpu)
                .is_some_and(|s| matches!(self.cpus[s].state, CpuState::Running { .. }));
        let factor = if sibling_busy { self.progs[self.threads[t].prog].smt_factor } else { 1.0 };
        progress_rate(duty, factor)
    }

    fn flush_thread(&mut self, t: usize) {
        let th = &mut self.threads[t];
        let dt = self.now - th.last;
        if dt > 0 && th.rate > 0.0 {
            th.remaining -= th.rate * dt as f64;
            // Float rounding may leave a sliver; never below zero.
            if th.remaining < 0.0 {
                assert!(th.remaining > -1.0e3, "thread {t} did more work than it had");
                th.remaining = 0.0;
            }
        }
        th.last = self.now;
    }

    fn reschedule_completion(&mut self, t: usize) {
        let rate = self.rate_of(t);
        let th = &mut self.threads[t];
        th.rate = rate;
        th.generation += 1;
        if rate > 0.0 && !th.done {
            let dt = (th.remaining / rate).ceil().max(0.0) as Nanos;
            let generation = th.generation;
            self.push(self.now + dt, Ev::Complete(t, generation));
        }
    }

    /// Records the CPUs each running sequential program's object holds, if
    /// that changed since the last sample (a sample at the same time is
    /// replaced).
    fn sample_allocation(&mut self) {
        let current = self
            .progs
            .iter()
            .filter(|pr| {
                pr.wants_object && pr.finish_ns.is_none() && !pr.threads.is_empty() && pr.prog.is_sequential()
            })
            .map(|pr| (&pr.name, self.policy.object_of(pr.threads[0]).map_or(0, ExecObject::len) as u32));
        if let Some(last) = self.allocation.last() {
            let mut cur = current.clone();
            if last.cpus_by_program.iter().all(|(n, c)| cur.next() == Some((n, *c))) && cur.next().is_none() {
                return;
            }
            if last.t_ns == self.now {
                self.allocation.pop();
            }
        }
        let cpus_by_program = current.map(|(n, c)| (n.clone(), c)).collect();
        self.allocation.push(AllocSample { t_ns: self.now, cpus_by_program });
    }

    /// Appends the event `make` builds, unless the trace is full (then
    /// nothing is built).
    fn trace_push(&mut self, make: impl FnOnce(&Self) -> TraceEvent) {
        if self.trace.len() < TRACE_CAP {
            let e = make(self);
            self.trace.push(e);
        }
    }

    fn finish(mut self, spec: &RunSpec, scenario: &Scenario) -> RunResult {
        let label = spec.label.clone();
        let series = spec.series.clone().unwrap_or_else(|| spec.label.clone());
        let params = scenario.sim.with(&spec.sim);
        let reconfigures = reconfigures(spec, &self.machine);
        let mechanism = if reconfigures { params.reconfig.name() } else { "none" };
        let profile = (reconfigures && params.reconfig == Mechanism::Runtime).then(|| {
            let (source, p) = scenario.profile_for(self.index);
            format!("{source}: {} ({})", p.machine, p.measured_on)
        });
        let finished = self.live_programs == 0 && self.pending_arrivals == 0;
        let end = self.now;
        for cpu in 0..self.cpus.len() {
            self.set_cpu_state(cpu, CpuState::Idle);
        }
        if let Err(e) = self.policy.check() {
            panic!("scheduler invariant broken at the end of `{label}`: {e}");
        }
        let per_cpu: Vec<CpuStats> = self
            .cpus
            .iter()
            .map(|c| {
                let mut s = c.stats.clone();
                let used = s.busy_ns + s.borrowed_ns;
                assert!(used <= end.max(1), "CPU {} used {used} ns of {end}", s.cpu);
                s.utilisation = if end > 0 { (used as f64 / end as f64 * 1e4).round() / 1e4 } else { 0.0 };
                s
            })
            .collect();
        let programs = self
            .progs
            .iter()
            .map(|p| {
                let completion = p.finish_ns.map(|f| f - p.start_ns);
                ProgramResult {
                    label: p.label.clone(),
                    program: p.prog.name.to_string(),
                    instance: p.instance,
                    threads: p.threads.len() as u32,
                    start_ns: p.start_ns,
                    finish_ns: p.finish_ns,
                    completion_ns: completion,
                    work_ns: p.work_ns,
                    speedup: completion.map(|c| round4(p.work_ns as f64 / c.max(1) as f64)),
                    relative_time: completion.map(|c| round4(c as f64 / p.work_ns.max(1) as f64)),
                    fused_ns: p.fused_ns,
                }
            })
            .collect();
        let decisions = self.policy.decisions();
        RunResult {
            label,
            series,
            machine: spec.machine.clone(),
            policy: match spec.policy {
                PolicyKind::Linux => "linux".into(),
                PolicyKind::Chameleon => "chameleon".into(),
            },
            reconfig_mechanism: mechanism.into(),
            reconfig_profile: profile,
            cpus: self.cpus.len(),
            end_ns: end,
            finished,
            programs,
            per_cpu,
            reconfig: self.reconfig,
            ipis: self.ipis,
            proxy_ipis: self.proxy_ipis,
            migrations: self.migrations,
            defrag_migrations: self.defrag_migrations,
            events: self.events,
            decisions,
            allocation: self.allocation,
            trace: self.trace,
            policy_trace: self.record.map(|r| {
                let (events, actions) = r.finish().expect("writing to memory does not fail");
                let text = |b: Vec<u8>| String::from_utf8(b).expect("serde_json writes UTF-8");
                PolicyTrace { events: text(events), actions: text(actions) }
            }),
        }
    }
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}
