//! What `bench reconfig` measures on runtime CPUs, one round at a time:
//!
//! * offline / online latency ([`Sweep`]): the `Runtime::offline` /
//!   `online` call, from entry to return, on a runtime whose CPUs are idle
//!   (the mechanism's cost; the critical path only — Bolt's deferred work
//!   happens after). The whole calls are timed with the runtime's step
//!   timing off (reading the clock around every step would add its own
//!   cost, per CPU, to the bulk calls); a second pass with step timing on
//!   gives each critical step's time;
//! * entry latency ([`EntryExit`]; offline of one CPU that is running a
//!   task in short steps): from the call's start until no task runs on the
//!   CPU any more (`ReconfigReport::entry_ns`);
//! * exit latency: from the start of the online call until the first step
//!   of a task placed on the CPU right after the call returned;
//! * Bolt's *cold* online ([`ColdOnline`]): online after the kept cache was
//!   reclaimed, so the plan re-creates it (the step a machine profile needs
//!   for a simulator that applies Bolt's deferred work).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use dyncore_core::{CpuId, CpuSet};
use dyncore_runtime::cpu::{Ctx, Mode, ReconfigReport, Runtime, TaskPoll};

use crate::{RoundSamples, ns};

/// Each critical step's times by `Step::name` (one sample per occurrence),
/// and the step names of the last plan, in order.
#[derive(Debug, Clone, Default)]
pub struct Steps {
    pub by_name: Vec<(&'static str, Vec<u64>)>,
    pub plan: Vec<&'static str>,
}

impl Steps {
    fn add(&mut self, r: &ReconfigReport) {
        self.plan = r.step_ns.iter().map(|(s, _)| s.name()).collect();
        for (step, t) in &r.step_ns {
            let name = step.name();
            match self.by_name.iter_mut().find(|(n, _)| *n == name) {
                Some((_, v)) => v.push(*t),
                None => self.by_name.push((name, vec![*t])),
            }
        }
    }

    /// The median of each step, in first-seen order.
    pub fn medians(&self) -> Vec<(&'static str, u64)> {
        self.by_name
            .iter()
            .map(|(n, v)| {
                let mut s = v.clone();
                s.sort_unstable();
                (*n, crate::percentile(&s, 0.5) as u64)
            })
            .collect()
    }
}

/// Offline/online latencies of one (mode, number of CPUs) configuration.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub mode: Mode,
    pub cpus: usize,
    pub offline: RoundSamples,
    pub online: RoundSamples,
    pub offline_steps: Steps,
    pub online_steps: Steps,
}

/// Entry and exit latency of one mode (one CPU).
#[derive(Debug, Clone)]
pub struct EntryExit {
    pub mode: Mode,
    pub entry: RoundSamples,
    pub exit: RoundSamples,
}

/// Bolt online after the kept cache was reclaimed (one CPU).
#[derive(Debug, Clone, Default)]
pub struct ColdOnline {
    pub online: RoundSamples,
    pub steps: Steps,
}

/// How many of each measurement one round takes.
#[derive(Debug, Clone, Copy)]
pub struct PerRound {
    /// Timed offline/online pairs (and entry/exit cycles).
    pub pairs: usize,
    /// Pairs with step timing on, for the per-step breakdown.
    pub breakdown: usize,
    /// Cold online cycles.
    pub cold: usize,
}

/// The `k` highest runtime CPUs (CPU 0 stays online).
fn top(n: usize, k: usize) -> CpuSet {
    CpuSet::range(n - k, n)
}

/// One offline and one online of `set`, checked; their reports and times
/// (whole call, from before the call to after its return).
fn cycle(rt: &Runtime, set: &CpuSet, mode: Mode) -> Result<[(ReconfigReport, u64); 2]> {
    let t0 = Instant::now();
    let off = rt.offline(set, mode)?;
    let t_off = ns(t0.elapsed());
    ensure!(off.changed() == set, "offline of {set} changed only {}", off.changed());
    let t0 = Instant::now();
    let on = rt.online(set, mode)?;
    let t_on = ns(t0.elapsed());
    ensure!(on.changed() == set, "online of {set} changed only {}", on.changed());
    Ok([(off, t_off), (on, t_on)])
}

impl Sweep {
    pub fn new(mode: Mode, cpus: usize) -> Sweep {
        Sweep {
            mode,
            cpus,
            offline: RoundSamples::default(),
            online: RoundSamples::default(),
            offline_steps: Steps::default(),
            online_steps: Steps::default(),
        }
    }

    /// One round: two untimed cycles (warm caches, threads, allocations),
    /// the timed pairs with step timing off, then the breakdown pairs.
    pub fn measure_round(&mut self, rt: &Runtime, n: PerRound) -> Result<()> {
        let set = top(rt.cpus(), self.cpus);
        let (mut off, mut on) = (Vec::with_capacity(n.pairs), Vec::with_capacity(n.pairs));
        rt.set_step_timing(false);
        for i in 0..n.pairs + 2 {
            let [(_, t_off), (_, t_on)] = cycle(rt, &set, self.mode)?;
            if i >= 2 {
                off.push(t_off);
                on.push(t_on);
            }
        }
        rt.set_step_timing(true);
        for _ in 0..n.breakdown {
            let [(r_off, _), (r_on, _)] = cycle(rt, &set, self.mode)?;
            self.offline_steps.add(&r_off);
            self.online_steps.add(&r_on);
        }
        self.offline.push(off);
        self.online.push(on);
        Ok(())
    }
}

impl ColdOnline {
    /// One round of cold Bolt onlines of the last CPU: offline, reclaim the
    /// kept cache (as memory pressure would), online with step timing on.
    pub fn measure_round(&mut self, rt: &Runtime, n: PerRound) -> Result<()> {
        let set = CpuSet::single(rt.cpus() - 1);
        let mut on = Vec::with_capacity(n.cold);
        rt.set_step_timing(true);
        for _ in 0..n.cold {
            let off = rt.offline(&set, Mode::Bolt)?;
            ensure!(!off.is_noop(), "CPU {set} was already offline before a cold online");
            ensure!(rt.reclaim_memory() >= 1, "reclaiming memory freed no kept cache of {set}");
            let t0 = Instant::now();
            let r = rt.online(&set, Mode::Bolt)?;
            on.push(ns(t0.elapsed()));
            ensure!(
                r.step_ns.iter().any(|(s, _)| s.name() == "create-cache"),
                "a cold Bolt online did not re-create the cache: {:?}",
                r.plan
            );
            self.steps.add(&r);
        }
        self.online.push(on);
        Ok(())
    }
}

/// When and where a task ran its first step (`None`: not yet).
type FirstStep = Arc<Mutex<Option<(Instant, CpuId)>>>;

/// A task that spins in short steps until told to stop, and records when
/// its first step ran.
fn busy_task(
    stop: Arc<AtomicBool>,
    first: FirstStep,
) -> impl FnMut(&mut Ctx<'_>) -> TaskPoll + Send + 'static {
    move |cx: &mut Ctx<'_>| {
        {
            let mut f = first.lock().unwrap_or_else(|p| p.into_inner());
            if f.is_none() {
                *f = Some((Instant::now(), cx.cpu()));
            }
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_micros(5) {
            std::hint::spin_loop();
        }
        if stop.load(Ordering::Relaxed) { TaskPoll::Ready } else { TaskPoll::Pending }
    }
}

/// Waits for a task's first step; returns when and where it ran.
fn first_step(first: &FirstStep) -> Result<(Instant, CpuId)> {
    let t0 = Instant::now();
    loop {
        if let Some(f) = *first.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(f);
        }
        ensure!(t0.elapsed() < Duration::from_secs(10), "a task never ran its first step");
        std::thread::yield_now();
    }
}

impl EntryExit {
    pub fn new(mode: Mode) -> EntryExit {
        EntryExit { mode, entry: RoundSamples::default(), exit: RoundSamples::default() }
    }

    /// One round. Entry latency: offline of the last CPU while it runs a
    /// task in 5 µs steps. Exit latency: online of it, then a task placed on
    /// it at once. Two untimed cycles first.
    pub fn measure_round(&mut self, rt: &Runtime, n: PerRound) -> Result<()> {
        let cpu = rt.cpus() - 1;
        let set = CpuSet::single(cpu);
        let (mut entry, mut exit) = (Vec::with_capacity(n.pairs), Vec::with_capacity(n.pairs));
        let start_task = |stop: &Arc<AtomicBool>| -> Result<FirstStep> {
            let first = Arc::new(Mutex::new(None));
            rt.spawn_on(cpu, busy_task(stop.clone(), first.clone()))?;
            Ok(first)
        };
        let mut stop = Arc::new(AtomicBool::new(false));
        first_step(&start_task(&stop)?)?;
        for i in 0..n.pairs + 2 {
            let r = rt.offline(&set, self.mode)?;
            let e = r.entry_ns.context("an offline report has an entry latency")?;
            // The task moved to another CPU; let it finish there.
            stop.store(true, Ordering::Relaxed);
            stop = Arc::new(AtomicBool::new(false));
            let t0 = Instant::now();
            let back = rt.online(&set, self.mode)?;
            ensure!(!back.is_noop(), "CPU {set} was already online again");
            let (t1, on) = first_step(&start_task(&stop)?)?;
            ensure!(on == cpu, "the probe task ran on CPU {on}, not {cpu}");
            if i >= 2 {
                entry.push(e);
                exit.push(ns(t1 - t0));
            }
        }
        stop.store(true, Ordering::Relaxed);
        self.entry.push(entry);
        self.exit.push(exit);
        Ok(())
    }
}
