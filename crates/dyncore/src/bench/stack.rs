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
//! B2–B5 (the split stack on runtime CPUs, placed by the policy) come with
//! phase B.
//!
//! The report also measures the design choice for packets larger than a
//! ring item ([`transport`]): buffer indices in the ring against the frame
//! chunked into cache-line items.
//!
//! Writes `<out>/bench-stack/{report.md, results.json}`.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use dyncore_core::CpuId;
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
        Mono::new(Box::new(wa), a, sock, 1, MonoRole::Send { peer: (b, 5001), total: bytes, seed: SEED }, 0);
    let rx = Mono::new(Box::new(wb), b, sock, 2, MonoRole::Receive { port: 5001, verify_seed: None }, 0);
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
    let (mut b0, mut b1) = (Vec::new(), Vec::new());
    for round in 1..=args.runs {
        b0.push(with_energy(&power, || linux_loopback(bytes, cpus)).context("B0 (Linux loopback)")?);
        b1.push(
            with_energy(&power, || smoltcp_mono(bytes, args.mtu, cpus)).context("B1 (monolithic smoltcp)")?,
        );
        say!(
            "  round {round}/{}: B0 {:.2} Gbps, B1 {:.2} Gbps",
            args.runs,
            b0.last().expect("pushed").gbps(),
            b1.last().expect("pushed").gbps()
        );
    }
    let rows = vec![
        summarise("B0", "Linux TCP, loopback, 2 pinned threads", b0, mhz),
        summarise("B1", "monolithic smoltcp, in-memory wire, 2 pinned threads", b1, mhz),
    ];
    say!("measuring frame transports…");
    let transports = transport::measure(cpus, args.mtu, if args.quick { 200_000 } else { 1_000_000 })?;
    write_report(&dir, args, bytes, &machine, &power, mhz, &rows, &transports)?;
    say!("report written to {}", dir.join("report.md").display());
    Ok(Vec::new())
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
    transports: &[transport::Transport],
) -> Result<()> {
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
    let not_yet = "needs B2–B5 (the split stack on runtime CPUs), which phase B adds";
    let goals = [
        Goal::not_measured("dynamic within 10% of the better of B2 and B3 at each load level", not_yet),
        Goal::not_measured("at idle, dynamic uses ≤ 50% of B2's CPU-seconds", not_yet),
        Goal::not_measured("B5 reaches its target with ≤ 70% of B2's modelled energy", not_yet),
        Goal::not_measured("the split stack's better configuration ≥ 0.5× B0", not_yet),
    ];
    let tg = goals_table("Goals", &goals);
    for x in [&t, &tt, &tg] {
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
        "Every configuration runs once per round, rounds interleaved; both ends hash the stream and a \
         mismatch fails the run. The in-memory wire's MTU is {} bytes; loopback's is the kernel's.\n",
        args.mtu
    )?;
    writeln!(md, "## Streams\n\n{}", t.to_markdown())?;
    writeln!(
        md,
        "## Packets larger than a ring item\n\nA ring item is one cache line. The split stack passes \
         buffer indices from per-stack pools in its rings (a packet crosses IP and the filter without a \
         copy); the alternative is to chunk each frame into cache-line items.\n\n{}",
        tt.to_markdown()
    )?;
    writeln!(md, "## Goals\n\n{}", tg.to_markdown())?;
    write_file(&dir.join("report.md"), md.as_bytes())?;
    let j = json!({
        "machine": machine,
        "power_sources": power.describe(),
        "cpuinfo_mhz": mhz,
        "bytes_per_stream": bytes,
        "mtu": args.mtu,
        "rows": rows,
        "transports": transports,
        "goals": goals,
    });
    write_file(&dir.join("results.json"), serde_json::to_string_pretty(&j)?.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_writes_a_report() {
        let dir = std::env::temp_dir().join(format!("dyncore-bench-stack-{}", std::process::id()));
        let args = Args {
            runs: 1,
            bytes: Some(1 << 20),
            quick: true,
            mtu: 1500,
            sender_cpu: None,
            receiver_cpu: None,
            gate: super::super::Gate::default(),
        };
        let goals = run(&args, &dir).unwrap();
        assert!(goals.is_empty(), "B0 and B1 carry no goal of their own");
        let d = dir.join("bench-stack");
        let md = std::fs::read_to_string(d.join("report.md")).unwrap();
        assert!(md.contains("| B0 |") && md.contains("| B1 |") && md.contains("modelled"), "{md}");
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("results.json")).unwrap()).unwrap();
        assert!(j["rows"][1]["gbps_median"].as_f64().unwrap() > 0.0);
        assert_eq!(j["transports"].as_array().unwrap().len(), 2);
        std::fs::remove_dir_all(&dir).ok();
    }
}
