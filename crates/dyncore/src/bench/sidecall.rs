//! `dyncore bench sidecall`: sidecalls against the kernel's mechanisms and
//! peer queues, measured side by side in one run on this machine, plus the
//! interrupt-virtualisation experiment (Sidecore paper, Figure 4).
//!
//! Writes `<out>/bench-sidecall/{report.md, results.json, latency.{png,svg},
//! irq-latency.{png,svg}, irq-redundant.{png,svg}}`.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use dyncore_core::{CpuId, CpuSet};
use dyncore_runtime::affinity::{allowed_cpus, set_current_thread_affinity};
use dyncore_runtime::sidecore::{
    CpuidLeaf, IrqConfig, IrqMode, NullService, PteUpdate, QueryService, RadixMap, Service, Sidecore,
    SidecoreConfig, StateService, StateTrap, irq,
};
use serde_json::json;

use super::{Goal, goals_table, percentile};
use crate::plot::{BarChart, LineChart, Series, write_bar_chart, write_line_chart};
use crate::report::write_file;
use crate::table::Table;

mod measure;

use measure::{Clock, Stats, measure, pinned};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Round trips per latency measurement.
    #[arg(long, default_value_t = 200_000)]
    pub iters: u64,
    /// A run of a few seconds: 20 000 round trips, short throughput runs, 200 packets per guest count.
    #[arg(long)]
    pub quick: bool,
    /// CPU of the sidecore (server) threads; default: the last allowed CPU.
    #[arg(long)]
    pub server_cpu: Option<CpuId>,
    /// CPU of the measuring client thread; default: the first other allowed CPU.
    #[arg(long)]
    pub client_cpu: Option<CpuId>,
    /// Packets per interrupt-virtualisation configuration (default 2000, quick 200).
    #[arg(long)]
    pub irq_packets: Option<usize>,
    /// Seconds per throughput configuration (default 0.5, quick 0.1).
    #[arg(long)]
    pub throughput_secs: Option<f64>,
}

/// One row of the latency table.
#[derive(Debug, Clone, serde::Serialize)]
struct Row {
    key: &'static str,
    label: &'static str,
    what: String,
    stats: Stats,
}

/// Sidecore throughput of one configuration.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Tput {
    clients: usize,
    batched: bool,
    /// More client threads than free cores.
    oversubscribed: bool,
    requests_per_s: f64,
}

/// One configuration of the interrupt-virtualisation experiment.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct IrqRow {
    guests: usize,
    #[serde(serialize_with = "ser_mode")]
    mode: IrqMode,
    p25_ns: f64,
    median_ns: f64,
    p75_ns: f64,
    signals_per_packet: f64,
    redundant_signals_per_packet: f64,
    empty_wakeups_per_packet: f64,
}

fn ser_mode<S: serde::Serializer>(m: &IrqMode, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(mode_name(*m))
}

/// The CPUID leaf queried (processor signature and feature bits).
const CPUID_LEAF_1: CpuidLeaf = CpuidLeaf { leaf: 1, subleaf: 0 };

/// Guest counts of the interrupt-virtualisation experiment (paper: up to 32).
const GUESTS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];
/// The baseline (8-bit register, handler woken like an interrupt), its
/// polled-handler control, and the sidecore.
const IRQ_MODES: [IrqMode; 3] = [IrqMode::SharedRegister, IrqMode::SharedRegisterPolled, IrqMode::Sidecore];

pub fn run(args: &Args, out: &Path) -> Result<()> {
    let dir = out.join("bench-sidecall");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let iters = if args.quick { args.iters.min(20_000) } else { args.iters };
    let tput = Duration::from_secs_f64(args.throughput_secs.unwrap_or(if args.quick { 0.1 } else { 0.5 }));
    let irq_packets = args.irq_packets.unwrap_or(if args.quick { 200 } else { 2000 });
    let allowed = allowed_cpus()?;
    let server_cpu = args.server_cpu.or(allowed.last()).context("no CPU allowed")?;
    let client_cpu =
        args.client_cpu.or_else(|| allowed.iter().find(|&c| c != server_cpu)).unwrap_or(server_cpu);
    for c in [server_cpu, client_cpu] {
        anyhow::ensure!(allowed.contains(c), "CPU {c} is not in this process's affinity mask ({allowed})");
    }
    let two_cores = server_cpu != client_cpu;
    let hypervisor = super::cpu_has_flag("hypervisor");
    let machine = super::machine_description();
    let mut skipped: Vec<String> = Vec::new();
    println!("dyncore bench sidecall — {machine}");
    println!(
        "allowed CPUs {allowed}; server on CPU {server_cpu}, client on CPU {client_cpu}; {iters} round trips per measurement"
    );
    println!("UMWAIT/TPAUSE (waitpkg): {}", waitpkg_text());
    let clock = Clock::calibrate();
    let mut rows: Vec<Row> = Vec::new();
    let mut push = |key, label, what: String, stats: Stats| {
        println!("  {label:<22} median {:>9.0} ns   p99 {:>9.0} ns", stats.median_ns, stats.p99_ns);
        rows.push(Row { key, label, what, stats });
    };

    let cpus = (client_cpu, server_cpu);

    // Cross-core transports.
    if two_cores {
        println!("measuring cross-core round trips…");
        push(
            "raw",
            "raw spin",
            "raw spin ping-pong between two pinned threads (the floor)".into(),
            measure::raw_spin(&clock, iters, client_cpu, server_cpu)?,
        );
        push(
            "sc_null",
            "sidecall Null",
            "sidecall: Null".into(),
            same_calls(&clock, iters, Arc::new(NullService), true, cpus, ())?,
        );
        push(
            "sc_query",
            "sidecall Query",
            "sidecall: Query (CPUID leaf 1 from the sidecore's table)".into(),
            same_calls(&clock, iters, Arc::new(QueryService::new()), true, cpus, CPUID_LEAF_1)?,
        );
        push(
            "sc_state",
            "sidecall State",
            "sidecall: State update (radix-map entry)".into(),
            state_calls(&clock, iters, StateTrap::Lock, true, cpus)?,
        );
        push(
            "futex",
            "futex",
            "futex wake/wait ping-pong across cores".into(),
            measure::futex(&clock, iters.min(50_000), client_cpu, server_cpu)?,
        );
        push(
            "pipe",
            "pipe",
            "pipe ping-pong (1 byte each way)".into(),
            measure::pipe(&clock, iters.min(50_000), client_cpu, server_cpu)?,
        );
        push(
            "rtrb",
            "rtrb",
            "rtrb SPSC queue ping-pong".into(),
            measure::rtrb_queue(&clock, iters, client_cpu, server_cpu)?,
        );
        push(
            "arrayqueue",
            "ArrayQueue",
            "crossbeam ArrayQueue ping-pong".into(),
            measure::array_queue(&clock, iters, client_cpu, server_cpu)?,
        );
        push(
            "ring",
            "dyncore ring",
            "dyncore-ring SPSC ring ping-pong".into(),
            measure::dyncore_ring(&clock, iters, client_cpu, server_cpu)?,
        );
    } else {
        skipped.push(format!(
            "all cross-core round trips, throughput and the sidecore: only CPU {server_cpu} is usable, and a sidecore needs a core of its own"
        ));
    }

    // Trap paths, taken by the same client code with the sidecore switched off.
    println!("measuring trap paths (sidecore switched off)…");
    push(
        "trap_null",
        "null syscall",
        "trap: null system call (getppid), via Client::call with the sidecore off".into(),
        same_calls(&clock, iters, Arc::new(NullService), false, cpus, ())?,
    );
    let cpuid_what = if hypervisor {
        "trap: CPUID in the caller — a VM exit (hypervisor present)"
    } else {
        "trap: CPUID in the caller (no hypervisor: no VM exit)"
    };
    push(
        "trap_cpuid",
        "CPUID",
        cpuid_what.into(),
        same_calls(&clock, iters.min(50_000), Arc::new(QueryService::new()), false, cpus, CPUID_LEAF_1)?,
    );
    push(
        "trap_lock",
        "State: lock",
        "trap: caller updates the radix map under its lock".into(),
        state_calls(&clock, iters, StateTrap::Lock, false, cpus)?,
    );
    push(
        "trap_mprotect",
        "State: mprotect",
        "trap: mprotect of a real page + locked map update".into(),
        state_calls(&clock, iters.min(50_000), StateTrap::Mprotect, false, cpus)?,
    );

    // Throughput.
    let mut tput_rows = Vec::new();
    if two_cores {
        println!("measuring sidecore throughput ({:.1} s per configuration)…", tput.as_secs_f64());
        let client_cpus = allowed.difference(&CpuSet::single(server_cpu));
        for clients in [1usize, 2, 4] {
            let over = clients > client_cpus.len();
            for batched in [false, true] {
                let ops = throughput(clients, batched, tput, &client_cpus, server_cpu)?;
                println!(
                    "  {clients} client(s) {:<9} {:>8.2} M requests/s{}",
                    if batched { "batched" } else { "unbatched" },
                    ops / 1e6,
                    if over { "  (oversubscribed)" } else { "" }
                );
                tput_rows.push(Tput { clients, batched, oversubscribed: over, requests_per_s: ops });
            }
        }
        if client_cpus.len() < 4 {
            skipped.push(format!(
                "throughput with more clients than free cores: only {} core(s) besides the sidecore, so 2 and 4 clients share them (labelled oversubscribed)",
                client_cpus.len()
            ));
        }
    }

    // Interrupt virtualisation.
    println!("interrupt virtualisation ({irq_packets} packets per configuration)…");
    let mut irq_rows = Vec::new();
    for &n in &GUESTS {
        for mode in IRQ_MODES {
            let r = irq::run(&IrqConfig {
                guests: n,
                packets: irq_packets,
                interval: Duration::from_micros(100),
                mode,
                service_cpu: Some(server_cpu),
                seed: 42,
            })?;
            let (p25_ns, median_ns, p75_ns) = quartiles(&r.latencies_ns);
            let per = |x: u64| x as f64 / r.latencies_ns.len().max(1) as f64;
            let row = IrqRow {
                guests: n,
                mode,
                p25_ns,
                median_ns,
                p75_ns,
                signals_per_packet: per(r.signals),
                redundant_signals_per_packet: per(r.redundant_signals),
                empty_wakeups_per_packet: per(r.empty_wakeups),
            };
            println!(
                "  N={n:<3} {:<16} median {:>8.1} µs  IQR {:>8.1} µs  redundant signals/packet {:.2}",
                mode_name(mode),
                median_ns / 1e3,
                row.iqr_ns() / 1e3,
                row.redundant_signals_per_packet
            );
            irq_rows.push(row);
        }
    }

    write_outputs(
        &dir, &clock, &machine, &allowed, server_cpu, client_cpu, iters, hypervisor, &rows, &tput_rows,
        &irq_rows, &skipped,
    )?;
    println!("report written to {}", dir.join("report.md").display());
    Ok(())
}

fn mode_name(m: IrqMode) -> &'static str {
    match m {
        IrqMode::SharedRegister => "register+interrupt",
        IrqMode::SharedRegisterPolled => "register, polled",
        IrqMode::Sidecore => "sidecore",
    }
}

/// (p25, median, p75) in nanoseconds, by the benches' shared nearest-rank
/// [`percentile`].
fn quartiles(v: &[u64]) -> (f64, f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    (percentile(&s, 0.25), percentile(&s, 0.5), percentile(&s, 0.75))
}

/// Whether UMWAIT/TPAUSE is used while polling, in words.
fn waitpkg_text() -> &'static str {
    if dyncore_ring::waitpkg::available() {
        "present and used while polling"
    } else {
        "absent, so polling uses PAUSE then parks on a futex"
    }
}

fn bench_cfg(server_cpu: CpuId, enabled: bool) -> SidecoreConfig {
    SidecoreConfig {
        enabled,
        max_clients: 8,
        call_timeout: Duration::from_secs(5),
        ..SidecoreConfig::on_cpu(server_cpu)
    }
}

/// Measures `Client::call` round trips with the sidecore on (sidecalls) or
/// off (the trap path, same client code); `next(i)` makes the i-th request.
/// Returns the statistics and the number of calls made (warm-up included).
fn calls<S: Service>(
    clock: &Clock,
    iters: u64,
    svc: Arc<S>,
    on: bool,
    (cc, sc): (CpuId, CpuId),
    mut next: impl FnMut(u64) -> S::Request + Send,
) -> Result<(Stats, u64)> {
    let core = Sidecore::start(svc, bench_cfg(sc, on))?;
    let mut c = core.client()?;
    let mut i = 0u64;
    let mut err = None;
    let stats = pinned(cc, || {
        measure(clock, iters, || {
            i += 1;
            if let Err(e) = c.call(next(i)) {
                err.get_or_insert(e);
            }
        })
    })?;
    if let Some(e) = err {
        return Err(e.into());
    }
    let expect = if on { i } else { 0 };
    anyhow::ensure!(core.served() == expect, "sidecore served {} calls, expected {expect}", core.served());
    Ok((stats, i))
}

/// Runs [`calls`] with the same request every time.
fn same_calls<S: Service>(
    clock: &Clock,
    iters: u64,
    svc: Arc<S>,
    on: bool,
    cpus: (CpuId, CpuId),
    req: S::Request,
) -> Result<Stats> {
    Ok(calls(clock, iters, svc, on, cpus, move |_| req)?.0)
}

/// Runs [`calls`] with page-table updates and checks the correctness rule:
/// the map afterwards equals the one built by applying the same updates in
/// order.
fn state_calls(clock: &Clock, iters: u64, trap: StateTrap, on: bool, cpus: (CpuId, CpuId)) -> Result<Stats> {
    let svc = Arc::new(StateService::new(trap)?);
    let (stats, n) = calls(clock, iters, svc.clone(), on, cpus, pte)?;
    let mut expect = RadixMap::new();
    for i in 1..=n {
        let u = pte(i);
        expect.set(u.vaddr, u.pte);
    }
    anyhow::ensure!(
        svc.snapshot() == expect,
        "the radix map differs from in-order application of the updates"
    );
    Ok(stats)
}

/// Updates walking a 64 MiB window of the simulated address space.
fn pte(i: u64) -> PteUpdate {
    PteUpdate { vaddr: (i % 16_384) << 12, pte: (i << 12) | 0b1 | ((i & 1) << 1) }
}

/// Null requests per second served by one sidecore with `clients` client
/// threads (on `client_cpus`), one call at a time or in batches of
/// `BATCH_MAX`.
fn throughput(clients: usize, batched: bool, dur: Duration, client_cpus: &CpuSet, sc: CpuId) -> Result<f64> {
    let core = Sidecore::start(Arc::new(NullService), bench_cfg(sc, true))?;
    let handles: Vec<_> = (0..clients).map(|_| core.client()).collect::<Result<_, _>>()?;
    let start = Instant::now();
    let total: u64 = std::thread::scope(|s| -> Result<u64> {
        let threads: Vec<_> = handles
            .into_iter()
            .map(|mut c| {
                s.spawn(move || -> Result<u64> {
                    set_current_thread_affinity(client_cpus)?;
                    let reqs = [(); dyncore_ring::BATCH_MAX];
                    let mut out = Vec::with_capacity(reqs.len());
                    let mut n = 0u64;
                    while start.elapsed() < dur {
                        for _ in 0..64 {
                            if batched {
                                c.call_batch(&reqs, &mut out)?;
                                n += reqs.len() as u64;
                            } else {
                                c.call(())?;
                                n += 1;
                            }
                        }
                    }
                    Ok(n)
                })
            })
            .collect();
        let mut sum = 0;
        for t in threads {
            sum += t.join().map_err(|_| anyhow::anyhow!("client thread panicked"))??;
        }
        Ok(sum)
    })?;
    let secs = start.elapsed().as_secs_f64();
    anyhow::ensure!(core.served() == total, "served {} != requested {total}", core.served());
    Ok(total as f64 / secs)
}

impl IrqRow {
    fn iqr_ns(&self) -> f64 {
        self.p75_ns - self.p25_ns
    }
}

#[allow(clippy::too_many_arguments)]
fn write_outputs(
    dir: &Path,
    clock: &Clock,
    machine: &str,
    allowed: &CpuSet,
    server_cpu: CpuId,
    client_cpu: CpuId,
    iters: u64,
    hypervisor: bool,
    rows: &[Row],
    tput: &[Tput],
    irq_rows: &[IrqRow],
    skipped: &[String],
) -> Result<()> {
    let get = |k: &str| rows.iter().find(|r| r.key == k).map(|r| r.stats);
    let floor = get("raw");
    let mut t = Table::new(
        "Round trips (one timestamp per round trip; same run)",
        &["path", "median ns", "mean ns", "p99 ns", "M ops/s", "× raw floor (median)", "× raw floor (mean)"],
    );
    for r in rows {
        let ratio =
            |f: fn(&Stats) -> f64| floor.map_or("–".into(), |fl| format!("{:.2}", f(&r.stats) / f(&fl)));
        t.row(vec![
            r.what.clone(),
            format!("{:.0}", r.stats.median_ns),
            format!("{:.0}", r.stats.mean_ns),
            format!("{:.0}", r.stats.p99_ns),
            format!("{:.2}", r.stats.ops_per_s / 1e6),
            ratio(|s| s.median_ns),
            ratio(|s| s.mean_ns),
        ]);
    }
    println!("\n{}", t.to_terminal());

    let mut tt =
        Table::new("Sidecore throughput (Null requests)", &["clients", "mode", "M requests/s", "note"]);
    for x in tput {
        let note = if x.oversubscribed { "oversubscribed: more clients than free cores" } else { "" };
        tt.row(vec![
            x.clients.to_string(),
            if x.batched { "batched" } else { "unbatched" }.into(),
            format!("{:.2}", x.requests_per_s / 1e6),
            note.into(),
        ]);
    }
    if !tput.is_empty() {
        println!("\n{}", tt.to_terminal());
    }

    let mut ti = Table::new(
        "Interrupt virtualisation (latency = device enqueue → guest dequeue)",
        &[
            "guests",
            "signalling",
            "median µs",
            "IQR µs (p25–p75)",
            "signals/packet",
            "redundant signals/packet",
            "empty wake-ups/packet",
        ],
    );
    for r in irq_rows {
        ti.row(vec![
            r.guests.to_string(),
            mode_name(r.mode).into(),
            format!("{:.1}", r.median_ns / 1e3),
            format!("{:.1} ({:.1}–{:.1})", r.iqr_ns() / 1e3, r.p25_ns / 1e3, r.p75_ns / 1e3),
            format!("{:.2}", r.signals_per_packet),
            format!("{:.2}", r.redundant_signals_per_packet),
            format!("{:.2}", r.empty_wakeups_per_packet),
        ]);
    }
    println!("\n{}", ti.to_terminal());

    // Goals, as ratios from this run.
    let mut goals: Vec<Goal> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    if let (Some(f), Some(n)) = (floor, get("sc_null")) {
        let r = n.median_ns / f.median_ns;
        let rm = n.mean_ns / f.mean_ns;
        goals.push(Goal::checked(
            "sidecall Null round trip ≤ 1.3× the raw spin floor (median)",
            format!("{r:.2}× (mean {rm:.2}×)"),
            r <= 1.3,
        ));
    }
    match (get("trap_cpuid"), get("sc_query")) {
        (Some(c), Some(q)) if hypervisor => {
            let r = c.median_ns / q.median_ns;
            let rm = c.mean_ns / q.mean_ns;
            goals.push(Goal::checked(
                "sidecall Query ≥ 4× faster than CPUID (a VM exit here; median)",
                format!("{r:.1}× (mean {rm:.1}×)"),
                r >= 4.0,
            ));
        }
        (Some(_), Some(_)) => {
            notes.push("CPUID goal not applicable: no hypervisor, CPUID does not exit".into())
        }
        _ => {}
    }
    let one_client =
        |batched| tput.iter().find(|x| x.clients == 1 && x.batched == batched).map(|x| x.requests_per_s);
    let (unb, bat) = (one_client(false), one_client(true));
    if let (Some(u), Some(b)) = (unb, bat) {
        let r = b / u;
        goals.push(Goal::checked(
            "batching server ≥ 3× unbatched throughput (1 client)",
            format!("{r:.1}×"),
            r >= 3.0,
        ));
    }
    let tg = goals_table("Goals (ratios measured in this run)", &goals);
    println!("\n{}", tg.to_terminal());
    for s in skipped {
        println!("skipped or oversubscribed: {s}");
    }

    // Plots: Figure 1's shape (trap vs sidecall per call) and the transports.
    // (One series per chart: the shared bar-chart helper labels every
    // category only then.)
    let fig1 = [
        ("trap_null", "Null: syscall"),
        ("sc_null", "Null: sidecall"),
        ("trap_cpuid", "CPUID: trap"),
        ("sc_query", "CPUID: sidecall"),
        ("trap_mprotect", "PTE: mprotect"),
        ("trap_lock", "PTE: lock"),
        ("sc_state", "PTE: sidecall"),
        ("raw", "raw floor"),
    ];
    let fig1: Vec<(&str, f64)> = fig1.iter().filter_map(|(k, l)| get(k).map(|s| (*l, s.median_ns))).collect();
    write_bar_chart(
        &dir.join("latency"),
        &BarChart {
            title: "Trap vs sidecall (Figure 1), median round trip, log scale".into(),
            y_label: "ns".into(),
            categories: fig1.iter().map(|(l, _)| l.to_string()).collect(),
            series: vec![Series { name: "median".into(), values: fig1.iter().map(|(_, v)| *v).collect() }],
            log_y: true,
        },
    )?;
    let transports = ["raw", "sc_null", "ring", "rtrb", "arrayqueue", "futex", "pipe"];
    let present: Vec<&Row> = transports.iter().filter_map(|k| rows.iter().find(|r| r.key == *k)).collect();
    if !present.is_empty() {
        write_bar_chart(
            &dir.join("transports"),
            &BarChart {
                title: "Cross-core round trip by transport, median (log scale)".into(),
                y_label: "ns".into(),
                categories: present.iter().map(|r| r.label.to_string()).collect(),
                series: vec![Series {
                    name: "median".into(),
                    values: present.iter().map(|r| r.stats.median_ns).collect(),
                }],
                log_y: true,
            },
        )?;
    }
    let line = |m: IrqMode, f: &dyn Fn(&IrqRow) -> f64| -> Vec<(f64, f64)> {
        irq_rows.iter().filter(|r| r.mode == m).map(|r| (r.guests as f64, f(r))).collect()
    };
    let per_mode = |f: &dyn Fn(&IrqRow) -> f64| -> Vec<(String, Vec<(f64, f64)>)> {
        IRQ_MODES.iter().map(|&m| (mode_name(m).to_string(), line(m, f))).collect()
    };
    write_line_chart(
        &dir.join("irq-latency"),
        &LineChart {
            title: "Packet latency vs guests: median".into(),
            x_label: "guests (N)".into(),
            y_label: "median latency, µs".into(),
            series: per_mode(&|r| r.median_ns / 1e3),
            log_x: true,
            log_y: true,
        },
    )?;
    write_line_chart(
        &dir.join("irq-iqr"),
        &LineChart {
            title: "Packet latency vs guests: inter-quartile range (p75 - p25)".into(),
            x_label: "guests (N)".into(),
            y_label: "IQR, µs".into(),
            series: per_mode(&|r| r.iqr_ns() / 1e3),
            log_x: true,
            log_y: true,
        },
    )?;
    write_line_chart(
        &dir.join("irq-redundant"),
        &LineChart {
            title: "Redundant signals per packet vs guests".into(),
            x_label: "guests (N)".into(),
            y_label: "redundant signals / packet".into(),
            series: per_mode(&|r| r.redundant_signals_per_packet),
            log_x: true,
            log_y: false,
        },
    )?;

    // report.md
    let mut md = String::new();
    writeln!(md, "# dyncore bench sidecall\n")?;
    writeln!(md, "Machine: {machine}.  ")?;
    writeln!(
        md,
        "Ran on {} allowed CPU(s) ({allowed}); sidecore/server on CPU {server_cpu}, client on CPU {client_cpu}; {iters} round trips per latency row.  ",
        allowed.len()
    )?;
    writeln!(md, "UMWAIT/TPAUSE (waitpkg): {}.  ", waitpkg_text())?;
    writeln!(
        md,
        "Timer: one {} read per round trip; its resolution ({:.0} ns here) quantises each median and \
         p99 (the mean comes from the total time and is not quantised).\n",
        if cfg!(target_arch = "x86_64") { "TSC" } else { "monotonic clock" },
        clock.resolution_ns()
    )?;
    writeln!(
        md,
        "## Round trips\n\n{}\n![trap vs sidecall](latency.png)\n![transports](transports.png)\n",
        t.to_markdown()
    )?;
    if !tput.is_empty() {
        writeln!(md, "## Sidecore throughput\n\n{}", tt.to_markdown())?;
    }
    writeln!(md, "## Goals\n\n{}", tg.to_markdown())?;
    for n in &notes {
        writeln!(md, "* {n}")?;
    }
    writeln!(md, "\n## Interrupt virtualisation\n\n{}", ti.to_markdown())?;
    writeln!(
        md,
        "![irq latency](irq-latency.png)\n![irq iqr](irq-iqr.png)\n![irq redundant](irq-redundant.png)\n"
    )?;
    if !skipped.is_empty() {
        writeln!(md, "## Skipped or oversubscribed\n")?;
        for s in skipped {
            writeln!(md, "* {s}")?;
        }
    }
    write_file(&dir.join("report.md"), md.as_bytes())?;

    let j = json!({
        "machine": machine,
        "allowed_cpus": allowed.to_string(),
        "server_cpu": server_cpu,
        "client_cpu": client_cpu,
        "hypervisor": hypervisor,
        "waitpkg": dyncore_ring::waitpkg::available(),
        "iters": iters,
        "round_trips": rows,
        "throughput": tput,
        "irq": irq_rows,
        "goals": goals,
        "notes": notes,
        "skipped": skipped,
    });
    write_file(&dir.join("results.json"), serde_json::to_string_pretty(&j)?.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_writes_a_report() {
        let dir = std::env::temp_dir().join(format!("dyncore-bench-sidecall-{}", std::process::id()));
        let args = Args {
            iters: 300,
            quick: true,
            server_cpu: None,
            client_cpu: None,
            irq_packets: Some(40),
            throughput_secs: Some(0.02),
        };
        run(&args, &dir).unwrap();
        let d = dir.join("bench-sidecall");
        let md = std::fs::read_to_string(d.join("report.md")).unwrap();
        assert!(md.contains("## Goals") && md.contains("Interrupt virtualisation"), "{md}");
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("results.json")).unwrap()).unwrap();
        assert_eq!(j["irq"].as_array().unwrap().len(), GUESTS.len() * IRQ_MODES.len());
        for f in ["latency.png", "transports.svg", "irq-latency.png", "irq-iqr.png", "irq-redundant.svg"] {
            assert!(d.join(f).exists(), "{f}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
