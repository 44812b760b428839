//! Runs the streams: starts the placement controller and the host, carries
//! out the changes of `--at`, the crashes of `--crash` and the fault
//! campaign of `--faults` while the streams flow, and takes everything back
//! at rest.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use dyncore_core::placement::{ComponentKind, PlacementConfig, PlacementPolicy};
use dyncore_core::power::SpeedTable;
use dyncore_net::app::App;
use dyncore_net::component::Blueprint;
use dyncore_net::control::{Control, Controller};
use dyncore_net::faults::{Campaign, Plan as FaultPlan};
use dyncore_net::host::{Supervised, ThreadRun, Threads, Updated};
use dyncore_net::hosting::{CpuHost, CpuSnapshot, HostConfig, HostError, SlotSnapshot};

use super::args::{Args, BadArgs, Change, Plan};

/// A finished run.
pub(super) struct Outcome {
    /// The sending stack's components, in pipeline order.
    pub stack: Vec<Supervised>,
    /// Their figures and the CPUs' at the end.
    pub slots: Vec<SlotSnapshot>,
    pub cpus: Vec<CpuSnapshot>,
    pub ctl: Controller,
    pub threads: ThreadRun,
    pub wall_ns: u64,
    /// When each crash was injected (host clock).
    pub crashes_at: Vec<u64>,
    /// Live updates of `--at`.
    pub updates: Vec<Updated>,
    pub campaign: Option<Campaign>,
    /// Both stacks came to rest (no buffer out) before they stopped.
    pub at_rest: bool,
}

/// The ends of a run: the sending stack, the peer's components (if it is
/// a split stack) and the applications.
pub(super) struct Ends {
    pub ours: Vec<Arc<dyn Blueprint>>,
    pub others: Vec<Arc<dyn Blueprint>>,
    pub apps: Vec<Box<dyn App>>,
}

/// Flags a run watches: `stop` closes the streams (a signal, or the end
/// of the fault campaign); `signal` is the signal that set it (0: none).
pub(super) struct Flags {
    pub stop: Arc<AtomicBool>,
    pub signal: Arc<std::sync::atomic::AtomicI32>,
}

/// Starts the controller and the host, runs the streams with the changes
/// of `--at`, the crashes of `--crash` and the campaign of `--faults`, and
/// takes everything back.
pub(super) fn drive(
    args: &Args,
    plan: &Plan,
    ends: Ends,
    crash: &[ComponentKind],
    limit: Duration,
    flags: &Flags,
) -> Result<Outcome> {
    let Ends { ours, others, apps } = ends;
    let speeds = SpeedTable::newtos();
    let cfg = PlacementConfig::new(plan.cpus.clone(), plan.placement.mode);
    let policy =
        PlacementPolicy::new(cfg, &ComponentKind::ALL, speeds).map_err(|e| BadArgs(e.to_string()))?;
    let mut ctl = Controller::new(policy);
    let layout = ctl.start(0);
    let mut hc = HostConfig::new(plan.cpus.clone());
    hc.pin = true;
    let mut all = ours.clone();
    all.extend(others.iter().cloned());
    let host = CpuHost::start(hc, ours, &layout.cpu_of).map_err(|e| BadArgs(e.to_string()))?;
    ctl.attach(&host)?;
    let bad = |e: dyncore_net::control::ControlError| BadArgs(e.to_string());
    for &(component, to) in &plan.placement.moves {
        ctl.control(&host, host.now_ns(), Control::Migrate { component, to }).map_err(bad)?;
    }
    for &(cpu, step) in &plan.speeds {
        ctl.control(&host, host.now_ns(), Control::SetSpeed { cpu, step }).map_err(bad)?;
    }
    let threads = Threads::start(others, apps);
    let mut run = Running::new(args, plan, crash);
    let t0 = Instant::now();
    let period = Duration::from_millis(args.sample_ms);
    let _ = ctl.sample(&host, host.now_ns())?;
    while !threads.wait_apps(run.wait(period)) && t0.elapsed() < limit && !host.failed() {
        run.changes(&host, &mut ctl, t0)?;
        run.crash(&host, flags)?;
        run.campaign(&host, &mut ctl, flags)?;
        if run.sample_due(period) {
            let _ = ctl.sample(&host, host.now_ns())?;
        }
    }
    let wall_ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let at_rest = threads.wait_apps(Duration::ZERO) && wait_rest(&all, Duration::from_secs(5));
    let slots = host.components();
    let cpus = host.cpus();
    let stack = host.stop();
    let threads = threads.stop();
    let Running { crashes_at, updates, campaign, .. } = run;
    Ok(Outcome { stack, slots, cpus, ctl, threads, wall_ns, crashes_at, updates, campaign, at_rest })
}

/// What a run does while the streams flow.
struct Running<'a> {
    pending: std::iter::Peekable<std::slice::Iter<'a, (Duration, Change)>>,
    crash: &'a [ComponentKind],
    crash_every: Duration,
    next_crash: Instant,
    crashes: usize,
    crashes_at: Vec<u64>,
    updates: Vec<Updated>,
    campaign: Option<Campaign>,
    last_sample: Instant,
}

impl<'a> Running<'a> {
    fn new(args: &Args, plan: &'a Plan, crash: &'a [ComponentKind]) -> Running<'a> {
        let crash_every = Duration::from_millis(args.crash_every_ms());
        let campaign = args.faults.map(|n| {
            Campaign::new(FaultPlan {
                crashes: n,
                seed: args.campaign_seed(),
                gap: Duration::from_micros(args.fault_gap_us()),
                cpus: plan.cpus.clone(),
            })
        });
        Running {
            pending: plan.at.iter().peekable(),
            crash,
            crash_every,
            next_crash: Instant::now() + crash_every,
            crashes: 0,
            crashes_at: Vec::new(),
            updates: Vec::new(),
            campaign,
            last_sample: Instant::now(),
        }
    }

    /// How long to wait for the applications before the next look: a
    /// sample period, or much less while a campaign injects faults.
    fn wait(&self, period: Duration) -> Duration {
        if self.campaign.is_some() { Duration::from_micros(50) } else { period }
    }

    fn sample_due(&mut self, period: Duration) -> bool {
        let due = self.last_sample.elapsed() >= period;
        if due {
            self.last_sample = Instant::now();
        }
        due
    }

    /// The changes of `--at` that are due.
    fn changes(&mut self, host: &CpuHost, ctl: &mut Controller, t0: Instant) -> Result<()> {
        let now = host.now_ns();
        while let Some((_, c)) = self.pending.next_if(|(t, _)| t0.elapsed() >= *t) {
            say!("{:>9.3} s  --at: {c:?}", t0.elapsed().as_secs_f64());
            match c {
                Change::Placement(p) => {
                    ctl.control(host, now, Control::SetMode { mode: p.mode })?;
                    for &(component, to) in &p.moves {
                        ctl.control(host, now, Control::Migrate { component, to })?;
                    }
                }
                Change::Speed(v) => {
                    for &(cpu, step) in v {
                        ctl.control(host, now, Control::SetSpeed { cpu, step })?;
                    }
                }
                Change::Move(component, to) => {
                    ctl.control(host, now, Control::Migrate { component: *component, to: *to })?
                }
                Change::Crash(k) => {
                    host.crash(*k)?;
                    self.crashes_at.push(host.now_ns());
                }
                Change::Update(k, v) => {
                    let version = match v {
                        Some(v) => *v,
                        None => host.version(*k)?,
                    };
                    let u = host.update(*k, version).map_err(|e| BadArgs(e.0))?;
                    say!(
                        "{:>9.3} s  update {}: version {} → {}, paused {:.1} µs",
                        t0.elapsed().as_secs_f64(),
                        u.kind,
                        u.from,
                        u.to,
                        u.pause_ns as f64 / 1e3
                    );
                    self.updates.push(u);
                }
            }
        }
        Ok(())
    }

    /// The crashes of `--crash`, one every `--crash-every-ms`.
    fn crash(&mut self, host: &CpuHost, flags: &Flags) -> Result<()> {
        if !self.crash.is_empty() && !flags.stop.load(Ordering::Acquire) && Instant::now() >= self.next_crash
        {
            host.crash(self.crash[self.crashes % self.crash.len()])?;
            self.crashes_at.push(host.now_ns());
            self.crashes += 1;
            self.next_crash = Instant::now() + self.crash_every;
        }
        Ok(())
    }

    /// The campaign's next fault; once its crashes have fired, it disarms
    /// what is left and closes the streams.
    fn campaign(&mut self, host: &CpuHost, ctl: &mut Controller, flags: &Flags) -> Result<()> {
        let Some(c) = &mut self.campaign else { return Ok(()) };
        if flags.stop.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut mover = |component, to| {
            ctl.control(host, host.now_ns(), Control::Migrate { component, to })
                .map_err(|e| HostError(e.to_string()))
        };
        if c.step(host, &mut mover)? {
            c.finish(host)?;
            flags.stop.store(true, Ordering::Release);
        }
        Ok(())
    }
}

/// Waits until no buffer is out in any component (the last frames in
/// flight drained), at most `limit`; says whether they did. Two readings in
/// a row, 1 ms apart: one taken while buffers move may miss one in flight
/// (`PoolRef::outstanding`).
fn wait_rest(all: &[Arc<dyn Blueprint>], limit: Duration) -> bool {
    let t0 = Instant::now();
    let mut quiet = 0;
    while quiet < 2 {
        quiet = if all.iter().all(|b| b.buffers_out() == 0) { quiet + 1 } else { 0 };
        if quiet < 2 && t0.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}
