//! `dyncore stack`: a real TCP stream carried by the split network stack
//! (dyncore-net), its components on runtime CPUs placed and slowed by the
//! placement policy, with each component's utilisation, the wake-ups, the
//! modelled power and every placement decision with its reason.
//!
//! The sending stack's components run on runtime CPUs
//! (`dyncore_net::hosting`), one per CPU of `--cpus`, pinned to it; the live
//! controller (`dyncore_net::control`) drives the placement policy through
//! the policy boundary and carries out its decisions while the stream
//! flows. The peer (a second split stack, or a monolithic one) and the
//! applications run on plain threads.
//!
//! Bad input (an unknown component, a CPU the process may not use, a speed
//! step that does not exist, a filter rule that does not parse, a TUN wire
//! without the privilege) is refused before anything starts, with exit
//! status 2. Ctrl-C ends the stream early, closing the connection cleanly,
//! and removes the TUN wire's namespace.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use dyncore_core::CpuId;
use dyncore_core::placement::{ComponentKind, Mode, PlacementConfig, PlacementPolicy};
use dyncore_core::power::{MODELLED, SpeedTable, StepIdx};
use dyncore_net::app::{App, Receiver, Sender};
use dyncore_net::component::Blueprint;
use dyncore_net::control::{Control, Controller};
use dyncore_net::filter::Rule;
use dyncore_net::host::{Supervised, ThreadRun, Threads, quiet_injected_crashes};
use dyncore_net::hosting::{CpuHost, CpuSnapshot, HostConfig, SlotSnapshot};
use dyncore_net::mono::{Mono, MonoRole};
use dyncore_net::power::PowerSources;
use dyncore_net::stack::{Stack, StackConfig};
use dyncore_net::stream::Digest;
use dyncore_net::tcp::SocketConfig;
use dyncore_net::wire::linux_peer;
use dyncore_net::wire::mem::{self, MemWireConfig};
use dyncore_net::wire::tun::{self, TunNet};

use crate::table::Table;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WireKind {
    /// An in-memory wire to a peer stack in this process (no privileges).
    Mem,
    /// A TUN device to the Linux kernel's TCP in a network namespace (root).
    Tun,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PeerKind {
    /// A second split stack.
    Split,
    /// A monolithic smoltcp stack.
    Mono,
}

#[derive(Debug, clap::Args)]
#[command(after_long_help = PLACEMENT_HELP)]
pub struct Args {
    /// Where the stack's driver sends its frames.
    #[arg(long, value_enum, default_value_t = WireKind::Mem)]
    pub wire: WireKind,
    /// The stack at the other end of the in-memory wire.
    #[arg(long, value_enum, default_value_t = PeerKind::Split)]
    pub peer: PeerKind,
    /// Bytes to stream (suffixes K, M, G: powers of 1024).
    #[arg(long, default_value = "256M", value_parser = parse_size)]
    pub bytes: u64,
    /// IP MTU of the wire.
    #[arg(long, default_value_t = 1500)]
    pub mtu: usize,
    /// Real CPUs for the stack's runtime CPUs, one each, pinned (a list like 0-3,6; default: every CPU the process may use).
    #[arg(long)]
    pub cpus: Option<String>,
    /// Where the components run: spread | consolidate | efficient[:GBPS] | dynamic | manual:COMP=CPU,... (see below).
    #[arg(long, default_value = "spread")]
    pub placement: String,
    /// CPU speeds, CPU=MHZ,... with MHz one of NewtOS's steps: 2267, 1867, 1600, then 1400 … 200 (switches the policy to manual).
    #[arg(long)]
    pub speed: Option<String>,
    /// A change while the stream flows: TIME:CHANGE, TIME like 300ms or 2s, CHANGE one of placement=MODE, speed=CPU=MHZ,..., move=COMP=CPU, crash=COMP (repeatable).
    #[arg(long = "at")]
    pub at: Vec<String>,
    /// Milliseconds between the controller's load samples.
    #[arg(long, default_value_t = 10)]
    pub sample_ms: u64,
    /// Write the run (throughput, CPUs in use, every decision with its reason) as a Chrome trace for ui.perfetto.dev.
    #[arg(long)]
    pub trace: Option<std::path::PathBuf>,
    /// A packet-filter rule for the sending stack, e.g. "deny in tcp dport 23" (repeatable; first match wins).
    #[arg(long = "filter")]
    pub filters: Vec<String>,
    /// Crash this component of the sending stack repeatedly while the stream flows (ip, filter, driver, syscall; repeatable).
    #[arg(long = "crash")]
    pub crash: Vec<String>,
    /// Milliseconds between injected crashes.
    #[arg(long, default_value_t = 10)]
    pub crash_every_ms: u64,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120)]
    pub limit_s: u64,
}

const PLACEMENT_HELP: &str = "\
Placement (--placement, and placement= in --at):
  spread           every component on its own CPU at full speed; with fewer CPUs than
                   components (five: syscall, tcp, ip, filter, driver) they share the CPUs,
                   balanced by their measured work
  consolidate      everything on the first CPU at full speed
  efficient[:GBPS] the fewest and slowest cores that hold GBPS (default 1): it starts on one
                   core at 200 MHz and raises speeds by NewtOS's procedure (raise TCP's core a
                   step; if the bitrate does not rise in proportion, raise the others), adding
                   a core when every core is at its fastest duty step
  dynamic          consolidated while the load is light, spread as soon as a burst shows (the
                   shared CPU busy, channels filling, a component behind), consolidated again
                   after the load stays light for several samples (hysteresis)
  manual:COMP=CPU,...  start spread, then move the named components; nothing moves by itself

Speed (--speed, and speed= in --at): CPU=MHZ,... where MHZ is a NewtOS step: 2267, 1867 or
  1600 MHz (chip-wide frequencies), or 1400, 1200, ..., 200 MHz (per-core duty cycles of
  12.5% of 1600 MHz). A runtime CPU runs a step as a duty cycle of its capacity (200 MHz is
  88 per mille of a 2267 MHz core). Setting a speed by hand switches the policy to manual.

Power is modelled (fitted to NewtOS Table 2) unless RAPL is found, and is labelled so.";

/// Bad input: exit status 2.
#[derive(Debug)]
pub struct BadArgs(pub String);

impl std::fmt::Display for BadArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadArgs {}

fn parse_size(s: &str) -> Result<u64, String> {
    let (num, mul) = match s.char_indices().last() {
        Some((i, 'K' | 'k')) => (&s[..i], 1 << 10),
        Some((i, 'M' | 'm')) => (&s[..i], 1 << 20),
        Some((i, 'G' | 'g')) => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("`{s}` is not a size (a positive number, optionally with K, M or G)"))
}

/// The components named by `--crash`, checked.
fn crash_kinds(names: &[String]) -> Result<Vec<ComponentKind>, BadArgs> {
    names
        .iter()
        .map(|n| {
            let k: ComponentKind = n.parse().map_err(BadArgs)?;
            if k == ComponentKind::Tcp {
                return Err(BadArgs(
                    "--crash tcp: TCP holds the connections and cannot be restarted; \
                     crash ip, filter, driver or syscall"
                        .into(),
                ));
            }
            Ok(k)
        })
        .collect()
}

/// A `--placement` value.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    pub mode: Mode,
    /// `manual:` moves.
    pub moves: Vec<(ComponentKind, CpuId)>,
}

pub fn parse_placement(s: &str) -> Result<Placement, String> {
    let plain = |mode| Ok(Placement { mode, moves: Vec::new() });
    match s {
        "spread" => return plain(Mode::Spread),
        "consolidate" => return plain(Mode::Consolidate),
        "dynamic" => return plain(Mode::Dynamic),
        "efficient" => return plain(Mode::Efficient { target_bits_per_s: 1e9 }),
        "manual" => return plain(Mode::Manual),
        _ => {}
    }
    if let Some(g) = s.strip_prefix("efficient:") {
        let gbps: f64 = g.parse().map_err(|_| format!("efficient:{g}: `{g}` is not a number of Gbps"))?;
        if !(gbps.is_finite() && gbps > 0.0) {
            return Err(format!("efficient:{g}: the target must be a positive number of Gbps"));
        }
        return plain(Mode::Efficient { target_bits_per_s: gbps * 1e9 });
    }
    if let Some(list) = s.strip_prefix("manual:") {
        let moves = pairs(list, "COMP=CPU")?
            .into_iter()
            .map(|(c, cpu)| {
                let k: ComponentKind = c.parse()?;
                let cpu: CpuId =
                    cpu.parse().map_err(|_| format!("manual:{list}: `{cpu}` is not a CPU number"))?;
                Ok((k, cpu))
            })
            .collect::<Result<_, String>>()?;
        return Ok(Placement { mode: Mode::Manual, moves });
    }
    Err(format!(
        "unknown placement `{s}`; expected spread, consolidate, efficient[:GBPS], dynamic or manual:COMP=CPU,..."
    ))
}

fn pairs<'a>(list: &'a str, what: &str) -> Result<Vec<(&'a str, &'a str)>, String> {
    list.split(',')
        .map(|p| p.trim().split_once('=').ok_or_else(|| format!("`{p}` in `{list}` is not {what}")))
        .collect()
}

/// A `--speed` value: CPU → step.
pub fn parse_speeds(list: &str, speeds: &SpeedTable) -> Result<Vec<(CpuId, StepIdx)>, String> {
    pairs(list, "CPU=MHZ")?
        .into_iter()
        .map(|(cpu, mhz)| {
            let cpu: CpuId =
                cpu.parse().map_err(|_| format!("speed `{list}`: `{cpu}` is not a CPU number"))?;
            let mhz: u32 =
                mhz.parse().map_err(|_| format!("speed `{list}`: `{mhz}` is not a number of MHz"))?;
            Ok((cpu, speeds.by_mhz(mhz).map_err(|e| e.to_string())?))
        })
        .collect()
}

/// One `--at` change.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Placement(Placement),
    Speed(Vec<(CpuId, StepIdx)>),
    Move(ComponentKind, CpuId),
    Crash(ComponentKind),
}

fn parse_time(t: &str) -> Result<Duration, String> {
    let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err(format!("`{t}` is not a time (like 300ms or 2s)"));
    };
    let v: f64 = num.parse().map_err(|_| format!("`{t}` is not a time (like 300ms or 2s)"))?;
    if !(v.is_finite() && v >= 0.0) {
        return Err(format!("`{t}` is not a time (like 300ms or 2s)"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

pub fn parse_at(s: &str, speeds: &SpeedTable) -> Result<(Duration, Change), String> {
    let (t, change) = s
        .split_once(':')
        .ok_or_else(|| format!("--at `{s}`: expected TIME:CHANGE, like 2s:placement=dynamic"))?;
    let at = parse_time(t).map_err(|e| format!("--at `{s}`: {e}"))?;
    let (what, value) =
        change.split_once('=').ok_or_else(|| format!("--at `{s}`: expected a CHANGE like placement=MODE"))?;
    let c = match what {
        "placement" => Change::Placement(parse_placement(value)?),
        "speed" => Change::Speed(parse_speeds(value, speeds)?),
        "move" => {
            let (k, cpu) = value.split_once('=').ok_or_else(|| format!("--at `{s}`: move=COMP=CPU"))?;
            Change::Move(
                k.parse()?,
                cpu.parse().map_err(|_| format!("--at `{s}`: `{cpu}` is not a CPU number"))?,
            )
        }
        "crash" => Change::Crash(crash_kinds(&[value.to_string()]).map_err(|e| e.0)?[0]),
        _ => {
            return Err(format!(
                "--at `{s}`: unknown change `{what}`; expected placement, speed, move or crash"
            ));
        }
    };
    Ok((at, c))
}

/// Everything about where the stack runs, checked before anything starts.
struct Plan {
    cpus: Vec<CpuId>,
    placement: Placement,
    speeds: Vec<(CpuId, StepIdx)>,
    at: Vec<(Duration, Change)>,
}

fn plan(args: &Args) -> Result<Plan, BadArgs> {
    let table = SpeedTable::newtos();
    let allowed = dyncore_runtime::affinity::allowed_cpus()
        .map_err(|e| BadArgs(format!("reading the CPUs this process may use: {e}")))?;
    let cpus: Vec<CpuId> = match &args.cpus {
        None => allowed.iter().collect(),
        Some(l) => {
            let set: dyncore_core::CpuSet = l.parse().map_err(|e| BadArgs(format!("--cpus {l}: {e}")))?;
            if set.is_empty() {
                return Err(BadArgs(format!("--cpus `{l}` names no CPU")));
            }
            set.iter().collect()
        }
    };
    let may_use = |cpu: CpuId, what: &str| {
        if allowed.contains(cpu) {
            Ok(())
        } else {
            Err(BadArgs(format!("{what}: CPU {cpu} is not one this process may use (it may use {allowed})")))
        }
    };
    let in_plan = |cpu: CpuId, what: &str| {
        may_use(cpu, what)?;
        if cpus.contains(&cpu) {
            Ok(())
        } else {
            Err(BadArgs(format!("{what}: CPU {cpu} is not one of the stack's CPUs {cpus:?} (--cpus)")))
        }
    };
    for &c in &cpus {
        may_use(c, "--cpus")?;
    }
    let placement = parse_placement(&args.placement).map_err(|e| BadArgs(format!("--placement: {e}")))?;
    for &(_, cpu) in &placement.moves {
        in_plan(cpu, "--placement")?;
    }
    let speeds = match &args.speed {
        None => Vec::new(),
        Some(l) => parse_speeds(l, &table).map_err(|e| BadArgs(format!("--speed: {e}")))?,
    };
    for &(cpu, _) in &speeds {
        in_plan(cpu, "--speed")?;
    }
    let mut at = Vec::new();
    for a in &args.at {
        let (t, c) = parse_at(a, &table).map_err(BadArgs)?;
        let what = format!("--at {a}");
        match &c {
            Change::Placement(p) => {
                for &(_, cpu) in &p.moves {
                    in_plan(cpu, &what)?;
                }
            }
            Change::Speed(v) => {
                for &(cpu, _) in v {
                    in_plan(cpu, &what)?;
                }
            }
            Change::Move(_, cpu) => in_plan(*cpu, &what)?,
            Change::Crash(_) => {}
        }
        at.push((t, c));
    }
    at.sort_by_key(|(t, _)| *t);
    if args.sample_ms == 0 {
        return Err(BadArgs("--sample-ms must be at least 1".into()));
    }
    Ok(Plan { cpus, placement, speeds, at })
}

const PORT: u16 = 5001;
const SEED: u64 = 0x57ac;

pub fn run(args: &Args) -> Result<()> {
    let rules: Vec<Rule> =
        args.filters.iter().map(|r| Rule::parse(r)).collect::<Result<_, _>>().map_err(BadArgs)?;
    let crash = crash_kinds(&args.crash)?;
    if !(576..=65535).contains(&args.mtu) {
        return Err(BadArgs(format!("--mtu {} is outside 576..=65535", args.mtu)).into());
    }
    let plan = plan(args)?;
    if args.wire == WireKind::Tun {
        tun::probe().map_err(|e| BadArgs(format!("--wire tun: {e}")))?;
    }
    let cancel = Arc::new(AtomicBool::new(false));
    {
        let c = cancel.clone();
        ctrlc::set_handler(move || c.store(true, Ordering::Release))
            .context("installing the Ctrl-C handler")?;
    }
    quiet_injected_crashes();
    say!("dyncore stack — {}", crate::bench::machine_description());
    say!("power: {}", PowerSources::probe().describe());
    say!(
        "runtime CPUs {:?} (pinned), placement {}, load samples every {} ms",
        plan.cpus,
        args.placement,
        args.sample_ms
    );
    let limit = Duration::from_secs(args.limit_s);
    match args.wire {
        WireKind::Mem => run_mem(args, &plan, rules, &crash, cancel, limit),
        WireKind::Tun => run_tun(args, &plan, rules, &crash, cancel, limit),
    }
}

fn stack_config(addr: std::net::Ipv4Addr, rules: Vec<Rule>, seed: u64) -> StackConfig {
    let mut c = StackConfig::new(addr);
    c.rules = rules;
    c.seed = seed;
    c
}

fn run_mem(
    args: &Args,
    plan: &Plan,
    rules: Vec<Rule>,
    crash: &[ComponentKind],
    cancel: Arc<AtomicBool>,
    limit: Duration,
) -> Result<()> {
    let (a, b) = (std::net::Ipv4Addr::new(10, 0, 0, 1), std::net::Ipv4Addr::new(10, 0, 0, 2));
    let (wa, wb) = mem::pair(MemWireConfig { mtu: args.mtu, ..MemWireConfig::default() });
    let mut stack = Stack::build(&stack_config(a, rules, 1), std::sync::Arc::new(wa));
    let sender = Sender::new(stack.sockets.remove(0), (b, PORT), args.bytes, SEED).cancel_on(cancel.clone());
    let mut others: Vec<Arc<dyn Blueprint>> = Vec::new();
    let mut apps: Vec<Box<dyn App>> = vec![Box::new(sender)];
    match args.peer {
        PeerKind::Split => {
            let mut peer = Stack::build(&stack_config(b, Vec::new(), 2), std::sync::Arc::new(wb));
            apps.push(Box::new(Receiver::new(peer.sockets.remove(0), PORT, None)));
            others.extend(peer.blueprints);
        }
        PeerKind::Mono => {
            let role = MonoRole::Receive { port: PORT, verify_seed: None };
            apps.push(Box::new(Mono::new(wb.port(), b, SocketConfig::default(), 2, role, 0)));
        }
    }
    say!(
        "streaming {} MiB from a split stack to a {} peer over the in-memory wire (MTU {})…",
        args.bytes >> 20,
        match args.peer {
            PeerKind::Split => "split",
            PeerKind::Mono => "monolithic",
        },
        args.mtu
    );
    let out = drive(args, plan, stack.blueprints, others, apps, crash, limit, &cancel)?;
    let got = received_by(&*out.threads.apps[1]);
    report(args, &out, &*out.threads.apps[0], got, &cancel)
}

fn run_tun(
    args: &Args,
    plan: &Plan,
    rules: Vec<Rule>,
    crash: &[ComponentKind],
    cancel: Arc<AtomicBool>,
    limit: Duration,
) -> Result<()> {
    let (net, port) = TunNet::create(args.mtu).map_err(|e| BadArgs(format!("--wire tun: {e}")))?;
    say!(
        "namespace {} with {} (Linux at {}, the stack at {})",
        net.namespace(),
        net.device(),
        tun::LINUX_ADDR,
        tun::STACK_ADDR
    );
    let peer_cancel = Arc::new(AtomicBool::new(false));
    let linux = linux_peer::receiver(&net, PORT, limit, peer_cancel.clone())?;
    let mut stack = Stack::build(&stack_config(tun::STACK_ADDR, rules, 1), Arc::new(port));
    let sender = Sender::new(stack.sockets.remove(0), (tun::LINUX_ADDR, PORT), args.bytes, SEED)
        .cancel_on(cancel.clone());
    say!("streaming {} MiB from the split stack to Linux TCP over TUN…", args.bytes >> 20);
    let out = drive(args, plan, stack.blueprints, Vec::new(), vec![Box::new(sender)], crash, limit, &cancel);
    peer_cancel.store(true, Ordering::Release);
    let got = linux.join().map_err(|_| anyhow::anyhow!("the Linux peer thread panicked"))?;
    let out = out?;
    let r = report(args, &out, &*out.threads.apps[0], got.map_err(|e| format!("Linux: {e}")), &cancel);
    drop(net);
    r
}

/// What the receiving end got, or why it failed.
type Received = std::result::Result<Digest, String>;

fn received_by(app: &dyn App) -> Received {
    match app.error() {
        Some(e) => Err(e.to_string()),
        None => Ok(app.report().digest),
    }
}

/// A finished run.
struct Outcome {
    /// The sending stack's components, in pipeline order.
    stack: Vec<Supervised>,
    /// Their figures and the CPUs' at the end.
    slots: Vec<SlotSnapshot>,
    cpus: Vec<CpuSnapshot>,
    ctl: Controller,
    threads: ThreadRun,
    wall_ns: u64,
    /// When each crash was injected (host clock).
    crashes_at: Vec<u64>,
}

/// Starts the controller and the host, runs the stream with the changes
/// of `--at` and the crashes of `--crash`, and takes everything back.
#[allow(clippy::too_many_arguments)]
fn drive(
    args: &Args,
    plan: &Plan,
    ours: Vec<Arc<dyn Blueprint>>,
    others: Vec<Arc<dyn Blueprint>>,
    apps: Vec<Box<dyn App>>,
    crash: &[ComponentKind],
    limit: Duration,
    cancel: &AtomicBool,
) -> Result<Outcome> {
    let speeds = SpeedTable::newtos();
    let cfg = PlacementConfig::new(plan.cpus.clone(), plan.placement.mode);
    let policy =
        PlacementPolicy::new(cfg, &ComponentKind::ALL, speeds).map_err(|e| BadArgs(e.to_string()))?;
    let mut ctl = Controller::new(policy);
    let layout = ctl.start(0);
    let mut hc = HostConfig::new(plan.cpus.clone());
    hc.pin = true;
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
    let t0 = Instant::now();
    let period = Duration::from_millis(args.sample_ms);
    let crash_every = Duration::from_millis(args.crash_every_ms.max(1));
    let mut next_crash = t0 + crash_every;
    let mut crashes = 0usize;
    let mut crashes_at = Vec::new();
    let mut pending = plan.at.iter().peekable();
    let _ = ctl.sample(&host, host.now_ns())?;
    while !threads.wait_apps(period) && t0.elapsed() < limit && !host.failed() {
        let now = host.now_ns();
        while let Some((_, c)) = pending.next_if(|(t, _)| t0.elapsed() >= *t) {
            say!("{:>9.3} s  --at: {c:?}", t0.elapsed().as_secs_f64());
            match c {
                Change::Placement(p) => {
                    ctl.control(&host, now, Control::SetMode { mode: p.mode })?;
                    for &(component, to) in &p.moves {
                        ctl.control(&host, now, Control::Migrate { component, to })?;
                    }
                }
                Change::Speed(v) => {
                    for &(cpu, step) in v {
                        ctl.control(&host, now, Control::SetSpeed { cpu, step })?;
                    }
                }
                Change::Move(component, to) => {
                    ctl.control(&host, now, Control::Migrate { component: *component, to: *to })?
                }
                Change::Crash(k) => {
                    host.crash(*k)?;
                    crashes_at.push(host.now_ns());
                }
            }
        }
        if !crash.is_empty() && !cancel.load(Ordering::Acquire) && Instant::now() >= next_crash {
            host.crash(crash[crashes % crash.len()])?;
            crashes_at.push(host.now_ns());
            crashes += 1;
            next_crash = Instant::now() + crash_every;
        }
        let _ = ctl.sample(&host, host.now_ns())?;
    }
    let wall_ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let slots = host.components();
    let cpus = host.cpus();
    let stack = host.stop();
    let threads = threads.stop();
    Ok(Outcome { stack, slots, cpus, ctl, threads, wall_ns, crashes_at })
}

fn report(
    args: &Args,
    out: &Outcome,
    sender: &dyn App,
    received: Received,
    cancel: &AtomicBool,
) -> Result<()> {
    let wall = out.wall_ns.max(1) as f64;
    let wall_s = wall / 1e9;
    let speeds = out.ctl.policy().speeds().clone();
    let mut t = Table::new(
        format!("The sending stack's components ({wall_s:.2} s on runtime CPUs)"),
        &["component", "cpu now", "busy", "messages", "MB", "moves", "restarts", "max restart"],
    );
    for (s, snap) in out.stack.iter().zip(&out.slots) {
        t.row(vec![
            s.kind().to_string(),
            snap.cpu.to_string(),
            format!("{:.1}%", 100.0 * s.load.busy_ns as f64 / wall),
            s.load.messages.to_string(),
            format!("{:.1}", s.load.bytes as f64 / 1e6),
            snap.moves.to_string(),
            s.load.restarts.to_string(),
            if s.load.restarts > 0 {
                format!("{:.1} µs", s.load.restart_ns_max as f64 / 1e3)
            } else {
                "–".into()
            },
        ]);
    }
    say!("\n{}", t.to_terminal());
    let mut t = Table::new(
        "Runtime CPUs (at the end of the run)",
        &[
            "cpu",
            "components",
            "speed",
            "ran",
            "busy",
            "throttled",
            "parks",
            "wake-ups",
            "per s",
            "mean cost",
            "max cost",
        ],
    );
    let layout = out.ctl.layout();
    for c in &out.cpus {
        let step = layout.step_of.get(&c.cpu).copied().unwrap_or(speeds.fastest());
        let names: Vec<&str> =
            layout.cpu_of.iter().filter(|(_, cpu)| **cpu == c.cpu).map(|(k, _)| k.name()).collect();
        t.row(vec![
            c.cpu.to_string(),
            if names.is_empty() { "– (gated)".into() } else { names.join("+") },
            format!("{} MHz ({}‰)", speeds.get(step).mhz, c.duty_per_mille),
            format!("{:.1}%", 100.0 * c.run_ns as f64 / wall),
            format!("{:.1}%", 100.0 * c.busy_ns as f64 / wall),
            format!("{:.1}%", 100.0 * c.throttled_ns as f64 / wall),
            c.parks.to_string(),
            c.wakeups.to_string(),
            format!("{:.0}", c.wakeups as f64 / wall_s),
            if c.wakeups > 0 {
                format!("{:.1} µs", c.wake_ns as f64 / c.wakeups as f64 / 1e3)
            } else {
                "–".into()
            },
            if c.wakeups > 0 { format!("{:.1} µs", c.wake_ns_max as f64 / 1e3) } else { "–".into() },
        ]);
    }
    say!("{}", t.to_terminal());
    let sent = sender.report();
    let (cpu_s, joules) = out.ctl.totals();
    let gb = sent.digest.bytes as f64 / 1e9;
    say!(
        "power: {:.2} W on average, {:.1} J/GB, {:.2} CPU-seconds — {MODELLED}",
        joules / wall_s,
        if gb > 0.0 { joules / gb } else { 0.0 },
        cpu_s
    );
    if let Some(dip) = crash_dip(out) {
        say!("{dip}");
    }
    say!("\nplacement decisions ({}):", out.ctl.log.len());
    for d in &out.ctl.log {
        say!("{:>9.3} ms  {}  — {}", d.at_ns as f64 / 1e6, d.action, d.reason);
    }
    if let Some(path) = &args.trace {
        write_trace(path, &out.ctl).with_context(|| format!("writing {}", path.display()))?;
        say!("trace: {} (open in ui.perfetto.dev)", path.display());
    }
    if cancel.load(Ordering::Acquire) {
        say!("interrupted: the stream was cut short and the connection closed");
    }
    if let Some(e) = sender.error() {
        anyhow::bail!("the sender failed: {e}");
    }
    let got = received.map_err(|e| anyhow::anyhow!("the receiver failed: {e}"))?;
    say!(
        "sent {}, received {}: {}",
        sent.digest,
        got,
        if got == sent.digest { "the stream checksums match" } else { "MISMATCH" }
    );
    if let Some(bps) = sent.bits_per_s() {
        say!("throughput: {:.2} Gbps (connection established to closed)", bps / 1e9);
    }
    anyhow::ensure!(got == sent.digest, "the receiver's stream differs from the sender's");
    anyhow::ensure!(sender.is_done(), "the stream did not finish within the time limit");
    Ok(())
}

/// The throughput dip of crashes: the bitrate of the sample window in
/// which each crash was injected against the median of the (up to) five
/// windows before it, so that a speed or placement change earlier in the
/// run does not count as a dip.
fn crash_dip(out: &Outcome) -> Option<String> {
    if out.crashes_at.is_empty() {
        return None;
    }
    let ws = &out.ctl.windows;
    let mut ratios: Vec<f64> = out
        .crashes_at
        .iter()
        .filter_map(|&t| {
            let i = ws.iter().position(|w| t > w.end_ns.saturating_sub(w.len_ns) && t <= w.end_ns)?;
            let mut before: Vec<f64> = ws[i.saturating_sub(5)..i].iter().map(|w| w.bits_per_s).collect();
            before.sort_by(f64::total_cmp);
            let m = *before.get(before.len() / 2)?;
            (m > 0.0).then(|| ws[i].bits_per_s / m)
        })
        .collect();
    let restart = out.stack.iter().map(|s| s.load.restart_ns_max).max().unwrap_or(0);
    let head =
        format!("crashes: {} injected; longest restart {:.1} µs", out.crashes_at.len(), restart as f64 / 1e3);
    if ratios.is_empty() {
        return Some(format!("{head}; no sample windows around them to compare"));
    }
    ratios.sort_by(f64::total_cmp);
    Some(format!(
        "{head}; a {}-ms sample window holding a crash carried {:+.1}% (median over {} crashes; range {:+.1}% to \
         {:+.1}%) against the median of the five windows before it",
        ws[0].len_ns / 1_000_000,
        (ratios[ratios.len() / 2] - 1.0) * 100.0,
        ratios.len(),
        (ratios[0] - 1.0) * 100.0,
        (ratios[ratios.len() - 1] - 1.0) * 100.0
    ))
}

/// The run as a Chrome trace: counters (throughput, CPUs in use, modelled
/// watts) per sample window, and every placement decision as an instant
/// with its reason.
fn write_trace(path: &std::path::Path, ctl: &Controller) -> Result<()> {
    use serde_json::json;
    let us = |ns: u64| ns as f64 / 1e3;
    let mut ev =
        vec![json!({"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "dyncore stack"}})];
    ev.push(json!({"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "placement decisions"}}));
    for w in &ctl.windows {
        let ts = us(w.end_ns);
        ev.push(json!({"name": "throughput (Gbps)", "ph": "C", "pid": 1, "ts": ts, "args": {"Gbps": w.bits_per_s / 1e9}}));
        ev.push(
            json!({"name": "CPUs in use", "ph": "C", "pid": 1, "ts": ts, "args": {"cpus": w.cpus_in_use}}),
        );
        ev.push(json!({"name": "power (W, modelled)", "ph": "C", "pid": 1, "ts": ts,
            "args": {"W": w.joules / (w.len_ns.max(1) as f64 / 1e9)}}));
    }
    for d in &ctl.log {
        ev.push(json!({"name": d.action.to_string(), "ph": "i", "s": "t", "pid": 1, "tid": 1,
            "ts": us(d.at_ns), "args": {"reason": d.reason}}));
    }
    let doc = json!({"traceEvents": ev, "displayTimeUnit": "ms"});
    std::fs::write(path, serde_json::to_vec(&doc)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_components_are_checked() {
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("2M"), Ok(2 << 20));
        assert_eq!(parse_size("17"), Ok(17));
        assert!(parse_size("0").is_err() && parse_size("x").is_err() && parse_size("99999999999G").is_err());
        assert_eq!(
            crash_kinds(&["ip".into(), "driver".into()]).unwrap(),
            [ComponentKind::Ip, ComponentKind::Driver]
        );
        assert!(crash_kinds(&["tcp".into()]).unwrap_err().0.contains("cannot be restarted"));
        assert!(crash_kinds(&["nic".into()]).unwrap_err().0.contains("unknown component `nic`"));
    }

    #[test]
    fn placements_speeds_and_changes_parse_or_say_why() {
        let t = SpeedTable::newtos();
        assert_eq!(parse_placement("dynamic").unwrap().mode, Mode::Dynamic);
        assert_eq!(
            parse_placement("efficient:2.5").unwrap().mode,
            Mode::Efficient { target_bits_per_s: 2.5e9 }
        );
        let m = parse_placement("manual:tcp=1,ip=0").unwrap();
        assert_eq!((m.mode, m.moves), (Mode::Manual, vec![(ComponentKind::Tcp, 1), (ComponentKind::Ip, 0)]));
        assert!(parse_placement("efficient:-1").unwrap_err().contains("positive"));
        assert!(parse_placement("manual:tcp").unwrap_err().contains("is not COMP=CPU"));
        assert!(parse_placement("manual:nic=0").unwrap_err().contains("unknown component `nic`"));
        assert_eq!(parse_speeds("0=2267,3=200", &t).unwrap(), [(0, StepIdx(0)), (3, StepIdx(9))]);
        assert!(parse_speeds("0=1500", &t).unwrap_err().contains("no speed step of 1500 MHz"));
        assert_eq!(
            parse_at("2s:crash=ip", &t).unwrap(),
            (Duration::from_secs(2), Change::Crash(ComponentKind::Ip))
        );
        assert_eq!(
            parse_at("300ms:move=tcp=1", &t).unwrap(),
            (Duration::from_millis(300), Change::Move(ComponentKind::Tcp, 1))
        );
        assert_eq!(parse_at("1.5s:speed=1=600", &t).unwrap().1, Change::Speed(vec![(1, StepIdx(7))]));
        assert!(parse_at("1s:wobble=3", &t).unwrap_err().contains("unknown change `wobble`"));
        assert!(parse_at("1s", &t).unwrap_err().contains("expected TIME:CHANGE"));
    }
}
