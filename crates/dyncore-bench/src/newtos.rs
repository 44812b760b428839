//! `dyncore bench newtos`: the NewtOS scale run of issue 11 — 64 stacks, 512
//! flows, 1024 CPUs, each stack placed by its own `PlacementPolicy` under a
//! diurnal load (`dyncore_sim::netstack::scale`), once with `spread` and
//! once with `dynamic` (and `efficient`), with the calibrated costs of the
//! shipped `scenarios/newtos/table2.toml`. Reports the energy of `dynamic`
//! and `efficient` against `spread` (a ratio from the same run) and the
//! simulator's speed in simulated packets per second of wall time (goal: at
//! least 1 M). Writes `<out>/bench-newtos/{report.md, results.json}`.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use dyncore_sim::netstack::scale::{ScaleConfig, ScaleOutcome, run as scale_run};
use dyncore_sim::netstack::scenario::PolicyName;
use serde_json::json;

use super::{Gate, Goal, goals_table};
use dyncore_report::report::write_file;
use dyncore_report::table::Table;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// 8 stacks and a shorter day: a smoke run.
    #[arg(long)]
    pub quick: bool,
    #[command(flatten)]
    pub gate: Gate,
}

pub fn run(args: &Args, out: &Path) -> Result<Vec<Goal>> {
    let path = dyncore_report::newtos::default_dir().join("table2.toml");
    let sc = dyncore_report::newtos::load(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
    let cfg = if args.quick {
        ScaleConfig { stacks: 8, day_ms: 120.0, steps: 12, ..ScaleConfig::default() }
    } else {
        ScaleConfig::default()
    };
    let mut rows: Vec<(ScaleOutcome, f64)> = Vec::new();
    for p in [PolicyName::Spread, PolicyName::Dynamic, PolicyName::Efficient] {
        let t = Instant::now();
        let o = scale_run(&sc.stack, &sc.net, &cfg, p);
        let wall = t.elapsed().as_secs_f64();
        println!(
            "  {:<10} {:>8.3} J {:>9.0} Mbps {:>9} packets in {:.2} s",
            o.policy, o.energy_j, o.mbps, o.packets, wall
        );
        rows.push((o, wall));
    }
    let spread = rows[0].0.energy_j;
    let packets: u64 = rows.iter().map(|r| r.0.packets).sum();
    let wall: f64 = rows.iter().map(|r| r.1).sum();
    let rate = packets as f64 / wall.max(1e-9);
    let mut t = Table::new(
        "",
        &[
            "policy",
            "energy J (modelled)",
            "against spread",
            "delivered Mbps",
            "offered Mbps",
            "decisions",
            "packets",
            "events",
            "wall s",
        ],
    );
    for (o, w) in &rows {
        t.row(vec![
            o.policy.clone(),
            format!("{:.3}", o.energy_j),
            format!("{:.3}×", o.energy_j / spread),
            format!("{:.0}", o.mbps),
            format!("{:.0}", o.offered_mbps),
            o.decisions.to_string(),
            o.packets.to_string(),
            o.events.to_string(),
            format!("{w:.2}"),
        ]);
    }
    let goals = vec![Goal::checked(
        "the simulator moves at least 1 M simulated packets per second of wall time",
        format!("{:.2} M packets/s ({packets} packets in {wall:.2} s)", rate / 1e6),
        rate >= 1e6,
    )];
    let mut md = String::from("# bench newtos: many stacks under a diurnal load\n\n");
    let _ = writeln!(
        md,
        "Machine: {}. Command: `dyncore bench newtos{}`. {} stacks × {} flows on {} CPUs ({} per stack, 3 \
         used), a simulated day of {} ms in {} load steps from {} to {} Gbps per stack, phases spread over a \
         quarter day; costs from `{}` (calibrated). Energy is modelled.\n",
        super::machine_description(),
        if args.quick { " --quick" } else { "" },
        cfg.stacks,
        cfg.streams,
        cfg.stacks * cfg.cpus_per_stack,
        cfg.cpus_per_stack,
        cfg.day_ms,
        cfg.steps,
        cfg.trough_gbps,
        cfg.peak_gbps,
        path.display()
    );
    md += &t.to_markdown();
    md += "\n";
    md += &goals_table("Goals", &goals).to_markdown();
    let dir = out.join("bench-newtos");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    write_file(&dir.join("report.md"), md.as_bytes())?;
    let j = json!({
        "config": cfg,
        "runs": rows.iter().map(|(o, w)| json!({"outcome": o, "wall_s": w})).collect::<Vec<_>>(),
        "packets_per_wall_s": rate,
    });
    write_file(&dir.join("results.json"), serde_json::to_string_pretty(&j)?.as_bytes())?;
    println!("{}", goals_table("Goals", &goals).to_terminal());
    Ok(goals)
}
