//! The live placement controller: drives a
//! [`dyncore_core::placement::PlacementPolicy`] for a stack hosted on
//! runtime CPUs ([`crate::hosting`]) and carries out its decisions.
//!
//! It talks to the policy only through the policy boundary's placement
//! events (`StackControl`, `StackLoad`; see [`Controller::feed`]) and
//! executes the `Place` decisions it gets back: dedicate, consolidate and
//! migrate become slot moves ([`CpuHost::place`]); a speed step becomes the
//! CPU's duty cycle ([`crate::hosting::duty_of_step`]).
//!
//! A load sample ([`Controller::sample`]) covers the time since the
//! previous one. Per component:
//!
//! * `busy`: the time in polls that did work over the window, divided by
//!   its CPU's duty (the policy reads busy as a fraction of what the CPU
//!   at its step can give, and multiplies by the step's capacity to get
//!   work), capped at 1;
//! * `fill`: how full its fullest inbound channel is;
//! * `behind`: a sender's frame channel to it is at least [`BEHIND_FILL`]
//!   full (NewtOS §5's "my receiver cannot keep up"; the one-call control
//!   channels between the syscall server and TCP do not count);
//!
//! and the stream's bitrate: the payload bytes TCP copied over the window.
//!
//! Every decision is kept in [`Controller::log`] with its time and reason.
//!
//! Invariant (asserted after every decision): the host's layout is the
//! policy's — every component runs on the CPU the policy put it on.

use std::collections::BTreeMap;

use dyncore_core::Nanos;
pub use dyncore_core::placement::Control;
use dyncore_core::placement::{
    Action, ComponentSample, Decision, Layout, LoadSample, PlacementError, PlacementPolicy,
};
use dyncore_core::policy::{Action as PolicyAction, Event, Policy};

use crate::component::ComponentKind;
use crate::hosting::{CpuHost, CpuSnapshot, HostError, SlotSnapshot, duty_of_step};
use dyncore_core::power::PowerModel;

/// An outbound channel at least this full says its receiver is behind (the
/// simulator's hint uses the same threshold).
pub const BEHIND_FILL: f64 = dyncore_core::placement::BEHIND_FILL;

/// The channels between the syscall server and TCP carry one call or reply
/// per client: full whenever a call is outstanding, which says nothing
/// about keeping up. The hint reads the frame channels only.
fn control_channel(from: ComponentKind, to: ComponentKind) -> bool {
    matches!(
        (from, to),
        (ComponentKind::Syscall, ComponentKind::Tcp) | (ComponentKind::Tcp, ComponentKind::Syscall)
    )
}

/// See the module docs.
pub struct Controller {
    policy: PlacementPolicy,
    layout: Layout,
    last: Option<(Nanos, Vec<SlotSnapshot>)>,
    /// Every decision so far, in order.
    pub log: Vec<Decision>,
    /// Every sample fed, with its time.
    pub samples: Vec<(Nanos, LoadSample)>,
    /// Per sample window: its end, the CPUs in use, their running time
    /// (CPU-seconds) and modelled energy (joules) over the window.
    pub windows: Vec<Window>,
    last_cpus: Option<Vec<CpuSnapshot>>,
    model: PowerModel,
}

/// One sample window's cost (see [`Controller::windows`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Window {
    pub end_ns: Nanos,
    pub len_ns: Nanos,
    pub cpus_in_use: usize,
    pub cpu_s: f64,
    /// **Modelled** ([`dyncore_core::power::MODELLED`]): each CPU in use at
    /// its step, running the fraction of the window its worker ran
    /// (polling counts: a polling core is not asleep), asleep the rest;
    /// CPUs without components are power-gated.
    pub joules: f64,
    pub bits_per_s: f64,
}

/// A request the policy refused, or a decision the host could not carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlError {
    Policy(PlacementError),
    Host(HostError),
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControlError::Policy(e) => write!(f, "{e}"),
            ControlError::Host(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ControlError {}

impl From<HostError> for ControlError {
    fn from(e: HostError) -> Self {
        ControlError::Host(e)
    }
}

impl Controller {
    pub fn new(policy: PlacementPolicy) -> Self {
        Controller {
            policy,
            layout: Layout { cpu_of: BTreeMap::new(), step_of: BTreeMap::new() },
            last: None,
            log: Vec::new(),
            samples: Vec::new(),
            windows: Vec::new(),
            last_cpus: None,
            model: PowerModel::newtos(),
        }
    }

    pub fn policy(&self) -> &PlacementPolicy {
        &self.policy
    }

    /// The layout the decisions so far give.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Starts the policy (before the host exists): the initial layout to
    /// start the host with. Then call [`Controller::attach`].
    pub fn start(&mut self, now_ns: Nanos) -> Layout {
        for d in self.feed(now_ns, &Event::StackControl { control: Control::Start }) {
            self.layout.apply(&d.action);
            self.log.push(d);
        }
        self.layout.clone()
    }

    /// Gives a freshly started host the initial layout's speeds.
    pub fn attach(&mut self, host: &CpuHost) -> Result<(), ControlError> {
        for (&cpu, &step) in &self.layout.step_of {
            host.set_duty(cpu, duty_of_step(self.policy.speeds(), step))?;
        }
        self.check(host);
        Ok(())
    }

    /// The one way to the policy: an event in, its decisions out.
    pub fn feed(&mut self, now_ns: Nanos, ev: &Event) -> Vec<Decision> {
        let mut out = Vec::new();
        self.policy.handle(now_ns, ev, &mut out);
        out.into_iter()
            .filter_map(|a| match a {
                PolicyAction::Place { decision } => Some(decision),
                _ => None,
            })
            .collect()
    }

    /// A request (a mode, a move, a speed), checked by the policy first.
    pub fn control(&mut self, host: &CpuHost, now_ns: Nanos, c: Control) -> Result<(), ControlError> {
        self.policy.validate(&c).map_err(ControlError::Policy)?;
        let ds = self.feed(now_ns, &Event::StackControl { control: c });
        self.execute(host, ds)
    }

    /// Takes a load sample over the time since the previous one and feeds
    /// it; returns it (`None` for the first call, which only starts the
    /// window).
    pub fn sample(&mut self, host: &CpuHost, now_ns: Nanos) -> Result<Option<LoadSample>, ControlError> {
        let now = host.components();
        let cpus = host.cpus();
        let cpus_before = self.last_cpus.replace(cpus.clone());
        let Some((t0, before)) = self.last.replace((now_ns, now.clone())) else {
            return Ok(None);
        };
        let window = now_ns.saturating_sub(t0).max(1);
        let duties: BTreeMap<_, _> = cpus.iter().map(|c| (c.cpu, c.duty_per_mille)).collect();
        let mut behind = std::collections::BTreeSet::new();
        for s in &now {
            let from = s.kind.expect("host snapshots name their component");
            for (j, &f) in s.outbound_fill.iter().enumerate() {
                if f >= BEHIND_FILL && !control_channel(from, ComponentKind::ALL[j]) {
                    behind.insert(ComponentKind::ALL[j]);
                }
            }
        }
        let mut bits_per_s = 0.0;
        let components = now
            .iter()
            .zip(&before)
            .map(|(s, b)| {
                let k = s.kind.expect("host snapshots name their component");
                let busy_ns = s.load.busy_ns.saturating_sub(b.load.busy_ns) as f64;
                let duty = f64::from(duties[&s.cpu]) / 1000.0;
                if k == ComponentKind::Tcp {
                    bits_per_s = s.load.bytes.saturating_sub(b.load.bytes) as f64 * 8.0 * 1e9 / window as f64;
                }
                let busy = (busy_ns / window as f64 / duty).min(1.0);
                (k, ComponentSample { busy, fill: s.inbound_fill, behind: behind.contains(&k) })
            })
            .collect();
        let sample = LoadSample { components, bits_per_s };
        self.account(window, now_ns, &cpus, cpus_before.as_deref(), bits_per_s);
        let ds = self.feed(now_ns, &Event::StackLoad { sample: sample.clone() });
        self.samples.push((now_ns, sample.clone()));
        self.execute(host, ds)?;
        Ok(Some(sample))
    }

    /// Adds the window's CPU time and modelled energy, under the layout
    /// that was in force over it.
    fn account(
        &mut self,
        window: Nanos,
        end_ns: Nanos,
        cpus: &[CpuSnapshot],
        before: Option<&[CpuSnapshot]>,
        bits_per_s: f64,
    ) {
        let Some(before) = before else { return };
        let in_use = self.layout.cpus_in_use();
        let (mut cpu_s, mut joules) = (0.0, 0.0);
        for (c, b) in cpus.iter().zip(before) {
            if !in_use.contains(&c.cpu) {
                continue;
            }
            let ran = c.run_ns.saturating_sub(b.run_ns) as f64;
            let frac = (ran / window as f64).min(1.0);
            let step = self.layout.step_of.get(&c.cpu).copied().unwrap_or(self.policy.speeds().fastest());
            cpu_s += ran / 1e9;
            joules += self.model.core_w(self.policy.speeds().get(step), frac) * window as f64 / 1e9;
        }
        self.windows.push(Window {
            end_ns,
            len_ns: window,
            cpus_in_use: in_use.len(),
            cpu_s,
            joules,
            bits_per_s,
        });
    }

    /// CPU-seconds and modelled joules over every window so far.
    pub fn totals(&self) -> (f64, f64) {
        self.windows.iter().fold((0.0, 0.0), |(c, j), w| (c + w.cpu_s, j + w.joules))
    }

    fn execute(&mut self, host: &CpuHost, ds: Vec<Decision>) -> Result<(), ControlError> {
        for d in ds {
            match &d.action {
                Action::Dedicate { component, cpu } => host.place(*component, *cpu)?,
                Action::Consolidate { components, cpu } => {
                    for c in components {
                        host.place(*c, *cpu)?;
                    }
                }
                Action::Migrate { component, to, .. } => host.place(*component, *to)?,
                Action::SetSpeed { cpu, step, .. } => {
                    host.set_duty(*cpu, duty_of_step(self.policy.speeds(), *step))?
                }
            }
            self.layout.apply(&d.action);
            self.log.push(d);
        }
        self.check(host);
        Ok(())
    }

    fn check(&self, host: &CpuHost) {
        for (&k, &cpu) in &self.layout.cpu_of {
            assert_eq!(host.cpu_of(k), Some(cpu), "the host runs {k} where the policy did not put it");
        }
    }
}
