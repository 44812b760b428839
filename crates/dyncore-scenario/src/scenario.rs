//! Scenario files: one TOML file per experiment (see `docs/scenarios.md`).
//!
//! A scenario is a list of *runs*; each run is one simulated machine with one
//! policy and a set of workloads started at given times. The report groups
//! per-program results of all runs into the paper's figure.
//!
//! Parsing (serde) rejects unknown fields; [`Scenario::validate`] (in
//! `validate.rs`) then checks meaning and the limits of `limits.rs` (known
//! programs and machines, machines that can exist, values `run` can hold and
//! finish) and returns errors that name the field by path
//! (`run[2].workload[0].program`), so the command line can point at the
//! file and line.

use dyncore_core::policies::{ParamValue, Registry};
use serde::{Deserialize, Serialize};

pub mod claims;
pub mod limits;
mod validate;

use crate::claims::{Expect, Relation};
use crate::cost::Mechanism;

/// Which policy runs the machine, by its name in the registry
/// ([`dyncore_core::policies`]), and its parameters as the file gives them:
/// `policy = "chameleon"`, or `policy = { name = "greedy-fuse", idle_ms = 2 }`.
/// [`Scenario::validate`] checks both against the registry.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySpec {
    pub name: String,
    /// (parameter, value), in the file's order.
    pub params: Vec<(String, ParamValue)>,
    /// Written as a table (errors then point into it).
    pub table: bool,
}

impl PolicySpec {
    /// A policy by name, with its defaults.
    pub fn named(name: &str) -> PolicySpec {
        PolicySpec { name: name.to_string(), params: Vec::new(), table: false }
    }
}

impl Serialize for PolicySpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        if !self.table && self.params.is_empty() {
            return s.serialize_str(&self.name);
        }
        let mut m = s.serialize_map(Some(1 + self.params.len()))?;
        m.serialize_entry("name", &self.name)?;
        for (k, v) in &self.params {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for PolicySpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = PolicySpec;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a policy name, or a table with its `name` and its parameters")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PolicySpec, E> {
                Ok(PolicySpec::named(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<PolicySpec, A::Error> {
                let mut name = None;
                let mut params = Vec::new();
                while let Some(k) = m.next_key::<String>()? {
                    if k == "name" {
                        name = Some(m.next_value::<String>()?);
                    } else {
                        params.push((k, m.next_value::<ParamValueDe>()?.0));
                    }
                }
                let name = name.ok_or_else(|| serde::de::Error::missing_field("name"))?;
                Ok(PolicySpec { name, params, table: true })
            }
        }
        d.deserialize_any(V)
    }
}

/// A parameter's value, with our own words when it is of no accepted type.
struct ParamValueDe(ParamValue);

impl<'de> Deserialize<'de> for ParamValueDe {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ParamValueDe;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number, true or false, or a string")
            }
            fn visit_bool<E>(self, v: bool) -> Result<ParamValueDe, E> {
                Ok(ParamValueDe(ParamValue::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<ParamValueDe, E> {
                Ok(ParamValueDe(ParamValue::Int(v)))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ParamValueDe, E> {
                Ok(ParamValueDe(ParamValue::Int(
                    i64::try_from(v).map_err(|_| E::custom("a number too large"))?,
                )))
            }
            fn visit_f64<E>(self, v: f64) -> Result<ParamValueDe, E> {
                Ok(ParamValueDe(ParamValue::Float(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<ParamValueDe, E> {
                Ok(ParamValueDe(ParamValue::Str(v.to_string())))
            }
        }
        d.deserialize_any(V)
    }
}

/// A tax rate: a number, or `"auto"` (derived from the program's speedup).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TaxSpec {
    Rate(f64),
    Auto(AutoTax),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AutoTax {
    Auto,
}

impl Default for TaxSpec {
    fn default() -> Self {
        TaxSpec::Rate(1.0)
    }
}

/// Simulation parameters; every field has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimParams {
    /// Scheduler tick (per CPU), virtual nanoseconds.
    pub tick_ns: u64,
    /// CFS minimum granularity: how long a thread (or fused object) runs
    /// before it can be preempted. Paper: 16 ms.
    pub min_granularity_ns: u64,
    /// How fused objects are formed and split (Table 4 latencies, or the
    /// real plan's cost from a machine profile for `runtime`).
    pub reconfig: Mechanism,
    /// Machine profile of the `runtime` mechanism, relative to the scenario
    /// file (default: the built-in `profiles/reference.toml`).
    pub profile: Option<String>,
    /// Notify the node manager when a task exits, so freed CPUs are
    /// redistributed (Figure 6's `3*` column turns this off).
    pub notify_on_exit: bool,
    /// Safety stop: a run that has not finished by then is reported as such.
    pub max_time_ns: u64,
    /// Rate of IPIs (reschedule + TLB shootdown) addressed to each CPU while
    /// a parallel program runs, per second (§2: 40/s/CPU under pmake).
    pub ipi_rate_per_cpu_s: f64,
    /// Event budget of one run: past it the run stops with an error that
    /// names this field, instead of running for hours.
    pub max_events: u64,
}

impl Default for SimParams {
    fn default() -> Self {
        SimParams {
            tick_ns: 4_000_000,
            min_granularity_ns: 16_000_000,
            reconfig: Mechanism::ProxyApic,
            profile: None,
            notify_on_exit: true,
            max_time_ns: 600_000_000_000,
            ipi_rate_per_cpu_s: 40.0,
            max_events: limits::DEFAULT_MAX_EVENTS,
        }
    }
}

/// Optional per-run overrides of [`SimParams`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimOverrides {
    pub tick_ns: Option<u64>,
    pub min_granularity_ns: Option<u64>,
    pub reconfig: Option<Mechanism>,
    pub profile: Option<String>,
    pub notify_on_exit: Option<bool>,
    pub max_time_ns: Option<u64>,
    pub ipi_rate_per_cpu_s: Option<f64>,
    pub max_events: Option<u64>,
}

impl SimParams {
    pub fn with(&self, o: &SimOverrides) -> SimParams {
        SimParams {
            tick_ns: o.tick_ns.unwrap_or(self.tick_ns),
            min_granularity_ns: o.min_granularity_ns.unwrap_or(self.min_granularity_ns),
            reconfig: o.reconfig.unwrap_or(self.reconfig),
            profile: o.profile.clone().or_else(|| self.profile.clone()),
            notify_on_exit: o.notify_on_exit.unwrap_or(self.notify_on_exit),
            max_time_ns: o.max_time_ns.unwrap_or(self.max_time_ns),
            ipi_rate_per_cpu_s: o.ipi_rate_per_cpu_s.unwrap_or(self.ipi_rate_per_cpu_s),
            max_events: o.max_events.unwrap_or(self.max_events),
        }
    }
}

/// One program (or `count` identical instances) in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// A Table 3 program: see [`PROGRAMS`](crate::workload::PROGRAMS).
    /// Empty (absent) for a workload that names a `command`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub program: String,
    /// A real program to run instead of a built-in one, as its argv
    /// (`["gzip", "-9", "f"]`; the first word found on `PATH` as a shell
    /// finds it): run live under the arbiter
    /// (`dyncore_runtime::arbiter`). Not with `program`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// A command's model for the simulator: a Table 3 program that stands
    /// for it (with `work_ms`, `threads`, as for `program`). Without one,
    /// the simulator refuses the scenario (it cannot run a command).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Name in reports (default: the program's name). Results of programs
    /// with the same label in one run are averaged.
    pub label: Option<String>,
    /// Identical instances to start.
    #[serde(default = "one")]
    pub count: u32,
    /// Start time, virtual milliseconds.
    #[serde(default)]
    pub start_ms: f64,
    /// Instances start this many ms apart: instance k at `start_ms + k ×
    /// every_ms` (default: all at `start_ms`). A load that comes and goes.
    pub every_ms: Option<f64>,
    /// Threads (parallel programs; default: one per CPU of the machine).
    pub threads: Option<u32>,
    /// Total work in milliseconds of one baseline CPU (default per program).
    pub work_ms: Option<f64>,
    /// Nice level, -20..=19 (CFS weights).
    #[serde(default)]
    pub nice: i32,
    /// Ask for a `sequential` execution object of this level (log2 of CPUs).
    /// Default under Chameleon: the machine's largest fuse level for
    /// sequential programs, none for parallel ones.
    pub seq_level: Option<u32>,
    /// Weight of the `sequential` property (default: the program's speedup
    /// on the largest object).
    pub weight: Option<f64>,
    /// Tax rate on borrowed CPUs (number, or "auto").
    #[serde(default)]
    pub tax: TaxSpec,
    /// Linux-like policy: pin to `"fast"` CPUs or to a cpulist ("0-3").
    pub pin: Option<String>,
    /// Slowdown factor when the SMT sibling is busy (default per program).
    pub smt_factor: Option<f64>,
}

fn one() -> u32 {
    1
}

impl WorkloadSpec {
    /// The program every backend plans this workload as: its `program`;
    /// for a command, its `model` or else the stand-in
    /// [`COMMAND`](crate::workload::COMMAND) (one thread, medium class).
    /// `None` only for an unknown name (validation refuses it).
    pub fn program_def(&self) -> Option<&'static crate::workload::Program> {
        match (&self.command, &self.model) {
            (Some(_), Some(m)) => crate::workload::program(m),
            (Some(_), None) => Some(&crate::workload::COMMAND),
            (None, _) => crate::workload::program(&self.program),
        }
    }
}

impl RunSpec {
    /// Whether any of the run's workloads names a command.
    pub fn has_commands(&self) -> bool {
        self.workloads.iter().any(|w| w.command.is_some())
    }
}

impl Scenario {
    /// Whether any run names a command (such runs run live under the
    /// arbiter).
    pub fn has_commands(&self) -> bool {
        self.runs.iter().any(RunSpec::has_commands)
    }

    /// The first command workload without a `model`, as the path of its
    /// `command` field: the simulator cannot run it.
    pub fn unmodelled_command(&self) -> Option<Vec<String>> {
        self.runs.iter().enumerate().find_map(|(i, r)| {
            r.workloads.iter().position(|w| w.command.is_some() && w.model.is_none()).map(|j| {
                ["run", &i.to_string(), "workload", &j.to_string(), "command"].map(String::from).to_vec()
            })
        })
    }
}

/// One simulated machine, policy and workload mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Name of the run in reports (a bar group or a series); unique.
    pub label: String,
    /// Series (bar colour) this run belongs to when `group_by = "program"`
    /// (default: the label). Runs of the same series on different programs
    /// form one series, e.g. every "ACMP-3" run.
    pub series: Option<String>,
    /// Architecture: see [`ARCHS`](crate::machine::ARCHS).
    pub machine: String,
    pub policy: PolicySpec,
    /// Override the architecture's node count.
    pub nodes: Option<usize>,
    /// Override the architecture's CPUs per node.
    pub cpus_per_node: Option<usize>,
    /// Largest fused object, in CPUs (1, 2 or 4).
    pub max_fuse: Option<usize>,
    #[serde(default)]
    pub sim: SimOverrides,
    #[serde(rename = "workload")]
    pub workloads: Vec<WorkloadSpec>,
}

/// What the report plots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReportSpec {
    /// `bars` (grouped bar chart) or `allocation` (CPUs per program over time).
    pub kind: PlotKind,
    /// `speedup` (vs one baseline CPU), `relative_time` (completion time vs
    /// the program alone on one baseline CPU), `completion_s`, or
    /// `energy_j` (the modelled energy of the program's run, joules).
    pub metric: Metric,
    /// x axis: `program` (series = runs) or `run` (series = program labels).
    pub group_by: GroupBy,
    /// Which run the allocation timeline shows (label; default the first).
    pub timeline_run: Option<String>,
}

impl Default for ReportSpec {
    fn default() -> Self {
        ReportSpec {
            kind: PlotKind::Bars,
            metric: Metric::Speedup,
            group_by: GroupBy::Program,
            timeline_run: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlotKind {
    Bars,
    Allocation,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Speedup,
    RelativeTime,
    CompletionS,
    /// The run's modelled energy (`RunResult::energy`), shown at each of
    /// its programs.
    EnergyJ,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    Program,
    Run,
}

/// A `[[paper]]` entry: a check of a figure of this scenario against a value
/// the paper states, against another figure, or as a relative change (see
/// [`crate::claims`]). `≈` checks against a value of the report's metric are
/// also drawn on the plot and tabulated beside dyncore's figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaperFigure {
    /// x category (program or run label, as `group_by` says).
    pub x: String,
    /// series (run label or program label).
    pub series: String,
    /// The figure's metric (default: the report's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<PaperMetric>,
    /// For `metric = "cpus"`: the moment, `"<program label> starts"` or
    /// `"<program label> exits"` (the first instance to do so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    /// `<`, `>` or `≈` (default) against `value` or `than`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relation: Option<Relation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Another figure (fields not given are this entry's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub than: Option<FigureSide>,
    /// A relative change from `from`, in percent ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_pct: Option<f64>,
    /// ... within its printed precision, or this many points where the
    /// paper says "about" (`about`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance_pts: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<FigureSide>,
    /// A `≈` value read off a chart: the chart's tick spacing (the band is
    /// half of it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tick: Option<f64>,
    /// The paper's words that make the figure approximate ("about"), which
    /// allow `band_pct` or `tolerance_pts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub about: Option<String>,
    /// A `≈`'s band in percent, with `about`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub band_pct: Option<f64>,
    /// The paper's digits where the value's shortest form loses them
    /// ("1.50"), or the value in the unit the paper prints it ("7.9" for
    /// 7900 Mbps printed as 7.9 Gbps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub printed: Option<String>,
    /// For a change computed from printed values: which (allows
    /// `tolerance_pts`, their precision carried through).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived: Option<String>,
    /// The `expect` line (its claim id) this entry checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// Without a claim id: the entry's kind (see [`crate::claims::Kind`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<crate::claims::Kind>,
    /// Without a claim id, for a fitted or input entry: what was fitted to
    /// it, or which input it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<String>,
    /// Where the paper says it.
    #[serde(default)]
    pub source: String,
    /// What the report says beside the verdict.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl PaperFigure {
    /// The fields that set the entry's band ([`crate::claims::Band::of`]).
    pub fn band_fields(&self) -> crate::claims::BandFields<'_> {
        crate::claims::BandFields {
            printed: self.printed.as_deref(),
            tick: self.tick,
            about: self.about.as_deref(),
            derived: self.derived.as_deref(),
            band_pct: self.band_pct,
            tolerance_pts: self.tolerance_pts,
        }
    }

    /// A `≈` check against a value of the report's metric: a figure the
    /// plot and the comparison table show.
    pub fn is_point(&self, report: Metric) -> bool {
        self.value.is_some()
            && self.relation.unwrap_or_default() == Relation::About
            && self.metric.is_none_or(|m| m.report_metric() == Some(report))
    }
}

/// The other figure of an ordering or a change: any field not given is the
/// entry's own.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FigureSide {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<PaperMetric>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
}

/// What a `[[paper]]` entry measures of a program (instances with the same
/// label in a run averaged, except `cpus`, which adds them up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaperMetric {
    Speedup,
    RelativeTime,
    CompletionS,
    /// The fraction of its completion time the program ran on a fused object.
    FusedShare,
    /// CPUs held by the program's execution objects just after `after`.
    Cpus,
    /// The run's modelled energy, J (a run's figure: the program label
    /// only picks the runs that have it).
    EnergyJ,
}

impl PaperMetric {
    pub fn name(self) -> &'static str {
        match self {
            PaperMetric::Speedup => "speedup",
            PaperMetric::RelativeTime => "relative time",
            PaperMetric::CompletionS => "completion (s)",
            PaperMetric::FusedShare => "fused share",
            PaperMetric::Cpus => "CPUs",
            PaperMetric::EnergyJ => "energy (J)",
        }
    }

    /// The report metric this is, if it is one.
    pub fn report_metric(self) -> Option<Metric> {
        match self {
            PaperMetric::Speedup => Some(Metric::Speedup),
            PaperMetric::RelativeTime => Some(Metric::RelativeTime),
            PaperMetric::CompletionS => Some(Metric::CompletionS),
            PaperMetric::EnergyJ => Some(Metric::EnergyJ),
            PaperMetric::FusedShare | PaperMetric::Cpus => None,
        }
    }

    pub fn of_report(m: Metric) -> PaperMetric {
        match m {
            Metric::Speedup => PaperMetric::Speedup,
            Metric::RelativeTime => PaperMetric::RelativeTime,
            Metric::CompletionS => PaperMetric::CompletionS,
            Metric::EnergyJ => PaperMetric::EnergyJ,
        }
    }
}

/// A scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name; the report folder is `out/<name>/`.
    pub name: String,
    pub title: String,
    #[serde(default)]
    pub description: String,
    /// Seed of the one generator (task lengths of dynamic programs, IPIs).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Seeds every run is run with: `seed`, `seed + 1`, … (default: the
    /// command's). Figures are reported as the median and min-max range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seeds: Option<u32>,
    #[serde(default)]
    pub sim: SimParams,
    #[serde(default)]
    pub report: ReportSpec,
    /// What the paper says the figure shows: claims (checked by the
    /// `[[paper]]` entries that name them) and prose.
    #[serde(default)]
    pub expect: Vec<Expect>,
    #[serde(default, rename = "paper")]
    pub paper: Vec<PaperFigure>,
    #[serde(rename = "run")]
    pub runs: Vec<RunSpec>,
    /// Record each run's policy traffic into `RunResult::policy_trace` (not
    /// a file field: set by callers that replay or check it).
    #[serde(skip)]
    pub record_policy_trace: bool,
    /// The machine profiles the scenario names, read by
    /// [`Scenario::load_profiles`] (keyed by the path as written).
    #[serde(skip)]
    pub profiles: std::collections::BTreeMap<String, dyncore_core::profile::MachineProfile>,
    /// The policies its runs may name (not a file field: the built-in ones,
    /// or a program's own beside them, set before [`Scenario::validate`]).
    #[serde(skip)]
    pub registry: Registry,
}

fn default_seed() -> u64 {
    1
}

/// A semantic error in a scenario, naming the field by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// Path of the offending field, e.g. `["run", "2", "workload", "0", "program"]`.
    pub path: Vec<String>,
    pub message: String,
}

impl ScenarioError {
    /// `run[2].workload[0].program`
    pub fn dotted_path(&self) -> String {
        dotted_path(&self.path)
    }
}

/// A field path as people write it: `["run", "2", "program"]` → `run[2].program`.
pub fn dotted_path(path: &[String]) -> String {
    let mut s = String::new();
    for p in path {
        if p.parse::<usize>().is_ok() {
            s.push_str(&format!("[{p}]"));
        } else {
            if !s.is_empty() {
                s.push('.');
            }
            s.push_str(p);
        }
    }
    s
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.dotted_path(), self.message)
    }
}

impl std::error::Error for ScenarioError {}

impl Scenario {
    /// Parses TOML text (syntax and field names only; call [`Scenario::validate`]).
    pub fn from_toml(text: &str) -> Result<Scenario, toml::de::Error> {
        toml::from_str(text)
    }

    /// Most seeds a scenario (or `dyncore run --seeds`) may ask for.
    pub const MAX_SEEDS: u32 = 1000;
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal valid scenario (shared with `validate.rs`'s tests).
    pub(crate) const GOOD: &str = r#"
name = "t"
title = "t"
[[run]]
label = "a"
machine = "dynamic"
policy = "chameleon"
[[run.workload]]
program = "nqueen"
"#;

    pub(crate) fn err(text: &str) -> ScenarioError {
        Scenario::from_toml(text).expect("parses").validate().expect_err("must be refused")
    }

    #[test]
    fn a_minimal_scenario_is_valid_with_defaults() {
        let s = Scenario::from_toml(GOOD).unwrap();
        s.validate().unwrap();
        assert_eq!(s.sim.min_granularity_ns, 16_000_000);
        assert_eq!(s.runs[0].workloads[0].count, 1);
    }

    #[test]
    fn unknown_program_lists_the_known_ones() {
        let e = err(&GOOD.replace("nqueen", "quake"));
        assert_eq!(e.dotted_path(), "run[0].workload[0].program");
        assert!(e.message.contains("unknown program `quake`") && e.message.contains("mandelbrot-db"), "{e}");
    }

    #[test]
    fn unknown_architecture_lists_the_known_ones() {
        let e = err(&GOOD.replace("\"dynamic\"", "\"fusion9000\""));
        assert_eq!(e.dotted_path(), "run[0].machine");
        assert!(e.message.contains("acmp-3"), "{e}");
    }

    #[test]
    fn impossible_machines_are_refused_with_the_reason() {
        let e = err(&GOOD.replace("policy", "cpus_per_node = 2\nmax_fuse = 4\npolicy"));
        assert_eq!(e.dotted_path(), "run[0].max_fuse");
        assert!(e.message.contains("does not fit a node of 2 CPUs"), "{e}");
        let e = err(&GOOD.replace("policy", "cpus_per_node = 0\npolicy"));
        assert!(e.message.contains("zero CPUs"), "{e}");
        let e = err(&GOOD.replace("\"dynamic\"", "\"acmp-3\"").replace("policy", "max_fuse = 2\npolicy"));
        assert!(e.message.contains("cannot fuse"), "{e}");
    }

    #[test]
    fn unknown_fields_are_syntax_errors() {
        let e = Scenario::from_toml(&GOOD.replace("program", "progrm")).expect_err("unknown field");
        assert!(e.to_string().contains("progrm"), "{e}");
    }

    #[test]
    fn bad_values_name_their_field() {
        assert_eq!(err(&format!("{GOOD}tax = -1.0\n")).dotted_path(), "run[0].workload[0].tax");
        assert_eq!(err(&format!("{GOOD}count = 0\n")).dotted_path(), "run[0].workload[0].count");
        assert_eq!(err(&format!("{GOOD}pin = \"x-y\"\n")).dotted_path(), "run[0].workload[0].pin");
        let s = Scenario::from_toml(&format!("{GOOD}tax = \"auto\"\n")).unwrap();
        s.validate().unwrap();
        assert_eq!(s.runs[0].workloads[0].tax, TaxSpec::Auto(AutoTax::Auto));
    }
}
