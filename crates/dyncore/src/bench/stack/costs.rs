//! The split stack's costs, measured in the run (`--write-profile` writes
//! them into a machine profile's `[stack]`), and the costs of the threads
//! beside it that the prediction needs.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use dyncore_core::CpuId;
use dyncore_core::placement::{ComponentKind, Mode};

use dyncore_sim::netstack::predict::LiveThreads;

use super::rows::median;
use super::{split, transport};
use crate::report::write_file;

/// `--write-profile`: the split stack's costs, measured consolidated on one
/// runtime CPU (no cross-core traffic inside the stack) at two MTUs, so
/// that each component's cost per message splits into a fixed part and a
/// part per byte: with `c(P)` the median cycles per message at payload
/// bytes per message `P`, `per_byte = (c(P₂) - c(P₁)) / (P₂ - P₁)` and
/// `per_packet = c(P₁) - per_byte · P₁` (both clamped at 0). The channel
/// cost is one message through a ring between two pinned threads (the pool
/// indices transport); the wake-up cost is the mean over the runs' wake-ups.
pub(super) fn measure_costs(
    cpu: CpuId,
    bytes: u64,
    runs: usize,
    mhz: Option<f64>,
    transports: &[transport::Transport],
) -> Result<(dyncore_core::profile::StackCosts, u64)> {
    use dyncore_core::profile::{ComponentCost, StackCosts};
    let mhz = mhz.context("no stack costs: /proc/cpuinfo states no clock to count cycles at")?;
    say!("measuring the split stack's costs (consolidated, MTU 576 and 1500)…");
    let sample = std::time::Duration::from_millis(10);
    let mut points: BTreeMap<ComponentKind, Vec<(f64, f64)>> = BTreeMap::new();
    let (mut wakeups, mut wake_ns) = (0u64, 0u64);
    let (mut polled_ns, mut parks) = (0u64, 0u64);
    for mtu in [576, 1500] {
        let mut per: BTreeMap<ComponentKind, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        for _ in 0..runs.max(3) {
            let r = split::run(Mode::Consolidate, &[cpu], bytes, mtu, sample, std::time::Duration::ZERO)
                .with_context(|| format!("profile run at MTU {mtu}"))?;
            wakeups += r.wakeups;
            wake_ns += r.wake_ns;
            polled_ns += r.run_ns.saturating_sub(r.busy_cpu_ns);
            parks += r.parks;
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
    // How long a CPU polls with nothing to do before it parks.
    let spin_ns = polled_ns.checked_div(parks).unwrap_or(0);
    Ok((costs, spin_ns))
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
        crate::bench::command_line(),
        crate::bench::today()
    );
    write_file(path, format!("{comment}{note}{body}").as_bytes())?;
    say!("the [stack] section of {} written", path.display());
    Ok(())
}

/// The threads beside the stack, measured on this thread (cycles at the
/// clock `/proc/cpuinfo` states), and the stack CPUs' polling before they
/// park (`spin_ns`, from the cost runs): the sending application makes each byte
/// from the stream generator and hashes it; the receiving application
/// copies each byte out of its stack and hashes it. 64 MiB in 64 KiB
/// chunks, as the applications move them.
pub(super) fn measure_threads(mhz: f64, spin_ns: u64) -> LiveThreads {
    use dyncore_net::stream::{StreamGen, StreamHash};
    const CHUNK: usize = 64 * 1024;
    const TOTAL: usize = 64 << 20;
    let mut stream = StreamGen::new(1);
    let (mut buf, mut copy) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    let (mut h1, mut h2) = (StreamHash::new(), StreamHash::new());
    let t0 = std::time::Instant::now();
    for _ in 0..TOTAL / CHUNK {
        stream.fill(&mut buf);
        h1.update(&buf);
    }
    let app_ns = t0.elapsed().as_nanos() as f64;
    let t1 = std::time::Instant::now();
    for _ in 0..TOTAL / CHUNK {
        copy.copy_from_slice(std::hint::black_box(&buf));
        h2.update(&copy);
    }
    let recv_ns = t1.elapsed().as_nanos() as f64;
    std::hint::black_box((h1.digest(), h2.digest()));
    let per_byte = |ns: f64| ns * mhz / 1e3 / TOTAL as f64;
    LiveThreads {
        app_cycles_per_byte: per_byte(app_ns),
        receiver_cycles_per_byte: per_byte(recv_ns),
        app_chunk: CHUNK as u64,
        spin_ns,
    }
}
