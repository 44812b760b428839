//! The rows of the report: each configuration's rounds summarised (median
//! and range of the bitrate, CPU time and cycles per byte, modelled and
//! measured energy), and the figures of B2-B5 per round.

use dyncore_core::placement::ComponentKind;
use dyncore_core::power::{PowerModel, SpeedTable};

use super::baselines::Run;
use super::split;
use crate::percentile;

/// A configuration's rounds, summarised.
#[derive(Debug, Clone, serde::Serialize)]
pub(super) struct Row {
    pub(super) key: &'static str,
    pub(super) what: &'static str,
    pub(super) runs: Vec<Run>,
    pub(super) gbps_median: f64,
    pub(super) gbps_min: f64,
    pub(super) gbps_max: f64,
    pub(super) cpu_s_per_gb: f64,
    pub(super) cycles_per_byte: Option<f64>,
    pub(super) joules_per_gb_modelled: f64,
    /// From RAPL, where the machine has it (the whole package, not only
    /// these threads).
    pub(super) joules_per_gb_measured: Option<f64>,
}

pub(super) fn summarise(key: &'static str, what: &'static str, runs: Vec<Run>, mhz: Option<f64>) -> Row {
    let mut g: Vec<u64> = runs.iter().map(|r| (r.gbps() * 1e6) as u64).collect();
    g.sort_unstable();
    let bytes: u64 = runs.iter().map(|r| r.bytes).sum();
    let cpu_ns: u64 = runs.iter().map(|r| r.cpu_ns).sum();
    let gb = bytes as f64 / 1e9;
    let cpu_s_per_gb = cpu_ns as f64 / 1e9 / gb;
    let measured: Option<f64> = runs.iter().map(|r| r.joules).sum();
    // Every CPU-second modelled as a busy core at the fastest step.
    let model = PowerModel::newtos();
    let busy_w = model.busy_w(SpeedTable::newtos().get(SpeedTable::newtos().fastest()));
    Row {
        key,
        what,
        gbps_median: percentile(&g, 0.5) / 1e6,
        gbps_min: g[0] as f64 / 1e6,
        gbps_max: g[g.len() - 1] as f64 / 1e6,
        cpu_s_per_gb,
        cycles_per_byte: mhz.map(|m| cpu_ns as f64 * m / 1e3 / bytes as f64),
        joules_per_gb_modelled: cpu_s_per_gb * busy_w,
        joules_per_gb_measured: measured.map(|j| j / gb),
        runs,
    }
}

/// B2–B5 summarised over the rounds.
#[derive(Debug, Clone, serde::Serialize)]
pub(super) struct SplitRow {
    pub(super) key: &'static str,
    pub(super) what: &'static str,
    pub(super) gbps_median: f64,
    pub(super) gbps_min: f64,
    pub(super) gbps_max: f64,
    /// Median per component of its busy fraction over the stream.
    pub(super) util: Vec<(ComponentKind, f64)>,
    pub(super) wakeups_per_s: f64,
    /// The stack CPUs' running time (polls, work or not) per byte.
    pub(super) cycles_per_byte: Option<f64>,
    pub(super) joules_per_gb_modelled: f64,
    /// Idle phases (B4, B4s): CPU-seconds and modelled joules, summed over rounds.
    pub(super) idle_cpu_s: f64,
    pub(super) idle_joules: f64,
    pub(super) stream_cpu_s: f64,
    pub(super) reaction_ms_median: Option<f64>,
    pub(super) gbps_before_reaction: Option<f64>,
    pub(super) gbps_after_reaction: Option<f64>,
    pub(super) target_unreachable: usize,
    pub(super) runs: Vec<split::SplitRun>,
}

pub(super) fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

pub(super) fn split_row(
    key: &'static str,
    what: &'static str,
    runs: Vec<split::SplitRun>,
    mhz: Option<f64>,
) -> SplitRow {
    let g: Vec<f64> = runs.iter().map(|r| r.gbps).collect();
    let bytes: u64 = runs.iter().map(|r| r.bytes).sum();
    let run_ns: u64 = runs.iter().map(|r| r.run_ns).sum();
    let stream_j: f64 = runs.iter().map(|r| r.stream.joules).sum();
    let util = ComponentKind::ALL
        .iter()
        .map(|&k| {
            let v =
                runs.iter().flat_map(|r| r.util.iter().filter(|(x, _)| *x == k).map(|(_, u)| *u)).collect();
            (k, median(v).unwrap_or(0.0))
        })
        .collect();
    SplitRow {
        key,
        what,
        gbps_median: median(g.clone()).unwrap_or(0.0),
        gbps_min: g.iter().copied().fold(f64::INFINITY, f64::min),
        gbps_max: g.iter().copied().fold(0.0, f64::max),
        util,
        wakeups_per_s: median(runs.iter().map(|r| r.wakeups_per_s).collect()).unwrap_or(0.0),
        cycles_per_byte: mhz.map(|m| run_ns as f64 * m / 1e3 / bytes as f64),
        joules_per_gb_modelled: stream_j / (bytes as f64 / 1e9),
        idle_cpu_s: runs.iter().map(|r| r.idle_before.cpu_s + r.idle_after.cpu_s).sum(),
        idle_joules: runs.iter().map(|r| r.idle_before.joules + r.idle_after.joules).sum(),
        stream_cpu_s: runs.iter().map(|r| r.stream.cpu_s).sum(),
        reaction_ms_median: median(
            runs.iter().filter_map(|r| r.reaction_ns).map(|n| n as f64 / 1e6).collect(),
        ),
        gbps_before_reaction: median(runs.iter().filter_map(|r| r.gbps_before_reaction).collect()),
        gbps_after_reaction: median(runs.iter().filter_map(|r| r.gbps_after_reaction).collect()),
        target_unreachable: runs.iter().filter(|r| r.target_unreachable).count(),
        runs,
    }
}

/// The four goals of issue 10, each a ratio of figures from this run.
/// A goal's ratio in each round: its median and range, as the other
/// benches report theirs.
pub(super) fn per_round(v: &[f64]) -> (f64, f64, f64) {
    let m = median(v.to_vec()).unwrap_or(f64::NAN);
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (m, lo, hi)
}
