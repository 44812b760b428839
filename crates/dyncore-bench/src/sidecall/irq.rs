//! The interrupt-virtualisation experiment (Sidecore paper, Figure 4), one
//! configuration per (guest count, signalling mode), measured in the same
//! interleaved rounds as the round trips.

use std::time::Duration;

use anyhow::Result;
use dyncore_core::CpuId;
use dyncore_runtime::sidecore::{IrqConfig, IrqMode, irq};

use crate::{RoundSamples, Spread};

/// Guest counts (paper: up to 32).
pub const GUESTS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];
/// The baseline (8-bit register, handler woken like an interrupt), its
/// polled-handler control, and the sidecore.
pub const MODES: [IrqMode; 3] = [IrqMode::SharedRegister, IrqMode::SharedRegisterPolled, IrqMode::Sidecore];

pub fn mode_name(m: IrqMode) -> &'static str {
    match m {
        IrqMode::SharedRegister => "register+interrupt",
        IrqMode::SharedRegisterPolled => "register, polled",
        IrqMode::Sidecore => "sidecore",
    }
}

fn ser_mode<S: serde::Serializer>(m: &IrqMode, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(mode_name(*m))
}

/// One configuration, accumulated over rounds.
#[derive(Debug, Clone, serde::Serialize)]
pub struct IrqRow {
    pub guests: usize,
    #[serde(serialize_with = "ser_mode")]
    pub mode: IrqMode,
    #[serde(skip)]
    latencies: RoundSamples,
    pub packets: u64,
    signals: u64,
    redundant_signals: u64,
    empty_wakeups: u64,
    /// Latency, device enqueue to guest dequeue.
    pub latency: Option<Spread>,
}

impl IrqRow {
    /// Every configuration, in table order.
    pub fn all() -> Vec<IrqRow> {
        GUESTS
            .iter()
            .flat_map(|&guests| {
                MODES.iter().map(move |&mode| IrqRow {
                    guests,
                    mode,
                    latencies: RoundSamples::default(),
                    packets: 0,
                    signals: 0,
                    redundant_signals: 0,
                    empty_wakeups: 0,
                    latency: None,
                })
            })
            .collect()
    }

    /// Runs one round of this configuration: `packets` packets, one every
    /// 100 µs, to guests drawn from a seed that differs per round.
    pub fn measure_round(&mut self, packets: usize, service_cpu: CpuId, round: usize) -> Result<()> {
        let r = irq::run(&IrqConfig {
            guests: self.guests,
            packets,
            interval: Duration::from_micros(100),
            mode: self.mode,
            service_cpu: Some(service_cpu),
            seed: 42 + round as u64,
        })?;
        self.packets += r.latencies_ns.len() as u64;
        self.signals += r.signals;
        self.redundant_signals += r.redundant_signals;
        self.empty_wakeups += r.empty_wakeups;
        self.latencies.push(r.latencies_ns);
        self.latency = self.latencies.spread();
        Ok(())
    }

    fn per_packet(&self, x: u64) -> f64 {
        x as f64 / self.packets.max(1) as f64
    }

    pub fn signals_per_packet(&self) -> f64 {
        self.per_packet(self.signals)
    }

    pub fn redundant_per_packet(&self) -> f64 {
        self.per_packet(self.redundant_signals)
    }

    pub fn empty_wakeups_per_packet(&self) -> f64 {
        self.per_packet(self.empty_wakeups)
    }
}
