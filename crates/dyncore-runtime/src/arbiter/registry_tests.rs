//! Claims, the overlap check and the sweep, on a fixture state dir and
//! fixture hierarchies (plain directories).

use super::*;

/// A pid that no process has now.
fn dead_pid() -> u32 {
    (3_000_000..4_000_000).find(|p| !Path::new(&format!("/proc/{p}")).exists()).unwrap()
}

fn cpus(s: &str) -> CpuSet {
    s.parse().unwrap()
}

#[test]
fn names_carry_the_run_and_the_pid() {
    assert_eq!(group_name("exec make", 42, 0), "dyncore.exec_make.42.0");
    assert_eq!(group_name("", 42, 3), "dyncore.run.42.3");
    assert_eq!(group_name("a.b/c", 7, 1), "dyncore.a_b_c.7.1");
    assert_eq!(pid_of("dyncore.exec_make.42.0"), Some(42));
    assert_eq!(pid_of("dyncore.x-y.1234.17"), Some(1234));
    assert_eq!(pid_of("dyncore.42.0"), None);
    assert_eq!(pid_of("system.slice"), None);
    assert_eq!(group_name(&"x".repeat(100), 1, 0).len(), "dyncore..1.0".len() + 40);
}

#[test]
fn overlapping_runs_are_refused_and_disjoint_ones_are_not() {
    let state = tempfile::tempdir().unwrap();
    let (a, removed) = start(state.path(), &[], "dyncore.a.1.0", &cpus("0-1")).unwrap();
    assert!(removed.is_empty());
    let Err(StartError::Overlap(o)) = start(state.path(), &[], "dyncore.b.1.1", &cpus("1-2")) else {
        panic!("an overlapping run was let in")
    };
    assert_eq!(o.other, "dyncore.a.1.0");
    assert_eq!(o.other_pid, Some(std::process::id()));
    let msg = o.to_string();
    assert!(msg.starts_with("CPUs 1 are already arbitrated by run dyncore.a.1.0 (pid "), "{msg}");
    assert!(msg.contains("which holds CPUs 0-1"), "{msg}");
    let (b, _) = start(state.path(), &[], "dyncore.b.1.2", &cpus("2-3")).unwrap();
    // A run that ended gives its CPUs back.
    drop(a);
    let (c, _) = start(state.path(), &[], "dyncore.c.1.3", &cpus("0-1")).unwrap();
    assert!(!state.path().join("dyncore.a.1.0.claim").exists(), "a released claim is removed");
    drop((b, c));
}

#[test]
fn the_sweep_removes_dead_runs_and_leaves_live_ones() {
    let state = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let dead = group_name("gone", dead_pid(), 0);
    for g in ["cpu0", "cpu1", "held"] {
        std::fs::create_dir_all(root.path().join(&dead).join(g)).unwrap();
        std::fs::write(root.path().join(&dead).join(g).join("tasks"), "").unwrap();
    }
    std::fs::write(root.path().join(&dead).join("held/freezer.state"), "FROZEN").unwrap();
    // A live run of this process, with its claim held.
    let live = group_name("alive", std::process::id(), 99);
    std::fs::create_dir_all(root.path().join(&live).join("cpu0")).unwrap();
    let (claim, _) = start(state.path(), &[], &live, &cpus("5")).unwrap();
    // A claim whose run died (its lock is free), and an unrelated group.
    std::fs::write(state.path().join("dyncore.old.1.0.claim"), "cpus 7\npid 1\n").unwrap();
    std::fs::create_dir_all(root.path().join("system.slice")).unwrap();

    let removed = sweep(state.path(), &[root.path().to_path_buf()]).unwrap();
    assert!(!root.path().join(&dead).exists(), "the dead run's groups are removed");
    assert!(root.path().join(&live).exists() && root.path().join("system.slice").exists());
    assert!(!state.path().join("dyncore.old.1.0.claim").exists());
    assert_eq!(removed.len(), 2, "{removed:?}");
    assert!(removed[0].starts_with(&format!("removed the groups of dead run {dead} at ")), "{removed:?}");
    assert!(removed[0].contains("is gone)"), "{removed:?}");
    assert!(removed[1].starts_with("removed the claim of dead run dyncore.old.1.0"), "{removed:?}");
    // The live run's claim is still held: an overlapping start is refused.
    assert!(matches!(start(state.path(), &[], "dyncore.x.1.5", &cpus("5")), Err(StartError::Overlap(_))));
    drop(claim);
}

#[test]
fn a_group_whose_claim_was_deleted_is_alive_while_its_pid_is() {
    let state = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let mine = group_name("noclaim", std::process::id(), 0);
    std::fs::create_dir_all(root.path().join(&mine)).unwrap();
    assert!(sweep(state.path(), &[root.path().to_path_buf()]).unwrap().is_empty());
    assert!(root.path().join(&mine).exists());
}
