//! `trace.json`: a scenario's simulated runs as a Chrome trace-event file,
//! which opens in <https://ui.perfetto.dev> and `chrome://tracing`.
//!
//! Layout: one process per run (named by the run's label, in the scenario's
//! order); in each, one lane per CPU (`CPU n`) holding the threads that ran on
//! it as slices, a `CPU n reconfig` lane under it when that CPU fused or
//! split, and one lane per fused execution object (`object k`) holding its
//! active spans. Program starts, exits and rebalances are process-wide
//! instants.
//!
//! Invariant: the reconfigurations of one CPU never overlap (the engine
//! serialises them, as the kernel serialises hotplug), so one lane per CPU
//! nests properly; asserted in debug builds.
//!
//! Times are virtual microseconds with three decimals (nanosecond precision).
//! The file is streamed (runs can hold millions of slices) and is
//! byte-for-byte deterministic: same result in, same bytes out.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

use anyhow::Result;
use dyncore_sim::{RunResult, ScenarioResult, TraceEvent};

/// Lanes of fused objects start here, after every CPU's lanes.
const OBJECT_TID_BASE: usize = 1_000_000;

/// Writes `result` to `path` through a temporary file (never half-written).
pub fn write_chrome_trace(path: &Path, result: &ScenarioResult) -> Result<()> {
    crate::report::write_atomic(path, |w| write_to(w, result))
}

/// Microseconds with three decimals, from nanoseconds, without going
/// through floating point (so the digits are exact).
struct Us(u64);

impl std::fmt::Display for Us {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serialises")
}

/// The `traceEvents` array being written: puts the separator before every
/// event but the first, so each event is one line.
struct Events<'a> {
    w: &'a mut dyn Write,
    first: bool,
}

impl Events<'_> {
    fn next(&mut self) -> std::io::Result<&mut dyn Write> {
        if !std::mem::take(&mut self.first) {
            self.w.write_all(b",\n")?;
        }
        Ok(&mut *self.w)
    }

    /// A metadata event (`process_name`, `thread_sort_index`, ...).
    fn meta(&mut self, pid: usize, what: &str, tid: usize, args: &str) -> std::io::Result<()> {
        let w = self.next()?;
        write!(w, "{{\"name\":\"{what}\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{{args}}}}}")
    }

    /// A lane's name and its place in the order of lanes.
    fn lane(&mut self, pid: usize, tid: usize, name: &str) -> std::io::Result<()> {
        self.meta(pid, "thread_name", tid, &format!("\"name\":{}", json_str(name)))?;
        self.meta(pid, "thread_sort_index", tid, &format!("\"sort_index\":{tid}"))
    }
}

/// Writes the trace to any writer.
pub fn write_to(w: &mut dyn Write, result: &ScenarioResult) -> std::io::Result<()> {
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"otherData\":{")?;
    write!(w, "\"scenario\":{},\"seed\":{}", json_str(&result.name), result.seed)?;
    w.write_all(b"},\"traceEvents\":[\n")?;
    let mut events = Events { w, first: true };
    for (ri, run) in result.runs.iter().enumerate() {
        write_run(&mut events, ri, run)?;
    }
    events.w.write_all(b"\n]}\n")
}

/// The lanes a run needs beyond one per CPU: the CPUs that reconfigured,
/// and the fused objects.
fn extra_lanes(run: &RunResult) -> (BTreeSet<usize>, BTreeSet<usize>) {
    let mut last_end: BTreeMap<usize, u64> = BTreeMap::new();
    let mut objects = BTreeSet::new();
    for ev in &run.trace {
        match ev {
            TraceEvent::Reconfig { cpu, start_ns, end_ns, .. } => {
                let prev = last_end.insert(*cpu, *end_ns);
                debug_assert!(
                    prev.is_none_or(|end| end <= *start_ns),
                    "run `{}`: reconfigurations of CPU {cpu} overlap (one starts at {start_ns} ns before the last ends at {prev:?} ns)",
                    run.label
                );
            }
            TraceEvent::ObjectSpan { object, .. } => {
                objects.insert(*object);
            }
            _ => {}
        }
    }
    (last_end.into_keys().collect(), objects)
}

fn write_run(events: &mut Events<'_>, ri: usize, run: &RunResult) -> std::io::Result<()> {
    let pid = ri + 1;
    events.meta(pid, "process_name", 0, &format!("\"name\":{}", json_str(&run.label)))?;
    events.meta(pid, "process_sort_index", 0, &format!("\"sort_index\":{ri}"))?;
    let (reconfiguring, objects) = extra_lanes(run);
    for cpu in 0..run.cpus {
        events.lane(pid, cpu_tid(cpu), &format!("CPU {cpu}"))?;
    }
    for &cpu in &reconfiguring {
        events.lane(pid, reconfig_tid(cpu), &format!("CPU {cpu} reconfig"))?;
    }
    for &o in &objects {
        events.lane(pid, OBJECT_TID_BASE + o, &format!("object {o}"))?;
    }
    for ev in &run.trace {
        write_event(events.next()?, pid, ev)?;
    }
    Ok(())
}

/// One trace event as a complete (`X`) or instant (`i`) event.
fn write_event(w: &mut dyn Write, pid: usize, ev: &TraceEvent) -> std::io::Result<()> {
    match ev {
        TraceEvent::Slice { cpu, thread, name, start_ns, end_ns, fused } => write!(
            w,
            "{{\"name\":{},\"cat\":\"thread\",\"ph\":\"X\",\"pid\":{pid},\"tid\":{},\"ts\":{},\"dur\":{},\
             \"args\":{{\"thread\":{thread},\"fused\":{fused}}}}}",
            json_str(name),
            cpu_tid(*cpu),
            Us(*start_ns),
            Us(end_ns.saturating_sub(*start_ns)),
        ),
        TraceEvent::ObjectSpan { object, cpus, name, start_ns, end_ns } => write!(
            w,
            "{{\"name\":{},\"cat\":\"object\",\"ph\":\"X\",\"pid\":{pid},\"tid\":{},\"ts\":{},\"dur\":{},\
             \"args\":{{\"object\":{object},\"cpus\":{}}}}}",
            json_str(name),
            OBJECT_TID_BASE + object,
            Us(*start_ns),
            Us(end_ns.saturating_sub(*start_ns)),
            json_str(cpus),
        ),
        TraceEvent::Reconfig { cpu, name, start_ns, end_ns } => write!(
            w,
            "{{\"name\":{},\"cat\":\"reconfig\",\"ph\":\"X\",\"pid\":{pid},\"tid\":{},\"ts\":{},\"dur\":{}}}",
            json_str(name),
            reconfig_tid(*cpu),
            Us(*start_ns),
            Us(end_ns.saturating_sub(*start_ns)),
        ),
        TraceEvent::Instant { name, t_ns } => write!(
            w,
            "{{\"name\":{},\"cat\":\"event\",\"ph\":\"i\",\"s\":\"p\",\"pid\":{pid},\"tid\":0,\"ts\":{}}}",
            json_str(name),
            Us(*t_ns),
        ),
    }
}

/// CPU `n`'s lane; its reconfiguration lane sorts right under it.
fn cpu_tid(cpu: usize) -> usize {
    2 * cpu + 1
}

fn reconfig_tid(cpu: usize) -> usize {
    cpu_tid(cpu) + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use dyncore_sim::{ReconfigStats, RunResult};

    fn run(label: &str, trace: Vec<TraceEvent>) -> RunResult {
        RunResult {
            label: label.into(),
            series: String::new(),
            machine: "dynamic".into(),
            policy: "chameleon".into(),
            reconfig_mechanism: "proxy-apic".into(),
            reconfig_profile: None,
            cpus: 2,
            end_ns: 10_000,
            finished: true,
            programs: vec![],
            per_cpu: vec![],
            reconfig: ReconfigStats::default(),
            ipis: 0,
            proxy_ipis: 0,
            migrations: 0,
            defrag_migrations: 0,
            events: 0,
            decisions: 0,
            allocation: vec![],
            energy: Default::default(),
            trace,
            policy_trace: None,
        }
    }

    fn sample() -> ScenarioResult {
        ScenarioResult {
            name: "t".into(),
            title: "T".into(),
            seed: 7,
            runs: vec![
                run(
                    "a \"quoted\"",
                    vec![
                        TraceEvent::Instant { name: "start gcc".into(), t_ns: 0 },
                        TraceEvent::Slice {
                            cpu: 1,
                            thread: 3,
                            name: "gcc#0".into(),
                            start_ns: 1_500,
                            end_ns: 4_001,
                            fused: true,
                        },
                        TraceEvent::ObjectSpan {
                            object: 4,
                            cpus: "0-1".into(),
                            name: "fuse-2".into(),
                            start_ns: 1_000,
                            end_ns: 5_000,
                        },
                        TraceEvent::Reconfig { cpu: 0, name: "fuse".into(), start_ns: 900, end_ns: 1_000 },
                        // Back to back, as the engine serialises them.
                        TraceEvent::Reconfig { cpu: 1, name: "fuse".into(), start_ns: 100, end_ns: 300 },
                        TraceEvent::Reconfig { cpu: 1, name: "split".into(), start_ns: 300, end_ns: 800 },
                        TraceEvent::Reconfig { cpu: 1, name: "fuse".into(), start_ns: 800, end_ns: 900 },
                    ],
                ),
                run("b", vec![]),
            ],
        }
    }

    fn render(r: &ScenarioResult) -> String {
        let mut v = Vec::new();
        write_to(&mut v, r).unwrap();
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn trace_parses_as_chrome_json_with_lanes_per_cpu_and_object() {
        let text = render(&sample());
        let doc: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let evs = doc["traceEvents"].as_array().unwrap();
        let names: Vec<(&str, u64, u64)> = evs
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .map(|e| {
                (e["args"]["name"].as_str().unwrap(), e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap())
            })
            .collect();
        // Run 1: CPU 0 (tid 1), CPU 1 (tid 3), their reconfiguration lanes
        // right under them (2, 4), object 4; run 2: two CPUs.
        assert_eq!(
            names,
            vec![
                ("CPU 0", 1, 1),
                ("CPU 1", 1, 3),
                ("CPU 0 reconfig", 1, 2),
                ("CPU 1 reconfig", 1, 4),
                ("object 4", 1, 1_000_004),
                ("CPU 0", 2, 1),
                ("CPU 1", 2, 3)
            ]
        );
        let lanes: Vec<(u64, u64)> = evs
            .iter()
            .filter(|e| e["cat"] == "reconfig")
            .map(|e| ((e["ts"].as_f64().unwrap() * 1000.0).round() as u64, e["tid"].as_u64().unwrap()))
            .collect();
        assert_eq!(lanes, vec![(900, 2), (100, 4), (300, 4), (800, 4)]);
        let slice = evs.iter().find(|e| e["cat"] == "thread").unwrap();
        // 1_500 ns = 1.5 µs; 4_001 - 1_500 = 2_501 ns = 2.501 µs.
        assert_eq!(slice["ts"].as_f64().unwrap(), 1.5);
        assert_eq!(slice["dur"].as_f64().unwrap(), 2.501);
        assert_eq!(slice["tid"], 3);
        assert_eq!(slice["args"]["fused"], true);
        let obj = evs.iter().find(|e| e["cat"] == "object").unwrap();
        assert_eq!(obj["args"]["cpus"], "0-1");
        assert_eq!(obj["dur"].as_f64().unwrap(), 4.0);
        let inst = evs.iter().find(|e| e["ph"] == "i").unwrap();
        assert_eq!(inst["s"], "p");
        let proc = evs.iter().find(|e| e["name"] == "process_name").unwrap();
        assert_eq!(proc["args"]["name"], "a \"quoted\"");
    }

    /// The engine never overlaps two reconfigurations of a CPU; if it ever
    /// did, debug builds say so instead of drawing a broken lane.
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "reconfigurations of CPU 1 overlap")]
    fn overlapping_reconfigurations_are_refused_in_debug_builds() {
        let mut r = sample();
        r.runs[0].trace.push(TraceEvent::Reconfig {
            cpu: 1,
            name: "split".into(),
            start_ns: 850,
            end_ns: 950,
        });
        render(&r);
    }

    #[test]
    fn same_result_gives_same_bytes_and_file_matches_writer() {
        let r = sample();
        assert_eq!(render(&r), render(&r));
        let dir = std::env::temp_dir().join(format!("dyncore-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("trace.json");
        write_chrome_trace(&p, &r).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), render(&r));
        assert!(!crate::report::tmp_path(&p).exists());
        std::fs::remove_dir_all(&dir).ok();
    }
}
