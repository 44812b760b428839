//! Real work for the live backend: Chameleon's Table 3 programs as compute
//! kernels that run in small steps and count their work in units.
//!
//! | program (Table 3) | kernel | unit | binding |
//! |---|---|---|---|
//! | Fibonacci (task-parallel threads) | [`Fibonacci`]: naive recursion with an explicit stack, over a shared pool of subtrees | one call | dynamic |
//! | pmake (task-parallel processes) | [`Pmake`]: coarse jobs of seeded random length from a shared pool | one mixing round | dynamic |
//! | Blackscholes (data-parallel threads) | [`BlackScholes`]: closed-form European call and put prices for a seeded portfolio | one option | static |
//! | Mandelbrot-DB / -SB (OpenMP) | [`Mandelbrot`]: escape-time iterations over a grid, rows from a shared counter or a fixed range | one iteration | dynamic / static |
//! | N-Queen (sequential, high speedup) | [`NQueens`]: bitmask backtracking with an explicit stack | one placement tried | – |
//!
//! Every kernel:
//!
//! * does at most [`Kernel::step_units`] units per [`Kernel::step`] (plus at
//!   most one indivisible item: a Mandelbrot pixel, an option), chosen so a
//!   step takes ≤ 50 µs on the 2-CPU machine of docs/results.md (measured
//!   by [`calibrate`], which reports the longest step), so a switch — a
//!   reconfiguration, a migration — comes within about 50 µs;
//! * is deterministic: the same parameters and seed give the same units in
//!   every step (for the pooled kernels, given the same items from the
//!   pool, which one thread alone always gets);
//! * can be checked: a kernel's result is compared with a known value or a
//!   plain (unstepped) computation in the tests.
//!
//! [`Portion`] turns a kernel into a thread's share of a program's work (its
//! own piece, then tasks from a pool shared with the other threads).
//!
//! [`KernelTask`] runs a kernel as a runtime [`Task`](crate::cpu::Task),
//! one kernel step per runtime step; [`calibrate`] measures a kernel's
//! units per second alone at a duty cycle on one runtime CPU (the baseline
//! a live speedup is measured against).

mod blackscholes;
mod calibrate;
mod fibonacci;
mod mandelbrot;
mod nqueens;
mod pmake;
mod pool;
mod portion;

pub use blackscholes::{BlackScholes, OptionSpec, Prices, black_scholes};
pub use calibrate::{Calibration, CalibrationError, KernelTask, calibrate};
pub use fibonacci::{FibJobs, Fibonacci, fib};
pub use mandelbrot::{Grid, Mandelbrot, MandelbrotSums, Rows};
pub use nqueens::NQueens;
pub use pmake::{Pmake, PmakeJobs};
pub use pool::Pool;
pub use portion::{Portion, TaskPool};

/// Makes a fresh kernel (a calibration starts one over when it finishes;
/// a program makes one per thread).
pub type MakeKernel = std::sync::Arc<dyn Fn() -> Box<dyn Kernel> + Send + Sync>;

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Units of work done in the step.
    pub units: u64,
    /// The kernel has no work left (this step may have done some).
    pub done: bool,
}

/// A compute kernel run in steps.
pub trait Kernel: Send + 'static {
    /// The Table 3 program it stands for.
    fn name(&self) -> &'static str;

    /// The most units one step does (see the module docs).
    fn step_units(&self) -> u64;

    /// Does the next step of work.
    fn step(&mut self) -> Progress;
}

#[cfg(all(test, not(dyncore_loom)))]
mod tests;
