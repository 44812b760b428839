//! The rows of the round-trip table: what each measures, its kind, and how
//! many round trips it takes per round.

use std::sync::Arc;

use anyhow::Result;
use dyncore_runtime::sidecore::{CpuidLeaf, NullService, QueryService, StateTrap};

use super::calls::{Cpus, contended_lock_calls, same_calls, state_calls};
use super::measure::{self, Clock, Sample};
use crate::{RoundSamples, Spread};

/// What a row is, for the plots' colours and legend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The raw spin ping-pong: the cross-core floor.
    Floor,
    Sidecall,
    /// The same call taken in the caller (the sidecore switched off).
    Trap,
    /// A user-space queue between two pinned threads.
    QueuePeer,
    /// A hand-off through the kernel (futex, pipe).
    KernelPath,
}

impl Kind {
    pub const ALL: [Kind; 5] = [Kind::Sidecall, Kind::Trap, Kind::QueuePeer, Kind::KernelPath, Kind::Floor];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Floor => "floor (raw spin)",
            Kind::Sidecall => "sidecall",
            Kind::Trap => "trap, in the caller",
            Kind::QueuePeer => "queue peer (user space)",
            Kind::KernelPath => "kernel path",
        }
    }

    /// Index into [`Kind::ALL`].
    pub fn index(self) -> usize {
        Kind::ALL.iter().position(|&k| k == self).unwrap_or(0)
    }

    /// The plots' colour: the shared palette's, and grey for the floor, so
    /// it reads as a reference rather than a contender.
    pub fn colour(self) -> plotters::style::RGBColor {
        use dyncore_report::plot::PALETTE;
        match self {
            Kind::Sidecall => PALETTE[0],
            Kind::Trap => PALETTE[1],
            Kind::QueuePeer => PALETTE[2],
            Kind::KernelPath => PALETTE[3],
            Kind::Floor => plotters::style::RGBColor(110, 110, 110),
        }
    }
}

/// The CPUID leaf queried (processor signature and feature bits).
const CPUID_LEAF_1: CpuidLeaf = CpuidLeaf { leaf: 1, subleaf: 0 };

/// A row to measure.
#[derive(Debug, Clone)]
pub struct Spec {
    pub key: &'static str,
    pub label: &'static str,
    pub what: String,
    pub kind: Kind,
    /// Round trips per round.
    pub iters: u64,
}

/// A measured row.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub key: &'static str,
    pub label: &'static str,
    pub what: String,
    pub kind: Kind,
    pub iters_per_round: u64,
    #[serde(skip)]
    pub samples: RoundSamples,
    /// Sum of the rounds' wall times (for the mean).
    pub total_ns: f64,
    pub spread: Option<Spread>,
}

impl Row {
    pub fn new(spec: &Spec) -> Row {
        Row {
            key: spec.key,
            label: spec.label,
            what: spec.what.clone(),
            kind: spec.kind,
            iters_per_round: spec.iters,
            samples: RoundSamples::default(),
            total_ns: 0.0,
            spread: None,
        }
    }

    pub fn add(&mut self, s: Sample) {
        self.total_ns += s.total_ns;
        self.samples.push(s.samples_ns);
        self.spread = self.samples.spread();
    }

    /// Mean round trip, from the total time (not quantised by the timer).
    pub fn mean_ns(&self) -> f64 {
        self.total_ns / self.spread.map_or(0, |s| s.samples).max(1) as f64
    }
}

/// Per-round round trips: `fast` for most rows, `slow` for the rows that
/// take microseconds (futex, pipe, CPUID, mprotect).
#[derive(Debug, Clone, Copy)]
pub struct Iters {
    pub fast: u64,
    pub slow: u64,
}

/// A row's description: key, label, what it measures, kind, whether it
/// takes microseconds per round trip (and so fewer of them), and whether it
/// needs two cores.
type Def = (&'static str, &'static str, &'static str, Kind, bool, bool);

/// Every row, in table order.
const DEFS: [Def; 14] = [
    (
        "raw",
        "raw spin",
        "raw spin ping-pong between two pinned threads (the floor)",
        Kind::Floor,
        false,
        true,
    ),
    ("sc_null", "sidecall Null", "sidecall: Null", Kind::Sidecall, false, true),
    (
        "sc_query",
        "sidecall Query",
        "sidecall: Query (CPUID leaf 1 from the sidecore's table)",
        Kind::Sidecall,
        false,
        true,
    ),
    ("sc_state", "sidecall State", "sidecall: State update (radix-map entry)", Kind::Sidecall, false, true),
    ("futex", "futex", "futex wake/wait ping-pong across cores", Kind::KernelPath, true, true),
    ("pipe", "pipe", "pipe ping-pong (1 byte each way)", Kind::KernelPath, true, true),
    ("rtrb", "rtrb", "rtrb SPSC queue ping-pong", Kind::QueuePeer, false, true),
    ("arrayqueue", "ArrayQueue", "crossbeam ArrayQueue ping-pong", Kind::QueuePeer, false, true),
    ("ring", "dyncore ring", "dyncore-ring SPSC ring ping-pong", Kind::QueuePeer, false, true),
    (
        "trap_lock_contended",
        "State: lock, contended",
        "trap: caller updates the radix map under its lock, contended by a thread on the other core",
        Kind::Trap,
        false,
        true,
    ),
    // Trap paths, taken by the same client code with the sidecore switched off.
    (
        "trap_null",
        "null syscall",
        "trap: null system call (getppid), via Client::call with the sidecore off",
        Kind::Trap,
        false,
        false,
    ),
    ("trap_cpuid", "CPUID", "trap: CPUID in the caller", Kind::Trap, true, false),
    (
        "trap_lock",
        "State: lock",
        "trap: caller updates the radix map under its lock (uncontended)",
        Kind::Trap,
        false,
        false,
    ),
    (
        "trap_mprotect",
        "State: mprotect",
        "trap: mprotect of a real page + locked map update",
        Kind::Trap,
        true,
        false,
    ),
];

/// Every row this machine can measure: the cross-core ones need two CPUs.
pub fn specs(two_cores: bool, hypervisor: bool, it: Iters) -> Vec<Spec> {
    DEFS.iter()
        .filter(|d| two_cores || !d.5)
        .map(|&(key, label, what, kind, slow, _)| {
            let what = match key {
                "trap_cpuid" if hypervisor => "trap: CPUID in the caller — a VM exit (hypervisor present)",
                "trap_cpuid" => "trap: CPUID in the caller (no hypervisor: no VM exit)",
                _ => what,
            };
            Spec { key, label, what: what.into(), kind, iters: if slow { it.slow } else { it.fast } }
        })
        .collect()
}

/// Measures `iters` round trips of row `key`.
pub fn measure(key: &str, clock: &Clock, iters: u64, cpus: Cpus) -> Result<Sample> {
    let (cc, sc) = (cpus.client, cpus.server);
    match key {
        "raw" => measure::raw_spin(clock, iters, cc, sc),
        "sc_null" => same_calls(clock, iters, Arc::new(NullService), true, cpus, ()),
        "sc_query" => same_calls(clock, iters, Arc::new(QueryService::new()), true, cpus, CPUID_LEAF_1),
        "sc_state" => state_calls(clock, iters, StateTrap::Lock, true, cpus),
        "futex" => measure::futex(clock, iters, cc, sc),
        "pipe" => measure::pipe(clock, iters, cc, sc),
        "rtrb" => measure::rtrb_queue(clock, iters, cc, sc),
        "arrayqueue" => measure::array_queue(clock, iters, cc, sc),
        "ring" => measure::dyncore_ring(clock, iters, cc, sc),
        "trap_lock_contended" => contended_lock_calls(clock, iters, cpus),
        "trap_null" => same_calls(clock, iters, Arc::new(NullService), false, cpus, ()),
        "trap_cpuid" => same_calls(clock, iters, Arc::new(QueryService::new()), false, cpus, CPUID_LEAF_1),
        "trap_lock" => state_calls(clock, iters, StateTrap::Lock, false, cpus),
        "trap_mprotect" => state_calls(clock, iters, StateTrap::Mprotect, false, cpus),
        other => anyhow::bail!("no measurement for row `{other}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_has_a_measurement_and_one_core_keeps_the_local_rows() {
        let _cpus = dyncore_runtime::testing::real_cpus();
        let it = Iters { fast: 10, slow: 5 };
        let all = specs(true, true, it);
        assert_eq!(all.len(), DEFS.len());
        let keys: std::collections::BTreeSet<&str> = all.iter().map(|s| s.key).collect();
        assert_eq!(keys.len(), DEFS.len(), "keys are unique");
        let one = specs(false, false, it);
        assert_eq!(
            one.iter().map(|s| s.key).collect::<Vec<_>>(),
            ["trap_null", "trap_cpuid", "trap_lock", "trap_mprotect"]
        );
        assert!(one[1].what.contains("no VM exit") && one[1].iters == 5 && one[0].iters == 10);
        let clock = Clock::calibrate();
        let cpus = Cpus { client: 0, server: 0 };
        assert!(measure("nope", &clock, 1, cpus).is_err());
        assert_eq!(measure("trap_null", &clock, 3, cpus).unwrap().samples_ns.len(), 3);
    }
}
