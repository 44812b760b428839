//! Fibonacci, as a task-parallel program computes it: the call tree of the
//! naive recursion `fib(n) = fib(n-1) + fib(n-2)` is cut into subtrees
//! (`fib(k)` with `k ≤ cutoff`, as a runtime that stops spawning below a
//! cutoff does), which threads take from a shared pool and evaluate by the
//! same recursion with an explicit stack. One unit is one call.
//!
//! Check: the subtree values add up to `fib(n)`; each subtree of `fib(k)`
//! takes `2 fib(k+1) - 1` calls.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Kernel, Pool, Progress};

/// Calls per step: about 20 µs on the reference machine.
const STEP_CALLS: u64 = 16_384;

/// `fib(n)` by iteration (`n ≤ 93` fits a `u64`).
pub fn fib(n: u32) -> u64 {
    assert!(n <= 93, "fib({n}) does not fit 64 bits");
    let (mut a, mut b) = (0u64, 1u64);
    for _ in 0..n {
        (a, b) = (b, a + b);
    }
    a
}

/// The subtrees of one `fib(n)`, shared by the threads computing it.
#[derive(Debug)]
pub struct FibJobs {
    leaves: Vec<u32>,
    pool: Pool,
    /// Sum of the values of the subtrees finished so far.
    sum: AtomicU64,
}

impl FibJobs {
    /// Cuts the call tree of `fib(n)` top-down into subtrees of at most
    /// `fib(cutoff)`.
    pub fn new(n: u32, cutoff: u32) -> Arc<FibJobs> {
        assert!(n <= 93 && cutoff >= 1, "fib({n}) with cutoff {cutoff}");
        let (mut leaves, mut open) = (Vec::new(), vec![n]);
        while let Some(k) = open.pop() {
            if k <= cutoff {
                leaves.push(k);
            } else {
                open.extend([k - 1, k - 2]);
            }
        }
        let pool = Pool::new(leaves.len());
        Arc::new(FibJobs { leaves, pool, sum: AtomicU64::new(0) })
    }

    /// The number of subtrees.
    pub fn jobs(&self) -> usize {
        self.leaves.len()
    }

    /// Units the whole computation takes (calls in all subtrees).
    pub fn total_units(&self) -> u64 {
        self.leaves.iter().map(|&k| 2 * fib(k + 1) - 1).sum()
    }

    /// The sum of the finished subtrees: `fib(n)` once all are done.
    pub fn sum(&self) -> u64 {
        self.sum.load(Ordering::Acquire)
    }
}

/// One thread of the Fibonacci program.
#[derive(Debug)]
pub struct Fibonacci {
    jobs: Arc<FibJobs>,
    stack: Vec<u32>,
    acc: u64,
}

impl Fibonacci {
    pub fn new(jobs: Arc<FibJobs>) -> Fibonacci {
        Fibonacci { jobs, stack: Vec::with_capacity(64), acc: 0 }
    }
}

impl Kernel for Fibonacci {
    fn name(&self) -> &'static str {
        "fibonacci"
    }

    fn step_units(&self) -> u64 {
        STEP_CALLS
    }

    fn step(&mut self) -> Progress {
        let mut units = 0;
        while units < STEP_CALLS {
            let Some(k) = self.stack.pop() else {
                match self.jobs.pool.take() {
                    Some(i) => {
                        self.stack.push(self.jobs.leaves[i]);
                        continue;
                    }
                    None => return Progress { units, done: true },
                }
            };
            units += 1;
            if k < 2 {
                self.acc += u64::from(k);
            } else {
                self.stack.extend([k - 1, k - 2]);
            }
            if self.stack.is_empty() {
                self.jobs.sum.fetch_add(std::mem::take(&mut self.acc), Ordering::AcqRel);
            }
        }
        Progress { units, done: false }
    }
}
