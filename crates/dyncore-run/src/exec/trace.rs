//! An arbiter run as a Chrome trace-event file (opens in
//! <https://ui.perfetto.dev>): one lane per runtime CPU (named after its
//! real CPU) holding the slices the policy ran there, named after each
//! thread (`comm [tid]`); a `CPU n reconfig` lane with each offline/online
//! critical path; one lane per fused object with its active span; each
//! command's start and exit as instants.
//!
//! Times are microseconds since the arbiter started, three decimals.

use std::io::Write;

use dyncore_core::CpuId;
use dyncore_runtime::arbiter::ArbiterRun;

/// Lanes of reconfigurations and objects start here.
const RECONFIG_TID: usize = 10_000;
const OBJECT_TID: usize = 20_000;

struct Us(u64);

impl std::fmt::Display for Us {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

fn json(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

/// The events, one per line, separated as JSON wants.
struct Lines<'a> {
    w: &'a mut dyn Write,
    first: bool,
}

impl Lines<'_> {
    fn line(&mut self, text: &str) -> std::io::Result<()> {
        if !std::mem::take(&mut self.first) {
            self.w.write_all(b",\n")?;
        }
        self.w.write_all(text.as_bytes())
    }

    fn lane(&mut self, tid: usize, name: &str) -> std::io::Result<()> {
        self.line(&format!(
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{tid},\"args\":{{\"name\":{}}}}}",
            json(name)
        ))?;
        self.line(&format!(
            "{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":{tid},\"args\":{{\"sort_index\":{tid}}}}}"
        ))
    }

    fn span(&mut self, tid: usize, name: &str, start: u64, end: u64, args: &str) -> std::io::Result<()> {
        self.line(&format!(
            "{{\"name\":{},\"ph\":\"X\",\"pid\":1,\"tid\":{tid},\"ts\":{},\"dur\":{},\"args\":{{{args}}}}}",
            json(name),
            Us(start),
            Us(end.saturating_sub(start))
        ))
    }

    fn instant(&mut self, name: &str, at: u64) -> std::io::Result<()> {
        self.line(&format!(
            "{{\"name\":{},\"ph\":\"i\",\"s\":\"p\",\"pid\":1,\"tid\":0,\"ts\":{}}}",
            json(name),
            Us(at)
        ))
    }
}

/// Writes `run` (runtime CPU i on real CPU `real[i]`) as a trace.
pub fn write(w: &mut dyn Write, run: &ArbiterRun, real: &[CpuId], title: &str) -> std::io::Result<()> {
    let log = &run.log;
    writeln!(
        w,
        "{{\"displayTimeUnit\":\"ns\",\"otherData\":{{\"command\":{}}},\"traceEvents\":[",
        json(title)
    )?;
    let mut l = Lines { w, first: true };
    l.line(&format!(
        "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{{\"name\":{}}}}}",
        json(&format!("dyncore exec: {title}"))
    ))?;
    let reconfigured: Vec<CpuId> = {
        let mut v: Vec<CpuId> = log.reconfigs.iter().flat_map(|r| r.cpus.iter()).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    for (cpu, r) in real.iter().enumerate() {
        l.lane(1 + cpu, &format!("CPU {cpu} (real CPU {r})"))?;
        if reconfigured.contains(&cpu) {
            l.lane(RECONFIG_TID + cpu, &format!("CPU {cpu} reconfig"))?;
        }
    }
    for s in &log.slices {
        let t = &log.threads[s.thread];
        let args = format!("\"thread\":{},\"tid\":{},\"object_cpus\":{}", s.thread, t.tid, s.object_cpus);
        l.span(1 + s.cpu, &format!("{} [{}]", t.comm, t.tid), s.start_ns, s.end_ns, &args)?;
    }
    for r in &log.reconfigs {
        let name = if r.online { "online" } else { "offline" };
        let steps: Vec<String> =
            r.steps_ns.iter().map(|(n, ns)| format!("{}:{}", json(n), Us(*ns))).collect();
        for cpu in r.cpus.iter() {
            l.span(RECONFIG_TID + cpu, name, r.started_ns, r.finished_ns, &steps.join(","))?;
        }
    }
    for (k, f) in log.fuses.iter().enumerate() {
        let t = &log.threads[f.thread];
        l.lane(OBJECT_TID + k, &format!("object {k}"))?;
        let end = f.split_ns.unwrap_or(run.end_ns);
        let args = format!("\"thread\":{},\"cpus\":{}", f.thread, json(&f.object.cpus().to_string()));
        l.span(OBJECT_TID + k, &format!("{} [{}] fused", t.comm, t.tid), f.fused_ns, end, &args)?;
    }
    for c in &log.commands {
        let name = c.argv.first().map_or("command", String::as_str);
        l.instant(&format!("start {name} (pid {})", c.pid), c.started_ns)?;
        if let (Some(at), Some(exit)) = (c.exited_ns, c.exit) {
            l.instant(&format!("{name} (pid {}): {exit}", c.pid), at)?;
        }
    }
    l.w.write_all(b"\n]}\n")
}
