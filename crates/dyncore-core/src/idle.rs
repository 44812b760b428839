//! Idle states of a core and the governor that picks one (NewtOS §3.1:
//! "We only use a kernel call to execute the MWAIT instruction when a
//! component becomes idle"; §4.2: "Waking a core up from a sleep has long
//! latency").
//!
//! How long a core takes to wake depends on the idle state it reached. The
//! paper's Xeon E5520 (Nehalem) publishes its states in Linux's
//! `intel_idle` driver ([`NEHALEM`]): each with the latency of the exit
//! back to running code and the *target residency*, the shortest idle
//! period for which entering it saves energy. An idle core asks for a state
//! ([`Governor::select`]); a wake-up pays that state's exit latency.
//!
//! # Governors
//!
//! A governor is a small, deterministic component, like a policy: it gets
//! the core's recent idle periods ([`IdleHistory`]) and returns a state; it
//! owns no clock. Three are provided, and a user can write another:
//!
//! * [`Menu`] — like Linux's `menu` governor: it predicts the coming idle
//!   period and picks the **deepest state whose target residency fits the
//!   prediction**. The prediction is menu's: the time to the next timer
//!   scaled by a correction factor — a running average of how the idle
//!   periods compared with it, each new one weighing 1/8 — and, if shorter,
//!   the typical interval of the last eight periods (`get_typical_interval`:
//!   their mean, once the spread is small, dropping the longest as
//!   outliers while at least six of the eight remain). On a core that runs
//!   one component the next timer is far away (a scheduler tick), so the
//!   scaled timer is the running average of the idle periods themselves
//!   ([`IdleHistory::average`]).
//! * [`Always`]`(C1)` — the polling limit: every idle period in C1, 3 µs to
//!   wake (what a core that never sleeps deeply would pay).
//! * [`Always`]`(C6)` — every idle period in C6, 200 µs to wake.
//!
//! A hyperthread's core is only as deep as its shallower thread: while the
//! sibling runs, the core stays in C0 and a waking thread pays C1's exit
//! latency (the backend applies this).
//!
//! # Power
//!
//! Per state, **modelled** ([`crate::power`]): in C1, C1E and C3 the clock
//! stops and the core draws the power model's static power (leakage and its
//! share of the uncore, which the model, fitted to Table 2's chip watts,
//! does not split); in C6 the core is power-gated, 0 W, as a core that
//! hosts nothing. The model has no voltage-dependent leakage, so C1E and C3
//! draw what C1 draws: their difference is in how long they take to leave.

use crate::Nanos;

/// One idle state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleState {
    pub name: &'static str,
    /// From a wake-up event to running code again.
    pub exit_latency_ns: Nanos,
    /// The shortest idle period for which the state is worth entering.
    pub target_residency_ns: Nanos,
    /// Power-gated (0 W) rather than clock-stopped (static power).
    pub power_gated: bool,
}

const US: Nanos = 1_000;

/// Nehalem (the paper's Xeon E5520), as Linux's `intel_idle` lists it
/// (`nehalem_cstates`), shallowest first.
pub const NEHALEM: [IdleState; 4] = [
    IdleState { name: "C1", exit_latency_ns: 3 * US, target_residency_ns: 6 * US, power_gated: false },
    IdleState { name: "C1E", exit_latency_ns: 10 * US, target_residency_ns: 20 * US, power_gated: false },
    IdleState { name: "C3", exit_latency_ns: 20 * US, target_residency_ns: 80 * US, power_gated: false },
    IdleState { name: "C6", exit_latency_ns: 200 * US, target_residency_ns: 800 * US, power_gated: true },
];

/// Index of C1 in [`NEHALEM`] (the shallowest state).
pub const C1: usize = 0;
/// Index of C6 in [`NEHALEM`] (the deepest).
pub const C6: usize = 3;

/// How many past idle periods the menu governor looks at (Linux's
/// `INTERVALS`).
pub const INTERVALS: usize = 8;

/// The weight of the newest idle period in the running average: Linux
/// menu's `DECAY` (8).
pub const DECAY: u64 = 8;

/// A core's last [`INTERVALS`] idle periods, oldest overwritten first, and
/// their running average.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdleHistory {
    periods: [Nanos; INTERVALS],
    next: usize,
    seen: usize,
    average: Nanos,
}

impl IdleHistory {
    /// Records an idle period that just ended.
    pub fn push(&mut self, ns: Nanos) {
        self.periods[self.next] = ns;
        self.next = (self.next + 1) % INTERVALS;
        self.seen = self.seen.saturating_add(1);
        self.average = self.average - self.average / DECAY + ns / DECAY;
    }

    /// The running average of the idle periods, each new one weighing
    /// 1/[`DECAY`], from 0 (menu's correction factor against a timer far
    /// away: how long idle periods really last, starting from "short").
    pub fn average(&self) -> Nanos {
        self.average
    }

    /// The recorded periods (fewer than [`INTERVALS`] at first).
    pub fn periods(&self) -> &[Nanos] {
        &self.periods[..self.seen.min(INTERVALS)]
    }

    /// Linux's `get_typical_interval` (drivers/cpuidle/governors/menu.c):
    /// the mean of the periods when their standard deviation is small
    /// (at most 20 µs, or at most a sixth of the mean); otherwise the
    /// longest is dropped as an outlier and the rest tried again, while more
    /// than three quarters of the eight remain. `None`: no typical interval
    /// (or fewer than eight periods yet).
    pub fn typical(&self) -> Option<Nanos> {
        if self.seen < INTERVALS {
            return None;
        }
        // Below 2^29 ns (half a second) every sum below fits in `u64`
        // (a governor picks a state at every idle entry of the NewtOS
        // model, so this is kept quick).
        if self.periods.iter().all(|&v| v < 1 << 29) {
            typical_short(&self.periods)
        } else {
            typical_long(&self.periods)
        }
    }
}

/// [`IdleHistory::typical`] of periods under 2^29 ns, in `u64`, one pass
/// over them per try. The variance is `(Σv² + n·avg² − 2·avg·Σv) / n`, the
/// same integer as `Σ(v − avg)² / n` (the identity holds for any integer
/// `avg`); no term reaches 2^63: `Σv²` and `n·avg²` are under 2^61 each,
/// `2·avg·Σv` under 2^62.
fn typical_short(periods: &[Nanos; INTERVALS]) -> Option<Nanos> {
    let mut thresh = Nanos::MAX;
    loop {
        let (mut n, mut sum, mut squares, mut max) = (0, 0, 0, 0);
        for &v in periods.iter().filter(|&&v| v <= thresh) {
            (n, sum, squares, max) = (n + 1, sum + v, squares + v * v, max.max(v));
        }
        let avg = sum / n;
        let variance = (squares + n * avg * avg - 2 * avg * sum) / n;
        // In ns²: 20 µs of standard deviation is 4e8 ns².
        let small = variance <= 400 * US * US;
        if (avg * avg > 36 * variance && n * 4 >= INTERVALS as u64 * 3) || small {
            return Some(avg);
        }
        if n * 4 <= INTERVALS as u64 * 3 {
            return None;
        }
        thresh = max - 1;
    }
}

/// [`IdleHistory::typical`] of any periods, in `u128`.
fn typical_long(periods: &[Nanos; INTERVALS]) -> Option<Nanos> {
    let mut thresh = Nanos::MAX;
    loop {
        // The periods kept are those at most `thresh`: no copy of them.
        let kept = || periods.iter().filter(move |&&v| v <= thresh).map(|&v| u128::from(v));
        let n = kept().count() as u128;
        let avg = kept().sum::<u128>() / n;
        let variance = kept().map(|v| v.abs_diff(avg).pow(2)).sum::<u128>() / n;
        // In ns²: 20 µs of standard deviation is 4e8 ns².
        let small = variance <= 400 * u128::from(US) * u128::from(US);
        if (avg * avg > 36 * variance && n * 4 >= INTERVALS as u128 * 3) || small {
            return Some(avg as Nanos);
        }
        if n * 4 <= INTERVALS as u128 * 3 {
            return None;
        }
        thresh = kept().max().expect("a period") as Nanos - 1;
    }
}

/// Picks the idle state a core enters (see the module doc).
pub trait Governor: std::fmt::Debug {
    /// A short name for reports.
    fn name(&self) -> &'static str;
    /// The index into `states` (shallowest first) of the state to enter.
    fn select(&self, history: &IdleHistory, states: &[IdleState]) -> usize;
}

/// Linux's `menu`, as far as its choice of state goes (module doc).
#[derive(Debug, Clone, Copy, Default)]
pub struct Menu;

impl Governor for Menu {
    fn name(&self) -> &'static str {
        "menu"
    }

    fn select(&self, history: &IdleHistory, states: &[IdleState]) -> usize {
        // The prediction is never above the average: when no state but the
        // first fits the average, none but the first fits the prediction
        // either, and the typical interval (the costly part) is not needed.
        let fits = |predicted: Nanos| states.iter().rposition(|s| s.target_residency_ns <= predicted);
        if fits(history.average()).is_none_or(|i| i == 0) {
            return 0;
        }
        let predicted = history.typical().map_or(history.average(), |t| t.min(history.average()));
        fits(predicted).unwrap_or(0)
    }
}

/// Always the same state.
#[derive(Debug, Clone, Copy)]
pub struct Always(pub usize);

impl Governor for Always {
    fn name(&self) -> &'static str {
        match self.0 {
            C1 => "always-C1",
            C6 => "always-C6",
            _ => "always",
        }
    }

    fn select(&self, _: &IdleHistory, states: &[IdleState]) -> usize {
        self.0.min(states.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(periods_us: &[u64]) -> IdleHistory {
        let mut h = IdleHistory::default();
        for p in periods_us {
            h.push(p * US);
        }
        h
    }

    #[test]
    fn the_table_is_intel_idles_nehalem() {
        let row = |s: &IdleState| (s.name, s.exit_latency_ns / US, s.target_residency_ns / US);
        let rows: Vec<_> = NEHALEM.iter().map(row).collect();
        assert_eq!(rows, [("C1", 3, 6), ("C1E", 10, 20), ("C3", 20, 80), ("C6", 200, 800)]);
        assert!(NEHALEM.windows(2).all(|w| w[0].exit_latency_ns < w[1].exit_latency_ns));
    }

    #[test]
    fn a_steady_history_predicts_its_mean() {
        // Many periods of 50 µs: typical 50 µs, average near 50 µs; C1E fits
        // (target 20), C3 (80) does not.
        let h = history(&[50; 40]);
        assert_eq!(h.typical(), Some(50 * US));
        assert!(h.average() > 49 * US && h.average() <= 50 * US, "{}", h.average());
        assert_eq!(Menu.select(&h, &NEHALEM), 1);
        // 100 µs: C3; 1 ms: C6; 10 µs: C1.
        assert_eq!(Menu.select(&history(&[100; 40]), &NEHALEM), 2);
        assert_eq!(Menu.select(&history(&[1000; 40]), &NEHALEM), C6);
        assert_eq!(Menu.select(&history(&[10; 40]), &NEHALEM), C1);
        // Nothing learnt yet: the average starts at 0, the shallowest state;
        // it rises by 1/8 of each period: after one of 1 ms, 125 µs (C3).
        assert_eq!(Menu.select(&IdleHistory::default(), &NEHALEM), C1);
        assert_eq!(Menu.select(&history(&[1000]), &NEHALEM), 2);
    }

    #[test]
    fn outliers_are_dropped_while_six_of_eight_remain() {
        // Six periods of 10 µs and two of 2 ms: the long ones are dropped
        // (every period at the maximum at once), the typical interval is
        // 10 µs: C1.
        let h = history(&[10, 2000, 10, 10, 10, 2000, 10, 10]);
        assert_eq!(h.typical(), Some(10 * US));
        assert_eq!(Menu.select(&h, &NEHALEM), C1);
        // Spread out: dropping the two longest leaves six still spread; no
        // typical interval: the running average decides.
        let h = history(&[10, 200, 400, 600, 800, 1000, 1200, 1400]);
        assert_eq!(h.typical(), None);
        assert_eq!(Menu.select(&h, &NEHALEM), 2, "average {} ns", h.average());
        // Fewer than eight periods: no prediction yet.
        assert_eq!(history(&[10; 7]).typical(), None);
    }

    /// `typical` as first written (the kept periods copied), against which
    /// the copy-free one is checked.
    fn typical_reference(h: &IdleHistory) -> Option<Nanos> {
        if h.seen < INTERVALS {
            return None;
        }
        let mut thresh = Nanos::MAX;
        loop {
            let kept: Vec<u128> =
                h.periods.iter().filter(|&&v| v <= thresh).map(|&v| u128::from(v)).collect();
            let n = kept.len() as u128;
            let avg = kept.iter().sum::<u128>() / n;
            let variance = kept.iter().map(|&v| v.abs_diff(avg).pow(2)).sum::<u128>() / n;
            let small = variance <= 400 * u128::from(US) * u128::from(US);
            if (avg * avg > 36 * variance && n * 4 >= INTERVALS as u128 * 3) || small {
                return Some(avg as Nanos);
            }
            if n * 4 <= INTERVALS as u128 * 3 {
                return None;
            }
            thresh = *kept.iter().max().expect("a period") as Nanos - 1;
        }
    }

    #[test]
    fn the_typical_interval_is_the_reference_ones() {
        // Histories of every spread, from a fixed linear congruential
        // sequence: short, long, repeated and outlying periods.
        let mut x: u64 = 1;
        let mut h = IdleHistory::default();
        let mut typical = 0;
        for i in 0..20_000u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            // The last two scales reach past 2^29 ns (`typical`'s u128 path).
            let scale =
                [1, 10, 1_000, 100_000, 10_000_000, 100_000_000, 1_000_000_000_000][(i / 7 % 7) as usize];
            h.push((x >> 33) % scale * US / 100);
            assert_eq!(h.typical(), typical_reference(&h), "{h:?}");
            // Menu's shortcut (the average fits no state past the first)
            // picks what the full prediction picks.
            let full = h.typical().map_or(h.average(), |t| t.min(h.average()));
            let want = NEHALEM.iter().rposition(|s| s.target_residency_ns <= full).unwrap_or(0);
            assert_eq!(Menu.select(&h, &NEHALEM), want, "{h:?}");
            typical += usize::from(h.typical().is_some());
        }
        assert!(typical > 1_000, "{typical} typical intervals");
    }

    #[test]
    fn a_small_spread_is_typical_even_when_relative_spread_is_large() {
        // Mean 15 µs, standard deviation 5 µs (> a sixth of the mean, but
        // under 20 µs): typical.
        let h = history(&[10, 20, 10, 20, 10, 20, 10, 20]);
        assert_eq!(h.typical(), Some(15 * US));
    }

    #[test]
    fn always_governors_ignore_the_history() {
        let h = history(&[1000; 8]);
        assert_eq!(Always(C1).select(&h, &NEHALEM), C1);
        assert_eq!(Always(C6).select(&history(&[1; 8]), &NEHALEM), C6);
        assert_eq!(Always(C1).name(), "always-C1");
    }
}
