//! `dyncore stack`'s arguments: what they mean, how they parse, and the
//! checks that refuse bad input (exit status 2) before anything starts.
// The arguments' doc comments are their `--help` text, in the command
// line's notation (`efficient[:GBPS]`, `update=COMP[@VERSION]`), not links.
#![allow(rustdoc::broken_intra_doc_links)]

use std::time::Duration;

use dyncore_core::CpuId;
use dyncore_core::placement::{ComponentKind, Mode};
use dyncore_core::power::{SpeedTable, StepIdx};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WireKind {
    /// An in-memory wire to a peer stack in this process (no privileges).
    Mem,
    /// A TUN device to the Linux kernel's TCP in a network namespace (root).
    Tun,
}

/// What a TCP crash does to the connections TCP held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TcpCrash {
    /// Reset them: every call in flight gets an error, the peers reset
    /// their side, new connections work at once.
    Reset,
    /// Resume them from TCP's checkpoints: the applications and the peers
    /// see only a delay.
    Recover,
}

impl TcpCrash {
    /// The network stack's setting.
    pub fn net(self) -> dyncore_net::tcp_recover::TcpCrash {
        match self {
            TcpCrash::Reset => dyncore_net::tcp_recover::TcpCrash::Reset,
            TcpCrash::Recover => dyncore_net::tcp_recover::TcpCrash::Recover,
        }
    }
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
    #[arg(long, value_enum, default_value_t = WireKind::Mem, allow_hyphen_values = true)]
    pub wire: WireKind,
    /// The stack at the other end of the in-memory wire (default: split;
    /// over TUN the peer is Linux's own stack, and --peer is refused).
    #[arg(long, value_enum, allow_hyphen_values = true)]
    pub peer: Option<PeerKind>,
    /// Bytes to stream (suffixes K, M, G: powers of 1024).
    #[arg(long, default_value = "256M", value_parser = parse_size, allow_hyphen_values = true)]
    pub bytes: u64,
    /// IP MTU of the wire, 576 to 65535 bytes.
    #[arg(long, default_value_t = 1500, value_parser = whole::<576, 65535>, allow_hyphen_values = true)]
    pub mtu: u64,
    /// Real CPUs for the stack's runtime CPUs, one each, pinned (a list like 0-3,6; default: every CPU the process may use).
    #[arg(long, allow_hyphen_values = true)]
    pub cpus: Option<String>,
    /// Where the components run: spread | consolidate | efficient[:GBPS] | dynamic | manual:COMP=CPU,... (see below).
    #[arg(long, default_value = "spread", allow_hyphen_values = true)]
    pub placement: String,
    /// CPU speeds, CPU=MHZ,... with MHz one of NewtOS's steps: 2267, 1867, 1600, then 1400 … 200 (switches the policy to manual).
    #[arg(long, allow_hyphen_values = true)]
    pub speed: Option<String>,
    /// A change while the stream flows: TIME:CHANGE, TIME like 300ms or 2s, CHANGE one of placement=MODE, speed=CPU=MHZ,..., move=COMP=CPU, crash=COMP, update=COMP[@VERSION] (repeatable).
    #[arg(long = "at", allow_hyphen_values = true)]
    pub at: Vec<String>,
    /// Concurrent connections from the stack to its peer, each a stream of --bytes (split peer on the in-memory wire only).
    #[arg(long, default_value_t = 1, value_parser = whole::<1, MAX_STREAMS>, allow_hyphen_values = true)]
    pub streams: u64,
    /// What a TCP crash does to the connections TCP held: reset (each application gets an error and opens a new connection; the peer resets its side; the stack stays up) or recover (resume them from TCP's checkpoints: the applications and the peer see only a delay).
    #[arg(long, value_enum, default_value_t = TcpCrash::Reset, allow_hyphen_values = true)]
    pub tcp_crash: TcpCrash,
    /// A fault campaign: crash N times, at random components, times and points of their step, with live updates and moves among them, while the streams flow (4 unless --streams says otherwise); then close the streams and report what was lost.
    #[arg(long, value_parser = whole::<1, {u64::MAX}>, allow_hyphen_values = true)]
    pub faults: Option<u64>,
    /// The fault campaign's seed (default 1; only with --faults).
    #[arg(long, value_parser = whole::<0, {u64::MAX}>, allow_hyphen_values = true)]
    pub seed: Option<u64>,
    /// Mean time between two faults of the campaign, 1 µs to 60 s in microseconds (default 1000; only with --faults).
    #[arg(long, value_parser = whole::<1, 60_000_000>, allow_hyphen_values = true)]
    pub fault_gap_us: Option<u64>,
    /// Milliseconds between the controller's load samples, 1 to 60000.
    #[arg(long, default_value_t = 10, value_parser = whole::<1, 60_000>, allow_hyphen_values = true)]
    pub sample_ms: u64,
    /// Write the run (throughput, CPUs in use, every decision with its reason) as a Chrome trace for ui.perfetto.dev.
    #[arg(long, allow_hyphen_values = true)]
    pub trace: Option<std::path::PathBuf>,
    /// A packet-filter rule for the sending stack, e.g. "deny in tcp dport 23" (repeatable; first match wins).
    #[arg(long = "filter", allow_hyphen_values = true)]
    pub filters: Vec<String>,
    /// Crash this component of the sending stack repeatedly while the stream flows (syscall, tcp, ip, filter, driver; repeatable; a TCP crash resets the connections it held).
    #[arg(long = "crash", allow_hyphen_values = true)]
    pub crash: Vec<String>,
    /// Milliseconds between injected crashes, 1 to 3600000 (default 10; only with --crash).
    #[arg(long, value_parser = whole::<1, 3_600_000>, allow_hyphen_values = true)]
    pub crash_every_ms: Option<u64>,
    /// Give up after this many seconds, 1 to 86400 (a day).
    #[arg(long, default_value_t = 120, value_parser = whole::<1, MAX_SECONDS>, allow_hyphen_values = true)]
    pub limit_s: u64,
}

const PLACEMENT_HELP: &str = "\
Placement (--placement, and placement= in --at):
  spread           every component on its own CPU at full speed; with fewer CPUs than
                   components (five: syscall, tcp, ip, filter, driver) they share the CPUs,
                   balanced by their measured work
  consolidate      everything on the first CPU at full speed
  efficient[:GBPS] the fewest and slowest cores that hold GBPS (default 1), found by halving:
                   it starts on one core halfway through its duty steps (1000 MHz), then tries
                   the step halfway between the slowest known to hold and the fastest known to
                   miss (at most 3 changes, 60 ms, over the 8 duty steps), adding a core when
                   no duty step holds
  dynamic          consolidated while the load is light, spread as soon as a burst shows (the
                   shared CPU busy, channels filling, a component behind), consolidated again
                   after the load stays light for several samples (hysteresis)
  manual:COMP=CPU,...  start spread, then move the named components; nothing moves by itself

Speed (--speed, and speed= in --at): CPU=MHZ,... where MHZ is a NewtOS step: 2267, 1867 or
  1600 MHz (chip-wide frequencies), or 1400, 1200, ..., 200 MHz (per-core duty cycles of
  12.5% of 1600 MHz). A runtime CPU runs a step as a duty cycle of its capacity (200 MHz is
  88 per mille of a 2267 MHz core). Setting a speed by hand switches the policy to manual.

Crashes (--crash, crash= in --at, --faults): the crashed component is dropped whole and a new
  instance built in fresh memory from what outlives it (its channels and pools at their committed
  positions, its journal); nothing it was handling is lost or handled twice. A TCP crash resets the
  connections TCP held (--tcp-crash reset): each application's call in flight fails with \"connection
  reset\", the application opens a new connection and sends the rest of its bytes there, the peer resets
  its side. With --tcp-crash recover, TCP checkpoints every connection (smoltcp's socket state,
  the buffered bytes, the call in flight) with each poll's commit, and a restarted TCP resumes them:
  the applications see a delay, the peer a delay and maybe retransmissions; the report says per
  connection how many TCP crashes it survived.

Live update (update=COMP[@VERSION] in --at): the component is replaced between two of its messages
  by a new instance, of VERSION if given (the filter has versions 1 and 2: version 2 also counts the
  packets no rule matched, starting from version 1's counts), its state handed over; TCP cannot be
  updated (its state is smoltcp's).

Power is modelled (fitted to NewtOS Table 2) unless RAPL is found, and is labelled so.";

/// Most connections (`--streams`): each is a socket of both stacks.
pub const MAX_STREAMS: u64 = 64;
/// The longest time a run may be given (`--limit-s`, a time of `--at`): a
/// day.
pub const MAX_SECONDS: u64 = 86_400;

/// A whole number from `LO` to `HI`, refused in our words otherwise.
pub(crate) fn whole<const LO: u64, const HI: u64>(s: &str) -> Result<u64, String> {
    let range =
        if HI == u64::MAX && LO > 0 { format!("of at least {LO}") } else { format!("from {LO} to {HI}") };
    let t = s.trim();
    match t.parse::<u64>() {
        Ok(n) if (LO..=HI).contains(&n) => Ok(n),
        Ok(_) => Err(format!("expected a whole number {range}; found {t}")),
        Err(_) if !t.is_empty() && t.trim_start_matches(['-', '+']).bytes().all(|b| b.is_ascii_digit()) => {
            Err(format!("expected a whole number {range}; found {t}, which is out of range"))
        }
        Err(_) => Err(format!("expected a whole number {range}; found `{t}`")),
    }
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

pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
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
pub(super) fn crash_kinds(names: &[String]) -> Result<Vec<ComponentKind>, BadArgs> {
    names.iter().map(|n| n.parse().map_err(BadArgs)).collect()
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
        if !(0.001..=1000.0).contains(&gbps) {
            return Err(format!("efficient:{g}: the target must be 0.001 to 1000 Gbps"));
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
            .collect::<Result<Vec<_>, String>>()?;
        for (i, (k, cpu)) in moves.iter().enumerate() {
            if let Some((_, other)) = moves[..i].iter().find(|(o, _)| o == k) {
                return Err(format!(
                    "manual:{list}: {k} is placed twice (on CPU {other} and CPU {cpu}); a component runs on one CPU"
                ));
            }
        }
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

/// A `--speed` value: CPU → step. As in a scenario file, the steps share
/// one chip frequency (2267, 1867 or 1600 MHz; every duty step below 1600
/// MHz throttles a chip at 1600), and a CPU is named once.
pub fn parse_speeds(list: &str, speeds: &SpeedTable) -> Result<Vec<(CpuId, StepIdx)>, String> {
    let v: Vec<(CpuId, StepIdx)> = pairs(list, "CPU=MHZ")?
        .into_iter()
        .map(|(cpu, mhz)| {
            let cpu: CpuId =
                cpu.parse().map_err(|_| format!("speed `{list}`: `{cpu}` is not a CPU number"))?;
            let mhz: u32 =
                mhz.parse().map_err(|_| format!("speed `{list}`: `{mhz}` is not a number of MHz"))?;
            Ok((cpu, speeds.by_mhz(mhz).map_err(|e| format!("speed `{list}`: {e}"))?))
        })
        .collect::<Result<_, String>>()?;
    for (i, &(cpu, step)) in v.iter().enumerate() {
        if v[..i].iter().any(|&(c, _)| c == cpu) {
            return Err(format!("speed `{list}`: CPU {cpu} is given two speeds"));
        }
        let (first, s0) = v[0];
        let (chip, chip0) = (speeds.get(step).chip_mhz, speeds.get(s0).chip_mhz);
        if chip != chip0 {
            return Err(format!(
                "speed `{list}`: the chip runs at one frequency: CPU {first} at {} MHz needs it at {chip0} MHz, \
                 CPU {cpu} at {} MHz needs {chip} MHz (below 1600 MHz a core is throttled from a chip at 1600)",
                speeds.get(s0).mhz,
                speeds.get(step).mhz
            ));
        }
    }
    Ok(v)
}

/// One `--at` change.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    Placement(Placement),
    Speed(Vec<(CpuId, StepIdx)>),
    Move(ComponentKind, CpuId),
    Crash(ComponentKind),
    /// A live update to a version (`None`: the same).
    Update(ComponentKind, Option<u32>),
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
    let secs = v * scale;
    if secs > MAX_SECONDS as f64 {
        return Err(format!("`{t}` is later than a run may last (at most {MAX_SECONDS} s, a day)"));
    }
    Ok(Duration::from_secs_f64(secs))
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
        "update" => {
            let (k, v) = match value.split_once('@') {
                Some((k, v)) => {
                    let v =
                        v.parse::<u32>().map_err(|_| format!("--at `{s}`: `{v}` is not a version number"))?;
                    (k, Some(v))
                }
                None => (value, None),
            };
            let k: ComponentKind = k.parse()?;
            if k == ComponentKind::Tcp {
                return Err(format!(
                    "--at `{s}`: TCP cannot be updated live (its state is smoltcp's sockets, and no versioned \
                     state type carries them; a crash can recover them: --tcp-crash recover); update syscall, ip, \
                     filter or driver"
                ));
            }
            let versions: &[u32] = if k == ComponentKind::Filter { &[1, 2] } else { &[1] };
            if let Some(v) = v.filter(|v| !versions.contains(v)) {
                return Err(format!("--at `{s}`: {k} has no version {v} (it has {versions:?})"));
            }
            Change::Update(k, v)
        }
        _ => {
            return Err(format!(
                "--at `{s}`: unknown change `{what}`; expected placement, speed, move, crash or update"
            ));
        }
    };
    Ok((at, c))
}

/// Everything about where the stack runs, checked before anything starts.
pub(super) struct Plan {
    pub cpus: Vec<CpuId>,
    pub placement: Placement,
    pub speeds: Vec<(CpuId, StepIdx)>,
    pub at: Vec<(Duration, Change)>,
    /// Whether TCP may crash (its connections may be reset): the
    /// applications then reconnect and the receivers check every byte.
    pub tcp_may_crash: bool,
    /// Concurrent connections.
    pub streams: usize,
}

impl Args {
    /// Milliseconds between the crashes of `--crash`.
    pub fn crash_every_ms(&self) -> u64 {
        self.crash_every_ms.unwrap_or(10)
    }

    /// The fault campaign's seed.
    pub fn campaign_seed(&self) -> u64 {
        self.seed.unwrap_or(1)
    }

    /// The fault campaign's mean gap, in microseconds.
    pub fn fault_gap_us(&self) -> u64 {
        self.fault_gap_us.unwrap_or(1000)
    }
}

/// Refuses a flag that only means something beside another one that is
/// missing (it would silently do nothing).
fn needs_another(args: &Args) -> Result<(), BadArgs> {
    let lone = [
        ("--crash-every-ms", args.crash_every_ms.is_some() && args.crash.is_empty(), "--crash COMP"),
        ("--seed", args.seed.is_some() && args.faults.is_none(), "--faults N"),
        ("--fault-gap-us", args.fault_gap_us.is_some() && args.faults.is_none(), "--faults N"),
    ];
    match lone.into_iter().find(|(_, alone, _)| *alone) {
        Some((flag, _, needs)) => Err(BadArgs(format!(
            "{flag} does nothing without {needs}: it sets when {} happen; give {needs} too, or leave {flag} out",
            if needs.starts_with("--crash") {
                "the crashes of --crash"
            } else {
                "the fault campaign's faults"
            }
        ))),
        None => Ok(()),
    }
}

pub(super) fn plan(args: &Args) -> Result<Plan, BadArgs> {
    needs_another(args)?;
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
            Change::Crash(_) | Change::Update(..) => {}
        }
        at.push((t, c));
    }
    at.sort_by_key(|(t, _)| *t);
    let tcp_may_crash = args.faults.is_some()
        || crash_kinds(&args.crash)?.contains(&ComponentKind::Tcp)
        || at.iter().any(|(_, c)| *c == Change::Crash(ComponentKind::Tcp));
    let streams = connections(args, tcp_may_crash)?;
    Ok(Plan { cpus, placement, speeds, at, tcp_may_crash, streams })
}

/// The number of connections, checked against the peer and what may crash.
fn connections(args: &Args, tcp_may_crash: bool) -> Result<usize, BadArgs> {
    let streams = if args.faults.is_some() && args.streams == 1 { 4 } else { args.streams as usize };
    if let (WireKind::Tun, Some(p)) = (args.wire, args.peer) {
        return Err(BadArgs(format!(
            "--peer {}: over --wire tun the peer is Linux's own stack; --peer chooses the in-memory wire's",
            match p {
                PeerKind::Split => "split",
                PeerKind::Mono => "mono",
            }
        )));
    }
    let one_peer = match (args.wire, args.peer.unwrap_or(PeerKind::Split)) {
        (WireKind::Tun, _) => Some("the Linux peer over TUN"),
        (WireKind::Mem, PeerKind::Mono) => Some("the monolithic peer"),
        (WireKind::Mem, PeerKind::Split) => None,
    };
    if let Some(peer) = one_peer {
        if streams > 1 {
            return Err(BadArgs(format!(
                "--streams {streams}: {peer} takes one connection; use --peer split"
            )));
        }
        if tcp_may_crash {
            return Err(BadArgs(format!(
                "TCP may crash here (--crash tcp, crash=tcp or --faults), which resets its connections, and \
                 {peer} takes one connection only; use --peer split"
            )));
        }
    }
    Ok(streams)
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
        assert_eq!(crash_kinds(&["tcp".into()]).unwrap(), [ComponentKind::Tcp]);
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
        assert!(parse_placement("efficient:-1").unwrap_err().contains("0.001 to 1000 Gbps"));
        assert!(parse_placement("manual:tcp").unwrap_err().contains("is not COMP=CPU"));
        assert!(parse_placement("manual:nic=0").unwrap_err().contains("unknown component `nic`"));
        assert_eq!(parse_speeds("0=1600,3=200", &t).unwrap(), [(0, StepIdx(2)), (3, StepIdx(9))]);
        assert!(parse_speeds("0=2267,3=200", &t).unwrap_err().contains("the chip runs at one frequency"));
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
        assert_eq!(parse_at("2s:update=ip", &t).unwrap().1, Change::Update(ComponentKind::Ip, None));
        assert_eq!(
            parse_at("2s:update=filter@2", &t).unwrap().1,
            Change::Update(ComponentKind::Filter, Some(2))
        );
        assert!(parse_at("2s:update=tcp", &t).unwrap_err().contains("TCP cannot be updated live"));
        assert!(parse_at("2s:update=filter@x", &t).unwrap_err().contains("`x` is not a version number"));
        assert!(parse_at("2s:update=ip@2", &t).unwrap_err().contains("ip has no version 2"));
        assert!(parse_at("1s", &t).unwrap_err().contains("expected TIME:CHANGE"));
    }
}
