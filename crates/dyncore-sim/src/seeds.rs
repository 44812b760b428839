//! Running a scenario over several seeds, so that every figure is reported
//! with the spread it has across seeds, not as one draw.
//!
//! A scenario with seed `s` run with `n` seeds runs every run with the seeds
//! `s, s + 1, …, s + n - 1`. The runs are independent simulations, so they
//! are spread over the machine's cores with `std::thread::scope`; each
//! result is put back in its (seed, run) slot, so the output does not depend
//! on which thread ran what: the same seeds give the same bytes. Only the
//! first seed keeps its trace (one trace per scenario is what a reader
//! opens; the others would only cost memory).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{EventBudgetExceeded, RunProgress, RunResult, Scenario, ScenarioResult, Watch};

/// Seeds per run when neither `--seeds` nor the scenario's `seeds` says:
/// enough to show the spread, few enough for a default run of a second.
pub const DEFAULT_SEEDS: u32 = 5;

/// `first, first + 1, …` (`n` of them), or `None` if they would pass `u64::MAX`.
pub fn seed_list(first: u64, n: u32) -> Option<Vec<u64>> {
    first.checked_add(u64::from(n.max(1)) - 1)?;
    Some((0..u64::from(n)).map(|k| first + k).collect())
}

/// Runs every run of `scenario` once per seed in `seeds` (which must not be
/// empty), reporting each run's progress to `progress` with its seed (the
/// last report of a run has `done` set); one result per seed, in order. A
/// run past its event budget fails the whole call: the first such run, in
/// (seed, run) order, is the error, whichever thread met it first.
pub fn run_seeds(
    scenario: &Scenario,
    seeds: &[u64],
    progress: &(dyn Fn(u64, &RunProgress) + Sync),
) -> Result<Vec<ScenarioResult>, EventBudgetExceeded> {
    let per_seed: Vec<Scenario> = seeds
        .iter()
        .map(|&seed| {
            let mut s = scenario.clone();
            s.seed = seed;
            s
        })
        .collect();
    let runs = scenario.runs.len();
    let jobs = per_seed.len() * runs;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, jobs.max(1));
    let next = AtomicUsize::new(0);
    let mut slots: Vec<Option<Result<RunResult, EventBudgetExceeded>>> = (0..jobs).map(|_| None).collect();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let job = next.fetch_add(1, Ordering::Relaxed);
                        if job >= jobs {
                            return done;
                        }
                        let (k, i) = (job / runs, job % runs);
                        let seed = per_seed[k].seed;
                        let mut report = |p: &RunProgress| progress(seed, p);
                        let mut watch = Watch { every_events: Watch::EVERY, report: &mut report };
                        let r = crate::engine::run(&per_seed[k], i, &mut watch).map(|mut r| {
                            if k > 0 {
                                r.trace = Vec::new();
                            }
                            r
                        });
                        let failed = r.is_err();
                        done.push((job, r));
                        if failed {
                            // No point running the rest: the call fails.
                            next.store(jobs, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for w in workers {
            let done = w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            for (job, r) in done {
                slots[job] = Some(r);
            }
        }
    });
    if let Some(e) = slots.iter().flatten().find_map(|r| r.as_ref().err()) {
        return Err(e.clone());
    }
    let mut slots = slots.into_iter().map(|r| r.expect("every job ran").expect("no job failed"));
    Ok(per_seed
        .iter()
        .map(|s| ScenarioResult {
            name: s.name.clone(),
            title: s.title.clone(),
            seed: s.seed,
            runs: slots.by_ref().take(runs).collect(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_count_up_from_the_first_and_refuse_overflow() {
        assert_eq!(seed_list(7, 3), Some(vec![7, 8, 9]));
        assert_eq!(seed_list(u64::MAX, 1), Some(vec![u64::MAX]));
        assert_eq!(seed_list(u64::MAX - 1, 3), None);
    }

    /// The parallel runner gives exactly what running each seed alone gives.
    #[test]
    fn parallel_seeds_match_sequential_runs_and_keep_one_trace() {
        let text = std::fs::read_to_string(dyncore_scenario::load::default_dir().join("fig4-parallel.toml"))
            .unwrap();
        let mut sc = Scenario::from_toml(&text).unwrap();
        sc.runs.truncate(6);
        let done = AtomicUsize::new(0);
        let got = run_seeds(&sc, &[3, 4, 5], &|_, p| {
            if p.done {
                done.fetch_add(1, Ordering::Relaxed);
            }
        })
        .expect("within the event budget");
        assert_eq!(done.load(Ordering::Relaxed), 18);
        for (k, seed) in [3u64, 4, 5].into_iter().enumerate() {
            let mut s = sc.clone();
            s.seed = seed;
            let alone = crate::run_quietly(&s).expect("within the event budget");
            assert_eq!(got[k].seed, seed);
            let json = |r: &ScenarioResult| serde_json::to_string(&r.runs).unwrap();
            assert_eq!(json(&got[k]), json(&alone), "seed {seed}");
            assert_eq!(
                got[k].runs.iter().all(|r| r.trace.is_empty()),
                k > 0,
                "only the first seed keeps traces"
            );
        }
    }
}
