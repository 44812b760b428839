//! Every shipped scenario: validates, runs, is deterministic, and has the
//! qualitative shape of the paper's figure.

mod common;

use common::{load, shipped_names};
use dyncore_sim::{ScenarioResult, run_quietly};

fn run(name: &str) -> ScenarioResult {
    let s = load(name);
    let r = run_quietly(&s).expect("within the event budget");
    for run in &r.runs {
        assert!(run.finished, "{name}/{} did not finish", run.label);
    }
    r
}

/// Mean of `metric` over programs labelled `label` in run `run`.
fn metric(
    r: &ScenarioResult,
    run: &str,
    label: &str,
    f: fn(&dyncore_sim::result::ProgramResult) -> f64,
) -> f64 {
    let run = r.runs.iter().find(|x| x.label == run).unwrap_or_else(|| panic!("no run {run}"));
    let v: Vec<f64> = run.programs.iter().filter(|p| p.label == label).map(f).collect();
    assert!(!v.is_empty(), "no program {label} in {}", run.label);
    v.iter().sum::<f64>() / v.len() as f64
}

fn rel(p: &dyncore_sim::result::ProgramResult) -> f64 {
    p.relative_time.expect("finished")
}

fn speedup(p: &dyncore_sim::result::ProgramResult) -> f64 {
    p.speedup.expect("finished")
}

fn show(r: &ScenarioResult) {
    for run in &r.runs {
        let progs: Vec<String> = run
            .programs
            .iter()
            .map(|p| {
                format!(
                    "{}={:.3}x/{:.3}",
                    p.label,
                    p.speedup.unwrap_or(f64::NAN),
                    p.relative_time.unwrap_or(f64::NAN)
                )
            })
            .collect();
        eprintln!(
            "{:>24}: {} | fuses {} splits {} proxy-ipis {} migr {} events {}",
            run.label,
            progs.join(" "),
            run.reconfig.fuses,
            run.reconfig.splits,
            run.proxy_ipis,
            run.migrations,
            run.events
        );
    }
}

#[test]
fn fig3_taxation_orders_the_two_tasks() {
    let r = run("fig3-taxation");
    show(&r);
    let (a_hi, b_hi) =
        (metric(&r, "tax >> 1 (100)", "Task A", rel), metric(&r, "tax >> 1 (100)", "Task B", rel));
    let (a_1, b_1) = (metric(&r, "tax = 1", "Task A", rel), metric(&r, "tax = 1", "Task B", rel));
    let (a_lo, b_lo) =
        (metric(&r, "tax << 1 (0.01)", "Task A", rel), metric(&r, "tax << 1 (0.01)", "Task B", rel));
    // High tax: A almost never borrows; both near 1.0.
    assert!((0.9..1.1).contains(&a_hi) && (0.9..1.15).contains(&b_hi), "{a_hi} {b_hi}");
    // Tax 1: A fused about half the time: 1 / (0.5*1.5 + 0.5*1.0) = 0.8.
    assert!((0.75..0.9).contains(&a_1), "{a_1}");
    assert!(b_1 > 1.2, "{b_1}");
    // Low tax: A fused nearly always: 1 / 1.5 = 0.67; B waits.
    assert!(a_lo < 0.72 && a_lo < a_1, "{a_lo}");
    assert!(b_lo > b_1, "{b_lo} vs {b_1}");
}

#[test]
fn fig4_parallel_cmp_and_chameleon_beat_the_acmps() {
    let r = run("fig4-parallel");
    for p in ["Fibonacci", "pmake", "Blackscholes", "M-DB", "M-SB"] {
        let cmp = metric(&r, &format!("{p} on CMP"), p, speedup);
        let a3 = metric(&r, &format!("{p} on ACMP-3"), p, speedup);
        let a6 = metric(&r, &format!("{p} on ACMP-6"), p, speedup);
        let dy = metric(&r, &format!("{p} on Chameleon"), p, speedup);
        // The CMP is best; Chameleon runs the program natively on all 24 CPUs.
        assert!(cmp > a6 && a6 > a3, "{p}: cmp {cmp} acmp6 {a6} acmp3 {a3}");
        assert!((dy - cmp).abs() / cmp < 0.03, "{p}: chameleon {dy} vs cmp {cmp}");
        // ACMP-3 has 12 + 3x(1.75) = 17.25 baseline CPUs of capacity at most.
        assert!(a3 <= 17.25 + 1e-9, "{p}: {a3}");
    }
    // Static binding suffers more on the ACMP than dynamic binding:
    // dynamic programs use the fast CPUs' extra speed, static ones wait.
    let loss = |p: &str| {
        metric(&r, &format!("{p} on ACMP-3"), p, speedup) / metric(&r, &format!("{p} on CMP"), p, speedup)
    };
    assert!(loss("M-DB") > loss("M-SB"), "M-DB {} M-SB {}", loss("M-DB"), loss("M-SB"));
    assert!(loss("Fibonacci") > loss("Blackscholes"));
}

#[test]
fn fig5_sequential_chameleon_matches_the_acmps() {
    let r = run("fig5-sequential");
    for p in ["gcc", "astar", "dealII", "lbm", "sjeng", "N-Queen", "h264ref"] {
        let s = |m: &str| metric(&r, &format!("{p} on {m}"), p, speedup);
        // Same duty cycles (Table 2): DYN-4 = ACMP-3 and DYN-2 = ACMP-6, minus
        // one proxy-APIC fuse (375 us) and split (60 us) over 1-2 s of work.
        assert!((s("DYN-4") - s("ACMP-3")).abs() < 0.01, "{p}");
        assert!((s("DYN-2") - s("ACMP-6")).abs() < 0.01, "{p}");
        assert!(s("DYN-4") >= s("DYN-2"));
    }
    // Class order: low < medium < high on DYN-4 (1.5, 1.75, 2.0).
    let d4 = |p: &str| metric(&r, &format!("{p} on DYN-4"), p, speedup);
    assert!(d4("gcc") < d4("lbm") && d4("lbm") < d4("sjeng"));
    assert!((d4("sjeng") - 2.0).abs() < 0.01);
}

#[test]
fn fig6_overprovisioned_rebalances_freed_cpus() {
    let r = run("fig6-overprovisioned");
    let seq = |run: &str| metric(&r, run, "sequential", speedup);
    // Two programs: a 4-CPU object each, speed 2.0.
    assert!(seq("2 sequential") > 1.9, "{}", seq("2 sequential"));
    // Four: 2-CPU objects, 1.5.
    assert!((seq("4 sequential") - 1.5).abs() < 0.05, "{}", seq("4 sequential"));
    // Three: 4+2+2 at first, then the two get 4 when the first exits;
    // without notification they stay on 2.
    let three = seq("3 sequential");
    let star = seq("3* (no notification)");
    assert!(three > star + 0.05, "3 {three} vs 3* {star}");
    assert!(star > seq("4 sequential") - 0.01 && three < seq("2 sequential"));
    // The parallel program keeps its 16 CPUs throughout.
    for run in ["2 sequential", "3 sequential", "4 sequential"] {
        assert!(metric(&r, run, "parallel (16 threads)", speedup) > 15.5, "{run}");
    }
}

#[test]
fn fig7_underprovisioned_tax_trades_sequential_for_parallel() {
    let r = run("fig7-underprovisioned");
    let nq = |run: &str| metric(&r, run, "N-Queen", speedup);
    let par = |run: &str| metric(&r, run, "parallel", speedup);
    for b in ["SB", "DB"] {
        let (lo, one, hi) = (format!("{b} tax 0.01"), format!("{b} tax 1"), format!("{b} tax 100"));
        // Low tax: N-Queen nearly always fused (paper: 1.97); tax 1: under
        // 1.5; high tax: baseline.
        assert!(nq(&lo) > 1.9, "{b}: {}", nq(&lo));
        assert!(nq(&one) < 1.5 && nq(&one) > 1.2, "{b}: {}", nq(&one));
        assert!((nq(&hi) - 1.0).abs() < 0.05, "{b}: {}", nq(&hi));
        // The parallel program pays for what N-Queen borrows.
        assert!(par(&lo) < par(&hi), "{b}: {} vs {}", par(&lo), par(&hi));
    }
    assert!(par("DB tax 0.01") < par("DB tax 1") && par("DB tax 1") < par("DB tax 100"));
    // Static binding loses more than dynamic at low tax (load imbalance).
    assert!(par("SB tax 0.01") < par("DB tax 0.01"));
    // ACMP-3: N-Queen on a fast CPU (2.0); the parallel program has 12 CPUs,
    // less than Chameleon gives it at any tax rate with dynamic binding.
    assert!(nq("DB ACMP-3") > 1.95);
    assert!(par("DB ACMP-3") < par("DB tax 0.01"));
}

#[test]
fn fig8_allocation_timeline_shows_events_a_to_d() {
    let r = run("fig8-mixed-sequential");
    let run = &r.runs[0];
    let at = |t_ms: f64| -> Vec<(std::sync::Arc<str>, u32)> {
        let t = (t_ms * 1e6) as u64;
        run.allocation.iter().rev().find(|s| s.t_ns <= t).expect("sample").cpus_by_program.clone()
    };
    let cpus = |v: &[(std::sync::Arc<str>, u32)], p: &str| {
        v.iter().find(|(n, _)| &**n == p).map(|(_, c)| *c).unwrap_or(0)
    };
    // Start: both astar get 4.
    let s0 = at(500.0);
    assert_eq!((cpus(&s0, "astar#1"), cpus(&s0, "astar#2")), (4, 4));
    // (a) lbm at 1000 ms takes 2 CPUs from an astar.
    let a = at(1500.0);
    assert_eq!(cpus(&a, "lbm"), 4);
    assert_eq!(cpus(&a, "astar#1") + cpus(&a, "astar#2"), 6);
    // (b) sjeng at 2000 ms: sjeng 4, the other three 2.
    let b = at(2500.0);
    assert_eq!([cpus(&b, "sjeng"), cpus(&b, "lbm"), cpus(&b, "astar#1"), cpus(&b, "astar#2")], [4, 2, 2, 2]);
    // (c) lbm exits first; one astar gets its CPUs. (d) sjeng exits; the other astar gets 4.
    let lbm = run.programs.iter().find(|p| p.label == "lbm").unwrap().finish_ns.unwrap();
    let sjeng = run.programs.iter().find(|p| p.label == "sjeng").unwrap().finish_ns.unwrap();
    assert!(lbm < sjeng);
    let c = at(lbm as f64 / 1e6 + 1.0);
    assert_eq!(cpus(&c, "astar#1") + cpus(&c, "astar#2"), 6);
    let d = at(sjeng as f64 / 1e6 + 1.0);
    assert_eq!((cpus(&d, "astar#1"), cpus(&d, "astar#2")), (4, 4));
    // Chameleon beats Linux (no fusion) for every program.
    for p in &run.programs {
        assert!(p.speedup.unwrap() > 1.2, "{}", p.label);
    }
}

#[test]
fn fig9_smt_gives_cores_to_the_programs_that_gain_most() {
    let r = run("fig9-smt");
    let s = |run: &str, p: &str| metric(&r, run, p, speedup);
    // sjeng and h264ref gain most from a core alone (SMT factors 0.55, 0.6).
    assert!(s("Chameleon", "sjeng") > 0.99 && s("Chameleon", "h264ref") > 0.99);
    assert!(s("Chameleon", "sjeng") > s("Linux", "sjeng") + 0.2);
    // Linux gives the lone cores by arrival order (dealII and lbm here).
    assert!(s("Linux", "dealII") > 0.99);
    // Weighted by each program's gain, Chameleon does better overall.
    const PROGRAMS: [&str; 6] = ["gcc", "astar", "dealII", "lbm", "sjeng", "h264ref"];
    let gain = |run: &str| -> f64 { PROGRAMS.iter().map(|p| s(run, p)).sum::<f64>() };
    let worst = |run: &str| PROGRAMS.iter().map(|p| s(run, p)).fold(f64::MAX, f64::min);
    assert!(worst("Chameleon") > worst("Linux"), "{} vs {}", worst("Chameleon"), worst("Linux"));
    assert!(gain("Chameleon") > gain("Linux") - 0.05);
}

#[test]
fn hotplug_destroys_the_benefit_of_fusion() {
    let r = run("hotplug-vs-proxy");
    let nq = |run: &str| metric(&r, run, "N-Queen", speedup);
    let par = |run: &str| metric(&r, run, "parallel", speedup);
    // Proxies keep nearly all of the ideal benefit, and so do the
    // runtime's Bolt plans (about a microsecond each).
    assert!(nq("proxy-logical") > 0.99 * nq("free (ideal)"));
    assert!(nq("proxy-APIC") > 0.97 * nq("free (ideal)"));
    assert!(nq("runtime (Bolt plans)") > 0.99 * nq("free (ideal)"));
    // Hotplug: sequential slower than without fusion at all, parallel too.
    assert!(nq("hotplug") < nq("no fusion (Linux)"), "{} vs {}", nq("hotplug"), nq("no fusion (Linux)"));
    assert!(par("hotplug") < 0.8 * par("proxy-APIC"));
    let by = |l: &str| r.runs.iter().find(|x| x.label == l).unwrap();
    assert!(by("hotplug").reconfig.time_ns > 10 * by("proxy-APIC").reconfig.time_ns);
    // The runtime row charges real plans: microseconds per reconfiguration
    // (not Table 4's), from the profile it names.
    let rt = by("runtime (Bolt plans)");
    assert_eq!(rt.reconfig_mechanism, "runtime");
    assert!(
        rt.reconfig_profile.as_deref().is_some_and(|p| p.starts_with("built-in: ")),
        "{:?}",
        rt.reconfig_profile
    );
    let per_op = rt.reconfig.time_ns / (rt.reconfig.fuses + rt.reconfig.splits).max(1);
    assert!((100..20_000).contains(&per_op), "{per_op} ns per reconfiguration");
    assert!(rt.proxy_ipis > 0, "the plan's proxies handle IPIs");
    assert_eq!(by("hotplug").proxy_ipis, 0, "hotplug has no proxies");
}

#[test]
fn reconfigurations_of_a_cpu_never_overlap() {
    // The simulator serialises reconfigurations per CPU (one hotplug lock):
    // on every CPU, each fuse or split starts after the previous one ended.
    // Every timed one that finished has its span, and one still in
    // progress at the end has a span up to the end if it had started.
    use dyncore_core::policy::trace::{parse_actions, parse_events};
    use dyncore_core::policy::{Action, Event};
    for name in ["hotplug-vs-proxy", "fig8-mixed-sequential", "fig7-underprovisioned"] {
        let mut s = load(name);
        s.record_policy_trace = true;
        let r = run_quietly(&s).expect("within the event budget");
        for run in &r.runs {
            assert!(run.finished, "{name}/{} did not finish", run.label);
            let mut last_end: std::collections::BTreeMap<usize, u64> = Default::default();
            let mut n = 0;
            for ev in &run.trace {
                if let dyncore_sim::TraceEvent::Reconfig { cpu, start_ns, end_ns, .. } = ev {
                    let prev = last_end.insert(*cpu, *end_ns).unwrap_or(0);
                    assert!(
                        *start_ns >= prev,
                        "{name}/{}: CPU {cpu} reconfigures from {start_ns} before {prev}",
                        run.label
                    );
                    assert!(end_ns > start_ns && *end_ns <= run.end_ns, "{name}/{}: {ev:?}", run.label);
                    n += 1;
                }
            }
            let trace = run.policy_trace.as_ref().expect("recorded");
            let done = parse_events(&trace.events)
                .unwrap()
                .iter()
                .filter(|(_, e)| matches!(e, Event::ReconfigDone { took_ns, .. } if *took_ns > 0))
                .count();
            let asked = parse_actions(&trace.actions)
                .unwrap()
                .iter()
                .filter(|(_, a)| matches!(a, Action::Offline { .. } | Action::Online { .. }))
                .count();
            assert_eq!(asked as u64, run.reconfig.fuses + run.reconfig.splits, "{name}/{}", run.label);
            // Free reconfigurations take no time and leave no span.
            assert!(
                (done..=asked).contains(&n) && (run.reconfig_mechanism != "free" || n == 0),
                "{name}/{}: {n} spans for {done} timed reconfigurations done of {asked}",
                run.label
            );
        }
    }
}

#[test]
fn every_scenario_is_deterministic() {
    for name in shipped_names() {
        let s = load(&name);
        let a = serde_json::to_vec(&run_quietly(&s).expect("within the event budget")).unwrap();
        let b = serde_json::to_vec(&run_quietly(&s).expect("within the event budget")).unwrap();
        assert!(a == b, "{name}: two runs differ");
        // A different seed changes what is random — task lengths of dynamic
        // programs, row costs of static ones, IPIs while they run — and
        // nothing else: a scenario of sequential programs only does not
        // depend on its seed at all.
        let mut s2 = s.clone();
        s2.seed ^= 0xdead_beef;
        let runs = |s: &dyncore_sim::Scenario| {
            serde_json::to_vec(&run_quietly(s).expect("within the event budget").runs).unwrap()
        };
        let parallel = s
            .runs
            .iter()
            .flat_map(|r| &r.workloads)
            .any(|w| !w.program_def().expect("validated").is_sequential());
        if parallel {
            assert!(runs(&s) != runs(&s2), "{name}: the seed has no effect");
        } else {
            assert!(runs(&s) == runs(&s2), "{name}: sequential programs only, yet the seed matters");
        }
    }
}

/// Every `expect` line of every shipped scenario is a claim or marked as
/// prose, every claim has checks, and every check names figures the runs
/// produce (one seed): a claim is held or failed, never left unevaluated.
#[test]
fn every_shipped_claim_is_classified_and_evaluated() {
    use dyncore_sim::claims::Verdict;
    for name in shipped_names() {
        let s = load(&name);
        let r = run_quietly(&s).expect("within the event budget");
        let c = dyncore_sim::scenario::claims::check(&s, std::slice::from_ref(&r));
        assert!(c.unclassified.is_empty(), "{name}: lines neither claim nor prose: {:?}", c.unclassified);
        // A scenario of the papers checks claims; one of dyncore's own
        // (the policy scenarios beside Chameleon) may state only prose.
        assert!(
            !c.claims.is_empty() || (name.starts_with("policy-") && !c.prose.is_empty()),
            "{name} checks no claim"
        );
        for claim in &c.claims {
            assert!(!claim.checks.is_empty(), "{name}: `{}` has no check", claim.claim);
            assert_ne!(claim.verdict, Verdict::NotEvaluated, "{name}: {:#?}", claim.checks);
        }
    }
}

#[test]
#[ignore = "prints every scenario's figures; run with --ignored --nocapture"]
fn print_all() {
    for name in [
        "fig4-parallel",
        "fig5-sequential",
        "fig6-overprovisioned",
        "fig7-underprovisioned",
        "fig8-mixed-sequential",
        "fig9-smt",
        "hotplug-vs-proxy",
    ] {
        eprintln!("== {name}");
        let t = std::time::Instant::now();
        let r = run(name);
        show(&r);
        eprintln!("   ({:?})", t.elapsed());
    }
}

#[test]
#[ignore = "prints figure 8's allocation timeline"]
fn print_fig8_timeline() {
    let r = run("fig8-mixed-sequential");
    for s in &r.runs[0].allocation {
        eprintln!("{:>8.1} ms {:?}", s.t_ns as f64 / 1e6, s.cpus_by_program);
    }
}
