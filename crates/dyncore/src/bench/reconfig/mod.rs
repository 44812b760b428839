//! `dyncore bench reconfig`: runtime CPUs taken offline and brought back
//! online, naive (hotplug's way) against Bolt, for 1, 2, 4 and all-but-one
//! CPUs, plus Bolt's entry and exit latencies, against the kernel's own
//! mechanisms on the same machine in the same run (see `baselines.rs`).
//!
//! Writes `<out>/bench-reconfig/{report.md, results.json, plot.png, plot.svg}`.
//!
//! What is timed:
//!
//! * offline / online latency: the `Runtime::offline` / `online` call, from
//!   entry to return, on a runtime whose CPUs are idle (the mechanism's
//!   cost; the critical path only — Bolt's deferred work happens after);
//! * entry latency (offline of one CPU that is running a task in short
//!   steps): from the call's start until no task runs on the CPU any more
//!   (`ReconfigReport::entry_ns`);
//! * exit latency: from the start of the online call until the first step
//!   of a task placed on the CPU right after the call returned.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, ensure};
use dyncore_core::{CpuId, CpuSet};
use dyncore_runtime::affinity::{allowed_cpus, pin_current_thread};
use dyncore_runtime::cpu::{Ctx, Mode, Runtime, RuntimeConfig, TaskPoll};
use serde_json::json;

use crate::bench::{Goal, Summary, goals_table, ns, summarize};
use crate::plot::{BarChart, Series, write_bar_chart};
use crate::report::write_file;
use crate::table::Table;

mod baselines;

use baselines::Baseline;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Offline/online pairs per configuration (default 200; quick 20).
    #[arg(long)]
    pub repeats: Option<usize>,
    /// A run of a few seconds: 20 repeats, 3 hotplug cycles.
    #[arg(long)]
    pub quick: bool,
    /// Also measure Linux sysfs CPU hotplug: takes a real CPU other than 0
    /// offline and back (restored on every exit path, Ctrl-C included).
    #[arg(long)]
    pub allow_hotplug: bool,
    /// Runtime CPUs, dealt round-robin over the allowed real CPUs (default 8).
    #[arg(long, default_value_t = 8)]
    pub cpus: usize,
}

/// Latencies of one (mode, number of CPUs) configuration.
#[derive(Debug, Clone, serde::Serialize)]
struct Sweep {
    mode: Mode,
    cpus: usize,
    offline: Summary,
    online: Summary,
    /// Median time of each kind of critical offline step, summed per call
    /// (a bulk call runs each kind once per CPU), in plan order.
    offline_steps_median_ns: Vec<(String, f64)>,
}

/// Bolt's two extra figures, per mode (one CPU).
#[derive(Debug, Clone, serde::Serialize)]
struct EntryExit {
    mode: Mode,
    entry: Summary,
    exit: Summary,
}

const MODES: [Mode; 2] = [Mode::Naive, Mode::Bolt];

pub fn run(args: &Args, out: &Path) -> Result<()> {
    let dir = out.join("bench-reconfig");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let repeats = args.repeats.unwrap_or(if args.quick { 20 } else { 200 }).max(1);
    let hotplug_repeats = if args.quick { 3 } else { repeats.min(20) };
    ensure!(args.cpus >= 2, "--cpus must be at least 2 (one CPU always stays online), got {}", args.cpus);
    let allowed = allowed_cpus()?;
    let machine = super::machine_description();
    let mut cfg = RuntimeConfig::over(&allowed, args.cpus);
    // Keep the kept caches for the whole run (no timer reclaim mid-measure).
    cfg.cache_keep = None;
    let mapping = cfg.real_cpus.clone();
    let sizes = sizes(args.cpus);
    println!("dyncore bench reconfig — {machine}");
    println!(
        "{} runtime CPUs over {} real CPU(s) {allowed} (runtime→real: {}); {repeats} repeats; sizes {sizes:?}",
        args.cpus,
        allowed.len(),
        mapping_text(&mapping)
    );

    let total = (MODES.len() * (sizes.len() + 1) * repeats) as u64;
    let bar = indicatif::ProgressBar::new(total).with_style(
        indicatif::ProgressStyle::with_template("{msg:28} {bar:40} {pos}/{len} [{elapsed}]")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let (sweeps, entry_exit) = {
        let rt = Runtime::new(cfg).context("starting the runtime")?;
        // The measuring thread runs on the real CPU of runtime CPU 0 (never
        // taken offline), away from the CPUs being reconfigured where it can.
        pin_current_thread(mapping[0])?;
        let mut sweeps = Vec::new();
        for mode in MODES {
            for &k in &sizes {
                bar.set_message(format!("{mode} offline/online of {k}"));
                sweeps.push(sweep(&rt, mode, k, repeats, &bar)?);
            }
        }
        let mut ee = Vec::new();
        for mode in MODES {
            bar.set_message(format!("{mode} entry/exit latency"));
            ee.push(entry_exit(&rt, mode, repeats, &bar)?);
        }
        ensure!(rt.check().is_ok(), "runtime invariants broken after the sweep: {:?}", rt.check());
        baselines::unpin(&allowed);
        (sweeps, ee)
    };
    bar.finish_and_clear();
    for s in &sweeps {
        println!(
            "  {:<5} {:>2} CPU(s): offline median {:>10.0} ns p99 {:>10.0} ns | online median {:>10.0} ns p99 {:>10.0} ns",
            s.mode.to_string(),
            s.cpus,
            s.offline.median_ns,
            s.offline.p99_ns,
            s.online.median_ns,
            s.online.p99_ns
        );
    }

    println!(
        "baselines: sched_setaffinity, cgroup cpuset{}…",
        if args.allow_hotplug { ", sysfs hotplug" } else { "" }
    );
    let base = vec![
        baselines::affinity(&allowed, repeats),
        baselines::cpuset(&allowed, repeats),
        baselines::hotplug(args.allow_hotplug, &allowed, hotplug_repeats),
    ];
    for b in &base {
        match (&b.skipped, b.away) {
            (Some(why), _) => println!("  {:<9} skipped: {why}", b.key),
            (None, Some(a)) => println!("  {:<9} {} median {:>12.0} ns", b.key, b.away_label, a.median_ns),
            (None, None) => {}
        }
    }

    let report = Report { machine, allowed, mapping, repeats, hotplug_repeats, sweeps, entry_exit, base };
    report.write(&dir)?;
    println!("report written to {}", dir.join("report.md").display());
    Ok(())
}

/// 1, 2, 4 and all-but-one CPUs (fewer when the runtime is small).
fn sizes(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = [1, 2, 4, n - 1].into_iter().filter(|&k| k >= 1 && k < n).collect();
    v.dedup();
    v
}

fn mapping_text(m: &[CpuId]) -> String {
    m.iter().enumerate().map(|(i, r)| format!("{i}→{r}")).collect::<Vec<_>>().join(" ")
}

/// The `k` highest runtime CPUs (CPU 0 stays online).
fn top(n: usize, k: usize) -> CpuSet {
    CpuSet::range(n - k, n)
}

fn sweep(rt: &Runtime, mode: Mode, k: usize, repeats: usize, bar: &indicatif::ProgressBar) -> Result<Sweep> {
    let set = top(rt.cpus(), k);
    let (mut off, mut on) = (Vec::with_capacity(repeats), Vec::with_capacity(repeats));
    let mut steps: Vec<(&'static str, Vec<u64>)> = Vec::new();
    // Two untimed cycles warm caches, threads and allocations. The whole
    // calls are timed with step timing off (reading the clock around every
    // step would add its own cost, per CPU, to the bulk calls); a second
    // pass with step timing on gives the per-step breakdown.
    let breakdown = repeats.min(50);
    for i in 0..repeats + 2 + breakdown {
        let timed_steps = i >= repeats + 2;
        rt.set_step_timing(timed_steps);
        let t0 = Instant::now();
        let r = rt.offline(&set, mode)?;
        let t_off = ns(t0.elapsed());
        ensure!(r.changed() == &set, "offline of {set} changed only {}", r.changed());
        if timed_steps {
            let mut per_call: Vec<(&'static str, u64)> = Vec::new();
            for (step, ns) in &r.step_ns {
                *slot(&mut per_call, step.name()) += ns;
            }
            for (name, ns) in per_call {
                slot(&mut steps, name).push(ns);
            }
        }
        let t0 = Instant::now();
        let r = rt.online(&set, mode)?;
        let t_on = ns(t0.elapsed());
        ensure!(r.changed() == &set, "online of {set} changed only {}", r.changed());
        if (2..repeats + 2).contains(&i) {
            off.push(t_off);
            on.push(t_on);
            bar.inc(1);
        }
    }
    let s = |v: &[u64]| summarize(v).context("no samples");
    let offline_steps_median_ns =
        steps.iter().filter_map(|(n, v)| summarize(v).map(|x| (n.to_string(), x.median_ns))).collect();
    rt.set_step_timing(true);
    Ok(Sweep { mode, cpus: k, offline: s(&off)?, online: s(&on)?, offline_steps_median_ns })
}

/// The value kept under `name` in a list in first-seen order, added
/// (default) if missing.
fn slot<'a, T: Default>(list: &'a mut Vec<(&'static str, T)>, name: &'static str) -> &'a mut T {
    let i = match list.iter().position(|(n, _)| *n == name) {
        Some(i) => i,
        None => {
            list.push((name, T::default()));
            list.len() - 1
        }
    };
    &mut list[i].1
}

/// When and where a task ran its first step (`None`: not yet).
type FirstStep = Arc<Mutex<Option<(Instant, CpuId)>>>;

/// A task that spins in short steps until told to stop, and records when
/// its first step ran.
fn busy_task(
    stop: Arc<AtomicBool>,
    first: FirstStep,
) -> impl FnMut(&mut Ctx<'_>) -> TaskPoll + Send + 'static {
    move |cx: &mut Ctx<'_>| {
        {
            let mut f = first.lock().unwrap_or_else(|p| p.into_inner());
            if f.is_none() {
                *f = Some((Instant::now(), cx.cpu()));
            }
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_micros(5) {
            std::hint::spin_loop();
        }
        if stop.load(Ordering::Relaxed) { TaskPoll::Ready } else { TaskPoll::Pending }
    }
}

/// Waits for a task's first step; returns when and where it ran.
fn first_step(first: &FirstStep) -> Result<(Instant, CpuId)> {
    let t0 = Instant::now();
    loop {
        if let Some(f) = *first.lock().unwrap_or_else(|p| p.into_inner()) {
            return Ok(f);
        }
        ensure!(t0.elapsed() < Duration::from_secs(10), "a task never ran its first step");
        std::thread::yield_now();
    }
}

/// Entry latency: offline of the last CPU while it runs a task in 5 µs
/// steps. Exit latency: online of it, then a task placed on it at once.
fn entry_exit(rt: &Runtime, mode: Mode, repeats: usize, bar: &indicatif::ProgressBar) -> Result<EntryExit> {
    let cpu = rt.cpus() - 1;
    let set = CpuSet::single(cpu);
    let (mut entry, mut exit) = (Vec::with_capacity(repeats), Vec::with_capacity(repeats));
    let start_task = |stop: &Arc<AtomicBool>| -> Result<FirstStep> {
        let first = Arc::new(Mutex::new(None));
        rt.spawn_on(cpu, busy_task(stop.clone(), first.clone()))?;
        Ok(first)
    };
    let mut stop = Arc::new(AtomicBool::new(false));
    let first = start_task(&stop)?;
    first_step(&first)?;
    for i in 0..repeats + 2 {
        let r = rt.offline(&set, mode)?;
        let e = r.entry_ns.context("an offline report has an entry latency")?;
        // The task moved to another CPU; let it finish there.
        stop.store(true, Ordering::Relaxed);
        stop = Arc::new(AtomicBool::new(false));
        let t0 = Instant::now();
        let _back = rt.online(&set, mode)?;
        let first = start_task(&stop)?;
        let (t1, on) = first_step(&first)?;
        ensure!(on == cpu, "the probe task ran on CPU {on}, not {cpu}");
        if i >= 2 {
            entry.push(e);
            exit.push(ns(t1 - t0));
            bar.inc(1);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let s = |v: &[u64]| summarize(v).context("no samples");
    Ok(EntryExit { mode, entry: s(&entry)?, exit: s(&exit)? })
}

struct Report {
    machine: String,
    allowed: CpuSet,
    mapping: Vec<CpuId>,
    repeats: usize,
    hotplug_repeats: usize,
    sweeps: Vec<Sweep>,
    entry_exit: Vec<EntryExit>,
    base: Vec<Baseline>,
}

impl Report {
    fn get(&self, mode: Mode, k: usize) -> Option<&Sweep> {
        self.sweeps.iter().find(|s| s.mode == mode && s.cpus == k)
    }

    fn baseline(&self, key: &str) -> Option<&Baseline> {
        self.base.iter().find(|b| b.key == key)
    }

    fn goals(&self) -> Vec<Goal> {
        let mut g = Vec::new();
        let (naive1, bolt1) = (self.get(Mode::Naive, 1), self.get(Mode::Bolt, 1));
        if let (Some(n), Some(b)) = (naive1, bolt1) {
            let r = n.offline.median_ns / b.offline.median_ns;
            g.push(Goal::checked(
                "bolt offline ≥ 20× faster than naive (1 CPU, median)",
                format!("{r:.1}×"),
                r >= 20.0,
            ));
        }
        let hp = self.baseline("hotplug").and_then(|h| h.away);
        match (hp, bolt1) {
            (Some(h), Some(b)) => {
                let r = h.median_ns / b.offline.median_ns;
                g.push(Goal::checked(
                    "bolt offline ≥ 1000× faster than sysfs hotplug (1 CPU, median)",
                    format!("{r:.0}×"),
                    r >= 1000.0,
                ));
            }
            _ => g.push(Goal::not_measured(
                "bolt offline ≥ 1000× faster than sysfs hotplug",
                "hotplug skipped (see Skipped below)",
            )),
        }
        const BULK: &str = "bolt bulk offline of 4 CPUs ≤ 2× one CPU (median)";
        match (self.get(Mode::Bolt, 4), bolt1) {
            (Some(b4), Some(b1)) => {
                let r = b4.offline.median_ns / b1.offline.median_ns;
                g.push(Goal::checked(BULK, format!("{r:.2}×"), r <= 2.0));
            }
            _ => g.push(Goal::not_measured(
                BULK,
                format!("{} runtime CPUs leave no 4 to take offline (--cpus 5 or more)", self.mapping.len()),
            )),
        }
        g
    }

    fn write(&self, dir: &Path) -> Result<()> {
        let fmt_us = |ns: f64| format!("{:.1}", ns / 1e3);
        let mut t = Table::new(
            "Runtime CPU offline/online latency (µs; idle runtime, call entry to return)",
            &[
                "mode",
                "CPUs",
                "offline median",
                "offline p99",
                "online median",
                "online p99",
                "offline × bolt",
            ],
        );
        for s in &self.sweeps {
            let vs = self
                .get(Mode::Bolt, s.cpus)
                .map_or("–".into(), |b| format!("{:.1}", s.offline.median_ns / b.offline.median_ns));
            t.row(vec![
                s.mode.to_string(),
                s.cpus.to_string(),
                fmt_us(s.offline.median_ns),
                fmt_us(s.offline.p99_ns),
                fmt_us(s.online.median_ns),
                fmt_us(s.online.p99_ns),
                vs,
            ]);
        }
        let mut te = Table::new(
            "Entry and exit latency, 1 CPU (µs)",
            &["mode", "entry median", "entry p99", "exit median", "exit p99"],
        );
        for e in &self.entry_exit {
            te.row(vec![
                e.mode.to_string(),
                fmt_us(e.entry.median_ns),
                fmt_us(e.entry.p99_ns),
                fmt_us(e.exit.median_ns),
                fmt_us(e.exit.p99_ns),
            ]);
        }
        let mut ts = Table::new(
            "Where offline time goes (median µs per step kind, summed per call)",
            &["mode", "CPUs", "critical steps"],
        );
        for sw in self.sweeps.iter().filter(|s| s.cpus == 1 || s.cpus == 4) {
            let steps: Vec<String> =
                sw.offline_steps_median_ns.iter().map(|(n, v)| format!("{n} {:.1}", v / 1e3)).collect();
            ts.row(vec![sw.mode.to_string(), sw.cpus.to_string(), steps.join(", ")]);
        }
        let bolt1 = self.get(Mode::Bolt, 1).map(|b| b.offline.median_ns);
        let mut tb = Table::new(
            "Baselines on this machine (µs)",
            &[
                "mechanism",
                "away median",
                "away p99",
                "back median",
                "back p99",
                "away × bolt offline (1 CPU)",
            ],
        );
        for b in &self.base {
            let cell = |s: Option<Summary>, f: fn(&Summary) -> f64, label: &str| {
                s.map_or("–".into(), |s| format!("{} ({label})", fmt_us(f(&s))))
            };
            match &b.skipped {
                Some(why) => tb.row(vec![
                    b.what.clone(),
                    format!("skipped: {why}"),
                    "".into(),
                    "".into(),
                    "".into(),
                    "".into(),
                ]),
                None => tb.row(vec![
                    b.what.clone(),
                    cell(b.away, |s| s.median_ns, b.away_label),
                    cell(b.away, |s| s.p99_ns, b.away_label),
                    cell(b.back, |s| s.median_ns, b.back_label),
                    cell(b.back, |s| s.p99_ns, b.back_label),
                    match (b.away, bolt1) {
                        (Some(a), Some(x)) => format!("{:.0}×", a.median_ns / x),
                        _ => "–".into(),
                    },
                ]),
            }
        }
        let goals = self.goals();
        let tg = goals_table("Goals (ratios measured in this run)", &goals);
        for x in [&t, &ts, &te, &tb, &tg] {
            println!("\n{}", x.to_terminal());
        }

        self.plot(dir)?;

        let n = self.mapping.len();
        let mut md = String::new();
        writeln!(md, "# dyncore bench reconfig\n")?;
        writeln!(md, "Machine: {}.  ", self.machine)?;
        writeln!(
            md,
            "{n} runtime CPUs mapped round-robin on {} real CPU(s) {} (runtime→real: {}); so several runtime \
             CPUs share a real one. {} timed offline/online pairs per configuration (after 2 untimed), {} hotplug cycles.\n",
            self.allowed.len(),
            self.allowed,
            mapping_text(&self.mapping),
            self.repeats,
            self.hotplug_repeats
        )?;
        writeln!(
            md,
            "Offline/online latency is the `Runtime::offline`/`online` call from entry to return, with every \
             runtime CPU idle. Naive does everything on the critical path, one CPU at a time (stop-the-world \
             barrier, run-queue migration, grace period, free the cache, fold statistics, remove the registry \
             entry, join the helper thread; online re-creates them). Bolt runs only the critical steps and defers \
             the rest. Entry latency: from the offline call's start until no task runs on the CPU (it was running \
             a task in 5 µs steps). Exit latency: from the online call's start until the first step of a task \
             placed on the CPU right after the call returned.\n"
        )?;
        writeln!(md, "## Runtime CPUs\n")?;
        for x in [&t, &ts, &te] {
            writeln!(md, "{}:\n\n{}", x.title, x.to_markdown())?;
        }
        writeln!(md, "![latency](plot.png)\n")?;
        writeln!(md, "## Baselines\n\n{}", tb.to_markdown())?;
        writeln!(md, "## Goals\n\n{}", tg.to_markdown())?;
        let skipped: Vec<String> =
            self.base.iter().filter_map(|b| b.skipped.as_ref().map(|w| format!("{}: {w}", b.key))).collect();
        if !skipped.is_empty() {
            writeln!(md, "## Skipped\n")?;
            for s in &skipped {
                writeln!(md, "* {s}")?;
            }
        }
        write_file(&dir.join("report.md"), md.as_bytes())?;

        let j = json!({
            "machine": self.machine,
            "real_cpus": self.allowed.to_string(),
            "real_cpu_count": self.allowed.len(),
            "runtime_cpus": n,
            "mapping": self.mapping,
            "repeats": self.repeats,
            "hotplug_repeats": self.hotplug_repeats,
            "sweeps": self.sweeps,
            "entry_exit": self.entry_exit,
            "baselines": self.base,
            "goals": goals,
        });
        write_file(&dir.join("results.json"), serde_json::to_string_pretty(&j)?.as_bytes())?;
        Ok(())
    }

    /// One chart: every configuration's offline ("away") and online
    /// ("back") median, baselines included, on a log scale.
    fn plot(&self, dir: &Path) -> Result<()> {
        let n = self.mapping.len();
        let mut cats = Vec::new();
        let (mut away, mut back) = (Vec::new(), Vec::new());
        // Baselines first: the tallest bars stay clear of the legend.
        for b in self.base.iter().filter(|b| b.skipped.is_none()) {
            cats.push(
                match b.key {
                    "hotplug" => "sysfs hotplug",
                    "cpuset" => "cpuset",
                    "affinity" => "setaffinity",
                    k => k,
                }
                .into(),
            );
            away.push(b.away.map_or(f64::NAN, |s| s.median_ns / 1e3));
            back.push(b.back.map_or(f64::NAN, |s| s.median_ns / 1e3));
        }
        for s in &self.sweeps {
            cats.push(format!("{} ×{}", s.mode, s.cpus));
            away.push(s.offline.median_ns / 1e3);
            back.push(s.online.median_ns / 1e3);
        }
        write_bar_chart(
            &dir.join("plot"),
            &BarChart {
                title: format!(
                    "Taking CPUs away and back, median (log scale; {n} runtime CPUs on {} real)",
                    self.allowed.len()
                ),
                y_label: "µs".into(),
                categories: cats,
                series: vec![
                    Series { name: "offline / narrow / migrate".into(), values: away },
                    Series { name: "online / widen".into(), values: back },
                ],
                log_y: true,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_one_two_four_and_all_but_one() {
        assert_eq!(sizes(8), [1, 2, 4, 7]);
        assert_eq!(sizes(5), [1, 2, 4]);
        assert_eq!(sizes(3), [1, 2]);
        assert_eq!(sizes(2), [1]);
    }

    #[test]
    fn tiny_run_writes_a_report() {
        let dir = std::env::temp_dir().join(format!("dyncore-bench-reconfig-{}", std::process::id()));
        let args = Args { repeats: Some(3), quick: true, allow_hotplug: false, cpus: 4 };
        run(&args, &dir).unwrap();
        let d = dir.join("bench-reconfig");
        let md = std::fs::read_to_string(d.join("report.md")).unwrap();
        assert!(md.contains("## Goals") && md.contains("## Baselines"), "{md}");
        assert!(md.contains("hotplug: not requested"), "hotplug is skipped with a reason: {md}");
        assert!(md.contains("leave no 4 to take offline"), "the bulk goal says why it is not measured: {md}");
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d.join("results.json")).unwrap()).unwrap();
        // 2 modes × sizes 1, 2, 3 (all but one of 4).
        assert_eq!(j["sweeps"].as_array().unwrap().len(), 6);
        assert_eq!(j["runtime_cpus"], 4);
        assert!(j["sweeps"][0]["offline"]["median_ns"].as_f64().unwrap() > 0.0);
        assert_eq!(j["entry_exit"].as_array().unwrap().len(), 2);
        assert_eq!(j["baselines"].as_array().unwrap().len(), 3);
        for f in ["plot.png", "plot.svg"] {
            assert!(d.join(f).metadata().unwrap().len() > 0, "{f}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
