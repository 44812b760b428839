//! The report: tables on the terminal, `report.md` and `results.json`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use dyncore_core::power::MODELLED;
use dyncore_net::power::PowerSources;
use dyncore_sim::netstack::predict::LiveThreads;
use serde_json::json;

use super::Args;
use super::predict::Prediction;
use super::rows::{Row, SplitRow};
use super::transport;
use crate::{Goal, goals_table};
use dyncore_report::report::write_file;
use dyncore_report::table::Table;

/// Everything the report says.
pub(super) struct Report<'a> {
    pub dir: &'a Path,
    pub args: &'a Args,
    pub bytes: u64,
    pub machine: &'a str,
    pub power: &'a PowerSources,
    pub mhz: Option<f64>,
    pub rows: &'a [Row],
    pub srows: &'a [SplitRow],
    pub goals: &'a [Goal],
    pub transports: &'a [transport::Transport],
    pub predictions: Option<&'a [Prediction]>,
    pub threads: Option<&'a LiveThreads>,
    /// The monolithic stack's cost runs: its median segment per MTU.
    pub mono_points: &'a [super::costs::MonoPoint],
    /// The costs the prediction ran and the cost runs' points.
    pub costs: Option<&'a super::costs::Measured>,
}

/// The report's tables.
struct Tables {
    streams: Table,
    split: Table,
    b4: Table,
    transports: Table,
    predictions: Table,
    components: Table,
    goals: Table,
}

pub(super) fn write_report(r: &Report<'_>) -> Result<()> {
    let t = Tables {
        streams: streams(r),
        split: split(r),
        b4: b4(r),
        transports: transports(r),
        predictions: predictions(r),
        components: components(r),
        goals: goals_table("Goals", r.goals),
    };
    for x in [&t.streams, &t.split, &t.b4, &t.transports, &t.predictions, &t.components, &t.goals] {
        if !x.rows.is_empty() {
            say!("\n{}", x.to_terminal());
        }
    }
    write_file(&r.dir.join("report.md"), markdown(r, &t)?.as_bytes())?;
    let j = json!({
        "machine": r.machine,
        "power_sources": r.power.describe(),
        "cpuinfo_mhz": r.mhz,
        "bytes_per_stream": r.bytes,
        "mtu": r.args.mtu,
        "rows": r.rows,
        "split_rows": r.srows,
        "transports": r.transports,
        "goals": r.goals,
        "sim_against_live": r.predictions,
        "threads_beside_the_stack": r.threads,
        "stack_costs": r.costs,
        "monolithic_cost_points": r.mono_points,
    });
    write_file(&r.dir.join("results.json"), serde_json::to_string_pretty(&j)?.as_bytes())?;
    Ok(())
}

fn predictions(r: &Report<'_>) -> Table {
    let mut t = Table::new(
        "Sim against live: the simulator's model of the layout that runs, with this machine's costs measured in \
         this run",
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
    for x in r.predictions.unwrap_or_default() {
        t.row(vec![
            x.key.into(),
            format!("{:.2}", x.predicted_gbps),
            format!("{:.2}", x.measured_gbps),
            format!("{:+.0}%", 100.0 * x.gbps_diff()),
            format!("{:.2}", x.predicted_cpu_s_per_gb),
            x.measured_cpu_s_per_gb.map_or("–".into(), |m| format!("{m:.2}")),
            x.cpu_diff().map_or("–".into(), |d| format!("{:+.0}%", 100.0 * d)),
        ]);
    }
    t
}

/// B2 and B3 per component: the model's cycles per byte against the
/// streams', and the ACKs per MB.
fn components(r: &Report<'_>) -> Table {
    let mut t = Table::new(
        "Which cost differs: busy cycles per payload byte (B1 each thread's polls that did work, B2 and B3 each \
         component's), the model's against the streams' (median of the rounds), and ACKs per MB",
        &["", "component", "model cycles/B", "streams' cycles/B", "difference"],
    );
    for x in r.predictions.unwrap_or_default() {
        for &(k, model, live) in &x.components {
            t.row(vec![
                x.key.into(),
                format!("{k:?}").to_lowercase(),
                format!("{model:.3}"),
                format!("{live:.3}"),
                format!("{:+.0}%", 100.0 * (model / live.max(1e-12) - 1.0)),
            ]);
        }
        for &(what, model, live) in &x.threads {
            t.row(vec![
                x.key.into(),
                what.into(),
                format!("{model:.3}"),
                format!("{live:.3}"),
                format!("{:+.0}%", 100.0 * (model / live.max(1e-12) - 1.0)),
            ]);
        }
        if let Some((model, live)) = x.acks_per_mb {
            t.row(vec![
                x.key.into(),
                "ACKs per MB".into(),
                format!("{model:.1}"),
                format!("{live:.1}"),
                format!("{:+.0}%", 100.0 * (model / live.max(1e-12) - 1.0)),
            ]);
        }
    }
    t
}

fn streams(r: &Report<'_>) -> Table {
    let mut t = Table::new(
        format!("TCP streams, {} rounds of {} MiB (median, min–max)", r.args.runs, r.bytes >> 20),
        &["", "configuration", "Gbps", "spread", "CPU-s/GB", "cycles/B", "J/GB (modelled)", "J/GB (RAPL)"],
    );
    for x in r.rows {
        t.row(vec![
            x.key.into(),
            x.what.into(),
            format!("{:.2}", x.gbps_median),
            format!("{:.2}–{:.2}", x.gbps_min, x.gbps_max),
            format!("{:.2}", x.cpu_s_per_gb),
            x.cycles_per_byte.map_or("–".into(), |c| format!("{c:.1}")),
            format!("{:.1}", x.joules_per_gb_modelled),
            x.joules_per_gb_measured.map_or("no RAPL".into(), |j| format!("{j:.1}")),
        ]);
    }
    t
}

fn transports(r: &Report<'_>) -> Table {
    let mut t = Table::new(
        format!("Moving {}-byte frames between two pinned threads", r.args.mtu),
        &["transport", "frames/s", "GB/s", "ring items per frame"],
    );
    for x in r.transports {
        t.row(vec![
            x.what.into(),
            format!("{:.2} M", x.frames_per_s / 1e6),
            format!("{:.2}", x.bytes_per_s / 1e9),
            x.items_per_frame.to_string(),
        ]);
    }
    t
}

fn split(r: &Report<'_>) -> Table {
    let mut t = Table::new(
        format!(
            "The split stack on runtime CPUs, {} rounds of {} MiB (median, min–max)",
            r.args.runs,
            r.bytes >> 20
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
    for x in r.srows {
        let u: Vec<String> = x.util.iter().map(|(_, u)| format!("{:.0}", u * 100.0)).collect();
        t.row(vec![
            x.key.into(),
            x.what.into(),
            format!("{:.2}", x.gbps_median),
            format!("{:.2}–{:.2}", x.gbps_min, x.gbps_max),
            format!("{}%", u.join("/")),
            format!("{:.0}", x.wakeups_per_s),
            x.cycles_per_byte.map_or("–".into(), |c| format!("{c:.1}")),
            format!("{:.1}", x.joules_per_gb_modelled),
        ]);
    }
    t
}

fn b4(r: &Report<'_>) -> Table {
    let mut t = Table::new(
        "B4: dynamic under a load step, against always spread (B4s); sums over the rounds",
        &["", "reaction", "Gbps before / after it", "idle CPU-ms", "idle J (modelled)", "stream CPU-s"],
    );
    for x in &r.srows[2..4] {
        t.row(vec![
            x.key.into(),
            x.reaction_ms_median.map_or("no change".into(), |m| format!("{m:.0} ms")),
            match (x.gbps_before_reaction, x.gbps_after_reaction) {
                (Some(b), Some(a)) => format!("{b:.2} / {a:.2}"),
                _ => "–".into(),
            },
            format!("{:.3}", x.idle_cpu_s * 1e3),
            format!("{:.3}", x.idle_joules),
            format!("{:.3}", x.stream_cpu_s),
        ]);
    }
    t
}

fn markdown(r: &Report<'_>, t: &Tables) -> Result<String> {
    let mut md = String::new();
    writeln!(md, "# dyncore bench stack\n")?;
    writeln!(md, "Machine: {}.  ", r.machine)?;
    writeln!(md, "Power sources: {}.  ", r.power.describe())?;
    writeln!(
        md,
        "CPU time is the two threads' CPU clocks: kernel work done in interrupt context or by kernel \
         threads (softirq) is not in it. Cycles per byte use the clock /proc/cpuinfo states ({}); joules \
         are {MODELLED}, every CPU-second counted as a busy core at 2267 MHz.\n",
        r.mhz.map_or("none stated".into(), |m| format!("{m:.0} MHz"))
    )?;
    writeln!(
        md,
        "Every configuration runs once per round: B0-B4s in interleaved order ({}), B5 last because its \
         target is the round's B2. Both ends hash the stream and a mismatch fails the run. The in-memory \
         wire's MTU is {} bytes; loopback's is the kernel's.\n",
        crate::stats::ORDER_TEXT,
        r.args.mtu
    )?;
    writeln!(md, "## Streams\n\n{}", t.streams.to_markdown())?;
    writeln!(
        md,
        "## The split stack on runtime CPUs\n\nThe sending stack's five components on pinned runtime \
         CPUs placed by the placement policy (the live controller samples every 10 ms); the application \
         and a monolithic receiver on plain threads. Utilisation is each component's time in polls that \
         did work over the stream; cycles per byte count the stack CPUs' running time (polling included, \
         the application's and the receiver's threads not); joules are {MODELLED}, per CPU in use at its \
         speed step over each sample window.\n\n{}\n{}",
        t.split.to_markdown(),
        t.b4.to_markdown()
    )?;
    writeln!(
        md,
        "## Packets larger than a ring item\n\nA ring item is one cache line. The split stack passes \
         buffer indices from per-stack pools in its rings (a packet crosses IP and the filter without a \
         copy); the alternative is to chunk each frame into cache-line items.\n\n{}",
        t.transports.to_markdown()
    )?;
    if !t.predictions.rows.is_empty() {
        let beside = r.threads.map_or(String::new(), |th| {
            format!(
                " The threads beside the stack, measured in this run: the application {:.2} cycles per byte \
                 (making the stream and hashing it; through the split stack {:.2} more, its send call's copy \
                 into the send pool), the receiver {:.2} per byte (its copy and hash) on top of its stack's; a \
                 stack CPU polls {:.1} µs with nothing to do before it parks.",
                th.app_cycles_per_byte,
                th.app_call_copy_cycles_per_byte,
                th.receiver_cycles_per_byte,
                th.spin_ns as f64 / 1e3
            ) + &mono_costs(r, th)
        });
        writeln!(
            md,
            "## Sim against live\n\nThe split stack's per-component costs, measured in this run (consolidated \
             on one runtime CPU at MTU 576 and 1500, as `--write-profile` writes them), and the monolithic \
             stack's (B1's ends and every configuration's receiver, in B1 cost runs at the same MTUs), fed to the simulator's \
             network-stack model (`dyncore_sim::netstack::predict`) of the layout that runs here: two CPUs, the \
             stack's components on them as the policy put them, and beside them the sending application and \
             the receiving stack, which share those CPUs (B1: each polling thread runs its application too).\
             {beside} B4 and B5 (the policies) are not predicted here.\n\n{}\n{}",
            t.predictions.to_markdown(),
            t.components.to_markdown()
        )?;
    }
    writeln!(md, "## Goals\n\n{}", t.goals.to_markdown())?;
    Ok(md)
}

/// The monolithic stack's costs per segment at the bench's MTU beside the
/// split components' that it does the work of (TCP, IP and the driver).
fn mono_costs(r: &Report<'_>, th: &LiveThreads) -> String {
    let p = (r.args.mtu - 40) as u64;
    let split = r.costs.map_or(String::new(), |c| {
        let c = &c.costs;
        format!(
            "; the split stack's TCP, IP and driver, consolidated, {:.0} (each passes its messages on through a \
             channel and polls for them)",
            c.tcp.cycles(p) + c.ip.cycles(p) + c.driver.cycles(p)
        )
    });
    let points: Vec<String> = r
        .mono_points
        .iter()
        .map(|m| format!("MTU {}: {:.0} and {:.0}", m.mtu, m.send_cycles, m.receive_cycles))
        .collect();
    format!(
        " The monolithic stack per {p}-byte segment, its applications' work taken out: sending {:.0} cycles \
         (ACKs included), receiving {:.0}{split}; its cost runs' medians per segment ({}).",
        th.mono_send.cycles(p),
        th.mono_receive.cycles(p),
        points.join("; ")
    )
}
