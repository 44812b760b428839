//! A bounded fault campaign on runtime CPUs: crashes at random components,
//! times and points (TCP's among them), with live updates and moves, while
//! four streams flow. At the end, at rest: no frame lost or duplicated at
//! any hop, no buffer leaked, every connection that completed delivered
//! exactly what was sent, every one a TCP crash reset delivered an intact
//! prefix, and TCP reset exactly what the applications saw reset.
//!
//! `DYNCORE_STACK_FAULTS` (default 300) sets the crashes; `dyncore stack
//! --faults 10000` is the long campaign (docs/results.md).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::*;
use dyncore_net::app::{App, Receiver, Sender};
use dyncore_net::audit::Audit;
use dyncore_net::component::{Blueprint, Component, ComponentKind};
use dyncore_net::faults::{Campaign, Plan};
use dyncore_net::host::{Supervised, Threads, quiet_injected_crashes};
use dyncore_net::hosting::{CpuHost, HostConfig};
use dyncore_net::wire::mem::MemWireConfig;

const LIMIT: Duration = Duration::from_secs(300);

/// Waits until no buffer is out anywhere (the last ACKs drained): two
/// readings in a row, 1 ms apart, since a reading taken while buffers move
/// may miss one in flight (`PoolRef::outstanding`).
fn wait_rest(blueprints: &[Arc<dyn Blueprint>]) {
    let t0 = Instant::now();
    let mut quiet = 0;
    while quiet < 2 {
        let out: Vec<_> = blueprints.iter().map(|b| (b.kind(), b.buffers_out())).collect();
        quiet = if out.iter().all(|(_, n)| *n == 0) { quiet + 1 } else { 0 };
        assert!(t0.elapsed() < Duration::from_secs(20), "the stacks never came to rest: {out:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_bounded_fault_campaign_loses_duplicates_and_leaks_nothing() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    quiet_injected_crashes();
    let crashes: u64 = std::env::var("DYNCORE_STACK_FAULTS").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let streams = 4;
    let (mut a, mut b) = stack_pair(MemWireConfig::default(), |c| c.sockets = streams);
    let cancel = Arc::new(AtomicBool::new(false));
    let mut apps: Vec<Box<dyn App>> = Vec::new();
    let mut flags = Vec::new();
    for (i, sock) in a.sockets.drain(..).enumerate() {
        let s = Sender::new(sock, (B, PORT + i as u16), 1 << 40, SEED + i as u64)
            .reconnect()
            .cancel_on(cancel.clone());
        flags.push(s.progress());
        apps.push(Box::new(s));
    }
    for ((i, sock), f) in b.sockets.drain(..).enumerate().zip(flags) {
        apps.push(Box::new(
            Receiver::new(sock, PORT + i as u16, Some(SEED + i as u64)).reconnect().until_done(f),
        ));
    }
    let cpus = vec![0, 1];
    let initial = ComponentKind::ALL.iter().enumerate().map(|(i, &k)| (k, cpus[i % 2])).collect();
    let host = CpuHost::start(HostConfig::new(cpus.clone()), a.blueprints.clone(), &initial).unwrap();
    let threads = Threads::start(b.blueprints.clone(), apps);
    let mut campaign = Campaign::new(Plan { crashes, seed: 42, gap: Duration::from_millis(1), cpus });
    let t0 = Instant::now();
    while !campaign.step(&host, &mut |k, to| host.place(k, to)).unwrap() {
        assert!(t0.elapsed() < LIMIT, "{} of {crashes} crashes in {LIMIT:?}", Campaign::fired(&host));
        assert!(!host.failed(), "a hosted component failed");
        std::thread::sleep(Duration::from_micros(50));
    }
    campaign.finish(&host).unwrap();
    cancel.store(true, Ordering::Release);
    assert!(threads.wait_apps(LIMIT), "the streams did not close");
    let mut all = a.blueprints.clone();
    all.extend(b.blueprints.iter().cloned());
    wait_rest(&all);
    let ha = host.stop();
    let run = threads.stop();
    let fired: u64 = ha.iter().map(|s| s.load.restarts).sum();
    assert_eq!(fired, ha.iter().map(|s| s.component().crash_switch().fired()).sum::<u64>());
    assert!(fired >= crashes);
    let ca: Vec<&dyn Component> = ha.iter().map(Supervised::component).collect();
    let cb: Vec<&dyn Component> = run.components.iter().map(Supervised::component).collect();
    let audit = Audit::of(&ca, &cb);
    assert_eq!((audit.lost(), audit.duplicated()), (0, 0), "{}", audit.describe());
    assert!(audit.frames() > 0);
    let (completed, reset) = check_connections(&run.apps);
    assert_resets_told(&a.tcp_facts, &run.apps[..streams]);
    let per: Vec<String> = ha.iter().map(|s| format!("{} {}", s.kind(), s.load.restarts)).collect();
    eprintln!(
        "{fired} crashes ({}), {} updates, {} moves, {} disarmed at the end; {} frames audited, 0 lost, 0 \
         duplicated, 0 buffers out; {completed} connections completed, {reset} reset",
        per.join(", "),
        campaign.updates.len(),
        campaign.moves.len(),
        campaign.disarmed,
        audit.frames()
    );
    for s in &ha {
        eprintln!("{}", restart_summary(s));
    }
    for k in ComponentKind::ALL {
        let n = ha.iter().find(|s| s.kind() == k).unwrap().load.restarts;
        assert!(n > 0, "{k} never crashed in {fired} crashes");
    }
}
