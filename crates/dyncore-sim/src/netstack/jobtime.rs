//! A component's job time on a CPU (module docs of `netstack`): its
//! cycles at the CPU's effective clock, slowed by a busy sibling
//! hyperthread, plus the copy's memory time stretched by the CPU's duty
//! cycle, rounded to whole nanoseconds (at least one).
//!
//! A run computes the same few job times over and over (a handful of
//! components, each with its cost per data segment, per ACK and per sent
//! segment, with or without the turn's cost, at a few speed steps), and the
//! computation is two floating-point divisions in a chain; so the times are
//! remembered in [`JobTimes`], a small direct-mapped table.
//!
//! Invariant (asserted in tests): [`JobTimes::get`] returns exactly
//! [`job_ns`] of its inputs. Every entry holds all the inputs its time was
//! computed from (cycles and memory time bit for bit, the step's MHz and
//! duty, whether the sibling was busy), and a lookup returns an entry only
//! when all of them are equal; any other lookup computes the time and
//! replaces the entry. (The SMT factor is the run's, fixed.)

use dyncore_core::Nanos;
use dyncore_core::power::SpeedStep;

use super::round_ns;

/// The job time of `cycles` and `memory_ns` on a CPU at `step`, `smt`:
/// its sibling hyperthread busy, which slows the cycles by `smt_factor`.
pub(super) fn job_ns(cycles: f64, memory_ns: f64, step: SpeedStep, smt: Option<f64>) -> Nanos {
    let mut ns = cycles * 1000.0 / f64::from(step.mhz);
    if let Some(factor) = smt {
        ns *= factor;
    }
    // The copy's memory time runs at the memory's pace, not the clock's
    // (P-states); a throttled core stops for all of it alike (T-states).
    round_ns(ns + memory_ns / step.duty()).max(1)
}

/// Entries of the table: a power of two.
const SLOTS: usize = 32;

/// An entry's inputs: the cycles' and the memory time's bits, and the
/// step and SMT packed with a mark of a filled entry (bit 63).
type Key = [u64; 3];

/// Remembered job times (module docs).
#[derive(Debug, Clone)]
pub(super) struct JobTimes {
    smt_factor: f64,
    slots: [(Key, Nanos); SLOTS],
}

impl JobTimes {
    /// An empty table for a run whose SMT factor is `smt_factor`.
    pub(super) fn new(smt_factor: f64) -> JobTimes {
        // No filled entry's key is all zeros (bit 63 of its third word).
        JobTimes { smt_factor, slots: [([0; 3], 0); SLOTS] }
    }

    /// [`job_ns`] of these inputs (module docs).
    #[inline]
    pub(super) fn get(&mut self, cycles: f64, memory_ns: f64, step: SpeedStep, smt: bool) -> Nanos {
        let packed =
            1 << 63 | u64::from(smt) << 40 | u64::from(step.duty_eighths) << 32 | u64::from(step.mhz);
        let key = [cycles.to_bits(), memory_ns.to_bits(), packed];
        let slot =
            ((key[0] ^ key[1] ^ u64::from(step.mhz)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 59) as usize;
        let (k, ns) = &mut self.slots[slot % SLOTS];
        // Word by word, with `||`: comparing the whole arrays read the key
        // back from the stack just after it was written there, a stall.
        if k[0] != key[0] || k[1] != key[1] || k[2] != key[2] {
            *k = key;
            *ns = job_ns(cycles, memory_ns, step, smt.then_some(self.smt_factor));
        }
        *ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dyncore_core::power::SpeedTable;

    /// Lookups in any order, with repeats and collisions, give the times
    /// computed afresh.
    #[test]
    fn a_remembered_time_is_the_computed_one() {
        let table = SpeedTable::newtos();
        let steps: Vec<SpeedStep> =
            [2267, 1600, 800, 200].iter().map(|&m| table.get(table.by_mhz(m).unwrap())).collect();
        let mut memo = JobTimes::new(1.3);
        let mut x: u64 = 7;
        for _ in 0..50_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let cycles = [279.5, 359.35, 1359.35, 410.4 + 0.22 * 1448.0, 0.0, 1e300][(x >> 40) as usize % 6];
            let memory = [0.0, 195.67567567567568, 1e-9][(x >> 20) as usize % 3];
            let step = steps[(x >> 10) as usize % steps.len()];
            let smt = x & 1 == 1;
            let want = job_ns(cycles, memory, step, smt.then_some(1.3));
            assert_eq!(memo.get(cycles, memory, step, smt), want, "{cycles} {memory} {step:?} {smt}");
        }
    }
}
