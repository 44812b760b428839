//! One command on one real CPU under a policy of the registry: what
//! `dyncore bench arbiter` measures the arbiter's own cost with, and what
//! a command's work alone is measured under (`dyncore_live::commands`).
//! The policy is built for a machine of one CPU (uniform, no fusing, Bolt
//! reconfiguration, exits notified, seed 0) with its default parameters.

use dyncore_core::policies::{Registry, RunContext};
use dyncore_core::policy::{Policy, ThreadSpec};
use dyncore_core::reconfig::Mode;
use dyncore_core::speed::{SpeedClass, SpeedModel};
use dyncore_core::topology::Topology;
use dyncore_core::{CpuId, CpuSet, Nanos};

use super::{Arbiter, ArbiterConfig, ArbiterError, spare_cpu};
use crate::backend::DutyScale;

/// An arbiter over one real CPU ([`OneCpu::arbiter`]).
#[derive(Debug, Clone)]
pub struct OneCpu<'a> {
    /// The run's name (its groups are named after it).
    pub run_name: &'a str,
    /// A policy of the registry, built with its default parameters.
    pub policy: &'a str,
    pub cpu: CpuId,
    /// The policy's tick and the arbiter's (every CPU ticks every `tick_ns`).
    pub tick_ns: Nanos,
    /// The policy's CFS minimum granularity.
    pub min_granularity_ns: Nanos,
    pub duty_scale: DutyScale,
    /// [`ArbiterConfig::weight`].
    pub weight: Option<u32>,
}

impl OneCpu<'_> {
    /// The arbiter: the policy `self.policy` of `registry` on runtime CPU 0
    /// = real CPU `self.cpu`, its controller on another CPU where there is
    /// one ([`spare_cpu`]). A policy the registry does not have, or that
    /// refuses its defaults, is an [`ArbiterError::Config`].
    pub fn arbiter(&self, registry: &Registry) -> Result<Arbiter<dyn Policy + Send>, ArbiterError> {
        let ctx = RunContext {
            topology: Topology::uniform(1, 1),
            speed: SpeedModel::DYNAMIC,
            max_fuse: 1,
            tick_ns: self.tick_ns,
            min_granularity_ns: self.min_granularity_ns,
            notify_on_exit: true,
            reconfig_mode: Mode::Bolt,
            seed: 0,
        };
        let params = registry.validate(self.policy, &[]).map_err(|e| ArbiterError::Config(e.message))?;
        let policy =
            registry.build(self.policy, &ctx, &params).map_err(|e| ArbiterError::Config(e.to_string()))?;
        let mut cfg = ArbiterConfig::new(self.run_name, vec![self.cpu]);
        cfg.duty_scale = self.duty_scale;
        cfg.weight = self.weight;
        cfg.tick_ns = self.tick_ns;
        cfg.controller_cpu = spare_cpu(&CpuSet::single(self.cpu));
        Arbiter::new(policy, cfg)
    }
}

/// How a command started on one CPU is spawned to its policy: nice 0, tax
/// 1, one CPU wanted, weight 1, no affinity, the medium speed class.
pub fn command_spec() -> ThreadSpec {
    ThreadSpec { nice: 0, tax: 1.0, want_cpus: 1, weight: 1.0, affinity: None, class: SpeedClass::Medium }
}
