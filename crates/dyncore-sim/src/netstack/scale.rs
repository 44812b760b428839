//! A host with many stacks (issue 11, "Scale"): `stacks` stacks, each with
//! its own TCP, IP and driver and `streams` flows, each placed by its own
//! [`PlacementPolicy`](dyncore_core::placement::PlacementPolicy) on 3 of
//! its `cpus_per_stack` CPUs (the rest of a stack's CPUs host nothing and
//! are power-gated), under a diurnal load: every stack's offered load
//! follows `trough + (peak − trough) · (1 − cos 2π(t/day + phase))/2`,
//! held for `day / steps` at a time, with the phases spread over a quarter
//! day (the stacks serve users in different time zones). Stacks share no
//! CPU, so each is simulated on its own, in order, from its own seed.

use serde::Serialize;

use super::policy::simulate_policy;
use super::scenario::{NetRun, PolicyName};
use super::{LoadStep, NetParams};
use dyncore_core::profile::StackCosts;

/// The scale run's shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleConfig {
    pub stacks: u32,
    pub cpus_per_stack: u32,
    /// Flows per stack.
    pub streams: u32,
    /// Length of the simulated day, ms.
    pub day_ms: f64,
    /// Load steps per day.
    pub steps: u32,
    pub trough_gbps: f64,
    pub peak_gbps: f64,
    pub seed: u64,
}

impl Default for ScaleConfig {
    /// 64 stacks, 512 flows, 1024 CPUs.
    fn default() -> Self {
        ScaleConfig {
            stacks: 64,
            cpus_per_stack: 16,
            streams: 8,
            day_ms: 240.0,
            steps: 24,
            trough_gbps: 0.3,
            peak_gbps: 8.0,
            seed: 1,
        }
    }
}

/// One policy over all the stacks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScaleOutcome {
    pub policy: String,
    /// Modelled energy of all stacks, J.
    pub energy_j: f64,
    /// Payload delivered by all stacks, Mbit/s.
    pub mbps: f64,
    /// Offered load averaged over the day, all stacks, Mbit/s.
    pub offered_mbps: f64,
    /// Segments sent by all stacks.
    pub packets: u64,
    pub events: u64,
    pub decisions: usize,
}

/// The offered load of stack `i`.
pub fn diurnal(cfg: &ScaleConfig, i: u32) -> Vec<LoadStep> {
    let phase = 0.25 * f64::from(i) / f64::from(cfg.stacks.max(1));
    (0..cfg.steps)
        .map(|k| {
            let t = f64::from(k) / f64::from(cfg.steps);
            let x = (1.0 - (2.0 * std::f64::consts::PI * (t + phase)).cos()) / 2.0;
            LoadStep { at_ms: t * cfg.day_ms, gbps: cfg.trough_gbps + (cfg.peak_gbps - cfg.trough_gbps) * x }
        })
        .collect()
}

/// Runs every stack under `policy` for one day.
pub fn run(costs: &StackCosts, net: &NetParams, cfg: &ScaleConfig, policy: PolicyName) -> ScaleOutcome {
    let net = NetParams { streams: cfg.streams, duration_ms: cfg.day_ms, ..net.clone() };
    let mut o = ScaleOutcome {
        policy: policy.name().into(),
        energy_j: 0.0,
        mbps: 0.0,
        offered_mbps: 0.0,
        packets: 0,
        events: 0,
        decisions: 0,
    };
    for i in 0..cfg.stacks {
        let load = diurnal(cfg, i);
        o.offered_mbps += load.iter().map(|l| l.gbps * 1000.0).sum::<f64>() / load.len() as f64;
        let run = NetRun {
            label: format!("stack {i}"),
            group: None,
            cpus: vec![],
            policy: Some(policy),
            policy_cpus: Some(3.min(cfg.cpus_per_stack)),
            components: None,
            target_gbps: (policy == PolicyName::Efficient).then_some(cfg.peak_gbps),
            sample_ms: Some(1.0),
            load,
            governor: None,
        };
        let r = simulate_policy(costs, &net, &run, cfg.seed + u64::from(i));
        o.energy_j += r.energy_j;
        o.mbps += r.mbps;
        o.packets += r.packets;
        o.events += r.events;
        o.decisions += r.decisions.len();
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netstack::calibrate::{base_costs, scaled};

    #[test]
    fn every_stack_runs_its_own_policy_deterministically() {
        let costs = scaled(&base_costs(), 0.43, 112_000.0);
        let cfg = ScaleConfig { stacks: 2, day_ms: 120.0, steps: 12, ..ScaleConfig::default() };
        let net = NetParams::default();
        let spread = run(&costs, &net, &cfg, PolicyName::Spread);
        let dynamic = run(&costs, &net, &cfg, PolicyName::Dynamic);
        assert!(spread.packets > 0 && dynamic.packets > 0);
        // Spread holds every stack on 3 cores from the start; dynamic starts
        // consolidated and moves, so it decides more.
        assert!(dynamic.decisions > spread.decisions, "{dynamic:?} {spread:?}");
        // Both deliver most of the offered load.
        for o in [&spread, &dynamic] {
            assert!(o.mbps > 0.8 * o.offered_mbps, "{o:?}");
        }
        // The same run twice: the same bytes.
        assert_eq!(run(&costs, &net, &cfg, PolicyName::Dynamic), dynamic);
    }
}
