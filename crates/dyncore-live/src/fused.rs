//! Every fused execution object of a live run, with the evidence of what
//! really happened to it (Chameleon §5.5 on real SMT siblings): the OS
//! CPUs its runtime CPUs stand for and how the fuse was carried out (a
//! real SMT core, or throttling and why), the Bolt offline of its borrowed
//! CPUs and their online after the split (asked, and when the runtime's
//! workers really stopped and started again), and where its thread's
//! steps really ran while it was fused (runtime CPUs, and the OS CPUs the
//! kernel reported at each step).
//!
//! A step belongs to the object when it started while the thread ran on
//! the object: from the moment the executor had applied the `Dispatch`
//! onto it (a runner elsewhere starts no step after that; the execution
//! check holds it to this) to the split.

use dyncore_core::CpuId;
use dyncore_core::Nanos;
use dyncore_runtime::backend::{FuseRecord, LiveRun, ReconfigRecord};
use dyncore_runtime::machine::fuse::FuseMechanism;
use serde::Serialize;

use crate::compare::fmt_ns;
use crate::run::LiveRunOutput;
use dyncore_report::table::Table;

/// One `Offline` or `Online` of an object's borrowed CPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReconfigJson {
    pub id: u64,
    /// `bolt` or `naive`.
    pub mode: String,
    pub cpus: Vec<CpuId>,
    /// The call's start and the end of its critical steps (executor time).
    pub started_ns: Nanos,
    pub finished_ns: Nanos,
    /// When the runtime recorded the last of the CPUs really stopped (an
    /// offline) or running again (an online); `None`: it recorded none.
    pub effective_ns: Option<Nanos>,
}

/// One fused object of a live run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FusedObject {
    pub thread: usize,
    /// Runtime CPUs: all of the object's, its representative, the
    /// borrowed ones.
    pub cpus: Vec<CpuId>,
    pub representative: CpuId,
    pub borrowed: Vec<CpuId>,
    /// The OS CPUs the object's runtime CPUs run on.
    pub os_cpus: Vec<CpuId>,
    /// `smt-core` (a real core, the sibling parked) or `throttle`.
    pub mechanism: &'static str,
    pub mechanism_detail: String,
    /// For `smt-core`: the sibling OS CPUs of the core.
    pub sibling_core: Option<Vec<CpuId>>,
    pub fused_ns: Nanos,
    /// When the `Dispatch` running the thread on the object had been
    /// applied (`None`: it never ran there): the start of the window its
    /// steps are checked in.
    pub dispatched_ns: Option<Nanos>,
    /// `None`: still fused when the run ended.
    pub split_ns: Option<Nanos>,
    pub offline: Option<ReconfigJson>,
    pub online: Option<ReconfigJson>,
    /// Where the thread's steps started while fused: runtime CPUs, the OS
    /// CPUs the kernel reported, and how many steps.
    pub ran_on_cpus: Vec<CpuId>,
    pub ran_on_os_cpus: Vec<CpuId>,
    pub steps: u64,
}

fn bits(mask: u64) -> impl Iterator<Item = CpuId> {
    (0..64).filter(move |b| mask & (1u64 << b) != 0)
}

fn reconfig_json(run: &LiveRun, r: &ReconfigRecord) -> ReconfigJson {
    let cpus: Vec<CpuId> = r.cpus.iter().collect();
    // Each CPU's first recorded change the right way from the call on.
    let per_cpu: Vec<Option<Nanos>> = cpus
        .iter()
        .map(|&c| {
            run.log
                .cpu_changes
                .iter()
                .filter(|ch| ch.cpu == c && ch.online == r.online && ch.at_ns >= r.started_ns)
                .map(|ch| ch.at_ns)
                .min()
        })
        .collect();
    let effective_ns = per_cpu.iter().copied().collect::<Option<Vec<_>>>().and_then(|v| v.into_iter().max());
    ReconfigJson {
        id: r.id.0,
        mode: r.mode.to_string(),
        cpus,
        started_ns: r.started_ns,
        finished_ns: r.finished_ns,
        effective_ns,
    }
}

/// The first offline (or online) of exactly the object's borrowed CPUs,
/// for its representative, from `from` on.
fn reconfig_of<'a>(
    run: &'a LiveRun,
    f: &FuseRecord,
    online: bool,
    from: Nanos,
) -> Option<&'a ReconfigRecord> {
    run.log
        .reconfigs
        .iter()
        .filter(|r| {
            r.online == online
                && r.representative == f.object.representative
                && r.cpus == f.object.borrowed
                && r.started_ns >= from
        })
        .min_by_key(|r| r.started_ns)
}

/// Every fused object of the run `run`, whose runtime CPU `i` runs on OS
/// CPU `real[i]`.
pub fn objects(run: &LiveRun, real: &[CpuId]) -> Vec<FusedObject> {
    run.log
        .fuses
        .iter()
        .map(|f| {
            let cpus: Vec<CpuId> = f.object.cpus().iter().collect();
            let mut os_cpus: Vec<CpuId> = cpus.iter().filter_map(|&c| real.get(c).copied()).collect();
            os_cpus.sort_unstable();
            os_cpus.dedup();
            let (mechanism, sibling_core) = match &f.mechanism {
                FuseMechanism::SmtCore { core, .. } => ("smt-core", Some(core.iter().collect())),
                FuseMechanism::Throttle(_) => ("throttle", None),
            };
            // The steps that started from the Dispatch onto the object
            // (applied; a runner elsewhere starts none after it) to the split.
            let (from, end) = (f.dispatched_ns.unwrap_or(Nanos::MAX), f.split_ns.unwrap_or(Nanos::MAX));
            let mut ran_cpus = 0u64;
            let mut ran_os = 0u64;
            let mut steps = 0;
            for s in run.log.executed.iter().filter(|s| s.thread == f.thread) {
                if s.start_ns < end && s.last_start_ns >= from {
                    ran_cpus |= dyncore_core::policy::execution::os_cpu_bit(s.cpu);
                    ran_os |= s.os_cpus;
                    steps += s.steps;
                }
            }
            let offline = reconfig_of(run, f, false, f.fused_ns).map(|r| reconfig_json(run, r));
            let online =
                f.split_ns.and_then(|at| reconfig_of(run, f, true, at)).map(|r| reconfig_json(run, r));
            FusedObject {
                thread: f.thread,
                cpus,
                representative: f.object.representative,
                borrowed: f.object.borrowed.iter().collect(),
                os_cpus,
                mechanism,
                mechanism_detail: f.mechanism.to_string(),
                sibling_core,
                fused_ns: f.fused_ns,
                dispatched_ns: f.dispatched_ns,
                split_ns: f.split_ns,
                offline,
                online,
                ran_on_cpus: bits(ran_cpus).collect(),
                ran_on_os_cpus: bits(ran_os).collect(),
                steps,
            }
        })
        .collect()
}

fn list(v: &[CpuId]) -> String {
    if v.is_empty() { "-".into() } else { v.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",") }
}

fn reconfig_cell(r: &Option<ReconfigJson>, effect: &str) -> String {
    match r {
        None => "none recorded".into(),
        Some(r) => format!(
            "{} {}: asked at {}, {effect} at {}",
            r.mode,
            list(&r.cpus),
            fmt_ns(r.started_ns),
            r.effective_ns.map(fmt_ns).unwrap_or_else(|| "NOT RECORDED".into())
        ),
    }
}

/// One row per fused object of every live run (`None` when no run fused).
pub fn table(live: &[LiveRunOutput], label: impl Fn(usize) -> String) -> Option<Table> {
    let mut t = Table::new(
        "",
        &[
            "run",
            "thread",
            "object (runtime CPUs)",
            "on OS CPUs",
            "fused by",
            "fused → split",
            "borrowed CPUs offline",
            "back online",
            "thread ran on (runtime / OS CPUs, steps)",
        ],
    );
    for o in live {
        for f in objects(&o.run, &o.fit.real) {
            t.row(vec![
                label(o.index),
                f.thread.to_string(),
                format!("{} (borrowed {})", list(&f.cpus), list(&f.borrowed)),
                list(&f.os_cpus),
                match &f.sibling_core {
                    Some(core) => format!("real SMT core {}", list(core)),
                    None => f.mechanism_detail.clone(),
                },
                format!(
                    "{} (ran there from {}) → {}",
                    fmt_ns(f.fused_ns),
                    f.dispatched_ns.map(fmt_ns).unwrap_or_else(|| "never".into()),
                    f.split_ns.map(fmt_ns).unwrap_or_else(|| "end".into())
                ),
                reconfig_cell(&f.offline, "stopped"),
                reconfig_cell(&f.online, "running"),
                format!("{} / {}, {}", list(&f.ran_on_cpus), list(&f.ran_on_os_cpus), f.steps),
            ]);
        }
    }
    (!t.rows.is_empty()).then_some(t)
}

pub const NOTE: &str = "Fused objects: each object's runtime CPUs and the OS CPUs they run on; how the fuse was \
     carried out (a real SMT core: the borrowed sibling's runtime CPU parked, so the representative has the core; \
     else throttling, and why); the Bolt offline of the borrowed CPUs (asked, and when the runtime's worker \
     really stopped) and their online after the split (asked, and when it really ran again); and where the \
     thread's steps started from the moment the `Dispatch` onto the object was applied to the split, as runtime CPUs and as the OS CPUs the kernel reported at each step. \
     Times from the run's start.";

#[cfg(test)]
mod tests {
    use super::*;
    use dyncore_core::exec::{ExecObject, Property};
    use dyncore_core::policy::ReconfigId;
    use dyncore_core::policy::execution::{CpuChange, ExecSlice};
    use dyncore_core::reconfig::Mode;
    use dyncore_runtime::backend::RunLog;
    use dyncore_runtime::machine::fuse::NotACore;

    fn slice(cpu: CpuId, os: CpuId, start_ns: Nanos, last_start_ns: Nanos) -> ExecSlice {
        let os_cpus = dyncore_core::policy::execution::os_cpu_bit(os);
        ExecSlice { thread: 0, cpu, start_ns, last_start_ns, end_ns: last_start_ns + 5, steps: 2, os_cpus }
    }

    fn reconfig(id: u64, online: bool, started_ns: Nanos) -> ReconfigRecord {
        ReconfigRecord {
            id: ReconfigId(id),
            online,
            cpus: [1].into_iter().collect(),
            mode: Mode::Bolt,
            representative: 0,
            started_ns,
            finished_ns: started_ns + 10,
            critical_ns: 10,
            steps_ns: vec![],
        }
    }

    /// Thread 0 fused on runtime CPUs 0-1 at 100 (onto them at 130), split
    /// at 500; it ran on runtime CPU 2 (OS CPU 3) until the `Dispatch`
    /// onto the object was applied, then on runtime CPU 0 (OS CPU 4).
    fn run(mechanism: FuseMechanism) -> LiveRun {
        let object = ExecObject {
            representative: 0,
            borrowed: [1].into_iter().collect(),
            property: Property::sequential(1),
        };
        let log = RunLog {
            fuses: vec![FuseRecord {
                thread: 0,
                object,
                fused_ns: 100,
                dispatched_ns: Some(130),
                split_ns: Some(500),
                mechanism,
            }],
            reconfigs: vec![reconfig(1, false, 110), reconfig(2, true, 510)],
            executed: vec![slice(2, 3, 10, 120), slice(0, 4, 135, 480), slice(2, 3, 520, 600)],
            cpu_changes: vec![
                CpuChange { cpu: 1, at_ns: 115, online: false },
                CpuChange { cpu: 1, at_ns: 512, online: true },
            ],
            ..RunLog::default()
        };
        LiveRun {
            log,
            events: String::new(),
            actions: String::new(),
            end_ns: 700,
            duty: vec![],
            execution: Default::default(),
        }
    }

    #[test]
    fn an_object_shows_its_pair_its_bolt_offline_and_online_and_where_its_thread_ran() {
        let core: dyncore_core::CpuSet = [4, 5].into_iter().collect();
        let smt = FuseMechanism::SmtCore { keep: 0, park: 1, core };
        let o = &objects(&run(smt), &[4, 5, 3])[0];
        assert_eq!(
            (o.cpus.clone(), o.borrowed.clone(), o.os_cpus.clone()),
            (vec![0, 1], vec![1], vec![4, 5])
        );
        assert_eq!((o.mechanism, o.sibling_core.clone()), ("smt-core", Some(vec![4, 5])));
        // Only the steps from the applied Dispatch to the split count.
        assert_eq!((o.ran_on_cpus.clone(), o.ran_on_os_cpus.clone(), o.steps), (vec![0], vec![4], 2));
        let off = o.offline.as_ref().expect("the borrowed CPU's offline");
        assert_eq!((off.mode.as_str(), off.started_ns, off.effective_ns), ("bolt", 110, Some(115)));
        let on = o.online.as_ref().expect("its online after the split");
        assert_eq!((on.started_ns, on.effective_ns), (510, Some(512)));

        let throttled = FuseMechanism::Throttle(NotACore::SameRealCpu { real: 4 });
        let o = &objects(&run(throttled), &[4, 4, 3])[0];
        assert_eq!((o.mechanism, o.sibling_core.clone(), o.os_cpus.clone()), ("throttle", None, vec![4]));
        assert_eq!(o.mechanism_detail, "throttling (both runtime CPUs run on real CPU 4)");
        // A fuse that never ran its thread on the object counts no step.
        let mut r = run(FuseMechanism::Throttle(NotACore::NotAPair { cpus: 2 }));
        r.log.fuses[0].dispatched_ns = None;
        assert_eq!(objects(&r, &[4, 5, 3])[0].steps, 0);
    }
}
