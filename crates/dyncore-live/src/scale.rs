//! `--time-scale X`: every duration of a scenario multiplied by X — the
//! work, the start times, the tick, the minimum granularity and the safety
//! stop, at the top and in every run's overrides — so that a live run of a
//! shipped scenario takes seconds instead of minutes.
//!
//! All of them, and nothing else, so that what the policy sees keeps its
//! proportions: a task of 4 s with a 4 ms tick and 16 ms granularity
//! becomes one of 1 s with a 1 ms tick and 4 ms granularity at X = 0.25,
//! and the simulator's prediction for a live run is made from the *same*
//! scaled scenario. The programs' own task lengths (Table 3's cost models:
//! a Fibonacci task of 2 ms, a pmake job of 150 ms) are not scenario fields
//! and are not scaled, in either backend. Rates (IPIs per second) and the
//! machine profile's reconfiguration costs are not durations of the
//! scenario either.
//!
//! The scaled scenario must pass the same validation as a file: a scale
//! that makes the tick shorter than 100 µs, or work shorter than 1 µs, is
//! refused with the field it breaks.

use dyncore_sim::Scenario;

/// The largest scale accepted: a run 100× as long as the scenario says is
/// hours for the shipped ones; more is a typo.
pub const MAX_TIME_SCALE: f64 = 100.0;

/// `s` with every duration multiplied by `x`, validated; the error says
/// why `x` cannot be used.
pub fn scaled(s: &Scenario, x: f64) -> Result<Scenario, String> {
    if !(x.is_finite() && x > 0.0) {
        return Err(format!("--time-scale {x}: the scale must be a positive number (e.g. 0.25)"));
    }
    if x > MAX_TIME_SCALE {
        return Err(format!(
            "--time-scale {x}: more than {MAX_TIME_SCALE} would make a run {x} times as long as the scenario says"
        ));
    }
    let ns = |v: u64| (v as f64 * x).round() as u64;
    let mut out = s.clone();
    out.sim.tick_ns = ns(s.sim.tick_ns);
    out.sim.min_granularity_ns = ns(s.sim.min_granularity_ns);
    out.sim.max_time_ns = ns(s.sim.max_time_ns).max(1);
    for run in &mut out.runs {
        let o = &mut run.sim;
        o.tick_ns = o.tick_ns.map(ns);
        o.min_granularity_ns = o.min_granularity_ns.map(ns);
        o.max_time_ns = o.max_time_ns.map(|t| ns(t).max(1));
        for w in &mut run.workloads {
            w.start_ms *= x;
            w.every_ms = w.every_ms.map(|e| e * x);
            if w.command.is_some() && w.model.is_none() {
                // A command's work is its own (a scaled scenario of
                // commands is refused where it would run).
                continue;
            }
            let work = w.work_ms.unwrap_or_else(|| w.program_def().expect("validated").work_ms);
            w.work_ms = Some(work * x);
        }
    }
    out.validate().map_err(|e| format!("--time-scale {x} makes the scenario invalid: {e}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig3() -> Scenario {
        dyncore_scenario::load::load(&dyncore_scenario::load::default_dir().join("fig3-taxation.toml"))
            .unwrap()
    }

    #[test]
    fn every_duration_is_scaled_and_nothing_else() {
        let s = fig3();
        let q = scaled(&s, 0.25).unwrap();
        assert_eq!(q.sim.tick_ns, s.sim.tick_ns / 4);
        assert_eq!(q.sim.min_granularity_ns, s.sim.min_granularity_ns / 4);
        assert_eq!(q.sim.max_time_ns, s.sim.max_time_ns / 4);
        // The default work of N-Queen (4000 ms) is made explicit, scaled.
        assert_eq!(q.runs[0].workloads[0].work_ms, Some(1000.0));
        assert_eq!((q.sim.ipi_rate_per_cpu_s, q.seed, q.runs.len()), (s.sim.ipi_rate_per_cpu_s, s.seed, 3));
        // 1 is the identity, apart from the work made explicit.
        let one = scaled(&s, 1.0).unwrap();
        assert_eq!(one.sim, s.sim);
    }

    #[test]
    fn a_scale_that_is_not_positive_absurd_or_breaks_a_limit_is_refused() {
        let s = fig3();
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(scaled(&s, bad).unwrap_err().contains("positive"), "{bad}");
        }
        assert!(scaled(&s, 1000.0).unwrap_err().contains("times as long"));
        // 4 ms × 0.001 = 4 µs: below the shortest tick a scenario may have.
        let e = scaled(&s, 0.001).unwrap_err();
        assert!(e.contains("sim.tick_ns"), "{e}");
    }
}
