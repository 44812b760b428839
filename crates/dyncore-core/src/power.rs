//! Speed steps and the power model of NewtOS's machine (Hruby et al.,
//! "When Slower is Faster", §4: a Xeon E5520, 4 cores per chip). Every
//! figure this model gives is **modelled**, and is labelled so
//! ([`MODELLED`]) wherever it is printed.
//!
//! # Speed steps
//!
//! The chip's frequency is chip-wide: 2267, 1867 and 1600 MHz (the paper's
//! Table 2 rows). Below 1600 MHz a core is slowed on its own by clock
//! modulation (thermal throttling) in steps of 12.5% of 1600 MHz: 1400,
//! 1200, ..., 200 MHz. [`SpeedTable::newtos`] lists the ten steps, fastest
//! first; a step's *capacity* is its effective frequency over the fastest
//! (200 MHz is 200/2267 = 0.088 of a 2267 MHz core).
//!
//! # Power
//!
//! The energy-model shape: power per speed step per core. A busy core at
//! chip frequency `f` (MHz) and duty cycle `d` draws
//!
//! ```text
//! P_busy(f, d) = P_static + d · k · f³
//! ```
//!
//! Dynamic power is `∝ f·V²`, and across the chip's DVFS range the voltage
//! scales with the frequency (`V ∝ f`), so it is `∝ f³`; clock modulation
//! stops the clock a fraction `1 - d` of the time at the voltage of the chip
//! frequency, so it scales the dynamic part by `d`. `P_static` (leakage and
//! the uncore, shared equally by the 4 cores) does not scale.
//!
//! Fitted to Table 2's chip power (4 busy cores) at **2267 MHz → 80 W and
//! 1600 MHz → 34 W** (the two ends; two equations, two unknowns):
//!
//! ```text
//! 4·k  = (80 - 34) / (2267³ - 1600³) = 46 / 7.5548e9 = 6.0889e-9 W/MHz³
//! 4·P_static = 34 - 6.0889e-9 · 1600³ = 34 - 24.940 = 9.060 W
//! ```
//!
//! **Predicted** (not fitted): 1867 MHz → 9.060 + 6.0889e-9 · 1867³ =
//! 48.69 W against Table 2's 48 W (+1.4%); every duty step below 1600 MHz
//! (e.g. a core at 200 MHz: 2.265 + 0.125 · 6.235 = 3.04 W).
//!
//! A core that hosts components but has nothing to do sleeps in an idle
//! state ([`crate::idle`]): in C1, C1E and C3 its clock stops, so it draws
//! `P_static` only ([`PowerModel::idle_w`]); in C6 it is power-gated and
//! draws nothing ([`PowerModel::core_w_gated`]). A core that hosts nothing
//! is power-gated too: the paper's "turn off the unused cores".
//!
//! # Chameleon's duty-cycled cores, and offline cores
//!
//! The thread backends run every CPU at a duty cycle (Chameleon Table 2,
//! [`crate::speed`]: 50% is the baseline CPU), the emulation by clock
//! modulation at the chip's full frequency. The same model prices them: a
//! busy core at duty `d` draws `P_static + d · k · 2267³`
//! ([`PowerModel::duty_w`]; the baseline, 50%: 2.265 + 0.5 · 17.735 =
//! 11.13 W). An idle online core sleeps (`P_static`, 2.265 W). A core taken
//! offline (Bolt: out of the OS's masks, nothing scheduled or delivered to
//! it) is power-gated: [`PowerModel::offline_w`], 0 W. That is the model's
//! one assumption in parking's favour: on a machine whose idle cores
//! already reach a power-gated C-state (C6), offlining saves nothing more
//! (Bolt §4 on the i5-2500K); on one whose idle cores stay in a shallow
//! state, or whose package sleeps only when all but one core are offline
//! (Bolt §4 on the Exynos 5410: 97 mW → 55 mW), it saves what this model
//! says or more.

use serde::{Deserialize, Serialize};

use crate::speed::Duty;

/// The label every printed power figure carries.
pub const MODELLED: &str = "modelled (fitted to NewtOS Table 2; no RAPL here)";

/// Table 2 of the paper: chip frequency (MHz) → chip power (W).
pub const TABLE2_W: [(u32, f64); 3] = [(2267, 80.0), (1867, 48.0), (1600, 34.0)];

/// Cores per chip of the paper's Xeon E5520.
pub const CORES_PER_CHIP: u32 = 4;

/// Index of a step in a [`SpeedTable`] (0 is the fastest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StepIdx(pub u8);

/// One speed step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpeedStep {
    /// Effective frequency: chip frequency × duty cycle.
    pub mhz: u32,
    /// The chip-wide frequency it runs at.
    pub chip_mhz: u32,
    /// Duty cycle in eighths (8 = unthrottled).
    pub duty_eighths: u8,
}

impl SpeedStep {
    pub fn duty(&self) -> f64 {
        f64::from(self.duty_eighths) / 8.0
    }
}

/// A speed step that does not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownStep {
    pub mhz: u32,
    pub valid: Vec<u32>,
}

impl std::fmt::Display for UnknownStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v: Vec<String> = self.valid.iter().map(u32::to_string).collect();
        write!(f, "no speed step of {} MHz; the steps are {} MHz", self.mhz, v.join(", "))
    }
}

impl std::error::Error for UnknownStep {}

/// The speed steps of a machine, fastest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedTable {
    steps: Vec<SpeedStep>,
}

impl SpeedTable {
    /// NewtOS's steps: 2267, 1867, 1600 MHz chip-wide, then 1400 … 200 MHz
    /// by 12.5% duty steps at 1600 MHz.
    pub fn newtos() -> Self {
        let mut steps: Vec<SpeedStep> =
            [2267, 1867].map(|f| SpeedStep { mhz: f, chip_mhz: f, duty_eighths: 8 }).to_vec();
        steps.extend((1..=8u8).rev().map(|d| SpeedStep {
            mhz: 200 * u32::from(d),
            chip_mhz: 1600,
            duty_eighths: d,
        }));
        SpeedTable { steps }
    }

    pub fn len(&self) -> usize {
        self.steps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    pub fn get(&self, i: StepIdx) -> SpeedStep {
        self.steps[usize::from(i.0)]
    }

    pub fn fastest(&self) -> StepIdx {
        StepIdx(0)
    }

    pub fn slowest(&self) -> StepIdx {
        StepIdx((self.steps.len() - 1) as u8)
    }

    /// The next faster step, if any.
    pub fn faster(&self, i: StepIdx) -> Option<StepIdx> {
        i.0.checked_sub(1).map(StepIdx)
    }

    /// The next slower step, if any.
    pub fn slower(&self, i: StepIdx) -> Option<StepIdx> {
        (usize::from(i.0) + 1 < self.steps.len()).then_some(StepIdx(i.0 + 1))
    }

    /// The step of exactly `mhz`.
    pub fn by_mhz(&self, mhz: u32) -> Result<StepIdx, UnknownStep> {
        self.steps
            .iter()
            .position(|s| s.mhz == mhz)
            .map(|i| StepIdx(i as u8))
            .ok_or_else(|| UnknownStep { mhz, valid: self.steps.iter().map(|s| s.mhz).collect() })
    }

    /// Speed relative to the fastest step (0 to 1).
    pub fn capacity(&self, i: StepIdx) -> f64 {
        f64::from(self.get(i).mhz) / f64::from(self.steps[0].mhz)
    }
}

/// Power per speed step per core (see the module docs for the form and
/// the fit).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PowerModel {
    /// `P_static` per core, W.
    pub static_w: f64,
    /// `k` per core, W/MHz³.
    pub k_w_per_mhz3: f64,
}

impl PowerModel {
    /// Fitted to Table 2 at 2267 and 1600 MHz (module docs).
    pub fn newtos() -> Self {
        let [(f_hi, p_hi), _, (f_lo, p_lo)] = TABLE2_W;
        let cube = |f: u32| f64::from(f).powi(3);
        let chip_k = (p_hi - p_lo) / (cube(f_hi) - cube(f_lo));
        let chip_static = p_lo - chip_k * cube(f_lo);
        let n = f64::from(CORES_PER_CHIP);
        PowerModel { static_w: chip_static / n, k_w_per_mhz3: chip_k / n }
    }

    /// A busy core at `step`.
    pub fn busy_w(&self, step: SpeedStep) -> f64 {
        self.static_w + step.duty() * self.k_w_per_mhz3 * f64::from(step.chip_mhz).powi(3)
    }

    /// A core with components that sleeps (clock stopped, not power-gated).
    pub fn idle_w(&self) -> f64 {
        self.static_w
    }

    /// A core at `step` busy a fraction `busy` of the time, asleep the rest.
    pub fn core_w(&self, step: SpeedStep, busy: f64) -> f64 {
        let b = busy.clamp(0.0, 1.0);
        b * self.busy_w(step) + (1.0 - b) * self.idle_w()
    }

    /// A core at `step` busy a fraction `busy` of the time, power-gated
    /// (idle state C6: 0 W) a fraction `gated`, and in a clock-stopped idle
    /// state (C1, C1E, C3: the static power) the rest ([`crate::idle`]).
    pub fn core_w_gated(&self, step: SpeedStep, busy: f64, gated: f64) -> f64 {
        let b = busy.clamp(0.0, 1.0);
        let g = gated.clamp(0.0, 1.0 - b);
        b * self.busy_w(step) + (1.0 - b - g) * self.idle_w()
    }

    /// A busy core clock-modulated to `duty` at the fastest chip frequency
    /// (Chameleon's emulation of slow, fast and fused CPUs; module docs).
    pub fn duty_w(&self, duty: Duty) -> f64 {
        let fastest = f64::from(TABLE2_W[0].0);
        self.static_w + f64::from(duty.per_mille()) / 1000.0 * self.k_w_per_mhz3 * fastest.powi(3)
    }

    /// A core taken offline: power-gated, it draws nothing (module docs).
    pub fn offline_w(&self) -> f64 {
        0.0
    }

    /// A whole chip with every core busy at chip frequency `mhz` (Table 2's
    /// condition).
    pub fn chip_w(&self, mhz: u32) -> f64 {
        f64::from(CORES_PER_CHIP) * self.busy_w(SpeedStep { mhz, chip_mhz: mhz, duty_eighths: 8 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newtos_steps_are_the_papers() {
        let t = SpeedTable::newtos();
        let mhz: Vec<u32> = (0..t.len()).map(|i| t.get(StepIdx(i as u8)).mhz).collect();
        assert_eq!(mhz, [2267, 1867, 1600, 1400, 1200, 1000, 800, 600, 400, 200]);
        // Below 1600 MHz the chip stays at 1600 and the duty cycle drops.
        let s = t.get(t.by_mhz(600).unwrap());
        assert_eq!((s.chip_mhz, s.duty_eighths), (1600, 3));
        assert_eq!(t.faster(t.fastest()), None);
        assert_eq!(t.slower(t.slowest()), None);
        assert_eq!(t.faster(StepIdx(3)), Some(StepIdx(2)));
        // 200 / 2267 of the fastest core.
        assert!((t.capacity(t.slowest()) - 0.08822).abs() < 1e-4);
        let e = t.by_mhz(1000 + 1).unwrap_err();
        assert!(e.to_string().contains("no speed step of 1001 MHz") && e.to_string().contains("2267"));
    }

    #[test]
    fn the_model_reproduces_the_fitted_points_and_predicts_the_third() {
        let m = PowerModel::newtos();
        // Fitted: exact.
        assert!((m.chip_w(2267) - 80.0).abs() < 1e-9);
        assert!((m.chip_w(1600) - 34.0).abs() < 1e-9);
        // Predicted: 9.060 + 6.0889e-9 · 1867³ = 48.69 W, Table 2 says 48 W.
        let p = m.chip_w(1867);
        assert!((p - 48.69).abs() < 0.01, "{p}");
        assert!((p / 48.0 - 1.0).abs() < 0.02, "more than 2% off Table 2");
        // Per core: static 9.060 / 4 = 2.265 W.
        assert!((m.idle_w() - 2.265).abs() < 0.001);
    }

    #[test]
    fn duty_steps_scale_only_the_dynamic_part() {
        let m = PowerModel::newtos();
        let t = SpeedTable::newtos();
        let at = |mhz| m.busy_w(t.get(t.by_mhz(mhz).unwrap()));
        // 1600 MHz: 34 / 4 = 8.5 W a core; dynamic part 8.5 - 2.265 = 6.235 W.
        assert!((at(1600) - 8.5).abs() < 1e-9);
        // 200 MHz = duty 1/8: 2.265 + 6.235 / 8 = 3.044 W.
        assert!((at(200) - 3.044).abs() < 0.001);
        // 800 MHz = duty 1/2: 2.265 + 3.118 = 5.383 W.
        assert!((at(800) - 5.383).abs() < 0.001);
        // Power falls with every step, fastest first.
        let w: Vec<f64> = (0..t.len()).map(|i| m.busy_w(t.get(StepIdx(i as u8)))).collect();
        assert!(w.windows(2).all(|p| p[0] > p[1]), "{w:?}");
        // Half busy at 1600: half of 8.5 plus half of the 2.265 idle.
        assert!((m.core_w(t.get(StepIdx(2)), 0.5) - (4.25 + 1.1325)).abs() < 1e-3);
    }

    #[test]
    fn duty_cycled_cores_at_the_top_frequency_and_offline_cores() {
        let m = PowerModel::newtos();
        // Full duty at 2267 MHz is a Table 2 core: 80 / 4 = 20 W.
        assert!((m.duty_w(Duty::FULL) - 20.0).abs() < 1e-9);
        // Dynamic part at 2267 MHz: 20 - 2.265 = 17.735 W; the baseline
        // (50%) is 2.265 + 8.8675 = 11.1325 W, a fused pair (75%) 15.566 W.
        assert!((m.duty_w(Duty::BASELINE) - 11.1325).abs() < 1e-3);
        assert!((m.duty_w(Duty::new(750).unwrap()) - 15.566).abs() < 1e-3);
        // Idle sleeps at P_static; offline is power-gated.
        assert!(m.idle_w() < m.duty_w(Duty::new(1).unwrap()));
        assert_eq!(m.offline_w(), 0.0);
    }
}
