//! B0 and B1, the baselines: the Linux kernel's TCP over loopback, and two
//! monolithic smoltcp stacks on the in-memory wire, each end on a pinned
//! thread; and the helpers the other measurements share (pinned threads,
//! thread CPU clocks, the stated clock).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use dyncore_core::CpuId;
use dyncore_net::app::App;
use dyncore_net::mono::{Mono, MonoRole};
use dyncore_net::power::{EnergyMeter, PowerSources};
use dyncore_net::stream::{Digest, StreamGen, StreamHash};
use dyncore_net::tcp::SocketConfig;
use dyncore_net::wire::mem::{self, MemWireConfig};
use dyncore_runtime::affinity::pin_current_thread;

/// One stream: what it carried, how long it took, and the CPU it used.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(super) struct Run {
    pub bytes: u64,
    pub wall_ns: u64,
    /// CPU time of both threads.
    pub cpu_ns: u64,
    /// Package energy measured by RAPL, where the machine has it.
    pub joules: Option<f64>,
    /// B1: the sending and the receiving thread's time in polls that did
    /// work (ns), and the ACKs the sender took (its frames beyond the
    /// stream's full segments).
    pub mono: Option<MonoWork>,
}

/// B1's threads' work (see [`Run::mono`]).
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(super) struct MonoWork {
    pub tx_busy_ns: u64,
    pub rx_busy_ns: u64,
    pub acks: u64,
}

impl Run {
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.wall_ns as f64
    }
}

/// The CPU time the calling thread has used.
pub(super) fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// The clock `/proc/cpuinfo` states for the first CPU, in MHz.
pub(super) fn cpuinfo_mhz() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    s.lines().find(|l| l.starts_with("cpu MHz"))?.split(':').nth(1)?.trim().parse().ok()
}

/// Runs `f` on a thread pinned to `cpu`; returns its result and CPU time.
pub(super) fn pinned<'s, 'e, R: Send + 's>(
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

pub(super) fn join<R>(h: std::thread::ScopedJoinHandle<'_, Result<R>>) -> Result<R> {
    h.join().map_err(|_| anyhow::anyhow!("a bench thread panicked"))?
}

pub(super) const SEED: u64 = 0xbe0;

/// B0: Linux TCP over loopback.
pub(super) fn linux_loopback(bytes: u64, cpus: (CpuId, CpuId)) -> Result<Run> {
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
    let wall_ns = super::super::ns(t0.elapsed());
    check_digests("B0", sent.0, got.0)?;
    Ok(Run { bytes, wall_ns, cpu_ns: sent.1 + got.1, joules: None, mono: None })
}

fn check_digests(what: &str, sent: Digest, got: Digest) -> Result<()> {
    if sent != got {
        bail!("{what}: the receiver's stream ({got}) differs from the sender's ({sent})");
    }
    Ok(())
}

/// Polls a monolithic stack until its application is done; returns it and
/// its time in polls that did work (each poll's time runs to the next
/// poll's clock reading, so no clock is read beyond the one each poll
/// takes).
fn drive(mut m: Mono, epoch: Instant) -> Result<(Mono, u64)> {
    let (mut busy_ns, mut busy_since) = (0u64, None);
    while !m.is_done() {
        let now = super::super::ns(epoch.elapsed());
        if let Some(t) = busy_since.take() {
            busy_ns += now - t;
        }
        if !m.poll(now).is_idle() {
            busy_since = Some(now);
        }
    }
    if let Some(t) = busy_since {
        busy_ns += super::super::ns(epoch.elapsed()) - t;
    }
    match m.error() {
        Some(e) => bail!("{e}"),
        None => Ok((m, busy_ns)),
    }
}

/// B1: two monolithic smoltcp stacks on the in-memory wire.
pub(super) fn smoltcp_mono(bytes: u64, mtu: usize, cpus: (CpuId, CpuId)) -> Result<Run> {
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
    let wall_ns = super::super::ns(epoch.elapsed());
    let ((tx, tx_busy_ns), tx_cpu) = tx;
    let ((rx, rx_busy_ns), rx_cpu) = rx;
    check_digests("B1", tx.report().digest, rx.report().digest)?;
    let segments = bytes.div_ceil(mtu as u64 - 40);
    let acks = tx.frames().saturating_sub(segments);
    let mono = Some(MonoWork { tx_busy_ns, rx_busy_ns, acks });
    Ok(Run { bytes, wall_ns, cpu_ns: tx_cpu + rx_cpu, joules: None, mono })
}

/// Runs `f`, adding the package energy RAPL measured where there is RAPL.
pub(super) fn with_energy(power: &PowerSources, f: impl FnOnce() -> Result<Run>) -> Result<Run> {
    let meter = EnergyMeter::start(power);
    let mut run = f()?;
    run.joules = meter.map(|m| m.joules()).transpose().context("reading RAPL")?;
    Ok(run)
}
