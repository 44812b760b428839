//! The placement policy's decisions, with the arithmetic behind each.

use super::*;
use crate::power::SpeedTable;

use ComponentKind::{Driver, Filter, Ip, Syscall, Tcp};

const MS: Nanos = 1_000_000;

fn policy(cpus: &[CpuId], mode: Mode, kinds: &[ComponentKind]) -> PlacementPolicy {
    PlacementPolicy::new(PlacementConfig::new(cpus.to_vec(), mode), kinds, SpeedTable::newtos()).unwrap()
}

fn sample(busy: &[(ComponentKind, f64)]) -> LoadSample {
    LoadSample {
        components: busy
            .iter()
            .map(|&(k, b)| (k, ComponentSample { busy: b, ..Default::default() }))
            .collect(),
        bits_per_s: 0.0,
    }
}

fn groups(p: &PlacementPolicy) -> Vec<(CpuId, Vec<ComponentKind>)> {
    p.layout().groups().into_iter().map(|(c, g)| (c, g.into_iter().collect())).collect()
}

fn mhz(p: &PlacementPolicy, cpu: CpuId) -> u32 {
    p.speeds().get(p.layout().step_of[&cpu]).mhz
}

#[test]
fn spread_gives_each_component_a_cpu_at_full_speed() {
    let mut p = policy(&[0, 1, 2, 3, 4], Mode::Spread, &ComponentKind::ALL);
    let mut out = Vec::new();
    p.start(0, &mut out);
    assert_eq!(p.layout().cpus_in_use().len(), 5);
    assert!((0..5).all(|c| mhz(&p, c) == 2267));
    // Five dedications and five speeds, all with the mode as the reason.
    assert_eq!(out.iter().filter(|d| matches!(d.action, Action::Dedicate { .. })).count(), 5);
    assert_eq!(out.iter().filter(|d| matches!(d.action, Action::SetSpeed { .. })).count(), 5);
    assert!(out.iter().all(|d| d.reason.contains("spread")));
    // Samples do not move a spread stack.
    out.clear();
    p.on_sample(10 * MS, &sample(&[(Tcp, 1.0)]), &mut out);
    assert!(out.is_empty());
}

#[test]
fn spread_on_fewer_cpus_balances_the_work() {
    // Prior work: TCP 0.7, IP 0.4, driver 0.4, filter 0.2, syscall 0.1.
    // Heaviest first onto the least-loaded CPU:
    //   tcp → 0 (0.7); ip → 1 (0.4); driver → 1 (0.4 < 0.7: 0.8);
    //   filter → 0 (0.7 < 0.8: 0.9); syscall → 1 (0.8 < 0.9: 0.9).
    let mut p = policy(&[0, 1], Mode::Spread, &ComponentKind::ALL);
    p.start(0, &mut Vec::new());
    assert_eq!(groups(&p), [(0, vec![Tcp, Filter]), (1, vec![Syscall, Ip, Driver])]);
}

#[test]
fn consolidate_puts_everything_on_the_first_cpu() {
    let mut p = policy(&[3, 1], Mode::Consolidate, &ComponentKind::ALL);
    let mut out = Vec::new();
    p.start(0, &mut out);
    assert_eq!(groups(&p), [(3, ComponentKind::ALL.to_vec())]);
    assert_eq!(out[0].action, Action::Consolidate { components: ComponentKind::ALL.to_vec(), cpu: 3 });
    assert_eq!(mhz(&p, 3), 2267);
}

#[test]
fn dynamic_spreads_at_once_on_a_burst_and_consolidates_only_after_a_calm_spell() {
    let kinds = [Tcp, Ip, Driver];
    let mut p = policy(&[0, 1, 2], Mode::Dynamic, &kinds);
    let mut out = Vec::new();
    p.start(0, &mut out);
    assert_eq!(p.layout().cpus_in_use().len(), 1, "dynamic starts consolidated");
    // Light: 0.2 + 0.1 + 0.1 = 0.4 of the shared CPU < 0.75: stay.
    out.clear();
    p.on_sample(10 * MS, &sample(&[(Tcp, 0.2), (Ip, 0.1), (Driver, 0.1)]), &mut out);
    assert!(out.is_empty());
    // Burst: 0.5 + 0.2 + 0.1 = 0.8 ≥ 0.75: spread in the same sample.
    p.on_sample(60 * MS, &sample(&[(Tcp, 0.5), (Ip, 0.2), (Driver, 0.1)]), &mut out);
    assert_eq!(p.layout().cpus_in_use().len(), 3);
    assert!(out[0].reason.contains("burst: the shared CPU is 0.80 busy"), "{}", out[0].reason);
    // Calm again. Spread at full speed, work = busy × 1.0:
    // 0.2 + 0.1 + 0.05 = 0.35 ≤ 0.40. Five such samples are needed; the
    // fifth comes at 110 ms, 50 ms after the spread (the dwell): consolidate.
    out.clear();
    let calm = sample(&[(Tcp, 0.2), (Ip, 0.1), (Driver, 0.05)]);
    for i in 1..=4 {
        p.on_sample((60 + 10 * i) * MS, &calm, &mut out);
        assert!(out.is_empty(), "consolidated after only {i} calm samples");
    }
    p.on_sample(110 * MS, &calm, &mut out);
    assert_eq!(p.layout().cpus_in_use().len(), 1);
    assert!(
        out[0].reason.contains("idle: all components need 0.35 of a CPU ≤ 0.40 for 5 samples"),
        "{}",
        out[0].reason
    );
}

#[test]
fn dynamic_does_not_flap_between_the_thresholds() {
    let kinds = [Tcp, Ip, Driver];
    let mut p = policy(&[0, 1, 2], Mode::Dynamic, &kinds);
    let mut out = Vec::new();
    p.start(0, &mut out);
    out.clear();
    // A load that needs 0.6 of a CPU: consolidated it keeps the shared CPU
    // 0.6 busy (< 0.75, no spread); spread it needs 0.6 (> 0.40, no
    // consolidation). Whatever the state, it stays.
    let mid = sample(&[(Tcp, 0.3), (Ip, 0.2), (Driver, 0.1)]);
    for i in 0..100 {
        p.on_sample(i * 10 * MS, &mid, &mut out);
    }
    assert!(out.is_empty(), "{out:?}");
    // Same from the spread state.
    p.on_sample(1000 * MS, &sample(&[(Tcp, 0.9)]), &mut out);
    assert_eq!(p.layout().cpus_in_use().len(), 3);
    out.clear();
    for i in 0..100 {
        p.on_sample((1100 + i * 10) * MS, &mid, &mut out);
    }
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn dynamic_spreads_on_a_filling_channel_or_a_hint_and_respects_the_dwell() {
    let kinds = [Tcp, Ip, Driver];
    let mut p = policy(&[0, 1, 2], Mode::Dynamic, &kinds);
    let mut out = Vec::new();
    p.start(0, &mut out);
    out.clear();
    // Within 50 ms of the start, nothing changes, whatever the load.
    let mut s = sample(&[(Tcp, 0.1)]);
    s.components.get_mut(&Tcp).unwrap().fill = 0.6;
    p.on_sample(10 * MS, &s, &mut out);
    assert!(out.is_empty(), "changed within the dwell");
    p.on_sample(60 * MS, &s, &mut out);
    assert!(out[0].reason.contains("a channel is 0.60 full"), "{}", out[0].reason);
    // From consolidated again, a hint alone spreads.
    let mut q = policy(&[0, 1, 2], Mode::Dynamic, &kinds);
    q.start(0, &mut Vec::new());
    let mut h = sample(&[]);
    h.components.insert(Ip, ComponentSample { busy: 0.1, fill: 0.0, behind: true });
    let mut out = Vec::new();
    q.on_sample(100 * MS, &h, &mut out);
    assert!(out[0].reason.contains("ip cannot keep up"), "{}", out[0].reason);
}

/// A stand-in for a stack (the plant the policy controls): costs TCP 0.7,
/// IP 0.4, driver 0.4 (full-speed CPUs per 10 Gbps). A CPU of capacity `c`
/// carrying components of total cost `w` allows 10 · c / w Gbps; the stack
/// runs at the slowest CPU's rate, and each component is busy
/// rate · cost / (10 · c) — the slowest CPU's components add up to 1.0.
fn plant(p: &PlacementPolicy) -> LoadSample {
    let cost = |k| match k {
        Tcp => 0.7,
        _ => 0.4,
    };
    let l = p.layout();
    let cap = |cpu: CpuId| p.speeds().capacity(l.step_of[&cpu]);
    let groups = l.groups();
    let gbps = groups
        .iter()
        .map(|(&cpu, g)| 10.0 * cap(cpu) / g.iter().map(|&k| cost(k)).sum::<f64>())
        .fold(f64::INFINITY, f64::min);
    LoadSample {
        components: l
            .cpu_of
            .iter()
            .map(|(&k, &cpu)| {
                (k, ComponentSample { busy: gbps * cost(k) / (10.0 * cap(cpu)), ..Default::default() })
            })
            .collect(),
        bits_per_s: gbps * 1e9,
    }
}

/// One decision batch of a tuning run: speeds (MHz by CPU in use) after
/// it, and the plant's bitrate after it.
type Step = (Vec<(CpuId, u32)>, f64);

/// Feeds the plant's samples until 20 in a row change nothing; returns the
/// decision batches.
fn tune(p: &mut PlacementPolicy) -> Vec<Step> {
    let mut path = Vec::new();
    let mut quiet = 0;
    for t in 1..1000 {
        let mut out = Vec::new();
        p.on_sample(t * 10 * MS, &plant(p), &mut out);
        if out.is_empty() {
            quiet += 1;
            if quiet == 20 {
                return path;
            }
        } else {
            quiet = 0;
            let speeds = p.layout().cpus_in_use().into_iter().map(|c| (c, mhz(p, c))).collect();
            path.push((speeds, plant(p).bits_per_s));
        }
    }
    panic!("the search never settled: {path:?}");
}

#[test]
fn efficient_uses_the_fewest_cores_then_halves_to_the_slowest_step() {
    let target = 5e9;
    let mut p = policy(&[0, 1, 2], Mode::Efficient { target_bits_per_s: target }, &[Tcp, Ip, Driver]);
    p.start(0, &mut Vec::new());
    assert_eq!(groups(&p), [(0, vec![Tcp, Ip, Driver])], "efficient starts on one core");
    // Halfway through the duty steps 1600 … 200 MHz.
    assert_eq!(mhz(&p, 0), 1000);
    let path = tune(&mut p);
    let speeds: Vec<_> = path.iter().map(|(s, _)| s.clone()).collect();
    // One core carries cost 1.5: 10 · c / 1.5 Gbps. 1000 MHz (capacity
    // 0.441) gives 2.94: miss, so halfway between it and the fastest duty
    // step: 1400 (4.12), miss; 1600 (4.71), miss — no duty step of one
    // core holds 5 Gbps, so a second core rather than 1867 MHz: TCP alone
    // (cost 0.7) and IP + driver (0.8), both at 1000 MHz: 10 · 0.441 / 0.8
    // = 5.51, holds; halving towards the slowest: 600 (3.31) misses, 800
    // (4.41) misses: 1000 MHz is the slowest step that holds.
    assert_eq!(
        speeds,
        [
            vec![(0, 1400)],
            vec![(0, 1600)],
            vec![(0, 1000), (1, 1000)],
            vec![(0, 600), (1, 600)],
            vec![(0, 800), (1, 800)],
            vec![(0, 1000), (1, 1000)],
        ],
        "{path:?}"
    );
    assert_eq!(groups(&p), [(0, vec![Tcp]), (1, vec![Ip, Driver])]);
    assert!((path.last().unwrap().1 / 1e9 - 5.51).abs() < 0.01);
    assert!(!p.target_unreachable());
}

/// For any target the plant can reach, the search ends on the slowest
/// step (all cores in use at one step) that holds it, after at most
/// ⌈log₂(steps + 1)⌉ judged changes per core count.
#[test]
fn efficient_ends_on_the_slowest_step_that_holds_within_its_bound() {
    for target in [1e9, 2.5e9, 4e9, 6e9, 8e9, 9.5e9] {
        let mut p = policy(&[0, 1], Mode::Efficient { target_bits_per_s: target }, &[Tcp, Ip, Driver]);
        p.start(0, &mut Vec::new());
        let path = tune(&mut p);
        let final_bits = plant(&p).bits_per_s;
        assert!(final_bits >= target * 0.98, "{target}: {path:?}");
        // No slower step of the same cores holds it.
        let cores: Vec<CpuId> = p.layout().cpus_in_use().into_iter().collect();
        let step = p.layout().step_of[&cores[0]];
        assert!(cores.iter().all(|c| p.layout().step_of[c] == step), "one step for all: {path:?}");
        if let Some(slower) = p.speeds().slower(step) {
            let mut q = p.clone();
            let mut out = Vec::new();
            for &c in &cores {
                q.set_speed(0, c, slower, &mut out).unwrap();
            }
            assert!(plant(&q).bits_per_s < target * 0.98, "{target}: a slower step holds too: {path:?}");
        }
        // Two searches at most (one core, then two): 4 judged changes each
        // over ten steps, 3 over the eight duty steps, and the move back
        // to the answer, and a core added.
        assert!(path.len() <= 3 + 1 + 4 + 1 + 1, "{target}: {} changes: {path:?}", path.len());
    }
}

#[test]
fn efficient_goes_past_the_duty_steps_only_on_the_last_core() {
    // One CPU only: nothing to add, so 1867 MHz it is. 5 Gbps needs
    // capacity 0.75 of a core carrying 1.5: 1867 MHz (0.824) gives 5.49.
    let mut p = policy(&[0], Mode::Efficient { target_bits_per_s: 5e9 }, &[Tcp, Ip, Driver]);
    p.start(0, &mut Vec::new());
    let path = tune(&mut p);
    assert_eq!(path.last().unwrap().0, [(0, 1867)]);
    assert!((path.last().unwrap().1 / 1e9 - 5.49).abs() < 0.01);
}

#[test]
fn efficient_leaves_an_application_limited_stack_alone() {
    let mut p = policy(&[0, 1, 2], Mode::Efficient { target_bits_per_s: 5e9 }, &[Tcp, Ip, Driver]);
    p.start(0, &mut Vec::new());
    let mut out = Vec::new();
    // 1 Gbps offered; on the one core they share, 0.3 + 0.2 + 0.2 = 0.7
    // busy < 0.9: the core is not the limit, speed would not help.
    let mut s = sample(&[(Tcp, 0.3), (Ip, 0.2), (Driver, 0.2)]);
    s.bits_per_s = 1e9;
    for i in 0..10 {
        p.on_sample(i * 10 * MS, &s, &mut out);
    }
    assert!(out.is_empty());
    // A component a sender reports behind is saturation too: a miss.
    s.components.get_mut(&Ip).unwrap().behind = true;
    p.on_sample(10 * 10 * MS, &s, &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(matches!(out[0].action, Action::SetSpeed { cpu: 0, .. }), "{out:?}");
    assert!(out[0].reason.contains("try 1400 MHz"), "{}", out[0].reason);
}

#[test]
fn efficient_says_when_the_target_is_out_of_reach() {
    // 20 Gbps: more than full speed gives (10 · 1 / 0.7 = 14.3 Gbps).
    let mut p = policy(&[0, 1, 2], Mode::Efficient { target_bits_per_s: 20e9 }, &[Tcp, Ip, Driver]);
    p.start(0, &mut Vec::new());
    let mut out = Vec::new();
    for i in 0..200 {
        p.on_sample(i * 10 * MS, &plant(&p), &mut out);
    }
    assert!(p.target_unreachable());
    assert!((0..3).all(|c| mhz(&p, c) == 2267));
}

/// A step that held misses once the load grows: the search goes on from
/// there, faster.
#[test]
fn efficient_searches_again_when_a_step_that_held_misses() {
    let mut p = policy(&[0], Mode::Efficient { target_bits_per_s: 2e9 }, &[Tcp, Ip, Driver]);
    p.start(0, &mut Vec::new());
    tune(&mut p);
    let held = mhz(&p, 0);
    // The same layout now carries a heavier stream: below target, busy.
    let mut s = plant(&p);
    s.bits_per_s = 1e9;
    for c in s.components.values_mut() {
        c.busy = 0.5;
    }
    let mut out = Vec::new();
    p.on_sample(5_000 * MS, &s, &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(mhz(&p, 0) > held, "{} after {held}", mhz(&p, 0));
}

#[test]
fn moves_and_speeds_by_hand_switch_to_manual_and_are_checked() {
    let mut p = policy(&[0, 1], Mode::Dynamic, &ComponentKind::ALL);
    p.start(0, &mut Vec::new());
    let mut out = Vec::new();
    p.migrate(MS, Tcp, 1, &mut out).unwrap();
    assert_eq!(out[0].action, Action::Migrate { component: Tcp, from: 0, to: 1 });
    assert_eq!(p.mode(), Mode::Manual);
    p.set_speed(MS, 1, StepIdx(9), &mut out).unwrap();
    assert_eq!(mhz(&p, 1), 200);
    assert!(p.migrate(MS, Tcp, 7, &mut out).unwrap_err().0.contains("CPU 7 is not one of"));
    assert!(p.set_speed(MS, 0, StepIdx(10), &mut out).unwrap_err().0.contains("no speed step 10"));
    // Manual holds against any load.
    out.clear();
    p.on_sample(100 * MS, &sample(&[(Tcp, 1.0), (Ip, 1.0)]), &mut out);
    assert!(out.is_empty());
}

#[test]
fn bad_configurations_are_refused() {
    let k = ComponentKind::ALL;
    let t = SpeedTable::newtos();
    let new = |cpus: Vec<CpuId>, mode, kinds: &[ComponentKind]| {
        PlacementPolicy::new(PlacementConfig::new(cpus, mode), kinds, t.clone()).unwrap_err().0
    };
    assert!(new(vec![], Mode::Spread, &k).contains("no CPUs"));
    assert!(new(vec![1, 1], Mode::Spread, &k).contains("twice"));
    assert!(new(vec![0], Mode::Spread, &[Tcp, Tcp]).contains("twice"));
    assert!(new(vec![0], Mode::Efficient { target_bits_per_s: 0.0 }, &k).contains("positive target"));
    assert_eq!(
        "tpc".parse::<ComponentKind>().unwrap_err(),
        "unknown component `tpc`; known components: syscall, tcp, ip, filter, driver"
    );
}

#[test]
fn replaying_the_samples_gives_the_same_decisions() {
    // A recorded run: samples with their times, and the decisions taken.
    let run = |samples: &[(Nanos, LoadSample)]| {
        let mut p = policy(&[0, 1, 2], Mode::Dynamic, &[Tcp, Ip, Driver]);
        let mut out = Vec::new();
        p.start(0, &mut out);
        for (t, s) in samples {
            p.on_sample(*t, s, &mut out);
        }
        out
    };
    let samples: Vec<(Nanos, LoadSample)> = (0..200u64)
        .map(|i| {
            // Bursts every 50 samples.
            let b = if (i / 25) % 2 == 1 { 0.9 } else { 0.05 };
            (i * 10 * MS, sample(&[(Tcp, b), (Ip, b / 2.0), (Driver, b / 3.0)]))
        })
        .collect();
    let first = run(&samples);
    assert!(first.len() >= 8, "bursts should spread and calm should consolidate: {first:?}");
    assert_eq!(run(&samples), first);
    // And every decision applied in order to the start gives the final layout.
    let mut p = policy(&[0, 1, 2], Mode::Dynamic, &[Tcp, Ip, Driver]);
    let mut out = Vec::new();
    p.start(0, &mut out);
    for (t, s) in &samples {
        p.on_sample(*t, s, &mut out);
    }
    let mut replayed = Layout { cpu_of: BTreeMap::new(), step_of: BTreeMap::new() };
    for d in &out {
        replayed.apply(&d.action);
    }
    assert_eq!(&replayed, p.layout());
}

mod boundary {
    //! The placement policy behind the policy boundary: the same decisions
    //! as its direct calls, recorded and replayed byte for byte, and
    //! refused controls.
    use super::*;
    use crate::policy::trace::DecisionKind;
    use crate::policy::trace::{Recorder, decision_kinds, parse_actions, parse_events, replay};
    use crate::policy::{self, Event, Policy};

    fn burst(busy: f64, fill: f64, bits: f64) -> LoadSample {
        let mut s = sample(&[(Tcp, busy), (Ip, busy * 0.5), (Driver, busy * 0.4)]);
        s.components.get_mut(&Tcp).unwrap().fill = fill;
        s.bits_per_s = bits;
        s
    }

    /// A dynamic stack that sees a burst then a long idle spell; odd
    /// floats so that a lossy trace would show.
    fn events() -> Vec<(Nanos, Event)> {
        let mut ev = vec![(0, Event::StackControl { control: Control::Start })];
        for i in 1..=40u64 {
            let load = if (5..15).contains(&i) {
                burst(0.9137, 0.7, 3.3e9 / 7.0)
            } else {
                burst(0.05, 0.0, 1.0e8 / 3.0)
            };
            ev.push((i * 10 * MS, Event::StackLoad { sample: load }));
            ev.push((i * 10 * MS, Event::Tick { cpu: 0 }));
        }
        ev.push((401 * MS, Event::StackControl { control: Control::Migrate { component: Ip, to: 1 } }));
        ev.push((402 * MS, Event::StackControl { control: Control::SetSpeed { cpu: 1, step: StepIdx(5) } }));
        ev
    }

    #[test]
    fn handle_gives_the_direct_calls_decisions() {
        let mut direct = policy(&[0, 1], Mode::Dynamic, &ComponentKind::ALL);
        let mut want = Vec::new();
        let mut bounded = direct.clone();
        let mut got = Vec::new();
        for (now, e) in events() {
            match &e {
                Event::StackLoad { sample } => direct.on_sample(now, sample, &mut want),
                Event::StackControl { control } => direct.control(now, control, &mut want).unwrap(),
                _ => {}
            }
            bounded.handle(now, &e, &mut got);
        }
        let got: Vec<Decision> = got
            .into_iter()
            .map(|a| match a {
                policy::Action::Place { decision } => decision,
                other => panic!("a placement policy emitted {other:?}"),
            })
            .collect();
        assert_eq!(got, want);
        // The run spread under the burst, consolidated after it, and
        // obeyed the hand-made move and speed.
        let kinds = decision_kinds(
            &got.iter().map(|d| policy::Action::Place { decision: d.clone() }).collect::<Vec<_>>(),
        );
        assert!(kinds.contains(&DecisionKind::Dedicate), "{kinds:?}");
        assert!(kinds.contains(&DecisionKind::MoveComponent), "{kinds:?}");
        assert!(kinds.last() == Some(&DecisionKind::SetStep), "{kinds:?}");
        assert_eq!(bounded.mode(), Mode::Manual);
        assert_eq!(bounded.layout().cpu_of[&Ip], 1);
    }

    #[test]
    fn a_recorded_placement_run_replays_byte_for_byte() {
        let p = policy(&[0, 1], Mode::Dynamic, &ComponentKind::ALL);
        let mut rec = Recorder::new(p.clone(), Vec::new(), Vec::new());
        let mut out = Vec::new();
        for (now, e) in events() {
            out.clear();
            rec.handle(now, &e, &mut out);
        }
        let (_, sinks) = rec.into_parts();
        let (ev_text, act_text) = sinks.unwrap();
        let (ev_text, act_text) = (String::from_utf8(ev_text).unwrap(), String::from_utf8(act_text).unwrap());
        let parsed = parse_events(&ev_text).unwrap();
        assert_eq!(parsed, events(), "the event trace round-trips, floats included");
        assert_eq!(replay(&parsed, &mut p.clone()), act_text);
        assert!(
            parse_actions(&act_text).unwrap().iter().any(|(_, a)| matches!(a, policy::Action::Place { .. }))
        );
    }

    #[test]
    fn validate_refuses_what_the_policy_cannot_do() {
        let p = policy(&[0, 1], Mode::Spread, &[Tcp, Ip]);
        let bad = [
            (Control::Migrate { component: Tcp, to: 7 }, "CPU 7"),
            (Control::Migrate { component: Driver, to: 1 }, "driver"),
            (Control::SetSpeed { cpu: 0, step: StepIdx(200) }, "step 200"),
            (Control::SetMode { mode: Mode::Efficient { target_bits_per_s: f64::NAN } }, "positive target"),
        ];
        for (c, says) in bad {
            let e = p.validate(&c).unwrap_err();
            assert!(e.to_string().contains(says), "{c:?}: {e}");
        }
        assert!(p.validate(&Control::SetSpeed { cpu: 1, step: StepIdx(0) }).is_ok());
    }

    #[test]
    fn the_contract_refuses_an_impossible_sample() {
        let mut c = crate::policy::contract::Checker::new();
        let mut s = burst(0.5, 0.2, 1e9);
        c.step(0, &Event::StackLoad { sample: s.clone() }, &[]).unwrap();
        s.components.get_mut(&Ip).unwrap().busy = 1.5;
        assert!(c.step(1, &Event::StackLoad { sample: s }, &[]).unwrap_err().contains("busy 1.5"));
    }
}
