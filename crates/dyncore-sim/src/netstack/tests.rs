use dyncore_core::placement::ComponentKind;
use dyncore_core::profile::StackCosts;

use super::calibrate::{base_costs, config1, config2, mbps, scaled, single};
use super::idle::GovernorName;
use super::*;

fn costs(wake: f64) -> StackCosts {
    scaled(&base_costs(), 1.0, wake)
}

/// One run of seed 1, with no offered load and nothing beside the stack.
fn run1(costs: &StackCosts, net: &NetParams, cpus: &[CpuSpec]) -> Outcome {
    simulate(&RunInput { costs, net, cpus, load: &[], seed: 1, beside: Default::default() })
}

#[test]
fn the_same_inputs_give_the_same_outcome() {
    let c = costs(10_000.0);
    let net = NetParams::default();
    let cpus = config1(1600, 600);
    let a = simulate(&RunInput {
        costs: &c,
        net: &net,
        cpus: &cpus,
        load: &[],
        seed: 7,
        beside: Default::default(),
    });
    let b = simulate(&RunInput {
        costs: &c,
        net: &net,
        cpus: &cpus,
        load: &[],
        seed: 7,
        beside: Default::default(),
    });
    assert_eq!(a, b);
    assert!(a.packets > 1000, "{a:?}");
}

#[test]
fn a_busy_single_core_goes_as_fast_as_its_work_per_packet_allows() {
    // No wake-ups, a window that never runs dry: the core is busy all the
    // time and each segment costs TCP + IP + driver + half an ACK's trip.
    let c = costs(0.0);
    let net = NetParams { streams: 64, turn_cycles: 0.0, ..NetParams::default() };
    let o = run1(&c, &net, &single(1600));
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
    // Fixed wake-ups of `wakeup_ns`. One stream: its window, not a core,
    // limits it, so latency costs throughput.
    let fixed = NetParams { governor: GovernorName::Fixed, ..NetParams::default() };
    let one = NetParams { streams: 1, ..fixed.clone() };
    let fast = mbps(&costs(0.0), &one, &config1(2267, 2267));
    let slow_wake = mbps(&costs(20_000.0), &one, &config1(2267, 2267));
    assert!(slow_wake < fast * 0.95, "{slow_wake} vs {fast}");
    let net = fixed;
    let c = costs(20_000.0);
    let a = run1(&c, &net, &config1(1600, 1600));
    let b = run1(&c, &net, &config1(1600, 600));
    // The slower IP and driver cores are busier and wake less often per packet.
    let per_pkt = |o: &Outcome| o.cpus[1].wakeups as f64 / o.components[&ComponentKind::Ip].msgs as f64;
    assert!(b.cpus[1].busy > a.cpus[1].busy, "{a:?} {b:?}");
    assert!(per_pkt(&b) < per_pkt(&a), "{a:?} {b:?}");
}

#[test]
fn hyperthreads_share_a_core_and_slow_each_other() {
    let c = costs(10_000.0);
    let net = NetParams::default();
    let o = run1(&c, &net, &config2(1600, 1600));
    // Two cores' power, not three.
    let three = run1(&c, &net, &config1(1600, 1600));
    assert!(o.power_w < three.power_w, "{} vs {}", o.power_w, three.power_w);
    assert!(o.mbps > 0.0);
}

#[test]
fn an_offered_load_is_delivered_and_not_exceeded() {
    let c = costs(5_000.0);
    let net = NetParams::default();
    let load = [LoadStep { at_ms: 0.0, gbps: 2.0 }];
    let o = simulate(&RunInput {
        costs: &c,
        net: &net,
        cpus: &config1(2267, 2267),
        load: &load,
        seed: 1,
        beside: Default::default(),
    });
    assert!((o.mbps / 2000.0 - 1.0).abs() < 0.03, "{}", o.mbps);
}

/// The idle states decide whether "slower is faster": with every sleep in
/// C6 (200 µs to wake) TCP at 1600 MHz with IP and the driver at 600 beats
/// all three at 2267 MHz, whose cores sleep more; with every sleep in C1
/// (3 µs) it does not. Deeper sleep costs bitrate and saves power.
#[test]
fn idle_states_decide_whether_slower_is_faster() {
    let c = super::calibrate::fitted(&base_costs(), 0.53, 0.8);
    let run = |gov: GovernorName, cpus: Vec<CpuSpec>| {
        let net = NetParams { governor: gov, ..NetParams::default() };
        run1(&c, &net, &cpus)
    };
    let (c6_fast, c6_slow) =
        (run(GovernorName::AlwaysC6, config1(2267, 2267)), run(GovernorName::AlwaysC6, config1(1600, 600)));
    assert!(c6_slow.mbps > 1.05 * c6_fast.mbps, "C6: {} vs {}", c6_slow.mbps, c6_fast.mbps);
    let (c1_fast, c1_slow) =
        (run(GovernorName::AlwaysC1, config1(2267, 2267)), run(GovernorName::AlwaysC1, config1(1600, 600)));
    assert!(c1_slow.mbps < 1.02 * c1_fast.mbps, "C1: {} vs {}", c1_slow.mbps, c1_fast.mbps);
    // C6 costs bitrate at 2267 MHz and, power-gated, draws less.
    assert!(c6_fast.mbps < 0.9 * c1_fast.mbps);
    assert!(c6_fast.power_w < c1_fast.power_w);
    // The residencies say where each governor put the cores.
    assert!(c6_fast.cpus[1].residency[3] > 0.0 && c6_fast.cpus[1].residency[..3].iter().all(|&r| r == 0.0));
    assert!(c1_fast.cpus[1].residency[0] > 0.0 && c1_fast.cpus[1].residency[1..].iter().all(|&r| r == 0.0));
    // Busy plus idle never exceeds the measured time.
    for o in [&c6_fast, &c6_slow, &c1_fast, &c1_slow] {
        for cpu in &o.cpus {
            assert!(cpu.busy + cpu.residency.iter().sum::<f64>() <= 1.0 + 1e-9, "{cpu:?}");
        }
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
    let net = super::calibrate::paper_net();
    for s in &scs {
        assert_eq!(s.net.governor, net.governor, "{}: the shipped files use the default governor", s.name);
        assert_eq!(s.net.copy_gb_per_s, net.copy_gb_per_s, "{}: the assumed copy bandwidth", s.name);
        if s.name == "newtos-table2" {
            // Issue 33: Table 2 scales the whole chip, so the syscall
            // server's loop (on the system core, at the chip's frequency)
            // is on there, one blocking writer per stream; the fit's points
            // are elsewhere (Figure 2, §4.5).
            assert_eq!(s.net.clients, s.net.streams, "{}: one blocking writer per stream", s.name);
        } else {
            assert_eq!(s.net.clients, 0, "{}: the application hands data straight to TCP", s.name);
        }
    }
    let f = super::calibrate::fit(&net);
    let close = |a: f64, b: f64| (a / b - 1.0).abs() < 2e-3;
    let shipped = &scs[0].stack;
    let want = f.costs();
    assert!(close(shipped.tcp.cycles_per_packet, want.tcp.cycles_per_packet), "{shipped:?} {f:?}");
    assert!(close(shipped.tcp.cycles_per_byte, want.tcp.cycles_per_byte), "{shipped:?} {f:?}");
    assert!(close(shipped.ip.cycles_per_packet, 350.0 * f.rest_scale), "{shipped:?} {f:?}");
    assert!(close(shipped.channel_cycles_per_msg, 100.0 * f.rest_scale), "{shipped:?} {f:?}");
    assert_eq!(shipped.wakeup_ns, 0.0, "no wake-up latency is fitted");
    assert_eq!(scs[0].net.turn_cycles, super::calibrate::ASSUMED_TURN_CYCLES);
    assert!((f.mbps_3x200 / super::calibrate::PAPER_3X200_MBPS - 1.0).abs() < 0.01, "{f:?}");
    assert!((f.mbps_600_200 / super::calibrate::PAPER_600_200_MBPS - 1.0).abs() < 0.01, "{f:?}");
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

#[test]
#[ignore = "exploration: the fitted model's points under a governor (GOV = menu, c1, c6)"]
fn explore_idle() {
    let net = NetParams {
        governor: match std::env::var("GOV").as_deref() {
            Ok("c1") => GovernorName::AlwaysC1,
            Ok("c1e") => GovernorName::AlwaysC1e,
            Ok("c3") => GovernorName::AlwaysC3,
            Ok("c6") => GovernorName::AlwaysC6,
            _ => GovernorName::Menu,
        },
        ..super::calibrate::paper_net()
    };
    let f = super::calibrate::fit(&net);
    let c = super::calibrate::fitted(&base_costs(), f.tcp_scale, f.rest_scale);
    eprintln!("{f:?}");
    let show = |name: &str, cpus: Vec<CpuSpec>| {
        let o = run1(&c, &net, &cpus);
        let b: Vec<String> = o
            .cpus
            .iter()
            .map(|c| {
                let r: Vec<String> = c.residency.iter().map(|r| format!("{:.0}", r * 100.0)).collect();
                format!("{:.2}/{}w[{}]", c.busy, c.wakeups, r.join(","))
            })
            .collect();
        eprintln!("{name:>14}: {:7.0} Mbps {:5.1} W  {}", o.mbps, o.power_w, b.join(" "));
    };
    for m in [2267, 1867, 1600] {
        show(&format!("c1 {m}"), config1(m, m));
    }
    for (t, o) in [(200, 200), (600, 200), (1000, 400), (1200, 600), (1600, 600)] {
        show(&format!("c1 {t}/{o}"), config1(t, o));
        show(&format!("c2 {t}/{o}"), config2(t, o));
    }
    for m in [2267, 1600, 200] {
        show(&format!("single {m}"), single(m));
    }
}

#[test]
#[ignore = "exploration: the shipped NewtOS claims under FIT, SCALE, TURN, GOV, WAKEUP, STREAMS, REMOTE, CLIENTS, SMT"]
fn explore_claims() {
    use super::idle::GovernorName;
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<f64>().ok());
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/newtos");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let (mut held, mut all) = (0, 0);
    let tune = |net: &mut NetParams| {
        if let Some(t) = env("TURN") {
            net.turn_cycles = t;
        }
        if let Some(v) = env("STREAMS") {
            net.streams = v as u32;
        }
        if let Some(v) = env("REMOTE") {
            net.remote_ns = v as u64;
        }
        if let Some(v) = env("CLIENTS") {
            net.clients = v as u32;
        }
        if let Some(v) = env("WRITE") {
            net.write_bytes = v as u32;
        }
        if let Some(v) = env("CLIENT_CYCLES") {
            net.client_cycles = v;
        }
        if let Some(v) = env("COPY") {
            net.copy_gb_per_s = v;
        }
        if let Some(v) = env("SMT") {
            net.smt_factor = v;
        }
        if let Some(v) = env("LINK") {
            net.link_gbps = v;
        }
        net.governor = match std::env::var("GOV").as_deref() {
            Ok("c1") => GovernorName::AlwaysC1,
            Ok("c1e") => GovernorName::AlwaysC1e,
            Ok("c3") => GovernorName::AlwaysC3,
            Ok("c6") => GovernorName::AlwaysC6,
            Ok("fixed") => GovernorName::Fixed,
            _ => GovernorName::Menu,
        };
    };
    let refit = std::env::var("FIT").is_ok().then(|| {
        let mut net = super::calibrate::paper_net();
        tune(&mut net);
        let f = super::calibrate::fit(&net);
        eprintln!("fit: {f:?} {:?}", f.costs().tcp);
        f.costs()
    });
    for f in files {
        let mut sc = super::scenario::NetScenario::from_toml(&std::fs::read_to_string(&f).unwrap()).unwrap();
        if let Some(s) = env("SCALE") {
            sc.stack = scaled(&base_costs(), s, sc.stack.wakeup_ns);
        }
        if let Some(c) = &refit {
            sc.stack = c.clone();
        }
        if let Some(w) = env("WAKEUP") {
            sc.stack.wakeup_ns = w;
        }
        tune(&mut sc.net);
        if std::env::var("VERBOSE").is_ok() {
            for r in &sc.runs {
                let net = NetParams { governor: r.governor.unwrap_or(sc.net.governor), ..sc.net.clone() };
                if r.policy.is_some() {
                    continue;
                }
                let o = simulate(&RunInput {
                    costs: &sc.stack,
                    net: &net,
                    cpus: &r.cpus,
                    load: &r.load,
                    seed: 1,
                    beside: Default::default(),
                });
                let b: Vec<String> = o
                    .cpus
                    .iter()
                    .map(|c| {
                        let r: Vec<String> =
                            c.residency.iter().map(|r| format!("{:.0}", r * 100.0)).collect();
                        format!("{:.2}/{}w[{}]", c.busy, c.wakeups, r.join(","))
                    })
                    .collect();
                eprintln!("  {:>16}: {:7.0} Mbps {:5.1} W  {}", r.label, o.mbps, o.power_w, b.join(" "));
            }
        }
        let rows = super::run::run_scenario(&sc, &[1]);
        let c = super::claims::check(&sc, &rows);
        let k = c.counts();
        held += k.predictions_held;
        all += k.predictions();
        eprintln!("{}: {} of {} predictions", sc.name, k.predictions_held, k.predictions());
        for cl in c.claims.iter().filter(|c| c.verdict != crate::claims::Verdict::Held) {
            let bad: Vec<String> = cl
                .checks
                .iter()
                .filter(|k| k.verdict != crate::claims::Verdict::Held)
                .map(|k| format!("{} [{}]", k.check, k.measured))
                .collect();
            eprintln!("   FAILS {}: {}", cl.claim, bad.join("; "));
        }
    }
    eprintln!("ALL: {held} of {all}");
}

/// The simulator raises the "receiver cannot keep up" hint as the live
/// stack does: a channel at least half full when the sample is taken.
/// IP and the driver at 200 MHz behind TCP at 2267 fall behind; three cores
/// at 2267 MHz do not.
#[test]
fn a_component_that_cannot_keep_up_is_reported_behind() {
    let c = super::calibrate::fitted(&base_costs(), 0.53, 0.8);
    let net = NetParams::default();
    let behind = |cpus: Vec<CpuSpec>| {
        let input =
            RunInput { costs: &c, net: &net, cpus: &cpus, load: &[], seed: 1, beside: Default::default() };
        let mut sim = Sim::new(&input);
        let mut any = false;
        for t in 1..=10u64 {
            sim.run_until(t * 1_000_000);
            let (s, _) = sim.take_sample(1_000_000, super::policy::CHANNEL_SLOTS);
            any |= s.components.values().any(|c| c.behind);
        }
        any
    };
    assert!(behind(config1(2267, 200)));
    assert!(!behind(config1(2267, 2267)));
}

/// A CPU that polls for `spin_ns` before it sleeps serves messages that
/// come within that time without a wake-up: segments offered at 0.1 Gbps
/// (a Poisson process, one every 116 µs on average) wake a CPU that sleeps
/// at once for nearly each of them, and one that polls for 200 µs only
/// after the gaps longer than that (e^-1.7, about 18% of them).
#[test]
fn a_cpu_that_polls_before_it_sleeps_saves_the_wake_ups() {
    let c = StackCosts { wakeup_ns: 20_000.0, ..base_costs() };
    let load = [LoadStep { at_ms: 0.0, gbps: 0.1 }];
    let run = |spin_ns| {
        // No ACK jitter: the generator draws the writes alone, the same in
        // both runs.
        let net = NetParams { spin_ns, remote_jitter_ns: 0, ..NetParams::default() };
        simulate(&RunInput {
            costs: &c,
            net: &net,
            cpus: &single(2267),
            load: &load,
            seed: 1,
            beside: Default::default(),
        })
    };
    let (sleepy, polling) = (run(0), run(200_000));
    assert!(sleepy.cpus[0].wakeups > 50, "{:?}", sleepy.cpus);
    assert!(
        polling.cpus[0].wakeups * 3 < sleepy.cpus[0].wakeups,
        "{:?} against {:?}",
        polling.cpus,
        sleepy.cpus
    );
    assert_eq!(sleepy.cpus[0].polled, 0.0);
    assert!(polling.cpus[0].polled > 0.5, "it polled most of the time: {:?}", polling.cpus);
    // The same segments went through.
    assert!(
        (sleepy.mbps - polling.mbps).abs() < 0.05 * sleepy.mbps,
        "{} against {}",
        sleepy.mbps,
        polling.mbps
    );
}

fn writes_net(clients: u32) -> NetParams {
    NetParams { clients, client_cycles: 2000.0, ..NetParams::default() }
}

/// Synchronous writes (`netstack::writes`): one client with one 8 KiB write
/// outstanding bounds the bitrate by a write's round trip, far below the
/// link; the round trip holds the syscall server's and the client's work at
/// the chip's frequency, so the chip at 1600 MHz delivers less than at 2267
/// even though the stack's cores are never busy. The server runs on a core
/// of its own, left out of the power and resources the paper's bars count.
#[test]
fn one_client_is_bound_by_its_writes_round_trip_at_the_chips_speed() {
    let c = super::calibrate::fitted(&base_costs(), 0.53, 0.8);
    let run = |net: &NetParams, cpus: Vec<CpuSpec>| run1(&c, net, &cpus);
    let direct = run(&NetParams::default(), config1(2267, 2267));
    let one = run(&writes_net(1), config1(2267, 2267));
    let slow_chip = run(&writes_net(1), config1(1600, 1600));
    assert!(one.mbps < 0.6 * direct.mbps, "{} against {}", one.mbps, direct.mbps);
    assert!(slow_chip.mbps < 0.97 * one.mbps, "{} against {}", slow_chip.mbps, one.mbps);
    // The stack's cores are mostly idle: the loop, not a core, limits.
    assert!(one.components[&ComponentKind::Tcp].busy < 0.5, "{:?}", one.components);
    // The system core: a fourth CPU at the chip's frequency hosting the
    // server, counted neither in the resources nor in the power.
    assert_eq!(one.cpus.len(), 4);
    assert_eq!(one.cpus[3].components, vec![ComponentKind::Syscall]);
    assert_eq!((one.cpus[3].mhz, slow_chip.cpus[3].mhz), (2267, 1600));
    assert!(one.cpus[3].busy > 0.0);
    assert_eq!(one.resources, direct.resources);
    let stack_only = run(&NetParams::default(), config1(2267, 2267));
    assert!(
        one.power_w < stack_only.power_w,
        "three stack cores only: {} vs {}",
        one.power_w,
        stack_only.power_w
    );
    // More clients, more writes in flight: faster, up to the link.
    let eight = run(&writes_net(8), config1(2267, 2267));
    assert!(eight.mbps > 2.0 * one.mbps, "{} against {}", eight.mbps, one.mbps);
    assert!(eight.mbps <= 10_000.0);
    // Deterministic.
    assert_eq!(run(&writes_net(8), config1(2267, 2267)), eight);
}

/// A write that does not fit the send buffer waits in TCP until ACKs free
/// the room (the engine asserts the buffer is never exceeded), and the
/// stream still flows: one 16 KiB window, 8 clients of 8 KiB.
#[test]
fn writes_wait_for_room_in_the_send_buffer() {
    let c = super::calibrate::fitted(&base_costs(), 0.53, 0.8);
    let net = NetParams { streams: 1, window_bytes: 16_384, ..writes_net(8) };
    let o = simulate(&RunInput {
        costs: &c,
        net: &net,
        cpus: &config1(2267, 2267),
        load: &[],
        seed: 3,
        beside: Default::default(),
    });
    assert!(o.mbps > 100.0, "{o:?}");
    // At most one window in flight per round trip (30 µs turnaround or more).
    assert!(o.mbps < 16_384.0 * 8.0 / 30_000.0 * 1e3, "{}", o.mbps);
}

/// The copy's memory time does not scale with a P-state's clock and
/// stretches with a throttled core's duty cycle: 1448 bytes at 7.4 GB/s add
/// 196 ns to each segment TCP sends at 2267 and at 1600 MHz, and eight
/// times that on a core throttled to 200 MHz (duty 1/8).
#[test]
fn the_copys_memory_time_does_not_scale_with_the_clock() {
    let c = super::calibrate::fitted(&base_costs(), 0.4, 0.8);
    let run = |copy: f64, cpus: Vec<CpuSpec>| {
        let net = NetParams { copy_gb_per_s: copy, ..NetParams::default() };
        run1(&c, &net, &cpus)
    };
    // TCP's busy time per segment sent, ns.
    let per_seg = |o: &Outcome| {
        let segments_per_s = o.mbps * 1e6 / (1448.0 * 8.0);
        o.components[&ComponentKind::Tcp].busy / segments_per_s * 1e9
    };
    let added = |mhz: u32, others: u32| {
        per_seg(&run(super::calibrate::ASSUMED_COPY_GB_PER_S, config1(mhz, others)))
            - per_seg(&run(0.0, config1(mhz, others)))
    };
    let m = 1448.0 / super::calibrate::ASSUMED_COPY_GB_PER_S;
    for (mhz, others, want) in [(2267, 2267, m), (1600, 1600, m), (200, 600, 8.0 * m)] {
        let got = added(mhz, others);
        assert!((got / want - 1.0).abs() < 0.15, "{mhz} MHz: {got:.0} ns added, want {want:.0}");
    }
}

/// Issue 33: Table 2's point checks (8641, 8152 and 7840 Mbps), with the
/// bands the shipped scenario gives them (their printed precision), fail on
/// a flat 9.42 Gbps curve, which the old ±25% held, and hold on the paper's
/// own curve: the band can tell the two apart.
#[test]
fn table_2s_point_checks_fail_on_a_flat_curve() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scenarios/newtos/table2.toml");
    let sc = super::scenario::NetScenario::from_toml(&std::fs::read_to_string(path).unwrap()).unwrap();
    sc.validate().unwrap();
    let rows = super::run::run_scenario(&sc, &[1]);
    let with_curve = |curve: [(&str, f64); 3]| {
        let mut rows = rows.clone();
        for r in &mut rows {
            let (_, v) = curve.iter().find(|(l, _)| *l == r.label).expect("Table 2's three runs");
            r.mbps = crate::claims::Observed::of(&[*v, *v, *v]).unwrap();
        }
        let c = super::claims::check(&sc, &rows);
        ["paper.0", "paper.1", "paper.2"].map(|id| {
            let claim = c.claims.iter().find(|k| k.id == id).expect("Table 2's points");
            assert_eq!(claim.kind, crate::claims::Kind::Prediction);
            claim.verdict
        })
    };
    let flat = with_curve([("2267", 9420.0), ("1867", 9420.0), ("1600", 9420.0)]);
    assert_eq!(flat, [crate::claims::Verdict::Failed; 3], "a flat 9.42 Gbps curve");
    let paper = with_curve([("2267", 8641.0), ("1867", 8152.0), ("1600", 7840.0)]);
    assert_eq!(paper, [crate::claims::Verdict::Held; 3], "the paper's own curve");
    // 1% off each point (beyond the 0.5% a printed 4-digit value allows) fails.
    let near = with_curve([("2267", 8641.0 * 1.01), ("1867", 8152.0 * 0.99), ("1600", 7840.0 * 1.01)]);
    assert_eq!(near, [crate::claims::Verdict::Failed; 3], "1% off");
}

/// `round_ns` is `f64::round` then `as Nanos`, bit for bit: halves, the
/// largest values below a half, the ends of the range, and a sweep.
#[test]
fn round_ns_is_round_then_cast() {
    let mut xs = vec![
        0.0,
        -0.0,
        0.5,
        1.5,
        2.5,
        0.49999999999999994,
        -0.5,
        -0.7,
        -3.2,
        4503599627370495.5,
        4503599627370496.0,
        9007199254740993.0,
        1.8446744073709552e19,
        1.844_674_407_370_955e19,
        9.3e18,
        1e300,
        f64::MAX,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::MIN_POSITIVE,
    ];
    let mut x = 1e-3;
    while x < 1e20 {
        for d in [-1.0, -0.5, 0.0, 0.5, 1.0] {
            xs.push(x + d);
            xs.push(f64::from_bits((x + d).to_bits().wrapping_add(1)));
            xs.push(f64::from_bits((x + d).to_bits().wrapping_sub(1)));
        }
        x *= 1.37;
    }
    for x in xs {
        assert_eq!(round_ns(x), x.round() as dyncore_core::Nanos, "{x:e}");
    }
}
