//! A fault campaign: crashes of random components, at random times and
//! random points of their step, with live updates and moves among them,
//! injected into a stack on runtime CPUs while it carries streams.
//!
//! The campaign draws every choice from one seeded ChaCha8 generator:
//! which fault (a crash nine times in ten, else a live update or a move,
//! as often as each other), which component, which point of its step
//! ([`CrashPoint`]), which version or CPU, and the gap to the next fault
//! (exponential, of mean [`Plan::gap`]). The *times* at which faults land
//! in the stack's work are not reproducible (the stack runs on real CPUs
//! beside other threads); the sequence of choices is.
//!
//! A crash is *armed* and counts once it has *fired* (the component
//! reached the point); a component whose switch is still armed is not
//! chosen again until it fires. The campaign is done when [`Plan::crashes`]
//! crashes have fired; [`Campaign::finish`] disarms what is still armed,
//! so nothing fires while the streams close.

use std::time::{Duration, Instant};

use dyncore_core::CpuId;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::component::{ComponentKind, CrashPoint};
use crate::host::Updated;
use crate::hosting::{CpuHost, HostError};

/// What a campaign injects.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Crashes that must fire.
    pub crashes: u64,
    pub seed: u64,
    /// Mean time between two faults.
    pub gap: Duration,
    /// The CPUs a move may go to.
    pub cpus: Vec<CpuId>,
}

/// Components a live update may replace (TCP cannot be updated), with the
/// versions they have.
const UPDATABLE: [(ComponentKind, &[u32]); 4] = [
    (ComponentKind::Syscall, &[1]),
    (ComponentKind::Ip, &[1]),
    (ComponentKind::Filter, &[1, 2]),
    (ComponentKind::Driver, &[1]),
];

/// Moves a component to a CPU (see [`Campaign::step`]).
pub type Mover<'a> = dyn FnMut(ComponentKind, CpuId) -> Result<(), HostError> + 'a;

/// A campaign in progress (see the module docs).
pub struct Campaign {
    plan: Plan,
    rng: ChaCha8Rng,
    next_at: Instant,
    /// Crashes armed, per component (index in `ComponentKind::ALL`) and point.
    pub armed: [[u64; 5]; 5],
    pub updates: Vec<Updated>,
    /// Moves: the component, from and to.
    pub moves: Vec<(ComponentKind, CpuId, CpuId)>,
    /// Crashes armed but not fired when the campaign finished.
    pub disarmed: u64,
}

impl Campaign {
    pub fn new(plan: Plan) -> Campaign {
        assert!(!plan.cpus.is_empty(), "a campaign needs the host's CPUs");
        let rng = ChaCha8Rng::seed_from_u64(plan.seed);
        Campaign {
            plan,
            rng,
            next_at: Instant::now(),
            armed: [[0; 5]; 5],
            updates: Vec::new(),
            moves: Vec::new(),
            disarmed: 0,
        }
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Crashes fired so far (every restart of the host's components).
    pub fn fired(host: &CpuHost) -> u64 {
        host.components().iter().map(|s| s.load.restarts).sum()
    }

    /// Injects the next fault if it is due; returns whether the campaign
    /// is done (its crashes have fired). A move is made by `mover` (the
    /// host's [`CpuHost::place`], or a placement controller's request, so
    /// that the policy's layout stays the host's).
    pub fn step(&mut self, host: &CpuHost, mover: &mut Mover<'_>) -> Result<bool, HostError> {
        if Campaign::fired(host) >= self.plan.crashes {
            return Ok(true);
        }
        if Instant::now() < self.next_at {
            return Ok(false);
        }
        let u: f64 = self.rng.random();
        let gap = -u.max(1e-12).ln() * self.plan.gap.as_secs_f64();
        self.next_at = Instant::now() + Duration::from_secs_f64(gap.min(1.0));
        match self.rng.random_range(0..20) {
            0 => self.update(host)?,
            1 => self.move_one(host, mover)?,
            _ => self.crash(host)?,
        }
        Ok(false)
    }

    fn crash(&mut self, host: &CpuHost) -> Result<(), HostError> {
        let k = self.rng.random_range(0..ComponentKind::ALL.len());
        let p = self.rng.random_range(0..CrashPoint::ALL.len());
        let kind = ComponentKind::ALL[k];
        if !host.is_armed(kind)? {
            host.crash_at(kind, CrashPoint::ALL[p])?;
            self.armed[k][p] += 1;
        }
        Ok(())
    }

    fn update(&mut self, host: &CpuHost) -> Result<(), HostError> {
        let (kind, versions) = UPDATABLE[self.rng.random_range(0..UPDATABLE.len())];
        let version = versions[self.rng.random_range(0..versions.len())];
        self.updates.push(host.update(kind, version)?);
        Ok(())
    }

    fn move_one(&mut self, host: &CpuHost, mover: &mut Mover<'_>) -> Result<(), HostError> {
        let kind = ComponentKind::ALL[self.rng.random_range(0..ComponentKind::ALL.len())];
        let to = self.plan.cpus[self.rng.random_range(0..self.plan.cpus.len())];
        let from = host.cpu_of(kind).expect("every component is placed");
        mover(kind, to)?;
        if from != to {
            self.moves.push((kind, from, to));
        }
        Ok(())
    }

    /// Disarms every switch still armed (counted in `disarmed`).
    pub fn finish(&mut self, host: &CpuHost) -> Result<(), HostError> {
        for k in ComponentKind::ALL {
            if host.disarm(k)? {
                self.disarmed += 1;
            }
        }
        Ok(())
    }

    /// Crashes armed, all components and points.
    pub fn armed_total(&self) -> u64 {
        self.armed.iter().flatten().sum()
    }
}
