//! `dyncore bench stack`: TCP streams on this machine, the baselines of the
//! NewtOS comparison (issue 10), measured in interleaved rounds so that a
//! noisy neighbour hits every configuration alike.
//!
//! * **B0**: the Linux kernel's TCP over loopback, `std::net`, a sender and
//!   a receiver thread pinned to two CPUs.
//! * **B1**: the monolithic smoltcp stack (stack and application in one
//!   polling thread, the paper's §4.5 single-core case), a sender and a
//!   receiver stack pinned like B0, joined by the in-memory wire.
//!
//! Both move the same seeded stream and hash it at both ends; a run whose
//! digests differ is an error, not a figure. Each row reports the median
//! bitrate of the rounds with its spread, CPU time per GB (both threads'
//! CPU clocks), cycles per byte at the clock `/proc/cpuinfo` states, and
//! joules per GB from the power model (modelled: this machine has no RAPL).
//! * **B2–B5** ([`split`]): the split stack on runtime CPUs, placed by the
//!   placement policy through the live controller, sending to a monolithic
//!   receiver: B2 spread over the two CPUs, B3 consolidated on one, B4
//!   `dynamic` under a load step (idle, a stream, idle) beside the same step
//!   always spread (B4s), B5 `efficient` at 80% of the same round's B2.
//!
//! The four goals of issue 10 are ratios of figures from the same run.
//!
//! The report also measures the design choice for packets larger than a
//! ring item ([`transport`]): buffer indices in the ring against the frame
//! chunked into cache-line items.
//!
//! Writes `<out>/bench-stack/{report.md, results.json}`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use dyncore_core::CpuId;
use dyncore_core::placement::{ComponentKind, Mode};
use dyncore_core::power::{MODELLED, PowerModel, SpeedTable};
use dyncore_net::app::App;
use dyncore_net::mono::{Mono, MonoRole};
use dyncore_net::power::{EnergyMeter, PowerSources};
use dyncore_net::stream::{Digest, StreamGen, StreamHash};
use dyncore_net::tcp::SocketConfig;
use dyncore_net::wire::mem::{self, MemWireConfig};
use dyncore_runtime::affinity::{allowed_cpus, pin_current_thread};
use serde_json::json;

use super::{Goal, goals_table, percentile};
use crate::report::write_file;
use crate::table::Table;

mod split;
mod transport;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Rounds; every configuration runs once per round (at least 5 for a median).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Bytes per stream (default 256 MiB, quick 32 MiB).
    #[arg(long)]
    pub bytes: Option<u64>,
    /// A run of a few seconds: 32 MiB streams.
    #[arg(long)]
    pub quick: bool,
    /// IP MTU of the in-memory wire (bytes).
    #[arg(long, default_value_t = 1500)]
    pub mtu: usize,
    /// CPU of the sending threads; default: the first allowed CPU.
    #[arg(long)]
    pub sender_cpu: Option<CpuId>,
    /// CPU of the receiving threads; default: the next allowed CPU.
    #[arg(long)]
    pub receiver_cpu: Option<CpuId>,
    /// Write the split stack's measured costs (cycles per packet and per byte per component, channel cost, wake-up cost) into this machine profile's [stack] section; the file must exist (`dyncore bench reconfig --write-profile` makes it).
    #[arg(long)]
    pub write_profile: Option<std::path::PathBuf>,
    /// Milliseconds of idle before and after B4's stream.
    #[arg(long)]
    pub idle_ms: Option<u64>,
    #[command(flatten)]
    pub gate: super::Gate,
}

/// One stream: what it carried, how long it took, and the CPU it used.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Run {
    bytes: u64,
    wall_ns: u64,
    /// CPU time of both threads.
    cpu_ns: u64,
    /// Package energy measured by RAPL, where the machine has it.
    joules: Option<f64>,
}

impl Run {
    fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.wall_ns as f64
    }
}

/// A configuration's rounds, summarised.
#[derive(Debug, Clone, serde::Serialize)]
struct Row {
    key: &'static str,
    what: &'static str,
    runs: Vec<Run>,
    gbps_median: f64,
    gbps_min: f64,
    gbps_max: f64,
    cpu_s_per_gb: f64,
    cycles_per_byte: Option<f64>,
    joules_per_gb_modelled: f64,
    /// From RAPL, where the machine has it (the whole package, not only
    /// these threads).
    joules_per_gb_measured: Option<f64>,
}

/// The CPU time the calling thread has used.
fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The clock `/proc/cpuinfo` states for the first CPU, in MHz.
fn cpuinfo_mhz() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    s.lines().find(|l| l.starts_with("cpu MHz"))?.split(':').nth(1)?.trim().parse().ok()
}

/// Runs `f` on a thread pinned to `cpu`; returns its result and CPU time.
fn pinned<'s, 'e, R: Send + 's>(
    s: &'s std::thread::Scope<'s, 'e>,
    cpu: CpuId,
    f: impl FnOnce() -> Result<R> + Send + 's,
) -> std::thread::ScopedJoinHandle<'s, Result<(R, u64)>> {
    std::thread::Builder::new()
        .spawn_scoped(s, move || {
            pin_current_thread(cpu).with_context(|| format!("pinning to CPU {cpu}"))?;
            let t0 = thread_cpu_ns();
            let r = f()?;
            Ok((r, thread_cpu_ns() - t0))
        })
        .expect("spawning a bench thread")
}

fn join<R>(h: std::thread::ScopedJoinHandle<'_, Result<R>>) -> Result<R> {
    h.join().map_err(|_| anyhow::anyhow!("a bench thread panicked"))?
}

const SEED: u64 = 0xbe0;

/// B0: Linux TCP over loopback.
fn linux_loopback(bytes: u64, cpus: (CpuId, CpuId)) -> Result<Run> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let t0 = Instant::now();
    let (sent, got) = std::thread::scope(|s| -> Result<_> {
        let rx = pinned(s, cpus.1, || -> Result<Digest> {
            let (mut c, _) = listener.accept()?;
            let mut hash = StreamHash::new();
            let mut buf = vec![0; 256 * 1024];
            loop {
                let n = c.read(&mut buf)?;
                if n == 0 {
                    return Ok(hash.digest());
                }
                hash.update(&buf[..n]);
            }
        });
        let tx = pinned(s, cpus.0, || -> Result<Digest> {
            let mut c = TcpStream::connect(addr)?;
            let mut stream = StreamGen::new(SEED);
            let mut hash = StreamHash::new();
            let mut buf = vec![0; 64 * 1024];
            while stream.position() < bytes {
                let n = buf.len().min((bytes - stream.position()) as usize);
                stream.fill(&mut buf[..n]);
                c.write_all(&buf[..n])?;
                hash.update(&buf[..n]);
            }
            c.shutdown(std::net::Shutdown::Write)?;
            Ok(hash.digest())
        });
        Ok((join(tx)?, join(rx)?))
    })?;
    let wall_ns = super::ns(t0.elapsed());
    check_digests("B0", sent.0, got.0)?;
    Ok(Run { bytes, wall_ns, cpu_ns: sent.1 + got.1, joules: None })
}

fn check_digests(what: &str, sent: Digest, got: Digest) -> Result<()> {
    if sent != got {
        bail!("{what}: the receiver's stream ({got}) differs from the sender's ({sent})");
    }
    Ok(())
}

/// Polls a monolithic stack until its application is done.
fn drive(mut m: Mono, epoch: Instant) -> Result<Mono> {
    while !m.is_done() {
        let _ = m.poll(super::ns(epoch.elapsed()));
    }
    match m.error() {
        Some(e) => bail!("{e}"),
        None => Ok(m),
    }
}

/// B1: two monolithic smoltcp stacks on the in-memory wire.
fn smoltcp_mono(bytes: u64, mtu: usize, cpus: (CpuId, CpuId)) -> Result<Run> {
    let (wa, wb) = mem::pair(MemWireConfig { mtu, ..MemWireConfig::default() });
    let (a, b) = (std::net::Ipv4Addr::new(10, 0, 0, 1), std::net::Ipv4Addr::new(10, 0, 0, 2));
    let sock = SocketConfig::default();
    let epoch = Instant::now();
    let tx =
        Mono::new(wa.port(), a, sock, 1, MonoRole::Send { peer: (b, 5001), total: bytes, seed: SEED }, 0);
    let rx = Mono::new(wb.port(), b, sock, 2, MonoRole::Receive { port: 5001, verify_seed: None }, 0);
    let (tx, rx) = std::thread::scope(|s| -> Result<_> {
        let r = pinned(s, cpus.1, || drive(rx, epoch));
        let t = pinned(s, cpus.0, || drive(tx, epoch));
        Ok((join(t)?, join(r)?))
    })?;
    let wall_ns = super::ns(epoch.elapsed());
    check_digests("B1", tx.0.report().digest, rx.0.report().digest)?;
    Ok(Run { bytes, wall_ns, cpu_ns: tx.1 + rx.1, joules: None })
}

/// Runs `f`, adding the package energy RAPL measured where there is RAPL.
fn with_energy(power: &PowerSources, f: impl FnOnce() -> Result<Run>) -> Result<Run> {
    let meter = EnergyMeter::start(power);
    let mut run = f()?;
    run.joules = meter.map(|m| m.joules()).transpose().context("reading RAPL")?;
    Ok(run)
}

fn summarise(key: &'static str, what: &'static str, runs: Vec<Run>, mhz: Option<f64>) -> Row {
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

/// The goals of issue 10 need the split stack on runtime CPUs (B2-B5); until
/// then this bench measures its baselines and states no goal.
pub fn run(args: &Args, out: &Path) -> Result<Vec<super::Goal>> {
    ensure!(args.runs >= 1, "--runs must be at least 1");
    ensure!((576..=65535).contains(&args.mtu), "--mtu {} is outside 576..=65535", args.mtu);
    if let Some(path) = &args.write_profile {
        // Refuse before measuring, not after: the profile must exist.
        read_profile(path)?;
    }
    let dir = out.join("bench-stack");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let bytes = args.bytes.unwrap_or(if args.quick { 32 << 20 } else { 256 << 20 });
    let allowed = allowed_cpus()?;
    let tx_cpu = args.sender_cpu.or(allowed.first()).context("no CPU allowed")?;
    let rx_cpu = args.receiver_cpu.or_else(|| allowed.iter().find(|&c| c != tx_cpu)).unwrap_or(tx_cpu);
    for c in [tx_cpu, rx_cpu] {
        ensure!(allowed.contains(c), "CPU {c} is not in this process's affinity mask ({allowed})");
    }
    let machine = super::machine_description();
    let power = PowerSources::probe();
    let mhz = cpuinfo_mhz();
    say!("dyncore bench stack — {machine}");
    say!(
        "sender on CPU {tx_cpu}, receiver on CPU {rx_cpu}; {} rounds of {} MiB streams",
        args.runs,
        bytes >> 20
    );
    say!("power: {}", power.describe());
    if tx_cpu == rx_cpu {
        say!("note: one CPU only: sender and receiver share it");
    }
    let cpus = (tx_cpu, rx_cpu);
    let both: Vec<CpuId> = if tx_cpu == rx_cpu { vec![tx_cpu] } else { vec![tx_cpu, rx_cpu] };
    let idle = std::time::Duration::from_millis(args.idle_ms.unwrap_or(if args.quick { 200 } else { 500 }));
    let sample = std::time::Duration::from_millis(10);
    let none = std::time::Duration::ZERO;
    let (mut b0, mut b1) = (Vec::new(), Vec::new());
    let mut sp: [Vec<split::SplitRun>; 5] = Default::default();
    let mut targets = Vec::new();
    for round in 1..=args.runs {
        // B0-B4s in the other benches' interleaved order (a different
        // first row and direction each round); B5 last, since its target
        // is this round's B2.
        let mut target = 0.0;
        for row in super::stats::round_order(6, round - 1) {
            match row {
                0 => b0.push(
                    with_energy(&power, || linux_loopback(bytes, cpus)).context("B0 (Linux loopback)")?,
                ),
                1 => b1.push(
                    with_energy(&power, || smoltcp_mono(bytes, args.mtu, cpus))
                        .context("B1 (monolithic smoltcp)")?,
                ),
                2 => {
                    let b2 = split::run(Mode::Spread, &both, bytes, args.mtu, sample, none)
                        .context("B2 (spread)")?;
                    target = 0.8 * b2.gbps * 1e9;
                    sp[0].push(b2);
                }
                3 => sp[1]
                    .push(split::run(Mode::Consolidate, &both, bytes, args.mtu, sample, none).context("B3")?),
                4 => sp[2].push(
                    split::run(Mode::Dynamic, &both, bytes, args.mtu, sample, idle)
                        .context("B4 (dynamic)")?,
                ),
                _ => sp[3].push(
                    split::run(Mode::Spread, &both, bytes, args.mtu, sample, idle).context("B4s (spread)")?,
                ),
            }
        }
        targets.push(target);
        let eff = Mode::Efficient { target_bits_per_s: target };
        sp[4].push(split::run(eff, &both, bytes, args.mtu, sample, none).context("B5 (efficient)")?);
        let g = |v: &Vec<split::SplitRun>| v.last().expect("pushed").gbps;
        say!(
            "  round {round}/{}: B0 {:.2}, B1 {:.2}, B2 {:.2}, B3 {:.2}, B4 {:.2}, B4s {:.2}, B5 {:.2} Gbps (target {:.2})",
            args.runs,
            b0.last().expect("pushed").gbps(),
            b1.last().expect("pushed").gbps(),
            g(&sp[0]),
            g(&sp[1]),
            g(&sp[2]),
            g(&sp[3]),
            g(&sp[4]),
            target / 1e9
        );
    }
    let rows = vec![
        summarise("B0", "Linux TCP, loopback, 2 pinned threads", b0, mhz),
        summarise("B1", "monolithic smoltcp, in-memory wire, 2 pinned threads", b1, mhz),
    ];
    let [r2, r3, r4, r4s, r5] = sp;
    let what = [
        "split, spread over 2 runtime CPUs",
        "split, consolidated on 1 runtime CPU",
        "split, dynamic, idle → stream → idle",
        "split, always spread, idle → stream → idle",
        "split, efficient at 80% of the round's B2",
    ];
    let srows: Vec<SplitRow> = [("B2", r2), ("B3", r3), ("B4", r4), ("B4s", r4s), ("B5", r5)]
        .into_iter()
        .zip(what)
        .map(|((k, runs), w)| split_row(k, w, runs, mhz))
        .collect();
    let goals = goals(&rows, &srows, &targets);
    say!("measuring frame transports…");
    let transports = transport::measure(cpus, args.mtu, if args.quick { 200_000 } else { 1_000_000 })?;
    // Sim against live: this machine's costs, measured now, into the
    // simulator's model of the same configurations.
    let costs = match measure_costs(tx_cpu, bytes, args.runs, mhz, &transports) {
        Ok(c) => Some(c),
        Err(e) if args.write_profile.is_none() => {
            say!("no sim-against-live comparison: {e:#}");
            None
        }
        Err(e) => return Err(e),
    };
    let predictions = costs.as_ref().map(|c| predict(c, args.mtu, &rows[1], &srows[0], &srows[1], mhz));
    let mut goals = goals;
    goals.push(match &predictions {
        Some(p) => prediction_goal(p),
        None => {
            Goal::not_measured(PREDICTION_GOAL, "no clock in /proc/cpuinfo to count the costs' cycles at")
        }
    });
    write_report(
        &dir,
        args,
        bytes,
        &machine,
        &power,
        mhz,
        &rows,
        &srows,
        &goals,
        &transports,
        predictions.as_deref(),
    )?;
    if let (Some(path), Some(costs)) = (&args.write_profile, costs) {
        write_profile(path, costs)?;
    }
    say!("report written to {}", dir.join("report.md").display());
    Ok(goals)
}

const PREDICTION_GOAL: &str = "the simulator predicts B1-B3's Gbps within 20% (this machine's [stack] costs)";

/// One configuration predicted by the simulator's network-stack model from
/// this run's measured costs, beside what the bench measured.
#[derive(Debug, Clone, serde::Serialize)]
struct Prediction {
    key: &'static str,
    predicted_gbps: f64,
    measured_gbps: f64,
    /// CPU-seconds per GB of payload, on the side the bench measures (B1:
    /// both polling threads; B2, B3: the sending stack's CPUs).
    predicted_cpu_s_per_gb: f64,
    measured_cpu_s_per_gb: Option<f64>,
}

impl Prediction {
    fn gbps_diff(&self) -> f64 {
        self.predicted_gbps / self.measured_gbps.max(1e-12) - 1.0
    }

    fn cpu_diff(&self) -> Option<f64> {
        self.measured_cpu_s_per_gb.map(|m| self.predicted_cpu_s_per_gb / m.max(1e-12) - 1.0)
    }
}

/// B1 (monolithic), B2 (spread) and B3 (consolidated) predicted by
/// `dyncore_sim::netstack::predict` from `costs`, with the live stack's
/// segment size (MTU - 40) and socket buffer as the window. The model
/// predicts both sides' CPU time; the split rows measure the sender's only,
/// so their prediction is halved (the model's receiver mirrors the sender).
fn predict(
    costs: &dyncore_core::profile::StackCosts,
    mtu: usize,
    b1: &Row,
    b2: &SplitRow,
    b3: &SplitRow,
    mhz: Option<f64>,
) -> Vec<Prediction> {
    use dyncore_sim::netstack::predict::{LiveLayout, predict_bench};
    let mss = u32::try_from(mtu - 40).expect("the MTU is checked to be 576..=65535");
    let window = dyncore_net::tcp::SocketConfig::default().buffer_bytes as u64;
    let cpu_s = |cycles_per_byte: Option<f64>| cycles_per_byte.zip(mhz).map(|(c, m)| c * 1e9 / (m * 1e6));
    let one = |key, layout, measured_gbps, measured_cpu, sides: f64| {
        let p = predict_bench(costs, layout, mss, window);
        Prediction {
            key,
            predicted_gbps: p.gbps,
            measured_gbps,
            predicted_cpu_s_per_gb: p.cpu_s_per_gb / sides,
            measured_cpu_s_per_gb: measured_cpu,
        }
    };
    vec![
        one("B1", LiveLayout::Mono, b1.gbps_median, Some(b1.cpu_s_per_gb), 1.0),
        one("B2", LiveLayout::Spread, b2.gbps_median, cpu_s(b2.cycles_per_byte), 2.0),
        one("B3", LiveLayout::Consolidated, b3.gbps_median, cpu_s(b3.cycles_per_byte), 2.0),
    ]
}

fn prediction_goal(p: &[Prediction]) -> Goal {
    let worst = p.iter().map(|x| x.gbps_diff().abs()).fold(0.0, f64::max);
    let each: Vec<String> = p.iter().map(|x| format!("{} {:+.0}%", x.key, 100.0 * x.gbps_diff())).collect();
    let mut why: Vec<&str> = p
        .iter()
        .filter(|x| x.gbps_diff().abs() > 0.2)
        .map(|x| match x.key {
            "B1" => {
                "B1: the live thread also runs the application's copy and the monolithic stack's own loop, \
                 which the per-component costs do not hold"
            }
            _ => {
                "B2/B3: live, the stack's runtime CPUs share the real CPUs with the sending application's \
                 and the receiver's threads (more busy threads than CPUs on a small machine); the model gives \
                 each stack CPU a core of its own and has no such contention"
            }
        })
        .collect();
    why.dedup();
    let why = if why.is_empty() { String::new() } else { format!("; missed — {}", why.join("; ")) };
    Goal::checked(
        PREDICTION_GOAL,
        format!("predicted against measured: {}{why}", each.join(", ")),
        worst <= 0.2,
    )
}

/// `--write-profile`: the split stack's costs, measured consolidated on one
/// runtime CPU (no cross-core traffic inside the stack) at two MTUs, so
/// that each component's cost per message splits into a fixed part and a
/// part per byte: with `c(P)` the median cycles per message at payload
/// bytes per message `P`, `per_byte = (c(P₂) - c(P₁)) / (P₂ - P₁)` and
/// `per_packet = c(P₁) - per_byte · P₁` (both clamped at 0). The channel
/// cost is one message through a ring between two pinned threads (the pool
/// indices transport); the wake-up cost is the mean over the runs' wake-ups.
fn measure_costs(
    cpu: CpuId,
    bytes: u64,
    runs: usize,
    mhz: Option<f64>,
    transports: &[transport::Transport],
) -> Result<dyncore_core::profile::StackCosts> {
    use dyncore_core::profile::{ComponentCost, StackCosts};
    let mhz = mhz.context("no stack costs: /proc/cpuinfo states no clock to count cycles at")?;
    say!("measuring the split stack's costs (consolidated, MTU 576 and 1500)…");
    let sample = std::time::Duration::from_millis(10);
    let mut points: BTreeMap<ComponentKind, Vec<(f64, f64)>> = BTreeMap::new();
    let (mut wakeups, mut wake_ns) = (0u64, 0u64);
    for mtu in [576, 1500] {
        let mut per: BTreeMap<ComponentKind, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for _ in 0..runs.max(3) {
            let r = split::run(Mode::Consolidate, &[cpu], bytes, mtu, sample, std::time::Duration::ZERO)
                .with_context(|| format!("profile run at MTU {mtu}"))?;
            wakeups += r.wakeups;
            wake_ns += r.wake_ns;
            for (k, busy, msgs, b) in r.work {
                if msgs > 0 {
                    let e = per.entry(k).or_default();
                    e.0.push(busy as f64 * mhz / 1e3 / msgs as f64);
                    e.1.push(b as f64 / msgs as f64);
                }
            }
        }
        for (k, (c, p)) in per {
            points.entry(k).or_default().push((median(p).unwrap_or(0.0), median(c).unwrap_or(0.0)));
        }
    }
    let cost = |k: ComponentKind| -> ComponentCost {
        match points.get(&k).map(Vec::as_slice) {
            Some([(p1, c1), (p2, c2)]) if (p2 - p1).abs() > 1.0 => {
                let per_byte = ((c2 - c1) / (p2 - p1)).max(0.0);
                ComponentCost { cycles_per_packet: (c1 - per_byte * p1).max(0.0), cycles_per_byte: per_byte }
            }
            Some([.., (_, c)]) => ComponentCost { cycles_per_packet: *c, cycles_per_byte: 0.0 },
            _ => ComponentCost::default(),
        }
    };
    let ring = transports.first().context("no transport measured")?;
    let costs = StackCosts {
        cpu_mhz: mhz,
        channel_cycles_per_msg: mhz * 1e6 / ring.frames_per_s,
        wakeup_ns: if wakeups > 0 { wake_ns as f64 / wakeups as f64 } else { 0.0 },
        syscall: cost(ComponentKind::Syscall),
        tcp: cost(ComponentKind::Tcp),
        ip: cost(ComponentKind::Ip),
        filter: cost(ComponentKind::Filter),
        driver: cost(ComponentKind::Driver),
    };
    costs.validate().map_err(|e| anyhow::anyhow!("the measured stack costs are not valid: {e}"))?;
    Ok(costs)
}

/// The machine profile at `path`, and its text.
fn read_profile(path: &Path) -> Result<(String, dyncore_core::profile::MachineProfile)> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!("reading {} (make it with `dyncore bench reconfig --write-profile` first)", path.display())
    })?;
    let profile =
        toml::from_str(&text).with_context(|| format!("{} is not a machine profile", path.display()))?;
    Ok((text, profile))
}

/// Writes `costs` as the `[stack]` section of the machine profile at
/// `path`, keeping the rest of it.
fn write_profile(path: &Path, costs: dyncore_core::profile::StackCosts) -> Result<()> {
    let (text, mut profile) = read_profile(path)?;
    profile.stack = Some(costs);
    let body = toml::to_string_pretty(&profile).context("serialising the machine profile")?;
    let back: dyncore_core::profile::MachineProfile =
        toml::from_str(&body).context("the machine profile does not read back")?;
    anyhow::ensure!(back == profile, "the machine profile changed on reading back");
    // Keep the file's leading comment.
    let comment: String = text.lines().take_while(|l| l.starts_with('#')).map(|l| format!("{l}\n")).collect();
    let note = format!(
        "# [stack]: the split network stack's costs, by `{}` on {}.\n",
        super::command_line(),
        super::today()
    );
    write_file(path, format!("{comment}{note}{body}").as_bytes())?;
    say!("the [stack] section of {} written", path.display());
    Ok(())
}

/// B2–B5 summarised over the rounds.
#[derive(Debug, Clone, serde::Serialize)]
struct SplitRow {
    key: &'static str,
    what: &'static str,
    gbps_median: f64,
    gbps_min: f64,
    gbps_max: f64,
    /// Median per component of its busy fraction over the stream.
    util: Vec<(ComponentKind, f64)>,
    wakeups_per_s: f64,
    /// The stack CPUs' running time (polls, work or not) per byte.
    cycles_per_byte: Option<f64>,
    joules_per_gb_modelled: f64,
    /// Idle phases (B4, B4s): CPU-seconds and modelled joules, summed over rounds.
    idle_cpu_s: f64,
    idle_joules: f64,
    stream_cpu_s: f64,
    reaction_ms_median: Option<f64>,
    gbps_before_reaction: Option<f64>,
    gbps_after_reaction: Option<f64>,
    target_unreachable: usize,
    runs: Vec<split::SplitRun>,
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

fn split_row(
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
fn per_round(v: &[f64]) -> (f64, f64, f64) {
    let m = median(v.to_vec()).unwrap_or(f64::NAN);
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (m, lo, hi)
}

/// The four goals of issue 10: each a ratio computed within every round
/// (the configurations of one round ran minutes apart at most), reported as
/// the median of the round ratios with their range.
fn goals(rows: &[Row], s: &[SplitRow], targets: &[f64]) -> Vec<Goal> {
    let (b0, b2, b3, b4, b4s, b5) = (&rows[0], &s[0], &s[1], &s[2], &s[3], &s[4]);
    let n = b0.runs.len();
    let better_i = |i: usize| b2.runs[i].gbps.max(b3.runs[i].gbps);
    let mut out = Vec::new();

    let r1: Vec<f64> = (0..n).map(|i| b4.runs[i].gbps / better_i(i)).collect();
    let (m, lo, hi) = per_round(&r1);
    out.push(Goal::checked(
        "dynamic within 10% of the better of B2 and B3 at each load level (the stream; idle carries none)",
        format!(
            "B4 / max(B2, B3) per round: {m:.2}× (range {lo:.2}–{hi:.2}); medians B4 {:.2}, B2 {:.2}, B3 {:.2} Gbps{}",
            b4.gbps_median,
            b2.gbps_median,
            b3.gbps_median,
            if m < 0.9 {
                format!(
                    "; missed: B4 starts consolidated and spreads only when a sample shows the burst \
                     (reaction {}), so its layout differs from the better one's",
                    b4.reaction_ms_median.map_or("none".into(), |m| format!("{m:.0} ms"))
                )
            } else {
                String::new()
            }
        ),
        m >= 0.9,
    ));

    // Idle CPU time is microseconds per round (parked CPUs do not run), so
    // a ratio per round divides noise by noise: the ratio of the sums.
    let r = b4.idle_cpu_s / b4s.idle_cpu_s.max(1e-12);
    out.push(Goal::checked(
        "at the idle level, dynamic uses ≤ 50% of always-spread's CPU-seconds",
        format!(
            "over all rounds {:.3} ms of CPU against {:.3} ms = {r:.2}× (modelled idle energy {:.3} J against \
             {:.3} J){}",
            b4.idle_cpu_s * 1e3,
            b4s.idle_cpu_s * 1e3,
            b4.idle_joules,
            b4s.idle_joules,
            if r > 0.5 {
                "; missed: an idle CPU parks after a short poll whether it is spread or not, so CPU time \
                 at idle is microseconds either way (noise); consolidating saves the idle cores' static \
                 power (the joules), not CPU time"
            } else {
                ""
            }
        ),
        r <= 0.5,
    ));

    let jpg = |r: &split::SplitRun| r.stream.joules / (r.bytes as f64 / 1e9);
    let reached: Vec<bool> = (0..n).map(|i| b5.runs[i].gbps * 1e9 >= targets[i] * 0.98).collect();
    let r3: Vec<f64> = (0..n).map(|i| jpg(&b5.runs[i]) / jpg(&b2.runs[i]).max(1e-12)).collect();
    let (e, lo, hi) = per_round(&r3);
    let n_reached = reached.iter().filter(|&&r| r).count();
    let ok = n_reached * 2 > n && e <= 0.7;
    out.push(Goal::checked(
        "B5 reaches its target (80% of B2) with ≤ 70% of B2's modelled energy",
        format!(
            "target reached in {n_reached} of {n} rounds (B5 {:.2} Gbps, targets {:.2} Gbps median); \
             energy per byte {e:.2}× B2's per round (range {lo:.2}–{hi:.2}; modelled){}",
            b5.gbps_median,
            median(targets.to_vec()).unwrap_or(0.0) / 1e9,
            if n_reached * 2 <= n {
                format!(
                    "; missed: efficient starts on one core at 200 MHz and raises a step only in a sample \
                     where a core is saturated and the bitrate is below the target; the streams ended with \
                     TCP's core at {} MHz (median), still being raised{}",
                    median(b5.runs.iter().map(|r| f64::from(r.final_tcp_mhz)).collect()).unwrap_or(0.0),
                    if b5.target_unreachable > 0 {
                        format!(" ({} runs ran out of steps)", b5.target_unreachable)
                    } else {
                        String::new()
                    }
                )
            } else if e > 0.7 {
                "; missed: the slower cores needed more than 70% of B2's energy per byte".into()
            } else {
                String::new()
            }
        ),
        ok,
    ));

    let r4: Vec<f64> = (0..n).map(|i| better_i(i) / b0.runs[i].gbps()).collect();
    let (m, lo, hi) = per_round(&r4);
    out.push(Goal::checked(
        "the split stack's better configuration ≥ 0.5× B0",
        format!(
            "max(B2, B3) / B0 per round: {m:.2}× (range {lo:.2}–{hi:.2}); medians B2 {:.2}, B3 {:.2}, B0 {:.2} Gbps{}",
            b2.gbps_median,
            b3.gbps_median,
            b0.gbps_median,
            if m < 0.5 {
                "; missed: the split stack pays a channel crossing and a smoltcp pass per packet, in user \
                 space, on CPUs it shares with the applications"
            } else {
                ""
            }
        ),
        m >= 0.5,
    ));
    out
}

#[allow(clippy::too_many_arguments)]
fn write_report(
    dir: &Path,
    args: &Args,
    bytes: u64,
    machine: &str,
    power: &PowerSources,
    mhz: Option<f64>,
    rows: &[Row],
    srows: &[SplitRow],
    goals: &[Goal],
    transports: &[transport::Transport],
    predictions: Option<&[Prediction]>,
) -> Result<()> {
    let mut tp = Table::new(
        "Sim against live: the simulator's model with this machine's costs, measured in this run",
        &[
            "",
            "predicted Gbps",
            "measured Gbps",
            "difference",
            "predicted CPU-s/GB",
            "measured CPU-s/GB",
            "difference",
        ],
    );
    for x in predictions.unwrap_or_default() {
        tp.row(vec![
            x.key.into(),
            format!("{:.2}", x.predicted_gbps),
            format!("{:.2}", x.measured_gbps),
            format!("{:+.0}%", 100.0 * x.gbps_diff()),
            format!("{:.2}", x.predicted_cpu_s_per_gb),
            x.measured_cpu_s_per_gb.map_or("–".into(), |m| format!("{m:.2}")),
            x.cpu_diff().map_or("–".into(), |d| format!("{:+.0}%", 100.0 * d)),
        ]);
    }
    let mut t = Table::new(
        format!("TCP streams, {} rounds of {} MiB (median, min–max)", args.runs, bytes >> 20),
        &["", "configuration", "Gbps", "spread", "CPU-s/GB", "cycles/B", "J/GB (modelled)", "J/GB (RAPL)"],
    );
    for r in rows {
        t.row(vec![
            r.key.into(),
            r.what.into(),
            format!("{:.2}", r.gbps_median),
            format!("{:.2}–{:.2}", r.gbps_min, r.gbps_max),
            format!("{:.2}", r.cpu_s_per_gb),
            r.cycles_per_byte.map_or("–".into(), |c| format!("{c:.1}")),
            format!("{:.1}", r.joules_per_gb_modelled),
            r.joules_per_gb_measured.map_or("no RAPL".into(), |j| format!("{j:.1}")),
        ]);
    }
    let mut tt = Table::new(
        format!("Moving {}-byte frames between two pinned threads", args.mtu),
        &["transport", "frames/s", "GB/s", "ring items per frame"],
    );
    for x in transports {
        tt.row(vec![
            x.what.into(),
            format!("{:.2} M", x.frames_per_s / 1e6),
            format!("{:.2}", x.bytes_per_s / 1e9),
            x.items_per_frame.to_string(),
        ]);
    }
    let mut ts = Table::new(
        format!(
            "The split stack on runtime CPUs, {} rounds of {} MiB (median, min–max)",
            args.runs,
            bytes >> 20
        ),
        &[
            "",
            "configuration",
            "Gbps",
            "spread",
            "utilisation syscall/tcp/ip/filter/driver",
            "wake-ups/s",
            "cycles/B",
            "J/GB (modelled)",
        ],
    );
    for r in srows {
        let u: Vec<String> = r.util.iter().map(|(_, u)| format!("{:.0}", u * 100.0)).collect();
        ts.row(vec![
            r.key.into(),
            r.what.into(),
            format!("{:.2}", r.gbps_median),
            format!("{:.2}–{:.2}", r.gbps_min, r.gbps_max),
            format!("{}%", u.join("/")),
            format!("{:.0}", r.wakeups_per_s),
            r.cycles_per_byte.map_or("–".into(), |c| format!("{c:.1}")),
            format!("{:.1}", r.joules_per_gb_modelled),
        ]);
    }
    let mut t4 = Table::new(
        "B4: dynamic under a load step, against always spread (B4s); sums over the rounds",
        &["", "reaction", "Gbps before / after it", "idle CPU-ms", "idle J (modelled)", "stream CPU-s"],
    );
    for r in &srows[2..4] {
        t4.row(vec![
            r.key.into(),
            r.reaction_ms_median.map_or("no change".into(), |m| format!("{m:.0} ms")),
            match (r.gbps_before_reaction, r.gbps_after_reaction) {
                (Some(b), Some(a)) => format!("{b:.2} / {a:.2}"),
                _ => "–".into(),
            },
            format!("{:.3}", r.idle_cpu_s * 1e3),
            format!("{:.3}", r.idle_joules),
            format!("{:.3}", r.stream_cpu_s),
        ]);
    }
    let tg = goals_table("Goals", goals);
    for x in [&t, &ts, &t4, &tt, &tp, &tg] {
        if x.rows.is_empty() {
            continue;
        }
        say!("\n{}", x.to_terminal());
    }
    let mut md = String::new();
    writeln!(md, "# dyncore bench stack\n")?;
    writeln!(md, "Machine: {machine}.  ")?;
    writeln!(md, "Power sources: {}.  ", power.describe())?;
    writeln!(
        md,
        "CPU time is the two threads' CPU clocks: kernel work done in interrupt context or by kernel \
         threads (softirq) is not in it. Cycles per byte use the clock /proc/cpuinfo states ({}); joules \
         are {MODELLED}, every CPU-second counted as a busy core at 2267 MHz.\n",
        mhz.map_or("none stated".into(), |m| format!("{m:.0} MHz"))
    )?;
    writeln!(
        md,
        "Every configuration runs once per round: B0-B4s in interleaved order ({}), B5 last because its \
         target is the round's B2. Both ends hash the stream and a mismatch fails the run. The in-memory \
         wire's MTU is {} bytes; loopback's is the kernel's.\n",
        super::stats::ORDER_TEXT,
        args.mtu
    )?;
    writeln!(md, "## Streams\n\n{}", t.to_markdown())?;
    writeln!(
        md,
        "## The split stack on runtime CPUs\n\nThe sending stack's five components on pinned runtime \
         CPUs placed by the placement policy (the live controller samples every 10 ms); the application \
         and a monolithic receiver on plain threads. Utilisation is each component's time in polls that \
         did work over the stream; cycles per byte count the stack CPUs' running time (polling included, \
         the application's and the receiver's threads not); joules are {MODELLED}, per CPU in use at its \
         speed step over each sample window.\n\n{}\n{}",
        ts.to_markdown(),
        t4.to_markdown()
    )?;
    writeln!(
        md,
        "## Packets larger than a ring item\n\nA ring item is one cache line. The split stack passes \
         buffer indices from per-stack pools in its rings (a packet crosses IP and the filter without a \
         copy); the alternative is to chunk each frame into cache-line items.\n\n{}",
        tt.to_markdown()
    )?;
    if !tp.rows.is_empty() {
        writeln!(
            md,
            "## Sim against live\n\nThe split stack's per-component costs, measured in this run (consolidated \
             on one runtime CPU at MTU 576 and 1500, as `--write-profile` writes them), fed to the simulator's \
             network-stack model (`dyncore_sim::netstack::predict`) for B1-B3. The model predicts both sides' \
             CPU time; the split rows measure the sending stack's CPUs only, so their prediction is half the \
             model's. B4 and B5 (the policies) are not predicted here.\n\n{}",
            tp.to_markdown()
        )?;
    }
    writeln!(md, "## Goals\n\n{}", tg.to_markdown())?;
    write_file(&dir.join("report.md"), md.as_bytes())?;
    let j = json!({
        "machine": machine,
        "power_sources": power.describe(),
        "cpuinfo_mhz": mhz,
        "bytes_per_stream": bytes,
        "mtu": args.mtu,
        "rows": rows,
        "split_rows": srows,
        "transports": transports,
        "goals": goals,
        "sim_against_live": predictions,
    });
    write_file(&dir.join("results.json"), serde_json::to_string_pretty(&j)?.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_writes_a_report() {
        let _cpus = dyncore_runtime::testing::real_cpus();
        let guard = tempfile::Builder::new().prefix("dyncore-bench-stack-").tempdir().unwrap();
        let dir = guard.path().to_path_buf();
        let args = Args {
            runs: 1,
            bytes: Some(1 << 20),
            quick: true,
            mtu: 1500,
            sender_cpu: None,
            receiver_cpu: None,
            idle_ms: Some(30),
            write_profile: None,
            gate: super::super::Gate::default(),
        };
        let goals = run(&args, &dir).unwrap();
        assert_eq!(goals.len(), 5, "the four goals of issue 10 and the prediction of issue 11");
        assert!(goals[..4].iter().all(|g| g.pass.is_some()), "every goal of issue 10 is measured");
        let d = dir.join("bench-stack");
        let md = std::fs::read_to_string(d.join("report.md")).unwrap();
        // The prediction needs a clock to count cycles at; where there is
        // one, the report sets the model beside the measurement.
        assert_eq!(goals[4].pass.is_some(), md.contains("## Sim against live"), "{md}");
        assert!(md.contains("| B0 |") && md.contains("| B1 |") && md.contains("modelled"), "{md}");
        for k in ["| B2 |", "| B3 |", "| B4 |", "| B4s |", "| B5 |"] {
            assert!(md.contains(k), "no {k} row: {md}");
        }
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("results.json")).unwrap()).unwrap();
        assert!(j["rows"][1]["gbps_median"].as_f64().unwrap() > 0.0);
        assert_eq!(j["transports"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn the_prediction_goal_holds_within_20_percent_and_says_why_it_missed() {
        let x = |key, predicted_gbps, measured_gbps| Prediction {
            key,
            predicted_gbps,
            measured_gbps,
            predicted_cpu_s_per_gb: 1.0,
            measured_cpu_s_per_gb: None,
        };
        let ok = prediction_goal(&[x("B1", 6.0, 5.1), x("B2", 3.0, 3.5), x("B3", 3.0, 3.0)]);
        assert_eq!(ok.pass, Some(true), "{}", ok.measured);
        assert!(ok.measured.contains("B1 +18%") && !ok.measured.contains("missed"), "{}", ok.measured);
        let miss = prediction_goal(&[x("B1", 6.0, 6.0), x("B2", 4.7, 2.9), x("B3", 3.1, 3.5)]);
        assert_eq!(miss.pass, Some(false));
        assert!(
            miss.measured.contains("B2 +62%") && miss.measured.contains("share the real CPUs"),
            "{}",
            miss.measured
        );
    }
}
