//! The speed model of Chameleon Table 2 — its policy half: at which duty
//! cycle each CPU must run.
//!
//! Chameleon emulated asymmetric and dynamic processors with clock
//! modulation (§5.1): every CPU runs at a duty cycle, the baseline CPU at
//! 50%. Fast CPUs (ACMP) and fused objects (Dynamic) run at a higher duty
//! that depends on the program's speedup class:
//!
//! | architecture | CPUs slow, fast | low | med | high |
//! |---|---|---|---|---|
//! | CMP | 24, - | 50 | 50 | 50 |
//! | ACMP-3 | 12, 3 | 75 | 87.5 | 100 |
//! | ACMP-6 | 12, 6 | 62.5 | 75 | 75 |
//! | Dynamic, fuse 2 | | 62.5 | 75 | 75 |
//! | Dynamic, fuse 4 | | 75 | 87.5 | 100 |
//!
//! The policy decides the duty ([`SpeedModel::duty`]) and says so with a
//! `SetSpeed` action; what a duty *does* is machine physics and belongs to
//! the backend (the simulator's progress rate is duty / 50%; the live
//! runtime throttles the CPU's busy time to the duty).
//!
//! Duties are per-mille so that every Table 2 entry is exact (62.5% = 625).

use serde::{Deserialize, Serialize};

use crate::topology::CoreKind;

/// A duty cycle in per-mille of full speed, in (0, 1000].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "u16", into = "u16")]
pub struct Duty(u16);

impl Duty {
    /// The baseline CPU: 50%.
    pub const BASELINE: Duty = Duty(500);
    /// Full speed.
    pub const FULL: Duty = Duty(1000);

    /// `per_mille` of full speed; `None` outside (0, 1000].
    pub const fn new(per_mille: u16) -> Option<Duty> {
        if per_mille == 0 || per_mille > 1000 { None } else { Some(Duty(per_mille)) }
    }

    /// `per_mille` of full speed, refusing 0 and anything above 1000 with
    /// the reason.
    pub fn from_per_mille(per_mille: u32) -> Result<Duty, DutyError> {
        u16::try_from(per_mille)
            .ok()
            .and_then(Duty::new)
            .ok_or_else(|| DutyError(format!("duty cycle {per_mille}‰ is outside (0, 1000]‰ = (0, 100]%")))
    }

    /// `percent` of full speed, which must be in (0, 100] and a whole
    /// number of per-mille (Table 2's 62.5% and 87.5% are; 33.33% is
    /// refused rather than rounded).
    pub fn from_percent(percent: f64) -> Result<Duty, DutyError> {
        if !percent.is_finite() || percent <= 0.0 || percent > 100.0 {
            return Err(DutyError(format!("duty cycle {percent}% is outside (0, 100]%")));
        }
        let per_mille = (percent * 10.0).round();
        if (per_mille - percent * 10.0).abs() > 1e-6 {
            return Err(DutyError(format!(
                "duty cycle {percent}% is not a whole number of per-mille (the unit of a duty cycle)"
            )));
        }
        Duty::from_per_mille(per_mille as u32)
    }

    pub const fn per_mille(self) -> u16 {
        self.0
    }

    pub fn percent(self) -> f64 {
        f64::from(self.0) / 10.0
    }

    /// `ns` scaled by the duty (rounded down): the busy time a CPU at this
    /// duty is entitled to in `ns` of elapsed time.
    pub fn of(self, ns: u64) -> u64 {
        u64::try_from(u128::from(ns) * u128::from(self.0) / 1000).unwrap_or(u64::MAX)
    }

    /// Speed relative to the baseline CPU (duty / 50%): 1.0 at 50%, 2.0 at 100%.
    pub fn speedup(self) -> f64 {
        f64::from(self.0) / f64::from(Duty::BASELINE.0)
    }
}

/// Why a duty cycle was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DutyError(String);

impl std::fmt::Display for DutyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DutyError {}

impl TryFrom<u16> for Duty {
    type Error = String;
    fn try_from(per_mille: u16) -> Result<Duty, String> {
        Duty::new(per_mille).ok_or_else(|| format!("a duty cycle is in (0, 1000] per-mille, not {per_mille}"))
    }
}

impl From<Duty> for u16 {
    fn from(d: Duty) -> u16 {
        d.0
    }
}

impl std::fmt::Display for Duty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}%", self.0 / 10, self.0 % 10)
    }
}

/// Speedup class of a program on fast CPUs and fused objects (Table 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpeedClass {
    Low,
    Medium,
    High,
}

/// A duty cycle for each speed class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DutyByClass {
    pub low: Duty,
    pub med: Duty,
    pub high: Duty,
}

impl DutyByClass {
    /// The same duty for every class.
    pub const fn uniform(d: Duty) -> DutyByClass {
        DutyByClass { low: d, med: d, high: d }
    }

    pub fn get(&self, class: SpeedClass) -> Duty {
        match class {
            SpeedClass::Low => self.low,
            SpeedClass::Medium => self.med,
            SpeedClass::High => self.high,
        }
    }
}

const fn duty(per_mille: u16) -> Duty {
    match Duty::new(per_mille) {
        Some(d) => d,
        None => panic!("duty out of range"),
    }
}

/// Table 2: a fused pair, and the fast CPUs of ACMP-6.
pub const DUTY_PAIR: DutyByClass = DutyByClass { low: duty(625), med: duty(750), high: duty(750) };
/// Table 2: a fused quad, and the fast CPUs of ACMP-3.
pub const DUTY_QUAD: DutyByClass = DutyByClass { low: duty(750), med: duty(875), high: duty(1000) };

/// Which duty a CPU runs at, by its kind, the object it runs and the
/// program's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpeedModel {
    /// Duty of `Big` CPUs (ACMP fast cores); `None`: every CPU is a baseline CPU.
    pub fast: Option<DutyByClass>,
    /// Duty of the representative of a fused pair and quad.
    pub fuse2: DutyByClass,
    pub fuse4: DutyByClass,
}

impl SpeedModel {
    /// Every CPU and object at the baseline: a CMP, or an SMT machine, whose
    /// "fused" hyperthread pair gains by having the core alone (physics),
    /// not by a higher duty.
    pub const BASELINE: SpeedModel = SpeedModel {
        fast: None,
        fuse2: DutyByClass::uniform(Duty::BASELINE),
        fuse4: DutyByClass::uniform(Duty::BASELINE),
    };

    /// Table 2's dynamic processor (also the CMP: its CPUs never fuse).
    pub const DYNAMIC: SpeedModel = SpeedModel { fast: None, fuse2: DUTY_PAIR, fuse4: DUTY_QUAD };

    /// A static ACMP whose `Big` CPUs run at `fast`.
    pub const fn acmp(fast: DutyByClass) -> SpeedModel {
        SpeedModel { fast: Some(fast), ..SpeedModel::DYNAMIC }
    }

    /// Duty of a CPU of `kind` running a `class` thread on an object of
    /// `object_cpus` CPUs (1 = native).
    pub fn duty(&self, kind: CoreKind, object_cpus: usize, class: SpeedClass) -> Duty {
        match object_cpus {
            0 | 1 => match (kind, &self.fast) {
                (CoreKind::Big, Some(fast)) => fast.get(class),
                _ => Duty::BASELINE,
            },
            2 | 3 => self.fuse2.get(class),
            _ => self.fuse4.get(class),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table2_duties_are_exact_per_mille() {
        let m = SpeedModel::DYNAMIC;
        // Fused quad, high class: 100% = 2.0x the 50% baseline.
        assert_eq!(m.duty(CoreKind::Little, 4, SpeedClass::High), Duty::FULL);
        assert_eq!(m.duty(CoreKind::Little, 4, SpeedClass::High).speedup(), 2.0);
        // Fused pair, low class: 62.5% = 1.25x.
        assert_eq!(m.duty(CoreKind::Little, 2, SpeedClass::Low).per_mille(), 625);
        assert_eq!(m.duty(CoreKind::Little, 1, SpeedClass::High), Duty::BASELINE);
        // ACMP-3 fast CPU, medium: 87.5%; its slow CPUs stay at 50%.
        let acmp3 = SpeedModel::acmp(DUTY_QUAD);
        assert_eq!(acmp3.duty(CoreKind::Big, 1, SpeedClass::Medium).to_string(), "87.5%");
        assert_eq!(acmp3.duty(CoreKind::Little, 1, SpeedClass::Medium), Duty::BASELINE);
        assert_eq!(SpeedModel::BASELINE.duty(CoreKind::Little, 2, SpeedClass::High), Duty::BASELINE);
    }

    #[test]
    fn duty_refuses_zero_and_more_than_full() {
        assert_eq!(Duty::new(0), None);
        assert_eq!(Duty::new(1001), None);
        assert!(serde_json::from_str::<Duty>("0").is_err());
        assert_eq!(serde_json::from_str::<Duty>("625").unwrap().per_mille(), 625);
    }
}
