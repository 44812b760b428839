//! Black-Scholes, the data-parallel program of Table 3 (PARSEC's
//! `blackscholes`): closed-form prices of European calls and puts for a
//! seeded portfolio, each thread pricing a fixed share (static binding).
//! One unit is one option (a call and a put).
//!
//! Check: the textbook case S = K = 100, r = 5%, σ = 20%, T = 1 year gives
//! a call of 10.4506 and a put of 5.5735; every price satisfies put-call
//! parity, `C - P = S - K e^{-rT}`.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Kernel, Progress};

/// Options per step: about 20 µs on the reference machine.
const STEP_OPTIONS: u64 = 512;

/// A European option on a non-dividend-paying stock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptionSpec {
    pub spot: f64,
    pub strike: f64,
    /// Risk-free rate, per year.
    pub rate: f64,
    /// Volatility, per square root of a year.
    pub volatility: f64,
    pub years: f64,
}

/// A call's and a put's price.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Prices {
    pub call: f64,
    pub put: f64,
}

/// The standard normal CDF, by Abramowitz & Stegun 26.2.17 (error below
/// 7.5e-8), as PARSEC's `CNDF`.
fn normal_cdf(x: f64) -> f64 {
    const B: [f64; 5] = [0.319_381_530, -0.356_563_782, 1.781_477_937, -1.821_255_978, 1.330_274_429];
    let t = 1.0 / (1.0 + 0.231_641_9 * x.abs());
    let poly = t * (B[0] + t * (B[1] + t * (B[2] + t * (B[3] + t * B[4]))));
    let tail = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt() * poly;
    if x >= 0.0 { 1.0 - tail } else { tail }
}

/// The Black-Scholes prices of `o`.
pub fn black_scholes(o: &OptionSpec) -> Prices {
    let sd = o.volatility * o.years.sqrt();
    let d1 = ((o.spot / o.strike).ln() + (o.rate + 0.5 * o.volatility * o.volatility) * o.years) / sd;
    let d2 = d1 - sd;
    let discounted = o.strike * (-o.rate * o.years).exp();
    Prices {
        call: o.spot * normal_cdf(d1) - discounted * normal_cdf(d2),
        put: discounted * normal_cdf(-d2) - o.spot * normal_cdf(-d1),
    }
}

/// Sum of prices and options priced, shared by the threads of a program.
pub type PriceSum = Arc<Mutex<(f64, u64)>>;

/// One thread of a Black-Scholes program.
#[derive(Debug)]
pub struct BlackScholes {
    options: Arc<[OptionSpec]>,
    range: Range<usize>,
    sum: PriceSum,
}

impl BlackScholes {
    /// `n` options drawn from `seed`: spot and strike in [50, 150), rate in
    /// [1%, 10%), volatility in [5%, 60%), maturity in [0.1, 3) years.
    pub fn portfolio(seed: u64, n: usize) -> Arc<[OptionSpec]> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| OptionSpec {
                spot: rng.random_range(50.0..150.0),
                strike: rng.random_range(50.0..150.0),
                rate: rng.random_range(0.01..0.10),
                volatility: rng.random_range(0.05..0.60),
                years: rng.random_range(0.1..3.0),
            })
            .collect()
    }

    /// Prices `options[range]`, adding into `sum`.
    pub fn new(options: Arc<[OptionSpec]>, range: Range<usize>, sum: PriceSum) -> BlackScholes {
        assert!(range.end <= options.len(), "range {range:?} of {} options", options.len());
        BlackScholes { options, range, sum }
    }
}

impl Kernel for BlackScholes {
    fn name(&self) -> &'static str {
        "blackscholes"
    }

    fn step_units(&self) -> u64 {
        STEP_OPTIONS
    }

    fn step(&mut self) -> Progress {
        let (mut units, mut total) = (0u64, 0.0f64);
        while units < STEP_OPTIONS {
            let Some(i) = self.range.next() else { break };
            let p = black_scholes(&self.options[i]);
            total += p.call + p.put;
            units += 1;
        }
        let mut s = self.sum.lock().unwrap_or_else(|p| p.into_inner());
        s.0 += total;
        s.1 += units;
        Progress { units, done: self.range.is_empty() }
    }
}
