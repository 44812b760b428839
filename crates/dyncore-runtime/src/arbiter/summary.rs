//! The summary of an arbiter run that a frontend prints after the
//! command's own output: the mechanism, each command's exit and wall time,
//! each thread's CPU time and time fused, the reconfigurations, the
//! actuation delays, and what the startup sweep and the teardown did.

use std::fmt::Write as _;

use super::record::{ArbiterRun, quantile};

fn ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

fn us(ns: u64) -> String {
    format!("{:.1} µs", ns as f64 / 1e3)
}

impl ArbiterRun {
    /// The summary, as lines of text (see the module doc).
    pub fn summary(&self) -> String {
        let log = &self.log;
        let mut s = String::new();
        let _ = writeln!(s, "mechanism: {}", self.mechanism);
        for n in self.notes.iter().chain(&self.swept) {
            let _ = writeln!(s, "  {n}");
        }
        for (i, c) in log.commands.iter().enumerate() {
            let wall = c.exited_ns.map(|e| ms(e.saturating_sub(c.started_ns))).unwrap_or_else(|| "-".into());
            let exit = c.exit.map(|e| e.to_string()).unwrap_or_else(|| "not reaped".into());
            let _ = writeln!(
                s,
                "command {i} (pid {}): {exit}, wall {wall}, CPU {} (with the children it waited for): {}",
                c.pid,
                ms(c.cpu_ns),
                c.argv.join(" ")
            );
            if let Some(e) = &c.exec_error {
                let _ = writeln!(s, "  {e}");
            }
        }
        let _ = writeln!(s, "threads: {} followed", log.threads.len());
        let shown = 20;
        for t in log.threads.iter().take(shown) {
            let _ = writeln!(
                s,
                "  thread {} (tid {}, {}): CPU {}, dispatched {}, fused {}",
                t.thread,
                t.tid,
                t.comm,
                ms(t.cpu_ns),
                ms(t.dispatched_ns),
                ms(t.fused_ns)
            );
        }
        if log.threads.len() > shown {
            let _ = writeln!(s, "  ... {} more (all in the report)", log.threads.len() - shown);
        }
        let latency: Vec<u64> =
            log.threads.iter().filter_map(|t| t.spawned_mono_ns.checked_sub(t.created_mono_ns?)).collect();
        if !latency.is_empty() {
            let _ = writeln!(
                s,
                "  discovery: from creation to Spawn, p50 {}, p99 {} ({} threads)",
                us(quantile(&latency, 0.5)),
                us(quantile(&latency, 0.99)),
                latency.len()
            );
        }
        for online in [false, true] {
            let r: Vec<u64> =
                log.reconfigs.iter().filter(|r| r.online == online).map(|r| r.critical_ns).collect();
            let _ = writeln!(
                s,
                "reconfigurations: {} {} (fuse{}), critical path p50 {}, p99 {}",
                r.len(),
                if online { "online" } else { "offline" },
                if online { " split" } else { "" },
                us(quantile(&r, 0.5)),
                us(quantile(&r, 0.99))
            );
        }
        if log.blocks + log.wakes > 0 {
            let _ = writeln!(
                s,
                "sleeps: {} blocks, {} wakes (a thread asleep for a tick gives its CPU back)",
                log.blocks, log.wakes
            );
        }
        let _ = writeln!(s, "actuation delay:");
        for line in log.actuation.summary() {
            let _ = writeln!(s, "  {line}");
        }
        if log.duties_not_enforced > 0 {
            let _ = writeln!(s, "  {} duty changes not enforced (affinity only)", log.duties_not_enforced);
        }
        match &self.execution {
            Some(e) => s += &e.summary(),
            None => {
                s += "execution check: not run (affinity only: a held thread is SCHED_IDLE, not stopped)\n"
            }
        }
        let _ = writeln!(
            s,
            "arbiter: {} tick rounds ({} missed), {} discovery passes, {} CPU over {}",
            log.ticks.rounds,
            log.ticks.missed,
            log.polls,
            ms(log.controller_cpu_ns),
            ms(self.end_ns)
        );
        for t in &self.teardown {
            let _ = writeln!(s, "teardown: {t}");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::super::record::{ArbiterLog, CommandRecord, Exit, ThreadRecord};
    use super::*;

    #[test]
    fn the_summary_names_the_exit_the_threads_and_the_delays() {
        let mut log = ArbiterLog::default();
        log.commands.push(CommandRecord {
            argv: vec!["gzip".into(), "-9".into(), "f".into()],
            pid: 10,
            started_ns: 1_000_000,
            exited_ns: Some(251_000_000),
            exit: Some(Exit::Code(0)),
            cpu_ns: 240_000_000,
            exec_error: None,
        });
        log.threads.push(ThreadRecord {
            thread: 0,
            tid: 10,
            pid: 10,
            comm: "gzip".into(),
            command: 0,
            spawned_ns: 1_000_000,
            spawned_mono_ns: 5_000,
            created_mono_ns: Some(4_000),
            exited_ns: Some(250_000_000),
            cpu_ns: 239_000_000,
            fused_ns: 100_000_000,
            dispatched_ns: 249_000_000,
        });
        log.actuation.move_ns = vec![40_000, 60_000];
        let run = ArbiterRun {
            log,
            events: String::new(),
            actions: String::new(),
            end_ns: 260_000_000,
            mechanism: "cgroup v1".into(),
            notes: vec!["cgroup v2 not used: no controllers".into()],
            swept: vec![],
            teardown: vec![],
            execution: None,
        };
        let s = run.summary();
        assert!(s.contains("command 0 (pid 10): exit 0, wall 250.0 ms, CPU 240.0 ms"), "{s}");
        assert!(
            s.contains("thread 0 (tid 10, gzip): CPU 239.0 ms, dispatched 249.0 ms, fused 100.0 ms"),
            "{s}"
        );
        assert!(s.contains("discovery: from creation to Spawn, p50 1.0 µs"), "{s}");
        assert!(s.contains("thread move: 2 samples, p50 60.0 µs"), "{s}");
        assert!(s.contains("  cgroup v2 not used: no controllers"), "{s}");
        assert!(s.contains("execution check: not run (affinity only"), "{s}");
    }
}
