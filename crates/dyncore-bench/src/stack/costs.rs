//! The split stack's costs, measured in the run (`--write-profile` writes
//! them into a machine profile's `[stack]`), and the costs of the threads
//! beside it that the prediction needs.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use dyncore_core::CpuId;
use dyncore_core::placement::{ComponentKind, Mode};
use dyncore_core::profile::ComponentCost;

use dyncore_sim::netstack::predict::LiveThreads;

use super::baselines::thread_cpu_ns;
use super::rows::median;
use super::{split, transport};
use dyncore_report::report::write_file;

/// What the cost runs measured: the costs, how long a CPU polls before it
/// parks, and each component's median point per MTU.
#[derive(Debug, Clone, serde::Serialize)]
pub(super) struct Measured {
    pub(super) costs: dyncore_core::profile::StackCosts,
    pub(super) spin_ns: u64,
    pub(super) points: Vec<CostPoint>,
}

/// A component's median message in the cost runs at one MTU.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(super) struct CostPoint {
    pub(super) mtu: usize,
    pub(super) kind: ComponentKind,
    /// Payload bytes per message (what `c(P)` is fitted over).
    pub(super) bytes_per_msg: f64,
    pub(super) cycles_per_msg: f64,
    /// Messages per MB of payload (median of the runs).
    pub(super) msgs_per_mb: f64,
}

/// A component's runs at one MTU: cycles per message, bytes per message,
/// messages per MB.
type Samples = (Vec<f64>, Vec<f64>, Vec<f64>);

/// `--write-profile`: the split stack's costs, measured consolidated on one
/// runtime CPU (no cross-core traffic inside the stack) at two MTUs, so
/// that each component's cost per message splits into a fixed part and a
/// part per byte: with `c(P)` the median cycles per message at payload
/// bytes per message `P`, `per_byte = (c(P₂) - c(P₁)) / (P₂ - P₁)` and
/// `per_packet = c(P₁) - per_byte · P₁` (both clamped at 0). The channel
/// cost is one message through a ring between two pinned threads (the pool
/// indices transport); the wake-up cost is the mean over the runs' wake-ups.
pub(super) fn measure_costs(
    cpus: (CpuId, CpuId),
    bytes: u64,
    runs: usize,
    mhz: Option<f64>,
    transports: &[transport::Transport],
) -> Result<Measured> {
    use dyncore_core::profile::StackCosts;
    let mhz = mhz.context("no stack costs: /proc/cpuinfo states no clock to count cycles at")?;
    say!("measuring the split stack's costs (consolidated, MTU 576 and 1500)…");
    let sample = std::time::Duration::from_millis(10);
    let mut points: BTreeMap<ComponentKind, Vec<(f64, f64)>> = BTreeMap::new();
    let (mut wakeups, mut wake_ns) = (0u64, 0u64);
    let (mut polled_ns, mut parks) = (0u64, 0u64);
    let mut shares = Vec::new();
    let mut cost_points = Vec::new();
    for mtu in [576, 1500] {
        let mut per: BTreeMap<ComponentKind, Samples> = BTreeMap::new();
        for _ in 0..runs.max(3) {
            // The stack alone on the sender's CPU; the application and the
            // receiver on the other.
            let beside = (cpus.1, cpus.1);
            let r = split::run(
                Mode::Consolidate,
                &[cpus.0],
                beside,
                bytes,
                mtu,
                sample,
                std::time::Duration::ZERO,
            )
            .with_context(|| format!("profile run at MTU {mtu}"))?;
            wakeups += r.wakeups;
            wake_ns += r.wake_ns;
            polled_ns += (r.run_ns.saturating_sub(r.busy_cpu_ns) as f64 * r.cpu_share) as u64;
            shares.push(r.cpu_share);
            parks += r.parks;
            for (k, busy, msgs, b) in r.work {
                if msgs > 0 {
                    let e = per.entry(k).or_default();
                    // Wall time in steps, scaled to the CPU time the
                    // worker really had.
                    e.0.push(busy as f64 * r.cpu_share * mhz / 1e3 / msgs as f64);
                    e.1.push(b as f64 / msgs as f64);
                    e.2.push(msgs as f64 / (r.bytes as f64 / 1e6));
                }
            }
        }
        for (kind, (c, p, m)) in per {
            let (bytes_per_msg, cycles_per_msg) = (median(p).unwrap_or(0.0), median(c).unwrap_or(0.0));
            points.entry(kind).or_default().push((bytes_per_msg, cycles_per_msg));
            let msgs_per_mb = median(m).unwrap_or(0.0);
            cost_points.push(CostPoint { mtu, kind, bytes_per_msg, cycles_per_msg, msgs_per_mb });
        }
    }
    say!(
        "  the stack CPUs' threads had a real CPU {:.0}% (median; range {:.0}–{:.0}%) of their running time in these \
         runs; their wall-time costs are scaled by it",
        median(shares.clone()).unwrap_or(1.0) * 100.0,
        shares.iter().copied().fold(f64::INFINITY, f64::min).min(1.0) * 100.0,
        shares.iter().copied().fold(0.0, f64::max) * 100.0
    );
    let cost = |k: ComponentKind| points.get(&k).map_or_else(ComponentCost::default, |p| fit(p));
    anyhow::ensure!(!transports.is_empty(), "no transport measured");
    let costs = StackCosts {
        cpu_mhz: mhz,
        channel_cycles_per_msg: channel_cycles(mhz, 1500),
        wakeup_ns: if wakeups > 0 { wake_ns as f64 / wakeups as f64 } else { 0.0 },
        syscall: cost(ComponentKind::Syscall),
        tcp: cost(ComponentKind::Tcp),
        ip: cost(ComponentKind::Ip),
        filter: cost(ComponentKind::Filter),
        driver: cost(ComponentKind::Driver),
    };
    costs.validate().map_err(|e| anyhow::anyhow!("the measured stack costs are not valid: {e}"))?;
    // How long a CPU polls with nothing to do before it parks.
    let spin_ns = polled_ns.checked_div(parks).unwrap_or(0);
    Ok(Measured { costs, spin_ns, points: cost_points })
}

/// A cost per packet and per byte from its median cycles per message `c`
/// at two payload sizes `P` (`(P, c)`, the smaller first): `per_byte =
/// (c₂ - c₁) / (P₂ - P₁)`, `per_packet = c₁ - per_byte · P₁`, both clamped
/// at 0; one point (or two of one size) gives a cost per packet only.
fn fit(points: &[(f64, f64)]) -> ComponentCost {
    match points {
        [(p1, c1), (p2, c2)] if (p2 - p1).abs() > 1.0 => {
            let per_byte = ((c2 - c1) / (p2 - p1)).max(0.0);
            ComponentCost { cycles_per_packet: (c1 - per_byte * p1).max(0.0), cycles_per_byte: per_byte }
        }
        [.., (_, c)] => ComponentCost { cycles_per_packet: *c, cycles_per_byte: 0.0 },
        [] => ComponentCost::default(),
    }
}

/// One 1500-byte frame through the stack's channel (a pool buffer filled,
/// its index pushed and published, peeked, copied out, freed, committed),
/// producer and consumer on this one thread as on a consolidated CPU, in
/// this thread's CPU time: the pinned pair of the transport table measures
/// a handoff between two threads, which on a shared machine is mostly the
/// wait for the other thread to be scheduled (0.11 M frames/s at load 15,
/// 20 000 cycles a frame), not the channel's cost.
fn channel_cycles(mhz: f64, mtu: usize) -> f64 {
    use dyncore_net::chan::{Bell, Frame, channel};
    use dyncore_net::pool::Pool;
    const FRAMES: usize = 200_000;
    const BATCH: usize = 32;
    let bell = Bell::new();
    let (mut alloc, mut freers) = Pool::create("cost", 256, mtu, 1, bell.clone());
    let mut free = freers.pop().expect("one freer");
    let (mut tx, mut rx) = channel::<Frame>("cost", 256, bell);
    let src: Vec<u8> = (0..mtu).map(|i| i as u8).collect();
    let mut dst = vec![0u8; mtu];
    let mut check = 0u64;
    let t0 = thread_cpu_ns();
    for _ in 0..FRAMES / BATCH {
        for _ in 0..BATCH {
            let buf = (0..1000)
                .find_map(|_| {
                    alloc.alloc().or_else(|| {
                        free.flush();
                        None
                    })
                })
                .expect("the pool gives back the buffers each batch freed");
            alloc.pool().with(buf, |b| b.extend_from_slice(&src));
            tx.push(Frame { buf, len: mtu as u32 });
        }
        tx.publish();
        while let Some(f) = rx.peek() {
            free.pool().with(f.buf, |b| dst.copy_from_slice(b));
            check = check.wrapping_add(u64::from(dst[check as usize % mtu]));
            free.free(f.buf);
            rx.commit();
        }
        rx.release();
        free.flush();
        alloc.release();
    }
    let ns = thread_cpu_ns().saturating_sub(t0) as f64;
    std::hint::black_box(check);
    ns * mhz / 1e3 / FRAMES as f64
}

/// The machine profile at `path`, and its text.
pub(super) fn read_profile(path: &Path) -> Result<(String, dyncore_core::profile::MachineProfile)> {
    let text = std::fs::read_to_string(path).with_context(|| {
        format!("reading {} (make it with `dyncore bench reconfig --write-profile` first)", path.display())
    })?;
    let profile =
        toml::from_str(&text).with_context(|| format!("{} is not a machine profile", path.display()))?;
    Ok((text, profile))
}

/// Writes `costs` as the `[stack]` section of the machine profile at
/// `path`, keeping the rest of it.
pub(super) fn write_profile(path: &Path, costs: dyncore_core::profile::StackCosts) -> Result<()> {
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
        crate::command_line(),
        crate::today()
    );
    write_file(path, format!("{comment}{note}{body}").as_bytes())?;
    say!("the [stack] section of {} written", path.display());
    Ok(())
}

/// The threads beside the stack, measured on this thread in its own CPU
/// time (cycles at the clock `/proc/cpuinfo` states; CPU time, not wall
/// time, so that other processes sharing the CPU do not inflate the
/// costs), and the stack CPUs' polling before they
/// park (`spin_ns`, from the cost runs): the sending application makes each byte
/// from the stream generator and hashes it (and, sending through the split
/// stack, copies it into the send call's buffer); the receiving application
/// copies each byte out of its stack and hashes it. 64 MiB in 64 KiB
/// chunks, as the applications move them. Then the monolithic stack's own
/// costs ([`measure_mono`]).
pub(super) fn measure_threads(
    mhz: f64,
    spin_ns: u64,
    cpus: (CpuId, CpuId),
    bytes: u64,
    runs: usize,
) -> Result<(LiveThreads, Vec<MonoPoint>)> {
    use dyncore_net::stream::{StreamGen, StreamHash};
    const CHUNK: usize = 64 * 1024;
    const TOTAL: usize = 64 << 20;
    let mut stream = StreamGen::new(1);
    let (mut buf, mut copy) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    let (mut h1, mut h2) = (StreamHash::new(), StreamHash::new());
    let t0 = thread_cpu_ns();
    for _ in 0..TOTAL / CHUNK {
        stream.fill(&mut buf);
        h1.update(&buf);
    }
    let app_ns = thread_cpu_ns().saturating_sub(t0) as f64;
    let t1 = thread_cpu_ns();
    for _ in 0..TOTAL / CHUNK {
        copy.copy_from_slice(std::hint::black_box(&buf));
        h2.update(&copy);
    }
    let recv_ns = thread_cpu_ns().saturating_sub(t1) as f64;
    // The split stack's send call copies the chunk into a buffer of its
    // send pool, on the application's thread.
    let t2 = thread_cpu_ns();
    for _ in 0..TOTAL / CHUNK {
        copy.copy_from_slice(std::hint::black_box(&buf));
        std::hint::black_box(&copy);
    }
    let call_ns = thread_cpu_ns().saturating_sub(t2) as f64;
    std::hint::black_box((h1.digest(), h2.digest()));
    let per_byte = |ns: f64| ns * mhz / 1e3 / TOTAL as f64;
    let (app, receiver) = (per_byte(app_ns), per_byte(recv_ns));
    let (mono_send, mono_receive, points) = measure_mono(cpus, bytes, runs, mhz, app, receiver)?;
    let threads = LiveThreads {
        app_cycles_per_byte: app,
        app_call_copy_cycles_per_byte: per_byte(call_ns),
        receiver_cycles_per_byte: receiver,
        app_chunk: CHUNK as u64,
        spin_ns,
        mono_send,
        mono_receive,
    };
    Ok((threads, points))
}

/// The monolithic stack's median segment at one MTU in its cost runs:
/// cycles per segment of each end, its application's work taken out.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(super) struct MonoPoint {
    pub(super) mtu: usize,
    pub(super) bytes_per_segment: f64,
    pub(super) send_cycles: f64,
    pub(super) receive_cycles: f64,
}

/// The monolithic stack's own costs per segment, each end's: B1 streams
/// of `bytes` at MTU 576 and 1500 (`runs` of each, at least 3), each
/// thread's time in polls that did work in cycles at `mhz`, less its
/// application's work as measured on this thread (`app` cycles per byte
/// sent, `receiver` per byte received), over the stream's segments; the
/// medians fitted per packet and per byte as the split's costs are
/// ([`fit`]). The sending end's cost holds its share of the ACKs.
fn measure_mono(
    cpus: (CpuId, CpuId),
    bytes: u64,
    runs: usize,
    mhz: f64,
    app: f64,
    receiver: f64,
) -> Result<(ComponentCost, ComponentCost, Vec<MonoPoint>)> {
    say!("measuring the monolithic stack's costs (MTU 576 and 1500)…");
    let mut points = Vec::new();
    for mtu in [576, 1500] {
        let (mut send, mut recv) = (Vec::new(), Vec::new());
        for _ in 0..runs.max(3) {
            let r = super::baselines::smoltcp_mono(bytes, mtu, cpus)
                .with_context(|| format!("monolithic cost run at MTU {mtu}"))?;
            let w = r.mono.context("a monolithic run reports its threads' work")?;
            let segments = r.bytes.div_ceil(mtu as u64 - 40) as f64;
            let cycles = |ns: u64, beside: f64| (ns as f64 * mhz / 1e3 - beside * r.bytes as f64) / segments;
            send.push(cycles(w.tx_busy_ns, app));
            recv.push(cycles(w.rx_busy_ns, receiver));
        }
        let p = MonoPoint {
            mtu,
            bytes_per_segment: (mtu - 40) as f64,
            send_cycles: median(send).unwrap_or(0.0),
            receive_cycles: median(recv).unwrap_or(0.0),
        };
        points.push(p);
    }
    let at = |f: fn(&MonoPoint) -> f64| -> Vec<(f64, f64)> {
        points.iter().map(|p| (p.bytes_per_segment, f(p))).collect()
    };
    let (send, recv) = (fit(&at(|p| p.send_cycles)), fit(&at(|p| p.receive_cycles)));
    Ok((send, recv, points))
}
