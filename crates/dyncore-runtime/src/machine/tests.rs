//! The sysfs reader on the fixture trees of `tests/fixtures/sysfs` and on
//! this machine, and the SMT-core-or-throttle decision on each.

use std::path::PathBuf;

use dyncore_core::topology::CoreKind;

use super::fuse::{FuseMechanism, NotACore, decide};
use super::*;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs").join(name)
}

fn set(s: &str) -> CpuSet {
    s.parse().expect("a CPU list")
}

fn read_fixture(name: &str, allowed: &str) -> Machine {
    Machine::read(&fixture(name), &set(allowed)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn two_cpus_without_smt_cpufreq_or_capacity() {
    let m = read_fixture("two-cpu", "0-1");
    assert_eq!((m.possible.clone(), m.online.clone(), m.usable()), (set("0-1"), set("0-1"), set("0-1")));
    assert_eq!((m.topology.ncpus(), m.topology.nnodes(), m.smt_active), (2, 1, Some(false)));
    assert!(!m.has_smt());
    assert_eq!((m.topology.capacity(0), m.topology.numa_node(1)), (None, Some(0)));
    let missing = m.missing.join("\n");
    assert!(missing.contains("cpu_capacity: absent for CPU(s) 0-1"), "{missing}");
    assert!(missing.contains("capacities unknown") && missing.contains("cpufreq"), "{missing}");
    // No SMT: every fused pair is throttled.
    let why = decide(&m.topology, &[0, 1], &set("0-1"));
    assert_eq!(why, FuseMechanism::Throttle(NotACore::NotSiblings { real: [0, 1] }));
}

#[test]
fn a_hybrid_machine_has_big_smt_p_cores_and_little_e_cores() {
    let m = read_fixture("hybrid", "0-19");
    let t = &m.topology;
    assert_eq!((t.ncpus(), t.nnodes(), m.smt_active), (20, 1, Some(true)));
    assert_eq!(t.cpus_of_kind(CoreKind::Big), set("0-15"));
    assert_eq!(t.cpus_of_kind(CoreKind::Little), set("16-19"));
    assert_eq!((t.capacity(3), t.capacity(17)), (Some(1024), Some(642)));
    assert_eq!((t.sibling(6), t.sibling(18)), (Some(7), None));
    assert!(m.missing.is_empty(), "{:?}", m.missing);
    // Runtime CPU i on real CPU i: a P-core pair is a real core; an
    // E-core pair and a pair across two P-cores are throttled.
    let real: Vec<CpuId> = (0..20).collect();
    assert_eq!(decide(t, &real, &set("4-5")), FuseMechanism::SmtCore { keep: 4, park: 5, core: set("4-5") });
    assert_eq!(
        decide(t, &real, &set("16-17")),
        FuseMechanism::Throttle(NotACore::NotSiblings { real: [16, 17] })
    );
    assert_eq!(
        decide(t, &real, &set("5-6")),
        FuseMechanism::Throttle(NotACore::NotSiblings { real: [5, 6] })
    );
    assert_eq!(decide(t, &real, &set("4-7")), FuseMechanism::Throttle(NotACore::NotAPair { cpus: 4 }));
}

#[test]
fn two_sockets_with_intel_numbering_and_an_offline_cpu() {
    let m = read_fixture("two-socket", "0-15");
    let t = &m.topology;
    assert_eq!((m.online.clone(), m.usable()), (set("0-14"), set("0-14")));
    assert_eq!((t.ncpus(), t.nnodes()), (15, 2));
    assert_eq!(
        m.numa_nodes.iter().map(|(n, s)| format!("{n}:{s}")).collect::<Vec<_>>(),
        ["0:0-3,8-11", "1:4-7,12-15"]
    );
    // Logical CPUs 0-1 are real CPUs 0 and 8, a core; node 1 starts at 8.
    assert_eq!((t.os_cpu(0), t.os_cpu(1), t.numa_node(1)), (0, 8, Some(0)));
    assert_eq!((t.os_cpu(8), t.numa_node(8), t.node_cpus(1)), (4, Some(1), set("8-14")));
    assert_eq!(m.cpus[15].desc, None);
    assert_eq!(m.cpus[9].thread_siblings, set("1,9"));
    assert_eq!(t.cpus_of_kind(CoreKind::Big), CpuSet::new(), "equal frequencies: no big cores");
    assert_eq!(t.capacity(5), Some(1024));
    let missing = m.missing.join("\n");
    assert!(missing.contains("CPU(s) 15: offline"), "{missing}");
    assert!(missing.contains("capacities from the maximum frequencies"), "{missing}");
    // Runtime CPUs on real CPUs 1 and 9 (siblings) fuse into a real core;
    // 7's sibling 15 is offline, so a pair on 7 is not a core.
    assert_eq!(
        decide(t, &[1, 9], &set("0-1")),
        FuseMechanism::SmtCore { keep: 0, park: 1, core: set("1,9") }
    );
    assert_eq!(decide(t, &[7, 15], &set("0-1")), FuseMechanism::Throttle(NotACore::Unmapped { cpu: 1 }));
    // A third runtime CPU on the same core: parking one is not enough.
    assert_eq!(
        decide(t, &[1, 9, 9], &set("0-1")),
        FuseMechanism::Throttle(NotACore::CoreShared { other: 2 })
    );
    assert_eq!(decide(t, &[1, 1], &set("0-1")), FuseMechanism::Throttle(NotACore::SameRealCpu { real: 1 }));
}

#[test]
fn the_affinity_mask_narrows_the_topology() {
    let m = read_fixture("two-socket", "0-3,8-9");
    assert_eq!(m.usable(), set("0-3,8-9"));
    assert_eq!((m.topology.ncpus(), m.topology.nnodes()), (6, 1));
    // Two cores with both threads allowed first, then two single ones.
    assert_eq!(m.topology.core_cpus(0), set("0-1"));
    assert_eq!(m.topology.core_cpus(4).len(), 1);
}

#[test]
fn a_folder_that_is_not_sysfs_is_refused_with_the_path() {
    let err = Machine::read(&fixture("no-such-machine"), &set("0")).unwrap_err();
    assert!(err.to_string().contains("no-such-machine/devices/system/cpu/possible"), "{err}");
    let err = Machine::read(&fixture("two-cpu"), &set("5")).unwrap_err();
    assert!(err.to_string().contains("no usable topology"), "{err}");
}

#[test]
fn this_machine_reads_consistently() {
    let m = Machine::detect().expect("this machine's sysfs");
    let allowed = crate::affinity::allowed_cpus().unwrap();
    assert_eq!(m.usable(), m.online.intersection(&allowed));
    assert_eq!(m.topology.ncpus(), m.usable().len());
    m.topology.check().unwrap();
    for c in 0..m.topology.ncpus() {
        assert!(m.usable().contains(m.topology.os_cpu(c)));
    }
    eprintln!("this machine: usable {}, SMT {}, missing: {:?}", m.usable(), m.has_smt(), m.missing);
}
