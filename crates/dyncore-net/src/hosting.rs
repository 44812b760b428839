//! Components hosted on runtime CPUs (phase B): the NewtOS arrangement of a
//! split stack on dedicated or shared cores, with speeds and live moves.
//!
//! A [`CpuHost`] owns runtime CPUs, one worker thread each, pinned to a real
//! CPU when [`HostConfig::pin`] says so. Each runtime CPU hosts a set of
//! component *slots* (a [`Supervised`] component each):
//!
//! * **Dedicated** (one slot): the worker polls it; after
//!   [`crate::host::PARK_AFTER_EMPTY_POLLS`] empty polls it waits on the CPU's
//!   bell, spinning first (UMWAIT where the CPU has `waitpkg`,
//!   [`dyncore_ring::waitpkg`]), then on a futex.
//! * **Shared** (several slots): the worker polls them round-robin; after a
//!   few idle rounds it parks on the futex at once — the notification
//!   fallback NewtOS takes (kernel IPC) when a core is shared.
//!
//! Every component's bell forwards to the bell of the CPU hosting it
//! ([`crate::chan::Bell::forward_to`]), so a CPU sleeps on one bell. A ring
//! that wakes a sleeping CPU is a *wake-up*; its *cost* is the time from the
//! ring to the worker running again, measured per wake-up.
//!
//! **Speed**: each CPU has a duty cycle in per-mille
//! ([`dyncore_core::speed::Duty`]), kept by the runtime's throttle itself
//! ([`dyncore_runtime::cpu::Throttle`], `throttle.rs`): over fixed periods
//! the worker may run `duty × period` (a round of polls counts, work or not:
//! a polling core runs); time past the budget is debt for the next periods;
//! once the budget is used it sleeps to the period's end (spinning gaps
//! shorter than the runtime's `SPIN_BELOW_NS`). Its counters
//! ([`dyncore_runtime::cpu::ThrottleCounters`]) give the running and
//! throttled time and how well the duty was kept over loaded periods
//! ([`dyncore_runtime::cpu::DutyReport`]). A speed step of the NewtOS table
//! maps to the duty of its capacity ([`duty_of_step`]: 200 MHz of a 2267
//! MHz core is 88‰).
//!
//! **Moves** ([`CpuHost::place`]) hand a slot over, as Bolt's offline hands
//! over a CPU's run queue: the slot is detached on the source CPU between two
//! of its polls (the worker holds the CPU's slot lock for a whole round, so
//! taking that lock is the quiescent point, Bolt's "stop dispatch"), its bell
//! is re-pointed, it is attached on the destination and that CPU is rung.
//! The rings stay where they are, so a move loses and duplicates nothing: a
//! message is in a ring or being handled by the one CPU polling the slot.
//!
//! Invariants (checked by [`CpuHost::check`]): every component is in exactly
//! one slot of one CPU, the one [`CpuHost::cpu_of`] names; a component is
//! polled by at most one worker at a time (its slot lives inside one CPU's
//! lock); every bell forwards to its component's CPU.

use std::collections::BTreeMap;
use std::panic::resume_unwind;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dyncore_core::power::{SpeedTable, StepIdx};
use dyncore_core::speed::Duty;
use dyncore_core::{CpuId, Nanos};
use dyncore_ring::SpinPolicy;
use dyncore_runtime::cpu::{DutyReport, SPIN_BELOW_NS, Throttle, ThrottleCounters};

use crate::chan::{Bell, clock_ns};
use crate::component::{Blueprint, ComponentKind};
use crate::host::{Load, PARK_AFTER_EMPTY_POLLS, Supervised, Updated};

/// The duty that gives a speed step's capacity (its effective frequency
/// over the fastest step's), in per-mille, at least 1‰.
pub fn duty_of_step(speeds: &SpeedTable, step: StepIdx) -> Duty {
    let pm = (speeds.capacity(step) * 1000.0).round().clamp(1.0, 1000.0) as u32;
    Duty::from_per_mille(pm).expect("1..=1000 per mille is a duty")
}

/// How a host is built.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// Runtime CPU `i` is named `cpus[i]` (the placement's CPU ids) and, if
    /// [`HostConfig::pin`], runs on that real CPU.
    pub cpus: Vec<CpuId>,
    pub pin: bool,
    /// Empty polls before a dedicated CPU waits on its bell.
    pub park_after: u32,
    /// Idle rounds before a shared CPU parks.
    pub shared_park_after: u32,
    /// The duty-cycle throttle's period.
    pub throttle_period: Duration,
}

impl HostConfig {
    pub fn new(cpus: Vec<CpuId>) -> Self {
        HostConfig {
            cpus,
            pin: false,
            park_after: PARK_AFTER_EMPTY_POLLS,
            shared_park_after: 8,
            throttle_period: Duration::from_millis(1),
        }
    }
}

/// What a runtime CPU counted (all times in ns); its running and
/// throttled time are the throttle's ([`ThrottleCounters`]).
#[derive(Debug, Default)]
struct CpuStats {
    /// Time in polls that did work.
    busy_ns: AtomicU64,
    parks: AtomicU64,
    /// Parks ended by a ring (not a deadline), and the time from those
    /// rings to the worker running.
    wakeups: AtomicU64,
    wake_ns: AtomicU64,
    wake_ns_max: AtomicU64,
    rounds: AtomicU64,
}

/// A runtime CPU's figures at one moment.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuSnapshot {
    pub cpu: CpuId,
    pub duty_per_mille: u16,
    /// Time the worker ran (rounds of polls, work or not): what its duty
    /// limits.
    pub run_ns: u64,
    pub busy_ns: u64,
    pub throttled_ns: u64,
    pub parks: u64,
    pub wakeups: u64,
    pub wake_ns: u64,
    pub wake_ns_max: u64,
    pub rounds: u64,
    /// Components it hosts now.
    pub slots: usize,
    /// How well the throttle kept the duty over loaded periods.
    pub duty: DutyReport,
}

struct HostCpu {
    id: CpuId,
    slots: Mutex<Vec<Supervised>>,
    /// Bumped by every attach (a parked worker re-checks).
    version: AtomicU64,
    /// The duty, and the running and throttled time (the runtime's throttle).
    throttle: ThrottleCounters,
    stats: CpuStats,
}

/// One component's load, readable without stopping it.
#[derive(Debug, Default)]
struct SlotStats {
    busy_ns: AtomicU64,
    polls: AtomicU64,
    messages: AtomicU64,
    bytes: AtomicU64,
    restarts: AtomicU64,
    restart_ns_max: AtomicU64,
    updates: AtomicU64,
    update_pause_ns_max: AtomicU64,
    inbound_fill_pm: AtomicU32,
    /// Outbound fill per receiving component (index in `ComponentKind::ALL`), ‰.
    outbound_fill_pm: [AtomicU32; 5],
    moves: AtomicU64,
}

struct Shared {
    cpus: Vec<HostCpu>,
    bells: Arc<[Arc<Bell>]>,
    stop: AtomicBool,
    epoch: Instant,
    cfg: HostConfig,
    /// Where each component is (index into `cpus`), and its stats.
    place: Mutex<BTreeMap<ComponentKind, usize>>,
    stats: BTreeMap<ComponentKind, Arc<SlotStats>>,
    /// A worker's panic outside a component's poll (a component whose
    /// constructor panicked): the stack is down.
    fatal: Mutex<Option<Box<dyn std::any::Any + Send>>>,
}

/// A placement the host cannot carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostError(pub String);

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HostError {}

/// A component's figures at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SlotSnapshot {
    pub kind: Option<ComponentKind>,
    pub cpu: CpuId,
    pub load: Load,
    pub inbound_fill: f64,
    pub outbound_fill: [f64; 5],
    pub moves: u64,
}

/// Runtime CPUs hosting one stack's components (see the module docs).
pub struct CpuHost {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl CpuHost {
    /// Starts the CPUs and places `components` as `initial` says (each
    /// component on the CPU of that id). Fails, with nothing left running,
    /// when a CPU is named twice, a component is not placed, or pinning a
    /// worker fails.
    pub fn start(
        cfg: HostConfig,
        blueprints: Vec<Arc<dyn Blueprint>>,
        initial: &BTreeMap<ComponentKind, CpuId>,
    ) -> Result<CpuHost, HostError> {
        dyncore_runtime::testing::assert_held_here("starting a stack host on runtime CPUs");
        if cfg.cpus.is_empty() {
            return Err(HostError("no CPUs to host the stack on".into()));
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(c) = cfg.cpus.iter().find(|c| !seen.insert(**c)) {
            return Err(HostError(format!("CPU {c} is named twice")));
        }
        let index_of = |id: CpuId| cfg.cpus.iter().position(|&c| c == id);
        let bells: Arc<[Arc<Bell>]> = cfg.cpus.iter().map(|_| Bell::new()).collect();
        let cpus: Vec<HostCpu> = cfg
            .cpus
            .iter()
            .map(|&id| HostCpu {
                id,
                slots: Mutex::new(Vec::new()),
                version: AtomicU64::new(0),
                throttle: ThrottleCounters::default(),
                stats: CpuStats::default(),
            })
            .collect();
        let mut place = BTreeMap::new();
        let mut stats = BTreeMap::new();
        for b in blueprints {
            let k = b.kind();
            let cpu = initial.get(&k).ok_or_else(|| HostError(format!("component {k} is not placed")))?;
            let i = index_of(*cpu)
                .ok_or_else(|| HostError(format!("{k} placed on CPU {cpu}, not a host CPU")))?;
            if place.insert(k, i).is_some() {
                return Err(HostError(format!("two components are {k}")));
            }
            stats.insert(k, Arc::new(SlotStats::default()));
            b.common().bell.forward_to(&bells, i);
            cpus[i].slots.lock().unwrap().push(Supervised::new(b, 0));
        }
        let shared = Arc::new(Shared {
            cpus,
            bells,
            stop: AtomicBool::new(false),
            epoch: Instant::now(),
            cfg,
            place: Mutex::new(place),
            stats,
            fatal: Mutex::new(None),
        });
        let mut host = CpuHost { shared: shared.clone(), workers: Vec::new() };
        let (tx, rx) = std::sync::mpsc::channel();
        for i in 0..shared.cpus.len() {
            let sh = shared.clone();
            let tx = tx.clone();
            let h = std::thread::Builder::new()
                .name(format!("stack-cpu{}", shared.cpus[i].id))
                .spawn(move || {
                    if sh.cfg.pin {
                        let id = sh.cpus[i].id;
                        if let Err(e) = dyncore_runtime::affinity::pin_current_thread(id) {
                            let _ = tx.send(Err(format!("pinning runtime CPU {id}: {e}")));
                            return;
                        }
                    }
                    let _ = tx.send(Ok(()));
                    worker(&sh, i)
                })
                .map_err(|e| HostError(format!("starting a worker: {e}")))?;
            host.workers.push(h);
        }
        drop(tx);
        for _ in 0..shared.cpus.len() {
            match rx.recv() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(HostError(e)), // `host` drops: the others stop
                Err(_) => return Err(HostError("a worker died while starting".into())),
            }
        }
        Ok(host)
    }

    /// Time since the host started, ns.
    pub fn now_ns(&self) -> Nanos {
        crate::elapsed_ns(self.shared.epoch)
    }

    pub fn cpu_ids(&self) -> Vec<CpuId> {
        self.shared.cpus.iter().map(|c| c.id).collect()
    }

    fn index_of(&self, cpu: CpuId) -> Result<usize, HostError> {
        self.shared
            .cpus
            .iter()
            .position(|c| c.id == cpu)
            .ok_or_else(|| HostError(format!("CPU {cpu} is not one of the host's CPUs {:?}", self.cpu_ids())))
    }

    /// Where `kind` runs.
    pub fn cpu_of(&self, kind: ComponentKind) -> Option<CpuId> {
        let p = lock(&self.shared.place);
        p.get(&kind).map(|&i| self.shared.cpus[i].id)
    }

    /// Moves `kind` to `cpu` while traffic flows (see the module docs); a
    /// no-op if it is there already.
    pub fn place(&self, kind: ComponentKind, cpu: CpuId) -> Result<(), HostError> {
        let to = self.index_of(cpu)?;
        let sh = &self.shared;
        let mut place = lock(&sh.place);
        let from = *place.get(&kind).ok_or_else(|| HostError(format!("no component {kind} in this host")))?;
        if from == to {
            return Ok(());
        }
        // Detach between two polls: the source worker holds this lock for
        // a whole round.
        let slot = {
            let mut src = lock(&sh.cpus[from].slots);
            let pos = src.iter().position(|s| s.kind() == kind).expect("the place map is right");
            src.remove(pos)
        };
        slot.component().bell().forward_to(&sh.bells, to);
        lock(&sh.cpus[to].slots).push(slot);
        place.insert(kind, to);
        sh.stats[&kind].moves.fetch_add(1, Ordering::Relaxed);
        sh.cpus[to].version.fetch_add(1, Ordering::AcqRel);
        sh.bells[to].ring();
        Ok(())
    }

    /// Sets a CPU's duty cycle (takes effect at its next throttle check).
    pub fn set_duty(&self, cpu: CpuId, duty: Duty) -> Result<(), HostError> {
        let i = self.index_of(cpu)?;
        self.shared.cpus[i].throttle.set_duty(duty);
        self.shared.bells[i].ring();
        Ok(())
    }

    pub fn duty(&self, cpu: CpuId) -> Result<Duty, HostError> {
        let i = self.index_of(cpu)?;
        Ok(self.shared.cpus[i].throttle.duty())
    }

    /// Arms `kind`'s crash switch (it panics mid-message at its next one).
    pub fn crash(&self, kind: ComponentKind) -> Result<(), HostError> {
        self.crash_at(kind, crate::component::CrashPoint::Logic)
    }

    /// Arms `kind`'s crash switch for `point`.
    pub fn crash_at(
        &self,
        kind: ComponentKind,
        point: crate::component::CrashPoint,
    ) -> Result<(), HostError> {
        self.with_slot(kind, |s| s.component().crash_switch().arm_at(point))
    }

    /// The version `kind` runs.
    pub fn version(&self, kind: ComponentKind) -> Result<u32, HostError> {
        self.with_slot(kind, |s| s.component().version())
    }

    /// Whether `kind`'s crash switch is armed (and has not fired yet).
    pub fn is_armed(&self, kind: ComponentKind) -> Result<bool, HostError> {
        self.with_slot(kind, |s| s.component().crash_switch().is_armed())
    }

    /// Disarms `kind`'s crash switch; returns whether it was armed.
    pub fn disarm(&self, kind: ComponentKind) -> Result<bool, HostError> {
        self.with_slot(kind, |s| s.component().crash_switch().disarm())
    }

    /// Replaces `kind`'s instance with one of `version` while traffic flows
    /// (a live update, [`Supervised::update`]): the worker hosting it holds
    /// its CPU's slot lock for a whole round, so taking the lock is the
    /// quiescent point between two of its polls.
    pub fn update(&self, kind: ComponentKind, version: u32) -> Result<Updated, HostError> {
        let now = self.now_ns();
        let r = self.with_slot(kind, |s| s.update(version, now))?;
        let u = r.map_err(|e| HostError(format!("update {kind} to version {version}: {e}")))?;
        let st = &self.shared.stats[&kind];
        st.updates.fetch_add(1, Ordering::Relaxed);
        st.update_pause_ns_max.fetch_max(u.pause_ns, Ordering::Relaxed);
        Ok(u)
    }

    fn with_slot<R>(
        &self,
        kind: ComponentKind,
        f: impl FnOnce(&mut Supervised) -> R,
    ) -> Result<R, HostError> {
        let sh = &self.shared;
        let place = lock(&sh.place);
        let i = *place.get(&kind).ok_or_else(|| HostError(format!("no component {kind}")))?;
        let mut slots = lock(&sh.cpus[i].slots);
        let s = slots.iter_mut().find(|s| s.kind() == kind).expect("the place map is right");
        Ok(f(s))
    }

    /// Every CPU's figures now.
    pub fn cpus(&self) -> Vec<CpuSnapshot> {
        let slots = self.slot_counts();
        let period = period_ns(&self.shared.cfg);
        self.shared
            .cpus
            .iter()
            .zip(slots)
            .map(|(c, slots)| {
                let s = &c.stats;
                let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
                CpuSnapshot {
                    cpu: c.id,
                    duty_per_mille: c.throttle.duty().per_mille(),
                    run_ns: c.throttle.busy_ns(),
                    busy_ns: r(&s.busy_ns),
                    throttled_ns: c.throttle.throttled_ns(),
                    parks: r(&s.parks),
                    wakeups: r(&s.wakeups),
                    wake_ns: r(&s.wake_ns),
                    wake_ns_max: r(&s.wake_ns_max),
                    rounds: r(&s.rounds),
                    slots,
                    duty: c.throttle.report(c.id, period),
                }
            })
            .collect()
    }

    fn slot_counts(&self) -> Vec<usize> {
        let p = lock(&self.shared.place);
        let mut n = vec![0; self.shared.cpus.len()];
        for &i in p.values() {
            n[i] += 1;
        }
        n
    }

    /// Every component's figures now, in pipeline order.
    pub fn components(&self) -> Vec<SlotSnapshot> {
        let p = lock(&self.shared.place);
        self.shared
            .stats
            .iter()
            .map(|(&k, s)| {
                let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
                let pm = |a: &AtomicU32| f64::from(a.load(Ordering::Relaxed)) / 1000.0;
                SlotSnapshot {
                    kind: Some(k),
                    cpu: self.shared.cpus[p[&k]].id,
                    load: Load {
                        polls: r(&s.polls),
                        busy_ns: r(&s.busy_ns),
                        messages: r(&s.messages),
                        bytes: r(&s.bytes),
                        restarts: r(&s.restarts),
                        restart_ns_max: r(&s.restart_ns_max),
                        updates: r(&s.updates),
                        update_pause_ns_max: r(&s.update_pause_ns_max),
                        ..Load::default()
                    },
                    inbound_fill: pm(&s.inbound_fill_pm),
                    outbound_fill: std::array::from_fn(|j| pm(&s.outbound_fill_pm[j])),
                    moves: r(&s.moves),
                }
            })
            .collect()
    }

    /// Checks the invariants of the module docs (takes every lock).
    pub fn check(&self) -> Result<(), String> {
        let sh = &self.shared;
        let p = lock(&sh.place);
        let mut found = BTreeMap::new();
        for (i, c) in sh.cpus.iter().enumerate() {
            for s in lock(&c.slots).iter() {
                if found.insert(s.kind(), i).is_some() {
                    return Err(format!("{} is in two slots", s.kind()));
                }
            }
        }
        if found != *p {
            return Err(format!("slots {found:?} differ from the place map {p:?}"));
        }
        Ok(())
    }

    /// A worker that stopped on a panic outside a component's poll (a
    /// component's constructor): the stack is broken.
    pub fn failed(&self) -> bool {
        lock(&self.shared.fatal).is_some()
    }

    /// Stops every worker and takes the components back (pipeline order),
    /// re-raising the panic that stopped a worker, if one did.
    pub fn stop(mut self) -> Vec<Supervised> {
        self.signal_stop();
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
        if let Some(p) = lock(&self.shared.fatal).take() {
            resume_unwind(p);
        }
        let mut all: Vec<Supervised> =
            self.shared.cpus.iter().flat_map(|c| std::mem::take(&mut *lock(&c.slots))).collect();
        all.sort_by_key(|s| s.kind());
        all
    }

    fn signal_stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        for b in self.shared.bells.iter() {
            b.ring();
        }
    }
}

impl Drop for CpuHost {
    fn drop(&mut self) {
        self.signal_stop();
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn kind_index(k: ComponentKind) -> usize {
    ComponentKind::ALL.iter().position(|&x| x == k).expect("every kind is in ALL")
}

/// The throttle's period, ns.
fn period_ns(cfg: &HostConfig) -> u64 {
    u64::try_from(cfg.throttle_period.as_nanos()).unwrap_or(1_000_000).max(1)
}

fn worker(sh: &Shared, i: usize) {
    let cpu = &sh.cpus[i];
    let mut throttle = Throttle::new(period_ns(&sh.cfg), crate::elapsed_ns(sh.epoch));
    let mut empty = 0u32;
    while !sh.stop.load(Ordering::Acquire) {
        // The runtime's throttle: run, or idle to the period's end.
        let now = crate::elapsed_ns(sh.epoch);
        if let Some(until) = throttle.admit(now, cpu.throttle.duty(), &cpu.throttle) {
            idle_throttled(sh, i, until);
            throttle.throttled(crate::elapsed_ns(sh.epoch).saturating_sub(now), &cpu.throttle);
            continue;
        }
        let t0 = Instant::now();
        let (did, n, deadline) = round(sh, i);
        let ran = crate::elapsed_ns(t0);
        throttle.charge(ran, &cpu.throttle);
        cpu.stats.rounds.fetch_add(1, Ordering::Relaxed);
        if did {
            empty = 0;
            continue;
        }
        empty += 1;
        let limit = if n <= 1 { sh.cfg.park_after } else { sh.cfg.shared_park_after };
        if empty < limit {
            continue;
        }
        empty = 0;
        // Not throttled but idle: the period is not a loaded one.
        throttle.interrupted();
        park(sh, i, n, deadline);
    }
}

/// Idles to `until` (host clock, ns), waking early to stop or for a new
/// duty; spins gaps too short to sleep.
fn idle_throttled(sh: &Shared, i: usize, until: u64) {
    let cpu = &sh.cpus[i];
    let duty = cpu.throttle.duty();
    let wake = || (sh.stop.load(Ordering::Acquire) || cpu.throttle.duty() != duty).then_some(());
    let gap = until.saturating_sub(crate::elapsed_ns(sh.epoch));
    if gap >= SPIN_BELOW_NS {
        let deadline = sh.epoch + Duration::from_nanos(until);
        let _ = sh.bells[i].waiter().wait_until(&SpinPolicy::PARK, Some(deadline), wake);
    } else {
        while crate::elapsed_ns(sh.epoch) < until && wake().is_none() {
            std::hint::spin_loop();
        }
    }
}

/// One round over CPU `i`'s slots: whether any did work, how many slots
/// there are, and the earliest deadline among them.
fn round(sh: &Shared, i: usize) -> (bool, usize, Option<Nanos>) {
    let cpu = &sh.cpus[i];
    let mut slots = lock(&cpu.slots);
    let n = slots.len();
    let mut did = false;
    let mut deadline: Option<Nanos> = None;
    for s in slots.iter_mut() {
        let ts = Instant::now();
        let now_ns = crate::elapsed_ns(sh.epoch);
        let before_restarts = s.load.restarts;
        let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.poll(now_ns)));
        let p = match p {
            Ok(p) => p,
            Err(payload) => {
                // A new instance could not be built: the stack is down.
                *lock(&sh.fatal) = Some(payload);
                sh.stop.store(true, Ordering::Release);
                return (false, n, None);
            }
        };
        let st = &sh.stats[&s.kind()];
        st.polls.fetch_add(1, Ordering::Relaxed);
        if !p.is_idle() {
            let ns = crate::elapsed_ns(ts);
            s.load.busy_ns += ns;
            st.busy_ns.fetch_add(ns, Ordering::Relaxed);
            st.messages.fetch_add(p.messages, Ordering::Relaxed);
            st.bytes.fetch_add(p.bytes, Ordering::Relaxed);
            cpu.stats.busy_ns.fetch_add(ns, Ordering::Relaxed);
            did = true;
        }
        if s.load.restarts != before_restarts {
            st.restarts.store(s.load.restarts, Ordering::Relaxed);
            st.restart_ns_max.store(s.load.restart_ns_max, Ordering::Relaxed);
        }
        let c = s.component();
        st.inbound_fill_pm.store((c.inbound_fill() * 1000.0) as u32, Ordering::Relaxed);
        for (k, f) in c.outbound_fill() {
            st.outbound_fill_pm[kind_index(k)].store((f * 1000.0) as u32, Ordering::Relaxed);
        }
        if let Some(d) = c.deadline_ns(now_ns) {
            deadline = Some(deadline.map_or(d, |x: Nanos| x.min(d)));
        }
    }
    (did, n, deadline)
}

/// Parks CPU `i` until a ring (work for a slot, an attach, a duty change,
/// stop) or the earliest timer of a slot; counts the wake-up and its cost.
fn park(sh: &Shared, i: usize, n: usize, deadline: Option<Nanos>) {
    let cpu = &sh.cpus[i];
    let bell = &sh.bells[i];
    let dedicated_spin = SpinPolicy { spin_iters: 20_000, yield_iters: 0, umwait: true };
    cpu.stats.parks.fetch_add(1, Ordering::Relaxed);
    let version = cpu.version.load(Ordering::Acquire);
    let policy = if n <= 1 { dedicated_spin } else { SpinPolicy::PARK };
    let woke_before = bell.wakeups();
    let dl = deadline.map(|d| sh.epoch + Duration::from_nanos(d));
    let ready = || {
        let go = sh.stop.load(Ordering::Acquire)
            || cpu.version.load(Ordering::Acquire) != version
            || lock(&cpu.slots).iter().any(|s| s.component().has_work());
        go.then_some(())
    };
    let _ = bell.waiter().wait_until(&policy, dl, ready);
    if bell.wakeups() != woke_before {
        let cost = clock_ns().saturating_sub(bell.rang_at_ns());
        cpu.stats.wakeups.fetch_add(1, Ordering::Relaxed);
        cpu.stats.wake_ns.fetch_add(cost, Ordering::Relaxed);
        cpu.stats.wake_ns_max.fetch_max(cost, Ordering::Relaxed);
    }
}
