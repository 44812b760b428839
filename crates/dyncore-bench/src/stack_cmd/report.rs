//! `dyncore stack`'s report: the components, the runtime CPUs, power, the
//! throughput dip of crashes, every placement decision, and the trace.

use anyhow::{Context, Result};
use dyncore_core::placement::ComponentKind;
use dyncore_core::power::MODELLED;
use dyncore_net::control::Controller;

use super::args::{Args, TcpCrash};
use super::drive::Outcome;
use dyncore_report::table::Table;

/// The percentiles of `v` (ns) as "p50 / p99 / max" in µs, or "–".
pub(super) fn percentiles_us(v: &[u64]) -> String {
    if v.is_empty() {
        return "–".into();
    }
    let mut v = v.to_vec();
    v.sort_unstable();
    let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize] as f64 / 1e3;
    format!("{:.1} / {:.1} / {:.1} µs", at(0.5), at(0.99), at(1.0))
}

/// The tables of a run, and its trace with `--trace`; `bytes` is the
/// payload the senders moved (for joules per GB).
pub(super) fn tables(args: &Args, out: &Outcome, bytes: u64) -> Result<()> {
    let wall = out.wall_ns.max(1) as f64;
    let wall_s = wall / 1e9;
    say!("\n{}", components(out, wall).to_terminal());
    say!("{}", cpus(out, wall).to_terminal());
    let (cpu_s, joules) = out.ctl.totals();
    let gb = bytes as f64 / 1e9;
    say!(
        "power: {:.2} W on average, {:.1} J/GB, {:.2} CPU-seconds — {MODELLED}",
        joules / wall_s,
        if gb > 0.0 { joules / gb } else { 0.0 },
        cpu_s
    );
    if let Some(dip) = crash_dip(out) {
        say!("{dip}");
    }
    if args.tcp_crash == TcpCrash::Recover
        && let Some(tcp) = out.stack.iter().find(|s| s.kind() == ComponentKind::Tcp)
    {
        let c = tcp.component().counters();
        let copied = c.get("bytes_sent") + c.get("bytes_received");
        say!(
            "TCP checkpoints (--tcp-crash recover): {} written, {:.1} MB of buffered bytes copied into them, {:.2} \
             bytes per byte TCP copied to or from the applications",
            c.get("checkpoints"),
            c.get("checkpoint_bytes") as f64 / 1e6,
            c.get("checkpoint_bytes") as f64 / copied.max(1) as f64
        );
    }
    for s in out.stack.iter().filter(|s| s.component().version() != 1) {
        let c: Vec<String> =
            s.component().counters().snapshot().iter().map(|(n, v)| format!("{n} {v}")).collect();
        say!("{} version {}: {}", s.kind(), s.component().version(), c.join(", "));
    }
    for u in &out.updates {
        say!(
            "live update of {}: version {} → {}; it handled nothing for {:.1} µs (the old instance's last poll to \
             the new one ready)",
            u.kind,
            u.from,
            u.to,
            u.pause_ns as f64 / 1e3
        );
    }
    say!("\nplacement decisions ({}):", out.ctl.log.len());
    for d in &out.ctl.log {
        say!("{:>9.3} ms  {}  — {}", d.at_ns as f64 / 1e6, d.action, d.reason);
    }
    if let Some(path) = &args.trace {
        write_trace(path, &out.ctl).with_context(|| format!("writing {}", path.display()))?;
        say!("trace: {} (open in ui.perfetto.dev)", path.display());
    }
    Ok(())
}

fn components(out: &Outcome, wall: f64) -> Table {
    let mut t = Table::new(
        format!("The sending stack's components ({:.2} s on runtime CPUs)", wall / 1e9),
        &[
            "component",
            "version",
            "cpu now",
            "busy",
            "messages",
            "MB",
            "moves",
            "restarts",
            "crash → ready p50/p99/max",
            "crash → first message p50/p99/max",
            "updates (max pause)",
        ],
    );
    for (s, snap) in out.stack.iter().zip(&out.slots) {
        t.row(vec![
            s.kind().to_string(),
            s.component().version().to_string(),
            snap.cpu.to_string(),
            format!("{:.1}%", 100.0 * s.load.busy_ns as f64 / wall),
            s.load.messages.to_string(),
            format!("{:.1}", s.load.bytes as f64 / 1e6),
            snap.moves.to_string(),
            s.load.restarts.to_string(),
            percentiles_us(&s.restarts.ready_ns),
            percentiles_us(&s.restarts.first_message_ns),
            if s.load.updates > 0 {
                format!("{} ({:.1} µs)", s.load.updates, s.load.update_pause_ns_max as f64 / 1e3)
            } else {
                "–".into()
            },
        ]);
    }
    t
}

fn cpus(out: &Outcome, wall: f64) -> Table {
    let speeds = out.ctl.policy().speeds().clone();
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
            format!("{:.0}", c.wakeups as f64 / (wall / 1e9)),
            if c.wakeups > 0 {
                format!("{:.1} µs", c.wake_ns as f64 / c.wakeups as f64 / 1e3)
            } else {
                "–".into()
            },
            if c.wakeups > 0 { format!("{:.1} µs", c.wake_ns_max as f64 / 1e3) } else { "–".into() },
        ]);
    }
    t
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
