// SPDX-License-Identifier: GPL-2.0-only
//! The report `exec` prints on stderr after the command's own output: the
//! same model as `dyncore exec`'s — per thread its CPU time and where it
//! ran, the reconfigurations, the actuation delay and the checker's verdict
//! — all from the kernel's callbacks.

use std::fmt::Write;
use std::time::Duration;

use dyncore_core::CpuSet;
use dyncore_core::policy::ActionKind;

use crate::plan::Plan;
use crate::record::Record;
use crate::supervise::{CommandOutcome, Ending};

/// Threads listed by name; the rest are summed.
const LISTED: usize = 12;

pub fn text(
    plan: &Plan,
    record: Option<&Record>,
    ending: &Ending,
    commands: &[CommandOutcome],
    wall: Duration,
) -> String {
    let mut s = String::new();
    let cpus: CpuSet = plan.cpus.iter().copied().collect();
    let tcg = std::env::var("DYNCORE_VM_ACCEL").is_ok_and(|a| a == "tcg");
    let _ = writeln!(
        s,
        "\ndyncore-scx: policy {} on CPUs {cpus} as the kernel's scheduler (sched_ext, SCHED_EXT for the \
         command's tasks only); wall {:.2} s{}",
        plan.policy,
        wall.as_secs_f64(),
        if tcg { "; in a TCG guest: the times below are emulated, not timings" } else { "" }
    );
    for c in commands {
        let _ = writeln!(s, "  command `{}`: {}", c.label, describe(c));
    }
    match ending {
        Ending::Clean => {}
        Ending::Killed(sig) => {
            let _ = writeln!(
                s,
                "  the scheduler was killed (signal {sig}); the kernel unloaded it and returned the command's \
                 tasks to the fair class, where it ran to its end"
            );
        }
        Ending::Ejected(why) => {
            let _ = writeln!(
                s,
                "  the kernel ejected the scheduler: {why}; the command ran on in the fair class"
            );
        }
        Ending::Failed(why) => {
            let _ = writeln!(s, "  the scheduler failed: {why}; the command ran on in the fair class");
        }
    }
    let Some(r) = record else {
        let _ = writeln!(s, "  no record: the scheduler did not write one");
        return s;
    };
    let _ = writeln!(
        s,
        "  kernel {}; {} tick(s) of {} ms ({} late)",
        r.kernel,
        r.ticks,
        r.tick_ns / 1_000_000,
        r.late_ticks
    );
    let processes: std::collections::BTreeSet<i32> = r.threads.iter().map(|t| t.tgid).collect();
    let _ = writeln!(
        s,
        "  threads: {} in {} process(es); where each ran (the kernel's running/stopping callbacks):",
        r.threads.len(),
        processes.len()
    );
    let mut by_time: Vec<_> = r.threads.iter().collect();
    by_time.sort_by_key(|t| std::cmp::Reverse(t.cpu_ns));
    for t in by_time.iter().take(LISTED) {
        let ran: CpuSet = t.cpus.iter().copied().collect();
        let _ = writeln!(
            s,
            "    {:>6} {:<16} {:>9.1} ms on CPU(s) {:<8} {:>6} run(s) {:>5} sleep(s)",
            t.tid,
            t.comm,
            t.cpu_ns as f64 / 1e6,
            if ran.is_empty() { "-".to_string() } else { ran.to_string() },
            t.runs,
            t.blocks
        );
    }
    if by_time.len() > LISTED {
        let rest: u64 = by_time[LISTED..].iter().map(|t| t.cpu_ns).sum();
        let _ = writeln!(
            s,
            "    … and {} more thread(s), {:.1} ms in all",
            by_time.len() - LISTED,
            rest as f64 / 1e6
        );
    }
    let _ = writeln!(
        s,
        "  reconfigurations: {} fuse(s), {} split(s), {} offline, {} online, {} migration(s); {} dispatch(es)",
        r.count(ActionKind::Fuse),
        r.count(ActionKind::Split),
        r.count(ActionKind::Offline),
        r.count(ActionKind::Online),
        r.count(ActionKind::Migrate),
        r.count(ActionKind::Dispatch)
    );
    let c = &r.counters;
    let _ = writeln!(
        s,
        "  BPF half: {} event(s) ({} dropped); {} enqueue(s) placed and {} held; {} moved to their CPU, {} \
         refill(s), {} tick preemption(s), {} throttle(s), {} misplaced start(s), {} CPU release(s); {} map write(s), {} kick(s)",
        c.events,
        c.dropped,
        c.direct,
        c.held,
        c.moved,
        c.refills,
        c.tick_preempts,
        c.throttles,
        c.misplaced,
        c.released,
        c.map_writes,
        c.kicks
    );
    let kinds: Vec<String> = r.events_by_kind.iter().map(|(k, n)| format!("{n} {k}")).collect();
    let _ = writeln!(s, "  kernel events: {}; {} full pass(es)", kinds.join(", "), r.full_batches);
    checker(&mut s, r);
    if let Some(e) = &r.contract_error {
        let _ = writeln!(s, "  the traffic broke the policy boundary's contract: {e}");
    }
    if let Some(e) = &r.policy_check {
        let _ = writeln!(s, "  the policy's own check failed: {e}");
    }
    s
}

/// The execution checker's verdict on the record, with its first breaks.
fn checker(s: &mut String, r: &Record) {
    let v = r.verdict();
    let _ = writeln!(s, "  checker: {}", v.summary());
    for x in v.violations.iter().take(8) {
        let _ = writeln!(s, "    violation: {}", x.message);
    }
    for x in v.forced_runs.iter().take(8) {
        let _ = writeln!(s, "    kernel-forced run outside the policy's windows: {}", x.message);
    }
}

fn describe(c: &CommandOutcome) -> String {
    let took = |end: u64| format!(" after {:.2} s", end.saturating_sub(c.started_ns) as f64 / 1e9);
    match (&c.error, c.status, c.exited_ns) {
        (Some(e), _, _) => format!("did not start: {e}"),
        (None, Some(st), Some(end)) if c.timed_out => {
            format!("killed at the safety stop{} ({st})", took(end))
        }
        (None, Some(st), Some(end)) if st > 128 => format!("killed by signal {}{}", st - 128, took(end)),
        (None, Some(st), Some(end)) => format!("exited with status {st}{}", took(end)),
        _ => "not reaped".into(),
    }
}
