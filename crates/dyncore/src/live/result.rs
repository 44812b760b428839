//! A live run as the simulator's result type (`dyncore_sim::RunResult`),
//! so the same report code — figures, tables, plots, the Perfetto trace —
//! renders it. Times are wall-clock ns since the run started.
//!
//! What each field means live:
//!
//! * a program's completion is from its first thread's spawn to its last
//!   thread's kernel reporting done; its speedup is its units per second
//!   over its kernel's units per second alone at the baseline duty
//!   (calibrated in the same run), and its relative time the inverse;
//! * a CPU's busy time is the time the policy had a thread running on it
//!   (as in the simulator; the time the runtime CPU really spent in steps,
//!   about its duty of that, is in the duty report), its borrowed time the
//!   time it was offline in a fused object, its reconfiguration time the
//!   critical paths of the offlines and onlines that took it;
//! * reconfiguration time is the sum of the critical paths the runtime
//!   measured (what `ReconfigDone` told the policy);
//! * IPIs are not sent live (the simulator's are counted only).

use std::collections::BTreeMap;

use dyncore_core::Nanos;
use dyncore_core::policy::Action;
use dyncore_core::policy::trace::parse_actions;
use dyncore_sim::scenario::{PolicyKind, RunSpec};
use dyncore_sim::{AllocSample, CpuStats, PolicyTrace, ProgramResult, ReconfigStats, RunResult, TraceEvent};

use super::run::{LiveRunOutput, Outcome};

/// The name reports give the live backend's reconfiguration mechanism.
pub const LIVE_MECHANISM: &str = "live: Bolt on runtime CPUs";

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

/// `out` as a `RunResult` of run `spec`.
pub fn run_result(spec: &RunSpec, out: &LiveRunOutput) -> RunResult {
    let log = &out.run.log;
    let end = out.run.end_ns;
    let actions = parse_actions(&out.run.actions).expect("the executor writes the trace format");
    let ncpus = out.fit.real.len();
    let mut per_cpu: Vec<CpuStats> = (0..ncpus).map(|cpu| CpuStats { cpu, ..CpuStats::default() }).collect();
    for s in &log.slices {
        per_cpu[s.cpu].busy_ns += s.end_ns - s.start_ns;
    }
    for r in &log.reconfigs {
        for c in r.cpus.iter() {
            per_cpu[c].reconfig_ns += r.critical_ns;
        }
    }
    for (c, s) in per_cpu.iter_mut().enumerate() {
        s.borrowed_ns = log.borrowed_ns[c];
        s.utilisation = if end > 0 { round4((s.busy_ns + s.borrowed_ns) as f64 / end as f64) } else { 0.0 };
    }
    let fused_slices: Nanos =
        log.slices.iter().filter(|s| s.object_cpus > 1).map(|s| s.end_ns - s.start_ns).sum();
    let reconfig = ReconfigStats {
        fuses: log.fuses.len() as u64,
        splits: log.fuses.iter().filter(|f| f.split_ns.is_some()).count() as u64,
        time_ns: log.reconfigs.iter().map(|r| r.critical_ns).sum(),
        fused_ns: fused_slices,
    };
    let count = |f: fn(&Action) -> bool| actions.iter().filter(|(_, a)| f(a)).count() as u64;
    let machine = dyncore_sim::machine::MachineSpec::build(spec).expect("validated");
    // As the simulator says: Chameleon on a machine that fuses.
    let reconfigures = spec.policy == PolicyKind::Chameleon && machine.max_fuse > 1;
    RunResult {
        label: spec.label.clone(),
        series: spec.series.clone().unwrap_or_else(|| spec.label.clone()),
        machine: spec.machine.clone(),
        policy: match spec.policy {
            PolicyKind::Linux => "linux".into(),
            PolicyKind::Chameleon => "chameleon".into(),
        },
        reconfig_mechanism: if reconfigures { LIVE_MECHANISM.into() } else { "none".into() },
        reconfig_profile: None,
        cpus: ncpus,
        end_ns: end,
        finished: out.outcome == Outcome::Finished,
        programs: programs(out),
        per_cpu,
        reconfig,
        ipis: 0,
        proxy_ipis: 0,
        migrations: count(|a| matches!(a, Action::Migrate { .. })),
        defrag_migrations: count(|a| matches!(a, Action::Migrate { defrag: true, .. })),
        events: out.run.events.lines().count() as u64,
        decisions: out.decisions,
        allocation: allocation(out, &actions),
        trace: trace(out),
        policy_trace: Some(PolicyTrace { events: out.run.events.clone(), actions: out.run.actions.clone() }),
    }
}

/// When program `p` started and, if every one of its threads finished its
/// work, when it finished.
fn life(out: &LiveRunOutput, p: usize) -> (Nanos, Option<Nanos>) {
    let log = &out.run.log;
    let ts = &out.threads[p];
    let start = ts.first().map_or(out.programs[p].start_ns, |&t| log.threads[t].spawned_ns);
    let ok = !ts.is_empty() && ts.iter().all(|&t| log.threads[t].done_ns.is_some() && !log.threads[t].failed);
    let finish = ok.then(|| ts.iter().filter_map(|&t| log.threads[t].done_ns).max().unwrap_or(start));
    (start, finish)
}

fn programs(out: &LiveRunOutput) -> Vec<ProgramResult> {
    let log = &out.run.log;
    (0..out.programs.len())
        .map(|p| {
            let plan = &out.programs[p];
            let ts = &out.threads[p];
            let (start, finish) = life(out, p);
            let completion = finish.map(|f| f - start);
            let units: u64 = ts.iter().map(|&t| log.threads[t].units).sum();
            let rate = out.rates[out.kernel[p]].units_per_s();
            // Work done in baseline seconds over the time it took.
            let speedup = completion.map(|c| units as f64 / rate / (c.max(1) as f64 / 1e9));
            ProgramResult {
                label: plan.label.clone(),
                program: plan.program.name.to_string(),
                instance: plan.instance,
                threads: ts.len() as u32,
                start_ns: start,
                finish_ns: finish,
                completion_ns: completion,
                work_ns: plan.work_ns,
                speedup: speedup.map(round4),
                relative_time: speedup.map(|s| round4(1.0 / s)),
                fused_ns: log
                    .slices
                    .iter()
                    .filter(|s| s.object_cpus > 1 && ts.contains(&s.thread))
                    .map(|s| s.end_ns - s.start_ns)
                    .sum(),
            }
        })
        .collect()
}

/// The program each thread belongs to.
fn program_of(out: &LiveRunOutput) -> BTreeMap<usize, usize> {
    out.threads.iter().enumerate().flat_map(|(p, ts)| ts.iter().map(move |&t| (t, p))).collect()
}

/// CPUs each running sequential program's object holds, at every change,
/// from the policy's `Object` actions and the programs' starts and ends
/// (as the simulator samples it).
fn allocation(out: &LiveRunOutput, actions: &[(Nanos, Action)]) -> Vec<AllocSample> {
    let of = program_of(out);
    let tracked = |p: usize| {
        let plan = &out.programs[p];
        plan.wants_object && plan.program.is_sequential() && !out.threads[p].is_empty()
    };
    // (time, program, new size; None = gone)
    let mut changes: Vec<(Nanos, usize, Option<u32>)> = Vec::new();
    for p in (0..out.programs.len()).filter(|&p| tracked(p)) {
        let (start, finish) = life(out, p);
        changes.push((start, p, Some(0)));
        if let Some(f) = finish {
            changes.push((f, p, None));
        }
    }
    for (t, a) in actions {
        if let Action::Object { thread, object } = a
            && let Some(&p) = of.get(thread)
            && tracked(p)
        {
            changes.push((*t, p, Some(object.as_ref().map_or(0, |o| o.len() as u32))));
        }
    }
    changes.sort_by_key(|c| c.0);
    let mut now: BTreeMap<usize, u32> = BTreeMap::new();
    let mut gone = vec![false; out.programs.len()];
    let mut samples: Vec<AllocSample> = Vec::new();
    for (i, &(t, p, size)) in changes.iter().enumerate() {
        match size {
            _ if gone[p] => {}
            Some(s) => {
                now.insert(p, s);
            }
            None => {
                gone[p] = true;
                now.remove(&p);
            }
        }
        if changes.get(i + 1).is_some_and(|n| n.0 == t) {
            continue;
        }
        let cpus_by_program: Vec<(String, u32)> =
            now.iter().map(|(&p, &s)| (out.programs[p].name.clone(), s)).collect();
        if samples.last().is_some_and(|l| l.cpus_by_program == cpus_by_program) {
            continue;
        }
        samples.push(AllocSample { t_ns: t, cpus_by_program });
    }
    samples
}

/// The Perfetto trace events of the run: as the simulator's (CPUs as
/// lanes, threads as slices, fused objects as spans, reconfigurations,
/// program starts and exits), from wall-clock times.
fn trace(out: &LiveRunOutput) -> Vec<TraceEvent> {
    let log = &out.run.log;
    let of = program_of(out);
    let name = |t: usize| out.programs[of[&t]].name.clone();
    let mut ev = Vec::new();
    for p in 0..out.programs.len() {
        let (start, finish) = life(out, p);
        if !out.threads[p].is_empty() {
            ev.push(TraceEvent::Instant { name: format!("start {}", out.programs[p].name), t_ns: start });
        }
        if let Some(f) = finish {
            ev.push(TraceEvent::Instant { name: format!("exit {}", out.programs[p].name), t_ns: f });
        }
    }
    for s in &log.slices {
        ev.push(TraceEvent::Slice {
            cpu: s.cpu,
            thread: s.thread,
            name: name(s.thread),
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            fused: s.object_cpus > 1,
        });
    }
    for f in &log.fuses {
        let cpus = f.object.cpus();
        ev.push(TraceEvent::ObjectSpan {
            object: f.thread,
            cpus: cpus.to_string(),
            name: format!("{} on {} CPUs", name(f.thread), cpus.len()),
            start_ns: f.fused_ns,
            end_ns: f.split_ns.unwrap_or(out.run.end_ns),
        });
    }
    for r in &log.reconfigs {
        ev.push(TraceEvent::Reconfig {
            cpu: r.representative,
            name: if r.online { "split" } else { "fuse" }.into(),
            start_ns: r.started_ns,
            end_ns: r.finished_ns,
        });
    }
    ev
}
