//! Chameleon §5.5 on real SMT: a fused pair can be a real core. When the
//! two runtime CPUs of a fused pair run on the two hardware threads of one
//! core, and nothing else runs on that core, parking one of them (taking
//! its runtime CPU offline, the Bolt way) gives the other hardware thread
//! the whole core — the speedup the hardware gives, not an emulated one.
//! Otherwise the fuse is emulated by throttling: the representative's duty
//! cycle rises to the fused level.
//!
//! [`decide`] makes the choice for one fuse and says why; the live backend
//! reports which of the two it used.

use dyncore_core::topology::Topology;
use dyncore_core::{CpuId, CpuSet};

/// How a fuse is carried out on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FuseMechanism {
    /// The pair is one SMT core: park runtime CPU `park` (offline), so that
    /// runtime CPU `keep` (the representative) has the core to itself.
    SmtCore { keep: CpuId, park: CpuId, core: CpuSet },
    /// Emulate with the representative's duty cycle.
    Throttle(NotACore),
}

/// Why a fuse is not a real core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotACore {
    /// A real core has two threads; this object has another size.
    NotAPair { cpus: usize },
    /// A runtime CPU of the object is not mapped to a usable real CPU.
    Unmapped { cpu: CpuId },
    /// The two runtime CPUs share one real CPU (an oversubscribed run).
    SameRealCpu { real: CpuId },
    /// The two real CPUs are not the hardware threads of one core (this
    /// includes every machine without SMT).
    NotSiblings { real: [CpuId; 2] },
    /// Another runtime CPU runs on the core too: parking one would not
    /// leave the core to the other.
    CoreShared { other: CpuId },
}

impl std::fmt::Display for FuseMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FuseMechanism::SmtCore { keep, park, core } => {
                write!(f, "real SMT core (real CPUs {core}): runtime CPU {park} parked, {keep} has the core")
            }
            FuseMechanism::Throttle(why) => write!(f, "throttling ({why})"),
        }
    }
}

impl std::fmt::Display for NotACore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotACore::NotAPair { cpus } => write!(f, "an object of {cpus} CPUs is not one 2-thread core"),
            NotACore::Unmapped { cpu } => write!(f, "runtime CPU {cpu} is not on a usable real CPU"),
            NotACore::SameRealCpu { real } => write!(f, "both runtime CPUs run on real CPU {real}"),
            NotACore::NotSiblings { real: [a, b] } => {
                write!(f, "real CPUs {a} and {b} are not the hardware threads of one core")
            }
            NotACore::CoreShared { other } => write!(f, "runtime CPU {other} also runs on that core"),
        }
    }
}

/// The mechanism for fusing runtime CPUs `cpus` (the representative is the
/// lowest), where runtime CPU `i` runs on real (OS) CPU `real_cpus[i]`, on
/// a machine of topology `topo`.
pub fn decide(topo: &Topology, real_cpus: &[CpuId], cpus: &CpuSet) -> FuseMechanism {
    match real_core(topo, real_cpus, cpus) {
        Ok(core) => {
            let keep = cpus.first().expect("a pair");
            let park = cpus.iter().nth(1).expect("a pair");
            FuseMechanism::SmtCore { keep, park, core }
        }
        Err(why) => FuseMechanism::Throttle(why),
    }
}

/// The real CPUs of the core `cpus` make up, or why they do not.
fn real_core(topo: &Topology, real_cpus: &[CpuId], cpus: &CpuSet) -> Result<CpuSet, NotACore> {
    if cpus.len() != 2 {
        return Err(NotACore::NotAPair { cpus: cpus.len() });
    }
    let mut real = [0; 2];
    let mut logical = [0; 2];
    for (k, cpu) in cpus.iter().enumerate() {
        real[k] = *real_cpus.get(cpu).ok_or(NotACore::Unmapped { cpu })?;
        logical[k] = topo.logical_cpu(real[k]).ok_or(NotACore::Unmapped { cpu })?;
    }
    if real[0] == real[1] {
        return Err(NotACore::SameRealCpu { real: real[0] });
    }
    let core = topo.core_cpus(logical[0]);
    if core.len() != 2 || !core.contains(logical[1]) {
        return Err(NotACore::NotSiblings { real });
    }
    if let Some(other) = (0..real_cpus.len()).find(|&r| !cpus.contains(r) && real.contains(&real_cpus[r])) {
        return Err(NotACore::CoreShared { other });
    }
    Ok(real.into_iter().collect())
}
