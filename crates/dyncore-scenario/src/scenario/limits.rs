//! What every scenario field accepts, and why the bounds are where they are.
//!
//! One table serves three readers: [`Scenario::validate`](super::Scenario::validate)
//! refuses values outside it, the command rewrites serde's type errors
//! (`expected u32`, `untagged enum TaxSpec`) into [`accepted`]'s words, and
//! docs/scenarios.md lists the same limits with the same reasons. The bounds
//! are there so that `check` refuses what `run` could not hold in memory or
//! finish in reasonable time: every one is far above what the paper's
//! experiments (the shipped scenarios) and `dyncore bench sim` use.

use dyncore_core::CpuSet;

use crate::machine::ARCHS;
use crate::workload::PROGRAMS;

/// Largest simulated machine, CPUs (`nodes` × `cpus_per_node`): 4× the
/// 1024-CPU machine of `bench sim`. Per-CPU state is small, but every CPU
/// ticks, so events per virtual second grow with it.
pub const MAX_MACHINE_CPUS: usize = 4096;
/// Threads of one parallel program: one per CPU of the largest machine.
pub const MAX_THREADS: u32 = 4096;
/// Instances of one `[[run.workload]]`.
pub const MAX_COUNT: u32 = 4096;
/// Threads of a whole run (Σ count × threads): 4 per CPU of the largest
/// machine. Each thread has scheduler and simulator state created at start.
pub const MAX_RUN_THREADS: u64 = 16_384;
/// Runs in one scenario: a finished run's results (and its trace, up to
/// `TRACE_CAP` events, tens of MB) are kept until the report is written.
pub const MAX_RUNS: usize = 64;
/// Work of one program, ms of one baseline CPU: at least 1 µs (work is
/// counted in whole ns), at most 10⁷ ms (2.8 hours).
pub const WORK_MS: (f64, f64) = (0.001, 1e7);
/// Work of a whole run (Σ count × work_ms). Task-parallel programs draw their
/// whole pool of tasks at start (Fibonacci: tasks of 1–3 ms), so 10⁷ ms is
/// up to 10⁷ tasks, 80 MB.
pub const MAX_RUN_WORK_MS: f64 = 1e7;
/// Latest start, ms: one virtual day.
pub const MAX_START_MS: f64 = 86_400_000.0;
/// `every_ms`, the spacing of a workload's instances: at least 1 µs, at
/// most one virtual day (every instance must start by `MAX_START_MS`).
pub const EVERY_MS: (f64, f64) = (0.001, MAX_START_MS);
/// Scheduler tick: from 100 µs (a 10 kHz tick; Linux's fastest is 1 ms) to 1 s.
/// Every CPU ticks, so a tick of 1 ns would mean 10⁹ events per CPU per
/// virtual second.
pub const TICK_NS: (u64, u64) = (100_000, 1_000_000_000);
/// Largest CFS minimum granularity: 10 s (the paper's is 16 ms).
pub const MAX_MIN_GRANULARITY_NS: u64 = 10_000_000_000;
/// `max_time_ns`: at least 1 ns, at most one virtual day.
pub const MAX_TIME_NS: (u64, u64) = (1, 86_400_000_000_000);
/// IPIs per CPU per second, when not 0: from one per 1000 s (far rarer
/// rates would draw gaps between IPIs beyond what a virtual-time counter
/// holds) to one every 10 µs on every CPU (above that a run simulates little
/// but IPIs; §2 measures 40).
pub const IPI_RATE_PER_CPU_S: (f64, f64) = (0.001, 100_000.0);
/// Tax rates: the range `"auto"` produces (Figure 3 uses 0.01 and 100).
pub const TAX: (f64, f64) = (0.01, 100.0);
/// Largest `weight`: weights are speedups (1 to 2 in the paper) and only
/// their order matters.
pub const MAX_WEIGHT: f64 = 1000.0;
/// `smt_factor`: above 0 (at 0 a thread would never finish while its sibling
/// is busy) — at least 0.01 — and at most 1 (a busy sibling never speeds a
/// thread up).
pub const SMT_FACTOR: (f64, f64) = (0.01, 1.0);
/// Default event budget of one run: 10⁸ events, about 85× the largest run
/// of `bench sim` (1.2 M events) and 1000× the largest shipped run; 10 to 50
/// s of wall time at the simulator's 2–13 M events/s.
pub const DEFAULT_MAX_EVENTS: u64 = 100_000_000;
/// `max_events`: at least 1, at most 10¹² (days of wall time).
pub const MAX_EVENTS: (u64, u64) = (1, 1_000_000_000_000);
/// Longest scenario `name`.
pub const MAX_NAME_LEN: usize = 64;
/// Names the command writes at the top of the report folder (`--out`);
/// compared without case, since some file systems ignore it. A name ending
/// in `.tmp` is refused too: those are the files written before a rename.
pub const RESERVED_NAMES: [&str; 2] = ["index.md", "index.html"];
/// Prefixes of the folders the command writes at the top of the report
/// folder: every bench's report (`bench-sim`, `bench-stack`, ...: the page
/// shows every `bench-*` folder it finds) and every sweep's.
pub const RESERVED_PREFIXES: [&str; 2] = ["bench-", "sweep-"];

/// Checks a scenario name: one path component of safe characters, so that
/// `out/<name>/` is always a folder directly inside `out/`.
pub fn check_name(name: &str) -> Result<(), String> {
    const RULE: &str = "a name is one folder name of A-Z, a-z, 0-9, `.`, `_` and `-`, \
                        not starting with `.` or `-`, at most 64 characters";
    if name.is_empty() {
        return Err(format!("must not be empty: {RULE}"));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return Err(format!("{name:?} contains {c:?}: {RULE}"));
    }
    if name.starts_with(['.', '-']) {
        return Err(format!("{name:?} starts with `{}`: {RULE}", &name[..1]));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!("is {} characters long: {RULE}", name.len()));
    }
    let lower = name.to_ascii_lowercase();
    if RESERVED_NAMES.contains(&lower.as_str())
        || lower.ends_with(".tmp")
        || RESERVED_PREFIXES.iter().any(|p| lower.starts_with(p))
    {
        return Err(format!(
            "{name:?} is a name the command itself writes at the top of the report folder \
             (reserved: {}, *.tmp, and names starting with {})",
            RESERVED_NAMES.join(", "),
            RESERVED_PREFIXES.map(|p| format!("`{p}`")).join(" or ")
        ));
    }
    Ok(())
}

/// The path with array indices dropped and a run's `sim` folded onto the
/// scenario's: `["run", "0", "sim", "tick_ns"]` → `"sim.tick_ns"`.
fn pattern(path: &[String]) -> String {
    let keys: Vec<&str> = path.iter().map(String::as_str).filter(|s| s.parse::<usize>().is_err()).collect();
    let joined = keys.join(".");
    joined.strip_prefix("run.sim").map_or(joined.clone(), |rest| format!("sim{rest}"))
}

/// What the field at `path` accepts, in words (`None` for a path that names
/// no field). Used for every "expected …" message.
pub fn accepted(path: &[String]) -> Option<String> {
    let range = |what: &str, (lo, hi): (u64, u64)| format!("{what} from {lo} to {hi}");
    let text = match pattern(path).as_str() {
        "" => "a scenario: a table with `name`, `title` and at least one [[run]]".to_string(),
        "name" => format!(
            "a name of 1 to {MAX_NAME_LEN} characters from A-Z, a-z, 0-9, `.`, `_`, `-`, not starting with `.` or `-`"
        ),
        "title"
        | "run.label"
        | "run.series"
        | "run.workload.label"
        | "paper.x"
        | "paper.series"
        | "report.timeline_run" => "a one-line, non-empty string".to_string(),
        "description" => "a string".to_string(),
        "paper.source" | "paper.note" => "a one-line string".to_string(),
        "expect" => "a list of lines: { text, claim = \"<id>\" } (checked by the [[paper]] entries with that `claim`) or { text, prose = \"<why it cannot be checked>\" }".to_string(),
        "paper.claim" => "the claim id of an `expect` line".to_string(),
        "paper.relation" => "\"<\", \">\" or \"≈\" (also \"~\")".to_string(),
        "paper.metric" | "paper.than.metric" | "paper.from.metric" => {
            "\"speedup\", \"relative_time\", \"completion_s\", \"fused_share\" or \"cpus\"".to_string()
        }
        "paper.change_pct" => "a finite number of percent (with `from`)".to_string(),
        "paper.tolerance_pts" => "a finite number of percentage points >= 0 (with `about`)".to_string(),
        "paper.tick" => "a chart's tick spacing, a finite number > 0".to_string(),
        "paper.about" | "paper.basis" | "paper.derived" | "expect.basis" => "one line of text".to_string(),
        "paper.printed" => "the paper's digits, as a string (\"1.50\", \"7.9\")".to_string(),
        "paper.band_pct" => "a percentage in (0, 100] (with `about`)".to_string(),
        "paper.kind" | "expect.kind" => "\"prediction\", \"fitted\" or \"input\"".to_string(),
        "paper.than" | "paper.from" => "a table naming another figure: x, series, metric, after".to_string(),
        "seed" => format!("an integer from 0 to {}", i64::MAX),
        "sim" => "a table of simulation parameters".to_string(),
        "sim.tick_ns" => range("an integer number of ns", TICK_NS),
        "sim.min_granularity_ns" => range("an integer number of ns", (0, MAX_MIN_GRANULARITY_NS)),
        "sim.reconfig" => {
            "\"proxy-apic\", \"proxy-logical\", \"hotplug\", \"free\" or \"runtime\"".to_string()
        }
        "sim.notify_on_exit" => "true or false".to_string(),
        "sim.max_time_ns" => range("an integer number of ns", MAX_TIME_NS),
        "sim.ipi_rate_per_cpu_s" => format!(
            "0 (no IPIs) or a number from {} to {} (IPIs per CPU per second)",
            IPI_RATE_PER_CPU_S.0, IPI_RATE_PER_CPU_S.1
        ),
        "sim.max_events" => range("an integer number of events", MAX_EVENTS),
        "report" => "a table: kind, metric, group_by, timeline_run".to_string(),
        "report.kind" => "\"bars\" or \"allocation\"".to_string(),
        "report.metric" => "\"speedup\", \"relative_time\", \"completion_s\" or \"energy_j\"".to_string(),
        "report.group_by" => "\"program\" or \"run\"".to_string(),
        "paper" => "a list of [[paper]] tables (x, series, and one of value, than or change_pct)".to_string(),
        "paper.value" => "a finite number; non-zero for `≈` (differences are relative to it)".to_string(),
        "run" => format!("a list of 1 to {MAX_RUNS} [[run]] tables"),
        "run.machine" => format!("one of {}", ARCHS.join(", ")),
        "run.policy" => format!(
            "a policy name ({}), or a table with its `name` and its parameters",
            dyncore_core::policies::Registry::builtin().names().join(", ")
        ),
        "run.policy.name" => {
            format!("a policy name: {}", dyncore_core::policies::Registry::builtin().names().join(", "))
        }
        "run.nodes" | "run.cpus_per_node" => {
            format!("an integer from 1 to {MAX_MACHINE_CPUS} (at most {MAX_MACHINE_CPUS} CPUs in all)")
        }
        "run.max_fuse" => "1, 2 or 4 (CPUs)".to_string(),
        "run.workload" => "a list of [[run.workload]] tables".to_string(),
        "run.workload.program" => {
            let names: Vec<&str> = PROGRAMS.iter().map(|p| p.name).collect();
            format!("a program name: {}", names.join(", "))
        }
        "run.workload.count" => format!("an integer from 1 to {MAX_COUNT}"),
        "run.workload.start_ms" => format!("a number of ms from 0 to {MAX_START_MS}"),
        "run.workload.every_ms" => format!("a number of ms from {} to {}", EVERY_MS.0, EVERY_MS.1),
        "run.workload.threads" => format!("an integer from 1 to {MAX_THREADS}"),
        "run.workload.work_ms" => format!("a number of ms from {} to {}", WORK_MS.0, WORK_MS.1),
        "run.workload.nice" => "an integer from -20 to 19".to_string(),
        "run.workload.seq_level" => "0, 1 or 2 (an object of 1, 2 or 4 CPUs)".to_string(),
        "run.workload.weight" => format!("a number from 0 to {MAX_WEIGHT}"),
        "run.workload.tax" => format!("a number from {} to {}, or \"auto\"", TAX.0, TAX.1),
        "run.workload.pin" => {
            format!("\"fast\" or a cpulist such as \"0-3,8\" (CPU numbers below {})", CpuSet::MAX_CPUS)
        }
        "run.workload.command" => "an argv: a non-empty list of strings, e.g. [\"gzip\", \"-9\", \"file\"]".to_string(),
        "run.workload.model" => {
            let names: Vec<&str> = PROGRAMS.iter().map(|p| p.name).collect();
            format!("a program name that models the command in the simulator: {}", names.join(", "))
        }
        "run.workload.smt_factor" => format!("a number from {} to {}", SMT_FACTOR.0, SMT_FACTOR.1),
        _ => return None,
    };
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(s: &str) -> Vec<String> {
        s.split('.').map(str::to_string).collect()
    }

    #[test]
    fn names_are_single_safe_components() {
        for bad in
            ["", "..", ".", "../escape", "/tmp/abs", "a/b", "a\nb", ".hidden", "-x", "index.md", "INDEX.md"]
        {
            assert!(check_name(bad).is_err(), "{bad:?} must be refused");
        }
        assert!(check_name("index.md.tmp").is_err());
        for taken in ["bench-sim", "bench-stack", "Bench-Newtos", "bench-arbiter", "sweep-tax", "INDEX.html"]
        {
            assert!(check_name(taken).is_err(), "{taken:?} is written by the command itself");
        }
        assert!(check_name(&"a".repeat(65)).is_err());
        for good in ["fig3-taxation", "a.b_c-1", "my-bench-big", &"a".repeat(64)] {
            assert_eq!(check_name(good), Ok(()), "{good:?}");
        }
        assert!(check_name("a\nb").unwrap_err().contains("'\\n'"), "the newline is shown escaped");
    }

    #[test]
    fn every_field_says_what_it_accepts() {
        assert!(accepted(&path("run.0.workload.1.tax")).unwrap().contains("\"auto\""));
        assert_eq!(accepted(&path("run.3.sim.tick_ns")), accepted(&path("sim.tick_ns")));
        assert!(accepted(&path("run.0.policy")).unwrap().contains("chameleon"));
        assert_eq!(accepted(&path("run.0.nosuch")), None);
    }
}
