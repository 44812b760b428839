//! The arbiter on the real machine: a thread runs only where the policy
//! dispatched it and not at all while held; a 50% duty delivers half a
//! CPU; a fuse empties and freezes the borrowed CPU and gives the
//! representative the fused duty, and a split gives the CPU back. Checked
//! from the kernel's own records (`/proc/<pid>/task/<tid>/stat`'s last CPU,
//! `schedstat`'s CPU time, `cpu.stat`), never from wall-clock time.

mod arbiter_common;

use std::path::PathBuf;
use std::time::Duration;

use arbiter_common::*;
use dyncore_core::policy::contract::{Checker, check_replay};
use dyncore_core::policy::trace::{parse_events, replay};
use dyncore_core::speed::SpeedModel;
use dyncore_core::topology::Topology;
use dyncore_runtime::arbiter::{Arbiter, Ending, Loc, Tid, Want, cpu_time_ns, last_cpu_and_state};

/// Samples, while the arbiter is paused (so the placement cannot change),
/// every live thread twice `gap` apart. Returns (running checks, held
/// checks) made; panics on a thread that ran where it was not placed or
/// ran while held.
fn check_placements<P: dyncore_core::policy::Policy + ?Sized>(
    a: &Arbiter<P>,
    gap: Duration,
    frozen: bool,
) -> (u32, u32) {
    // A held thread is checked only if its freezer group had finished
    // freezing before its CPU time was read.
    let before: Vec<_> = a
        .placements()
        .into_iter()
        .filter_map(|p| {
            let in_frozen_group = group_frozen(p.pid, p.tid);
            Some((p.clone(), cpu_time_ns(p.tid)?, in_frozen_group))
        })
        .collect();
    std::thread::sleep(gap);
    let (mut running, mut held) = (0, 0);
    for (p, t0, in_frozen_group) in before {
        let (Some(t1), Some((last, _))) = (cpu_time_ns(p.tid), last_cpu_and_state(p.pid, p.tid)) else {
            continue; // exited meanwhile
        };
        match p.loc {
            Some(Loc::Cpu(_)) if t1 > t0 => {
                assert_eq!(
                    Some(last),
                    p.real_cpu,
                    "thread {} (tid {}) ran on CPU {last}: {p:?}",
                    p.thread,
                    p.tid
                );
                running += 1;
            }
            // In a group that has finished freezing, every task is in the
            // refrigerator (since Linux 6.1 in TASK_FROZEN, which no
            // signal or futex wakes). A task of a group still FREEZING may
            // be on its way in, using a few µs more: a thread merely seen
            // in `D` state was not enough (a soak at `ddd1bc3` saw one gain
            // 50 µs).
            Some(Loc::Held) if frozen && in_frozen_group => {
                assert_eq!(t1, t0, "held thread {} (tid {}) ran for {} ns: {p:?}", p.thread, p.tid, t1 - t0);
                held += 1;
            }
            _ => {}
        }
    }
    (running, held)
}

/// Whether thread `tid`'s freezer group has finished freezing: cgroup v1
/// `freezer.state` reads `FROZEN` (every task in it is frozen), or v2
/// `cgroup.events` says `frozen 1`. `false` when it cannot tell.
fn group_frozen(pid: Tid, tid: Tid) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/cgroup")) else { return false };
    let read = |p: String| std::fs::read_to_string(p).unwrap_or_default();
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else { continue };
        if controllers.split(',').any(|c| c == "freezer") {
            let Some(root) =
                mount_of(|fstype, opts| fstype == "cgroup" && opts.split(',').any(|o| o == "freezer"))
            else {
                return false;
            };
            return read(format!("{root}{path}/freezer.state")).trim() == "FROZEN";
        }
        if controllers.is_empty()
            && let Some(root) = mount_of(|fstype, _| fstype == "cgroup2")
            && read(format!("{root}{path}/cgroup.events")).lines().any(|l| l == "frozen 1")
        {
            return true;
        }
    }
    false
}

/// Where the first filesystem that `is` accepts (by type and super
/// options) is mounted, from `/proc/self/mountinfo`.
fn mount_of(is: impl Fn(&str, &str) -> bool) -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        let mut f = fs.split_whitespace();
        let (fstype, _source, opts) = (f.next()?, f.next()?, f.next()?);
        is(fstype, opts).then(|| mount.split_whitespace().nth(4).map(str::to_string))?
    })
}

fn placement_run(want: Want) {
    let Some(cpus) = cpus(2) else { return };
    let mut a = Arbiter::new(Box::new(scheduler(2, false)), config("placement", cpus, want)).unwrap();
    eprintln!("mechanism: {} {:?}", a.flavor(), a.notes());
    // Three CPU-bound workers and their waiting main thread, on 2 CPUs:
    // the policy time-shares them, so threads move and are held.
    a.start(&argv(&["work", "100000000", "3"]), spec(1)).unwrap();
    // Until its threads are there: in a TCG guest the program takes a
    // second or more of CPU to start them (not counted as rounds).
    for _ in 0..1500 {
        if a.placements().len() >= 4 {
            break;
        }
        run_for(&mut a, 40);
    }
    assert!(a.placements().len() >= 4, "the threads did not start in 60 s: {:?}", a.placements());
    let frozen = want != Want::Affinity;
    let (mut running, mut held) = (0, 0);
    for _ in 0..30 {
        run_for(&mut a, 40);
        let (r, h) = check_placements(&a, Duration::from_millis(10), frozen);
        running += r;
        held += h;
        a.check().expect("the kernel's records match the policy");
    }
    let run = a.finish(Ending::Kill);
    eprintln!(
        "checked {running} running and {held} held samples; {} moves, freeze p50 {} ns, {} late",
        run.log.actuation.move_ns.len(),
        dyncore_runtime::arbiter::quantile(&run.log.actuation.freeze_ns, 0.5),
        run.log.actuation.freeze_late
    );
    assert!(running > 0, "no dispatched thread was seen running in 30 rounds");
    if frozen {
        assert!(held > 0, "no held thread was checked in 30 rounds");
    }
    assert!(run.log.threads.len() >= 4, "{:?}", run.log.threads);
    assert!(!run.log.actuation.move_ns.is_empty());
    // The execution checker agrees, in both mechanisms (held threads are
    // checked not to run only where they are frozen).
    let e = run.execution.as_ref().expect("every run is checked");
    assert!(e.ok(), "{}", e.summary());
    assert_eq!(e.held_frozen, frozen, "{}", e.summary());
}

#[test]
fn a_thread_runs_only_where_dispatched_and_not_while_held() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    if cgroups_usable() {
        placement_run(Want::Auto);
    }
}

#[test]
fn with_affinity_only_a_dispatched_thread_runs_only_on_its_cpu() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    placement_run(Want::Affinity);
}

/// `cpu.stat`'s (periods, throttled periods) of a group.
fn cpu_stat(dirs: &[PathBuf]) -> (u64, u64) {
    let dir = dirs.iter().find(|d| d.join("cpu.stat").exists()).expect("a cpu hierarchy");
    let text = std::fs::read_to_string(dir.join("cpu.stat")).unwrap();
    let field = |k: &str| {
        text.lines().find_map(|l| l.strip_prefix(k)).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
    };
    (field("nr_periods "), field("nr_throttled "))
}

#[test]
fn a_50_percent_duty_delivers_half_a_cpu() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    if !cgroups_usable() {
        return;
    }
    let Some(cpus) = cpus(1) else { return };
    // The Linux-like mode at the baseline: one thread, on CPU 0, at 50%;
    // the run outweighs the machine's other processes, so that what it
    // gets is what its quota gives (where nothing real-time competes).
    let mut cfg = config("throttle", cpus, Want::Auto);
    cfg.weight = Some(262_144);
    let mut a = Arbiter::new(Box::new(scheduler(1, false)), cfg).unwrap();
    a.start(&argv(&["spin"]), spec(1)).unwrap();
    run_for(&mut a, 200);
    let p = a.placements();
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].loc, Some(Loc::Cpu(0)));
    let (dirs, _) = a.group_dirs(0);
    let quota = dyncore_runtime::arbiter::bandwidth(
        dyncore_core::speed::Duty::BASELINE,
        dyncore_runtime::arbiter::PERIOD_US,
    );
    let (quota_ns, period_ns) = (quota.1.unwrap() * 1000, quota.0 * 1000);
    // The window: the arbiter keeps running (ticks) while it is measured.
    let (per0, thr0, cpu0, at0) = {
        let (a0, b0) = cpu_stat(&dirs);
        (a0, b0, cpu_time_ns(p[0].tid).unwrap(), a.now_ns())
    };
    run_for(&mut a, 1_000);
    let (per1, thr1) = cpu_stat(&dirs);
    let (cpu1, at1) = (cpu_time_ns(p[0].tid).unwrap(), a.now_ns());
    let run = a.finish(Ending::Kill);
    let (periods, throttled, cpu, window) = (per1 - per0, thr1 - thr0, cpu1 - cpu0, at1 - at0);
    let share = cpu as f64 / window as f64;
    eprintln!(
        "controller: {:.3}% of a CPU ({} tick rounds, {} passes, {} process events in {} wakeups)",
        run.log.controller_cpu_ns as f64 / run.end_ns as f64 * 100.0,
        run.log.ticks.rounds,
        run.log.polls,
        run.log.proc_events,
        run.log.event_wakeups
    );
    eprintln!(
        "50% duty: {:.1} ms of CPU in {:.1} ms = {:.3}; {throttled} of {periods} periods throttled; {}",
        cpu as f64 / 1e6,
        window as f64 / 1e6,
        share,
        run.mechanism
    );
    // Guaranteed by the kernel: at most the quota per period (one period's
    // quota of slack at each edge of the window).
    assert!(cpu <= periods * quota_ns + 2 * quota_ns, "{cpu} ns in {periods} periods of {quota_ns} ns");
    // ... and the whole quota in every period it was throttled in; except
    // in a TCG guest, whose period timer fires late: the kernel then counts
    // every period it overran as throttled, but refills the quota once (a
    // guest saw 426.6 ms in 51 throttled periods of 10 ms).
    if tcg_guest() {
        eprintln!(
            "TCG guest: its late period timer makes the quota's delivery no measure; only the cap is checked"
        );
        return;
    }
    assert!(cpu + 2 * quota_ns >= throttled * quota_ns, "{cpu} ns, {throttled} periods throttled");
    // The stated tolerance: when the thread was held back by the quota in
    // nearly every period (nothing else took the CPU from it), it got 50%
    // ± 5 points of the CPU.
    if throttled * 10 >= periods * 9 && periods * period_ns >= window / 2 {
        assert!((share - 0.5).abs() <= 0.05, "share {share:.3}");
    } else {
        eprintln!("the CPU was busy with other work: only the bounds are checked");
    }
}

#[test]
fn a_fuse_empties_and_freezes_the_borrowed_cpu_and_a_split_gives_it_back() {
    let _cpus = dyncore_runtime::testing::real_cpus();
    if !cgroups_usable() {
        return;
    }
    let Some(cpus) = cpus(2) else { return };
    let mut a = Arbiter::new(Box::new(scheduler(2, true)), config("fuse", cpus, Want::Auto)).unwrap();
    // Alone and wanting the pair: it fuses.
    a.start(&argv(&["spin"]), spec(2)).unwrap();
    run_for(&mut a, 150);
    assert!(!a.log().fuses.is_empty(), "a lone thread that wants the pair fuses it");
    let borrowed = (0..2).find(|&c| a.is_offline(c)).expect("one CPU is borrowed");
    let rep = 1 - borrowed;
    a.check().expect("the kernel's groups match the policy while fused");
    let (dirs, _) = a.group_dirs(borrowed);
    for d in &dirs {
        // v1 `tasks`; v2 `cgroup.threads` (a threaded group has no `tasks`).
        let list = if d.join("tasks").exists() { "tasks" } else { "cgroup.threads" };
        let tasks = std::fs::read_to_string(d.join(list)).unwrap();
        assert!(tasks.trim().is_empty(), "the borrowed CPU's group {} holds {tasks}", d.display());
        if d.join("freezer.state").exists() {
            assert_eq!(std::fs::read_to_string(d.join("freezer.state")).unwrap().trim(), "FROZEN");
        }
        if d.join("cgroup.freeze").exists() {
            let events = std::fs::read_to_string(d.join("cgroup.events")).unwrap();
            assert!(events.lines().any(|l| l == "frozen 1"), "{}: {events}", d.display());
        }
    }
    // The representative runs at the fused pair's duty: 75% (Table 2, high).
    let (rep_dirs, _) = a.group_dirs(rep);
    let quota = rep_dirs
        .iter()
        .find_map(|d| {
            std::fs::read_to_string(d.join("cpu.cfs_quota_us"))
                .or_else(|_| std::fs::read_to_string(d.join("cpu.max")))
                .ok()
        })
        .expect("a quota file");
    assert!(["15000", "15000 20000"].contains(&quota.trim()), "{quota}");
    // A second thread arrives: at tax 1 it takes its CPU back in turns.
    a.start(&argv(&["spin"]), spec(1)).unwrap();
    for _ in 0..20 {
        run_for(&mut a, 50);
        a.check().expect("the kernel's groups match the policy");
    }
    let run = a.finish(Ending::Kill);
    let splits = run.log.reconfigs.iter().filter(|r| r.online).count();
    let fuses = run.log.reconfigs.iter().filter(|r| !r.online).count();
    eprintln!(
        "{fuses} fuses, {splits} splits; offline p50 {} ns; thread 0 fused {} ms, thread {} ran {} ms",
        dyncore_runtime::arbiter::quantile(
            &run.log.reconfigs.iter().filter(|r| !r.online).map(|r| r.critical_ns).collect::<Vec<_>>(),
            0.5
        ),
        run.log.threads[0].fused_ns / MS,
        run.log.threads.len() - 1,
        run.log.threads.last().unwrap().dispatched_ns / MS
    );
    for line in run.log.actuation.summary() {
        eprintln!("{line}");
    }
    let polls = &run.log.poll_ns;
    eprintln!(
        "{} discovery passes, p50 {:.1} µs, p99 {:.1} µs; controller CPU {:.2}% of {:.2} s",
        polls.len(),
        dyncore_runtime::arbiter::quantile(polls, 0.5) as f64 / 1e3,
        dyncore_runtime::arbiter::quantile(polls, 0.99) as f64 / 1e3,
        run.log.controller_cpu_ns as f64 / run.end_ns as f64 * 100.0,
        run.end_ns as f64 / 1e9
    );
    assert!(splits >= 1, "the second thread split the object");
    assert!(run.log.threads[0].fused_ns > 0);
    let second = run.log.threads.iter().find(|t| t.command == 1).unwrap();
    assert!(second.dispatched_ns > 0 && second.cpu_ns > 0, "{second:?}");
    // The recorded traffic keeps the contract and replays byte for byte.
    let events = parse_events(&run.events).unwrap();
    assert!(replay(&events, &mut scheduler(2, true)) == run.actions, "the replay differs");
    let mut checker = Checker::with_speeds(SpeedModel::DYNAMIC, Topology::uniform(1, 2));
    check_replay(&events, &mut scheduler(2, true), &mut checker)
        .expect("the arbiter's traffic keeps the contract");
    for r in &run.log.reconfigs {
        assert_eq!(r.steps_ns.len(), if r.online { 1 } else { 2 }, "{r:?}");
    }
}
