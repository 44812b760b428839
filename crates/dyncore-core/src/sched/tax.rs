//! Taxation (Chameleon §4.3.3): the rate at which borrowed time is charged.

/// Tax rate derived from a thread's speedup on its object (§4.3.3): good
/// speedups earn low tax, poor ones high. `speedup` is object speed over
/// native speed; a speedup of 2 (linear on 2 CPUs... or better) gives 0.5.
pub fn auto_tax(speedup: f64) -> f64 {
    // Charge borrowed time by how little of it becomes progress:
    // tax = 1 / (speedup - 1), so speedup 2.0 -> 1.0, 1.5 -> 2.0, 1.25 -> 4.0.
    let gain = (speedup - 1.0).max(0.01);
    (1.0 / gain).clamp(0.01, 100.0)
}
