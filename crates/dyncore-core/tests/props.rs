//! Property tests: random event sequences through the node manager and the
//! cluster scheduler, checking their invariants after every step.

use std::collections::BTreeMap;

use dyncore_core::node::NodeManager;
use dyncore_core::policy::{Action, CpuState, Event, Policy, ThreadSpec};
use dyncore_core::reconfig::Mode;
use dyncore_core::sched::{ClusterScheduler, Config};
use dyncore_core::speed::{SpeedClass, SpeedModel};
use dyncore_core::topology::Topology;
use dyncore_core::{CpuSet, Nanos};
use proptest::prelude::*;

const MS: Nanos = 1_000_000;

#[derive(Debug, Clone)]
enum NmOp {
    Request { thread: usize, wanted: usize, weight: u8 },
    Release { thread: usize, notify: bool },
    NativeBusy(u16),
}

fn nm_op() -> impl Strategy<Value = NmOp> {
    prop_oneof![
        (0usize..8, prop::sample::select(vec![1usize, 2, 4]), 0u8..5)
            .prop_map(|(thread, wanted, weight)| NmOp::Request { thread, wanted, weight }),
        (0usize..8, any::<bool>()).prop_map(|(thread, notify)| NmOp::Release { thread, notify }),
        any::<u16>().prop_map(NmOp::NativeBusy),
    ]
}

proptest! {
    /// No CPU is ever in two objects; objects are aligned blocks no larger
    /// than asked. (Work conservation — no pool CPU left idle while a
    /// request has fewer CPUs than it asked — is not checked here.)
    #[test]
    fn node_manager_keeps_objects_disjoint(ops in prop::collection::vec(nm_op(), 1..60), smt in any::<bool>()) {
        let topo = if smt { Topology::uniform_smt(1, 6) } else { Topology::uniform(1, 12) };
        let mut nm = NodeManager::new(&topo, 0, 4);
        let mut busy = CpuSet::new();
        let mut live: BTreeMap<usize, usize> = BTreeMap::new();
        for op in ops {
            match op {
                NmOp::Request { thread, wanted, weight } => {
                    if live.contains_key(&thread) { continue; }
                    live.insert(thread, wanted);
                    nm.request(thread, wanted, weight as f64, &busy);
                }
                NmOp::Release { thread, notify } => {
                    live.remove(&thread);
                    nm.release(thread, notify, &busy);
                }
                NmOp::NativeBusy(mask) => {
                    busy = CpuSet::new();
                    for c in 0..12 { if mask & (1 << c) != 0 { busy.insert(c); } }
                    nm.rebalance(&busy);
                }
            }
            prop_assert!(nm.check().is_ok(), "{:?}", nm.check());
            let mut seen = CpuSet::new();
            for (&t, &w) in &live {
                let o = nm.object_of(t);
                prop_assert!(o.is_disjoint(&seen));
                prop_assert!(o.len() <= w);
                seen.extend_from(&o);
            }
        }
    }
}

#[derive(Debug, Clone)]
enum SchedOp {
    Spawn { nice: i8, tax_pct: u16, want: usize, pin: Option<u8> },
    Exit(usize),
    Advance(u8),
}

fn sched_op() -> impl Strategy<Value = SchedOp> {
    prop_oneof![
        3 => (-3i8..4, 1u16..400, prop::sample::select(vec![1usize, 2, 4]), prop::option::weighted(0.2, 0u8..8))
            .prop_map(|(nice, tax_pct, want, pin)| SchedOp::Spawn { nice, tax_pct, want, pin }),
        1 => (0usize..64).prop_map(SchedOp::Exit),
        4 => (1u8..20).prop_map(SchedOp::Advance),
    ]
}

fn config() -> Config {
    Config {
        min_granularity_ns: 16 * MS,
        chameleon: true,
        notify_on_exit: true,
        max_fuse: 4,
        speed: SpeedModel::DYNAMIC,
        reconfig_mode: Mode::Bolt,
    }
}

fn spec(nice: i32, tax: f64, want_cpus: usize, affinity: Option<CpuSet>) -> ThreadSpec {
    ThreadSpec { nice, tax, want_cpus, weight: 1.0, affinity, class: SpeedClass::Medium }
}

/// A backend whose reconfigurations take no time: answers every `Offline`
/// and `Online` at once.
fn answer_reconfigs(s: &mut ClusterScheduler, now: Nanos, out: &[Action]) {
    for a in out {
        if let Action::Offline { id, .. } | Action::Online { id, .. } = a {
            s.handle(now, &Event::ReconfigDone { id: *id, took_ns: 0 }, &mut Vec::new());
        }
    }
}

/// Mirrors CPU states from the actions and checks them.
struct Mirror {
    state: Vec<CpuState>,
    since: Vec<Nanos>,
    busy_ns: Vec<u64>,
}

impl Mirror {
    fn apply(&mut self, now: Nanos, out: &mut Vec<Action>) -> Result<(), TestCaseError> {
        for a in out.drain(..) {
            if let Action::Dispatch { cpu, state } = a {
                if !matches!(self.state[cpu], CpuState::Idle) {
                    self.busy_ns[cpu] += now - self.since[cpu];
                }
                self.state[cpu] = state;
                self.since[cpu] = now;
            }
        }
        // A thread runs on at most one CPU; a borrowing thread runs on its representative.
        let mut running = BTreeMap::new();
        for (cpu, s) in self.state.iter().enumerate() {
            if let CpuState::Running { thread, .. } = s {
                prop_assert!(running.insert(*thread, cpu).is_none(), "thread {thread} on two CPUs");
            }
        }
        for s in &self.state {
            if let CpuState::Borrowed { by } = s {
                prop_assert!(running.contains_key(by), "CPU borrowed by {by}, which is not running");
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Random spawns, exits and ticks: the scheduler's invariants hold after
    /// every step, virtual runtimes never decrease, and CPU time handed out
    /// never exceeds capacity x elapsed time.
    #[test]
    fn scheduler_invariants_hold(ops in prop::collection::vec(sched_op(), 1..80), smt in any::<bool>()) {
        let topo = if smt { Topology::uniform_smt(2, 2) } else { Topology::uniform(2, 4) };
        let n = topo.ncpus();
        let mut s = ClusterScheduler::new(topo, config());
        let mut out = Vec::new();
        let mut spawned = 0;
        let mut mirror = Mirror { state: vec![CpuState::Idle; n], since: vec![0; n], busy_ns: vec![0; n] };
        let mut now: Nanos = 0;
        let mut live: Vec<usize> = Vec::new();
        let mut last_vr: BTreeMap<usize, u64> = BTreeMap::new();
        for op in ops {
            match op {
                SchedOp::Spawn { nice, tax_pct, want, pin } => {
                    let affinity = pin.map(|p| CpuSet::single(p as usize % n));
                    let t = spawned;
                    spawned += 1;
                    let spec = spec(nice as i32, tax_pct as f64 / 100.0, want, affinity);
                    s.handle(now, &Event::Spawn { thread: t, spec }, &mut out);
                    live.push(t);
                }
                SchedOp::Exit(i) => {
                    if live.is_empty() { continue; }
                    let t = live.remove(i % live.len());
                    s.handle(now, &Event::Exit { thread: t }, &mut out);
                    last_vr.remove(&t);
                }
                SchedOp::Advance(ticks) => {
                    for _ in 0..ticks {
                        now += 4 * MS;
                        for c in 0..n { s.handle(now, &Event::Tick { cpu: c }, &mut out); }
                        answer_reconfigs(&mut s, now, &out);
                        mirror.apply(now, &mut out)?;
                    }
                }
            }
            answer_reconfigs(&mut s, now, &out);
            mirror.apply(now, &mut out)?;
            prop_assert!(s.check().is_ok(), "{:?}", s.check());
            for &t in &live {
                let v = s.vruntime(t);
                let prev = last_vr.insert(t, v).unwrap_or(0);
                prop_assert!(v >= prev, "thread {t}'s vruntime went from {prev} to {v}");
            }
        }
        let busy: u64 = mirror.busy_ns.iter().sum();
        prop_assert!(busy <= n as u64 * now, "{busy} ns handed out in {now} ns on {n} CPUs");
    }

    /// Liveness: with finite tax rates and equal nice levels, every runnable
    /// thread runs within a bounded time of waking, fused objects or not.
    #[test]
    fn every_runnable_thread_runs_within_a_bound(
        specs in prop::collection::vec((50u16..400, prop::sample::select(vec![1usize, 2, 4]), 0u64..100), 1..10),
    ) {
        let topo = Topology::uniform(1, 4);
        let n = topo.ncpus();
        let mut s = ClusterScheduler::new(topo, config());
        let mut out = Vec::new();
        let mut woken: Vec<(usize, Nanos)> = Vec::new();
        let mut last_ran: BTreeMap<usize, Nanos> = BTreeMap::new();
        let mut spawn_at: Vec<(Nanos, usize, f64)> =
            specs.iter().map(|&(tax, want, at)| (at * MS, want, tax as f64 / 100.0)).collect();
        spawn_at.sort_by_key(|x| x.0);
        // Bound: 10 threads x (16 ms granularity + 4 ms tick) per round, a
        // few rounds for borrowed CPUs to be paid back at tax >= 0.5.
        let bound: Nanos = 1_500 * MS;
        let mut now = 0;
        while now < 4_000 * MS {
            while let Some(&(at, want, tax)) = spawn_at.first() {
                if at > now { break; }
                spawn_at.remove(0);
                let t = woken.len();
                s.handle(now, &Event::Spawn { thread: t, spec: spec(0, tax, want, None) }, &mut out);
                woken.push((t, now));
            }
            for c in 0..n { s.handle(now, &Event::Tick { cpu: c }, &mut out); }
            answer_reconfigs(&mut s, now, &out);
            for c in 0..n {
                if let CpuState::Running { thread, .. } = s.cpu_state(c) {
                    last_ran.insert(thread, now);
                }
            }
            for &(t, at) in &woken {
                let last = last_ran.get(&t).copied().unwrap_or(at);
                prop_assert!(now - last <= bound, "thread {t} has waited {} ms", (now - last) / MS);
            }
            out.clear();
            now += 4 * MS;
        }
    }
}
