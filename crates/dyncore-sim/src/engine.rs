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
//! * `Complete(thread)` — the thread's current task is done at its current
//!   progress rate. A thread with no task left exits (the policy's
//!   `Exit`). Whenever the rate may have changed the completion is
//!   re-planned, and the old plan comes out as `Superseded`, which does
//!   nothing but counts as an event (`queue`).
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
//! `Dispatch` and `SetSpeed` set what a CPU runs and at which duty;
//! `Offline`/`Online` stall the CPUs of their object (the `Fuse`/`Split`
//! just before; else the action's own CPUs) for the mechanism's latency
//! ([`crate::reconfigure`]), serialised per CPU, and are answered by
//! `ReconfigDone` when that ends. The rest change nothing here.
//!
//! ## Outputs
//! The engine holds the policy as a `Box<dyn Policy + Send>` from the
//! registry and knows nothing else of it. Every figure of the result — CPU
//! time, program completion, fused time, reconfiguration counters, the
//! allocation timeline, the trace — comes from the policy's events and
//! actions through [`dyncore_scenario::record`], the code the live backend
//! uses too; the engine adds what is its own (IPIs, events processed).
//!
//! The queue (`queue`) is ordered by (time, sequence number), so
//! equal-time events run in the order they were scheduled. Randomness comes from ChaCha
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
//! time; the policy sets a CPU's speed before it runs a thread there; and,
//! when the run records its policy traffic, what the engine executed keeps
//! to the actions (`executed.rs`, the execution checker).

use dyncore_core::exec::ExecObject;
use dyncore_core::policies::PolicyInfo;
use dyncore_core::policy::execution::Verdict;
use dyncore_core::policy::trace::TraceWriter;
use dyncore_core::policy::{Action, ActionKind, CpuState, Event, Policy, ReconfigId};
use dyncore_core::speed::Duty;
use dyncore_core::{CpuId, CpuSet, Nanos};
use dyncore_scenario::policy::{machine_of, policy_for, policy_info, reconfigures, run_seed, tracked};
use dyncore_scenario::record::{ProgramRun, Recorded, RunRecorder};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::control::{EventBudgetExceeded, RunProgress, Watch};
use crate::cost::Mechanism;
use crate::executed::ExecRecord;
use crate::machine::{MachineSpec, progress_rate};
use crate::programs::{DealtWork, ProgramPlan, deal_work, plan_programs, work_rng};
use crate::queue::{Ev, EventQueue};
use crate::reconfigure::Reconfigurer;
use crate::result::{PolicyTrace, RunResult};
use crate::scenario::{RunSpec, Scenario};

pub use dyncore_scenario::policy::LOAD_SAMPLE_NS;
pub use dyncore_scenario::record::TRACE_CAP;

/// What the simulator executes: every action a thread policy emits
/// (`Place` moves network-stack components: `netstack` runs those). A
/// scenario whose policy may emit another is refused when it is validated.
pub const EXECUTES: &[ActionKind] = dyncore_scenario::policy::THREAD_ACTIONS;

struct ProgState {
    plan: ProgramPlan,
    threads: Vec<usize>,
    /// Pool of remaining tasks (dynamic programs), baseline ns.
    pool: Vec<u64>,
    live: usize,
    finished: bool,
}

struct ThreadState {
    prog: usize,
    remaining: f64,
    rate: f64,
    last: Nanos,
    cpu: Option<usize>,
    done: bool,
}

struct CpuSim {
    state: CpuState,
    stall_until: Nanos,
    /// The duty the policy last set (`None`: never set).
    duty: Option<Duty>,
    /// Offline (taken by an `Offline`, not yet brought back).
    offline: bool,
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
    queue: EventQueue,
    rng: ChaCha8Rng,
    machine: MachineSpec,
    info: &'static PolicyInfo,
    policy: Recorded<Box<dyn Policy + Send>>,
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
    proxy_ipis: u64,
    actions: Vec<Action>,
    /// Scratch list of CPUs whose threads `execute` must refresh.
    touched: Vec<usize>,
    /// The policy's traffic, when the scenario asks for it.
    record: Option<TraceWriter<Vec<u8>, Vec<u8>>>,
    /// What ran, for the execution checker (with the traffic).
    executed: Option<ExecRecord>,
}

/// Runs run `index` of a validated scenario, reporting progress to `watch`.
/// A run that reaches its event budget (`max_events`) stops with an error
/// instead of a result.
pub fn run(
    scenario: &Scenario,
    index: usize,
    watch: &mut Watch<'_>,
) -> Result<RunResult, EventBudgetExceeded> {
    run_inner(scenario, index, watch).map(|(r, _)| r)
}

/// Runs run `index` recording its policy traffic and what it executed;
/// returns the result and the execution checker's verdict (a violation
/// panics: it is a defect of the engine).
pub fn run_checked(scenario: &Scenario, index: usize) -> Result<(RunResult, Verdict), EventBudgetExceeded> {
    let mut s = scenario.clone();
    s.record_policy_trace = true;
    let (r, v) = run_inner(&s, index, &mut Watch { every_events: 0, report: &mut |_| {} })?;
    Ok((r, v.expect("recorded with the traffic")))
}

fn run_inner(
    scenario: &Scenario,
    index: usize,
    watch: &mut Watch<'_>,
) -> Result<(RunResult, Option<Verdict>), EventBudgetExceeded> {
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
    while let Some((key, ev)) = sim.queue.pop() {
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
    if let Err(e) = sim.queue.check() {
        panic!("event queue invariant broken at the end of `{}`: {e}", spec.label);
    }
    (watch.report)(&progress(&sim, true));
    Ok(sim.finish(spec, scenario))
}

impl Sim {
    /// The simulation of run `index`, with its programs' arrivals and the
    /// first ticks queued.
    fn new(scenario: &Scenario, index: usize) -> Sim {
        let spec = &scenario.runs[index];
        let params = scenario.sim.with(&spec.sim);
        let machine = machine_of(scenario, index);
        let ncpus = machine.topology.ncpus();
        let info = policy_info(scenario, index);
        let policy = Recorded { policy: policy_for(scenario, index), record: RunRecorder::new(ncpus) };
        let profile = (params.reconfig == Mechanism::Runtime).then(|| scenario.profile_for(index));
        // One generator per run: the seed mixed with the run index.
        let rng = ChaCha8Rng::seed_from_u64(run_seed(scenario.seed, index));

        let mut sim = Sim {
            index,
            seed: scenario.seed,
            now: 0,
            queue: EventQueue::new(),
            rng,
            reconfigurer: Reconfigurer::new(params.reconfig, ncpus, profile.map(|(_, p)| p)),
            pending: None,
            progs: Vec::new(),
            threads: Vec::new(),
            cpus: (0..ncpus)
                .map(|_| CpuSim {
                    state: CpuState::Idle,
                    stall_until: 0,
                    duty: None,
                    offline: false,
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
            parallel_live: 0,
            ipi_queued: false,
            ipis: 0,
            proxy_ipis: 0,
            actions: Vec::new(),
            touched: Vec::new(),
            record: scenario
                .record_policy_trace
                .then(|| TraceWriter::new(Vec::with_capacity(1 << 20), Vec::with_capacity(1 << 20))),
            executed: scenario.record_policy_trace.then(ExecRecord::default),
            machine,
            info,
            policy,
        };
        for plan in plan_programs(spec, &sim.machine) {
            sim.add_program(plan);
        }
        for cpu in 0..ncpus {
            sim.queue.push_tick(0, cpu);
        }
        sim
    }

    /// Queues the arrival of one program instance.
    fn add_program(&mut self, plan: ProgramPlan) {
        let idx = self.progs.len();
        let start_ns = plan.start_ns;
        self.progs.push(ProgState { plan, threads: Vec::new(), pool: Vec::new(), live: 0, finished: false });
        self.pending_arrivals += 1;
        self.live_programs += 1;
        self.push(start_ns, Ev::Arrive(idx));
    }

    fn push(&mut self, t: Nanos, ev: Ev) {
        self.queue.push(t, ev);
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
                    self.queue.push_tick(self.now + self.tick_ns, cpu);
                }
            }
            Ev::Arrive(p) => self.arrive(p),
            Ev::Complete(t) => {
                // Only a thread's current plan comes out as a completion.
                assert!(!self.threads[t].done, "thread {t} completed after it was done");
                self.task_done(t);
            }
            // A completion re-planned before it came due.
            Ev::Superseded => {}
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
        let busy = self.policy.record.busy_ns(cpu, self.now);
        let busy_ns = busy - c.sampled_busy_ns;
        let c = &mut self.cpus[cpu];
        c.sampled_busy_ns = busy;
        c.sampled_at = self.now;
        self.feed(&Event::Load { cpu, busy_ns, window_ns });
    }

    fn arrive(&mut self, p: usize) {
        self.pending_arrivals -= 1;
        let program = self.progs[p].plan.program;
        if !program.is_sequential() {
            self.parallel_live += 1;
            self.queue_ipi();
        }
        let (nthreads, work) = (self.progs[p].plan.threads, self.progs[p].plan.work_ns);
        let mut rng = work_rng(self.seed, p);
        let DealtWork { initial, pool } = deal_work(program.shape, work, nthreads, &mut rng);
        self.progs[p].pool = pool;
        for work in initial {
            let tid = self.threads.len();
            self.threads.push(ThreadState {
                prog: p,
                remaining: work as f64,
                rate: 0.0,
                last: self.now,
                cpu: None,
                done: false,
            });
            self.progs[p].threads.push(tid);
            self.progs[p].live += 1;
            let spec = self.progs[p].plan.template.clone();
            self.feed(&Event::Spawn { thread: tid, spec });
        }
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
        self.queue.cancel_completion(t);
        self.progressing(t);
        self.progs[p].live -= 1;
        self.feed(&Event::Exit { thread: t });
        if self.progs[p].live == 0 {
            self.progs[p].finished = true;
            self.live_programs -= 1;
            if !self.progs[p].plan.program.is_sequential() {
                self.parallel_live -= 1;
            }
        }
    }

    /// Executes the policy's actions, in order.
    fn execute(&mut self, out: &mut Vec<Action>) {
        let mut touched = std::mem::take(&mut self.touched);
        for a in out.drain(..) {
            if let Some(x) = &mut self.executed {
                x.action(self.now, &a);
            }
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
                Action::Fuse { object, .. } => {
                    touched.push(object.representative);
                    self.pending = Some(PendingReconfig { object, fuse: true });
                }
                Action::Split { object, .. } => {
                    touched.push(object.representative);
                    self.pending = Some(PendingReconfig { object, fuse: false });
                }
                Action::Offline { id, cpus, mode } => {
                    let (stalled, proxy) = self.reconfigured_cpus(&cpus, true);
                    let cost = self.reconfigurer.offline(&cpus, mode, proxy);
                    cpus.iter().for_each(|c| self.cpus[c].offline = true);
                    let (start, _) = self.stall(&stalled, cost, id);
                    if let Some(x) = &mut self.executed {
                        x.change(cpus.iter(), start, false);
                    }
                    touched.extend(stalled.iter());
                }
                Action::Online { id, cpus, mode } => {
                    let (stalled, _) = self.reconfigured_cpus(&cpus, false);
                    let cost = self.reconfigurer.online(&cpus, mode);
                    cpus.iter().for_each(|c| self.cpus[c].offline = false);
                    let (_, until) = self.stall(&stalled, cost, id);
                    if let Some(x) = &mut self.executed {
                        x.change(cpus.iter(), until, true);
                    }
                    touched.extend(stalled.iter());
                }
                Action::Migrate { .. } | Action::Object { .. } => {}
                // Refused before the run starts (`EXECUTES`).
                Action::Place { .. } => {
                    unreachable!("a policy that places components passed the capability check")
                }
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for &cpu in &touched {
            self.refresh_cpu(cpu);
        }
        touched.clear();
        self.touched = touched;
        debug_assert!(self.reconfigurer.check().is_ok());
    }

    /// The CPUs an `Offline` (`offline`) or `Online` of `cpus` stalls, and
    /// the CPU that proxies for them: the object of the `Fuse` or `Split`
    /// just before (its representative), else `cpus` alone (the lowest CPU
    /// that stays online).
    fn reconfigured_cpus(&mut self, cpus: &CpuSet, offline: bool) -> (CpuSet, CpuId) {
        match self.pending.take() {
            Some(p) if p.fuse == offline => {
                assert_eq!(
                    cpus, &p.object.borrowed,
                    "contract: the CPUs of an Offline/Online are its object's borrowed ones"
                );
                (p.object.cpus(), p.object.representative)
            }
            Some(p) => panic!(
                "contract: a {} is followed by its {}",
                if p.fuse { "Fuse" } else { "Split" },
                if p.fuse { "Offline" } else { "Online" }
            ),
            None => {
                let proxy = (0..self.cpus.len())
                    .find(|&c| !cpus.contains(c) && !self.cpus[c].offline)
                    .expect("contract: the last online CPU is never taken offline");
                (cpus.clone(), proxy)
            }
        }
    }

    /// Marks `cpus` as reconfiguring for `cost` ns and answers
    /// reconfiguration `id` when that ends. Reconfigurations of a CPU are
    /// serialised, as the kernel serialises hotplug under one lock: one asked
    /// for while any of the CPUs is still reconfiguring starts when the last
    /// of them is done. Returns when it starts and ends.
    fn stall(&mut self, cpus: &CpuSet, cost: Nanos, id: ReconfigId) -> (Nanos, Nanos) {
        if cost == 0 {
            self.push(self.now, Ev::ReconfigDone(id.0, 0));
            return (self.now, self.now);
        }
        let start = cpus.iter().map(|c| self.cpus[c].stall_until).fold(self.now, Nanos::max);
        let until = start + cost;
        for c in cpus.iter() {
            debug_assert!(until > self.cpus[c].stall_until.max(self.now));
            self.cpus[c].stall_until = until;
            self.push(until, Ev::StallEnd(c));
        }
        self.push(until, Ev::ReconfigDone(id.0, cost));
        (start, until)
    }

    /// Runs `state` on `cpu` from now: a thread that left it stops
    /// progressing here.
    fn set_cpu_state(&mut self, cpu: usize, state: CpuState) {
        let old = self.cpus[cpu].state;
        if old == state {
            return;
        }
        if let CpuState::Running { thread, .. } = old {
            let still_here = matches!(state, CpuState::Running { thread: t2, .. } if t2 == thread);
            if !still_here && self.threads[thread].cpu == Some(cpu) {
                self.flush_thread(thread);
                self.threads[thread].cpu = None;
                self.threads[thread].rate = 0.0;
                self.queue.cancel_completion(thread);
                self.progressing(thread);
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
        let factor = if sibling_busy { self.progs[self.threads[t].prog].plan.smt_factor } else { 1.0 };
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
        self.threads[t].rate = rate;
        self.progressing(t);
        let th = &self.threads[t];
        if rate > 0.0 && !th.done {
            let dt = (th.remaining / rate).ceil().max(0.0) as Nanos;
            self.queue.plan_completion(t, self.now + dt);
        } else {
            self.queue.cancel_completion(t);
        }
    }

    /// Tells the execution record where thread `t` progresses now.
    fn progressing(&mut self, t: usize) {
        if let Some(x) = &mut self.executed {
            let th = &self.threads[t];
            x.progress(t, th.cpu.filter(|_| th.rate > 0.0 && !th.done), self.now);
        }
    }

    fn finish(mut self, spec: &RunSpec, scenario: &Scenario) -> (RunResult, Option<Verdict>) {
        let params = scenario.sim.with(&spec.sim);
        let reconfigures = reconfigures(self.info, &self.machine);
        let mechanism = if reconfigures { params.reconfig.name() } else { "none" };
        let profile = (reconfigures && params.reconfig == Mechanism::Runtime).then(|| {
            let (source, p) = scenario.profile_for(self.index);
            format!("{source}: {} ({})", p.machine, p.measured_on)
        });
        let finished = self.live_programs == 0 && self.pending_arrivals == 0;
        if let Err(e) = self.policy.check() {
            panic!("policy invariant broken at the end of `{}`: {e}", spec.label);
        }
        let verdict = self.executed.take().map(|x| x.finish(self.now));
        if let Some(v) = verdict.as_ref().filter(|v| !v.ok()) {
            panic!(
                "the simulator did not execute what the policy asked in `{}`: {}",
                spec.label,
                v.summary()
            );
        }
        let runs: Vec<ProgramRun<'_>> = self
            .progs
            .iter()
            .map(|p| ProgramRun { plan: &p.plan, threads: &p.threads, work_done_ns: p.plan.work_ns as f64 })
            .collect();
        let info = self.info;
        let r = self.policy.record.finish(self.now, &runs, |plan| tracked(info, plan));
        let result = RunResult {
            label: spec.label.clone(),
            series: spec.series.clone().unwrap_or_else(|| spec.label.clone()),
            machine: spec.machine.clone(),
            policy: spec.policy.name.clone(),
            reconfig_mechanism: mechanism.into(),
            reconfig_profile: profile,
            cpus: self.cpus.len(),
            end_ns: self.now,
            finished,
            programs: r.programs,
            per_cpu: r.per_cpu,
            reconfig: r.reconfig,
            ipis: self.ipis,
            proxy_ipis: self.proxy_ipis,
            migrations: r.migrations,
            defrag_migrations: r.defrag_migrations,
            events: self.events,
            decisions: r.decisions,
            allocation: r.allocation,
            energy: r.energy,
            trace: r.trace,
            policy_trace: self.record.map(|w| {
                let (events, actions) = w.finish().expect("writing to memory does not fail");
                let text = |b: Vec<u8>| String::from_utf8(b).expect("serde_json writes UTF-8");
                PolicyTrace { events: text(events), actions: text(actions) }
            }),
        };
        (result, verdict)
    }
}
