//! The record from hand-written traffic: what parking a CPU shows.

use dyncore_core::policy::{Action, CpuState, Event, ReconfigId, ThreadSpec};
use dyncore_core::reconfig::Mode;
use dyncore_core::speed::{Duty, SpeedClass};
use dyncore_core::{CpuSet, Nanos};

use super::RunRecorder;

const MS: Nanos = 1_000_000;

fn spawn(thread: usize) -> Event {
    let spec =
        ThreadSpec { nice: 0, tax: 1.0, want_cpus: 1, weight: 1.0, affinity: None, class: SpeedClass::Low };
    Event::Spawn { thread, spec }
}

fn run(cpu: usize, thread: usize) -> [Action; 2] {
    [
        Action::SetSpeed { cpu, duty: Duty::BASELINE },
        Action::Dispatch { cpu, state: CpuState::Running { thread, object_cpus: 1 } },
    ]
}

#[test]
fn a_parked_cpu_is_offline_between_its_offline_and_its_wake_up_which_costs_its_latency() {
    let mut r = RunRecorder::new(2);
    let (off, on) = (ReconfigId(1), ReconfigId(2));
    r.observe(0, &spawn(0), &run(0, 0));
    // CPU 1 is parked at 1 ms; the offline's critical path ends at 1.1 ms.
    r.observe(
        MS,
        &Event::Tick { cpu: 1 },
        &[Action::Offline { id: off, cpus: CpuSet::single(1), mode: Mode::Bolt }],
    );
    r.observe(MS + MS / 10, &Event::ReconfigDone { id: off, took_ns: MS / 10 }, &[]);
    // A second thread at 5 ms wakes CPU 1 and is dispatched there at once;
    // the online ends at 5.2 ms.
    let mut acts = vec![Action::Online { id: on, cpus: CpuSet::single(1), mode: Mode::Bolt }];
    acts.extend(run(1, 1));
    r.observe(5 * MS, &spawn(1), &acts);
    r.observe(5 * MS + MS / 5, &Event::ReconfigDone { id: on, took_ns: MS / 5 }, &[]);
    r.observe(10 * MS, &Event::Exit { thread: 1 }, &[Action::Dispatch { cpu: 1, state: CpuState::Idle }]);
    let rec = r.finish(10 * MS, &[], |_| false);
    let e = &rec.energy;
    assert_eq!((e.parks, e.parked_cpus, e.wakeups), (1, 1, 1));
    assert_eq!((e.wakeup_ns, e.wakeup_max_ns), (MS / 5, MS / 5));
    // Offline from the end of the offline (1.1 ms) to the wake-up's request (5 ms).
    assert_eq!(rec.per_cpu[1].offline_ns, 5 * MS - (MS + MS / 10));
    assert_eq!(e.offline_ns, rec.per_cpu[1].offline_ns);
    // Thread 1 waited for the online: 0.2 ms stalled.
    assert_eq!(e.stalled_ns, MS / 5);
    // CPU 1: idle 1 ms (2.265 W), reconfiguring 0.1 + 0.2 ms and running
    // 4.8 ms (11.1325 W: busy at the baseline), offline 3.9 ms (0 W).
    let busy = 2.265 + 0.5 * 17.735;
    let cpu1 = 2.265 * 0.001 + busy * (0.0003 + 0.0048);
    assert!((rec.per_cpu[1].energy_j - cpu1).abs() < 1e-5, "{} vs {cpu1}", rec.per_cpu[1].energy_j);
    // CPU 0 ran for the whole 10 ms; the mean power is the total over 10 ms.
    assert!((e.joules - (busy * 0.010 + cpu1)).abs() < 2e-5, "{}", e.joules);
    assert!((e.mean_w - e.joules / 0.010).abs() < 1e-3);
    assert!(e.model.contains("modelled"));
}

#[test]
fn a_fuse_is_not_parking() {
    use dyncore_core::exec::ExecObject;
    let mut r = RunRecorder::new(2);
    let pair = ExecObject::new(&"0-1".parse().unwrap());
    let acts = [
        Action::Fuse { thread: 0, object: pair.clone() },
        Action::Offline { id: ReconfigId(1), cpus: CpuSet::single(1), mode: Mode::Bolt },
        Action::SetSpeed { cpu: 0, duty: Duty::new(750).unwrap() },
        Action::Dispatch { cpu: 0, state: CpuState::Running { thread: 0, object_cpus: 2 } },
        Action::Dispatch { cpu: 1, state: CpuState::Borrowed { by: 0 } },
    ];
    r.observe(0, &spawn(0), &acts);
    r.observe(MS, &Event::ReconfigDone { id: ReconfigId(1), took_ns: MS }, &[]);
    let rec = r.finish(4 * MS, &[], |_| false);
    assert_eq!((rec.energy.parks, rec.energy.wakeups, rec.energy.offline_ns), (0, 0, 0));
    // The representative's thread waited for the fuse: 1 ms stalled.
    assert_eq!(rec.energy.stalled_ns, MS);
    assert_eq!(rec.reconfig.fuses, 1);
}
