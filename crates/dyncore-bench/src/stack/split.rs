//! B2–B5: the split stack on runtime CPUs, placed by the placement policy
//! through the live controller, streaming to a monolithic smoltcp receiver
//! over the in-memory wire. The sending stack's five components run on the
//! runtime CPUs (pinned); the sending application and the receiver run on
//! plain threads, pinned to the CPUs the caller names (`beside`): the bench
//! puts the application on the sender's CPU and the receiver on the
//! receiver's, as B0's and B1's threads are, so that the layout the
//! simulator models is the one that runs (left to the kernel, the two
//! threads' placement changed B3's bitrate by up to 2× from run to run).
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
use dyncore_net::app::{App, Sender};
use dyncore_net::control::Controller;
use dyncore_net::host::Threads;
use dyncore_net::hosting::{CpuHost, CpuSnapshot, HostConfig, SlotSnapshot};
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
    /// The stack CPUs' time in polls that did work, and their parks, over
    /// the stream: `(run_ns - busy_cpu_ns) / parks` is how long a CPU polls
    /// with nothing to do before it parks.
    pub busy_cpu_ns: u64,
    pub parks: u64,
    /// The share of their running time (`run_ns`) that the stack CPUs'
    /// worker threads had a real CPU (their CPU time from `schedstat` over
    /// `run_ns`, at most 1): below 1 when other threads or processes
    /// preempted them. Costs measured in wall time are scaled by it.
    pub cpu_share: f64,
    /// The CPU time over the stream of this process's threads other than
    /// the stack CPUs' (the application, the receiver, and the bench's
    /// sampling thread), ns.
    pub beside_cpu_ns: u64,
    /// The application's and the receiver's threads' own CPU time, each
    /// from its first poll to the one that finished it, ns.
    pub apps_cpu_ns: [u64; 2],
    /// `efficient`: from the stream's start to the end of the first sample
    /// window that carried the target (within 2%); `None` otherwise.
    pub time_to_target_ns: Option<u64>,
}

fn layout_change(a: &Action) -> bool {
    !matches!(a, Action::SetSpeed { .. })
}

/// What the stack did over its stream: the host's figures before and
/// after it, and when it began and ended (host clock).
struct Stream {
    start: Nanos,
    end: Nanos,
    /// The stack CPUs' worker threads' CPU time at the start and the end.
    threads_cpu_ns: (u64, u64),
    /// The whole process's CPU time at the start and the end.
    process_cpu_ns: (u64, u64),
    before_cpus: Vec<CpuSnapshot>,
    before_slots: Vec<SlotSnapshot>,
    after_cpus: Vec<CpuSnapshot>,
    after_slots: Vec<SlotSnapshot>,
    apps: Vec<Box<dyn App>>,
}

pub fn run(
    mode: Mode,
    cpus: &[CpuId],
    beside: (CpuId, CpuId),
    bytes: u64,
    mtu: usize,
    sample: Duration,
    idle: Duration,
) -> Result<SplitRun> {
    let (a, b) = (std::net::Ipv4Addr::new(10, 0, 0, 1), std::net::Ipv4Addr::new(10, 0, 0, 2));
    let (wa, wb) = mem::pair(MemWireConfig { mtu, ..MemWireConfig::default() });
    let mut stack = Stack::build(&StackConfig::new(a), std::sync::Arc::new(wa));
    let sender = Sender::new(stack.sockets.remove(0), (b, 5001), bytes, super::baselines::SEED);
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
    idle_for(&host, &mut ctl, idle, sample)?;
    let used: [std::sync::Arc<std::sync::atomic::AtomicU64>; 2] = Default::default();
    let apps = vec![
        PinnedApp::boxed(Box::new(sender), beside.0, &used[0]),
        PinnedApp::boxed(Box::new(receiver), beside.1, &used[1]),
    ];
    let s = stream(&host, &mut ctl, apps, sample)?;
    let apps_cpu_ns = used.map(|u| u.load(std::sync::atomic::Ordering::Relaxed));
    idle_for(&host, &mut ctl, idle, sample)?;
    let end = host.now_ns();
    let target_unreachable = ctl.policy().target_unreachable();
    let final_tcp_mhz = {
        let l = ctl.layout();
        let speeds = ctl.policy().speeds();
        speeds.get(l.step_of[&l.cpu_of[&ComponentKind::Tcp]]).mhz
    };
    drop(host.stop());
    let (tx, rx) = (s.apps[0].report(), s.apps[1].report());
    for (what, app) in [("sender", &s.apps[0]), ("receiver", &s.apps[1])] {
        if let Some(e) = app.error() {
            bail!("the {what} failed: {e}");
        }
    }
    if tx.digest != rx.digest || tx.digest.bytes != bytes {
        bail!("the receiver's stream ({}) differs from the sender's ({})", rx.digest, tx.digest);
    }
    let gbps = tx.bits_per_s().context("the stream has no bitrate")? / 1e9;
    let target = match mode {
        Mode::Efficient { target_bits_per_s } => Some(target_bits_per_s),
        _ => None,
    };
    let run = figures(&ctl, &s, bytes, gbps, end, target, target_unreachable, final_tcp_mhz);
    Ok(SplitRun { apps_cpu_ns, ..run })
}

/// Lets the stack and its controller run without an application for `d`.
fn idle_for(host: &CpuHost, ctl: &mut Controller, d: Duration, sample: Duration) -> Result<()> {
    let t = Instant::now();
    while t.elapsed() < d {
        std::thread::sleep(sample.min(d - t.elapsed().min(d)));
        let _ = ctl.sample(host, host.now_ns())?;
    }
    Ok(())
}

/// Runs the applications to the end of their stream, sampling.
fn stream(host: &CpuHost, ctl: &mut Controller, apps: Vec<Box<dyn App>>, sample: Duration) -> Result<Stream> {
    let before_cpus = host.cpus();
    let before_slots = host.components();
    let cpu0 = stack_threads_cpu_ns();
    let process0 = process_cpu_ns();
    let start = host.now_ns();
    let threads = Threads::start(Vec::new(), apps);
    let limit = Instant::now() + Duration::from_secs(120);
    while !threads.wait_apps(sample) {
        if Instant::now() > limit || host.failed() {
            bail!("the stream did not finish (limit 120 s, or a component failed)");
        }
        let _ = ctl.sample(host, host.now_ns())?;
    }
    let _ = ctl.sample(host, host.now_ns())?;
    let end = host.now_ns();
    let threads_cpu_ns = (cpu0, stack_threads_cpu_ns());
    let process_cpu_ns = (process0, process_cpu_ns());
    let (after_cpus, after_slots) = (host.cpus(), host.components());
    let apps = threads.stop().apps;
    Ok(Stream {
        start,
        end,
        threads_cpu_ns,
        process_cpu_ns,
        before_cpus,
        before_slots,
        after_cpus,
        after_slots,
        apps,
    })
}

/// The CPU time so far of this whole process.
fn process_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The CPU time so far of this process's stack CPU threads (`stack-cpu*`,
/// [`dyncore_net::hosting`]), from their `schedstat`.
fn stack_threads_cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .filter_map(|t| {
            let dir = t.ok()?.path();
            let comm = std::fs::read_to_string(dir.join("comm")).ok()?;
            if !comm.starts_with("stack-cpu") {
                return None;
            }
            std::fs::read_to_string(dir.join("schedstat"))
                .ok()?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// The run's figures from the stream and the controller's windows.
#[allow(clippy::too_many_arguments)]
fn figures(
    ctl: &Controller,
    s: &Stream,
    bytes: u64,
    gbps: f64,
    end: Nanos,
    target: Option<f64>,
    target_unreachable: bool,
    final_tcp_mhz: u32,
) -> SplitRun {
    let stream_ns = s.end.saturating_sub(s.start).max(1);
    let pairs = || s.after_slots.iter().zip(&s.before_slots);
    let kind = |a: &SlotSnapshot| a.kind.expect("snapshots name their component");
    let work = pairs()
        .map(|(a, b)| {
            (
                kind(a),
                a.load.busy_ns.saturating_sub(b.load.busy_ns),
                a.load.messages.saturating_sub(b.load.messages),
                a.load.bytes.saturating_sub(b.load.bytes),
            )
        })
        .collect();
    let util = pairs()
        .map(|(a, b)| (kind(a), a.load.busy_ns.saturating_sub(b.load.busy_ns) as f64 / stream_ns as f64))
        .collect();
    let sum = |f: fn(&CpuSnapshot) -> u64| -> u64 {
        s.after_cpus.iter().zip(&s.before_cpus).map(|(a, b)| f(a).saturating_sub(f(b))).sum()
    };
    let (wakeups, wake_ns, run_ns) = (sum(|c| c.wakeups), sum(|c| c.wake_ns), sum(|c| c.run_ns));
    let (busy_cpu_ns, parks) = (sum(|c| c.busy_ns), sum(|c| c.parks));
    let threads_cpu = s.threads_cpu_ns.1.saturating_sub(s.threads_cpu_ns.0);
    let beside_cpu_ns = s.process_cpu_ns.1.saturating_sub(s.process_cpu_ns.0).saturating_sub(threads_cpu);
    let cpu_share =
        if run_ns > 0 && threads_cpu > 0 { (threads_cpu as f64 / run_ns as f64).min(1.0) } else { 1.0 };
    let windows =
        |from: Nanos, to: Nanos| ctl.windows.iter().filter(move |w| w.end_ns > from && w.end_ns <= to);
    let phase = |from: Nanos, to: Nanos| {
        let mut p = Phase { len_ns: to.saturating_sub(from), ..Phase::default() };
        for w in windows(from, to) {
            p.cpu_s += w.cpu_s;
            p.joules += w.joules;
        }
        p
    };
    let reaction =
        ctl.log.iter().find(|d| d.at_ns >= s.start && d.at_ns <= s.end && layout_change(&d.action));
    let mean_gbps = |from: Nanos, to: Nanos| {
        let ws: Vec<f64> = windows(from, to).map(|w| w.bits_per_s / 1e9).collect();
        (!ws.is_empty()).then(|| ws.iter().sum::<f64>() / ws.len() as f64)
    };
    let (before, after) = match reaction {
        Some(d) => (mean_gbps(s.start, d.at_ns), mean_gbps(d.at_ns, s.end)),
        None => (None, None),
    };
    let time_to_target_ns = target
        .and_then(|t| windows(s.start, s.end).find(|w| w.bits_per_s >= t * 0.98).map(|w| w.end_ns - s.start));
    SplitRun {
        bytes,
        gbps,
        util,
        wakeups_per_s: wakeups as f64 * 1e9 / stream_ns as f64,
        run_ns,
        idle_before: phase(0, s.start),
        stream: phase(s.start, s.end),
        idle_after: phase(s.end, end),
        reaction_ns: reaction.map(|d| d.at_ns - s.start),
        gbps_before_reaction: before,
        gbps_after_reaction: after,
        decisions: ctl.log.clone(),
        target_unreachable,
        work,
        wakeups,
        wake_ns,
        final_tcp_mhz,
        busy_cpu_ns,
        parks,
        cpu_share,
        beside_cpu_ns,
        apps_cpu_ns: [0; 2],
        time_to_target_ns,
    }
}

/// An application whose thread pins itself to `cpu` at its first poll (the
/// bench's applications run on [`Threads`], which does not pin), and which
/// stores its thread's CPU time from that poll to the one that finished
/// it in `cpu_ns`.
struct PinnedApp {
    inner: Box<dyn App>,
    cpu: CpuId,
    pinned: bool,
    failed: Option<String>,
    start_ns: u64,
    cpu_ns: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl PinnedApp {
    fn boxed(
        inner: Box<dyn App>,
        cpu: CpuId,
        cpu_ns: &std::sync::Arc<std::sync::atomic::AtomicU64>,
    ) -> Box<dyn App> {
        let cpu_ns = cpu_ns.clone();
        Box::new(PinnedApp { inner, cpu, pinned: false, failed: None, start_ns: 0, cpu_ns })
    }
}

impl App for PinnedApp {
    fn poll(&mut self, now_ns: Nanos) -> dyncore_net::component::Progress {
        use super::baselines::thread_cpu_ns;
        if !self.pinned {
            self.pinned = true;
            if let Err(e) = dyncore_runtime::affinity::pin_current_thread(self.cpu) {
                self.failed = Some(format!("pinning the application's thread to CPU {}: {e}", self.cpu));
            }
            self.start_ns = thread_cpu_ns();
        }
        if self.failed.is_some() {
            return dyncore_net::component::Progress::IDLE;
        }
        let p = self.inner.poll(now_ns);
        if self.inner.is_done() {
            let used = thread_cpu_ns().saturating_sub(self.start_ns);
            self.cpu_ns.store(used, std::sync::atomic::Ordering::Relaxed);
        }
        p
    }
    fn is_done(&self) -> bool {
        self.failed.is_some() || self.inner.is_done()
    }
    fn has_work(&self) -> bool {
        self.inner.has_work()
    }
    fn deadline_ns(&self) -> Option<Nanos> {
        self.inner.deadline_ns()
    }
    fn bell(&self) -> &std::sync::Arc<dyncore_net::chan::Bell> {
        self.inner.bell()
    }
    fn report(&self) -> dyncore_net::app::StreamReport {
        self.inner.report()
    }
    fn error(&self) -> Option<&str> {
        self.failed.as_deref().or_else(|| self.inner.error())
    }
    fn connections(&self) -> &[dyncore_net::app::Connection] {
        self.inner.connections()
    }
}
