//! The goals: issue 10's four, each a ratio of figures from one round,
//! and the simulator's prediction (issue 11), restated by issue 20 where
//! they were badly posed.

use super::predict::Prediction;
use super::rows::{Row, SplitRow, median, per_round};
use super::split;
use crate::Goal;

pub(super) const PREDICTION_GOAL: &str = "the simulator predicts B1-B3's Gbps within 20% (this machine's [stack] \
     costs), or a slower live stack's miss is accounted for by its wake-ups beyond the model's";

/// The four goals of issue 10: each a ratio computed within every round
/// (the configurations of one round ran minutes apart at most), reported as
/// the median of the round ratios with their range.
pub(super) fn goals(rows: &[Row], s: &[SplitRow], targets: &[f64], cpus: usize) -> Vec<Goal> {
    let (b0, b2, b3, b4, b4s, b5) = (&rows[0], &s[0], &s[1], &s[2], &s[3], &s[4]);
    let n = b0.runs.len();
    let better_i = |i: usize| b2.runs[i].gbps.max(b3.runs[i].gbps);
    let mut out = Vec::new();

    let r1: Vec<f64> = (0..n).map(|i| b4.runs[i].gbps / better_i(i)).collect();
    let (m, lo, hi) = per_round(&r1);
    out.push(Goal::checked(
        "dynamic within 10% of the better of B2 and B3 at each load level (the stream; idle carries none)",
        format!(
            "B4 / max(B2, B3) per round: {m:.2}× (range {lo:.2}–{hi:.2}); medians B4 {:.2}, B2 {:.2}, B3 {:.2} Gbps{}",
            b4.gbps_median,
            b2.gbps_median,
            b3.gbps_median,
            if m < 0.9 {
                format!(
                    "; missed: B4 starts consolidated and spreads only when a sample shows the burst \
                     (reaction {}), so its layout differs from the better one's",
                    b4.reaction_ms_median.map_or("none".into(), |m| format!("{m:.0} ms"))
                )
            } else {
                String::new()
            }
        ),
        m >= 0.9,
    ));

    // At idle both layouts park; what consolidating buys is the static
    // power of the cores it leaves (power-gated, modelled): the energy.
    // Consolidating on one of `cpus` cores can save at most (cpus - 1) /
    // cpus of spread's idle energy: the goal is that ideal within 5
    // points (the polls before each park). Per round the idle phases are
    // short, so the ratio of the sums.
    let r = b4.idle_joules / b4s.idle_joules.max(1e-12);
    let ideal = 1.0 / cpus.max(1) as f64;
    let limit = ideal + 0.05;
    out.push(Goal::checked(
        format!(
            "at the idle level, dynamic's modelled idle energy ≤ {:.0}% of always-spread's (one core of {cpus}: \
             the ideal {:.0}%, plus 5 points)",
            limit * 100.0,
            ideal * 100.0
        ),
        format!(
            "over all rounds {:.3} J against {:.3} J = {r:.2}× (modelled; CPU time at idle {:.3} ms against \
             {:.3} ms: both park){}",
            b4.idle_joules,
            b4s.idle_joules,
            b4.idle_cpu_s * 1e3,
            b4s.idle_cpu_s * 1e3,
            if r > limit {
                "; missed: dynamic did not leave the other cores idle for the idle phases (it stayed spread, or \
                 polled long)"
            } else {
                ""
            }
        ),
        r <= limit,
    ));

    let jpg = |r: &split::SplitRun| r.stream.joules / (r.bytes as f64 / 1e9);
    let reached: Vec<bool> = (0..n).map(|i| b5.runs[i].gbps * 1e9 >= targets[i] * 0.98).collect();
    let r3: Vec<f64> = (0..n).map(|i| jpg(&b5.runs[i]) / jpg(&b2.runs[i]).max(1e-12)).collect();
    let (e, lo, hi) = per_round(&r3);
    let n_reached = reached.iter().filter(|&&r| r).count();
    let ttt: Vec<f64> = b5.runs.iter().filter_map(|r| r.time_to_target_ns).map(|t| t as f64 / 1e6).collect();
    let ttt_text = if ttt.is_empty() {
        "never held in a sample window".to_string()
    } else {
        let (m, lo, hi) = per_round(&ttt);
        format!("held from {m:.0} ms into the stream (median; range {lo:.0}–{hi:.0})")
    };
    let ok = n_reached == n && e <= 0.7;
    out.push(Goal::checked(
        "B5 reaches its target (80% of B2) in every round, with ≤ 70% of B2's modelled energy",
        format!(
            "target reached in {n_reached} of {n} rounds (B5 {:.2} Gbps, targets {:.2} Gbps median); {ttt_text}; \
             energy per byte {e:.2}× B2's per round (range {lo:.2}–{hi:.2}; modelled){}",
            b5.gbps_median,
            median(targets.to_vec()).unwrap_or(0.0) / 1e9,
            if n_reached < n {
                format!(
                    "; missed: the streams ended with TCP's core at {} MHz (median){}",
                    median(b5.runs.iter().map(|r| f64::from(r.final_tcp_mhz)).collect()).unwrap_or(0.0),
                    if b5.target_unreachable > 0 {
                        format!(" ({} runs found no step that holds it)", b5.target_unreachable)
                    } else {
                        String::new()
                    }
                )
            } else if e > 0.7 {
                "; missed: the slower cores needed more than 70% of B2's energy per byte".into()
            } else {
                String::new()
            }
        ),
        ok,
    ));

    let r4: Vec<f64> = (0..n).map(|i| better_i(i) / b0.runs[i].gbps()).collect();
    let (m, lo, hi) = per_round(&r4);
    out.push(Goal::checked(
        "the split stack's better configuration ≥ 0.5× B0",
        format!(
            "max(B2, B3) / B0 per round: {m:.2}× (range {lo:.2}–{hi:.2}); medians B2 {:.2}, B3 {:.2}, B0 {:.2} Gbps{}",
            b2.gbps_median,
            b3.gbps_median,
            b0.gbps_median,
            if m < 0.5 {
                "; missed: the split stack pays a channel crossing and a smoltcp pass per packet, in user \
                 space, on CPUs it shares with the applications"
            } else {
                ""
            }
        ),
        m >= 0.5,
    ));
    out
}

pub(super) fn prediction_goal(p: &[Prediction]) -> Goal {
    let each: Vec<String> = p.iter().map(|x| format!("{} {:+.0}%", x.key, 100.0 * x.gbps_diff())).collect();
    let load = load_average();
    let off: Vec<&Prediction> = p.iter().filter(|x| x.gbps_diff().abs() > 0.2).collect();
    let why: Vec<String> = off.iter().map(|x| miss(x, load)).collect();
    let why = if why.is_empty() { String::new() } else { format!("; beyond 20% — {}", why.join("; ")) };
    Goal::checked(
        PREDICTION_GOAL,
        format!("predicted against measured: {}{why}", each.join(", ")),
        off.iter().all(|x| wakeups_account_for(x).is_some_and(|a| a.accounted)),
    )
}

/// The text of [`wakeups_account_for`], where it applies.
fn wake_account(x: &Prediction) -> String {
    wakeups_account_for(x).map_or(String::new(), |a| {
        format!(
            "; its stack CPUs woke {:.1} times per MB of payload, the model's {:.1}: at {:.0} µs each \
                 (the rounds' median) the {:.1} extra add up to {:.2} ms per MB, {} the {:.2} ms per \
                 MB between the measured and the predicted time{}",
            a.live,
            a.model,
            a.wake_us,
            a.live - a.model,
            a.extra_ms,
            if a.accounted { "which covers" } else { "less than" },
            a.gap_ms,
            if a.accounted {
                " (accounted for: the model lacks what makes the live CPUs wake so often)"
            } else {
                " (not accounted for)"
            }
        )
    })
}

/// A slower live stack's extra wake-ups against the gap they would explain
/// (see [`wakeups_account_for`]).
struct WakeAccount {
    /// Live and model wake-ups per MB of payload.
    live: f64,
    model: f64,
    /// The wake-up cost the model ran (the median of the rounds' means), µs.
    wake_us: f64,
    /// The extra wake-ups' time per MB, and the gap between the measured
    /// and the predicted time per MB, ms.
    extra_ms: f64,
    gap_ms: f64,
    accounted: bool,
}

/// Whether a configuration slower than the model is accounted for by its
/// stack CPUs' wake-ups beyond the model's: each extra wake-up per MB, at
/// the wake-up cost the model ran (the rounds' median), delays whatever waits for
/// that CPU, so together they add at most `extra_ms` per MB; the miss is
/// accounted for when that covers the gap between the measured and the
/// predicted time per MB (a necessary condition, not a proof that every
/// extra wake-up lies on the stream's path). `None` where the live stack is
/// faster, or the run measured no wake-ups.
fn wakeups_account_for(x: &Prediction) -> Option<WakeAccount> {
    let (model, live) = x.wakeups_per_mb?;
    let wake_us = x.wake_us?;
    if x.measured_gbps >= x.predicted_gbps || live <= model {
        return None;
    }
    let extra_ms = (live - model) * wake_us / 1e3;
    // 1 MB is 8e6 bits: 8 / Gbps ms.
    let gap_ms = 8.0 / x.measured_gbps.max(1e-12) - 8.0 / x.predicted_gbps.max(1e-12);
    Some(WakeAccount { live, model, wake_us, extra_ms, gap_ms, accounted: extra_ms >= gap_ms })
}

/// What the model lacks that explains a miss, with its number.
fn miss(x: &Prediction, load: Option<f64>) -> String {
    let load = load.map_or(String::new(), |l| format!(" (load average {l:.1} on 2 CPUs)"));
    match x.gbps_over_wake_costs {
        Some((a, b, lo, hi)) => {
            let (min, max) = (a.min(b), a.max(b));
            if (min..=max).contains(&x.measured_gbps) {
                format!(
                    "{}: the model takes one wake-up cost for every wake-up, the host's varied between rounds \
                     from {lo:.0} to {hi:.0} µs, and over that range the model gives {min:.2}–{max:.2} Gbps, which \
                     holds the measured {:.2}{}",
                    x.key,
                    x.measured_gbps,
                    wake_account(x)
                )
            } else if x.measured_gbps > max {
                // Faster than the model: sharing the CPUs cannot explain it.
                let turns = x.gbps_without_turns.map_or(String::new(), |g| {
                    format!(
                        "; without the paper-side turn cost it assumes (1000 cycles at every switch between \
                         components and after every sleep; the live runtime CPUs' is not measured) the model \
                         gives {g:.2} Gbps ({:+.0}% against the measured)",
                        100.0 * (g / x.measured_gbps.max(1e-12) - 1.0)
                    )
                });
                let wakes = x.wakeups_per_mb.map_or(String::new(), |(m, l)| {
                    format!(
                        "; its stack CPUs wake {m:.1} times per MB of payload, the live ones {l:.1} (median of the \
                         rounds): {}",
                        if m > 1.5 * l {
                            "the model's CPUs sleep between messages where the live ones still have work or poll, \
                             and each wake-up adds to the stream's round trip"
                        } else {
                            "not the wake-ups"
                        }
                    )
                });
                format!(
                    "{}: the measured {:.2} Gbps is above the {min:.2}–{max:.2} Gbps the model gives over the \
                     rounds' wake-up costs ({lo:.0}–{hi:.0} µs): the model's stack is slower than the live \
                     one{wakes}{turns}{}",
                    x.key,
                    x.measured_gbps,
                    costliest(x)
                )
            } else {
                format!(
                    "{}: the measured {:.2} Gbps is below the {min:.2}–{max:.2} Gbps the model gives over the \
                     rounds' wake-up costs ({lo:.0}–{hi:.0} µs){}; the host's runtime CPUs, application \
                     and receiver share two real CPUs with whatever else runs{load}",
                    x.key,
                    x.measured_gbps,
                    wake_account(x)
                )
            }
        }
        None if x.measured_gbps > x.predicted_gbps => format!(
            "{}: the measured {:.2} Gbps is above the model's {:.2}: the costs the model runs (measured in the \
             cost runs before the streams) are higher than what the streams paid{}",
            x.key,
            x.measured_gbps,
            x.predicted_gbps,
            match costliest(x) {
                c if c.is_empty() => "; which cost differs is not established by this run".to_string(),
                c => c,
            }
        ),
        None => format!(
            "{}: the model runs the two polling threads' measured costs on CPUs they have alone; live they share \
             two real CPUs with whatever else runs{load}",
            x.key
        ),
    }
}

/// The cost the model charges most above what the streams paid (cycles per
/// payload byte: B1 a thread's, B2 and B3 a component's), and the ACKs per
/// MB, or nothing where the run measured neither.
fn costliest(x: &Prediction) -> String {
    let mut rows: Vec<(String, f64, f64)> =
        x.components.iter().map(|&(k, m, l)| (format!("{k:?}").to_lowercase(), m, l)).collect();
    rows.extend(x.threads.iter().map(|&(w, m, l)| (w.to_string(), m, l)));
    let Some((what, m, l)) = rows.into_iter().max_by(|a, b| (a.1 - a.2).total_cmp(&(b.1 - b.2))) else {
        return String::new();
    };
    let acks = x
        .acks_per_mb
        .map_or(String::new(), |(m, l)| format!(" (ACKs per MB: the model's {m:.1}, the streams' {l:.1})"));
    format!(
        "; the cost furthest above the streams': {what}, {m:.2} cycles per byte in the model against {l:.2} \
         ({:+.0}%){acks}",
        100.0 * (m / l.max(1e-12) - 1.0)
    )
}

/// The 1-minute load average (`/proc/loadavg`).
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use dyncore_core::placement::ComponentKind;

    #[test]
    fn the_prediction_goal_holds_within_20_percent_and_says_why_it_missed() {
        let x = |key, predicted_gbps, measured_gbps, wake| Prediction {
            key,
            predicted_gbps,
            measured_gbps,
            predicted_cpu_s_per_gb: 1.0,
            measured_cpu_s_per_gb: None,
            gbps_over_wake_costs: wake,
            wake_us: wake.map(|w| w.2),
            gbps_without_turns: wake.map(|_| 4.0),
            wakeups_per_mb: wake.map(|_| (30.0, 10.0)),
            components: Vec::new(),
            threads: Vec::new(),
            acks_per_mb: None,
        };
        let ok =
            prediction_goal(&[x("B1", 6.0, 5.1, None), x("B2", 3.0, 3.5, None), x("B3", 3.0, 3.0, None)]);
        assert_eq!(ok.pass, Some(true), "{}", ok.measured);
        assert!(ok.measured.contains("B1 +18%") && !ok.measured.contains("beyond"), "{}", ok.measured);
        let miss = prediction_goal(&[
            x("B1", 6.0, 6.0, None),
            // Within what the model gives over the rounds' wake-up costs.
            x("B2", 4.7, 2.9, Some((4.9, 2.5, 40.0, 200.0))),
            // Outside it.
            x("B3", 3.1, 1.5, Some((3.2, 2.8, 40.0, 200.0))),
        ]);
        assert_eq!(miss.pass, Some(false));
        let m = &miss.measured;
        assert!(
            m.contains("B2 +62%") && m.contains("from 40 to 200 µs") && m.contains("2.50–4.90 Gbps"),
            "{m}"
        );
        assert!(m.contains("B3: the measured 1.50 Gbps is below the 2.80–3.20 Gbps"), "{m}");
        // A live stack faster than the model: the turn cost's number, not
        // the CPUs it shares.
        let mut b2 = x("B2", 1.3, 3.0, Some((1.3, 1.35, 25.0, 35.0)));
        b2.components = vec![(ComponentKind::Tcp, 1.2, 1.0), (ComponentKind::Syscall, 4.0, 0.5)];
        b2.acks_per_mb = Some((340.0, 17.0));
        let fast = prediction_goal(&[b2]);
        let m = &fast.measured;
        assert!(
            m.contains(
                "furthest above the streams': syscall, 4.00 cycles per byte in the model against 0.50 (+700%)"
            ) && m.contains("ACKs per MB: the model's 340.0, the streams' 17.0"),
            "{m}"
        );
        assert!(m.contains("is above the 1.30–1.35 Gbps") && m.contains("gives 4.00 Gbps (+33%"), "{m}");
        assert!(!m.contains("share two real CPUs"), "{m}");
        assert!(m.contains("wake 30.0 times per MB of payload, the live ones 10.0"), "{m}");
        assert!(!m.contains("B1:"), "B1 was within 20%: {m}");
        // Slower than the model, with the live CPUs waking more often than
        // the model's: accounted for when the extra wake-ups' time covers
        // the gap per MB (8 / 3.03 - 8 / 4.61 = 0.90 ms), not otherwise.
        let slow = |live| {
            let mut b2 = x("B2", 4.61, 3.03, Some((4.60, 4.56, 27.0, 31.0)));
            b2.wakeups_per_mb = Some((8.7, live));
            prediction_goal(&[x("B1", 6.0, 6.0, None), b2])
        };
        let (yes, no) = (slow(59.2), slow(30.0));
        assert_eq!(yes.pass, Some(true), "{}", yes.measured);
        assert!(
            yes.measured.contains("the 50.5 extra add up to 1.36 ms per MB, which covers the 0.90 ms"),
            "{}",
            yes.measured
        );
        // 21.3 × 27 µs = 0.58 ms.
        assert_eq!(no.pass, Some(false), "{}", no.measured);
        assert!(no.measured.contains("less than the 0.90 ms") && no.measured.contains("(not accounted for)"));
        let b1 = prediction_goal(&[x("B1", 6.0, 8.0, None)]);
        assert!(
            b1.measured.contains("B1: the measured 8.00 Gbps is above the model's 6.00"),
            "{}",
            b1.measured
        );
    }
}
