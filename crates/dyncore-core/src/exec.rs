//! Execution objects (Chameleon §3.2, §4.2).
//!
//! An execution object is a possible execution context: one native CPU, or a
//! *fused* set of CPUs that runs one thread faster. Its representative CPU
//! is the lowest CPU of the set — the CPU whose run queue holds the thread and
//! to which interrupts go while the object is active. Activating a fused
//! object borrows the other CPUs (they run nothing else and are proxied);
//! deactivating returns them.
//!
//! The only property implemented, as in the paper, is `sequential` with a
//! level: log2 of the number of CPUs. Node managers hand objects out
//! ([`crate::node`]), the cluster scheduler activates them
//! ([`crate::sched`]), and the `Fuse`, `Split` and `Object` actions of the
//! policy boundary ([`crate::policy`]) carry them to the backend.
//!
//! Invariants (checked by [`ExecObject::check`], asserted by the
//! constructor): the object is an aligned-size set — 1, 2 or 4 CPUs —, its
//! representative is below every borrowed CPU, and its property's level is
//! log2 of its size.

use serde::{Deserialize, Serialize};

use crate::{CpuId, CpuSet};

/// Property identifier of `sequential`.
pub const SEQUENTIAL: u32 = 0;

/// A property an object offers: an id and a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Property {
    pub id: u32,
    /// For `sequential`: log2 of the CPUs in the object.
    pub level: u32,
}

impl Property {
    /// `sequential` at `level` (2^level CPUs).
    pub fn sequential(level: u32) -> Property {
        Property { id: SEQUENTIAL, level }
    }

    /// CPUs an object with this property has.
    pub fn cpus(&self) -> usize {
        1 << self.level
    }
}

/// The sequential level of an object of `cpus` CPUs (log2).
pub fn level_of(cpus: usize) -> u32 {
    debug_assert!(cpus.is_power_of_two());
    cpus.trailing_zeros()
}

/// An execution object: a representative CPU and the CPUs it borrows when
/// active.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecObject {
    /// The lowest CPU: the thread's run queue, the interrupts' target.
    pub representative: CpuId,
    /// The other CPUs; activation takes them offline (proxied).
    pub borrowed: CpuSet,
    /// `sequential` at log2 of the object's size.
    pub property: Property,
}

impl ExecObject {
    /// The object made of `cpus` (lowest = representative).
    pub fn new(cpus: &CpuSet) -> ExecObject {
        let representative = cpus.first().expect("an execution object has at least one CPU");
        let mut borrowed = cpus.clone();
        borrowed.remove(representative);
        let o = ExecObject { representative, borrowed, property: Property::sequential(level_of(cpus.len())) };
        if let Err(e) = o.check() {
            panic!("bad execution object {cpus}: {e}");
        }
        o
    }

    /// Number of CPUs (1 = a native CPU).
    pub fn len(&self) -> usize {
        1 + self.borrowed.len()
    }

    /// Never: an object has its representative.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn is_fused(&self) -> bool {
        !self.borrowed.is_empty()
    }

    pub fn contains(&self, cpu: CpuId) -> bool {
        cpu == self.representative || self.borrowed.contains(cpu)
    }

    /// All CPUs of the object (allocates; not for hot paths).
    pub fn cpus(&self) -> CpuSet {
        let mut s = self.borrowed.clone();
        s.insert(self.representative);
        s
    }

    /// Adds the object's CPUs to `set`.
    pub fn add_to(&self, set: &mut CpuSet) {
        set.insert(self.representative);
        set.extend_from(&self.borrowed);
    }

    /// Checks the invariants in the module doc.
    pub fn check(&self) -> Result<(), String> {
        let n = self.len();
        if ![1, 2, 4].contains(&n) {
            return Err(format!("an object has 1, 2 or 4 CPUs, not {n}"));
        }
        if self.borrowed.first().is_some_and(|b| b <= self.representative) {
            return Err(format!("representative {} is not the lowest CPU", self.representative));
        }
        if self.property != Property::sequential(level_of(n)) {
            return Err(format!("property {:?} does not match {n} CPUs", self.property));
        }
        Ok(())
    }
}

impl std::fmt::Display for ExecObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.cpus())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn representative_is_lowest_cpu() {
        let o = ExecObject::new(&"4-7".parse().unwrap());
        assert_eq!(o.representative, 4);
        assert_eq!(o.borrowed.to_string(), "5-7");
        assert!(o.is_fused() && o.contains(6) && !o.contains(8));
        // 4 CPUs = sequential level log2(4) = 2.
        assert_eq!(o.property.level, 2);
        assert_eq!(o.to_string(), "4-7");
        assert!(!ExecObject::new(&CpuSet::single(3)).is_fused());
    }

    #[test]
    fn check_refuses_what_no_node_manager_makes() {
        let mut o = ExecObject::new(&"4-5".parse().unwrap());
        o.borrowed.insert(6);
        assert!(o.check().is_err(), "3 CPUs");
        let o =
            ExecObject { representative: 5, borrowed: CpuSet::single(4), property: Property::sequential(1) };
        assert!(o.check().is_err(), "representative above a borrowed CPU");
        let o =
            ExecObject { representative: 4, borrowed: CpuSet::single(5), property: Property::sequential(2) };
        assert!(o.check().is_err(), "level of a quad on a pair");
    }
}
