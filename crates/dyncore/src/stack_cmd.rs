//! `dyncore stack`: a real TCP stream carried by the split network stack
//! (dyncore-net), with each component's utilisation, wake-ups and restarts.
//!
//! The stack's components run on plain threads, one each, for now; hosting
//! them on runtime CPUs, placed and slowed by the placement policy (the
//! `--placement` and `--speed` options), comes with phase B of issue 10.
//!
//! Bad input (an unknown component, a filter rule that does not parse, a
//! component that cannot be restarted, a TUN wire without the privilege)
//! is refused before anything starts, with exit status 2. Ctrl-C ends the
//! stream early, closing the connection cleanly, and removes the TUN wire's
//! namespace.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use dyncore_core::power::MODELLED;
use dyncore_net::app::{App, Receiver, Sender};
use dyncore_net::component::{Component, ComponentKind, CrashSwitch};
use dyncore_net::filter::Rule;
use dyncore_net::host::{ThreadRun, Threads, quiet_injected_crashes};
use dyncore_net::mono::{Mono, MonoRole};
use dyncore_net::power::PowerSources;
use dyncore_net::stack::{Stack, StackConfig};
use dyncore_net::stream::Digest;
use dyncore_net::tcp::SocketConfig;
use dyncore_net::wire::mem::{self, MemWireConfig};
use dyncore_net::wire::tun::{self, TunNet};
use dyncore_net::wire::{WirePort, linux_peer};

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

const PORT: u16 = 5001;
const SEED: u64 = 0x57ac;

pub fn run(args: &Args) -> Result<()> {
    let rules: Vec<Rule> =
        args.filters.iter().map(|r| Rule::parse(r)).collect::<Result<_, _>>().map_err(BadArgs)?;
    let crash = crash_kinds(&args.crash)?;
    if !(576..=65535).contains(&args.mtu) {
        return Err(BadArgs(format!("--mtu {} is outside 576..=65535", args.mtu)).into());
    }
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
    let limit = Duration::from_secs(args.limit_s);
    match args.wire {
        WireKind::Mem => run_mem(args, rules, &crash, cancel, limit),
        WireKind::Tun => run_tun(args, rules, &crash, cancel, limit),
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
    rules: Vec<Rule>,
    crash: &[ComponentKind],
    cancel: Arc<AtomicBool>,
    limit: Duration,
) -> Result<()> {
    let (a, b) = (std::net::Ipv4Addr::new(10, 0, 0, 1), std::net::Ipv4Addr::new(10, 0, 0, 2));
    let (wa, wb) = mem::pair(MemWireConfig { mtu: args.mtu, ..MemWireConfig::default() });
    let mut stack = Stack::build(&stack_config(a, rules, 1), Box::new(wa), 0);
    let sender = Sender::new(stack.sockets.remove(0), (b, PORT), args.bytes, SEED).cancel_on(cancel.clone());
    let mut comps = stack.components;
    let ours = comps.len();
    let mut apps: Vec<Box<dyn App>> = vec![Box::new(sender)];
    match args.peer {
        PeerKind::Split => {
            let mut peer = Stack::build(&stack_config(b, Vec::new(), 2), Box::new(wb), 0);
            apps.push(Box::new(Receiver::new(peer.sockets.remove(0), PORT, None)));
            comps.extend(peer.components);
        }
        PeerKind::Mono => {
            let role = MonoRole::Receive { port: PORT, verify_seed: None };
            apps.push(Box::new(Mono::new(Box::new(wb), b, SocketConfig::default(), 2, role, 0)));
        }
    }
    say!(
        "streaming {} MiB from a split stack to a {} peer over the in-memory wire (MTU {}), a thread per component…",
        args.bytes >> 20,
        match args.peer {
            PeerKind::Split => "split",
            PeerKind::Mono => "monolithic",
        },
        args.mtu
    );
    let run = run_with_crashes(comps, apps, crash, args.crash_every_ms, limit, &cancel);
    report(&run, ours, &*run.apps[0], received_by(&*run.apps[1]), &cancel)
}

fn run_tun(
    args: &Args,
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
    let port: Box<dyn WirePort> = Box::new(port);
    let mut stack = Stack::build(&stack_config(tun::STACK_ADDR, rules, 1), port, 0);
    let sender = Sender::new(stack.sockets.remove(0), (tun::LINUX_ADDR, PORT), args.bytes, SEED)
        .cancel_on(cancel.clone());
    say!(
        "streaming {} MiB from the split stack to Linux TCP over TUN, a thread per component…",
        args.bytes >> 20
    );
    let ours = stack.components.len();
    let run = run_with_crashes(
        stack.components,
        vec![Box::new(sender)],
        crash,
        args.crash_every_ms,
        limit,
        &cancel,
    );
    peer_cancel.store(true, Ordering::Release);
    let got = linux.join().map_err(|_| anyhow::anyhow!("the Linux peer thread panicked"))?;
    let r = report(&run, ours, &*run.apps[0], got.map_err(|e| format!("Linux: {e}")), &cancel);
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

fn run_with_crashes(
    comps: Vec<Box<dyn Component>>,
    apps: Vec<Box<dyn App>>,
    crash: &[ComponentKind],
    every_ms: u64,
    limit: Duration,
    cancel: &AtomicBool,
) -> ThreadRun {
    // Only the sending stack's components (the first five) are crashed.
    let switches: Vec<Arc<CrashSwitch>> = comps
        .iter()
        .take(5)
        .filter(|c| crash.contains(&c.kind()))
        .map(|c| c.crash_switch().clone())
        .collect();
    let host = Threads::start(comps, apps);
    let step = Duration::from_millis(every_ms.max(1));
    let deadline = std::time::Instant::now() + limit;
    let mut i = 0;
    while !host.wait_apps(step) && std::time::Instant::now() < deadline {
        if !switches.is_empty() && !cancel.load(Ordering::Acquire) {
            switches[i % switches.len()].arm();
            i += 1;
        }
    }
    host.stop()
}

fn report(
    run: &ThreadRun,
    ours: usize,
    sender: &dyn App,
    received: Received,
    cancel: &AtomicBool,
) -> Result<()> {
    let wall_s = run.wall_ns as f64 / 1e9;
    let mut t = Table::new(
        format!("The sending stack's components ({wall_s:.2} s, a thread each)"),
        &["component", "busy", "messages", "MB", "parks", "wake-ups", "restarts", "max restart"],
    );
    for s in run.components.iter().take(ours) {
        let c = &s.component;
        t.row(vec![
            c.kind().to_string(),
            format!("{:.1}%", 100.0 * s.load.busy_ns as f64 / run.wall_ns.max(1) as f64),
            s.load.messages.to_string(),
            format!("{:.1}", s.load.bytes as f64 / 1e6),
            s.load.parks.to_string(),
            c.bell().wakeups().to_string(),
            s.load.restarts.to_string(),
            if s.load.restarts > 0 {
                format!("{:.1} µs", s.load.restart_ns_max as f64 / 1e3)
            } else {
                "–".into()
            },
        ]);
    }
    say!("\n{}", t.to_terminal());
    say!(
        "power per core: reported once components run on runtime CPUs at speed steps (phase B); it will be {MODELLED}"
    );
    let sent = sender.report();
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
}
