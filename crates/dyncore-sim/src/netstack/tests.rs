use dyncore_core::placement::ComponentKind;
use dyncore_core::profile::StackCosts;

use super::calibrate::{base_costs, config1, config2, mbps, scaled, single};
use super::*;

fn costs(wake: f64) -> StackCosts {
    scaled(&base_costs(), 1.0, wake)
}

#[test]
fn the_same_inputs_give_the_same_outcome() {
    let c = costs(10_000.0);
    let net = NetParams::default();
    let cpus = config1(1600, 600);
    let a = simulate(&RunInput { costs: &c, net: &net, cpus: &cpus, load: &[], seed: 7 });
    let b = simulate(&RunInput { costs: &c, net: &net, cpus: &cpus, load: &[], seed: 7 });
    assert_eq!(a, b);
    assert!(a.packets > 1000, "{a:?}");
}

#[test]
fn a_busy_single_core_goes_as_fast_as_its_work_per_packet_allows() {
    // No wake-ups, a window that never runs dry: the core is busy all the
    // time and each segment costs TCP + IP + driver + half an ACK's trip.
    let c = costs(0.0);
    let net = NetParams { streams: 64, turn_cycles: 0.0, ..NetParams::default() };
    let o = simulate(&RunInput { costs: &c, net: &net, cpus: &single(1600), load: &[], seed: 1 });
    assert!(o.cpus[0].busy > 0.99, "{o:?}");
    let per_seg = c.tcp.cycles(1448)
        + c.ip.cycles_per_packet
        + c.driver.cycles_per_packet
        + 2.0 * c.channel_cycles_per_msg
        + 0.5
            * (c.tcp.cycles_per_packet
                + c.ip.cycles_per_packet
                + c.driver.cycles_per_packet
                + 3.0 * c.channel_cycles_per_msg);
    let want = 1600e6 / per_seg * 1448.0 * 8.0 / 1e6;
    assert!((o.mbps / want - 1.0).abs() < 0.02, "{} vs {want}", o.mbps);
}

#[test]
fn wake_ups_cost_throughput_and_busier_cores_pay_fewer() {
    // One stream: its window, not a core, limits it, so latency costs throughput.
    let one = NetParams { streams: 1, ..NetParams::default() };
    let fast = mbps(&costs(0.0), &one, &config1(2267, 2267));
    let slow_wake = mbps(&costs(20_000.0), &one, &config1(2267, 2267));
    assert!(slow_wake < fast * 0.95, "{slow_wake} vs {fast}");
    let net = NetParams::default();
    let c = costs(20_000.0);
    let a = simulate(&RunInput { costs: &c, net: &net, cpus: &config1(1600, 1600), load: &[], seed: 1 });
    let b = simulate(&RunInput { costs: &c, net: &net, cpus: &config1(1600, 600), load: &[], seed: 1 });
    // The slower IP and driver cores are busier and wake less often per packet.
    let per_pkt = |o: &Outcome| o.cpus[1].wakeups as f64 / o.components[&ComponentKind::Ip].msgs as f64;
    assert!(b.cpus[1].busy > a.cpus[1].busy, "{a:?} {b:?}");
    assert!(per_pkt(&b) < per_pkt(&a), "{a:?} {b:?}");
}

#[test]
fn hyperthreads_share_a_core_and_slow_each_other() {
    let c = costs(10_000.0);
    let net = NetParams::default();
    let o = simulate(&RunInput { costs: &c, net: &net, cpus: &config2(1600, 1600), load: &[], seed: 1 });
    // Two cores' power, not three.
    let three = simulate(&RunInput { costs: &c, net: &net, cpus: &config1(1600, 1600), load: &[], seed: 1 });
    assert!(o.power_w < three.power_w, "{} vs {}", o.power_w, three.power_w);
    assert!(o.mbps > 0.0);
}

#[test]
fn an_offered_load_is_delivered_and_not_exceeded() {
    let c = costs(5_000.0);
    let net = NetParams::default();
    let load = [LoadStep { at_ms: 0.0, gbps: 2.0 }];
    let o = simulate(&RunInput { costs: &c, net: &net, cpus: &config1(2267, 2267), load: &load, seed: 1 });
    assert!((o.mbps / 2000.0 - 1.0).abs() < 0.03, "{}", o.mbps);
}

#[test]
#[ignore = "exploration: prints the fit and the paper's points"]
fn explore() {
    let env = |k: &str, d: f64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let net = NetParams {
        streams: env("STREAMS", 8.0) as u32,
        remote_ns: env("REMOTE", 30_000.0) as u64,
        ..NetParams::default()
    };
    let t = std::time::Instant::now();
    let f = super::calibrate::fit(&net);
    eprintln!("{f:?} in {:?}", t.elapsed());
    let c = scaled(&base_costs(), f.scale, f.wakeup_ns);
    let show = |name: &str, cpus: Vec<CpuSpec>| {
        let o = simulate(&RunInput { costs: &c, net: &net, cpus: &cpus, load: &[], seed: 1 });
        let b: Vec<String> = o.cpus.iter().map(|c| format!("{:.2}/{}w", c.busy, c.wakeups)).collect();
        eprintln!(
            "{name:>12}: {:7.0} Mbps {:5.1} W res {:.2}  {}",
            o.mbps,
            o.power_w,
            o.resources,
            b.join(" ")
        );
    };
    for m in [2267, 1867, 1600] {
        show(&format!("c1 {m}"), config1(m, m));
    }
    for (t, o) in
        [(200, 200), (400, 200), (600, 200), (600, 400), (1000, 600), (1200, 600), (1600, 600), (1600, 800)]
    {
        show(&format!("c1 {t}/{o}"), config1(t, o));
        show(&format!("c2 {t}/{o}"), config2(t, o));
    }
    for m in [2267, 1600, 200] {
        show(&format!("single {m}"), single(m));
    }
}

/// The shipped NewtOS scenarios carry the fit: the same `[stack]` and
/// `turn_cycles` in every file, equal (to the 4 digits written) to what
/// `calibrate::fit` finds now, and reproducing the two fitted points.
#[test]
fn the_shipped_scenarios_carry_the_calibration() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/newtos");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 6, "{files:?}");
    let scs: Vec<super::scenario::NetScenario> = files
        .iter()
        .map(|f| super::scenario::NetScenario::from_toml(&std::fs::read_to_string(f).unwrap()).unwrap())
        .collect();
    for s in &scs {
        s.validate().unwrap();
        assert_eq!(s.stack, scs[0].stack, "{}", s.name);
        assert_eq!(s.net.turn_cycles, scs[0].net.turn_cycles, "{}", s.name);
    }
    let net = NetParams::default();
    let f = super::calibrate::fit(&net);
    let close = |a: f64, b: f64| (a / b - 1.0).abs() < 2e-3;
    let shipped = &scs[0].stack;
    assert!(close(shipped.tcp.cycles_per_packet, 700.0 * f.scale), "{shipped:?} {f:?}");
    assert!(close(shipped.ip.cycles_per_packet, 350.0 * f.scale), "{shipped:?} {f:?}");
    assert!(close(shipped.wakeup_ns, f.wakeup_ns), "{shipped:?} {f:?}");
    assert_eq!(scs[0].net.turn_cycles, super::calibrate::ASSUMED_TURN_CYCLES);
    assert!((f.config1_mbps / super::calibrate::PAPER_CONFIG1_2267_MBPS - 1.0).abs() < 0.01, "{f:?}");
    assert!((f.single_mbps / super::calibrate::PAPER_SINGLE_2267_MBPS - 1.0).abs() < 0.01, "{f:?}");
}

/// Every `expect` line of every shipped NewtOS scenario is a claim or
/// marked as prose, and every check names figures the runs produce (one
/// seed): never left unevaluated.
#[test]
fn every_shipped_claim_is_classified_and_evaluated() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/newtos");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in files {
        let sc = super::scenario::NetScenario::from_toml(&std::fs::read_to_string(&f).unwrap()).unwrap();
        sc.validate().unwrap();
        let rows = super::run::run_scenario(&sc, &[sc.seed]);
        let c = super::claims::check(&sc, &rows);
        assert!(c.unclassified.is_empty(), "{}: {:?}", sc.name, c.unclassified);
        assert!(!c.claims.is_empty(), "{} checks no claim", sc.name);
        for claim in &c.claims {
            assert_ne!(
                claim.verdict,
                crate::claims::Verdict::NotEvaluated,
                "{}: {:#?}",
                sc.name,
                claim.checks
            );
        }
    }
}
