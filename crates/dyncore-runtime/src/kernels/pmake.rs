//! pmake, the task-parallel *processes* of Table 3: coarse jobs (think
//! compiling one file) of seeded random length, taken from a shared pool by
//! whichever worker is free. A job is a chain of integer mixing rounds over
//! a 64-bit state; one unit is one round.
//!
//! Check: the units done add up to the jobs' lengths, and the XOR of the
//! jobs' final states (independent of who ran which job, and of where the
//! steps cut the jobs) equals [`PmakeJobs::expected_checksum`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Kernel, Pool, Progress};

/// Rounds per step: about 20 µs on the reference machine.
const STEP_ROUNDS: u64 = 8_192;

/// One mixing round (the finaliser of MurmurHash3).
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The jobs of one pmake run.
#[derive(Debug)]
pub struct PmakeJobs {
    lengths: Vec<u64>,
    pool: Pool,
    checksum: AtomicU64,
}

impl PmakeJobs {
    /// `jobs` jobs whose lengths (rounds) are drawn from `seed`, uniformly
    /// in `min_rounds..=max_rounds`.
    pub fn new(seed: u64, jobs: usize, min_rounds: u64, max_rounds: u64) -> Arc<PmakeJobs> {
        assert!(0 < min_rounds && min_rounds <= max_rounds, "job lengths {min_rounds}..={max_rounds}");
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let lengths = (0..jobs).map(|_| rng.random_range(min_rounds..=max_rounds)).collect();
        Arc::new(PmakeJobs { lengths, pool: Pool::new(jobs), checksum: AtomicU64::new(0) })
    }

    pub fn total_units(&self) -> u64 {
        self.lengths.iter().sum()
    }

    /// XOR of the final states of the jobs finished so far.
    pub fn checksum(&self) -> u64 {
        self.checksum.load(Ordering::Acquire)
    }

    /// The checksum of all jobs, computed in one plain loop.
    pub fn expected_checksum(&self) -> u64 {
        self.lengths.iter().enumerate().fold(0, |acc, (j, &len)| acc ^ (0..len).fold(j as u64, |x, _| mix(x)))
    }
}

/// One worker of a pmake run.
#[derive(Debug)]
pub struct Pmake {
    jobs: Arc<PmakeJobs>,
    /// The job being run: rounds left and state.
    current: Option<(u64, u64)>,
}

impl Pmake {
    pub fn new(jobs: Arc<PmakeJobs>) -> Pmake {
        Pmake { jobs, current: None }
    }
}

impl Kernel for Pmake {
    fn name(&self) -> &'static str {
        "pmake"
    }

    fn step_units(&self) -> u64 {
        STEP_ROUNDS
    }

    fn step(&mut self) -> Progress {
        let mut units = 0;
        while units < STEP_ROUNDS {
            let (left, state) = match self.current {
                Some(c) => c,
                None => match self.jobs.pool.take() {
                    // A job's state starts at its index: results do not
                    // depend on who runs it.
                    Some(j) => (self.jobs.lengths[j], j as u64),
                    None => return Progress { units, done: true },
                },
            };
            let n = left.min(STEP_ROUNDS - units);
            let state = (0..n).fold(state, |x, _| mix(x));
            units += n;
            if n == left {
                self.jobs.checksum.fetch_xor(state, Ordering::AcqRel);
                self.current = None;
            } else {
                self.current = Some((left - n, state));
            }
        }
        Progress { units, done: false }
    }
}
