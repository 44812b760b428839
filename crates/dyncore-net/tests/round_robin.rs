//! Streams over the in-memory wire with every component of both stacks
//! polled round-robin on one thread, in virtual time.

mod common;

use common::*;
use dyncore_net::app::App;
use dyncore_net::component::{Component, ComponentKind};
use dyncore_net::filter::Rule;
use dyncore_net::host::{Clock, RoundRobin, quiet_injected_crashes};
use dyncore_net::mono::{Mono, MonoRole};
use dyncore_net::stack::{Stack, StackConfig};
use dyncore_net::tcp::SocketConfig;
use dyncore_net::wire::mem::{self, Impairment, MemWireConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const TICK_NS: u64 = 1_000;

fn host(
    comps: Vec<std::sync::Arc<dyn dyncore_net::component::Blueprint>>,
    apps: Vec<Box<dyn App>>,
) -> RoundRobin {
    RoundRobin::new(comps, apps, Clock::Virtual { now_ns: 0, tick_ns: TICK_NS })
}

/// Runs until both applications are done, with `between` called before
/// every round; fails with the applications' state if they do not finish.
fn finish(rr: &mut RoundRobin, max_rounds: u64, mut between: impl FnMut(&mut RoundRobin)) {
    let r = rr.run_until(max_rounds, |rr| {
        between(rr);
        rr.apps.iter().all(|a| a.is_done())
    });
    if let Err(e) = r {
        let phases: Vec<_> = rr.apps.iter().map(|a| (a.report(), a.error().map(str::to_string))).collect();
        panic!("{e}; apps: {phases:?}");
    }
}

fn run(wire: MemWireConfig, total: u64, max_rounds: u64) -> RoundRobin {
    let (comps, apps) = split_pair(wire, total, |_| ());
    let mut rr = host(comps, apps);
    finish(&mut rr, max_rounds, |_| ());
    rr
}

/// Lets the stacks come to rest (the last ACKs drain), then checks every
/// buffer is back with its allocator.
fn assert_no_buffers_out(rr: &mut RoundRobin) {
    settle(rr);
    for s in &mut rr.components {
        assert_eq!(s.buffers_out(), 0, "{} holds buffers at rest", s.kind());
    }
}

fn settle(rr: &mut RoundRobin) {
    let mut rounds = 0;
    while rr.round() {
        rounds += 1;
        assert!(rounds < 100_000, "the stacks never come to rest");
    }
}

fn assert_conserved(rr: &mut RoundRobin) {
    settle(rr);
    let comps: Vec<&dyn Component> = rr.components.iter().map(|s| s.component()).collect();
    assert_frames_conserved(&comps);
}

#[test]
fn a_stream_crosses_two_split_stacks_intact() {
    let total = 4 << 20;
    let mut rr = run(MemWireConfig::default(), total, 2_000_000);
    assert_stream_intact(&rr.apps, total);
    assert_no_buffers_out(&mut rr);
    assert_conserved(&mut rr);
    // The payload went through every component of both stacks.
    for s in &rr.components {
        assert!(s.load.messages > 0, "{} handled nothing", s.kind());
    }
    let ip_a = &rr.components[2];
    assert!(
        ip_a.component().counters().get("sent") > (total / 1460),
        "IP saw fewer packets than the stream needs"
    );
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let total = 1 << 20;
    let a = run(MemWireConfig::default(), total, 1_000_000);
    let b = run(MemWireConfig::default(), total, 1_000_000);
    assert_eq!(a.rounds(), b.rounds());
    assert_eq!(a.now_ns(), b.now_ns());
    let loads = |rr: &RoundRobin| rr.components.iter().map(|s| s.load).collect::<Vec<_>>();
    assert_eq!(loads(&a), loads(&b));
}

#[test]
fn ip_filter_driver_and_syscall_crash_and_restart_mid_stream_without_loss() {
    quiet_injected_crashes();
    let total = 8 << 20;
    let (comps, apps) = split_pair(MemWireConfig::default(), total, |_| ());
    let mut rr = host(comps, apps);
    let restartable =
        [ComponentKind::Syscall, ComponentKind::Ip, ComponentKind::Filter, ComponentKind::Driver];
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut armed = 0u64;
    finish(&mut rr, 4_000_000, |rr| {
        // Mid-stream, a crash every few rounds in a random restartable
        // component of either stack.
        let streaming = rr.apps[0].report().digest.bytes > 0 && !rr.apps[0].is_done();
        if streaming && rng.random_ratio(1, 4) {
            let candidates: Vec<usize> = (0..rr.components.len())
                .filter(|&i| restartable.contains(&rr.components[i].kind()))
                .collect();
            let i = candidates[rng.random_range(0..candidates.len())];
            let switch = rr.components[i].component().crash_switch();
            if !switch.is_armed() {
                switch.arm();
                armed += 1;
            }
        }
    });
    assert_stream_intact(&rr.apps, total);
    assert_no_buffers_out(&mut rr);
    // Not only did TCP deliver the stream (it would also mask a lost frame
    // by retransmitting): no frame was lost or duplicated by a restart.
    assert_conserved(&mut rr);
    let restarts: u64 = rr.components.iter().map(|s| s.load.restarts).sum();
    let fired: u64 = rr.components.iter().map(|s| s.component().crash_switch().fired()).sum();
    assert_eq!(restarts, fired, "every crash was followed by a restart");
    assert!(restarts >= 50, "only {restarts} restarts of {armed} armed: the test did not test much");
    for k in restartable {
        let n: u64 = rr.components.iter().filter(|s| s.kind() == k).map(|s| s.load.restarts).sum();
        assert!(n > 0, "{k} never crashed");
    }
    // The connection survived: TCP was never restarted and no call failed.
    assert!(rr.components.iter().filter(|s| s.kind() == ComponentKind::Tcp).all(|s| s.load.restarts == 0));
}

#[test]
fn tcp_recovers_from_a_lossy_corrupting_wire_and_ip_drops_the_damage() {
    let total = 2 << 20;
    let imp = Impairment { loss: 0.01, corrupt: 0.01, seed: 3 };
    let mut rr = run(MemWireConfig { impairment: Some(imp), ..MemWireConfig::default() }, total, 20_000_000);
    assert_stream_intact(&rr.apps, total);
    assert_no_buffers_out(&mut rr);
    let bad: u64 = rr
        .components
        .iter()
        .filter(|s| s.kind() == ComponentKind::Ip)
        .map(|s| {
            let c = s.component().counters();
            c.get("bad_ip_checksum") + c.get("bad_tcp_checksum")
        })
        .sum();
    assert!(bad > 0, "corrupted frames reached the stack but IP caught none");
}

#[test]
fn the_filter_denies_by_rule_and_counts_hits() {
    let (comps, apps) = split_pair(MemWireConfig::default(), 1 << 16, |c| {
        if c.addr == B {
            c.rules = vec![
                Rule::parse("allow in tcp dport 9").unwrap(),
                Rule::parse("deny in dport 5001").unwrap(),
            ];
        }
    });
    let mut rr = host(comps, apps);
    // The receiver waits for a connection that never comes: run until the
    // sender gives up (smoltcp's 10 s timeout, in virtual time).
    rr.run_until(20_000_000, |rr| rr.apps[0].is_done()).unwrap();
    let err = rr.apps[0].error().expect("the sender cannot connect through the filter");
    assert!(err.contains("refused"), "{err}");
    let filter_b = &rr.components[5 + 3];
    assert_eq!(filter_b.kind(), ComponentKind::Filter);
    let denied = filter_b.component().counters().get("denied_in");
    assert!(denied >= 2, "the SYN and its retransmissions are denied: {denied}");
    assert_eq!(filter_b.component().counters().get("passed_in"), 0);
}

/// A split stack and a monolithic smoltcp stack, either way round: the
/// monolithic side checks the split side's checksums with its own code.
fn split_and_mono(split_sends: bool) {
    let total = 2 << 20;
    let (w_split, w_mono) = mem::pair(MemWireConfig::default());
    let mut stack = Stack::build(&StackConfig::new(A), std::sync::Arc::new(w_split));
    let sock = stack.sockets.remove(0);
    let (split_app, mono_role): (Box<dyn App>, _) = if split_sends {
        (
            Box::new(dyncore_net::app::Sender::new(sock, (B, PORT), total, SEED)),
            MonoRole::Receive { port: PORT, verify_seed: Some(SEED) },
        )
    } else {
        (
            Box::new(dyncore_net::app::Receiver::new(sock, PORT, Some(SEED))),
            MonoRole::Send { peer: (A, PORT), total, seed: SEED },
        )
    };
    let mono = Mono::new(w_mono.port(), B, SocketConfig::default(), 5, mono_role, 0);
    let apps: Vec<Box<dyn App>> =
        if split_sends { vec![split_app, Box::new(mono)] } else { vec![Box::new(mono), split_app] };
    let mut rr = host(stack.blueprints, apps);
    finish(&mut rr, 4_000_000, |_| ());
    assert_stream_intact(&rr.apps, total);
    assert_no_buffers_out(&mut rr);
}

#[test]
fn a_split_stack_sends_to_a_monolithic_one() {
    split_and_mono(true);
}

#[test]
fn a_split_stack_receives_from_a_monolithic_one() {
    split_and_mono(false);
}

#[test]
fn a_sender_started_before_its_receiver_listens_retries_and_connects() {
    let total = 1 << 20;
    let (comps, mut apps) = split_pair(MemWireConfig::default(), total, |_| ());
    let receiver = apps.pop().unwrap();
    let mut rr = host(comps, apps);
    // 30 ms of virtual time with nobody listening: refused, retried every 10 ms.
    rr.run_until(1_000_000, |rr| rr.now_ns() >= 30_000_000).unwrap();
    assert!(
        !rr.apps[0].is_done() && rr.apps[0].error().is_none(),
        "the sender gave up: {:?}",
        rr.apps[0].error()
    );
    let tcp_b = &rr.components[6];
    assert_eq!(tcp_b.kind(), ComponentKind::Tcp);
    assert!(tcp_b.component().counters().get("frames_out") >= 3, "B's TCP refused (RST) each attempt");
    rr.apps.push(receiver);
    finish(&mut rr, 4_000_000, |_| ());
    assert_stream_intact(&rr.apps, total);
}

#[test]
fn a_component_that_falls_behind_shows_in_the_placement_sample() {
    let (comps, apps) = split_pair(MemWireConfig::default(), 8 << 20, |_| ());
    let mut rr = host(comps, apps);
    rr.run_until(100_000, |rr| rr.apps[0].report().digest.bytes > 1 << 20).unwrap();
    // Then stack A's IP (index 2) gets one poll in 50: TCP's channel to it
    // fills to the window.
    let mut now = rr.now_ns();
    for round in 0..2_000 {
        now += TICK_NS;
        for (i, s) in rr.components.iter_mut().enumerate() {
            if i != 2 || round % 50 == 0 {
                let _ = s.poll(now);
            }
        }
        for a in &mut rr.apps {
            let _ = a.poll(now);
        }
    }
    let before = vec![Default::default(); 5];
    // The window (about 50 frames here) queues in front of IP: a fifth of
    // the 256 the channel can hold.
    let s = dyncore_net::host::load_sample(&rr.components[..5], &before, 1_000_000, 0.0, 0.15);
    let ip = s.components[&ComponentKind::Ip];
    assert!(ip.behind, "TCP's filling channel names IP: {s:?}");
    assert!(ip.fill >= 0.15, "{s:?}");
    assert!(
        !s.components[&ComponentKind::Tcp].behind && !s.components[&ComponentKind::Driver].behind,
        "{s:?}"
    );
    assert_eq!(s.components.len(), 5);
}
