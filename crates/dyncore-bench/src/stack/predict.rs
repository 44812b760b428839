//! Sim against live: this run's measured costs through the simulator's
//! model of the layout that really runs (`dyncore_sim::netstack::predict`).

use dyncore_core::placement::ComponentKind;
use dyncore_sim::netstack::predict::{BenchPrediction, LiveThreads};

use super::rows::{Row, SplitRow};

/// One configuration predicted by the simulator's network-stack model from
/// this run's measured costs, beside what the bench measured.
#[derive(Debug, Clone, serde::Serialize)]
pub(super) struct Prediction {
    pub(super) key: &'static str,
    pub(super) predicted_gbps: f64,
    pub(super) measured_gbps: f64,
    /// CPU-seconds per GB of payload, on the side the bench measures (B1:
    /// both polling threads; B2, B3: the sending stack's CPUs).
    pub(super) predicted_cpu_s_per_gb: f64,
    pub(super) measured_cpu_s_per_gb: Option<f64>,
    /// The model's bitrate with the smallest and the largest mean wake-up
    /// cost of this configuration's rounds (the model takes one cost for
    /// every wake-up; the host's varies from round to round), and those
    /// costs, µs.
    pub(super) gbps_over_wake_costs: Option<(f64, f64, f64, f64)>,
    /// B2, B3: the wake-up cost the model ran, µs: the median of the
    /// rounds' mean wake-up costs.
    pub(super) wake_us: Option<f64>,
    /// B2, B3: the model's bitrate without the assumed turn cost (a
    /// switch between components, a turn after a sleep: the paper-side
    /// 1000 cycles, which the live runtime CPUs' cost is not measured
    /// against).
    pub(super) gbps_without_turns: Option<f64>,
    /// B2, B3: wake-ups of the stack's CPUs per MB of payload, (the
    /// model's, the live rounds' median).
    pub(super) wakeups_per_mb: Option<(f64, f64)>,
    /// B2, B3: per component, cycles per payload byte of its busy time
    /// (the model's, the live rounds' median; at the clock
    /// `/proc/cpuinfo` states, the live ones scaled by the CPU share the
    /// stack's threads had): which cost differs.
    pub(super) components: Vec<(ComponentKind, f64, f64)>,
    /// B1: the sending and the receiving thread's cycles per payload byte
    /// in polls that did work (the model's CPU's busy time, the live
    /// rounds' median); B2, B3: the application's and the receiver's
    /// threads' CPU time per payload byte (the model's work beside the
    /// stack; live, the process's CPU time beyond the stack CPUs').
    pub(super) threads: Vec<(&'static str, f64, f64)>,
    /// ACKs reaching the sending stack per MB of payload (the model's, the
    /// live rounds' median: B2, B3 the driver's messages beyond the
    /// segments it sent; B1 the sender's frames beyond them).
    pub(super) acks_per_mb: Option<(f64, f64)>,
}

impl Prediction {
    pub(super) fn gbps_diff(&self) -> f64 {
        self.predicted_gbps / self.measured_gbps.max(1e-12) - 1.0
    }

    pub(super) fn cpu_diff(&self) -> Option<f64> {
        self.measured_cpu_s_per_gb.map(|m| self.predicted_cpu_s_per_gb / m.max(1e-12) - 1.0)
    }
}

/// B1 (monolithic), B2 (spread) and B3 (consolidated) predicted by
/// `dyncore_sim::netstack::predict` from `costs` and `threads` (both
/// measured in this run), with the live stack's segment size (MTU - 40) and
/// socket buffer as the window; the model runs the layout that really runs
/// (the application and the receiver beside the stack on the same two
/// CPUs), and predicts the CPU time the bench measures.
pub(super) fn predict(
    costs: &dyncore_core::profile::StackCosts,
    threads: &LiveThreads,
    mtu: usize,
    b1: &Row,
    b2: &SplitRow,
    b3: &SplitRow,
    mhz: Option<f64>,
) -> Vec<Prediction> {
    use dyncore_sim::netstack::predict::{LiveLayout, predict_bench, predict_bench_turns};
    let mss = u32::try_from(mtu - 40).expect("the MTU is checked to be 576..=65535");
    let window = dyncore_net::tcp::SocketConfig::default().buffer_bytes as u64;
    let cpu_s = |cycles_per_byte: Option<f64>| cycles_per_byte.zip(mhz).map(|(c, m)| c * 1e9 / (m * 1e6));
    let live_threads = threads;
    let one = |key, layout, measured_gbps, measured_cpu, rounds: Option<&SplitRow>| {
        // The stack CPUs' wake-up cost is the host's, and it varies from
        // run to run (15–47 µs in the cost runs of 2026-11-26): a
        // configuration's own rounds measured theirs, and the model takes
        // their median; the cost runs' is the fallback.
        let wake_ns = rounds.and_then(median_wake_ns);
        let costs = &wake_ns.map_or_else(
            || costs.clone(),
            |w| dyncore_core::profile::StackCosts { wakeup_ns: w, ..costs.clone() },
        );
        let p = predict_bench(costs, layout, mss, window, threads);
        let gbps_over_wake_costs = rounds.and_then(|r| {
            let per = round_wake_ns(r);
            let lo = per.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = per.iter().copied().fold(0.0, f64::max);
            (!per.is_empty()).then(|| {
                let at = |w: f64| {
                    let c = dyncore_core::profile::StackCosts { wakeup_ns: w, ..costs.clone() };
                    predict_bench(&c, layout, mss, window, threads).gbps
                };
                (at(lo), at(hi), lo / 1e3, hi / 1e3)
            })
        });
        let gbps_without_turns =
            rounds.map(|_| predict_bench_turns(costs, layout, mss, window, threads, 0.0).gbps);
        let wakeups_per_mb = rounds.and_then(|r| {
            let live: Vec<f64> = r
                .runs
                .iter()
                .filter(|x| x.bytes > 0)
                .map(|x| x.wakeups as f64 / (x.bytes as f64 / 1e6))
                .collect();
            super::rows::median(live).map(|l| (p.wakeups_per_mb, l))
        });
        let (components, mut acks_per_mb) = match (rounds, mhz) {
            (Some(r), Some(m)) => {
                (per_component(&p, r, m), live_acks_per_mb(r, mss).map(|l| (p.acks_per_mb, l)))
            }
            _ => (Vec::new(), None),
        };
        let mut threads = match (rounds, mhz) {
            (Some(r), Some(m)) => beside_threads(&p, r, m, live_threads, mss),
            _ => Vec::new(),
        };
        if rounds.is_none()
            && let Some((live, acks)) = mhz.and_then(|m| mono_work(b1, m))
        {
            let names = ["sending thread", "receiving thread"];
            threads = names
                .into_iter()
                .zip(&p.cpu_cycles_per_byte)
                .zip(live)
                .map(|((n, &m), l)| (n, m, l))
                .collect();
            acks_per_mb = Some((p.acks_per_mb, acks));
        }
        Prediction {
            key,
            gbps_without_turns,
            wakeups_per_mb,
            components,
            threads,
            acks_per_mb,
            predicted_gbps: p.gbps,
            measured_gbps,
            predicted_cpu_s_per_gb: p.cpu_s_per_gb,
            measured_cpu_s_per_gb: measured_cpu,
            gbps_over_wake_costs,
            wake_us: wake_ns.map(|w| w / 1e3),
        }
    };
    vec![
        one("B1", LiveLayout::Mono, b1.gbps_median, Some(b1.cpu_s_per_gb), None),
        one("B2", LiveLayout::Spread, b2.gbps_median, cpu_s(b2.cycles_per_byte), Some(b2)),
        one("B3", LiveLayout::Consolidated, b3.gbps_median, cpu_s(b3.cycles_per_byte), Some(b3)),
    ]
}

/// B2, B3: the threads beside the stack, the model's cycles per byte
/// against the live rounds' median: the two together (the process's CPU
/// time beyond the stack CPUs'), and each thread's own.
fn beside_threads(
    p: &BenchPrediction,
    r: &SplitRow,
    m: f64,
    live_threads: &LiveThreads,
    mss: u32,
) -> Vec<(&'static str, f64, f64)> {
    let mut threads = Vec::new();
    let live: Vec<f64> = r
        .runs
        .iter()
        .filter(|x| x.bytes > 0 && x.beside_cpu_ns > 0)
        .map(|x| x.beside_cpu_ns as f64 * m / 1e3 / x.bytes as f64)
        .collect();
    if let Some(l) = super::rows::median(live) {
        threads.push(("application and receiver threads", p.beside_cycles_per_byte, l));
    }
    // Each thread's own: the model charges each its measured work
    // per byte (the receiver also its stack's per segment), and
    // nothing while it waits.
    let t = live_threads;
    let model = [
        t.app_cycles_per_byte + t.app_call_copy_cycles_per_byte,
        t.mono_receive.cycles(u64::from(mss)) / f64::from(mss) + t.receiver_cycles_per_byte,
    ];
    let names = ["the application's thread", "the receiver's thread"];
    for (i, (what, model)) in names.into_iter().zip(model).enumerate() {
        let live: Vec<f64> = r
            .runs
            .iter()
            .filter(|x| x.bytes > 0 && x.apps_cpu_ns[i] > 0)
            .map(|x| x.apps_cpu_ns[i] as f64 * m / 1e3 / x.bytes as f64)
            .collect();
        if let Some(l) = super::rows::median(live) {
            threads.push((what, model, l));
        }
    }
    threads
}

/// Each of `r`'s rounds' mean wake-up cost of its stack CPUs, ns (rounds
/// with a wake-up).
fn round_wake_ns(r: &SplitRow) -> Vec<f64> {
    r.runs.iter().filter(|x| x.wakeups > 0).map(|x| x.wake_ns as f64 / x.wakeups as f64).collect()
}

/// The median of [`round_wake_ns`].
fn median_wake_ns(r: &SplitRow) -> Option<f64> {
    super::rows::median(round_wake_ns(r))
}

/// Per component: the model's cycles per byte beside the live rounds'
/// median (busy time in polls that did work, scaled by the stack threads'
/// CPU share, at `mhz`, over the stream's bytes).
fn per_component(p: &BenchPrediction, r: &SplitRow, mhz: f64) -> Vec<(ComponentKind, f64, f64)> {
    p.component_cycles_per_byte
        .iter()
        .filter_map(|&(k, model)| {
            let live: Vec<f64> = r
                .runs
                .iter()
                .filter(|x| x.bytes > 0)
                .filter_map(|x| {
                    x.work
                        .iter()
                        .find(|w| w.0 == k)
                        .map(|w| w.1 as f64 * x.cpu_share * mhz / 1e3 / x.bytes as f64)
                })
                .collect();
            super::rows::median(live).map(|l| (k, model, l))
        })
        .collect()
}

/// The live rounds' median of ACKs per MB reaching the sending stack: its
/// driver's messages beyond the full segments of the stream.
fn live_acks_per_mb(r: &SplitRow, mss: u32) -> Option<f64> {
    let per: Vec<f64> = r
        .runs
        .iter()
        .filter(|x| x.bytes > 0)
        .filter_map(|x| {
            let driver = x.work.iter().find(|w| w.0 == ComponentKind::Driver)?.2;
            let segments = x.bytes.div_ceil(u64::from(mss));
            Some(driver.saturating_sub(segments) as f64 / (x.bytes as f64 / 1e6))
        })
        .collect();
    super::rows::median(per)
}

/// B1's rounds: the median over the rounds of each thread's cycles per byte
/// in polls that did work, and of the ACKs per MB.
fn mono_work(b1: &Row, mhz: f64) -> Option<([f64; 2], f64)> {
    let runs: Vec<_> = b1.runs.iter().filter_map(|r| r.mono.map(|w| (r.bytes as f64, w))).collect();
    let med = |f: &dyn Fn(f64, &super::baselines::MonoWork) -> f64| {
        super::rows::median(runs.iter().map(|(b, w)| f(*b, w)).collect())
    };
    let tx = med(&|b, w| w.tx_busy_ns as f64 * mhz / 1e3 / b)?;
    let rx = med(&|b, w| w.rx_busy_ns as f64 * mhz / 1e3 / b)?;
    let acks = med(&|b, w| w.acks as f64 / (b / 1e6))?;
    Some(([tx, rx], acks))
}
