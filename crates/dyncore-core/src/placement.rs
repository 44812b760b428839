//! Placement of a split network stack's components (NewtOS): which CPU runs
//! each component, and how fast each CPU goes.
//!
//! [`PlacementPolicy`] is a state machine fed by load samples, each with its
//! time; it owns no clock and does no I/O, so the live stack (phase B) and
//! the simulator (issue 11) drive the same code, and a recorded run replays
//! to the same decisions. One instance places one stack's components on the
//! CPUs it is given.
//!
//! **Inputs** ([`LoadSample`]): per component, its busy fraction on its CPU,
//! how full its inbound channels are, and whether a sender reported that it
//! cannot keep up (the hint NewtOS §5 proposes); and the stream's bitrate.
//! The policy knows each CPU's speed step (it set them).
//!
//! **Outputs** ([`Decision`]): an [`Action`] — dedicate a CPU to a component,
//! consolidate components on a CPU, migrate one component, set a CPU's
//! speed — each with the reason it was taken, for the log and the trace.
//!
//! **Modes** ([`Mode`]):
//! * `spread`: every component on its own CPU at full speed (with fewer CPUs
//!   than components, they share the CPUs, balanced by their measured work:
//!   heaviest first, each onto the least-loaded CPU);
//! * `consolidate`: everything on one CPU at full speed;
//! * `efficient`: the fewest and slowest cores that hold a throughput
//!   target, found by halving. It starts on one core halfway through the
//!   steps it may use and, after each change has settled (a sample), judges
//!   the next sample: the target held, or it missed while the stack was
//!   saturated (a CPU ≥ 90% busy, a channel half full or a hint; a miss
//!   without saturation is the application offering less, which speed
//!   would not help, and is not judged). It keeps the slowest step known to
//!   hold and the fastest known to miss, and tries the step halfway
//!   between them, so with `n` steps it is on the answer after at most
//!   ⌈log₂(n + 1)⌉ judged changes, each `settle_samples + 1` samples (on
//!   NewtOS's table's eight duty steps, 3 changes, 60 ms at 10 ms samples).
//!   The cores in use run one step. A core goes past the fastest duty step
//!   (into the chip-wide frequencies, whose power grows with the cube) only
//!   when no core can be added; until then, when no duty step holds, the
//!   stack gets one more core and searches again. A step that held and
//!   later misses (the load grew) is searched past again. (The paper's §4.3
//!   procedure raised one step per sample — TCP's core, then the others
//!   when TCP's step did not pay off — and took as many samples as steps:
//!   a 256 MiB stream on a 2-CPU machine could end before it reached its
//!   target.)
//! * `dynamic`: consolidated while the load is light, spread as soon as a
//!   burst shows (the shared CPU busy, channels filling, a hint), and
//!   consolidated again only after the load has stayed light for several
//!   samples and a minimum time since the last change (hysteresis);
//! * `manual`: hold the layout; only explicit moves and speeds change it.
//!
//! *Work* is the policy's unit of load: a component busy a fraction `b` of
//! the time on a CPU at a step of capacity `c` (its speed relative to the
//! fastest step) needs `b · c` of a full-speed CPU. Work adds up across
//! components, which is how the policy predicts what a consolidated CPU or a
//! spread layout would carry.
//!
//! Invariants (checked by [`PlacementPolicy::check`] after every decision in
//! debug builds): every component is on exactly one of the policy's CPUs;
//! every one of its CPUs has a speed step from the table; a decision is
//! emitted exactly when the layout changes, and the decisions, applied in
//! order to the previous layout, give the new one.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::power::StepIdx;
use crate::{CpuId, Nanos};

/// The components of a NewtOS-style split network stack, in pipeline order
/// from the application to the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ComponentKind {
    /// The syscall server: applications' synchronous calls to messages.
    Syscall,
    /// TCP (smoltcp's sockets): the component that copies payload.
    Tcp,
    /// IP: checksums and header checks.
    Ip,
    /// The packet filter.
    Filter,
    /// The driver: frames between the stack and the wire.
    Driver,
}

impl ComponentKind {
    pub const ALL: [ComponentKind; 5] = [
        ComponentKind::Syscall,
        ComponentKind::Tcp,
        ComponentKind::Ip,
        ComponentKind::Filter,
        ComponentKind::Driver,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ComponentKind::Syscall => "syscall",
            ComponentKind::Tcp => "tcp",
            ComponentKind::Ip => "ip",
            ComponentKind::Filter => "filter",
            ComponentKind::Driver => "driver",
        }
    }

    /// Work assumed before the first sample, in full-speed CPUs: the
    /// paper's §4.2 utilisations (TCP about 70%, IP and the driver under
    /// 40%); the filter and the syscall server are light.
    fn prior_work(self) -> f64 {
        match self {
            ComponentKind::Tcp => 0.7,
            ComponentKind::Ip | ComponentKind::Driver => 0.4,
            ComponentKind::Filter => 0.2,
            ComponentKind::Syscall => 0.1,
        }
    }
}

impl std::fmt::Display for ComponentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ComponentKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ComponentKind::ALL.into_iter().find(|k| k.name() == s).ok_or_else(|| {
            let known: Vec<_> = ComponentKind::ALL.iter().map(|k| k.name()).collect();
            format!("unknown component `{s}`; known components: {}", known.join(", "))
        })
    }
}

/// A channel at least this full says its receiver cannot keep up (the
/// `behind` hint), in the live stack and in the simulator alike.
pub const BEHIND_FILL: f64 = 0.5;

/// One component's load over a sample period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ComponentSample {
    /// Fraction of the period it was busy on its CPU, 0 to 1.
    pub busy: f64,
    /// How full its fullest inbound channel is, 0 to 1.
    pub fill: f64,
    /// A sender to it reported that it cannot keep up.
    pub behind: bool,
}

/// The load of a stack over a sample period. Components missing from the
/// map count as idle.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadSample {
    pub components: BTreeMap<ComponentKind, ComponentSample>,
    /// The stream's bitrate over the period (what `efficient` holds).
    pub bits_per_s: f64,
}

/// What the policy tries to do.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Spread,
    Consolidate,
    Efficient { target_bits_per_s: f64 },
    Dynamic,
    Manual,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mode::Spread => f.write_str("spread"),
            Mode::Consolidate => f.write_str("consolidate"),
            Mode::Efficient { target_bits_per_s } => {
                write!(f, "efficient ({:.2} Gbps)", target_bits_per_s / 1e9)
            }
            Mode::Dynamic => f.write_str("dynamic"),
            Mode::Manual => f.write_str("manual"),
        }
    }
}

/// What a backend is asked to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Run `component` alone on `cpu`: it polls, and parks after a run of
    /// empty polls.
    Dedicate { component: ComponentKind, cpu: CpuId },
    /// Run these components round-robin on `cpu`, with notifications.
    Consolidate { components: Vec<ComponentKind>, cpu: CpuId },
    /// Move one component to another CPU (sharing it with whatever runs there).
    Migrate { component: ComponentKind, from: CpuId, to: CpuId },
    /// Set a CPU's speed step, whose effective clock is `mhz` (for the
    /// decision log).
    SetSpeed { cpu: CpuId, step: StepIdx, mhz: u32 },
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Dedicate { component, cpu } => write!(f, "dedicate cpu {cpu} to {component}"),
            // The same action shares a CPU in every mode (spread on fewer
            // CPUs than components, too): it says what, not why.
            Action::Consolidate { components, cpu } => {
                let names: Vec<_> = components.iter().map(|c| c.name()).collect();
                write!(f, "run {} together on cpu {cpu}", names.join("+"))
            }
            Action::Migrate { component, from, to } => write!(f, "migrate {component} cpu {from} → {to}"),
            Action::SetSpeed { cpu, mhz, .. } => write!(f, "set cpu {cpu} to {mhz} MHz"),
        }
    }
}

/// A request to the policy from the user or the experiment, delivered as
/// [`Event::StackControl`](crate::policy::Event::StackControl). A frontend
/// checks it first with [`PlacementPolicy::validate`]: the policy ignores
/// a control it cannot carry out (it cannot return an error through the
/// boundary).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "control", rename_all = "snake_case")]
pub enum Control {
    /// Place everything as the configured mode says.
    Start,
    /// Switch to `mode`; its layout is decided at once.
    SetMode { mode: Mode },
    /// Move one component by hand (the policy switches to `manual`).
    Migrate { component: ComponentKind, to: CpuId },
    /// Set one CPU's speed step by hand (the policy switches to `manual`).
    SetSpeed { cpu: CpuId, step: StepIdx },
}

/// An action, when it was decided and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub at_ns: Nanos,
    pub action: Action,
    pub reason: String,
}

/// Where every component runs and how fast every CPU goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub cpu_of: BTreeMap<ComponentKind, CpuId>,
    pub step_of: BTreeMap<CpuId, StepIdx>,
}

impl Layout {
    /// The components on each CPU that has any.
    pub fn groups(&self) -> BTreeMap<CpuId, BTreeSet<ComponentKind>> {
        let mut g: BTreeMap<CpuId, BTreeSet<ComponentKind>> = BTreeMap::new();
        for (&c, &cpu) in &self.cpu_of {
            g.entry(cpu).or_default().insert(c);
        }
        g
    }

    /// CPUs that run at least one component (the others are power-gated).
    pub fn cpus_in_use(&self) -> BTreeSet<CpuId> {
        self.cpu_of.values().copied().collect()
    }

    /// Applies an action, as a backend would.
    pub fn apply(&mut self, a: &Action) {
        match a {
            Action::Dedicate { component, cpu } => {
                self.cpu_of.insert(*component, *cpu);
            }
            Action::Consolidate { components, cpu } => {
                for c in components {
                    self.cpu_of.insert(*c, *cpu);
                }
            }
            Action::Migrate { component, to, .. } => {
                self.cpu_of.insert(*component, *to);
            }
            Action::SetSpeed { cpu, step, .. } => {
                self.step_of.insert(*cpu, *step);
            }
        }
    }
}

/// Thresholds of the `dynamic` mode.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DynamicTuning {
    /// Spread when the consolidated CPU is at least this busy...
    pub spread_busy: f64,
    /// ... or any inbound channel is at least this full (a burst queues
    /// before it shows as busy time) ...
    pub spread_fill: f64,
    /// ... for this many samples in a row (1: react at once).
    pub spread_after: u32,
    /// Consolidate when all components together need at most this much of
    /// a full-speed CPU, no channel is filling and no hint is raised ...
    pub consolidate_work: f64,
    /// ... for this many samples in a row.
    pub consolidate_after: u32,
    /// No change sooner than this after the previous one.
    pub min_dwell_ns: Nanos,
}

impl Default for DynamicTuning {
    fn default() -> Self {
        // Hysteresis: consolidating at ≤ 0.40 leaves the shared CPU about
        // 0.40 busy, well under the 0.75 that spreads again.
        DynamicTuning {
            spread_busy: 0.75,
            spread_fill: 0.5,
            spread_after: 1,
            consolidate_work: 0.4,
            consolidate_after: 5,
            min_dwell_ns: 50_000_000,
        }
    }
}

/// Parameters of the `efficient` mode's tuning procedure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EfficientTuning {
    /// Samples to let a speed change settle before judging it.
    pub settle_samples: u32,
    /// The target counts as held within this fraction below it.
    pub tolerance: f64,
    /// A CPU at least this busy is saturated: the stack, not the
    /// application, limits the bitrate.
    pub saturated_busy: f64,
}

impl Default for EfficientTuning {
    fn default() -> Self {
        EfficientTuning { settle_samples: 1, tolerance: 0.02, saturated_busy: 0.9 }
    }
}

/// How to place a stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlacementConfig {
    /// The CPUs the stack may use, in order of preference.
    pub cpus: Vec<CpuId>,
    pub mode: Mode,
    pub dynamic: DynamicTuning,
    pub efficient: EfficientTuning,
}

impl PlacementConfig {
    pub fn new(cpus: Vec<CpuId>, mode: Mode) -> Self {
        PlacementConfig {
            cpus,
            mode,
            dynamic: DynamicTuning::default(),
            efficient: EfficientTuning::default(),
        }
    }
}

/// A configuration the policy cannot work with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementError(pub String);

impl std::fmt::Display for PlacementError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlacementError {}

mod machine;

pub use machine::PlacementPolicy;

#[cfg(test)]
mod tests;
