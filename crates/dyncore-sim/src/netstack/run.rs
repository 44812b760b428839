//! Running a network-stack scenario over its seeds: every run once per
//! seed, each figure as the median over the seeds with its range
//! ([`Observed`]). The report (`crates/dyncore-report/src/newtos.rs`) and the
//! claims ([`super::claims`]) read the [`RunRow`]s.

use dyncore_core::placement::ComponentKind;
use dyncore_core::power::{PowerModel, SpeedTable};
use serde::Serialize;

use super::outcome::Outcome;
use super::policy::{PolicyOutcome, simulate_policy};
use super::scenario::{NetRun, NetScenario};
use super::{NetParams, RunInput, simulate};
use crate::claims::Observed;

/// One run's results over the seeds.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    pub label: String,
    pub group: String,
    pub layout: String,
    pub mbps: Observed,
    /// Modelled power of the cores in use, at their simulated busy and
    /// idle times.
    pub power_w: Observed,
    /// Modelled power of the whole chip (4 cores and the uncore) with every
    /// core busy at this run's chip frequency: Table 2's condition (layouts
    /// by hand).
    pub chip_w: Option<f64>,
    /// The idle governor the run used.
    pub governor: &'static str,
    /// The CPUs' MHz over 3 × 1600 MHz (the paper's Figure 2 bars).
    pub resources: f64,
    /// The cores' busy time weighted by their MHz, over 3 × 1600 MHz (the
    /// paper's Figure 5 bars); layouts by hand only.
    pub normalised_utilisation: Option<Observed>,
    /// Each component's busy fraction on its CPU (layouts by hand).
    pub busy: Vec<(ComponentKind, Observed)>,
    /// Layouts by hand, first seed: per CPU, its components and the fraction
    /// of the measured time in each idle state (`idle::state_names`).
    pub idle: Vec<(String, Vec<f64>)>,
    /// Policy runs: energy (J) and reaction times (ms, first seed).
    pub energy_j: Option<Observed>,
    pub reactions_ms: Vec<Option<f64>>,
    /// Policy runs: the decisions of the first seed.
    pub decisions: Vec<(f64, String)>,
    pub packets: u64,
}

impl RunRow {
    /// A component's busy fraction (median), 0 if it is not placed.
    pub fn busy_of(&self, k: ComponentKind) -> f64 {
        self.busy.iter().find(|(c, _)| *c == k).map_or(0.0, |(_, b)| b.median)
    }
}

/// How the run is laid out, for tables: "tcp@1600, ip@600, driver@600".
pub fn layout_text(r: &NetRun) -> String {
    if let Some(p) = r.policy {
        return format!("{} on {} CPUs", p.name(), r.policy_cpus.unwrap_or(3));
    }
    r.cpus
        .iter()
        .map(|c| {
            let names: Vec<&str> = c.components.iter().map(|k| k.name()).collect();
            let ht = c.core.map(|k| format!(" (core {k})")).unwrap_or_default();
            format!("{}@{}{ht}", names.join("+"), c.mhz)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn observed(v: &[f64]) -> Observed {
    Observed::of(v).expect("at least one seed, finite values")
}

/// The scenario's seeds: `seed`, `seed + 1`, ... (`seeds` of them).
pub fn seeds_of(sc: &NetScenario) -> Vec<u64> {
    (0..u64::from(sc.seeds)).map(|i| sc.seed + i).collect()
}

/// One seed of a run: under its placement policy, or in its fixed
/// placement.
pub enum SeedRun {
    Policy(PolicyOutcome),
    Fixed(Outcome),
}

/// Run `r`'s network: the scenario's, with the run's governor where it
/// names one.
pub fn net_of(sc: &NetScenario, r: &NetRun) -> NetParams {
    NetParams { governor: r.governor.unwrap_or(sc.net.governor), ..sc.net.clone() }
}

/// Run `r` of `sc` at `seed` ([`SeedRun`]) on its network ([`net_of`]).
pub fn run_seed(sc: &NetScenario, r: &NetRun, seed: u64) -> SeedRun {
    let net = net_of(sc, r);
    if r.policy.is_some() {
        SeedRun::Policy(simulate_policy(&sc.stack, &net, r, seed))
    } else {
        SeedRun::Fixed(simulate(&RunInput {
            costs: &sc.stack,
            net: &net,
            cpus: &r.cpus,
            load: &r.load,
            seed,
            beside: Default::default(),
        }))
    }
}

/// Runs every run of `sc` once per seed of `seeds` (not empty).
pub fn run_scenario(sc: &NetScenario, seeds: &[u64]) -> Vec<RunRow> {
    assert!(!seeds.is_empty(), "at least one seed");
    let mut rows = Vec::new();
    let table = SpeedTable::newtos();
    for r in &sc.runs {
        let net = net_of(sc, r);
        let mut mbps = Vec::new();
        let mut power = Vec::new();
        let mut energy = Vec::new();
        let mut used = Vec::new();
        let mut busy: Vec<Vec<f64>> = vec![Vec::new(); ComponentKind::ALL.len()];
        let mut reactions = Vec::new();
        let mut decisions = Vec::new();
        let mut resources = 0.0;
        let mut packets = 0;
        let mut idle = Vec::new();
        for (i, &seed) in seeds.iter().enumerate() {
            match run_seed(sc, r, seed) {
                SeedRun::Policy(o) => {
                    mbps.push(o.mbps);
                    power.push(o.power_w);
                    energy.push(o.energy_j);
                    packets += o.packets;
                    if i == 0 {
                        reactions = o.reactions_ms;
                        decisions = o.decisions;
                    }
                }
                SeedRun::Fixed(o) => {
                    mbps.push(o.mbps);
                    power.push(o.power_w);
                    used.push(o.normalised_utilisation);
                    resources = o.resources;
                    if i == 0 {
                        idle = o
                            .cpus
                            .iter()
                            .map(|c| {
                                let names: Vec<&str> = c.components.iter().map(|k| k.name()).collect();
                                (names.join("+"), c.residency.clone())
                            })
                            .collect();
                    }
                    packets += o.packets;
                    for (k, v) in &o.components {
                        let idx = ComponentKind::ALL.iter().position(|x| x == k).expect("a known component");
                        busy[idx].push(v.busy);
                    }
                }
            }
        }
        let busy = ComponentKind::ALL
            .iter()
            .zip(busy)
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (*k, observed(&v)))
            .collect();
        rows.push(RunRow {
            label: r.label.clone(),
            group: r.group.clone().unwrap_or_else(|| r.label.clone()),
            layout: layout_text(r),
            mbps: observed(&mbps),
            power_w: observed(&power),
            chip_w: r.cpus.first().map(|c| {
                let step = table.get(table.by_mhz(c.mhz).expect("validated speed"));
                PowerModel::newtos().chip_w(step.chip_mhz)
            }),
            governor: net.governor.name(),
            resources,
            normalised_utilisation: (!used.is_empty()).then(|| observed(&used)),
            busy,
            idle,
            energy_j: (!energy.is_empty()).then(|| observed(&energy)),
            reactions_ms: reactions,
            decisions,
            packets,
        });
    }
    rows
}
