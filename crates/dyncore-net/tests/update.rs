//! Live update: a running component replaced by a new instance of a
//! (possibly different) version between two of its polls, its state handed
//! over through an explicit, versioned state type, while a stream flows.

mod common;

use std::sync::Arc;

use common::*;
use dyncore_net::component::{Component, ComponentKind, StateBody};
use dyncore_net::filter::{FilterState, Rule};
use dyncore_net::host::{Clock, RoundRobin, Supervised};
use dyncore_net::wire::mem::MemWireConfig;

fn host(
    comps: Vec<Arc<dyn dyncore_net::component::Blueprint>>,
    apps: Vec<Box<dyn dyncore_net::app::App>>,
) -> RoundRobin {
    RoundRobin::new(comps, apps, Clock::Virtual { now_ns: 0, tick_ns: 1_000 })
}

fn settle(rr: &mut RoundRobin) {
    let mut rounds = 0;
    while rr.round() {
        rounds += 1;
        assert!(rounds < 1_000_000, "the stacks never come to rest");
    }
}

fn counters(s: &Supervised) -> Vec<(&'static str, u64)> {
    s.component().counters().snapshot()
}

fn get(s: &Supervised, name: &str) -> u64 {
    s.component().counters().get(name)
}

/// Stack A's filter (index 3) goes from version 1 to 2 mid-stream and back;
/// version 2's count of the implicit last rule starts from version 1's
/// state and counts on, so that at the end it holds every packet no allow
/// rule counted, across both versions.
#[test]
fn the_filter_is_updated_to_version_2_with_a_counter_initialised_from_version_1() {
    let total = 8 << 20;
    let rules =
        vec![Rule::parse("allow out tcp dport 5001").unwrap(), Rule::parse("deny in tcp sport 23").unwrap()];
    let (comps, apps) = split_pair(MemWireConfig::default(), total, |c| {
        if c.addr == A {
            c.rules = rules.clone();
        }
    });
    let mut rr = host(comps, apps);
    let fa = 3;
    assert_eq!(rr.components[fa].kind(), ComponentKind::Filter);
    // Halfway, to version 2.
    rr.run_until(10_000_000, |rr| rr.apps[0].report().digest.bytes >= total / 2).unwrap();
    let before = counters(&rr.components[fa]);
    let v1 = rr.components[fa].component().export().unwrap();
    let StateBody::Filter(FilterState::V1 { hits, counts, .. }) = v1.body else { panic!("{v1:?}") };
    let now = rr.now_ns();
    let up = rr.components[fa].update(2, now).unwrap();
    assert_eq!((up.from, up.to), (1, 2));
    assert_eq!(rr.components[fa].component().version(), 2);
    let passed = counts[0] + counts[1];
    let expected_default = passed - hits[0];
    assert!(
        hits[0] > 0 && expected_default > 0,
        "the stream matched the allow rule and the default: {before:?}"
    );
    assert_eq!(
        get(&rr.components[fa], "default_hits"),
        expected_default,
        "initialised from version 1's state"
    );
    for (name, v) in &before {
        assert_eq!(get(&rr.components[fa], name), *v, "{name} carried over");
    }
    eprintln!(
        "filter 1 → 2 mid-stream: paused {:.1} µs; default_hits starts at {expected_default}",
        up.pause_ns as f64 / 1e3
    );
    let r = rr.run_until(10_000_000, |rr| rr.apps.iter().all(|a| a.is_done()));
    r.unwrap();
    settle(&mut rr);
    assert_stream_intact(&rr.apps, total);
    let f = &rr.components[fa];
    let hits_now: Vec<u64> = rr_hits(&rr, 0);
    let passed_now = get(f, "passed_in") + get(f, "passed_out");
    assert!(get(f, "default_hits") > expected_default, "version 2 counted on");
    assert_eq!(
        get(f, "default_hits"),
        passed_now - hits_now[0],
        "every packet passed that the allow rule did not count, across both versions"
    );
    let comps: Vec<&dyn Component> = rr.components.iter().map(Supervised::component).collect();
    assert_frames_conserved(&comps);
    for s in &rr.components {
        assert_eq!(s.buffers_out(), 0, "{} holds buffers at rest", s.kind());
    }
    // And back to version 1, which drops the counter it does not have and
    // keeps the others.
    let v2 = counters(&rr.components[fa]);
    let now = rr.now_ns();
    rr.components[fa].update(1, now).unwrap();
    assert_eq!(rr.components[fa].component().counters().names(), dyncore_net::filter::COUNTERS);
    let v1: Vec<_> = v2.into_iter().filter(|(n, _)| *n != "default_hits").collect();
    assert_eq!(counters(&rr.components[fa]), v1);
    assert_eq!(rr_hits(&rr, 0), hits_now);
}

/// The filter's hit counts per rule in stack `stack` (0: A), as exported.
fn rr_hits(rr: &RoundRobin, stack: usize) -> Vec<u64> {
    let s = rr.components[stack * 5 + 3].component().export().unwrap();
    match s.body {
        StateBody::Filter(FilterState::V1 { hits, .. } | FilterState::V2 { hits, .. }) => hits,
        b => panic!("{b:?}"),
    }
}

/// IP, the syscall server and the driver of both stacks updated to new
/// instances (same version) over and over while a stream flows: nothing
/// lost, nothing duplicated, and each update's pause reported.
#[test]
fn components_are_updated_over_and_over_while_the_stream_flows() {
    let total = 8 << 20;
    let (comps, apps) = split_pair(MemWireConfig::default(), total, |_| ());
    let mut rr = host(comps, apps);
    let mut n = 0u64;
    let mut pauses = Vec::new();
    rr.run_until(20_000_000, |rr| {
        if rr.rounds() % 5 == 0 && !rr.apps[0].is_done() {
            let i = [0, 2, 3, 4, 5, 7, 8, 9][(n % 8) as usize];
            let version =
                if rr.components[i].kind() == ComponentKind::Filter { 1 + (n / 8 % 2) as u32 } else { 1 };
            let now = rr.now_ns();
            let up = rr.components[i].update(version, now).unwrap();
            pauses.push(up.pause_ns);
            n += 1;
        }
        rr.apps.iter().all(|a| a.is_done())
    })
    .unwrap();
    settle(&mut rr);
    assert!(n >= 40, "only {n} updates during the stream");
    assert_stream_intact(&rr.apps, total);
    let comps: Vec<&dyn Component> = rr.components.iter().map(Supervised::component).collect();
    assert_frames_conserved(&comps);
    for s in &rr.components {
        assert_eq!(s.buffers_out(), 0, "{} holds buffers at rest", s.kind());
    }
    pauses.sort_unstable();
    eprintln!(
        "{n} updates; pause p50 {:.1} µs, max {:.1} µs",
        pauses[pauses.len() / 2] as f64 / 1e3,
        pauses[pauses.len() - 1] as f64 / 1e3
    );
}

#[test]
fn updates_that_cannot_be_are_refused_and_change_nothing() {
    let (comps, apps) = split_pair(MemWireConfig::default(), 1 << 20, |_| ());
    let mut rr = host(comps, apps);
    rr.run_until(100_000, |rr| rr.apps[0].report().digest.bytes > 0).unwrap();
    let e = rr.components[1].update(1, 0).unwrap_err();
    assert!(e.0.contains("TCP cannot be updated live"), "{e}");
    let e = rr.components[3].update(3, 0).unwrap_err();
    assert!(e.0.contains("versions 1 and 2, not 3"), "{e}");
    let e = rr.components[2].update(2, 0).unwrap_err();
    assert!(e.0.contains("ip has version 1 only"), "{e}");
    assert_eq!(rr.components.iter().map(|s| s.load.updates).sum::<u64>(), 0);
    rr.run_until(2_000_000, |rr| rr.apps.iter().all(|a| a.is_done())).unwrap();
    assert_stream_intact(&rr.apps, 1 << 20);
}
