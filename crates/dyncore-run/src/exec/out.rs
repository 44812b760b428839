//! What `dyncore exec` writes where asked: the Perfetto trace (`--trace`)
//! and the report folder (`--out DIR`):
//!
//! | file | what |
//! |---|---|
//! | `report.md` | the command, the policy and its parameters, the summary, every thread |
//! | `summary.txt` | the summary printed on stderr |
//! | `threads.csv` | one line per thread: ids, name, life, CPU time, time dispatched and fused, discovery latency |
//! | `events.jsonl`, `actions.jsonl` | the policy's traffic (`dyncore_core::policy::trace`: replayable) |
//! | `trace.json` | the Perfetto trace |
//!
//! Every file is written whole or not at all (a temporary file renamed).
//! Paths are checked before the command starts, so that a bad one costs
//! no run.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use dyncore_runtime::arbiter::ArbiterRun;

use super::Plan;

/// Writes `path` through a temporary file beside it.
fn write_atomic(path: &Path, fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<(), String> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let _unfinished = dyncore_report::outdir::InProgress::unfinished(&tmp);
    let r = (|| {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        fill(&mut w)?;
        w.into_inner().map_err(|e| e.into_error())?;
        std::fs::rename(&tmp, path)
    })();
    r.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("writing {}: {e}", path.display())
    })
}

/// The command as a shell would show it.
pub fn command_line(plan: &Plan) -> String {
    plan.argv.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ")
}

fn threads_csv(run: &ArbiterRun) -> String {
    let mut s = String::from(
        "thread,tid,pid,comm,command,spawned_ns,exited_ns,cpu_ns,dispatched_ns,fused_ns,discovery_ns\n",
    );
    for t in &run.log.threads {
        let discovery = t.created_mono_ns.and_then(|c| t.spawned_mono_ns.checked_sub(c));
        let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{}",
            t.thread,
            t.tid,
            t.pid,
            t.comm.replace([',', '\n'], "_"),
            t.command,
            t.spawned_ns,
            opt(t.exited_ns),
            t.cpu_ns,
            t.dispatched_ns,
            t.fused_ns,
            opt(discovery)
        );
    }
    s
}

fn report_md(plan: &Plan, run: &ArbiterRun, summary: &str) -> String {
    let mut s = format!("# dyncore exec: `{}`\n\n", command_line(plan));
    let params: Vec<String> = plan.params.iter().map(|(k, v)| format!("`{k} = {v}`")).collect();
    let _ = writeln!(
        s,
        "Policy `{}`{}; real CPUs {:?}; {}.\n",
        plan.policy,
        if params.is_empty() { String::new() } else { format!(" ({})", params.join(", ")) },
        plan.cfg.cpus,
        run.mechanism
    );
    let _ = writeln!(
        s,
        "Machine: {}. Command: `{}`.\n",
        dyncore_report::machine::machine_description(),
        dyncore_report::machine::command_line()
    );
    let _ = writeln!(s, "## Summary\n\n```text\n{summary}```\n\n## Threads\n");
    s += "| thread | tid | name | CPU ms | dispatched ms | fused ms |\n|---:|---:|---|---:|---:|---:|\n";
    for t in &run.log.threads {
        let ms = |ns: u64| format!("{:.1}", ns as f64 / 1e6);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            t.thread,
            t.tid,
            t.comm.replace('|', "\\|"),
            ms(t.cpu_ns),
            ms(t.dispatched_ns),
            ms(t.fused_ns)
        );
    }
    s
}

/// Writes the trace and the report folder, where asked.
pub fn write(plan: &Plan, run: &ArbiterRun, trace: Option<&Path>, out: Option<&Path>) -> Result<(), String> {
    let title = command_line(plan);
    let trace_to = |path: &Path| write_atomic(path, |w| super::trace::write(w, run, &plan.cfg.cpus, &title));
    if let Some(t) = trace {
        trace_to(t)?;
    }
    let Some(dir) = out else { return Ok(()) };
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let summary = super::header(plan, run) + &run.summary();
    let text = |name: &str, body: &str| write_atomic(&dir.join(name), |w| w.write_all(body.as_bytes()));
    text("summary.txt", summary.trim_start())?;
    text("report.md", &report_md(plan, run, summary.trim_start()))?;
    text("threads.csv", &threads_csv(run))?;
    text("events.jsonl", &run.events)?;
    text("actions.jsonl", &run.actions)?;
    trace_to(&dir.join("trace.json"))
}
