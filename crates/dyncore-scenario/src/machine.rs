//! The simulated machines: Table 2's architectures as a topology and a
//! speed model, and the physics of what a duty cycle does.
//!
//! The *policy* half of the speed model — which duty each CPU runs at — is
//! in `dyncore_core::speed` and reaches the simulator as `SetSpeed`
//! actions. The *physics* is here: a thread progresses at its CPU's duty
//! over the 50% baseline ([`progress_rate`]), times its program's
//! `smt_factor` on the `smt` machine when the sibling hyperthread is busy,
//! and not at all while its CPU reconfigures (the engine's business).
//!
//! | architecture | CPUs slow, fast | low | med | high |
//! |---|---|---|---|---|
//! | CMP | 24, - | 50 | 50 | 50 |
//! | ACMP-3 | 12, 3 | 75 | 87.5 | 100 |
//! | ACMP-6 | 12, 6 | 62.5 | 75 | 75 |
//! | Dynamic, fuse 2 | | 62.5 | 75 | 75 |
//! | Dynamic, fuse 4 | | 75 | 87.5 | 100 |
//!
//! The `smt` machine (§5.5) has 4 cores of 2 hyperthreads, all at the
//! baseline duty; a "fused" hyperthread pair is a core running one thread
//! alone, whose gain is that its sibling is idle.

use dyncore_core::speed::{DUTY_PAIR, DUTY_QUAD, Duty, SpeedModel};
use dyncore_core::topology::{CoreKind, Topology};

use crate::scenario::RunSpec;

/// Known architectures, for error messages.
pub const ARCHS: [&str; 6] = ["cmp", "acmp-3", "acmp-6", "dynamic", "smt", "uniform"];

/// A machine to simulate: topology plus speed tables.
#[derive(Debug, Clone)]
pub struct MachineSpec {
    pub topology: Topology,
    /// Duties by CPU kind, object size and class (the policy's input).
    pub speed: SpeedModel,
    /// Largest fused object, CPUs (1 = no fusion).
    pub max_fuse: usize,
    /// Hyperthread siblings slow each other down.
    pub smt: bool,
}

/// Progress rate of a thread on a CPU at `duty`, relative to one baseline
/// CPU; `sibling_factor` is its SMT factor when the sibling hyperthread is
/// busy, else 1.
pub fn progress_rate(duty: Duty, sibling_factor: f64) -> f64 {
    duty.speedup() * sibling_factor
}

impl MachineSpec {
    /// Builds the machine a run asks for. Errors name the offending field.
    pub fn build(run: &RunSpec) -> Result<MachineSpec, (&'static str, String)> {
        let arch = run.machine.to_ascii_lowercase();
        // (nodes, cpus per node, fast CPUs, fast duty, max fuse, smt)
        let (nodes, per_node, nfast, speed, max_fuse, smt) = match arch.as_str() {
            "cmp" => (2, 12, 0, SpeedModel::DYNAMIC, 1, false),
            "acmp-3" => (1, 15, 3, SpeedModel::acmp(DUTY_QUAD), 1, false),
            "acmp-6" => (1, 18, 6, SpeedModel::acmp(DUTY_PAIR), 1, false),
            "dynamic" => (2, 12, 0, SpeedModel::DYNAMIC, 4, false),
            "smt" => (1, 8, 0, SpeedModel::BASELINE, 2, true),
            "uniform" => (1, 4, 0, SpeedModel::DYNAMIC, 4, false),
            _ => {
                return Err((
                    "machine",
                    format!(
                        "unknown architecture `{}`; known architectures: {}",
                        run.machine,
                        ARCHS.join(", ")
                    ),
                ));
            }
        };
        let nodes = run.nodes.unwrap_or(nodes);
        let per_node = run.cpus_per_node.unwrap_or(per_node);
        if nodes == 0 {
            return Err(("nodes", "a machine needs at least one node".into()));
        }
        if per_node == 0 {
            return Err(("cpus_per_node", "a machine with zero CPUs cannot run anything".into()));
        }
        let max = crate::scenario::limits::MAX_MACHINE_CPUS;
        if nodes.checked_mul(per_node).is_none_or(|n| n > max) {
            return Err((
                "cpus_per_node",
                format!("{nodes} nodes × {per_node} CPUs is more than the {max} CPUs a machine may have"),
            ));
        }
        let max_fuse = run.max_fuse.unwrap_or(max_fuse);
        if ![1, 2, 4].contains(&max_fuse) {
            return Err(("max_fuse", format!("fused objects have 1, 2 or 4 CPUs, not {max_fuse}")));
        }
        if max_fuse > per_node {
            return Err((
                "max_fuse",
                format!("a fused object of {max_fuse} CPUs does not fit a node of {per_node} CPUs"),
            ));
        }
        if max_fuse > 1 && speed.fast.is_some() {
            return Err((
                "max_fuse",
                format!("`{arch}` is a static asymmetric machine; it cannot fuse CPUs"),
            ));
        }
        if smt && !per_node.is_multiple_of(2) {
            return Err(("cpus_per_node", "an SMT machine needs an even number of CPUs per node".into()));
        }
        let mut topology =
            if smt { Topology::uniform_smt(nodes, per_node / 2) } else { Topology::uniform(nodes, per_node) };
        // ACMP: the fast CPUs are the last `nfast` of the machine.
        let total = topology.ncpus();
        if nfast > total {
            return Err((
                "cpus_per_node",
                format!("{total} CPUs cannot hold the {nfast} fast CPUs of `{arch}`"),
            ));
        }
        for cpu in total - nfast..total {
            topology.set_kind(cpu, CoreKind::Big);
        }
        Ok(MachineSpec { topology, speed, max_fuse, smt })
    }
}
