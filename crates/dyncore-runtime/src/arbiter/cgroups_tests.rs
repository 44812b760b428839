//! The run's groups on fixture trees (plain directories standing in for
//! v1 hierarchies and a v2 mount): what is created, what each move and
//! duty writes, and that everything is removed again. The real kernel's
//! side (threads really frozen, really on the CPU) is tested on the real
//! hierarchies in `tests/arbiter.rs`.

use std::path::Path;

use super::*;

fn v1_fixture(d: &Path) -> Flavor {
    let h = |name: &str, ctl: &[&str]| {
        let root = d.join(name);
        std::fs::create_dir_all(&root).unwrap();
        Hierarchy { root, controllers: ctl.iter().map(|s| s.to_string()).collect() }
    };
    std::fs::create_dir_all(d.join("cpuset")).unwrap();
    std::fs::write(d.join("cpuset/cpuset.mems"), "0-1\n").unwrap();
    Flavor::V1 {
        hierarchies: vec![
            h("cpuset", &["cpuset"]),
            h("cpu", &["cpu", "cpuacct"]),
            h("freezer", &["freezer"]),
        ],
    }
}

fn text(p: impl AsRef<Path>) -> String {
    std::fs::read_to_string(p).unwrap().trim().to_string()
}

#[test]
fn bandwidth_gives_the_duty_with_at_least_a_1_ms_quota() {
    let d = |pm| Duty::new(pm).unwrap();
    // 50% of the default 20 ms period: 10 ms.
    assert_eq!(bandwidth(d(500), PERIOD_US), (20_000, Some(10_000)));
    // 62.5% and 87.5% (Table 2) are exact in µs.
    assert_eq!(bandwidth(d(625), PERIOD_US), (20_000, Some(12_500)));
    assert_eq!(bandwidth(d(875), 5_000), (5_000, Some(4_375)));
    // 100%: not throttled.
    assert_eq!(bandwidth(Duty::FULL, PERIOD_US), (20_000, None));
    // 12.5% of 5 ms would be 625 µs: the period grows to 8 ms for a 1 ms quota.
    assert_eq!(bandwidth(d(125), 5_000), (8_000, Some(1_000)));
    // 0.1%: 1 ms of 1 s.
    assert_eq!(bandwidth(d(1), PERIOD_US), (1_000_000, Some(1_000)));
    for period in [5_000, PERIOD_US] {
        for pm in 1..=1000 {
            let (p, quota) = bandwidth(d(pm), period);
            if let Some(q) = quota {
                assert!(q >= MIN_QUOTA_US && p >= period, "{pm}");
                // Within 1 µs of the duty.
                assert!((q as f64 / p as f64 - f64::from(pm) / 1000.0).abs() * p as f64 <= 1.0, "{pm}");
            }
        }
    }
}

#[test]
fn v1_layout_moves_duties_and_removal() {
    let d = tempfile::tempdir().unwrap();
    let flavor = v1_fixture(d.path());
    let mut cg = Cgroups::create(&flavor, "dyncore.t.1", &[2, 3], 5_000).unwrap();
    for h in ["cpuset", "cpu", "freezer"] {
        let run = d.path().join(h).join("dyncore.t.1");
        for g in ["cpu0", "cpu1", "held"] {
            assert!(run.join(g).is_dir(), "{h}/{g}");
        }
    }
    let cs = d.path().join("cpuset/dyncore.t.1");
    assert_eq!(text(cs.join("cpuset.cpus")), "2-3");
    assert_eq!(text(cs.join("cpu0/cpuset.cpus")), "2");
    assert_eq!(text(cs.join("cpu1/cpuset.cpus")), "3");
    assert_eq!(text(cs.join("cpu1/cpuset.mems")), "0-1", "a v1 cpuset needs its memory nodes");
    assert_eq!(text(cs.join("held/cpuset.cpus")), "2-3");
    assert_eq!(text(d.path().join("freezer/dyncore.t.1/held/freezer.state")), "FROZEN");
    assert!(cg.held_frozen().unwrap());
    // A process joins held, the freezer last (it stops as it joins).
    let join = cg.join_files();
    assert_eq!(join.len(), 3);
    assert!(join[2].starts_with(d.path().join("freezer")) && join[2].ends_with("held/tasks"), "{join:?}");

    cg.place(4242, 1).unwrap();
    for h in ["cpuset", "cpu", "freezer"] {
        assert_eq!(text(d.path().join(h).join("dyncore.t.1/cpu1/tasks")), "4242", "{h}");
    }
    cg.hold(4242).unwrap();
    assert_eq!(text(d.path().join("freezer/dyncore.t.1/held/tasks")), "4242");

    // 50%, then 50% again (nothing written), then 12.5% (period and quota), then 100%.
    assert_eq!(cg.set_duty(0, Duty::BASELINE).unwrap(), 2);
    let cpu0 = d.path().join("cpu/dyncore.t.1/cpu0");
    assert_eq!(
        (text(cpu0.join("cpu.cfs_period_us")), text(cpu0.join("cpu.cfs_quota_us"))),
        ("5000".into(), "2500".into())
    );
    assert_eq!(cg.set_duty(0, Duty::BASELINE).unwrap(), 0);
    assert_eq!(cg.set_duty(0, Duty::new(125).unwrap()).unwrap(), 2);
    assert_eq!(text(cpu0.join("cpu.cfs_period_us")), "8000");
    assert_eq!(cg.set_duty(0, Duty::FULL).unwrap(), 2);
    assert_eq!(text(cpu0.join("cpu.cfs_quota_us")), "-1");

    // The run's weight goes on its parent in the cpu hierarchy.
    assert!(cg.set_weight(1 << 20).unwrap().ends_with("cpu/dyncore.t.1/cpu.shares = 262144"));
    assert_eq!(text(d.path().join("cpu/dyncore.t.1/cpu.shares")), "262144");
    cg.set_frozen(1, true).unwrap();
    assert!(cg.cpu_frozen(1).unwrap());
    assert_eq!(text(d.path().join("freezer/dyncore.t.1/cpu1/freezer.state")), "FROZEN");
    assert!(cg.thaw_all().is_empty());
    assert!(!cg.cpu_frozen(1).unwrap() && !cg.held_frozen().unwrap());

    assert!(cg.remove().is_empty());
    for h in ["cpuset", "cpu", "freezer"] {
        assert_eq!(
            std::fs::read_dir(d.path().join(h))
                .unwrap()
                .filter(|e| e.as_ref().unwrap().path().is_dir())
                .count(),
            0,
            "{h}"
        );
    }
}

#[test]
fn v2_is_one_threaded_subtree() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("cg");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("cgroup.subtree_control"), "cpu io memory\n").unwrap();
    let mut cg = Cgroups::create(&Flavor::V2 { root: root.clone() }, "dyncore.t.2", &[0, 1], 5_000).unwrap();
    // The root had cpu but not cpuset: only cpuset is enabled there.
    assert_eq!(text(root.join("cgroup.subtree_control")), "+cpuset");
    let run = root.join("dyncore.t.2");
    assert_eq!(text(run.join("cgroup.subtree_control")), "+cpu", "the last of +cpuset, +cpu");
    for g in ["cpu0", "cpu1", "held"] {
        assert_eq!(text(run.join(g).join("cgroup.type")), "threaded", "{g}");
    }
    assert_eq!(text(run.join("held/cgroup.freeze")), "1");
    assert_eq!(cg.join_files(), [run.join("cgroup.procs"), run.join("held/cgroup.threads")]);
    cg.place(77, 0).unwrap();
    assert_eq!(text(run.join("cpu0/cgroup.threads")), "77");
    assert_eq!(cg.set_duty(0, Duty::new(750).unwrap()).unwrap(), 1);
    assert_eq!(text(run.join("cpu0/cpu.max")), "3750 5000");
    cg.set_duty(0, Duty::FULL).unwrap();
    assert_eq!(text(run.join("cpu0/cpu.max")), "max 5000");
    cg.set_weight(262_144).unwrap();
    assert_eq!(text(run.join("cpu.weight")), "10000");
    cg.set_weight(1024).unwrap();
    assert_eq!(text(run.join("cpu.weight")), "100", "a nice-0 process's weight");
    // Frozen is read from cgroup.events, which the kernel writes.
    std::fs::write(run.join("cpu1/cgroup.events"), "populated 0\nfrozen 1\n").unwrap();
    assert!(cg.cpu_frozen(1).unwrap());
    assert!(!cg.held_frozen().unwrap(), "no cgroup.events says so yet");
    assert!(cg.remove().is_empty());
    assert!(!run.exists());
}

#[test]
fn a_failed_creation_removes_what_it_made() {
    let d = tempfile::tempdir().unwrap();
    let flavor = v1_fixture(d.path());
    // The freezer hierarchy's run group already exists: creation fails there,
    // after the cpuset and cpu trees were made.
    std::fs::create_dir_all(d.path().join("freezer/dyncore.t.3")).unwrap();
    let e = Cgroups::create(&flavor, "dyncore.t.3", &[0], PERIOD_US).unwrap_err();
    assert!(e.to_string().contains("cannot create the group"), "{e}");
    assert!(!d.path().join("cpuset/dyncore.t.3").exists());
    assert!(!d.path().join("cpu/dyncore.t.3").exists());
    assert!(d.path().join("freezer/dyncore.t.3").exists(), "not ours: left alone");
}

#[test]
fn dropping_the_groups_removes_them() {
    let d = tempfile::tempdir().unwrap();
    let cg = Cgroups::create(&v1_fixture(d.path()), "dyncore.t.5", &[0], PERIOD_US).unwrap();
    let parents = cg.parents();
    assert!(parents.iter().all(|p| p.is_dir()));
    drop(cg);
    assert!(parents.iter().all(|p| !p.exists()));
}

#[test]
fn scan_lists_threads_by_group() {
    let d = tempfile::tempdir().unwrap();
    let mut cg = Cgroups::create(&v1_fixture(d.path()), "dyncore.t.4", &[0, 1], PERIOD_US).unwrap();
    cg.place(10, 0).unwrap();
    cg.place(11, 1).unwrap();
    cg.hold(12).unwrap();
    let mut out = Vec::new();
    cg.scan(&mut out).unwrap();
    out.sort_unstable_by_key(|&(t, _)| t);
    assert_eq!(out, [(10, Some(Loc::Cpu(0))), (11, Some(Loc::Cpu(1))), (12, Some(Loc::Held))]);
    cg.check_consistent().unwrap();
    // A process half-way through joining (in cpuset's held, not yet in the
    // freezer's) is not found yet.
    std::fs::write(d.path().join("cpuset/dyncore.t.4/held/tasks"), "12\n13\n").unwrap();
    out.clear();
    cg.scan(&mut out).unwrap();
    assert!(!out.iter().any(|&(t, _)| t == 13), "{out:?}");
    std::fs::write(d.path().join("cpuset/dyncore.t.4/held/tasks"), "12\n").unwrap();
    // A thread in another group in the cpu hierarchy breaks invariant 3.
    std::fs::write(d.path().join("cpu/dyncore.t.4/cpu1/tasks"), "10\n").unwrap();
    let e = cg.check_consistent().unwrap_err();
    assert!(e.contains("thread 10 is in") && e.contains("cpu/dyncore.t.4/cpu1"), "{e}");
    assert!(cg.remove().is_empty());
}
