//! Machine speed model (Chameleon Table 2).
//!
//! Chameleon emulates asymmetric and dynamic processors with clock
//! modulation: every CPU runs at a duty cycle, the baseline CPU at 50%. A
//! program's progress rate is its CPU's duty cycle over 50%, so 1.0 is one
//! baseline CPU. Fast CPUs (ACMP) and fused objects (Dynamic) run faster by
//! an amount that depends on the program's speedup class:
//!
//! | architecture | CPUs slow, fast | low | med | high |
//! |---|---|---|---|---|
//! | CMP | 24, - | 50 | 50 | 50 |
//! | ACMP-3 | 12, 3 | 75 | 87.5 | 100 |
//! | ACMP-6 | 12, 6 | 62.5 | 75 | 75 |
//! | Dynamic, fuse 2 | | 62.5 | 75 | 75 |
//! | Dynamic, fuse 4 | | 75 | 87.5 | 100 |
//!
//! The `smt` machine (§5.5) has 4 cores of 2 hyperthreads; a thread whose
//! sibling hyperthread is busy progresses at its program's `smt_factor`; a
//! "fused" hyperthread pair is a core running one thread alone.

use dyncore_core::topology::{CoreKind, Topology};

use crate::scenario::RunSpec;
use crate::workload::SpeedClass;

/// Known architectures, for error messages.
pub const ARCHS: [&str; 6] = ["cmp", "acmp-3", "acmp-6", "dynamic", "smt", "uniform"];

/// Duty cycle (percent) of a fast CPU or fused object for each class.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DutyByClass {
    pub low: f64,
    pub med: f64,
    pub high: f64,
}

impl DutyByClass {
    /// Progress rate relative to the 50% baseline.
    pub fn speed(&self, class: SpeedClass) -> f64 {
        let duty = match class {
            SpeedClass::Low => self.low,
            SpeedClass::Medium => self.med,
            SpeedClass::High => self.high,
        };
        duty / BASE_DUTY
    }
}

/// The baseline CPU's duty cycle, percent.
pub const BASE_DUTY: f64 = 50.0;

/// Table 2: a fused pair, and the fast CPUs of ACMP-6.
const DUTY_PAIR: DutyByClass = DutyByClass { low: 62.5, med: 75.0, high: 75.0 };
/// Table 2: a fused quad, and the fast CPUs of ACMP-3.
const DUTY_QUAD: DutyByClass = DutyByClass { low: 75.0, med: 87.5, high: 100.0 };

/// A machine to simulate: topology plus speed tables.
#[derive(Debug, Clone)]
pub struct MachineSpec {
    pub topology: Topology,
    /// Speed of `Big` CPUs (ACMP fast cores).
    pub fast: Option<DutyByClass>,
    /// Speed of fused objects of 2 and 4 CPUs.
    pub fuse2: DutyByClass,
    pub fuse4: DutyByClass,
    /// Largest fused object, CPUs (1 = no fusion).
    pub max_fuse: usize,
    /// Hyperthread siblings slow each other down.
    pub smt: bool,
}

impl MachineSpec {
    /// Builds the machine a run asks for. Errors name the offending field.
    pub fn build(run: &RunSpec) -> Result<MachineSpec, (&'static str, String)> {
        let arch = run.machine.to_ascii_lowercase();
        // (nodes, cpus per node, fast CPUs, fast duty, max fuse, smt)
        let (nodes, per_node, nfast, fast, max_fuse, smt) = match arch.as_str() {
            "cmp" => (2, 12, 0, None, 1, false),
            "acmp-3" => (1, 15, 3, Some(DUTY_QUAD), 1, false),
            "acmp-6" => (1, 18, 6, Some(DUTY_PAIR), 1, false),
            "dynamic" => (2, 12, 0, None, 4, false),
            "smt" => (1, 8, 0, None, 2, true),
            "uniform" => (1, 4, 0, None, 4, false),
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
        if max_fuse > 1 && fast.is_some() {
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
        Ok(MachineSpec { topology, fast, fuse2: DUTY_PAIR, fuse4: DUTY_QUAD, max_fuse, smt })
    }

    /// Progress rate of a thread of `class` on `cpu`, running alone on an
    /// object of `object_cpus` CPUs (1 = native).
    pub fn speed(&self, cpu: usize, object_cpus: usize, class: SpeedClass) -> f64 {
        if self.smt {
            // A hyperthread pair running one thread is a core alone: full speed;
            // the SMT slowdown is applied by the caller when the sibling is busy.
            return 1.0;
        }
        match object_cpus {
            0 | 1 => match (self.topology.kind(cpu), &self.fast) {
                (CoreKind::Big, Some(fast)) => fast.speed(class),
                _ => 1.0,
            },
            2 | 3 => self.fuse2.speed(class),
            _ => self.fuse4.speed(class),
        }
    }
}
