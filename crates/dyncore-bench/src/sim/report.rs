//! The report of `dyncore bench sim`: table, goals, plot, report.md and
//! results.json.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use serde::Serialize;

use super::{Config, Measured};
use crate::chart::{Axis, GoalLine, RangeBar, RangeBars, Unit};
use crate::{Goal, RoundSpread, goals_table};
use dyncore_report::table::Table;

/// Goal of the foundation issue on the 2-core machine.
const GOAL_EVENTS_PER_S: f64 = 2.0e6;
/// The whole default run (loading, simulating, writing reports, plots and
/// traces, in a process of its own) may take at most this many times the
/// simulation of the same scenarios alone: what the report adds must not
/// dwarf what it reports. Today it is about 1.5× on this machine; a slow plot
/// renderer, an unbuffered trace writer or a report that re-simulates would
/// break it, which is the point.
const GOAL_WHOLE_OVER_SIM: f64 = 3.0;
/// Issue 35: one simulated event under Chameleon costs at most this many
/// times an event of the bare queue floor, at 24 and at 1024 CPUs.
const GOAL_X_FLOOR: f64 = 2.0;

#[derive(Debug, Clone, Serialize)]
struct Row {
    config: String,
    /// CPUs and threads of the run (`≤N`: the largest of several runs).
    cpus: String,
    threads: String,
    runs: usize,
    events: u64,
    decisions: u64,
    /// Virtual time simulated, summed over runs (s).
    virtual_s: f64,
    /// Wall time of one round (s): median, slowest and fastest round.
    wall_s: f64,
    wall_min_s: f64,
    wall_max_s: f64,
    events_per_s: f64,
    decisions_per_s: f64,
    /// Wall ns per event over the event-queue floor's ns per event, within
    /// each round.
    x_floor: Option<RoundSpread>,
}

fn row(c: &Config, floor_ns: &[f64]) -> Option<Row> {
    let t = c.totals?;
    let walls: Vec<f64> = c.walls_ns.iter().map(|&w| w.max(1) as f64 / 1e9).collect();
    let wall = RoundSpread::of(walls.clone())?;
    let per_event = |w: f64| w * 1e9 / t.events.max(1) as f64;
    let x_floor = RoundSpread::of(walls.iter().zip(floor_ns).map(|(&w, f)| per_event(w) / f).collect());
    // A configuration of several runs shows its largest machine and run.
    let at_most = if t.runs > 1 { "≤" } else { "" };
    Some(Row {
        config: c.name.clone(),
        cpus: format!("{at_most}{}", t.max_cpus),
        threads: format!("{at_most}{}", t.max_threads),
        runs: t.runs,
        events: t.events,
        decisions: t.decisions,
        virtual_s: t.virtual_ns as f64 / 1e9,
        wall_s: wall.median,
        wall_min_s: wall.min,
        wall_max_s: wall.max,
        events_per_s: t.events as f64 / wall.median,
        decisions_per_s: t.decisions as f64 / wall.median,
        x_floor,
    })
}

fn table(machine: &str, rows: &[Row]) -> Table {
    let mut t = Table::new(
        format!("Simulator speed ({machine}; median of rounds)"),
        &[
            "configuration",
            "CPUs",
            "threads",
            "runs",
            "events",
            "decisions",
            "virtual s",
            "wall s (rounds min–max)",
            "M events/s",
            "M decisions/s",
            "× queue floor",
        ],
    );
    for r in rows {
        t.row(vec![
            r.config.clone(),
            r.cpus.clone(),
            r.threads.clone(),
            r.runs.to_string(),
            r.events.to_string(),
            r.decisions.to_string(),
            format!("{:.1}", r.virtual_s),
            format!("{:.3} ({:.3}–{:.3})", r.wall_s, r.wall_min_s, r.wall_max_s),
            format!("{:.2}", r.events_per_s / 1e6),
            format!("{:.2}", r.decisions_per_s / 1e6),
            r.x_floor.map_or("–".into(), |x| format!("{:.1}", x.median)),
        ]);
    }
    t
}

fn goals(m: &Measured, rows: &[Row]) -> Vec<Goal> {
    let mut g = Vec::new();
    if let Some(slow) = rows.iter().min_by(|a, b| a.events_per_s.total_cmp(&b.events_per_s)) {
        g.push(Goal::checked(
            format!("every configuration ≥ {:.0} M events/s", GOAL_EVENTS_PER_S / 1e6),
            format!("slowest {:.2} M events/s ({})", slow.events_per_s / 1e6, slow.config),
            slow.events_per_s >= GOAL_EVENTS_PER_S,
        ));
    }
    for r in rows.iter().filter(|r| r.config.starts_with("dynamic-") && r.config.ends_with(" chameleon")) {
        let goal = format!("{}: ≤ {GOAL_X_FLOOR:.1}× the event-queue floor", r.config);
        match r.x_floor {
            Some(x) => g.push(Goal::checked(goal, x.text(2), x.median <= GOAL_X_FLOOR)),
            None => g.push(Goal::not_measured(goal, "no round timed both")),
        }
    }
    const WHOLE: &str =
        "whole run of the shipped Chameleon scenarios (load, simulate, write reports, plots, traces)";
    let goal = format!("{WHOLE} ≤ {GOAL_WHOLE_OVER_SIM:.0}× the simulation alone");
    let shipped = m.configs.last().map(|c| &c.walls_ns);
    let per_round: Vec<f64> = shipped
        .map(|s| m.whole_run_ns.iter().zip(s).map(|(&w, &s)| w as f64 / s.max(1) as f64).collect())
        .unwrap_or_default();
    match RoundSpread::of(per_round) {
        Some(r) => {
            let mut whole: Vec<f64> = m.whole_run_ns.iter().map(|&w| w as f64 / 1e9).collect();
            let text = format!("{} — whole run {:.3} s", r.text(2), crate::stats::median_f64(&mut whole));
            g.push(Goal::checked(goal, text, r.median <= GOAL_WHOLE_OVER_SIM));
        }
        None => g.push(Goal::not_measured(goal, "no round timed both")),
    }
    if let Some(n) = &m.newtos {
        let goal = format!(
            "the NewtOS model ≥ {:.0} M simulated packets per wall-clock second",
            GOAL_PACKETS_PER_S / 1e6
        );
        let per_round: Vec<f64> =
            n.walls_ns.iter().map(|&w| n.packets as f64 / (w.max(1) as f64 / 1e9)).collect();
        match RoundSpread::of(per_round) {
            Some(r) => g.push(Goal::checked(
                goal,
                format!(
                    "{:.2} M packets/s (rounds {:.2}–{:.2}; {} packets, {} events per round; {})",
                    r.median / 1e6,
                    r.min / 1e6,
                    r.max / 1e6,
                    n.packets,
                    n.events,
                    n.name
                ),
                r.median >= GOAL_PACKETS_PER_S,
            )),
            None => g.push(Goal::not_measured(goal, "no round ran it")),
        }
    }
    g
}

/// Issue 35 (issue 11 asked for 1 M): the network-stack model moves at
/// least this many simulated packets (TCP segments) per second of wall time.
const GOAL_PACKETS_PER_S: f64 = 3e6;

/// Each way's wall time per round (ns).
fn sweeps_json(s: &super::sweeps::SweepRow) -> serde_json::Value {
    super::sweeps::Way::ALL
        .iter()
        .zip(&s.walls_ns)
        .map(|(w, walls)| serde_json::json!({ "engine": w.name(), "wall_ns_by_round": walls }))
        .collect()
}

fn chart(rows: &[Row]) -> RangeBars {
    RangeBars {
        title: format!(
            "Simulator speed ({} CPUs available)",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        ),
        axis: Axis::new("simulated events per wall-clock second", Unit::Si, false),
        kinds: vec![("events per second (median of rounds)".into(), dyncore_report::plot::PALETTE[0])],
        bars: rows
            .iter()
            .map(|r| RangeBar {
                label: r.config.clone(),
                kind: 0,
                value: r.events_per_s,
                // Slowest round ↔ fastest round.
                quartiles: Some((r.events as f64 / r.wall_max_s, r.events as f64 / r.wall_min_s)),
                whisker: None,
            })
            .collect(),
        goals: vec![GoalLine {
            at: GOAL_EVENTS_PER_S,
            label: format!("goal: ≥ {:.0} M events/s", GOAL_EVENTS_PER_S / 1e6),
        }],
        spread_legend: Some("box: slowest to fastest round".into()),
    }
}

/// Prints the tables and writes report.md, results.json and the plot.
pub fn write(dir: &Path, machine: &str, m: &Measured) -> Result<Vec<Goal>> {
    let rows: Vec<Row> = m.configs.iter().filter_map(|c| row(c, &m.floor_ns)).collect();
    let t = table(machine, &rows);
    let sweeps = m.sweeps.table();
    let mut goals = goals(m, &rows);
    goals.extend(m.sweeps.goals());
    let g = goals_table("Goals", &goals);
    say!("{}\n{}\n{}", t.to_terminal(), sweeps.to_terminal(), g.to_terminal());
    dyncore_report::plot::write_chart(&dir.join("plot"), &chart(&rows))?;
    let floor = RoundSpread::of(m.floor_ns.clone());
    let floor_text = floor
        .map_or("–".into(), |f| format!("{:.1} ns per event (rounds {:.1}–{:.1})", f.median, f.min, f.max));
    let mut md = crate::report_header("Simulator speed", machine);
    writeln!(
        md,
        "{} interleaved rounds: each configuration, the queue floor and the whole default run once per \
         round ({}); medians of rounds.\n",
        m.rounds,
        crate::stats::ORDER_TEXT
    )?;
    writeln!(
        md,
        "Events are the simulator's discrete events (ticks, task completions, arrivals, reconfigurations, \
         IPIs); decisions are scheduler decisions (picks, borrow checks, preemption checks). The queue floor is a \
         bare binary-heap event queue measured in the same rounds: {floor_text}. The whole run is \
         `dyncore run --quiet --seeds 1 scenarios/` (the shipped Chameleon scenarios) in a process of its \
         own, writing into a temporary folder, timed against the simulation of the same scenarios alone (the \
         last row) in the same round; `dyncore run` simulates runs in parallel, so on a machine with several \
         cores the whole run can take less than the sequential simulation. The NewtOS model is timed on its \
         own: many stacks placed by `dynamic` under a diurnal load, in simulated TCP segments per second.\n"
    )?;
    writeln!(md, "{}\n", t.to_markdown())?;
    if let Some(mem) = &m.memory {
        let text = mem.as_ref().map_or_else(|e| format!("memory probes failed: {e}"), |f| f.text());
        say!("{text}");
        writeln!(md, "Simulator {text}.\n")?;
    }
    writeln!(
        md,
        "## Sweep throughput\n\nOne sweep run four ways in each round, from start to the table written: \
         `dyncore sweep --jobs 1`, `--jobs 2` (processes of their own), and `dyncore.sweep(..., \
         engine=\"dask\")` on a local Dask cluster of 1 and of 2 single-threaded worker processes (started \
         before the clock starts, with the client's and workers' imports; that start-up is in the goal's line). \
         Parallel efficiency: an engine's points per second over its own on one worker, in the same round (2.0 \
         is perfect on 2 CPUs); beside it, points per second over `--jobs 1`'s (what the engine costs). Every \
         way wrote the same Parquet table, byte for byte (checked).\n\n{}\n",
        sweeps.to_markdown()
    )?;
    writeln!(md, "## Goals\n\n{}\n", g.to_markdown())?;
    writeln!(md, "![simulator speed](plot.png)")?;
    dyncore_report::report::write_file(&dir.join("report.md"), md.as_bytes())?;
    let json = serde_json::json!({
        "machine": machine,
        "command": crate::command_line(),
        "date": crate::today(),
        "rounds": m.rounds,
        "queue_floor_ns_per_event": floor,
        "whole_run_ns_by_round": m.whole_run_ns,
        "memory": m.memory.as_ref().and_then(|r| r.as_ref().ok()),
        "rows": rows,
        "sweep": {
            "points": m.sweeps.size.points,
            "seeds": m.sweeps.size.seeds,
            "work_ms": m.sweeps.size.work_ms,
            "engines": sweeps_json(&m.sweeps),
            "dask_startup_s_by_round": m.sweeps.dask_startup_s,
            "dask_missing": m.sweeps.dask_missing,
        },
        "goals": goals,
    });
    dyncore_report::report::write_file(
        &dir.join("results.json"),
        serde_json::to_string_pretty(&json)?.as_bytes(),
    )?;
    Ok(goals)
}
