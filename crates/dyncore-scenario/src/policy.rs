//! A run's policy, from the registry: the context it is built from, a
//! fresh instance, and what its declared capabilities say about the run.
//! The one place both backends get a policy; neither names one.

use dyncore_core::Nanos;
use dyncore_core::policies::{Params, PolicyInfo, RunContext};
use dyncore_core::policy::{ActionKind, Policy};
use dyncore_core::reconfig::Mode;

use crate::machine::MachineSpec;
use crate::programs::ProgramPlan;
use crate::scenario::Scenario;

/// What run `index` of a validated scenario gives its policy.
pub fn run_context(scenario: &Scenario, index: usize) -> RunContext {
    let spec = &scenario.runs[index];
    let params = scenario.sim.with(&spec.sim);
    let machine = machine_of(scenario, index);
    RunContext {
        topology: machine.topology,
        speed: machine.speed,
        max_fuse: machine.max_fuse,
        tick_ns: params.tick_ns,
        min_granularity_ns: params.min_granularity_ns,
        notify_on_exit: params.notify_on_exit,
        reconfig_mode: Mode::Bolt,
        // Not the simulator's own generator's seed (which draws the IPIs).
        seed: run_seed(scenario.seed, index) ^ 0x706f_6c69_6379,
    }
}

/// The machine of run `index` of a validated scenario.
pub fn machine_of(scenario: &Scenario, index: usize) -> MachineSpec {
    MachineSpec::build(&scenario.runs[index])
        .unwrap_or_else(|(f, m)| panic!("unvalidated scenario: {f}: {m}"))
}

/// The registry entry of run `index`'s policy.
pub fn policy_info(scenario: &Scenario, index: usize) -> &'static PolicyInfo {
    let name = &scenario.runs[index].policy.name;
    &scenario.registry.get(name).unwrap_or_else(|e| panic!("unvalidated scenario: {e}")).info
}

/// A fresh policy for run `index` of a validated scenario (a replay of the
/// run's event trace starts from another).
pub fn policy_for(scenario: &Scenario, index: usize) -> Box<dyn Policy + Send> {
    let spec = &scenario.runs[index].policy;
    let params = params_of(scenario, index);
    scenario
        .registry
        .build(&spec.name, &run_context(scenario, index), &params)
        .unwrap_or_else(|e| panic!("unvalidated scenario: {e}"))
}

/// Run `index`'s policy parameters, validated, defaults filled in.
pub fn params_of(scenario: &Scenario, index: usize) -> Params {
    let spec = &scenario.runs[index].policy;
    scenario
        .registry
        .validate(&spec.name, &spec.params)
        .unwrap_or_else(|e| panic!("unvalidated scenario: {e}"))
}

/// Whether a run of this policy on this machine reconfigures at all: the
/// policy may take CPUs offline, and, if it does so to fuse, the machine
/// fuses.
pub fn reconfigures(info: &PolicyInfo, machine: &MachineSpec) -> bool {
    info.emits(ActionKind::Offline) && (!info.emits(ActionKind::Fuse) || machine.max_fuse > 1)
}

/// Whether the allocation timeline follows `plan`: a sequential program,
/// under a policy that gives execution objects.
pub fn tracked(info: &PolicyInfo, plan: &ProgramPlan) -> bool {
    info.emits(ActionKind::Object) && plan.program.is_sequential()
}

/// A generator seed of one run: the scenario's seed mixed with the run's
/// index (one splitmix64 step).
pub fn run_seed(seed: u64, index: usize) -> u64 {
    let mut z = seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What both thread backends (the simulator and the live runtime) execute:
/// every action but `Place` (defined beside the actions, in `dyncore-core`).
pub use dyncore_core::policy::THREAD_ACTIONS;

/// The period of the load samples backends feed every policy, per CPU.
pub const LOAD_SAMPLE_NS: Nanos = 100_000_000;
