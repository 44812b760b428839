//! Taxation (Chameleon §4.3.3): the rate at which borrowed time is charged
//! to a thread's `vruntimes[]`, what it buys at every value, where a
//! borrower starts on a CPU, and how the rate can be set from the thread's
//! speedup.
//!
//! # The rate is a share
//!
//! The paper: "CFS already adjusts the rate at which virtual runtime accrues
//! based on priority ... Taxation further adjusts that rate. Much as
//! priority adjusts both scheduling latency and CPU share, taxation can act
//! as a share"; "for borrowed CPUs, the scheduler multiplies the delta by
//! the tax rate before adding to the `vruntimes[]` array". dyncore does
//! exactly that ([`charge`]), and nothing else depends on the rate: there
//! is no threshold, so the share is continuous and monotone from 0.01 to
//! 100.
//!
//! What the rate buys, in Figure 3's setting (thread A's object borrows
//! CPU c, where thread B always has work): B runs until its virtual runtime
//! passes A's `vruntimes[c]`, then A borrows c until its `vruntimes[c]`,
//! growing `tax` times as fast as B's would, passes B's again. Over one
//! round A holds c for `x` and B for `tax · x`, so A's share of c is
//!
//! ```text
//! share(tax) = 1 / (1 + tax)
//! ```
//!
//! tax 0.01 → 99% (A "can preempt task B much of the time"), tax 1 → 50%
//! ("A receives all of its CPU plus half of task B's CPU"), tax 2 → 33%,
//! tax 100 → 1% (A "sticks with native execution": a share of 1% is what
//! the paper's Figure 3 reads as 1.0). Neither side is preempted sooner
//! than the minimum granularity, so a round is never shorter than one
//! granularity on each side, which rounds the share but keeps it monotone
//! (`tests/model.rs` sweeps 0.01 to 100). Where c is idle, A borrows it
//! whatever the rate: nobody else wants it.
//!
//! # Where a borrower starts: CFS's `place_entity`
//!
//! A thread's `vruntimes[c]` is the virtual runtime its *virtual thread*
//! would have in c's run queue (§4.3: "the `vruntime` value a thread would
//! receive on another CPU had it been scheduled"). Two rules place it, as
//! CFS places a task that joins or wakes on a run queue:
//!
//! 1. **First placement** ([`first_vruntime`]), when the node manager gives
//!    the thread CPU c: c's `min_vruntime` plus the thread's lag on its own
//!    CPU (how far its virtual runtime is ahead of its queue's
//!    `min_vruntime`), as CFS carries a task's lag when it moves it between
//!    run queues (`vruntime -= src.min_vruntime; vruntime +=
//!    dst.min_vruntime`).
//! 2. **Bounded credit** ([`placed`]), whenever the thread starts to borrow
//!    c: `vruntimes[c] = max(vruntimes[c], c.min_vruntime - credit)`. This
//!    is CFS's `place_entity` for a waking task (`vruntime =
//!    max_vruntime(se->vruntime, min_vruntime - thresh)`): a task that was
//!    away keeps at most `thresh` of credit, half a scheduling latency
//!    (`GENTLE_FAIR_SLEEPERS`). A borrower whose recorded value went stale
//!    (it waited in its own queue, or could not get all of its object's
//!    CPUs, while c's threads ran on) would otherwise take c for all the
//!    virtual time it fell behind, at any rate — more than the tax allows.
//!    The credit is [`credit_ns`]: half of the scheduling latency of the
//!    paper's kernel, which is `sched_nr_latency` (5) minimum granularities,
//!    so 2.5 granularities (40 ms at the paper's 16 ms).
//!
//! Virtual runtimes only ever rise (both rules take a maximum).

use crate::Nanos;

/// CFS's `sched_nr_latency` in the paper's kernel (Linux 2.6.31): the
/// scheduling latency is this many minimum granularities.
pub const SCHED_NR_LATENCY: u64 = 5;

/// The credit a borrower keeps when it starts to borrow (half a scheduling
/// latency, `GENTLE_FAIR_SLEEPERS`): see the module doc.
pub fn credit_ns(min_granularity_ns: Nanos) -> Nanos {
    min_granularity_ns.saturating_mul(SCHED_NR_LATENCY) / 2
}

/// The virtual runtime `delta` of borrowed time adds to `vruntimes[c]`:
/// `delta` (already weighted by priority) times the tax, rounded up so that
/// borrowing is never free.
pub fn charge(delta: u64, tax: f64) -> u64 {
    ((delta as f64) * tax).ceil() as u64
}

/// A borrower's first `vruntimes[c]`: c's `min_vruntime` plus the thread's
/// lag on its own CPU (rule 1 of the module doc).
pub fn first_vruntime(cpu_min_vruntime: u64, own_vruntime: u64, own_min_vruntime: u64) -> u64 {
    cpu_min_vruntime.saturating_add(own_vruntime.saturating_sub(own_min_vruntime))
}

/// `vruntimes[c]` when the thread starts to borrow c: never more than the
/// credit behind c's `min_vruntime`, never lowered (rule 2).
pub fn placed(recorded: u64, cpu_min_vruntime: u64, credit: Nanos) -> u64 {
    recorded.max(cpu_min_vruntime.saturating_sub(credit))
}

/// Tax rate of a thread whose object of `cpus` CPUs runs it `speedup` times
/// as fast as one CPU, clamped to 0.01..=100. An object of one CPU borrows
/// nothing: tax 1.
///
/// The paper gives the direction, not a formula: "threads with good
/// speedups deserve lower tax rates, allowing them to borrow neighboring
/// CPUs aggressively, while threads with low speedups should only borrow
/// idle CPUs and deserve high tax rates", because "a thread does better on
/// a single CPU than it does running half as long on two CPUs" (§3.3).
/// dyncore charges borrowed time by how much of it becomes progress: `k`
/// CPUs with speedup `s` borrow `k - 1` CPUs to gain `s - 1` CPUs' worth of
/// progress, so `tax = (k - 1) / (s - 1)`. A linear speedup (s = k) is
/// charged like native time (tax 1, a contended borrowed CPU shared half
/// and half); Table 2's speedups are all sublinear: a pair at 1.5 gives 2
/// (a third of a contended CPU), a pair at 1.25 gives 4 (a fifth), a quad
/// at 2.0 gives 3 (a quarter), a quad at 1.5 gives 6 (a seventh).
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
    fn the_charge_is_the_delta_times_the_tax_rounded_up() {
        // 16 ms at tax 100: 1.6 s; at 0.01: 160 us; a 1 ns delta is never free.
        assert_eq!(charge(16_000_000, 100.0), 1_600_000_000);
        assert_eq!(charge(16_000_000, 0.01), 160_000);
        assert_eq!(charge(1, 0.01), 1);
        // Monotone in the tax: no step anywhere.
        let mut last = 0;
        for i in 0..=400 {
            let tax = 0.01 * 10f64.powf(f64::from(i) / 100.0);
            let c = charge(4_000_000, tax);
            assert!(c >= last, "tax {tax}");
            last = c;
        }
    }

    #[test]
    fn a_borrower_is_placed_as_cfs_places_a_waking_task() {
        // Credit: half of 5 granularities of 16 ms = 40 ms.
        assert_eq!(credit_ns(16_000_000), 40_000_000);
        let credit = credit_ns(16_000_000);
        // Recorded 1 s behind a CPU at 3 s: placed 40 ms behind it.
        assert_eq!(placed(2_000_000_000, 3_000_000_000, credit), 2_960_000_000);
        // Within the credit, or ahead: kept (never lowered).
        assert_eq!(placed(2_990_000_000, 3_000_000_000, credit), 2_990_000_000);
        assert_eq!(placed(5_000_000_000, 3_000_000_000, credit), 5_000_000_000);
        // A young CPU: no underflow.
        assert_eq!(placed(0, 10, credit), 0);
        // First placement carries the lag on the own CPU: 7 ms ahead there,
        // 7 ms ahead of the borrowed CPU's min_vruntime.
        assert_eq!(first_vruntime(100_000_000, 57_000_000, 50_000_000), 107_000_000);
        assert_eq!(first_vruntime(100_000_000, 50_000_000, 50_000_000), 100_000_000);
    }
}
