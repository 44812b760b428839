//! Taxation (Chameleon §4.3.3): the rate at which borrowed time is charged
//! to a thread's `vruntimes[]`, how it can be set from the thread's speedup,
//! and which threads may borrow CPUs that are busy with native threads.
//!
//! The paper gives the direction, not a formula: "threads with good
//! speedups deserve lower tax rates, allowing them to borrow neighboring
//! CPUs aggressively, while threads with low speedups should only borrow
//! idle CPUs and deserve high tax rates", and it explains why fused time is
//! worth less than native time: "a thread does better on a single CPU than
//! it does running half as long on two CPUs, because speedups are less than
//! linear" (§3.3). dyncore charges borrowed time by how much of it becomes
//! progress: an object of `k` CPUs with speedup `s` over one CPU borrows
//! `k - 1` CPUs to gain `s - 1` CPUs' worth of progress, so
//!
//! ```text
//! tax = (k - 1) / (s - 1)
//! ```
//!
//! A linear speedup (s = k) is charged exactly like native time (tax 1);
//! anything less is charged more. Table 2's speedups are all sublinear:
//! a pair at 1.5 (75% duty) gives 1 / 0.5 = 2, a pair at 1.25 gives 4, a
//! quad at 2.0 gives 3 / 1 = 3, a quad at 1.5 gives 6.
//!
//! **Who may borrow busy CPUs.** A thread whose tax is at most 1 is charged
//! no more for a borrowed CPU than that CPU's own threads are for their
//! time, so it competes with them on equal or better terms, and virtual
//! runtime decides who runs (Figure 3 at tax 1: A gets its CPU and half of
//! B's). A thread whose tax is above 1 is, in the paper's words, an
//! unimportant task that uses "only idle CPUs for fused objects": it
//! borrows a CPU only while that CPU has nothing to run (Figures 3 and 7 at
//! tax 100: it "sticks with native execution"). Without this rule the race
//! alone lets such a thread win a busy CPU now and then — its first
//! `vruntimes[c]` is the CPU's `min_vruntime`, behind a thread that has run
//! for a while — and it would take, at tax 100, about one slice in a
//! hundred from the CPU's own threads.

/// The largest tax rate at which a thread may borrow CPUs busy with native
/// threads (see the module doc).
pub const BORROW_BUSY_MAX_TAX: f64 = 1.0;

/// Whether a thread with `tax` may borrow a CPU that has a thread to run.
pub fn borrows_busy_cpus(tax: f64) -> bool {
    tax <= BORROW_BUSY_MAX_TAX
}

/// Tax rate of a thread whose object of `cpus` CPUs runs it `speedup` times
/// as fast as one CPU (§4.3.3; the arithmetic is in the module doc),
/// clamped to 0.01..=100. An object of one CPU borrows nothing: tax 1.
pub fn auto_tax(cpus: usize, speedup: f64) -> f64 {
    if cpus <= 1 {
        return 1.0;
    }
    let gain = (speedup - 1.0).max(0.01);
    ((cpus - 1) as f64 / gain).clamp(0.01, 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_tax_charges_borrowed_cpus_by_the_progress_they_buy() {
        // Linear speedup: charged like native time.
        assert_eq!(auto_tax(2, 2.0), 1.0);
        assert_eq!(auto_tax(4, 4.0), 1.0);
        // Table 2: pair at 75% duty (1.5x) -> 2; at 62.5% (1.25x) -> 4;
        // quad at 100% (2x) -> 3; quad at 75% (1.5x) -> 6.
        assert_eq!(auto_tax(2, 1.5), 2.0);
        assert_eq!(auto_tax(2, 1.25), 4.0);
        assert_eq!(auto_tax(4, 2.0), 3.0);
        assert_eq!(auto_tax(4, 1.5), 6.0);
        // No gain: the highest tax; better than linear: below 1.
        assert_eq!(auto_tax(2, 1.0), 100.0);
        assert_eq!(auto_tax(2, 3.0), 0.5);
        assert_eq!(auto_tax(1, 2.0), 1.0);
    }

    #[test]
    fn only_threads_taxed_at_most_one_borrow_busy_cpus() {
        assert!(borrows_busy_cpus(0.01) && borrows_busy_cpus(1.0));
        assert!(!borrows_busy_cpus(1.01) && !borrows_busy_cpus(100.0));
    }
}
