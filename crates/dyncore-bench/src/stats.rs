//! Statistics of interleaved rounds, shared by every bench.
//!
//! This host is shared and its speed drifts by several times over seconds
//! (another engineer's build starts, the hypervisor moves us). Rows measured
//! one after another then differ by the drift, not by what they measure. So
//! every bench measures in *rounds*: each row once per round, in an order
//! that changes from round to round ([`round_order`]), and reports
//!
//! * each row's **median of its round medians**, with the **min–max of the
//!   round medians** (how much the row moved with the host), and the p25,
//!   p75 and p99 of all its samples (the spread within a row);
//! * each goal's ratio **within a round** (both rows measured minutes apart
//!   would mix drift into the ratio), summarised as the median of the round
//!   ratios and their range ([`RoundSpread`]).
//!
//! Percentiles are by nearest rank, so every reported value is one that was
//! measured.

/// The order of `rows` rows in round `round`: round `r` starts at row
/// `r mod rows` and goes up in even rounds, down in odd ones (0 1 2 3,
/// 1 0 3 2, 2 3 0 1, 3 2 1 0, …). Every row leads a round in turn, and every
/// pair of rows is measured in both orders (a rotation alone keeps
/// neighbours in the same order, so a row that warms the caches for the
/// next one would always do so).
pub fn round_order(rows: usize, round: usize) -> Vec<usize> {
    let n = rows.max(1);
    let start = round % n;
    (0..rows).map(|i| if round.is_multiple_of(2) { (start + i) % n } else { (start + n - i) % n }).collect()
}

/// [`round_order`] in words, for reports.
pub const ORDER_TEXT: &str = "each round starts at the next row of the list and runs up it in even rounds, \
    down it in odd ones, so no row is always first and every pair of rows is measured in both orders";

pub use dyncore_core::nanos as ns;

/// Index of the nearest-rank `q` quantile (0 < q ≤ 1) in a sorted sample
/// of `len > 0`: the smallest value with at least `q` of the sample at or
/// below it.
fn rank(len: usize, q: f64) -> usize {
    ((q * len as f64).ceil() as usize).clamp(1, len) - 1
}

/// The `q` quantile of a sorted, non-empty sample, by nearest rank.
pub fn percentile(sorted: &[u64], q: f64) -> f64 {
    sorted[rank(sorted.len(), q)] as f64
}

/// The nearest-rank median of `v` (the lower middle value of an even
/// count); NaN if empty. Sorts `v`.
pub fn median_f64(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[rank(v.len(), 0.5)]
}

/// One row's latency samples (ns), round by round.
#[derive(Debug, Clone, Default)]
pub struct RoundSamples {
    rounds: Vec<Vec<u64>>,
}

/// A row's summary over its rounds. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Spread {
    pub rounds: usize,
    /// Samples over all rounds.
    pub samples: usize,
    /// Median of the round medians.
    pub median_ns: f64,
    /// Lowest and highest round median.
    pub round_min_ns: f64,
    pub round_max_ns: f64,
    /// Quantiles of all samples of all rounds.
    pub p25_ns: f64,
    pub p75_ns: f64,
    pub p99_ns: f64,
}

impl RoundSamples {
    /// Adds one round's samples (an empty round is kept as missing).
    pub fn push(&mut self, samples_ns: Vec<u64>) {
        self.rounds.push(samples_ns);
    }

    /// The median of each non-empty round.
    pub fn round_medians(&self) -> Vec<f64> {
        self.rounds
            .iter()
            .filter(|r| !r.is_empty())
            .map(|r| {
                let mut s = r.clone();
                s.sort_unstable();
                percentile(&s, 0.5)
            })
            .collect()
    }

    /// The spread over every round; `None` if nothing was measured.
    pub fn spread(&self) -> Option<Spread> {
        let mut medians = self.round_medians();
        let mut all: Vec<u64> = self.rounds.iter().flatten().copied().collect();
        if all.is_empty() {
            return None;
        }
        all.sort_unstable();
        let rounds = medians.len();
        let median_ns = median_f64(&mut medians);
        Some(Spread {
            rounds,
            samples: all.len(),
            median_ns,
            round_min_ns: medians[0],
            round_max_ns: medians[rounds - 1],
            p25_ns: percentile(&all, 0.25),
            p75_ns: percentile(&all, 0.75),
            p99_ns: percentile(&all, 0.99),
        })
    }
}

/// A value computed once per round (a goal's ratio, a throughput), over the
/// rounds: its median and range.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RoundSpread {
    pub rounds: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl RoundSpread {
    /// Summarises per-round values (non-finite ones dropped); `None` if
    /// none is left.
    pub fn of(mut values: Vec<f64>) -> Option<RoundSpread> {
        values.retain(|r| r.is_finite());
        if values.is_empty() {
            return None;
        }
        let median = median_f64(&mut values);
        Some(RoundSpread { rounds: values.len(), median, min: values[0], max: values[values.len() - 1] })
    }

    /// `num`'s round median over `den`'s, round by round (rounds where
    /// either measured nothing are dropped, not paired with another round).
    pub fn ratio_of_rows(num: &RoundSamples, den: &RoundSamples) -> Option<RoundSpread> {
        let med = |s: &RoundSamples| -> Vec<Option<f64>> {
            s.rounds
                .iter()
                .map(|r| {
                    let mut v = r.clone();
                    v.sort_unstable();
                    (!v.is_empty()).then(|| percentile(&v, 0.5))
                })
                .collect()
        };
        let ratios = med(num).into_iter().zip(med(den)).filter_map(|(a, b)| Some(a? / b?)).collect();
        RoundSpread::of(ratios)
    }

    /// A ratio as "1.02× (median of 5 rounds; range 0.95–1.10×)", with
    /// `digits` decimals.
    pub fn text(&self, digits: usize) -> String {
        format!(
            "{:.d$}× (median of {} rounds; range {:.d$}–{:.d$}×)",
            self.median,
            self.rounds,
            self.min,
            self.max,
            d = digits
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!([0.25, 0.5, 0.75, 0.99, 1.0].map(|q| percentile(&v, q)), [25.0, 50.0, 75.0, 99.0, 100.0]);
        let v: Vec<u64> = (1..=8).collect();
        assert_eq!([0.25, 0.5, 0.75].map(|q| percentile(&v, q)), [2.0, 4.0, 6.0]);
        assert_eq!(percentile(&[7], 0.01), 7.0);
        assert!(median_f64(&mut []).is_nan());
        assert_eq!(median_f64(&mut [3.0, 1.0, 2.0]), 2.0);
    }

    #[test]
    fn every_row_leads_some_round_and_every_pair_is_seen_both_ways() {
        let (rows, rounds) = (4, 5);
        let orders: Vec<Vec<usize>> = (0..rounds).map(|r| round_order(rows, r)).collect();
        for o in &orders {
            let mut s = o.clone();
            s.sort_unstable();
            assert_eq!(s, (0..rows).collect::<Vec<_>>(), "a round measures every row once: {o:?}");
        }
        let firsts: std::collections::BTreeSet<usize> = orders.iter().map(|o| o[0]).collect();
        assert_eq!(firsts.len(), rows, "every row leads a round: {orders:?}");
        assert_eq!(round_order(4, 1), [1, 0, 3, 2]);
        for a in 0..rows {
            for b in 0..rows {
                if a != b {
                    let before =
                        |o: &Vec<usize>| o.iter().position(|&x| x == a) < o.iter().position(|&x| x == b);
                    assert!(orders.iter().any(before), "{a} never before {b}: {orders:?}");
                }
            }
        }
        assert!(round_order(0, 3).is_empty());
    }

    #[test]
    fn spread_is_the_median_of_round_medians_and_their_range() {
        let mut s = RoundSamples::default();
        // Round medians 10, 30, 20 (a drifting host); all samples 1..=9 ×10.
        s.push(vec![10, 10, 10]);
        s.push(vec![30, 30, 30]);
        s.push(vec![20, 20, 20]);
        s.push(vec![]);
        let x = s.spread().unwrap();
        assert_eq!((x.rounds, x.samples), (3, 9));
        assert_eq!((x.median_ns, x.round_min_ns, x.round_max_ns), (20.0, 10.0, 30.0));
        assert_eq!((x.p25_ns, x.p75_ns, x.p99_ns), (10.0, 30.0, 30.0));
        assert_eq!(RoundSamples::default().spread(), None);
    }

    #[test]
    fn ratios_pair_rounds_and_resist_drift() {
        // The host slows by 3× in round 2: both rows move, their ratio not.
        let (mut a, mut b) = (RoundSamples::default(), RoundSamples::default());
        for (x, y) in [(20, 10), (60, 30), (22, 10)] {
            a.push(vec![x; 5]);
            b.push(vec![y; 5]);
        }
        let r = RoundSpread::ratio_of_rows(&a, &b).unwrap();
        assert_eq!((r.rounds, r.median, r.min, r.max), (3, 2.0, 2.0, 2.2));
        // The median of all samples would mix rounds: 22/10 here.
        assert!(r.text(2).starts_with("2.00× (median of 3 rounds; range 2.00–2.20×)"), "{}", r.text(2));
        // A round missing on one side is dropped, not paired with another.
        b.push(vec![]);
        a.push(vec![1000]);
        assert_eq!(RoundSpread::ratio_of_rows(&a, &b).unwrap().rounds, 3);
        assert_eq!(RoundSpread::of(vec![f64::NAN]), None);
    }
}
