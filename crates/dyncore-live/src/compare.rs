//! Side by side: every figure of a live run beside the simulator's
//! prediction for the same (scaled) scenario and seed, the difference in
//! percent, and whether they agree — within [`AGREEMENT`] — or, where they
//! do not, which measured mechanism explains it.
//!
//! The mechanisms, measured in every live run ([`Diag`]):
//!
//! * **throttling error**: how far each thread's work was from what its
//!   live schedule at its duties promised (`work_error`: what the real
//!   CPUs delivered, whatever took it — the throttle, the hypervisor,
//!   other load), and how far each runtime CPU's busy time — the CPU time
//!   its worker got in steps — was from its duty over the periods it had
//!   work (the runtime's duty report);
//! * **contention**: the share of each runtime CPU's stepping time that
//!   was taken from it (wall time minus the worker's CPU time, the
//!   runtime's `DutyReport::stolen_ns`), and how far its CPU time fell
//!   short of its duty where the throttle could not make that up. A run
//!   with a contended CPU (`DutyReport::contended`) is labelled CONTENDED
//!   beside its figures; unlike an oversubscribed one its figures are
//!   counted, since each CPU still got its duty in CPU time or is shown
//!   short of it, and a miss names the contention when it is the largest;
//! * **machine drift**: how far a kernel's rate alone at the baseline duty
//!   moved between the calibrations before and after the run (a shared
//!   machine under a hypervisor changes speed; speedups are measured
//!   against the mean of the two);
//! * **reconfiguration cost**: the critical paths the runtime measured for
//!   every offline and online (what `ReconfigDone` told the policy),
//!   against the simulator's charge for the same plans from the machine
//!   profile, as a share of the run;
//! * **tick jitter**: how late the controller fed the tick rounds, as a
//!   share of the minimum granularity (a quantum stretched by that much
//!   shifts the shares the policy hands out by about as much).
//!
//! A figure that misses names the largest of them, with its value; all of
//! them are in the report's table for every run. A figure of an
//! oversubscribed run is never counted as agreeing, whatever its value.

use dyncore_sim::RunResult;
use dyncore_sim::machine::MachineSpec;
use dyncore_sim::scenario::{GroupBy, Scenario};

use crate::run::LiveRunOutput;
use dyncore_report::figure::{Figure, fmt_value};
use dyncore_report::table::Table;

/// A live figure within this of the prediction agrees with it.
pub const AGREEMENT: f64 = 0.15;

/// What a report says instead of a verdict on timings when it was made
/// in a TCG guest (`dyncore_report::machine::timings_are_real` is false):
/// its CPUs are emulated, so its times are not held against the
/// simulator's prediction or any timing goal; placements, counts and
/// orderings are still reported and checked.
pub const NOT_COMPARED: &str = "TCG guest: functional figures only, not compared";

/// What one live run measured about the mechanisms that make it depart
/// from the simulator.
#[derive(Debug, Clone, PartialEq)]
pub struct Diag {
    pub label: String,
    pub oversubscribed: bool,
    /// A runtime CPU of the run was contended (see the module docs).
    pub contended: bool,
    /// Largest share of a CPU's stepping time stolen, and largest
    /// shortfall of its CPU time below its duty (0 when none fell short).
    pub stolen_share: f64,
    pub shortfall: f64,
    /// Largest |busy / entitled − 1| over the CPUs with loaded periods.
    pub duty_error: f64,
    /// Largest |units done / units the schedule promised − 1| over the
    /// run's threads (see `work_error`).
    pub work_error: f64,
    /// Largest |rate after / rate before − 1| over the run's kernels.
    pub drift: f64,
    /// Reconfigurations live and in the prediction, and their total cost.
    pub reconfigs_live: usize,
    pub reconfigs_sim: u64,
    pub reconfig_live_ns: u64,
    pub reconfig_sim_ns: u64,
    /// |live − predicted reconfiguration time| / the live run's length.
    pub reconfig_share: f64,
    /// Mean and 99th-percentile lateness of the tick rounds, rounds missed.
    pub tick_late_mean_ns: f64,
    pub tick_late_p99_ns: u64,
    pub ticks_missed: u64,
    /// Mean lateness over the minimum granularity.
    pub tick_share: f64,
    /// Controller CPU time over the run's length.
    pub controller_share: f64,
}

impl Diag {
    pub fn of(scenario: &Scenario, live: &LiveRunOutput, sim: &RunResult) -> Diag {
        let params = scenario.sim.with(&scenario.runs[live.index].sim);
        let log = &live.run.log;
        let end = live.run.end_ns.max(1) as f64;
        let duty_error = live
            .run
            .duty
            .iter()
            .filter_map(|d| Some(d.measured()? / d.entitled()? - 1.0))
            .map(f64::abs)
            .fold(0.0, f64::max);
        let work_error = work_error(scenario, live);
        let drift = live.rates.iter().filter_map(|r| r.drift()).map(f64::abs).fold(0.0, f64::max);
        let reconfig_live_ns: u64 = log.reconfigs.iter().map(|r| r.critical_ns).sum();
        let tick_late_mean_ns = log.ticks.mean_late_ns();
        Diag {
            label: scenario.runs[live.index].label.clone(),
            oversubscribed: live.fit.oversubscribed,
            contended: live.run.duty.iter().any(|d| d.contended()),
            stolen_share: live.run.duty.iter().map(|d| d.stolen_share()).fold(0.0, f64::max),
            shortfall: live.run.duty.iter().filter_map(|d| d.shortfall()).fold(0.0, f64::max),
            duty_error,
            work_error,
            drift,
            reconfigs_live: log.reconfigs.len(),
            reconfigs_sim: sim.reconfig.fuses + sim.reconfig.splits,
            reconfig_live_ns,
            reconfig_sim_ns: sim.reconfig.time_ns,
            reconfig_share: reconfig_live_ns.abs_diff(sim.reconfig.time_ns) as f64 / end,
            tick_late_mean_ns,
            tick_late_p99_ns: log.ticks.late_quantile_ns(0.99),
            ticks_missed: log.ticks.missed,
            tick_share: tick_late_mean_ns / params.min_granularity_ns.max(params.tick_ns) as f64,
            controller_share: log.controller_cpu_ns as f64 / end,
        }
    }

    /// The mechanism with the largest measured effect, in words.
    pub fn largest(&self) -> String {
        let candidates = [
            (self.duty_error.max(self.work_error), "throttling error", {
                format!(
                    "a thread did {:.1}% more or less work than its schedule at its duties promised; a runtime \
                     CPU's busy time was off its duty by {:.2}%",
                    self.work_error * 100.0,
                    self.duty_error * 100.0
                )
            }),
            (self.stolen_share.max(self.shortfall), "contention", {
                format!(
                    "{:.1}% of a runtime CPU's stepping time was taken by other threads or the host; a CPU got \
                     {:.1}% less CPU time than its duty",
                    self.stolen_share * 100.0,
                    self.shortfall * 100.0
                )
            }),
            (self.drift, "machine drift", {
                format!(
                    "the kernel alone at the baseline duty ran {:.1}% faster or slower after the run than before",
                    self.drift * 100.0
                )
            }),
            (self.reconfig_share, "reconfiguration cost", {
                format!(
                    "{} live vs {} predicted, {:.2}% of the run",
                    fmt_ns(self.reconfig_live_ns),
                    fmt_ns(self.reconfig_sim_ns),
                    self.reconfig_share * 100.0
                )
            }),
            (self.tick_share, "tick jitter", {
                format!(
                    "ticks {} late on average, {:.1}% of a quantum",
                    fmt_ns(self.tick_late_mean_ns as u64),
                    self.tick_share * 100.0
                )
            }),
        ];
        let (_, what, detail) = candidates.into_iter().max_by(|a, b| a.0.total_cmp(&b.0)).expect("five");
        format!("{what}: {detail}")
    }
}

/// How far the runtime CPUs' work was from what their duties promised: for
/// each thread, the units it did over the units its live schedule promised
/// — every slice the policy ran it for, at the rate the duty of that slice
/// gives (`duty / 50%` times its kernel's calibrated baseline rate) — minus
/// 1; the largest over the threads that had at least a hundredth of the
/// run's work. The schedule is the live one, so this isolates what the
/// real CPUs delivered (throttling, the hypervisor, other load) from what
/// the policy decided.
fn work_error(scenario: &Scenario, live: &LiveRunOutput) -> f64 {
    let machine = MachineSpec::build(&scenario.runs[live.index]).expect("validated");
    let log = &live.run.log;
    let mut per_thread: Vec<(f64, f64)> = vec![(0.0, 0.0); log.threads.len()];
    for (p, ts) in live.threads.iter().enumerate() {
        let rate = live.rates[live.kernel[p]].units_per_s() / 1e9;
        let class = live.programs[p].template.class;
        for &t in ts {
            per_thread[t].0 = log.threads[t].units as f64;
            per_thread[t].1 = log
                .slices
                .iter()
                .filter(|s| s.thread == t)
                .map(|s| {
                    let duty = machine.speed.duty(machine.topology.kind(s.cpu), s.object_cpus, class);
                    (s.end_ns - s.start_ns) as f64 * duty.speedup() * rate
                })
                .sum();
        }
    }
    let total: f64 = per_thread.iter().map(|t| t.1).sum();
    per_thread
        .iter()
        .filter(|(_, promised)| *promised > 0.01 * total)
        .map(|(done, promised)| (done / promised - 1.0).abs())
        .fold(0.0, f64::max)
}

/// The contended CPUs of a run, in words ("CPU 0 lost 12.0% of its
/// stepping time, 4.1% short of its duty"); `None` when none was.
pub fn contended_cpus(duty: &[dyncore_runtime::cpu::DutyReport]) -> Option<String> {
    let cpus: Vec<String> = duty
        .iter()
        .filter(|d| d.contended())
        .map(|d| {
            let short =
                d.shortfall().filter(|s| *s > 0.0).map(|s| format!(", {:.1}% short of its duty", s * 100.0));
            format!(
                "CPU {} lost {:.1}% of its stepping time{}",
                d.cpu,
                d.stolen_share() * 100.0,
                short.unwrap_or_default()
            )
        })
        .collect();
    (!cpus.is_empty()).then(|| cpus.join(", "))
}

/// `12.3 µs` style.
pub fn fmt_ns(ns: u64) -> String {
    match ns {
        n if n >= 1_000_000_000 => format!("{:.2} s", n as f64 / 1e9),
        n if n >= 1_000_000 => format!("{:.2} ms", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1} µs", n as f64 / 1e3),
        n => format!("{n} ns"),
    }
}

/// One figure, live and predicted.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    pub x: String,
    pub series: String,
    pub live: Option<f64>,
    pub sim: Option<f64>,
    pub oversubscribed: bool,
    /// From a run with a contended runtime CPU (labelled, counted).
    pub contended: bool,
    /// Why it misses, when it does.
    pub mechanism: Option<String>,
    /// Measured in a TCG guest: shown, never held against the prediction
    /// ([`NOT_COMPARED`]).
    pub functional_only: bool,
}

impl Side {
    /// (live − predicted) / predicted.
    pub fn difference(&self) -> Option<f64> {
        let (l, s) = (self.live?, self.sim?);
        (s != 0.0).then(|| (l - s) / s)
    }

    /// Counted as agreeing: both values, within [`AGREEMENT`], not
    /// oversubscribed.
    pub fn agrees(&self) -> bool {
        !self.functional_only
            && !self.oversubscribed
            && self.difference().is_some_and(|d| d.abs() <= AGREEMENT)
    }

    pub fn verdict(&self) -> String {
        match (self.difference(), &self.mechanism) {
            _ if self.functional_only => NOT_COMPARED.into(),
            _ if self.oversubscribed => "OVERSUBSCRIBED: not counted".into(),
            (None, _) if self.live.is_none() => "no live value (not finished)".into(),
            (None, _) => "no prediction".into(),
            (Some(_), _) if self.agrees() => "yes".into(),
            (Some(_), Some(m)) => format!("NO — {m}"),
            (Some(_), None) => "NO".into(),
        }
    }
}

/// The runs a cell of the figure comes from.
fn runs_of(scenario: &Scenario, x: &str, series: &str) -> Vec<usize> {
    (0..scenario.runs.len())
        .filter(|&i| {
            let r = &scenario.runs[i];
            match scenario.report.group_by {
                GroupBy::Program => r.series.as_deref().unwrap_or(&r.label) == series,
                GroupBy::Run => r.label == x,
            }
        })
        .collect()
}

/// Every cell of the live figure (in its order) beside the prediction's.
/// `diags[i]` is run `i`'s, if it ran live.
/// In a TCG guest every side is [`Side::functional_only`].
pub fn side_by_side(scenario: &Scenario, live: &Figure, sim: &Figure, diags: &[Option<Diag>]) -> Vec<Side> {
    let functional_only = !dyncore_report::machine::timings_are_real();
    let mut out = Vec::new();
    for (xi, x) in sim.categories.iter().enumerate() {
        for (si, s) in sim.series.iter().enumerate() {
            let predicted = sim.values[si][xi].map(|v| v.median);
            let lx = live.categories.iter().position(|c| c == x);
            let ls = live.series.iter().position(|c| c == s);
            let measured = lx.zip(ls).and_then(|(lx, ls)| live.values[ls][lx]).map(|v| v.median);
            if predicted.is_none() && measured.is_none() {
                continue;
            }
            let runs: Vec<&Diag> =
                runs_of(scenario, x, s).into_iter().filter_map(|i| diags.get(i)?.as_ref()).collect();
            let mut side = Side {
                x: x.clone(),
                series: s.clone(),
                live: measured,
                sim: predicted,
                oversubscribed: runs.iter().any(|d| d.oversubscribed),
                contended: runs.iter().any(|d| d.contended),
                mechanism: None,
                functional_only,
            };
            if !functional_only && !side.agrees() && side.difference().is_some() {
                side.mechanism = runs
                    .iter()
                    .map(|d| d.largest())
                    .reduce(|a, b| if a == b { a } else { format!("{a}; {b}") });
            }
            out.push(side);
        }
    }
    out
}

/// The side-by-side table.
pub fn side_table(fig_x: &str, sides: &[Side]) -> Table {
    let mut t = Table::new(
        "",
        &[fig_x, "series", "live", "simulator", "difference", &format!("within {:.0}%", AGREEMENT * 100.0)],
    );
    let v = |x: Option<f64>| x.map(fmt_value).unwrap_or_else(|| "-".into());
    for s in sides {
        let label = |v: String| match (s.oversubscribed, s.contended) {
            (true, _) => format!("{v} (OVERSUBSCRIBED)"),
            (false, true) => format!("{v} (CONTENDED)"),
            (false, false) => v,
        };
        t.row(vec![
            s.x.clone(),
            s.series.clone(),
            label(v(s.live)),
            v(s.sim),
            match s.difference() {
                _ if s.functional_only => "not compared".into(),
                Some(d) => format!("{:+.1}%", d * 100.0),
                None => "-".into(),
            },
            s.verdict(),
        ]);
    }
    t
}

/// "5 of 6 figures agree within 15%; 1 oversubscribed, not counted".
pub fn agreement_sentence(sides: &[Side]) -> String {
    if sides.iter().any(|s| s.functional_only) {
        return format!(
            "{NOT_COMPARED}: {} live figure(s) shown beside the simulator's prediction, no verdict on timings",
            sides.len()
        );
    }
    let counted: Vec<&Side> =
        sides.iter().filter(|s| !s.oversubscribed && s.difference().is_some()).collect();
    let agree = counted.iter().filter(|s| s.agrees()).count();
    let over = sides.iter().filter(|s| s.oversubscribed).count();
    let mut s = format!(
        "{agree} of {} live figure(s) agree with the simulator's prediction within {:.0}%",
        counted.len(),
        AGREEMENT * 100.0
    );
    if over > 0 {
        s += &format!("; {over} OVERSUBSCRIBED figure(s) not counted");
    }
    let contended = sides.iter().filter(|s| s.contended && !s.oversubscribed).count();
    if contended > 0 {
        s += &format!("; {contended} CONTENDED figure(s), counted");
    }
    let missing = sides.iter().filter(|s| s.difference().is_none() && !s.oversubscribed).count();
    if missing > 0 {
        s += &format!("; {missing} without a live value or prediction");
    }
    s
}

/// The measurements behind the verdicts, one row per live run.
pub fn diag_table(diags: &[Diag]) -> Table {
    let mut t = Table::new(
        "",
        &[
            "run",
            "duty error",
            "stolen / short of duty",
            "work error",
            "machine drift",
            "reconfigurations live / predicted",
            "reconfiguration time live / predicted",
            "tick lateness mean / p99",
            "ticks missed",
            "controller CPU",
        ],
    );
    for d in diags {
        let mut label = d.label.clone();
        if d.oversubscribed {
            label += " (OVERSUBSCRIBED)";
        } else if d.contended {
            label += " (CONTENDED)";
        }
        t.row(vec![
            label,
            format!("{:.2}%", d.duty_error * 100.0),
            format!("{:.1}% / {:.1}%", d.stolen_share * 100.0, d.shortfall * 100.0),
            format!("{:.1}%", d.work_error * 100.0),
            format!("{:.2}%", d.drift * 100.0),
            format!("{} / {}", d.reconfigs_live, d.reconfigs_sim),
            format!("{} / {}", fmt_ns(d.reconfig_live_ns), fmt_ns(d.reconfig_sim_ns)),
            format!("{} / {}", fmt_ns(d.tick_late_mean_ns as u64), fmt_ns(d.tick_late_p99_ns)),
            d.ticks_missed.to_string(),
            format!("{:.1}%", d.controller_share * 100.0),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(live: Option<f64>, sim: Option<f64>, over: bool) -> Side {
        Side {
            x: "x".into(),
            series: "s".into(),
            live,
            sim,
            oversubscribed: over,
            contended: false,
            mechanism: None,
            functional_only: false,
        }
    }

    #[test]
    fn a_tcg_guest_figure_is_shown_and_never_held_against_the_prediction() {
        // Within 15% and far off alike: no verdict on timings, either way.
        let tcg = |live| Side { functional_only: true, ..side(Some(live), Some(1.0), false) };
        let sides = [tcg(1.0), tcg(3.0)];
        for s in &sides {
            assert!(!s.agrees());
            assert_eq!(s.verdict(), NOT_COMPARED);
            assert_eq!(s.mechanism, None);
        }
        let t = side_table("run", &sides);
        // The figures are still there; the difference and verdict are not.
        assert_eq!((t.rows[1][2].as_str(), t.rows[1][3].as_str()), ("3.000", "1.000"));
        assert_eq!(t.rows[1][4], "not compared");
        assert_eq!(t.rows[0][5], "TCG guest: functional figures only, not compared");
        let sentence = agreement_sentence(&sides);
        assert!(sentence.starts_with("TCG guest: functional figures only, not compared"), "{sentence}");
        assert!(!sentence.contains("agree"), "{sentence}");
    }

    #[test]
    fn agreement_is_within_15_percent_and_never_when_oversubscribed() {
        assert!(side(Some(1.14), Some(1.0), false).agrees());
        assert!(!side(Some(1.16), Some(1.0), false).agrees());
        assert!(!side(Some(1.0), Some(1.0), true).agrees());
        assert!(!side(None, Some(1.0), false).agrees());
        assert_eq!(side(Some(0.9), Some(1.2), false).difference(), Some((0.9 - 1.2) / 1.2));
        let sides = [
            side(Some(1.0), Some(1.0), false),
            side(Some(2.0), Some(1.0), false),
            side(Some(1.0), Some(1.0), true),
        ];
        assert_eq!(
            agreement_sentence(&sides),
            "1 of 2 live figure(s) agree with the simulator's prediction within 15%; 1 OVERSUBSCRIBED figure(s) not counted"
        );
        assert!(side_table("run", &sides).rows[2][2].contains("OVERSUBSCRIBED"));
        // A contended figure is labelled and counted.
        let sides = [
            side(Some(1.0), Some(1.0), false),
            Side { contended: true, ..side(Some(1.1), Some(1.0), false) },
        ];
        assert!(sides[1].agrees());
        assert!(side_table("run", &sides).rows[1][2].contains("(CONTENDED)"));
        assert_eq!(
            agreement_sentence(&sides),
            "2 of 2 live figure(s) agree with the simulator's prediction within 15%; 1 CONTENDED figure(s), counted"
        );
    }

    #[test]
    fn the_largest_mechanism_is_named() {
        let d = Diag {
            label: "r".into(),
            oversubscribed: false,
            contended: false,
            stolen_share: 0.0,
            shortfall: 0.0,
            duty_error: 0.01,
            work_error: 0.005,
            drift: 0.02,
            reconfigs_live: 4,
            reconfigs_sim: 4,
            reconfig_live_ns: 8_000,
            reconfig_sim_ns: 4_000,
            reconfig_share: 0.000_004,
            tick_late_mean_ns: 400_000.0,
            tick_late_p99_ns: 900_000,
            ticks_missed: 0,
            tick_share: 0.1,
            controller_share: 0.01,
        };
        assert!(d.largest().starts_with("tick jitter"), "{}", d.largest());
        let d = Diag { tick_share: 0.0, ..d };
        assert!(d.largest().starts_with("machine drift"), "{}", d.largest());
        let d = Diag { drift: 0.0, ..d };
        assert!(d.largest().starts_with("throttling error"), "{}", d.largest());
        let d = Diag { contended: true, stolen_share: 0.2, shortfall: 0.03, ..d };
        assert!(d.largest().starts_with("contention: 20.0%"), "{}", d.largest());
    }
}
