//! What a run produces: bitrate, modelled power, resources, each CPU's and
//! each component's share of the measured time.

use std::collections::BTreeMap;

use dyncore_core::idle::NEHALEM;
use dyncore_core::placement::ComponentKind;
use dyncore_core::power::{PowerModel, SpeedStep};
use serde::Serialize;

use super::sim::{CpuState, Sim};

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
    /// Fraction of the measured time it polled with nothing to do
    /// (`spin_ns`).
    pub polled: f64,
    /// Times it woke from sleep.
    pub wakeups: u64,
    /// Fraction of the measured time in each idle state, shallowest first
    /// (`idle::state_names`; with fixed wake-ups all in the first).
    pub residency: Vec<f64>,
}

/// The result of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Payload acknowledged per second over the measured time, Mbit/s.
    pub mbps: f64,
    /// Modelled power of the cores that host components, W.
    pub power_w: f64,
    /// Sum of the MHz of the cores in use (a core with two hyperthreads
    /// once) over 3 × 1600 MHz (the paper's Figure 2 bars).
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

impl Sim<'_> {
    /// The outcome so far (measured from the end of the warm-up).
    pub fn outcome(&self) -> Outcome {
        let span = self.now.saturating_sub(self.measure_from).max(1) as f64;
        let power = PowerModel::newtos();
        let mut cpus = Vec::new();
        // Per core: its step, busy fraction (its threads' added up, at most
        // 1) and power-gated fraction (a core is gated only while both its
        // threads are in C6: the smaller of their C6 fractions).
        let mut cores: BTreeMap<u32, (SpeedStep, f64, f64)> = BTreeMap::new();
        for cpu in &self.cpus {
            let mut busy = cpu.busy_ns;
            if cpu.state == CpuState::Busy && self.now > self.measure_from {
                busy += self.now - cpu.busy_since.max(self.measure_from);
            }
            let mut idle = cpu.idle.clone();
            if cpu.state == CpuState::Asleep {
                idle.account(self.now, self.measure_from, self.now);
            }
            let busy = busy as f64 / span;
            let mut polled = cpu.polled_ns;
            if let Some(t) = cpu.spinning_since
                && self.now > self.measure_from
            {
                polled += self.now - t.max(self.measure_from);
            }
            assert!(busy <= 1.0 + 1e-9, "a CPU busier than the time that passed");
            let residency: Vec<f64> = idle.residency_ns.iter().map(|&r| r as f64 / span).collect();
            let gated: f64 =
                NEHALEM.iter().zip(&residency).filter(|(s, _)| s.power_gated).map(|(_, r)| r).sum();
            assert!(busy + residency.iter().sum::<f64>() <= 1.0 + 1e-9, "busy and idle beyond the time");
            cpus.push(CpuOutcome {
                mhz: cpu.step.mhz,
                components: cpu.comps.iter().map(|&c| self.comps[c].kind).collect(),
                busy,
                polled: polled as f64 / span,
                wakeups: cpu.wakeups,
                residency,
            });
            // The system's core (the syscall server's) is not one of the
            // stack's cores the paper's bars count.
            if !cpu.comps.is_empty() && !cpu.system {
                let e = cores.entry(cpu.core).or_insert((cpu.step, 0.0, 1.0));
                if cpu.step.mhz > e.0.mhz {
                    e.0 = cpu.step;
                }
                e.1 = (e.1 + busy).min(1.0);
                e.2 = e.2.min(gated);
            }
        }
        let power_w = cores.values().map(|(s, b, g)| power.core_w_gated(*s, *b, *g)).sum();
        let normalised_utilisation =
            cores.values().map(|(s, b, _)| b * f64::from(s.mhz)).sum::<f64>() / FULL_RESOURCES_MHZ;
        // A core counts once: two hyperthreads share its clock (§4.4: "two
        // cores at 200 MHz is just 66% of the resources of 3 dedicated cores").
        let resources = cores.values().map(|(s, _, _)| f64::from(s.mhz)).sum::<f64>() / FULL_RESOURCES_MHZ;
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
