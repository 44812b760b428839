//! B2–B5: the split stack on runtime CPUs, placed by the placement policy
//! through the live controller, streaming to a monolithic smoltcp receiver
//! over the in-memory wire. The sending stack's five components run on the
//! runtime CPUs (pinned); the sending application and the receiver run on
//! plain threads.
//!
//! A run may have idle phases around its stream (B4's load step): the
//! stack and its controller run with no application for `idle` before the
//! stream starts and after it ends. Figures per phase come from the
//! controller's sample windows (a window belongs to the phase its end
//! falls in).

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use dyncore_core::placement::{Action, ComponentKind, Decision, Mode, PlacementConfig, PlacementPolicy};
use dyncore_core::power::SpeedTable;
use dyncore_core::{CpuId, Nanos};
use dyncore_net::app::Sender;
use dyncore_net::control::Controller;
use dyncore_net::host::Threads;
use dyncore_net::hosting::{CpuHost, HostConfig};
use dyncore_net::mono::{Mono, MonoRole};
use dyncore_net::stack::{Stack, StackConfig};
use dyncore_net::tcp::SocketConfig;
use dyncore_net::wire::mem::{self, MemWireConfig};

/// Figures of one phase (idle before, the stream, idle after).
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Phase {
    pub len_ns: u64,
    /// The stack CPUs' running time (polling counts), seconds.
    pub cpu_s: f64,
    /// Modelled energy of the stack's CPUs, joules.
    pub joules: f64,
}

/// One run of the split stack.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SplitRun {
    pub bytes: u64,
    /// The stream's bitrate, connection established to closed.
    pub gbps: f64,
    /// Each component's busy time over the stream, as a fraction of it.
    pub util: Vec<(ComponentKind, f64)>,
    pub wakeups_per_s: f64,
    /// The stack CPUs' running time over the stream, ns.
    pub run_ns: u64,
    pub idle_before: Phase,
    pub stream: Phase,
    pub idle_after: Phase,
    /// From the stream's start to the first layout change in it (`None`:
    /// none), and the bitrate of the sample windows before and after it.
    pub reaction_ns: Option<u64>,
    pub gbps_before_reaction: Option<f64>,
    pub gbps_after_reaction: Option<f64>,
    pub decisions: Vec<Decision>,
    /// `efficient` ran out of steps below its target.
    pub target_unreachable: bool,
    /// Per component over the stream: time in polls that did work (ns),
    /// messages and bytes handled.
    pub work: Vec<(ComponentKind, u64, u64, u64)>,
    /// Wake-ups of the stack's CPUs over the stream and their total cost (ns).
    pub wakeups: u64,
    pub wake_ns: u64,
    /// The speed (MHz) of TCP's CPU when the stream ended.
    pub final_tcp_mhz: u32,
}

fn layout_change(a: &Action) -> bool {
    !matches!(a, Action::SetSpeed { .. })
}

pub fn run(
    mode: Mode,
    cpus: &[CpuId],
    bytes: u64,
    mtu: usize,
    sample: Duration,
    idle: Duration,
) -> Result<SplitRun> {
    let (a, b) = (std::net::Ipv4Addr::new(10, 0, 0, 1), std::net::Ipv4Addr::new(10, 0, 0, 2));
    let (wa, wb) = mem::pair(MemWireConfig { mtu, ..MemWireConfig::default() });
    let mut stack = Stack::build(&StackConfig::new(a), std::sync::Arc::new(wa));
    let sender = Sender::new(stack.sockets.remove(0), (b, 5001), bytes, super::SEED);
    let role = MonoRole::Receive { port: 5001, verify_seed: None };
    let receiver = Mono::new(wb.port(), b, SocketConfig::default(), 2, role, 0);

    let policy = PlacementPolicy::new(
        PlacementConfig::new(cpus.to_vec(), mode),
        &ComponentKind::ALL,
        SpeedTable::newtos(),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut ctl = Controller::new(policy);
    let layout = ctl.start(0);
    let mut hc = HostConfig::new(cpus.to_vec());
    hc.pin = true;
    let host = CpuHost::start(hc, stack.blueprints, &layout.cpu_of).map_err(|e| anyhow::anyhow!("{e}"))?;
    ctl.attach(&host)?;
    let _ = ctl.sample(&host, host.now_ns())?;
    let idle_until = |ctl: &mut Controller, d: Duration| -> Result<()> {
        let t = Instant::now();
        while t.elapsed() < d {
            std::thread::sleep(sample.min(d - t.elapsed().min(d)));
            let _ = ctl.sample(&host, host.now_ns())?;
        }
        Ok(())
    };
    idle_until(&mut ctl, idle)?;
    let before_cpus = host.cpus();
    let before_slots = host.components();
    let burst_start = host.now_ns();
    let threads = Threads::start(Vec::new(), vec![Box::new(sender), Box::new(receiver)]);
    let limit = Instant::now() + Duration::from_secs(120);
    while !threads.wait_apps(sample) {
        if Instant::now() > limit || host.failed() {
            bail!("the stream did not finish (limit 120 s, or a component failed)");
        }
        let _ = ctl.sample(&host, host.now_ns())?;
    }
    let _ = ctl.sample(&host, host.now_ns())?;
    let burst_end = host.now_ns();
    let after_cpus = host.cpus();
    let after_slots = host.components();
    let apps = threads.stop().apps;
    idle_until(&mut ctl, idle)?;
    let end = host.now_ns();
    let target_unreachable = ctl.policy().target_unreachable();
    let final_tcp_mhz = {
        let l = ctl.layout();
        let speeds = ctl.policy().speeds();
        speeds.get(l.step_of[&l.cpu_of[&ComponentKind::Tcp]]).mhz
    };
    drop(host.stop());

    let (tx, rx) = (apps[0].report(), apps[1].report());
    for (what, app) in [("sender", &apps[0]), ("receiver", &apps[1])] {
        if let Some(e) = app.error() {
            bail!("the {what} failed: {e}");
        }
    }
    if tx.digest != rx.digest || tx.digest.bytes != bytes {
        bail!("the receiver's stream ({}) differs from the sender's ({})", rx.digest, tx.digest);
    }
    let gbps = tx.bits_per_s().context("the stream has no bitrate")? / 1e9;
    let stream_ns = burst_end.saturating_sub(burst_start).max(1);
    let work = after_slots
        .iter()
        .zip(&before_slots)
        .map(|(a, b)| {
            (
                a.kind.expect("snapshots name their component"),
                a.load.busy_ns.saturating_sub(b.load.busy_ns),
                a.load.messages.saturating_sub(b.load.messages),
                a.load.bytes.saturating_sub(b.load.bytes),
            )
        })
        .collect();
    let util = after_slots
        .iter()
        .zip(&before_slots)
        .map(|(a, b)| {
            let k = a.kind.expect("snapshots name their component");
            (k, a.load.busy_ns.saturating_sub(b.load.busy_ns) as f64 / stream_ns as f64)
        })
        .collect();
    let sum = |f: fn(&dyncore_net::hosting::CpuSnapshot) -> u64| -> u64 {
        after_cpus.iter().zip(&before_cpus).map(|(a, b)| f(a).saturating_sub(f(b))).sum()
    };
    let wakeups = sum(|c| c.wakeups);
    let wake_ns = sum(|c| c.wake_ns);
    let run_ns = sum(|c| c.run_ns);
    let phase = |from: Nanos, to: Nanos| {
        let mut p = Phase { len_ns: to.saturating_sub(from), ..Phase::default() };
        for w in ctl.windows.iter().filter(|w| w.end_ns > from && w.end_ns <= to) {
            p.cpu_s += w.cpu_s;
            p.joules += w.joules;
        }
        p
    };
    let reaction =
        ctl.log.iter().find(|d| d.at_ns >= burst_start && d.at_ns <= burst_end && layout_change(&d.action));
    let reaction_ns = reaction.map(|d| d.at_ns - burst_start);
    let mean_gbps = |from: Nanos, to: Nanos| {
        let ws: Vec<f64> = ctl
            .windows
            .iter()
            .filter(|w| w.end_ns > from && w.end_ns <= to)
            .map(|w| w.bits_per_s / 1e9)
            .collect();
        (!ws.is_empty()).then(|| ws.iter().sum::<f64>() / ws.len() as f64)
    };
    let (before, after) = match reaction {
        Some(d) => (mean_gbps(burst_start, d.at_ns), mean_gbps(d.at_ns, burst_end)),
        None => (None, None),
    };
    Ok(SplitRun {
        bytes,
        gbps,
        util,
        wakeups_per_s: wakeups as f64 * 1e9 / stream_ns as f64,
        run_ns,
        idle_before: phase(0, burst_start),
        stream: phase(burst_start, burst_end),
        idle_after: phase(burst_end, end),
        reaction_ns,
        gbps_before_reaction: before,
        gbps_after_reaction: after,
        decisions: ctl.log.clone(),
        target_unreachable,
        work,
        wakeups,
        wake_ns,
        final_tcp_mhz,
    })
}
