use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::affinity::allowed_cpus;

/// A sidecore config that gives the CPU away quickly: tests oversubscribe
/// this machine's cores.
fn test_cfg() -> SidecoreConfig {
    let cpu = allowed_cpus().unwrap().last().expect("some CPU is allowed");
    SidecoreConfig {
        server_policy: SpinPolicy { spin_iters: 2_000, yield_iters: 8, umwait: false },
        client_policy: SpinPolicy { spin_iters: 500, yield_iters: 4, umwait: false },
        call_timeout: Duration::from_secs(20),
        ..SidecoreConfig::on_cpu(cpu)
    }
}

#[test]
fn null_query_and_state_on_both_paths() {
    let _cpus = crate::testing::real_cpus();
    let sc = Sidecore::start(Arc::new(NullService), test_cfg()).unwrap();
    let mut c = sc.client().unwrap();
    assert_eq!(c.call(()), Ok(0));
    assert_eq!(c.trap(()), 0);
    assert!(sc.served() >= 1);

    let q = Sidecore::start(Arc::new(QueryService::new()), test_cfg()).unwrap();
    assert!(q.service().cached() > 0);
    let mut c = q.client().unwrap();
    // Leaf 0 (vendor, max leaf) is the same on every CPU.
    let leaf0 = CpuidLeaf { leaf: 0, subleaf: 0 };
    assert_eq!(c.call(leaf0).unwrap(), c.trap(leaf0));
    // Every cached answer is the one for its own leaf (vendor-independent
    // check: leaf 0's max-leaf field, and the extended range's max).
    assert_eq!(q.service().serve(&leaf0).eax, services::cpuid(leaf0).eax);
    let ext0 = CpuidLeaf { leaf: 0x8000_0000, subleaf: 0 };
    assert_eq!(q.service().serve(&ext0).eax, services::cpuid(ext0).eax);
    // A leaf outside the table is executed on the sidecore.
    let odd = CpuidLeaf { leaf: 0x4000_0100, subleaf: 9 };
    assert_eq!(c.call(odd).unwrap(), services::cpuid(odd));
}

#[test]
fn switching_off_takes_the_trap_path_with_the_same_client() {
    let _cpus = crate::testing::real_cpus();
    let sc = Sidecore::start(Arc::new(StateService::new(StateTrap::Mprotect).unwrap()), test_cfg()).unwrap();
    let mut c = sc.client().unwrap();
    let mut expect = RadixMap::new();
    for i in 0..600u64 {
        // Flip the switch every 100 updates; the client code never changes.
        sc.set_enabled((i / 100) % 2 == 0);
        let u = PteUpdate { vaddr: (i * 7919) << 12, pte: i << 12 | 0b11 ^ (i & 2) };
        let old = c.call(u).unwrap();
        assert_eq!(old, expect.set(u.vaddr, u.pte));
    }
    assert!(!sc.is_enabled());
    assert_eq!(sc.served(), 300, "half the updates went through the sidecore");
    assert_eq!(sc.service().snapshot(), expect, "the map equals in-order application");
}

#[test]
fn many_clients_update_disjoint_ranges_and_the_map_matches() {
    let _cpus = crate::testing::real_cpus();
    const CLIENTS: u64 = 6;
    const UPDATES: u64 = 500;
    let cfg = SidecoreConfig { max_clients: CLIENTS as usize, ..test_cfg() };
    let sc = Sidecore::start(Arc::new(StateService::new(StateTrap::Lock).unwrap()), cfg).unwrap();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let mut c = sc.client().unwrap();
            std::thread::spawn(move || {
                let mut batch = Vec::new();
                let mut out = Vec::new();
                for i in 0..UPDATES {
                    let u = PteUpdate { vaddr: (id << 39) | (i << 12), pte: (i + 1) << 12 | 1 };
                    if id % 2 == 0 {
                        c.call(u).unwrap();
                    } else {
                        batch.push(u);
                        if batch.len() == dyncore_ring::BATCH_MAX {
                            c.call_batch(&batch, &mut out).unwrap();
                            batch.clear();
                        }
                    }
                }
                c.call_batch(&batch, &mut out).unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut expect = RadixMap::new();
    for id in 0..CLIENTS {
        for i in 0..UPDATES {
            expect.set((id << 39) | (i << 12), (i + 1) << 12 | 1);
        }
    }
    let got = sc.service().snapshot();
    assert_eq!(got.present(), (CLIENTS * UPDATES) as usize);
    assert_eq!(got, expect);
}

#[test]
fn refuses_a_cpu_that_is_missing_or_not_allowed() {
    let _cpus = crate::testing::real_cpus();
    let cfg = SidecoreConfig { cpu: 4095, ..test_cfg() };
    let err = Sidecore::start(Arc::new(NullService), cfg).err().expect("CPU 4095 must be refused");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("CPU 4095") && err.to_string().contains("affinity"), "{err}");
}

#[test]
fn dropping_the_sidecore_fails_waiting_clients() {
    let _cpus = crate::testing::real_cpus();
    /// Blocks until told to go, so clients are waiting when the sidecore drops.
    struct Slow(std::sync::Mutex<()>);
    impl Service for Slow {
        type Request = ();
        type Reply = ();
        fn serve(&self, _: &()) {
            drop(self.0.lock().unwrap());
        }
        fn trap(&self, _: &()) {}
    }
    let gate = Arc::new(Slow(std::sync::Mutex::new(())));
    let held = gate.0.lock().unwrap();
    let sc = Sidecore::start(gate.clone(), SidecoreConfig { max_clients: 3, ..test_cfg() }).unwrap();
    let waiting: Vec<_> = (0..3)
        .map(|_| {
            let mut c = sc.client().unwrap();
            std::thread::spawn(move || c.call(()))
        })
        .collect();
    // Give the clients time to start waiting (a client that has not
    // called yet when the channel closes fails all the same).
    std::thread::sleep(Duration::from_millis(30));
    // Closed while the service is held: at most the call being served
    // then completes, whenever each thread runs.
    sc.close();
    drop(held);
    sc.stop();
    let results: Vec<_> = waiting.into_iter().map(|t| t.join().unwrap()).collect();
    // The one being served when the stop came may have got its reply;
    // every other waiting client fails with the reason, none hangs.
    let stopped = results.iter().filter(|r| matches!(r, Err(SidecallError::Stopped { .. }))).count();
    assert!(stopped >= 2, "{results:?}");
    assert!(
        results.iter().all(|r| r.is_ok() || matches!(r, Err(SidecallError::Stopped { .. }))),
        "{results:?}"
    );
    let msg = SidecallError::Stopped { cpu: 1 }.to_string();
    assert!(msg.contains("stopped"), "{msg}");
}

#[test]
fn a_stuck_sidecore_times_out_instead_of_hanging() {
    let _cpus = crate::testing::real_cpus();
    struct Stuck(std::sync::Mutex<()>);
    impl Service for Stuck {
        type Request = u8;
        type Reply = u8;
        fn serve(&self, r: &u8) -> u8 {
            drop(self.0.lock().unwrap());
            *r
        }
        fn trap(&self, r: &u8) -> u8 {
            *r
        }
    }
    let svc = Arc::new(Stuck(std::sync::Mutex::new(())));
    let held = svc.0.lock().unwrap();
    let cfg = SidecoreConfig { call_timeout: Duration::from_millis(30), ..test_cfg() };
    let sc = Sidecore::start(svc.clone(), cfg).unwrap();
    let mut c = sc.client().unwrap();
    let err = c.call(1).unwrap_err();
    assert!(matches!(err, SidecallError::TimedOut { .. }), "{err}");
    assert!(err.to_string().contains("within"), "{err}");
    assert!(matches!(c.call(2), Err(SidecallError::Busy { .. })));
    // Off: the trap path works even while the sidecore is stuck.
    sc.set_enabled(false);
    assert_eq!(c.call(3), Ok(3));
    drop(held);
}

#[test]
fn interrupt_virtualisation_delivers_every_packet() {
    let _cpus = crate::testing::real_cpus();
    let cpu = allowed_cpus().unwrap().last();
    for mode in [IrqMode::SharedRegister, IrqMode::SharedRegisterPolled, IrqMode::Sidecore] {
        for guests in [3, 12] {
            let r = irq::run(&irq::IrqConfig {
                guests,
                packets: 120,
                interval: Duration::from_micros(50),
                mode,
                service_cpu: cpu,
                seed: 7,
            })
            .unwrap();
            assert_eq!(r.latencies_ns.len(), 120, "{mode:?} {guests}");
            assert!(r.signals >= 1);
            if mode == IrqMode::Sidecore || guests <= 8 {
                // Unique signalling: a signal goes only to a guest with a packet
                // (except when it already drained it, woken by an earlier one).
                assert!(r.redundant_signals <= r.signals / 2, "{mode:?} {guests}: {r:?}");
            }
        }
    }
}

#[test]
fn a_panicking_service_fails_clients_instead_of_hanging() {
    let _cpus = crate::testing::real_cpus();
    struct Panics;
    impl Service for Panics {
        type Request = ();
        type Reply = ();
        fn serve(&self, _: &()) {
            panic!("service bug (expected by this test)");
        }
        fn trap(&self, _: &()) {}
    }
    let sc = Sidecore::start(Arc::new(Panics), test_cfg()).unwrap();
    let mut c = sc.client().unwrap();
    // The sidecore thread dies serving this; its exit closes the channel.
    assert!(matches!(c.call(()), Err(SidecallError::Stopped { .. })));
    assert!(matches!(c.call(()), Err(SidecallError::Stopped { .. })));
}
