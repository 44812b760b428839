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
//! Crashes (`--crash`, `crash=` in `--at`, and the fault campaign of
//! `--faults`) drop a component whole and build a new instance in fresh
//! memory; live updates (`update=` in `--at`) replace one between two of
//! its messages; the report says, per component, its restart and update
//! times, per connection what it carried and what a TCP reset lost, and
//! for a campaign the frame audit at rest.
//!
//! Bad input (an unknown component, a CPU the process may not use, a speed
//! step that does not exist, a filter rule that does not parse, a TUN wire
//! without the privilege) is refused before anything starts, with exit
//! status 2: among them a `--filter` that drops the stream's own packets,
//! which would stall it. SIGINT (Ctrl-C), SIGTERM and SIGHUP end the stream
//! early alike: the connections close cleanly, the report covers what ran,
//! the TUN wire's namespace is removed, and the exit status is 128 + the
//! signal (130, 143, 129). A run on the TUN wire first removes the
//! namespaces that killed runs left (`dyncore-<pid>-<n>` of a pid that is
//! gone) and says which.
//!
//! * `args.rs`: the arguments and their checks;
//! * `drive.rs`: the run (host, controller, changes, crashes, campaign);
//! * `report.rs`: the tables, power, the crash dip, the trace;
//! * `verdict.rs`: connections, the campaign, the frame audit, the exit status.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use dyncore_core::placement::ComponentKind;
use dyncore_net::app::{App, Receiver, Sender};
use dyncore_net::filter::{Direction, Header, Rule, Verdict};
use dyncore_net::host::quiet_injected_crashes;
use dyncore_net::mono::{Mono, MonoRole};
use dyncore_net::power::PowerSources;
use dyncore_net::stack::{Stack, StackConfig};
use dyncore_net::tcp::SocketConfig;
use dyncore_net::wire::linux_peer;
use dyncore_net::wire::mem::{self, MemWireConfig};
use dyncore_net::wire::tun::{self, TunNet};

mod args;
mod drive;
#[cfg(test)]
mod hostile;
mod report;
mod verdict;

pub use args::{Args, BadArgs, PeerKind, WireKind};
use args::{Plan, TcpCrash, crash_kinds, plan};
pub(crate) use args::{parse_size, whole};
use drive::{Ends, Flags, drive};
use verdict::{Peer, bytes_sent, verdict};

const PORT: u16 = 5001;
const SEED: u64 = 0x57ac;

pub fn run(args: &Args) -> Result<()> {
    if let Some(t) = &args.trace {
        dyncore_report::outdir::check_writable("--trace", t).map_err(BadArgs)?;
    }
    let rules: Vec<Rule> =
        args.filters.iter().map(|r| Rule::parse(r)).collect::<Result<_, _>>().map_err(BadArgs)?;
    let crash = crash_kinds(&args.crash)?;
    let plan = plan(args)?;
    let (ours, peer) = match args.wire {
        WireKind::Mem => (MEM_ADDRS.0, MEM_ADDRS.1),
        WireKind::Tun => (tun::STACK_ADDR, tun::LINUX_ADDR),
    };
    stream_passes(&rules, ours, peer, plan.streams)?;
    if args.wire == WireKind::Tun {
        tun::probe().map_err(|e| BadArgs(format!("--wire tun: {e}")))?;
    }
    let flags = Flags { stop: Arc::new(AtomicBool::new(false)), signal: Arc::new(AtomicI32::new(0)) };
    let signals = dyncore_runtime::arbiter::Signals::install().context("installing the signal handlers")?;
    let watch = watch_signals(&signals, &flags);
    quiet_injected_crashes();
    say!("dyncore stack — {}", crate::machine_description());
    say!("power: {}", PowerSources::probe().describe());
    say!(
        "runtime CPUs {:?} (pinned), placement {}, load samples every {} ms",
        plan.cpus,
        args.placement,
        args.sample_ms
    );
    if let Some(n) = args.faults {
        say!(
            "fault campaign: {n} crashes at random components, times and points, with live updates and moves \
             among them (seed {}, a fault every {} µs on average), while {} streams flow; then they close",
            args.campaign_seed(),
            args.fault_gap_us(),
            plan.streams
        );
    }
    let limit = Duration::from_secs(args.limit_s);
    let r = match args.wire {
        WireKind::Mem => run_mem(args, &plan, rules, &crash, &flags, limit),
        WireKind::Tun => run_tun(args, &plan, rules, &crash, &flags, limit),
    };
    watch.store(true, Ordering::Release);
    drop(signals);
    r
}

/// The in-memory wire's addresses: the stack's and its peer's.
const MEM_ADDRS: (Ipv4Addr, Ipv4Addr) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));

/// Refuses filter rules that drop the stream's own packets (its first
/// connections' segments out, or their ACKs in): the stream would stall
/// until `--limit-s`.
fn stream_passes(rules: &[Rule], ours: Ipv4Addr, peer: Ipv4Addr, streams: usize) -> Result<(), BadArgs> {
    let first = dyncore_net::tcp::first_ephemeral_port(1);
    for i in 0..streams as u16 {
        let (local, remote) = (first + i, PORT + i);
        let out = Header { src: ours, dst: peer, ports: Some((local, remote)) };
        let back = Header { src: peer, dst: ours, ports: Some((remote, local)) };
        for (dir, h, what) in [(Direction::Out, out, "segments"), (Direction::In, back, "ACKs")] {
            if let Some(r) = rules.iter().find(|r| r.matches(dir, &h)).filter(|r| r.verdict == Verdict::Deny)
            {
                let (s, d) = h.ports.expect("TCP");
                return Err(BadArgs(format!(
                    "--filter `{}` drops the stream: it matches the {what} of connection {i} ({}:{s} → {}:{d}), \
                     which would never arrive; allow them first (e.g. --filter \"allow tcp dport {remote}\" \
                     --filter \"allow tcp sport {remote}\" before it)",
                    r.text, h.src, h.dst
                )));
            }
        }
    }
    Ok(())
}

/// Passes a signal on to the run's flags: a thread that looks every 5 ms
/// until the returned flag is set.
fn watch_signals(signals: &dyncore_runtime::arbiter::Signals, flags: &Flags) -> Arc<AtomicBool> {
    let done = Arc::new(AtomicBool::new(false));
    let (stop, signal, got) = (flags.stop.clone(), flags.signal.clone(), signals.stop_flag());
    let received = signals.signal_flag();
    let d = done.clone();
    std::thread::spawn(move || {
        while !d.load(Ordering::Acquire) {
            if got.load(Ordering::Acquire) {
                signal.store(received.load(Ordering::Acquire), Ordering::Release);
                stop.store(true, Ordering::Release);
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    done
}

/// A stack's configuration; `tcp_crash` for the stack under test (the
/// split peer's TCP never crashes: it resets, and checkpoints nothing).
fn stack_config(
    addr: std::net::Ipv4Addr,
    rules: Vec<Rule>,
    seed: u64,
    sockets: usize,
    tcp_crash: Option<TcpCrash>,
) -> StackConfig {
    let mut c = StackConfig::new(addr);
    c.rules = rules;
    c.seed = seed;
    c.sockets = sockets;
    c.tcp_crash = tcp_crash.map_or(Default::default(), TcpCrash::net);
    c
}

fn run_mem(
    args: &Args,
    plan: &Plan,
    rules: Vec<Rule>,
    crash: &[ComponentKind],
    flags: &Flags,
    limit: Duration,
) -> Result<()> {
    let (a, b) = MEM_ADDRS;
    let (wa, wb) = mem::pair(MemWireConfig { mtu: args.mtu as usize, ..MemWireConfig::default() });
    let n = plan.streams;
    let mut stack = Stack::build(&stack_config(a, rules, 1, n, Some(args.tcp_crash)), Arc::new(wa));
    // In a campaign the streams run until its faults are done.
    let bytes = if args.faults.is_some() { 1 << 50 } else { args.bytes };
    let mut apps: Vec<Box<dyn App>> = Vec::new();
    let mut progress = Vec::new();
    for (i, sock) in stack.sockets.drain(..).enumerate() {
        let s = Sender::new(sock, (b, PORT + i as u16), bytes, SEED + i as u64).cancel_on(flags.stop.clone());
        progress.push(s.progress());
        apps.push(Box::new(if plan.tcp_may_crash { s.reconnect() } else { s }));
    }
    let mut others = Vec::new();
    let peer = match args.peer.unwrap_or(PeerKind::Split) {
        PeerKind::Split => {
            let mut peer = Stack::build(&stack_config(b, Vec::new(), 2, n, None), Arc::new(wb));
            for ((i, sock), p) in peer.sockets.drain(..).enumerate().zip(progress) {
                // When TCP may reset connections, every byte is checked, so
                // that a reset connection's prefix can be said intact.
                let verify = plan.tcp_may_crash.then_some(SEED + i as u64);
                let r = Receiver::new(sock, PORT + i as u16, verify);
                apps.push(Box::new(if plan.tcp_may_crash { r.reconnect().until_done(p) } else { r }));
            }
            others.extend(peer.blueprints);
            Peer::Split { streams: n, tcp: stack.tcp_facts.clone() }
        }
        PeerKind::Mono => {
            let role = MonoRole::Receive { port: PORT, verify_seed: None };
            apps.push(Box::new(Mono::new(wb.port(), b, SocketConfig::default(), 2, role, 0)));
            Peer::Mono
        }
    };
    say!(
        "streaming {} from a split stack to a {} peer over the in-memory wire (MTU {}), {n} connection{}…",
        if args.faults.is_some() {
            "until the campaign is done".to_string()
        } else {
            format!("{} MiB", bytes >> 20)
        },
        match args.peer.unwrap_or(PeerKind::Split) {
            PeerKind::Split => "split",
            PeerKind::Mono => "monolithic",
        },
        args.mtu,
        if n == 1 { "" } else { "s" }
    );
    let out = drive(args, plan, Ends { ours: stack.blueprints, others, apps }, crash, limit, flags)?;
    report::tables(args, &out, bytes_sent(&out.threads.apps, n))?;
    verdict(&out, peer, flags)
}

fn run_tun(
    args: &Args,
    plan: &Plan,
    rules: Vec<Rule>,
    crash: &[ComponentKind],
    flags: &Flags,
    limit: Duration,
) -> Result<()> {
    let (net, end) = TunNet::create(args.mtu as usize).map_err(|e| BadArgs(format!("--wire tun: {e}")))?;
    for ns in net.swept() {
        say!("removed network namespace {ns}, left by a run that was killed (its process is gone)");
    }
    say!(
        "namespace {} with {} (Linux at {}, the stack at {})",
        net.namespace(),
        net.device(),
        tun::LINUX_ADDR,
        tun::STACK_ADDR
    );
    let peer_cancel = Arc::new(AtomicBool::new(false));
    let linux = linux_peer::receiver(&net, PORT, limit, peer_cancel.clone())?;
    let mut stack =
        Stack::build(&stack_config(tun::STACK_ADDR, rules, 1, 1, Some(args.tcp_crash)), Arc::new(end));
    let sender = Sender::new(stack.sockets.remove(0), (tun::LINUX_ADDR, PORT), args.bytes, SEED)
        .cancel_on(flags.stop.clone());
    say!("streaming {} MiB from the split stack to Linux TCP over TUN…", args.bytes >> 20);
    let ends = Ends { ours: stack.blueprints, others: Vec::new(), apps: vec![Box::new(sender)] };
    let out = drive(args, plan, ends, crash, limit, flags);
    peer_cancel.store(true, Ordering::Release);
    let got = linux.join().map_err(|_| anyhow::anyhow!("the Linux peer thread panicked"))?;
    let out = out?;
    report::tables(args, &out, bytes_sent(&out.threads.apps, 1))?;
    let r = verdict(&out, Peer::Linux(got.map_err(|e| e.to_string())), flags);
    drop(net);
    r
}
