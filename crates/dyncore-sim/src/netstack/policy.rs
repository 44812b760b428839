//! A stack placed by [`PlacementPolicy`] through the policy boundary: the
//! simulator sends `Event::StackControl { Start }` and, every sample period,
//! `Event::StackLoad` with the components' busy fractions, channel fill
//! and the bitrate, to `Policy::handle`; it executes each
//! `Action::Place` by applying the decision to its layout
//! (`Layout::apply`) and moving its components and setting CPU speeds to
//! match. The live stack drives the same code.
//!
//! Measured per run: throughput, modelled energy (each sample period's
//! power from the CPUs' busy fractions), the decisions, and the reaction
//! time to each rise of the offered load: from the rise to the end of the
//! first sample that delivers at least 90% of the new load.

use dyncore_core::Nanos;
use dyncore_core::placement::{Control, Layout, Mode, PlacementConfig, PlacementPolicy};
use dyncore_core::policy::{Action, Event, Policy};
use dyncore_core::power::SpeedTable;
use serde::Serialize;

use super::scenario::{NetRun, PolicyName};
use super::{CpuSpec, NetParams, RunInput, Sim};
use dyncore_core::profile::StackCosts;

/// Channel capacity, messages, that fill is measured against.
pub const CHANNEL_SLOTS: usize = 64;

/// The result of a policy-driven run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PolicyOutcome {
    pub mbps: f64,
    /// Modelled energy over the measured time, J.
    pub energy_j: f64,
    /// Mean modelled power, W.
    pub power_w: f64,
    /// Reaction time to each rise of the offered load, ms (`None`: never
    /// delivered 90% of it).
    pub reactions_ms: Vec<Option<f64>>,
    /// Decisions taken, with their time (ms) and text.
    pub decisions: Vec<(f64, String)>,
    /// Delivered bitrate per sample, Gbit/s.
    pub timeline_gbps: Vec<(f64, f64)>,
    pub packets: u64,
    pub events: u64,
}

/// Runs `run` (which has a policy) under `costs` and `net`.
pub fn simulate_policy(costs: &StackCosts, net: &NetParams, run: &NetRun, seed: u64) -> PolicyOutcome {
    let name = run.policy.expect("a policy run");
    let comps = run.components.clone().unwrap_or_else(|| super::scenario::required().to_vec());
    let ncpu = run.policy_cpus.unwrap_or(comps.len() as u32) as usize;
    let mode = match name {
        PolicyName::Spread => Mode::Spread,
        PolicyName::Consolidate => Mode::Consolidate,
        PolicyName::Efficient => Mode::Efficient { target_bits_per_s: run.target_gbps.unwrap_or(1.0) * 1e9 },
        PolicyName::Dynamic => Mode::Dynamic,
    };
    let cfg = PlacementConfig::new((0..ncpu).collect(), mode);
    let mut policy =
        PlacementPolicy::new(cfg, &comps, SpeedTable::newtos()).expect("validated: a policy of these CPUs");
    // Before the policy's first decision the components sit on CPU 0 at
    // 1600 MHz; `Start` places them at time 0, before any packet.
    let mut cpus: Vec<CpuSpec> =
        (0..ncpu).map(|_| CpuSpec { mhz: 1600, components: vec![], core: None }).collect();
    cpus[0].components = comps.clone();
    // A placement policy moves the stack's components; the syscall server
    // and its clients stay out of these runs (`netstack::writes`).
    let net = &NetParams { clients: 0, ..net.clone() };
    let input = RunInput { costs, net, cpus: &cpus, load: &run.load, seed, beside: Default::default() };
    let mut sim = Sim::new(&input);
    let mut layout = Layout { cpu_of: comps.iter().map(|&k| (k, 0)).collect(), step_of: Default::default() };
    let mut out = Vec::new();
    let mut decisions = Vec::new();
    let execute = |sim: &mut Sim<'_>,
                   out: &mut Vec<Action>,
                   layout: &mut Layout,
                   decisions: &mut Vec<(f64, String)>| {
        if out.is_empty() {
            return;
        }
        for a in out.drain(..) {
            let Action::Place { decision } = a else { unreachable!("a placement policy only places") };
            layout.apply(&decision.action);
            decisions
                .push((decision.at_ns as f64 / 1e6, format!("{} ({})", decision.action, decision.reason)));
        }
        sim.apply_layout(layout);
    };
    policy.handle(0, &Event::StackControl { control: Control::Start }, &mut out);
    execute(&mut sim, &mut out, &mut layout, &mut decisions);
    let period: Nanos = (run.sample_ms.unwrap_or(1.0) * 1e6).round() as Nanos;
    let end = sim.end_ns();
    let warm = (net.warmup_ms * 1e6).round() as Nanos;
    let mut energy = 0.0;
    let mut timeline = Vec::new();
    let mut t = 0;
    while t < end {
        let next = (t + period).min(end);
        sim.run_until(next);
        let (sample, busy) = sim.take_sample(next - t, CHANNEL_SLOTS);
        if next > warm {
            let span = (next - t.max(warm)) as f64 / 1e9;
            energy += sim.power_w(&busy) * span;
        }
        timeline.push((next as f64 / 1e6, sample.bits_per_s / 1e9));
        policy.handle(next, &Event::StackLoad { sample }, &mut out);
        execute(&mut sim, &mut out, &mut layout, &mut decisions);
        t = next;
    }
    let o = sim.outcome();
    let span_s = (end - warm) as f64 / 1e9;
    let reactions_ms = reactions(&run.load, &timeline);
    PolicyOutcome {
        mbps: o.mbps,
        energy_j: energy,
        power_w: energy / span_s,
        reactions_ms,
        decisions,
        timeline_gbps: timeline,
        packets: o.packets,
        events: o.events,
    }
}

/// For each rise of the offered load: the time to the end of the first
/// sample that delivered at least 90% of the new load.
fn reactions(load: &[super::LoadStep], timeline: &[(f64, f64)]) -> Vec<Option<f64>> {
    let mut out = Vec::new();
    for w in load.windows(2) {
        if w[1].gbps <= w[0].gbps {
            continue;
        }
        let at = w[1].at_ms;
        let hit = timeline.iter().find(|(t, g)| *t > at && *g >= 0.9 * w[1].gbps);
        out.push(hit.map(|(t, _)| t - at));
    }
    out
}
