//! Sim against live: predicts what `dyncore bench stack` measures on this
//! machine for its 2-core configurations, from the machine profile's
//! `[stack]` costs ([`StackCosts`], written by `dyncore bench stack
//! --write-profile`).
//!
//! The live bench moves one stream between a sender stack and a receiver
//! stack over the in-memory wire. The model simulates the sender's stack
//! and stands the receiver in as a mirror: it turns each segment around
//! after the time the same components take to receive it (TCP, IP and the
//! driver's cycles for the segment, at the profile's clock), and the link
//! is the in-memory wire (1000 Gbit/s, no frame overhead). The profile's
//! cycles are counted at `cpu_mhz`; the model runs its CPUs at the paper
//! machine's 2267 MHz step with the cycles scaled by `2267 / cpu_mhz`, so
//! every job takes the time it takes on this machine.
//!
//! Layouts ([`LiveLayout`]): `Mono` (B1: TCP, IP and the driver in one
//! polling thread, which neither sleeps nor switches), `Spread` (B2: TCP
//! and the filter on one CPU, the syscall server, IP and the driver on the
//! other, as the placement policy's spread starts), `Consolidated` (B3: the
//! five components on one CPU, each turn paying the turn cost). B4 (`dynamic`
//! under a load step) and B5 (`efficient` at a target) run the placement
//! policy; use [`super::policy::simulate_policy`] with the same inputs.
//!
//! CPU-seconds are predicted as the time the components run (the model's
//! busy time) on both sides, the receiver counted like the sender; a polling
//! thread (B1) is charged all the time, as the live bench's thread clock
//! charges it.

use dyncore_core::placement::ComponentKind;
use dyncore_core::profile::StackCosts;
use serde::Serialize;

use super::idle::GovernorName;
use super::{CpuSpec, NetParams, RunInput, simulate};

/// A 2-core configuration of `dyncore bench stack` (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LiveLayout {
    Mono,
    Spread,
    Consolidated,
}

/// What the model predicts for one configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BenchPrediction {
    pub gbps: f64,
    /// CPU time of both sides per GB of payload, s.
    pub cpu_s_per_gb: f64,
}

/// The model's clock for predictions: the paper machine's fastest step.
const MODEL_MHZ: f64 = 2267.0;

/// `costs` with cycles rescaled to [`MODEL_MHZ`] (module docs).
fn at_model_clock(costs: &StackCosts) -> StackCosts {
    StackCosts { cpu_mhz: MODEL_MHZ, ..costs.with_cycles_times(MODEL_MHZ / costs.cpu_mhz) }
}

/// Predicts `layout` on the machine `costs` describe, for `streams`
/// streams of `window_bytes` and segments of `mss` bytes. `costs` must have
/// passed [`StackCosts::validate`].
pub fn predict_bench(costs: &StackCosts, layout: LiveLayout, mss: u32, window_bytes: u64) -> BenchPrediction {
    let c = at_model_clock(costs);
    let recv_cycles =
        c.tcp.cycles(u64::from(mss)) + c.ip.cycles(u64::from(mss)) + c.driver.cycles(u64::from(mss));
    let recv_ns = (recv_cycles * 1000.0 / MODEL_MHZ).round() as u64;
    let mono = layout == LiveLayout::Mono;
    let net = NetParams {
        link_gbps: 1000.0,
        frame_overhead: 0,
        mss,
        streams: 1,
        window_bytes,
        remote_ns: recv_ns,
        remote_jitter_ns: 0,
        turn_cycles: if mono { 0.0 } else { NetParams::default().turn_cycles },
        // The live runtime parks a thread; its wake-up is what the bench
        // measured (`wakeup_ns`), not a C-state's.
        governor: GovernorName::Fixed,
        ..NetParams::default()
    };
    let c = StackCosts { wakeup_ns: if mono { 0.0 } else { c.wakeup_ns }, ..c };
    let all = vec![ComponentKind::Tcp, ComponentKind::Ip, ComponentKind::Driver];
    let cpus = match layout {
        LiveLayout::Mono | LiveLayout::Consolidated => {
            vec![CpuSpec { mhz: 2267, components: all, core: None }]
        }
        LiveLayout::Spread => vec![
            CpuSpec { mhz: 2267, components: vec![ComponentKind::Tcp], core: None },
            CpuSpec { mhz: 2267, components: vec![ComponentKind::Ip, ComponentKind::Driver], core: None },
        ],
    };
    let o = simulate(&RunInput { costs: &c, net: &net, cpus: &cpus, load: &[], seed: 1 });
    let busy: f64 = if mono { o.cpus.len() as f64 } else { o.cpus.iter().map(|c| c.busy).sum() };
    let gbps = o.mbps / 1000.0;
    // Per GB: (1e9 · 8 / bits per second) seconds of wall, times the busy
    // CPUs, on both sides.
    let wall_per_gb = 8.0 / gbps.max(1e-9);
    BenchPrediction { gbps, cpu_s_per_gb: 2.0 * busy * wall_per_gb }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dyncore_core::profile::ComponentCost;

    /// `PROFILE=path cargo test --release -p dyncore-sim predict_from_profile -- --ignored --nocapture`
    #[test]
    #[ignore = "needs a machine profile with [stack] (PROFILE=path)"]
    fn predict_from_profile() {
        let path = std::env::var("PROFILE").expect("PROFILE=path of a machine profile");
        let p: dyncore_core::profile::MachineProfile =
            toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let costs = p.stack.expect("the profile has a [stack] section");
        costs.validate().unwrap();
        for l in [LiveLayout::Mono, LiveLayout::Spread, LiveLayout::Consolidated] {
            let r = predict_bench(&costs, l, 1460, 65535);
            eprintln!("{l:?}: {:.2} Gbps, {:.2} CPU-s/GB", r.gbps, r.cpu_s_per_gb);
        }
    }

    /// A profile as `bench stack --write-profile` would write it.
    fn fixture() -> StackCosts {
        let c = |p, b| ComponentCost { cycles_per_packet: p, cycles_per_byte: b };
        StackCosts {
            cpu_mhz: 2100.0,
            channel_cycles_per_msg: 150.0,
            wakeup_ns: 5000.0,
            syscall: c(400.0, 0.0),
            tcp: c(1500.0, 0.5),
            ip: c(600.0, 0.0),
            filter: c(200.0, 0.0),
            driver: c(500.0, 0.1),
        }
    }

    #[test]
    fn a_polling_monolithic_stack_goes_as_fast_as_its_cycles_allow() {
        let p = fixture();
        let r = predict_bench(&p, LiveLayout::Mono, 1448, 1 << 20);
        // One busy CPU: per segment TCP + IP + driver + 2 channel messages,
        // plus half an ACK's trip back up; at 2100 MHz.
        let seg = p.tcp.cycles(1448)
            + p.ip.cycles_per_packet
            + p.driver.cycles(1448)
            + 2.0 * p.channel_cycles_per_msg;
        let ack = 0.5
            * (p.tcp.cycles_per_packet
                + p.ip.cycles_per_packet
                + p.driver.cycles_per_packet
                + 3.0 * p.channel_cycles_per_msg);
        let want = 2100e6 / (seg + ack) * 1448.0 * 8.0 / 1e9;
        assert!((r.gbps / want - 1.0).abs() < 0.03, "{r:?} vs {want}");
        // Two polling threads, all the time: 2 CPU-seconds per second.
        assert!((r.cpu_s_per_gb - 2.0 * 8.0 / r.gbps).abs() < 1e-9);
    }

    #[test]
    fn spreading_over_two_cores_beats_consolidating_on_one() {
        let p = fixture();
        let spread = predict_bench(&p, LiveLayout::Spread, 1448, 1 << 20);
        let cons = predict_bench(&p, LiveLayout::Consolidated, 1448, 1 << 20);
        assert!(spread.gbps > cons.gbps, "{spread:?} {cons:?}");
        // A faster clock in the profile (same cycles) predicts more.
        let fast = StackCosts { cpu_mhz: 4200.0, ..fixture() };
        assert!(predict_bench(&fast, LiveLayout::Spread, 1448, 1 << 20).gbps > spread.gbps);
    }
}
