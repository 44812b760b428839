//! [`Scenario::validate`]: meaning and limits, after serde has checked the
//! shape. Every error names its field by path; a value out of range is
//! reported as "expected (what [`accepted`] says), found (the value)".
//!
//! What validation guarantees the engine (it relies on these): a machine of
//! 1 to [`MAX_MACHINE_CPUS`] CPUs that can exist; every number finite and in
//! the range of [`limits`](super::limits); every `pin` a non-empty set of
//! CPUs of the run's machine (or `"fast"` on a machine that has fast CPUs);
//! every `seq_level` an object the machine can fuse; bounded threads and work
//! per run.

use super::limits::{
    EVERY_MS, IPI_RATE_PER_CPU_S, MAX_COUNT, MAX_EVENTS, MAX_MACHINE_CPUS, MAX_MIN_GRANULARITY_NS,
    MAX_RUN_THREADS, MAX_RUN_WORK_MS, MAX_RUNS, MAX_START_MS, MAX_THREADS, MAX_TIME_NS, MAX_WEIGHT,
    SMT_FACTOR, TAX, TICK_NS, WORK_MS, accepted, check_name,
};
use super::{
    PaperMetric, PolicySpec, RunSpec, Scenario, ScenarioError, SimOverrides, SimParams, TaxSpec, WorkloadSpec,
};
use crate::machine::MachineSpec;
use crate::workload::{PROGRAMS, program};
use dyncore_core::CpuSet;
use dyncore_core::policies::Registry;
use dyncore_core::policy::ActionKind;
use dyncore_core::topology::CoreKind;

type Check = Result<(), ScenarioError>;

/// `after` is given exactly for `cpus`, as "<program label> starts|exits".
fn check_after(at: &At, metric: PaperMetric, after: Option<&str>) -> Check {
    match (metric, after) {
        (PaperMetric::Cpus, Some(a)) => {
            at.key("after").one_line(a, false)?;
            let verb = a.rsplit_once(' ').map(|(_, v)| v);
            if matches!(verb, Some("starts" | "exits")) {
                Ok(())
            } else {
                Err(at.key("after").err(format!(
                    "expected \"<program label> starts\" or \"<program label> exits\"; found {a:?}"
                )))
            }
        }
        (PaperMetric::Cpus, None) => Err(at.key("after").err(
            "`metric = \"cpus\"` needs `after`: \"<program label> starts\" or \"<program label> exits\"",
        )),
        (_, Some(_)) => Err(at.key("after").err("`after` is for `metric = \"cpus\"`")),
        (_, None) => Ok(()),
    }
}

/// A value as an error message shows it: `1e300`, not 301 digits.
trait Shown {
    fn shown(self) -> String;
}

impl Shown for f64 {
    fn shown(self) -> String {
        if self != 0.0 && self.is_finite() && !(1e-3..1e9).contains(&self.abs()) {
            format!("{self:e}")
        } else {
            self.to_string()
        }
    }
}

macro_rules! shown_as_display {
    ($($t:ty),*) => {$(impl Shown for $t {
        fn shown(self) -> String {
            self.to_string()
        }
    })*};
}
shown_as_display!(u32, i32, u64, usize);

/// A field path under construction: `run[2].workload[0]` + `tax`.
#[derive(Clone)]
struct At(Vec<String>);

impl At {
    fn root() -> At {
        At(Vec::new())
    }
    fn key(&self, k: &str) -> At {
        let mut v = self.0.clone();
        v.push(k.to_string());
        At(v)
    }
    fn index(&self, k: &str, i: usize) -> At {
        let mut v = self.key(k).0;
        v.push(i.to_string());
        At(v)
    }
    fn err(&self, message: impl Into<String>) -> ScenarioError {
        ScenarioError { path: self.0.clone(), message: message.into() }
    }
    /// "expected <what the field accepts>, found <v>".
    fn expected(&self, found: impl std::fmt::Display) -> ScenarioError {
        let what = accepted(&self.0).unwrap_or_else(|| "a valid value".into());
        self.err(format!("expected {what}; found {found}"))
    }
    fn in_range<T: PartialOrd + Shown + Copy>(&self, v: T, (lo, hi): (T, T)) -> Check {
        // Written so that NaN fails: every comparison with NaN is false.
        if v >= lo && v <= hi { Ok(()) } else { Err(self.expected(v.shown())) }
    }
    fn opt_in_range<T: PartialOrd + Shown + Copy>(&self, v: Option<T>, range: (T, T)) -> Check {
        v.map_or(Ok(()), |v| self.in_range(v, range))
    }
    /// A label-like string: non-empty, one line.
    fn one_line(&self, s: &str, may_be_empty: bool) -> Check {
        if s.is_empty() && !may_be_empty {
            return Err(self.expected("an empty string"));
        }
        if let Some(c) = s.chars().find(|c| c.is_control()) {
            return Err(self.expected(format!("a string containing {c:?}")));
        }
        Ok(())
    }
}

impl Scenario {
    /// `expect` and the `[[paper]]` checks: their shape (`claims::check_form`),
    /// claim ids that match, one-line texts, and `after` exactly on `cpus`.
    fn check_paper(&self, root: &At) -> Check {
        let kinds: Vec<crate::claims::EntryKind<'_>> = self
            .paper
            .iter()
            .map(|p| crate::claims::EntryKind {
                claim: p.claim.as_deref(),
                kind: p.kind,
                basis: p.basis.as_deref(),
                input_only: super::claims::input_only(self, p),
            })
            .collect();
        crate::claims::check_kinds(&self.expect, &kinds)
            .map_err(|(path, m)| ScenarioError { path, message: m })?;
        for (i, f) in self.paper.iter().enumerate() {
            let at = root.index("paper", i);
            at.key("x").one_line(&f.x, false)?;
            at.key("series").one_line(&f.series, false)?;
            at.key("source").one_line(&f.source, true)?;
            at.key("note").one_line(&f.note, true)?;
            crate::claims::check_form(crate::claims::Form {
                relation: f.relation,
                value: f.value,
                than: f.than.is_some(),
                change_pct: f.change_pct,
                tolerance_pts: f.tolerance_pts,
                from: f.from.is_some(),
                tick: f.tick,
                about: f.about.as_deref(),
                band_pct: f.band_pct,
                printed: f.printed.as_deref(),
                derived: f.derived.as_deref(),
            })
            .map_err(|(k, m)| at.key(k).err(m))?;
            if let Some(k) = super::claims::self_compared(self, f) {
                return Err(at.key(k).err(crate::claims::self_comparison(k)));
            }
            let metric = f.metric.unwrap_or(PaperMetric::of_report(self.report.metric));
            check_after(&at, metric, f.after.as_deref())?;
            for (k, side) in [("than", &f.than), ("from", &f.from)] {
                if let Some(o) = side {
                    let at = at.key(k);
                    for (field, v) in [("x", &o.x), ("series", &o.series)] {
                        if let Some(v) = v {
                            at.key(field).one_line(v, false)?;
                        }
                    }
                    let m = o.metric.unwrap_or(metric);
                    let after = if m == PaperMetric::Cpus {
                        o.after.as_deref().or(f.after.as_deref())
                    } else {
                        o.after.as_deref()
                    };
                    check_after(&at, m, after)?;
                }
            }
        }
        Ok(())
    }

    /// `seeds` in 1..=[`Scenario::MAX_SEEDS`], and `seed + seeds - 1` a `u64`.
    fn check_seeds(&self, root: &At) -> Result<(), ScenarioError> {
        if let Some(n) = self.seeds
            && !(1..=Self::MAX_SEEDS).contains(&n)
        {
            return Err(root
                .key("seeds")
                .err(format!("expected a whole number from 1 to {}; found {n}", Self::MAX_SEEDS)));
        }
        if self.seed.checked_add(u64::from(self.seeds.unwrap_or(1)).saturating_sub(1)).is_none() {
            return Err(root.key("seeds").err(format!("seed + seeds - 1 must not exceed {}", u64::MAX)));
        }
        Ok(())
    }

    /// Checks meaning and limits: known programs, machines and policies (of
    /// [`Scenario::registry`]), machines that can exist, every value in the
    /// range docs/scenarios.md gives. Returns the first error, which names
    /// its field by path.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let registry = &self.registry;
        let root = At::root();
        check_name(&self.name).map_err(|m| root.key("name").err(m))?;
        self.check_seeds(&root)?;
        root.key("title").one_line(&self.title, false)?;
        if let Some(c) = self.description.chars().find(|c| c.is_control() && !matches!(c, '\n' | '\t')) {
            return Err(root.key("description").err(format!("contains the control character {c:?}")));
        }
        check_sim(&root.key("sim"), &self.sim)?;
        self.check_paper(&root)?;
        if self.runs.is_empty() || self.runs.len() > MAX_RUNS {
            return Err(root.key("run").expected(format!("{} runs", self.runs.len())));
        }
        let mut labels = std::collections::BTreeSet::new();
        for (i, run) in self.runs.iter().enumerate() {
            let at = root.index("run", i);
            if !labels.insert(run.label.as_str()) {
                return Err(at.key("label").err(format!("duplicate run label `{}`", run.label)));
            }
            check_run(&at, run, registry)?;
            self.validate_profile(i)?;
        }
        if let Some(t) = &self.report.timeline_run {
            let at = root.key("report").key("timeline_run");
            at.one_line(t, false)?;
            if !self.runs.iter().any(|r| &r.label == t) {
                return Err(at.err(format!("no run is labelled `{t}`")));
            }
        }
        Ok(())
    }
}

/// The scenario's `[sim]` (every field present, after defaults).
fn check_sim(at: &At, p: &SimParams) -> Check {
    check_sim_overrides(
        at,
        &SimOverrides {
            tick_ns: Some(p.tick_ns),
            min_granularity_ns: Some(p.min_granularity_ns),
            reconfig: Some(p.reconfig),
            notify_on_exit: Some(p.notify_on_exit),
            max_time_ns: Some(p.max_time_ns),
            ipi_rate_per_cpu_s: Some(p.ipi_rate_per_cpu_s),
            max_events: Some(p.max_events),
            profile: p.profile.clone(),
        },
    )
}

/// A run's `[run.sim]`: the fields it sets. With `[sim]` checked too, every
/// combination a run can end up with is valid.
fn check_sim_overrides(at: &At, o: &SimOverrides) -> Check {
    at.key("tick_ns").opt_in_range(o.tick_ns, TICK_NS)?;
    at.key("min_granularity_ns").opt_in_range(o.min_granularity_ns, (0, MAX_MIN_GRANULARITY_NS))?;
    at.key("max_time_ns").opt_in_range(o.max_time_ns, MAX_TIME_NS)?;
    at.key("max_events").opt_in_range(o.max_events, MAX_EVENTS)?;
    if let Some(r) = o.ipi_rate_per_cpu_s
        && r != 0.0
    {
        at.key("ipi_rate_per_cpu_s").in_range(r, IPI_RATE_PER_CPU_S)?;
    }
    Ok(())
}

/// The run's policy: a registered name, and parameters it takes within
/// their limits.
fn check_policy(at: &At, p: &PolicySpec, registry: &Registry) -> Check {
    let at = at.key("policy");
    let name_at = if p.table { at.key("name") } else { at.clone() };
    let entry = registry.get(&p.name).map_err(|e| name_at.err(e.to_string()))?;
    // Both thread backends (the simulator, the live runtime) execute these.
    Registry::refuse_unsupported(&entry.info, "thread backends", crate::policy::THREAD_ACTIONS)
        .map_err(|m| name_at.err(m))?;
    dyncore_core::policies::Params::validate(&entry.info, &p.params).map(drop).map_err(|e| match e.param {
        Some(param) => at.key(&param).err(e.message),
        None => at.err(e.message),
    })
}

fn check_run(at: &At, run: &RunSpec, registry: &Registry) -> Check {
    at.key("label").one_line(&run.label, false)?;
    check_policy(at, &run.policy, registry)?;
    if let Some(s) = &run.series {
        at.key("series").one_line(s, false)?;
    }
    check_sim_overrides(&at.key("sim"), &run.sim)?;
    // Upper bounds before building (the builder multiplies them); the
    // builder refuses zero with its own reason.
    at.key("nodes").opt_in_range(run.nodes, (0, MAX_MACHINE_CPUS))?;
    at.key("cpus_per_node").opt_in_range(run.cpus_per_node, (0, MAX_MACHINE_CPUS))?;
    let machine = MachineSpec::build(run).map_err(|(field, msg)| at.key(field).err(msg))?;
    if run.workloads.is_empty() {
        return Err(at.key("workload").err("a run needs at least one [[run.workload]]"));
    }
    let (mut threads, mut work_ms) = (0u64, 0f64);
    for (j, w) in run.workloads.iter().enumerate() {
        let wat = at.index("workload", j);
        check_workload(&wat, run, &machine, w, registry)?;
        let prog = w.program_def().expect("checked by check_workload");
        let per_program =
            if prog.is_sequential() { 1 } else { w.threads.unwrap_or(machine.topology.ncpus() as u32) };
        threads += u64::from(w.count) * u64::from(per_program);
        work_ms += f64::from(w.count) * w.work_ms.unwrap_or(prog.work_ms);
        if threads > MAX_RUN_THREADS {
            return Err(wat.key("count").err(format!(
                "the run has {threads} threads so far, more than the {MAX_RUN_THREADS} a run may hold \
                 (count × threads, summed over its workloads)"
            )));
        }
        if work_ms > MAX_RUN_WORK_MS {
            return Err(wat.key("work_ms").err(format!(
                "the run has {work_ms} ms of work so far, more than the {MAX_RUN_WORK_MS} ms a run may hold \
                 (count × work_ms, summed over its workloads)"
            )));
        }
    }
    Ok(())
}

fn check_workload(
    at: &At,
    run: &RunSpec,
    machine: &MachineSpec,
    w: &WorkloadSpec,
    registry: &Registry,
) -> Check {
    let prog = check_source(at, run, w)?;
    if let Some(l) = &w.label {
        at.key("label").one_line(l, false)?;
    }
    at.key("count").in_range(w.count, (1, MAX_COUNT))?;
    at.key("start_ms").in_range(w.start_ms, (0.0, MAX_START_MS))?;
    at.key("every_ms").opt_in_range(w.every_ms, EVERY_MS)?;
    if let Some(every) = w.every_ms
        && w.start_ms + f64::from(w.count - 1) * every > MAX_START_MS
    {
        return Err(at.key("every_ms").err(format!(
            "the last of {} instances {every} ms apart would start after {MAX_START_MS} ms",
            w.count
        )));
    }
    at.key("threads").opt_in_range(w.threads, (1, MAX_THREADS))?;
    if w.command.is_some() && w.model.is_none() && w.threads.is_some_and(|t| t != 1) {
        return Err(at.key("threads").err(
            "`threads` is for a command's `model` (the simulator's stand-in); a command makes the threads it makes",
        ));
    }
    if prog.is_sequential() && w.threads.is_some_and(|t| t != 1) {
        return Err(at
            .key("threads")
            .err(format!("`{}` is a sequential program: it has one thread", prog.name)));
    }
    at.key("work_ms").opt_in_range(w.work_ms, WORK_MS)?;
    at.key("nice").in_range(w.nice, (-20, 19))?;
    at.key("weight").opt_in_range(w.weight, (0.0, MAX_WEIGHT))?;
    if let TaxSpec::Rate(r) = w.tax {
        at.key("tax").in_range(r, TAX)?;
    }
    at.key("smt_factor").opt_in_range(w.smt_factor, SMT_FACTOR)?;
    if let Some(l) = w.seq_level {
        at.key("seq_level").in_range(l, (0, 2))?;
        // Under a policy that fuses, on a machine that fuses, the object
        // asked for must fit.
        let fuses = registry.get(&run.policy.name).is_ok_and(|e| e.info.emits(ActionKind::Fuse))
            && machine.max_fuse > 1;
        if fuses && 1usize << l > machine.max_fuse {
            return Err(at.key("seq_level").err(format!(
                "asks for an object of {} CPUs, but this machine fuses at most {} (max_fuse)",
                1usize << l,
                machine.max_fuse
            )));
        }
    }
    if let Some(pin) = &w.pin {
        check_pin(&at.key("pin"), &run.machine, machine, pin)?;
    }
    Ok(())
}

/// What the workload runs: a known `program`, or a `command` (an argv of
/// one-line words, its first not empty) with at most a known `model`; a
/// run's workloads are all commands or all programs. Whether the command
/// exists is checked where it runs (live), before the run starts.
fn check_source(
    at: &At,
    run: &RunSpec,
    w: &WorkloadSpec,
) -> Result<&'static crate::workload::Program, ScenarioError> {
    let known = || PROGRAMS.iter().map(|p| p.name).collect::<Vec<_>>().join(", ");
    let Some(argv) = &w.command else {
        if w.model.is_some() {
            return Err(at.key("model").err("`model` is for a workload that names a `command`"));
        }
        if w.program.is_empty() {
            return Err(at.key("program").err(format!(
                "missing; expected a program name ({}) or a `command` (an argv such as [\"gzip\", \"-9\", \"f\"])",
                known()
            )));
        }
        if run.has_commands() {
            return Err(at.key("program").err(
                "a run's workloads are all commands or all built-in programs (the commands run under the \
                 arbiter, the programs on the runtime's kernels); put them in runs of their own",
            ));
        }
        return program(&w.program).ok_or_else(|| {
            at.key("program").err(format!("unknown program `{}`; known programs: {}", w.program, known()))
        });
    };
    let cat = at.key("command");
    if !w.program.is_empty() {
        return Err(at.key("program").err(
            "a workload names a `program` or a `command`, not both (a command's stand-in for the simulator is its \
             `model`)",
        ));
    }
    match argv.first() {
        None => return Err(cat.err("expected a non-empty argv, e.g. [\"gzip\", \"-9\", \"file\"]; found []")),
        Some(a) if a.is_empty() => {
            return Err(cat.err("expected a program name or path as the first word; found \"\""));
        }
        Some(_) => {}
    }
    if let Some(a) = argv.iter().find(|a| a.contains('\0')) {
        return Err(cat.err(format!("expected words without NUL characters; found {a:?}")));
    }
    match &w.model {
        None => Ok(&crate::workload::COMMAND),
        Some(m) => program(m).ok_or_else(|| {
            at.key("model").err(format!("unknown program `{m}`; known programs: {}", known()))
        }),
    }
}

/// A pin names CPUs of this machine, all of them: one out of range is an
/// error, not silently dropped or widened.
fn check_pin(at: &At, arch: &str, machine: &MachineSpec, pin: &str) -> Check {
    let ncpus = machine.topology.ncpus();
    if pin == "fast" {
        if machine.topology.cpus_of_kind(CoreKind::Big).is_empty() {
            return Err(at.err(format!("`{arch}` has no fast CPUs; \"fast\" is for acmp-3 and acmp-6")));
        }
        return Ok(());
    }
    let set: CpuSet =
        pin.parse().map_err(|e| at.err(format!("{e}; expected \"fast\" or a cpulist like \"0-3,8\"")))?;
    let cpus = format!("this machine's CPUs are 0-{}", ncpus - 1);
    match (set.first(), set.last()) {
        (Some(first), _) if first >= ncpus => {
            Err(at.err(format!("`{pin}` names no CPU of this machine: {cpus}")))
        }
        (_, Some(last)) if last >= ncpus => {
            Err(at.err(format!("`{pin}` names CPUs up to {last}, but {cpus}; pin only CPUs that exist")))
        }
        (Some(_), Some(_)) => Ok(()),
        _ => Err(at.err("an empty cpulist pins to no CPU; expected \"fast\" or a cpulist like \"0-3,8\"")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::scenario::tests::err;

    /// [`GOOD`](crate::scenario::tests::GOOD) on a 4-CPU machine under the
    /// Linux-like policy.
    static GOOD: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        crate::scenario::tests::GOOD
            .replace("\"dynamic\"", "\"uniform\"")
            .replace("\"chameleon\"", "\"linux\"")
    });

    fn with(line: &str) -> ScenarioError {
        err(&format!("{}{line}\n", *GOOD))
    }

    #[test]
    fn pins_outside_the_machine_are_refused_not_widened_or_cut() {
        let e = with("pin = \"100-200\"");
        assert_eq!(e.dotted_path(), "run[0].workload[0].pin");
        assert!(e.message.contains("names no CPU of this machine: this machine's CPUs are 0-3"), "{e}");
        let e = with("pin = \"0-999\"");
        assert!(e.message.contains("names CPUs up to 999"), "{e}");
        assert!(with("pin = \"100000000000000\"").message.contains("too large"));
        assert!(with("pin = \"\"").message.contains("empty"));
        assert!(with("pin = \"fast\"").message.contains("no fast CPUs"));
        let ok = Scenario::from_toml(&format!("{}pin = \"0-3\"\n", *GOOD)).unwrap();
        ok.validate().unwrap();
    }

    #[test]
    fn machines_are_bounded_without_overflow() {
        let e = err(&GOOD.replace("policy", "nodes = 9223372036854775807\ncpus_per_node = 2\npolicy"));
        assert_eq!(e.dotted_path(), "run[0].nodes");
        let e = err(&GOOD.replace("policy", "nodes = 4096\ncpus_per_node = 4096\npolicy"));
        assert!(e.message.contains("4096"), "{e}");
        let largest = Scenario::from_toml(&GOOD.replace("policy", "nodes = 2\ncpus_per_node = 2048\npolicy"));
        largest.unwrap().validate().expect("4096 CPUs is the largest machine");
    }

    #[test]
    fn absurd_numbers_are_refused_with_their_path() {
        for (line, path) in [
            ("threads = 4294967295", "run[0].workload[0].threads"),
            ("count = 1000000000", "run[0].workload[0].count"),
            ("work_ms = nan", "run[0].workload[0].work_ms"),
            ("start_ms = inf", "run[0].workload[0].start_ms"),
            ("weight = -1.0", "run[0].workload[0].weight"),
            ("tax = inf", "run[0].workload[0].tax"),
            ("smt_factor = 0.0", "run[0].workload[0].smt_factor"),
            ("nice = 20", "run[0].workload[0].nice"),
            ("seq_level = 3", "run[0].workload[0].seq_level"),
            ("every_ms = 0.0", "run[0].workload[0].every_ms"),
            ("count = 4000\nevery_ms = 86400000", "run[0].workload[0].every_ms"),
        ] {
            assert_eq!(with(line).dotted_path(), path, "{line}");
        }
        let top = |line: &str| err(&format!("{line}\n{}", *GOOD));
        for (line, path) in [
            ("sim.tick_ns = 1", "sim.tick_ns"),
            ("sim.ipi_rate_per_cpu_s = nan", "sim.ipi_rate_per_cpu_s"),
            ("sim.ipi_rate_per_cpu_s = 1e12", "sim.ipi_rate_per_cpu_s"),
            ("sim.ipi_rate_per_cpu_s = -1.0", "sim.ipi_rate_per_cpu_s"),
            ("sim.max_time_ns = 9000000000000000000", "sim.max_time_ns"),
            ("sim.max_events = 0", "sim.max_events"),
        ] {
            assert_eq!(top(line).dotted_path(), path, "{line}");
        }
        let e = top("sim.ipi_rate_per_cpu_s = nan");
        assert!(e.message.contains("found NaN"), "{e}");
    }

    #[test]
    fn whole_runs_are_bounded() {
        // 8 × 4096 threads of a parallel program: each within limits, too many together.
        let e = err(&GOOD.replace("\"nqueen\"", "\"fibonacci\"\nthreads = 4096\ncount = 8\nwork_ms = 1000"));
        assert_eq!(e.dotted_path(), "run[0].workload[0].count");
        assert!(e.message.contains("16384"), "{e}");
        let e = err(&GOOD.replace("\"nqueen\"", "\"gcc\"\ncount = 4000\nwork_ms = 9000"));
        assert_eq!(e.dotted_path(), "run[0].workload[0].work_ms");
    }

    #[test]
    fn paper_checks_name_one_form_and_their_claim() {
        let paper = |body: &str| {
            let kind = if body.contains("claim = ") { "" } else { "kind = \"prediction\"\n" };
            format!("{}[[paper]]\nx = \"a\"\nseries = \"b\"\n{kind}{body}\n", *GOOD)
        };
        // A bound may be zero; a value and another figure at once may not.
        let ok = Scenario::from_toml(&paper("relation = \"<\"\nvalue = 0.0")).unwrap();
        ok.validate().unwrap();
        let e = err(&paper("value = 1.0\nthan = { x = \"c\" }"));
        assert_eq!(e.dotted_path(), "paper[0].value");
        assert!(e.message.contains("exactly one of"), "{e}");
        let e = err(&paper("change_pct = -9.0"));
        assert_eq!(e.dotted_path(), "paper[0].from");
        // `after` exactly on `cpus`, as "<label> starts|exits".
        assert_eq!(err(&paper("metric = \"cpus\"\nvalue = 4.0")).dotted_path(), "paper[0].after");
        let e = err(&paper("metric = \"cpus\"\nafter = \"lbm leaves\"\nvalue = 4.0"));
        assert!(e.message.contains("exits"), "{e}");
        assert_eq!(err(&paper("after = \"lbm exits\"\nvalue = 4.0")).dotted_path(), "paper[0].after");
        let ok =
            Scenario::from_toml(&paper("metric = \"cpus\"\nafter = \"lbm exits\"\nvalue = 4.0")).unwrap();
        ok.validate().unwrap();
        // A claim id must be an `expect` line's, and each line's id checked.
        let e = err(&paper("claim = \"nope\"\nvalue = 1.0"));
        assert_eq!(e.dotted_path(), "paper[0].claim");
        let lines = "expect = [{ text = \"t\", claim = \"c\", kind = \"prediction\" }]\n";
        let e = err(&format!("{lines}{}", *GOOD));
        assert_eq!(e.dotted_path(), "expect[0].claim");
        let good = Scenario::from_toml(&format!("{lines}{}", paper("claim = \"c\"\nvalue = 1.0"))).unwrap();
        good.validate().unwrap();
    }

    #[test]
    fn paper_values_must_be_finite_and_non_zero() {
        for v in ["0.0", "nan", "-inf"] {
            let e = err(&format!(
                "{}[[paper]]\nx = \"a\"\nseries = \"b\"\nkind = \"prediction\"\nvalue = {v}\n",
                *GOOD
            ));
            assert_eq!(e.dotted_path(), "paper[0].value", "{v}");
        }
    }

    #[test]
    fn strings_that_reports_print_on_one_line_have_no_newline() {
        assert_eq!(err(&GOOD.replace("title = \"t\"", "title = \"a\\nb\"")).dotted_path(), "title");
        assert_eq!(err(&GOOD.replace("label = \"a\"", "label = \"\"")).dotted_path(), "run[0].label");
        assert_eq!(err(&GOOD.replace("name = \"t\"", "name = \"../escape\"")).dotted_path(), "name");
    }

    #[test]
    fn seq_level_must_fit_the_machine() {
        let s = GOOD.replace("\"linux\"", "\"chameleon\"").replace("policy", "max_fuse = 2\npolicy");
        let e = err(&format!("{s}seq_level = 2\n"));
        assert!(e.message.contains("fuses at most 2"), "{e}");
    }

    #[test]
    fn a_command_is_an_argv_beside_programs_of_its_own_kind_only() {
        let cmd = GOOD.replace("program = \"nqueen\"", "command = [\"gzip\", \"-9\", \"f\"]");
        let ok = Scenario::from_toml(&cmd).unwrap();
        ok.validate().unwrap();
        assert!(ok.has_commands());
        assert_eq!(ok.unmodelled_command().map(|p| p.join(".")), Some("run.0.workload.0.command".into()));
        assert_eq!(ok.runs[0].workloads[0].program_def().unwrap().name, "command");
        let modelled = Scenario::from_toml(&format!("{cmd}model = \"nqueen\"\n")).unwrap();
        modelled.validate().unwrap();
        assert_eq!(modelled.unmodelled_command(), None);
        assert_eq!(modelled.runs[0].workloads[0].program_def().unwrap().name, "nqueen");
        let e = err(&format!("{cmd}threads = 2\n"));
        assert_eq!(e.dotted_path(), "run[0].workload[0].threads");
        let e = err(&format!("{}model = \"gcc\"\n", *GOOD));
        assert_eq!(e.dotted_path(), "run[0].workload[0].model");
        let e = err(&format!("{cmd}[[run.workload]]\nprogram = \"gcc\"\n"));
        assert_eq!(e.dotted_path(), "run[0].workload[1].program");
        assert!(e.message.contains("all commands or all built-in programs"), "{e}");
        let e = err(&GOOD.replace("program = \"nqueen\"", "command = [\"\"]"));
        assert!(e.message.contains("first word"), "{e}");
        let e = err(&GOOD.replace("program = \"nqueen\"", "label = \"x\""));
        assert_eq!(e.dotted_path(), "run[0].workload[0].program");
        assert!(e.message.starts_with("missing; expected a program name"), "{e}");
    }
}
