use super::*;
use crate::speed::SpeedClass;

const MS: Nanos = 1_000_000;

fn config(chameleon: bool, max_fuse: usize) -> Config {
    Config {
        min_granularity_ns: 16 * MS,
        chameleon,
        notify_on_exit: true,
        max_fuse,
        speed: SpeedModel::DYNAMIC,
        reconfig_mode: Mode::Bolt,
    }
}

fn sched(nodes: usize, per_node: usize, max_fuse: usize) -> ClusterScheduler {
    ClusterScheduler::new(Topology::uniform(nodes, per_node), config(true, max_fuse))
}

/// Spawns a thread through the policy boundary; returns its id.
fn spawn(s: &mut ClusterScheduler, now: Nanos, spec: ThreadSpec, out: &mut Vec<Action>) -> ThreadId {
    let thread = s.threads.len();
    s.handle(now, &Event::Spawn { thread, spec }, out);
    thread
}

/// Answers every `Offline`/`Online` in `out` with `ReconfigDone` at `now`.
fn finish_reconfigs(s: &mut ClusterScheduler, now: Nanos, out: &[Action]) {
    for a in out {
        if let Action::Offline { id, .. } | Action::Online { id, .. } = a {
            s.handle(now, &Event::ReconfigDone { id: *id, took_ns: 0 }, &mut Vec::new());
        }
    }
}

fn native(nice: i32) -> ThreadSpec {
    ThreadSpec { nice, tax: 1.0, want_cpus: 1, weight: 0.0, affinity: None, class: SpeedClass::High }
}

fn pinned(cpu: CpuId) -> ThreadSpec {
    ThreadSpec { affinity: Some(CpuSet::single(cpu)), ..native(0) }
}

fn wants(cpus: usize, tax: f64) -> ThreadSpec {
    ThreadSpec { nice: 0, tax, want_cpus: cpus, weight: 2.0, affinity: None, class: SpeedClass::High }
}

/// Ticks every CPU at `t`.
fn tick_all(s: &mut ClusterScheduler, t: Nanos, out: &mut Vec<Action>) {
    for c in 0..s.topology().ncpus() {
        s.tick(t, c, out);
    }
}

fn running(s: &ClusterScheduler, cpu: CpuId) -> Option<ThreadId> {
    match s.cpu_state(cpu) {
        CpuState::Running { thread, .. } => Some(thread),
        _ => None,
    }
}

#[test]
fn cfs_runs_the_leftmost_and_honours_min_granularity() {
    // One CPU, two nice-0 threads woken at 0. A runs first; B is behind
    // after 4 ms but A keeps the CPU until it has run 16 ms.
    let mut s = sched(1, 1, 1);
    let mut out = Vec::new();
    let a = spawn(&mut s, 0, native(0), &mut out);
    let b = spawn(&mut s, 0, native(0), &mut out);
    assert_eq!(running(&s, 0), Some(a));
    for t in [4, 8, 12] {
        s.tick(t * MS, 0, &mut out);
        assert_eq!(running(&s, 0), Some(a), "at {t} ms");
    }
    s.tick(16 * MS, 0, &mut out);
    assert_eq!(running(&s, 0), Some(b));
    // A ran 16 ms at weight 1024: vruntime 16 ms.
    assert_eq!(s.vruntime(a), 16 * MS);
    s.check().unwrap();
}

#[test]
fn nice_levels_scale_virtual_runtime() {
    // nice 5 has load weight 335: 10 ms of CPU = 10 * 1024 / 335 = 30.567 ms of vruntime.
    let mut s = sched(1, 2, 1);
    let mut out = Vec::new();
    let a = spawn(&mut s, 0, native(0), &mut out);
    let b = spawn(&mut s, 0, native(5), &mut out);
    tick_all(&mut s, 10 * MS, &mut out);
    assert_eq!(s.vruntime(a), 10 * MS);
    assert_eq!(s.vruntime(b), 10 * MS * 1024 / 335);
}

#[test]
fn an_object_borrows_an_idle_neighbour_at_once() {
    let mut s = sched(1, 2, 2);
    let mut out = Vec::new();
    let a = spawn(&mut s, 0, wants(2, 1.0), &mut out);
    assert!(
        out.contains(&Action::Fuse { thread: a, object: ExecObject::new(&"0-1".parse().unwrap()) }),
        "{out:?}"
    );
    assert_eq!(s.cpu_state(0), CpuState::Running { thread: a, object_cpus: 2 });
    assert_eq!(s.cpu_state(1), CpuState::Borrowed { by: a });
    s.check().unwrap();
}

#[test]
fn borrowing_needs_a_lower_vruntime_on_all_cpus_else_a_smaller_object() {
    // 4 CPUs. Natives pinned on 1 and 2 from t=0; A wants 0-3 (its
    // vruntimes[] = min_vruntime = 0 everywhere). CPU 3 gets a native at
    // 20 ms (vruntime 0, just dispatched). Tax 0.01. At 20 ms, CPUs 1 and 2 run
    // natives with vruntime 20 ms > 0 that have had 16 ms: borrowable; CPU 3's
    // native has not had its minimum granularity: not. The quad fails;
    // the pair 0-1 is formed.
    let mut s = sched(1, 4, 4);
    let mut out = Vec::new();
    spawn(&mut s, 0, pinned(1), &mut out);
    spawn(&mut s, 0, pinned(2), &mut out);
    let a = spawn(&mut s, 0, wants(4, 0.01), &mut out);
    // CPU 3 was idle at 0: the quad needs 1 and 2, which just started.
    assert_eq!(s.cpu_state(0), CpuState::Running { thread: a, object_cpus: 1 });
    spawn(&mut s, 20 * MS, pinned(3), &mut out);
    out.clear();
    tick_all(&mut s, 20 * MS, &mut out);
    assert!(
        out.contains(&Action::Fuse { thread: a, object: ExecObject::new(&"0-1".parse().unwrap()) }),
        "{out:?}"
    );
    assert_eq!(s.fused_of(a).to_string(), "1");
    // At 40 ms CPU 3's native has run 20 ms (vruntime 20 ms > 0), and A
    // was charged only 20 ms x 0.01 = 0.2 ms on CPU 1: the object grows
    // to the quad (split the pair, fuse the quad). With tax 1 it would
    // have been charged 20 ms and lost CPU 1's race instead.
    out.clear();
    tick_all(&mut s, 40 * MS, &mut out);
    assert!(
        out.contains(&Action::Fuse { thread: a, object: ExecObject::new(&"0-3".parse().unwrap()) }),
        "{out:?}"
    );
    s.check().unwrap();
}

#[test]
fn taxation_charges_borrowed_time_times_the_rate() {
    // Tax 0.5, fused on an idle neighbour for 12 ms: vruntime +12 ms on
    // the representative, vruntimes[1] +6 ms.
    let mut s = sched(1, 2, 2);
    let mut out = Vec::new();
    let a = spawn(&mut s, 0, wants(2, 0.5), &mut out);
    s.tick(12 * MS, 0, &mut out);
    assert_eq!(s.vruntime(a), 12 * MS);
    assert_eq!(s.threads[a].vr_on(1), 6 * MS);
}

#[test]
fn a_fused_object_yields_after_min_granularity_when_a_native_is_behind() {
    // Tax 100: after A borrows CPU 1 its vruntimes[1] races ahead, so
    // B (queued on CPU 1) is behind at once — but A keeps the object
    // for the 16 ms minimum granularity, then splits.
    let mut s = sched(1, 2, 2);
    let mut out = Vec::new();
    let a = spawn(&mut s, 0, wants(2, 100.0), &mut out);
    assert_eq!(s.fused_of(a).len(), 1);
    finish_reconfigs(&mut s, 0, &out);
    let b = spawn(&mut s, MS, pinned(1), &mut out);
    for t in [4, 8, 12] {
        s.tick(t * MS, 0, &mut out);
        assert_eq!(s.fused_of(a).len(), 1, "at {t} ms");
    }
    out.clear();
    s.tick(16 * MS, 0, &mut out);
    assert!(out.iter().any(|x| matches!(x, Action::Split { thread, .. } if *thread == a)), "{out:?}");
    assert_eq!(running(&s, 1), Some(b));
    s.check().unwrap();
}

#[test]
fn min_granularity_of_a_fused_object_counts_from_the_end_of_the_fuse() {
    // Same as above, but the backend takes 150 ms to take CPU 1 offline
    // (hotplug, fuse 2): A is not split before the `ReconfigDone` at 150 ms
    // plus 16 ms, although B is behind at once.
    let mut s = sched(1, 2, 2);
    let mut out = Vec::new();
    let a = spawn(&mut s, 0, wants(2, 100.0), &mut out);
    let fuse = out.clone();
    spawn(&mut s, MS, pinned(1), &mut out);
    for t in [16, 100, 148] {
        s.tick(t * MS, 0, &mut out);
        assert_eq!(s.fused_of(a).len(), 1, "at {t} ms");
    }
    finish_reconfigs(&mut s, 150 * MS, &fuse);
    s.tick(164 * MS, 0, &mut out);
    assert_eq!(s.fused_of(a).len(), 1, "at 164 ms");
    out.clear();
    s.tick(168 * MS, 0, &mut out);
    assert!(out.iter().any(|x| matches!(x, Action::Split { thread, .. } if *thread == a)), "{out:?}");
    s.check().unwrap();
}

#[test]
fn a_stale_borrower_keeps_only_a_bounded_credit() {
    // Tax 1. B runs on CPU 1 for a second; A's recorded vruntimes[1] is
    // still 0 (it has not tried to borrow since). When A starts to borrow
    // it is placed as CFS places a waking task: 40 ms (half of 5 x 16 ms)
    // behind CPU 1's min_vruntime, not a second behind. So B, queued with
    // vruntime ~1 s, is behind A's vruntimes[1] again after ~40 ms of
    // borrowing, and takes its CPU back at the first tick after A's
    // minimum granularity passes that. Without the placement A would hold
    // CPU 1 for a whole second.
    let mut s = sched(1, 2, 2);
    let mut out = Vec::new();
    let b = spawn(&mut s, 0, pinned(1), &mut out);
    let a = spawn(&mut s, 0, wants(2, 1.0), &mut out);
    // Only CPU 1 ticks: A, running natively on CPU 0, never tries to
    // borrow, and its vruntimes[1] stays at 0.
    for t in (4..=1000).step_by(4) {
        s.tick(t * MS, 1, &mut out);
    }
    assert_eq!(s.threads[a].vr_on(1), 0);
    assert_eq!(running(&s, 1), Some(b));
    out.clear();
    s.tick(1004 * MS, 0, &mut out);
    assert_eq!(s.fused_of(a).len(), 1, "A borrows CPU 1");
    let placed = s.threads[a].vr_on(1);
    let min = s.rqs[1].min_vruntime;
    assert_eq!(placed, min - 40 * MS, "placed 40 ms behind CPU 1's min_vruntime");
    finish_reconfigs(&mut s, 1004 * MS, &out);
    let mut split_at = None;
    for t in (1008..=2100).step_by(4) {
        out.clear();
        s.tick(t * MS, 0, &mut out);
        finish_reconfigs(&mut s, t * MS, &out);
        if s.fused_of(a).is_empty() {
            split_at = Some(t);
            break;
        }
    }
    let held = split_at.expect("A gives CPU 1 back") - 1004;
    assert!((40..=48).contains(&held), "A held CPU 1 for {held} ms");
    s.check().unwrap();
}

#[test]
fn fuse_sets_the_speed_and_takes_the_borrowed_cpus_offline_before_they_change_state() {
    // A high-class thread fuses 0-1: Fuse, Offline {1}, then CPU 0 at the
    // fused pair's duty (75%) before it runs on the pair, CPU 1 borrowed.
    let mut s = sched(1, 2, 2);
    let mut out = Vec::new();
    let a = spawn(&mut s, 0, wants(2, 1.0), &mut out);
    let pair = ExecObject::new(&"0-1".parse().unwrap());
    let duty = Duty::new(750).unwrap();
    let id = match out.iter().find(|x| matches!(x, Action::Offline { .. })) {
        Some(Action::Offline { id, .. }) => *id,
        _ => panic!("no offline: {out:?}"),
    };
    let tail = [
        Action::Fuse { thread: a, object: pair.clone() },
        Action::Offline { id, cpus: CpuSet::single(1), mode: Mode::Bolt },
        Action::SetSpeed { cpu: 0, duty },
        Action::Dispatch { cpu: 0, state: CpuState::Running { thread: a, object_cpus: 2 } },
        Action::Dispatch { cpu: 1, state: CpuState::Borrowed { by: a } },
    ];
    assert!(out.ends_with(&tail), "{out:?}");
    // Exit: Split, Online {1}; CPU 0 idle needs no speed.
    out.clear();
    s.handle(5 * MS, &Event::Exit { thread: a }, &mut out);
    assert!(matches!(&out[1], Action::Online { cpus, .. } if *cpus == CpuSet::single(1)), "{out:?}");
    assert_eq!(out[0], Action::Split { thread: a, object: pair });
    s.check().unwrap();
}

#[test]
fn linux_mode_never_fuses() {
    let mut s = ClusterScheduler::new(Topology::uniform(1, 4), config(false, 4));
    let mut out = Vec::new();
    let a = spawn(&mut s, 0, wants(4, 0.01), &mut out);
    tick_all(&mut s, 100 * MS, &mut out);
    assert!(!out.iter().any(|x| matches!(x, Action::Fuse { .. })));
    assert!(s.object_of(a).is_none());
}

#[test]
fn exit_returns_borrowed_cpus_and_wakes_their_threads() {
    let mut s = sched(1, 2, 2);
    let mut out = Vec::new();
    let a = spawn(&mut s, 0, wants(2, 0.01), &mut out);
    let b = spawn(&mut s, MS, pinned(1), &mut out);
    assert_eq!(s.cpu_state(1), CpuState::Borrowed { by: a });
    out.clear();
    s.exit(5 * MS, a, &mut out);
    assert!(out.iter().any(|x| matches!(x, Action::Split { .. })));
    assert_eq!(running(&s, 1), Some(b));
    assert_eq!(s.cpu_state(0), CpuState::Idle);
    s.check().unwrap();
}

#[test]
fn a_blocked_thread_gives_its_cpu_to_the_next_and_is_queued_again_when_it_wakes() {
    // One CPU, A runs, B waits. A blocks at 5 ms: B runs at once (no
    // minimum granularity for a thread that left). A wakes at 61 ms
    // and is queued, not run: B has not had its granularity since.
    let mut s = sched(1, 1, 1);
    let mut out = Vec::new();
    let a = spawn(&mut s, 0, native(0), &mut out);
    let b = spawn(&mut s, 0, native(0), &mut out);
    assert_eq!(running(&s, 0), Some(a));
    out.clear();
    s.handle(5 * MS, &Event::Block { thread: a }, &mut out);
    assert_eq!(
        out,
        vec![Action::Dispatch { cpu: 0, state: CpuState::Running { thread: b, object_cpus: 1 } }]
    );
    assert_eq!(s.vruntime(a), 5 * MS, "its virtual runtime is kept");
    s.check().unwrap();
    // Blocked, it is never picked, however long B runs.
    for t in [24, 40, 60] {
        s.tick(t * MS, 0, &mut out);
        assert_eq!(running(&s, 0), Some(b), "at {t} ms");
    }
    out.clear();
    s.handle(61 * MS, &Event::Wake { thread: a }, &mut out);
    assert!(out.is_empty(), "queued behind the running thread: {out:?}");
    // Woken at the queue's minimum (B's 55 ms, as of the tick at 60 ms:
    // it started at 5 ms from 0), not at its old 5 ms: a sleeper does not
    // take the CPU for the time it slept.
    assert_eq!(s.vruntime(b), 55 * MS);
    assert_eq!(s.vruntime(a), 55 * MS);
    s.check().unwrap();
    // A block or a wake that does not apply changes nothing.
    s.handle(62 * MS, &Event::Wake { thread: b }, &mut out);
    assert!(out.is_empty(), "{out:?}");
    s.handle(70 * MS, &Event::Block { thread: a }, &mut out);
    s.handle(71 * MS, &Event::Exit { thread: a }, &mut out);
    s.check().unwrap();
}

#[test]
fn a_fused_thread_that_blocks_splits_and_fuses_again_when_it_wakes() {
    // Its object goes back to the node manager while it sleeps, and it
    // gets one again when it wakes.
    let mut s = sched(1, 2, 2);
    let mut out = Vec::new();
    let a = spawn(&mut s, 0, wants(2, 1.0), &mut out);
    finish_reconfigs(&mut s, 0, &out);
    assert_eq!(s.fused_of(a).len(), 1);
    out.clear();
    s.handle(5 * MS, &Event::Block { thread: a }, &mut out);
    assert!(out.iter().any(|x| matches!(x, Action::Split { thread, .. } if *thread == a)), "{out:?}");
    assert!(out.iter().any(|x| matches!(x, Action::Online { .. })), "{out:?}");
    assert_eq!((s.cpu_state(0), s.cpu_state(1)), (CpuState::Idle, CpuState::Idle));
    assert!(s.object_of(a).is_none(), "it gives its object back while asleep");
    s.check().unwrap();
    finish_reconfigs(&mut s, 5 * MS, &out);
    out.clear();
    s.handle(9 * MS, &Event::Wake { thread: a }, &mut out);
    assert!(out.iter().any(|x| matches!(x, Action::Fuse { thread, .. } if *thread == a)), "{out:?}");
    assert_eq!(s.cpu_state(0), CpuState::Running { thread: a, object_cpus: 2 });
    s.check().unwrap();
}

#[test]
fn a_queued_thread_that_blocks_leaves_its_queue() {
    let mut s = sched(1, 1, 1);
    let mut out = Vec::new();
    let a = spawn(&mut s, 0, native(0), &mut out);
    let b = spawn(&mut s, 0, native(0), &mut out);
    out.clear();
    s.handle(MS, &Event::Block { thread: b }, &mut out);
    assert!(out.is_empty(), "{out:?}");
    s.handle(2 * MS, &Event::Exit { thread: a }, &mut out);
    assert_eq!(s.cpu_state(0), CpuState::Idle, "the blocked thread is not run");
    s.handle(3 * MS, &Event::Wake { thread: b }, &mut out);
    assert_eq!(running(&s, 0), Some(b));
    s.check().unwrap();
}
