//! The report of `dyncore bench reconfig`: tables, goals, plots, report.md
//! and results.json, from what the rounds measured.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use dyncore_core::CpuSet;
use dyncore_runtime::cpu::Mode;
use serde_json::{Value, json};

use super::baselines::{Baseline, Kind as BaseKind};
use super::measure::{Steps, Sweep};
use super::{Layout, Measured, Plan};
use crate::chart::{Axis, GoalLine, RangeBar, RangeBars, Unit};
use crate::{Goal, RoundSamples, RoundSpread, Spread, goals_table};
use dyncore_report::plot::{PALETTE, write_chart};
use dyncore_report::report::write_file;
use dyncore_report::table::Table;
use plotters::style::RGBColor;

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

/// "283.9 (270.1–301.0)": median of round medians and their range, µs.
fn us_rounds(s: &Spread) -> String {
    format!("{} ({}–{})", us(s.median_ns), us(s.round_min_ns), us(s.round_max_ns))
}

fn sweep(l: &Layout, mode: Mode, k: usize) -> Option<&Sweep> {
    l.sweeps.iter().find(|s| s.mode == mode && s.cpus == k)
}

fn baseline(m: &Measured, kind: BaseKind) -> Option<&Baseline> {
    m.base.iter().find(|b| b.kind == kind && b.skipped.is_none())
}

fn ratio(num: &RoundSamples, den: &RoundSamples) -> Option<RoundSpread> {
    RoundSpread::ratio_of_rows(num, den)
}

fn runtime_table(m: &Measured) -> Table {
    let mut t = Table::new(
        "Runtime CPU offline/online latency (µs; idle runtime, call entry to return; median of round medians)",
        &[
            "layout",
            "mode",
            "CPUs",
            "offline (rounds min–max)",
            "offline p25–p75",
            "offline p99",
            "online (rounds min–max)",
            "online p99",
            "samples (rounds × per round)",
            "offline × bolt (median of round ratios)",
        ],
    );
    for l in &m.layouts {
        for s in &l.sweeps {
            let (Some(off), Some(on)) = (s.offline.spread(), s.online.spread()) else { continue };
            let vs = sweep(l, Mode::Bolt, s.cpus)
                .and_then(|b| ratio(&s.offline, &b.offline))
                .map_or("–".into(), |r| format!("{:.1}", r.median));
            t.row(vec![
                l.label(),
                s.mode.to_string(),
                s.cpus.to_string(),
                us_rounds(&off),
                format!("{}–{}", us(off.p25_ns), us(off.p75_ns)),
                us(off.p99_ns),
                us_rounds(&on),
                us(on.p99_ns),
                format!("{} ({} × {})", off.samples, off.rounds, off.samples / off.rounds.max(1)),
                vs,
            ]);
        }
    }
    t
}

fn entry_exit_table(m: &Measured) -> Table {
    let mut t = Table::new(
        "Entry and exit latency, 1 CPU (µs; median of round medians)",
        &[
            "layout",
            "mode",
            "entry (rounds min–max)",
            "entry p99",
            "exit (rounds min–max)",
            "exit p99",
            "samples",
        ],
    );
    for l in &m.layouts {
        for e in &l.entry_exit {
            let (Some(en), Some(ex)) = (e.entry.spread(), e.exit.spread()) else { continue };
            t.row(vec![
                l.label(),
                e.mode.to_string(),
                us_rounds(&en),
                us(en.p99_ns),
                us_rounds(&ex),
                us(ex.p99_ns),
                en.samples.to_string(),
            ]);
        }
    }
    t
}

/// "name 0.12 ×2, …": each step of the plan with its median per occurrence
/// and how often the plan runs it.
fn steps_text(s: &Steps) -> String {
    let med = s.medians();
    med.iter()
        .map(|(n, v)| {
            let count = s.plan.iter().filter(|p| *p == n).count();
            let times = if count > 1 { format!(" ×{count}") } else { String::new() };
            format!("{n} {:.2}{times}", *v as f64 / 1e3)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn steps_table(m: &Measured) -> Table {
    let mut t = Table::new(
        "Where the time goes: critical steps (µs, median per occurrence; ×n: times per call)",
        &["layout", "mode", "CPUs", "direction", "critical steps"],
    );
    for l in &m.layouts {
        for s in l.sweeps.iter().filter(|s| s.cpus == 1 || s.cpus == 4) {
            for (dir, st) in [("offline", &s.offline_steps), ("online", &s.online_steps)] {
                t.row(vec![l.label(), s.mode.to_string(), s.cpus.to_string(), dir.into(), steps_text(st)]);
            }
        }
        if let Some(c) = &l.cold {
            t.row(vec![l.label(), "bolt".into(), "1".into(), "online, cold".into(), steps_text(&c.steps)]);
        }
    }
    t
}

fn baseline_table(m: &Measured) -> Table {
    let mut t = Table::new(
        "Baselines on this machine (µs; median of round medians)",
        &["mechanism", "away (rounds min–max)", "away p99", "back (rounds min–max)", "back p99", "samples"],
    );
    for b in &m.base {
        if let Some(why) = &b.skipped {
            t.row(vec![
                b.what.clone(),
                format!("skipped: {why}"),
                "".into(),
                "".into(),
                "".into(),
                "".into(),
            ]);
            continue;
        }
        let cell = |s: Option<Spread>, label: &str, f: fn(&Spread) -> String| {
            s.map_or("–".into(), |s| format!("{} ({label})", f(&s)))
        };
        let (away, back) = (b.away.spread(), b.back.spread());
        t.row(vec![
            b.what.clone(),
            cell(away, b.away_label, us_rounds),
            cell(away, b.away_label, |s| us(s.p99_ns)),
            cell(back, b.back_label, us_rounds),
            cell(back, b.back_label, |s| us(s.p99_ns)),
            away.map_or("–".into(), |s| format!("{} ({} rounds)", s.samples, s.rounds)),
        ]);
    }
    t
}

const BULK: &str = "bolt bulk offline of 4 CPUs ≤ 2× one CPU";

/// The goals, each a ratio computed within every round, per layout.
fn goals(m: &Measured) -> Vec<Goal> {
    let mut g = Vec::new();
    let hotplug = baseline(m, BaseKind::Hotplug);
    for l in &m.layouts {
        let (naive1, bolt1) = (sweep(l, Mode::Naive, 1), sweep(l, Mode::Bolt, 1));
        let Some(b1) = bolt1 else { continue };
        if let Some(r) = naive1.and_then(|n| ratio(&n.offline, &b1.offline)) {
            let goal = format!("bolt offline ≥ 20× faster than naive (1 CPU; {})", l.label());
            g.push(Goal::checked(goal, r.text(1), r.median >= 20.0));
        }
        if let Some(r) = hotplug.and_then(|h| ratio(&h.away, &b1.offline)) {
            let goal = format!("bolt offline ≥ 1000× faster than sysfs hotplug (1 CPU; {})", l.label());
            g.push(Goal::checked(goal, r.text(0), r.median >= 1000.0));
        }
        if let Some(r) = sweep(l, Mode::Bolt, 4).and_then(|b4| ratio(&b4.offline, &b1.offline)) {
            // Three decimals: the goal sits near its bound, and "2.00×" must
            // not read as a PASS when it is 2.004×.
            g.push(Goal::checked(format!("{BULK} ({})", l.label()), r.text(3), r.median <= 2.0));
        }
    }
    if hotplug.is_none() {
        let why = m.base.iter().find(|b| b.kind == BaseKind::Hotplug).and_then(|b| b.skipped.clone());
        g.push(Goal::not_measured(
            "bolt offline ≥ 1000× faster than sysfs hotplug",
            format!("hotplug skipped: {}", why.unwrap_or_default()),
        ));
    }
    if !m.layouts.iter().any(|l| sweep(l, Mode::Bolt, 4).is_some()) {
        let n = m.layouts.iter().map(Layout::runtime_cpus).max().unwrap_or(0);
        g.push(Goal::not_measured(
            BULK,
            format!("{n} runtime CPUs leave no 4 to take offline (--cpus 5 or more)"),
        ));
    }
    g
}

fn spread_bar(label: String, kind: usize, s: Option<Spread>) -> Option<RangeBar> {
    let s = s?;
    Some(RangeBar {
        label,
        kind,
        value: s.median_ns,
        quartiles: Some((s.p25_ns, s.p75_ns)),
        whisker: Some(s.p99_ns),
    })
}

/// Kinds of the plots: the kernel's mechanisms in grey, then naive
/// (orange, vermillion) and Bolt (green, sky blue) per layout.
fn kinds(m: &Measured) -> Vec<(String, RGBColor)> {
    const NAIVE: [RGBColor; 2] = [PALETTE[1], PALETTE[5]];
    const BOLT: [RGBColor; 2] = [PALETTE[2], PALETTE[4]];
    let mut k = vec![("kernel mechanism".to_string(), RGBColor(110, 110, 110))];
    for (i, l) in m.layouts.iter().enumerate() {
        k.push((format!("naive runtime, {}", l.label()), NAIVE[i % 2]));
        k.push((format!("Bolt runtime, {}", l.label()), BOLT[i % 2]));
    }
    k
}

/// One chart per direction: the kernel's mechanisms, then every layout's
/// runtime configurations.
fn chart(m: &Measured, offline: bool, goals: Vec<GoalLine>) -> RangeBars {
    let mut bars = Vec::new();
    for b in m.base.iter().filter(|b| b.skipped.is_none()) {
        let (s, label) = if offline { (&b.away, b.away_label) } else { (&b.back, b.back_label) };
        bars.extend(spread_bar(format!("{} ({label})", b.key()), 0, s.spread()));
    }
    for (li, l) in m.layouts.iter().enumerate() {
        for s in &l.sweeps {
            let kind = 1 + 2 * li + usize::from(s.mode == Mode::Bolt);
            let samples = if offline { &s.offline } else { &s.online };
            bars.extend(spread_bar(
                format!("{} ×{} ({})", s.mode, s.cpus, l.short()),
                kind,
                samples.spread(),
            ));
        }
    }
    let dir = if offline { "Taking runtime CPUs offline" } else { "Bringing runtime CPUs back online" };
    RangeBars {
        title: format!("{dir}, against the kernel's mechanisms"),
        axis: Axis::new("latency of one call, median of round medians (log scale)", Unit::Nanos, true),
        kinds: kinds(m),
        bars,
        goals,
        spread_legend: Some("box p25–p75, whisker p99".into()),
    }
}

/// Goal lines of the offline chart, on the one-per-core layout (or the
/// first): where Bolt's one-CPU bar must end.
fn goal_lines(m: &Measured) -> Vec<GoalLine> {
    let Some(l) = m.layouts.iter().find(|l| l.cold.is_some()).or(m.layouts.first()) else { return vec![] };
    let med = |s: &RoundSamples| s.spread().map(|x| x.median_ns);
    let mut g = Vec::new();
    if let Some(n) = sweep(l, Mode::Naive, 1).and_then(|s| med(&s.offline)) {
        g.push(GoalLine {
            at: n / 20.0, label: format!("goal: bolt ×1 ≤ naive ×1 / 20 ({})", l.short())
        });
    }
    if let Some(h) = baseline(m, BaseKind::Hotplug).and_then(|b| med(&b.away)) {
        g.push(GoalLine { at: h / 1000.0, label: "goal: bolt ×1 ≤ hotplug / 1000".into() });
    }
    g
}

/// What was really run, in one paragraph.
fn what_ran(plan: &Plan, allowed: &CpuSet, m: &Measured) -> String {
    let layouts: Vec<String> = m
        .layouts
        .iter()
        .map(|l| format!("{} runtime CPUs on {} real CPUs ({})", l.runtime_cpus(), allowed.len(), l.label()))
        .collect();
    let hotplug = match m.base.iter().find(|b| b.kind == BaseKind::Hotplug) {
        Some(b) if b.skipped.is_none() => b.away.spread().map_or("hotplug: no cycle measured".into(), |s| {
            format!(
                "hotplug: {} offline/online cycles ({} rounds × {}) — {}",
                s.samples, s.rounds, plan.hotplug_per_round, b.what
            )
        }),
        Some(b) => format!("hotplug: skipped ({})", b.skipped.as_deref().unwrap_or("")),
        None => "hotplug: skipped".into(),
    };
    let p = plan.per_round;
    format!(
        "Layouts: {}. {} interleaved rounds (a fresh runtime per layout per round; the layouts and \
         baselines, and the rows within a layout, in an order that changes: {}). Per round and configuration: {} timed \
         offline/online pairs after 2 untimed, {} pairs with step timing on for the breakdown, {} entry/exit \
         cycles, {} cold Bolt onlines (one-per-core layout); {} cycles of the affinity and cpuset baselines; {hotplug}.",
        layouts.join("; "),
        plan.rounds,
        crate::stats::ORDER_TEXT,
        p.pairs,
        p.breakdown,
        p.pairs,
        p.cold,
        p.pairs,
    )
}

const METHOD: &str = "Offline/online latency is the `Runtime::offline`/`online` call from entry to return, with \
    every runtime CPU idle. Naive does everything on the critical path, one CPU at a time (stop-the-world \
    barrier, run-queue migration, grace period, free the cache, fold statistics, remove the registry entry, join \
    the helper thread; online re-creates them). Bolt runs only the critical steps and defers the rest. Entry \
    latency: from the offline call's start until no task runs on the CPU (it was running a task in 5 µs steps). \
    Exit latency: from the online call's start until the first step of a task placed on the CPU right after the \
    call returned. A cold Bolt online follows a reclaim of the kept cache, so it re-creates it.";

fn json(plan: &Plan, allowed: &CpuSet, m: &Measured, goals: &[Goal]) -> Value {
    let steps =
        |s: &Steps| -> Value { s.medians().into_iter().map(|(n, v)| (n.to_string(), json!(v))).collect() };
    let layouts: Vec<Value> = m
        .layouts
        .iter()
        .map(|l| {
            json!({
                "label": l.label(),
                "runtime_cpus": l.runtime_cpus(),
                "mapping": l.mapping,
                "sweeps": l.sweeps.iter().map(|s| json!({
                    "mode": s.mode, "cpus": s.cpus,
                    "offline": s.offline.spread(), "online": s.online.spread(),
                    "offline_step_median_ns": steps(&s.offline_steps),
                    "online_step_median_ns": steps(&s.online_steps),
                })).collect::<Vec<_>>(),
                "entry_exit": l.entry_exit.iter().map(|e| json!({
                    "mode": e.mode, "entry": e.entry.spread(), "exit": e.exit.spread(),
                })).collect::<Vec<_>>(),
                "cold_online": l.cold.as_ref().map(|c| json!({
                    "online": c.online.spread(), "step_median_ns": steps(&c.steps),
                })),
            })
        })
        .collect();
    let base: Vec<Value> = m
        .base
        .iter()
        .map(|b| json!({"baseline": b, "away": b.away.spread(), "back": b.back.spread()}))
        .collect();
    json!({
        "machine": plan.machine,
        "command": crate::command_line(),
        "date": crate::today(),
        "real_cpus": allowed.to_string(),
        "real_cpu_count": allowed.len(),
        "rounds": plan.rounds,
        "pairs_per_round": plan.per_round.pairs,
        "hotplug_cycles_per_round": plan.hotplug_per_round,
        "layouts": layouts,
        "baselines": base,
        "goals": goals,
        "skipped": plan.skipped,
    })
}

/// Prints the tables and writes report.md, results.json and the plots.
pub fn write(dir: &Path, plan: &Plan, allowed: &CpuSet, m: &Measured) -> Result<Vec<Goal>> {
    let (t, ts, te, tb) = (runtime_table(m), steps_table(m), entry_exit_table(m), baseline_table(m));
    let goals = goals(m);
    let tg = goals_table("Goals (ratios within each round)", &goals);
    for x in [&t, &ts, &te, &tb, &tg] {
        say!("\n{}", x.to_terminal());
    }
    let ran = what_ran(plan, allowed, m);
    say!("\n{ran}");
    write_chart(&dir.join("offline"), &chart(m, true, goal_lines(m)))?;
    write_chart(&dir.join("online"), &chart(m, false, Vec::new()))?;

    let mut md = crate::report_header("dyncore bench reconfig", &plan.machine);
    writeln!(md, "{ran}\n\n{METHOD}\n")?;
    writeln!(md, "## Runtime CPUs\n")?;
    for x in [&t, &ts, &te] {
        writeln!(md, "{}:\n\n{}", x.title, x.to_markdown())?;
    }
    writeln!(md, "![offline](offline.png)\n![online](online.png)\n")?;
    writeln!(md, "## Baselines\n\n{}", tb.to_markdown())?;
    writeln!(md, "## Goals\n\n{}", tg.to_markdown())?;
    let skipped: Vec<String> = m
        .base
        .iter()
        .filter_map(|b| b.skipped.as_ref().map(|w| format!("{}: {w}", b.key())))
        .chain(plan.skipped.iter().cloned())
        .collect();
    if !skipped.is_empty() {
        writeln!(md, "## Skipped\n")?;
        for s in &skipped {
            writeln!(md, "* {s}")?;
        }
    }
    write_file(&dir.join("report.md"), md.as_bytes())?;
    write_file(
        &dir.join("results.json"),
        serde_json::to_string_pretty(&json(plan, allowed, m, &goals))?.as_bytes(),
    )?;
    Ok(goals)
}
