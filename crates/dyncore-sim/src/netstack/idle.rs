//! A simulated CPU's idle periods: which state it enters
//! ([`dyncore_core::idle`]'s governor over the Nehalem table), what waking
//! from it costs, and how long it stayed in each state (for power).
//!
//! `governor = "fixed"` has no states: every wake-up takes the machine
//! profile's `wakeup_ns` (what the live runtime measures for a parked
//! thread; the sim-against-live prediction uses it).

use dyncore_core::Nanos;
use dyncore_core::idle::{Always, C1, C6, Governor, IdleHistory, Menu, NEHALEM};

/// C1E and C3, the Nehalem table's middle states (by their index in
/// [`NEHALEM`]).
const C1E: usize = 1;
const C3: usize = 2;
use serde::{Deserialize, Serialize};

/// Which governor picks a sleeping CPU's idle state (`[net] governor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GovernorName {
    /// Linux's `menu`: the deepest state whose target residency fits the
    /// predicted idle period.
    #[default]
    Menu,
    /// Every idle period in C1 (3 µs to wake): the polling limit, and
    /// NewtOS's own fixed-hint MWAIT with the shallowest hint.
    AlwaysC1,
    /// Every idle period in C1E (10 µs to wake): NewtOS's fixed-hint MWAIT
    /// with a C1E hint (§3: NewtOS issues MWAIT itself, through a kernel
    /// call, not through Linux's governor; the paper does not state the
    /// hint, so the four `always-*` are its range).
    AlwaysC1e,
    /// Every idle period in C3 (20 µs to wake): fixed-hint MWAIT, C3.
    AlwaysC3,
    /// Every idle period in C6 (200 µs to wake): fixed-hint MWAIT with the
    /// deepest hint.
    AlwaysC6,
    /// No idle states: each wake-up takes `[stack] wakeup_ns`.
    Fixed,
}

impl GovernorName {
    pub const ALL: [GovernorName; 6] = [
        GovernorName::Menu,
        GovernorName::AlwaysC1,
        GovernorName::AlwaysC1e,
        GovernorName::AlwaysC3,
        GovernorName::AlwaysC6,
        GovernorName::Fixed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            GovernorName::Menu => "menu",
            GovernorName::AlwaysC1 => "always-c1",
            GovernorName::AlwaysC1e => "always-c1e",
            GovernorName::AlwaysC3 => "always-c3",
            GovernorName::AlwaysC6 => "always-c6",
            GovernorName::Fixed => "fixed",
        }
    }

    /// The governor (`None`: fixed wake-ups, no states).
    pub fn governor(self) -> Option<Box<dyn Governor>> {
        match self {
            GovernorName::Menu => Some(Box::new(Menu)),
            GovernorName::AlwaysC1 => Some(Box::new(Always(C1))),
            GovernorName::AlwaysC1e => Some(Box::new(Always(C1E))),
            GovernorName::AlwaysC3 => Some(Box::new(Always(C3))),
            GovernorName::AlwaysC6 => Some(Box::new(Always(C6))),
            GovernorName::Fixed => None,
        }
    }
}

/// The states' names, shallowest first, as outcomes report residency.
pub fn state_names() -> [&'static str; NEHALEM.len()] {
    NEHALEM.map(|s| s.name)
}

/// One CPU's idle side.
#[derive(Debug, Clone, Default)]
pub(super) struct IdleTrack {
    history: IdleHistory,
    /// The state of the current (or last) idle period.
    pub(super) state: usize,
    /// When the current idle period began.
    since: Nanos,
    /// Up to when its time has been added to the residencies.
    accounted: Nanos,
    /// Measured time in each state (since the warm-up ended).
    pub(super) residency_ns: [Nanos; NEHALEM.len()],
    /// Power-gated time since the last load sample.
    pub(super) sample_gated_ns: Nanos,
}

impl IdleTrack {
    /// The CPU goes idle at `now` in the state `governor` picks (C1 for
    /// fixed wake-ups: clock stopped, not gated).
    pub(super) fn enter(&mut self, now: Nanos, governor: Option<&dyn Governor>) {
        self.state = governor.map_or(C1, |g| g.select(&self.history, &NEHALEM));
        self.since = now;
        self.accounted = now;
    }

    /// The idle period ends at `now` (a wake-up event): records it and
    /// returns the exit latency. While the sibling hyperthread is awake the
    /// core never left C0, and the thread resumes as from C1.
    pub(super) fn leave(
        &mut self,
        now: Nanos,
        (measure_from, sample_from): (Nanos, Nanos),
        sibling_awake: bool,
        fixed_wakeup_ns: Option<f64>,
    ) -> Nanos {
        self.history.push(now.saturating_sub(self.since));
        self.account(now, measure_from, sample_from);
        match fixed_wakeup_ns {
            Some(w) => w.round() as Nanos,
            None if sibling_awake => NEHALEM[C1].exit_latency_ns,
            None => NEHALEM[self.state].exit_latency_ns,
        }
    }

    /// Adds the idle time not yet accounted, up to `now`, to the measured
    /// residency and to the sample's gated time (so an ongoing period can be
    /// accounted again later, from where this left off).
    pub(super) fn account(&mut self, now: Nanos, measure_from: Nanos, sample_from: Nanos) {
        let measured = now.saturating_sub(self.accounted.max(measure_from));
        self.residency_ns[self.state] += measured;
        if NEHALEM[self.state].power_gated {
            self.sample_gated_ns += now.saturating_sub(self.accounted.max(sample_from));
        }
        self.accounted = self.accounted.max(now);
    }

    /// The measured residency restarts (the warm-up ended).
    pub(super) fn reset_measure(&mut self) {
        self.residency_ns = [0; NEHALEM.len()];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Nanos = 1_000;

    #[test]
    fn a_wake_up_pays_the_state_it_left_and_history_drives_the_next() {
        let menu = Menu;
        let mut t = IdleTrack::default();
        // Always C6: 300 µs idle, exit 200 µs, power-gated all along.
        t.enter(0, Some(&Always(C6)));
        assert_eq!(t.leave(300 * US, (0, 0), false, None), 200 * US);
        assert_eq!(t.residency_ns[C6], 300 * US);
        assert_eq!(t.sample_gated_ns, 300 * US);
        // Eight short idle periods of 30 µs: C1E (target 20 µs).
        for i in 0..8 {
            let at = 1000 * US + i * 100 * US;
            t.enter(at, Some(&menu));
            t.leave(at + 30 * US, (0, 0), false, None);
        }
        t.enter(2000 * US, Some(&menu));
        assert_eq!(NEHALEM[t.state].name, "C1E");
        // With the sibling awake: C1's 3 µs whatever the state.
        assert_eq!(t.leave(2010 * US, (0, 0), true, None), 3 * US);
        // Fixed: the profile's wake-up.
        t.enter(3000 * US, None);
        assert_eq!(t.leave(3001 * US, (0, 0), false, Some(4500.0)), 4500);
    }

    #[test]
    fn residency_counts_only_the_measured_time() {
        let mut t = IdleTrack::default();
        t.enter(0, Some(&Always(C6)));
        // Measuring from 100 µs, sampling from 250 µs; idle until 400 µs.
        t.account(200 * US, 100 * US, 250 * US);
        assert_eq!(t.residency_ns[C6], 100 * US);
        assert_eq!(t.sample_gated_ns, 0);
        t.leave(400 * US, (100 * US, 250 * US), false, None);
        assert_eq!(t.residency_ns[C6], 300 * US);
        assert_eq!(t.sample_gated_ns, 150 * US);
    }

    /// The fixed MWAIT hints are the Nehalem table's four states, in order.
    #[test]
    fn every_fixed_hint_names_its_state() {
        let hints =
            [GovernorName::AlwaysC1, GovernorName::AlwaysC1e, GovernorName::AlwaysC3, GovernorName::AlwaysC6];
        for (i, g) in hints.into_iter().enumerate() {
            let picked = g.governor().unwrap().select(&IdleHistory::default(), &NEHALEM);
            assert_eq!(picked, i, "{}", g.name());
            assert_eq!(g.name(), format!("always-{}", NEHALEM[i].name.to_ascii_lowercase()));
        }
    }
}
