//! NewtOS scenario files (`scenarios/newtos/*.toml`, docs/scenarios.md,
//! "Network-stack scenarios"): the stack's costs (`[stack]`, the fields of a
//! machine profile's `[stack]`), the traffic and machine (`[net]`), and runs
//! that either place the components by hand (`[[run.cpu]]`) or let a
//! placement policy place them (`policy = "dynamic"`, ...), with the
//! paper's figures (`[[paper]]`) beside them.
//!
//! [`NetScenario::validate`] names the bad field by path
//! (`run[2].cpu[0].mhz`) so the command line can point at its line and
//! column. What it guarantees the engine: costs finite and `>= 0`; every
//! speed a step of [`SpeedTable::newtos`] with one chip frequency per run;
//! TCP, IP and the driver placed exactly once (the syscall server and the
//! filter at most once); at most two hyperthreads a core, at one speed;
//! offered loads in time order; a `spread` policy with a CPU per component.

use std::collections::BTreeSet;

use dyncore_core::placement::ComponentKind;
use dyncore_core::power::SpeedTable;
use dyncore_core::profile::StackCosts;
use serde::{Deserialize, Serialize};

use super::idle::GovernorName;
use super::{CpuSpec, LoadStep, NetParams};
use crate::claims::{Expect, Relation};
use crate::scenario::ScenarioError;

/// A placement policy that places a run's components.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyName {
    Spread,
    Consolidate,
    Efficient,
    Dynamic,
}

impl PolicyName {
    pub fn name(self) -> &'static str {
        match self {
            PolicyName::Spread => "spread",
            PolicyName::Consolidate => "consolidate",
            PolicyName::Efficient => "efficient",
            PolicyName::Dynamic => "dynamic",
        }
    }
}

/// One run: a layout by hand, or a policy on `cpus` CPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetRun {
    /// Name in reports; unique.
    pub label: String,
    /// The x category of a grouped figure (default: the label).
    pub group: Option<String>,
    /// CPUs placed by hand.
    #[serde(default, rename = "cpu")]
    pub cpus: Vec<CpuSpec>,
    /// ... or a placement policy.
    pub policy: Option<PolicyName>,
    /// CPUs the policy may use.
    pub policy_cpus: Option<u32>,
    /// Components the policy places (default TCP, IP, driver).
    pub components: Option<Vec<ComponentKind>>,
    /// `efficient`'s target, Gbit/s.
    pub target_gbps: Option<f64>,
    /// The policy's sample period, ms (default 1).
    pub sample_ms: Option<f64>,
    /// Offered load over time (default: as fast as the stack goes).
    #[serde(default)]
    pub load: Vec<LoadStep>,
    /// This run's idle governor (default: `[net] governor`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub governor: Option<GovernorName>,
}

/// A `[[paper]]` entry: a check of a figure of this scenario (a run's
/// metric) against a value the paper states, against another figure, or as
/// a relative change (see [`crate::claims`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetPaper {
    /// The run's label.
    pub run: String,
    /// See [`METRICS`].
    pub metric: String,
    /// `<`, `>` or `≈` (default) against `value` or `than`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relation: Option<Relation>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Another figure (fields not given are this entry's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub than: Option<NetSide>,
    /// A relative change from `from`, in percent ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_pct: Option<f64>,
    /// ... within its printed precision, or this many points where the
    /// paper says "about" (`about`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance_pts: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<NetSide>,
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
    #[serde(default)]
    pub source: String,
    /// What the report says beside the verdict.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl NetPaper {
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
}

/// The other figure of an ordering or a change; fields not given are the
/// entry's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetSide {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
}

/// The metrics a `[[paper]]` entry may name (and `busy.<component>`).
pub const METRICS: [&str; 6] =
    ["mbps", "power_w", "chip_w", "resources", "normalised_utilisation", "energy_j"];

/// Whether `m` is a metric of [`METRICS`] or `busy.<component>`.
pub fn is_metric(m: &str) -> bool {
    METRICS.contains(&m) || m.strip_prefix("busy.").is_some_and(|c| c.parse::<ComponentKind>().is_ok())
}

/// What the report draws.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetReport {
    /// Bars: `power` (modelled W), `resources` (% of 3 × 1600 MHz) or
    /// `utilisation` (each component's busy fraction).
    pub bars: String,
    /// The x axis title.
    pub x_title: String,
}

impl Default for NetReport {
    fn default() -> Self {
        NetReport { bars: "power".into(), x_title: "configuration".into() }
    }
}

/// A network-stack scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetScenario {
    pub name: String,
    pub title: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "one")]
    pub seed: u64,
    /// Seeds each run is run with (`seed`, `seed + 1`, ...).
    #[serde(default = "three")]
    pub seeds: u32,
    /// What the paper says the figure shows: claims (checked by the
    /// `[[paper]]` entries that name them) and prose.
    #[serde(default)]
    pub expect: Vec<Expect>,
    /// The stack's costs: which are fitted and which assumed is said in the
    /// file's comments and docs/results.md.
    pub stack: StackCosts,
    #[serde(default)]
    pub net: NetParams,
    #[serde(default)]
    pub report: NetReport,
    #[serde(rename = "run")]
    pub runs: Vec<NetRun>,
    #[serde(default, rename = "paper")]
    pub paper: Vec<NetPaper>,
}

fn one() -> u64 {
    1
}

fn three() -> u32 {
    3
}

/// Whether TOML text is a network-stack scenario (it has a `[stack]` table).
pub fn is_net_scenario(text: &str) -> bool {
    toml::from_str::<toml::Table>(text).is_ok_and(|t| t.get("stack").is_some_and(toml::Value::is_table))
}

struct At(Vec<String>);

impl At {
    fn key(&self, k: &str) -> At {
        let mut v = self.0.clone();
        v.push(k.into());
        At(v)
    }
    fn index(&self, k: &str, i: usize) -> At {
        let mut v = self.key(k).0;
        v.push(i.to_string());
        At(v)
    }
    fn err(&self, m: impl Into<String>) -> ScenarioError {
        ScenarioError { path: self.0.clone(), message: m.into() }
    }
    fn check(&self, ok: bool, m: impl FnOnce() -> String) -> Result<(), ScenarioError> {
        if ok { Ok(()) } else { Err(self.err(m())) }
    }
}

/// A bitrate's range (`link_gbps`, a load's `gbps`, `target_gbps`): from
/// 1 Mbit/s, below which a frame takes longer than any run, to 1 Tbit/s.
const GBPS_RANGE: &str = "0.001 to 1000 Gbit/s";

fn gbps(v: f64) -> bool {
    (0.001..=1000.0).contains(&v)
}

/// Most simulated milliseconds of one run (bounds the default run's time).
pub const MAX_DURATION_MS: f64 = 10_000.0;
/// Most runs and seeds of a scenario.
pub const MAX_RUNS: usize = 200;
pub const MAX_SEEDS: u32 = 100;

impl NetScenario {
    pub fn from_toml(text: &str) -> Result<NetScenario, toml::de::Error> {
        toml::from_str(text)
    }

    /// Checks meaning (module docs); the error names the field by path.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let root = At(Vec::new());
        // The same rule as every scenario's: one safe folder name that is
        // not one the command writes itself.
        crate::scenario::limits::check_name(&self.name).map_err(|m| root.key("name").err(m))?;
        root.key("seeds").check((1..=MAX_SEEDS).contains(&self.seeds), || {
            format!("expected 1 to {MAX_SEEDS}; found {}", self.seeds)
        })?;
        if let Err(e) = self.stack.validate() {
            let mut path = vec!["stack".to_string()];
            path.extend(e.field.split('.').map(str::to_string));
            return Err(ScenarioError { path, message: format!("{}; found {}", e.expected(), e.value) });
        }
        self.validate_net(&root.key("net"))?;
        root.key("report")
            .key("bars")
            .check(["power", "resources", "utilisation"].contains(&self.report.bars.as_str()), || {
                format!("expected `power`, `resources` or `utilisation`; found `{}`", self.report.bars)
            })?;
        root.key("run").check(!self.runs.is_empty() && self.runs.len() <= MAX_RUNS, || {
            format!("expected 1 to {MAX_RUNS} [[run]] tables; found {}", self.runs.len())
        })?;
        let mut labels = BTreeSet::new();
        for (i, r) in self.runs.iter().enumerate() {
            let at = root.index("run", i);
            at.key("label")
                .check(labels.insert(r.label.clone()), || format!("a second run labelled `{}`", r.label))?;
            validate_run(r, &at, self.net.duration_ms)?;
        }
        self.validate_paper(&root, &labels)
    }

    /// The `[[paper]]` checks and `expect` (see [`crate::claims`]): runs and
    /// metrics that exist, one form each, claim ids that match.
    fn validate_paper(&self, root: &At, labels: &BTreeSet<String>) -> Result<(), ScenarioError> {
        let kinds: Vec<crate::claims::EntryKind<'_>> = self
            .paper
            .iter()
            .map(|p| {
                let metrics: Vec<&str> = std::iter::once(p.metric.as_str())
                    .chain(
                        [&p.than, &p.from]
                            .into_iter()
                            .flatten()
                            .map(|o| o.metric.as_deref().unwrap_or(&p.metric)),
                    )
                    .collect();
                let input_only = metrics
                    .iter()
                    .all(|m| super::claims::provenance(m) == crate::claims::Provenance::Input)
                    .then(|| ("metric", super::claims::input_reason(&p.metric)));
                crate::claims::EntryKind {
                    claim: p.claim.as_deref(),
                    kind: p.kind,
                    basis: p.basis.as_deref(),
                    input_only,
                }
            })
            .collect();
        crate::claims::check_kinds(&self.expect, &kinds)
            .map_err(|(path, m)| ScenarioError { path, message: m })?;
        let metric_words = || {
            format!("expected one of {}, or `busy.<component>`", METRICS.map(|m| format!("`{m}`")).join(", "))
        };
        for (i, p) in self.paper.iter().enumerate() {
            let at = root.index("paper", i);
            at.key("run").check(labels.contains(&p.run), || format!("no run is labelled `{}`", p.run))?;
            at.key("metric")
                .check(is_metric(&p.metric), || format!("{}; found `{}`", metric_words(), p.metric))?;
            crate::claims::check_form(crate::claims::Form {
                relation: p.relation,
                value: p.value,
                than: p.than.is_some(),
                change_pct: p.change_pct,
                tolerance_pts: p.tolerance_pts,
                from: p.from.is_some(),
                tick: p.tick,
                about: p.about.as_deref(),
                band_pct: p.band_pct,
                printed: p.printed.as_deref(),
                derived: p.derived.as_deref(),
            })
            .map_err(|(k, m)| at.key(k).err(m))?;
            for (k, side) in [("than", &p.than), ("from", &p.from)] {
                let Some(o) = side else { continue };
                let same_run = o.run.as_deref().is_none_or(|r| r == p.run);
                let same_metric = o.metric.as_deref().is_none_or(|m| m == p.metric);
                if same_run && same_metric {
                    return Err(at.key(k).err(crate::claims::self_comparison(k)));
                }
            }
            for c in [&p.source, &p.note] {
                at.key("source").check(!c.chars().any(char::is_control), || "expected one line".into())?;
            }
            for (k, side) in [("than", &p.than), ("from", &p.from)] {
                let Some(o) = side else { continue };
                if let Some(r) = &o.run {
                    at.key(k).key("run").check(labels.contains(r), || format!("no run is labelled `{r}`"))?;
                }
                if let Some(m) = &o.metric {
                    at.key(k)
                        .key("metric")
                        .check(is_metric(m), || format!("{}; found `{m}`", metric_words()))?;
                }
            }
        }
        Ok(())
    }

    fn validate_net(&self, at: &At) -> Result<(), ScenarioError> {
        let n = &self.net;
        at.key("link_gbps")
            .check(gbps(n.link_gbps), || format!("expected {GBPS_RANGE}; found {}", n.link_gbps))?;
        at.key("mss").check((64..=65_000).contains(&n.mss), || {
            format!("expected 64 to 65000 bytes; found {}", n.mss)
        })?;
        at.key("frame_overhead").check(n.frame_overhead <= 1000, || {
            format!("expected at most 1000; found {}", n.frame_overhead)
        })?;
        at.key("streams").check((1..=100_000).contains(&n.streams), || {
            format!("expected 1 to 100000; found {}", n.streams)
        })?;
        at.key("window_bytes").check(
            n.window_bytes >= u64::from(n.mss) && n.window_bytes <= 1 << 30,
            || {
                format!(
                    "expected at least one segment ({} bytes) and at most 1 GiB; found {}",
                    n.mss, n.window_bytes
                )
            },
        )?;
        at.key("remote_ns")
            .check(n.remote_ns <= 1_000_000_000, || format!("expected at most 1 s; found {}", n.remote_ns))?;
        at.key("remote_jitter_ns").check(n.remote_jitter_ns <= 1_000_000_000, || {
            format!("expected at most 1 s; found {}", n.remote_jitter_ns)
        })?;
        at.key("ack_every")
            .check((1..=64).contains(&n.ack_every), || format!("expected 1 to 64; found {}", n.ack_every))?;
        at.key("delack_ns").check((1..=1_000_000_000).contains(&n.delack_ns), || {
            format!("expected 1 ns to 1 s; found {}", n.delack_ns)
        })?;
        at.key("batch").check((1..=1_000_000).contains(&n.batch), || {
            format!("expected 1 to 1000000; found {}", n.batch)
        })?;
        at.key("turn_cycles").check((0.0..=1e9).contains(&n.turn_cycles), || {
            format!("expected 0 to 1e9 cycles; found {}", n.turn_cycles)
        })?;
        at.key("spin_ns")
            .check(n.spin_ns <= 1_000_000_000, || format!("expected at most 1 s; found {}", n.spin_ns))?;
        at.key("smt_factor")
            .check(n.smt_factor.is_finite() && (1.0..=10.0).contains(&n.smt_factor), || {
                format!("expected 1 to 10; found {}", n.smt_factor)
            })?;
        self.validate_writes(at)?;
        at.key("duration_ms").check((1.0..=MAX_DURATION_MS).contains(&n.duration_ms), || {
            format!("expected 1 to {MAX_DURATION_MS} ms; found {}", n.duration_ms)
        })?;
        at.key("warmup_ms").check(n.warmup_ms >= 0.0 && n.warmup_ms <= n.duration_ms - 1.0, || {
            format!(
                "expected 0 to duration_ms - 1 ({}): at least 1 ms is measured; found {}",
                n.duration_ms - 1.0,
                n.warmup_ms
            )
        })?;
        Ok(())
    }
}

impl NetScenario {
    /// The synchronous writes' fields (`netstack::writes`): a write must
    /// fit an empty send buffer with a segment to spare, or the stack could
    /// hold a part segment that no write ever completes.
    fn validate_writes(&self, at: &At) -> Result<(), ScenarioError> {
        let n = &self.net;
        at.key("clients")
            .check(n.clients <= 10_000, || format!("expected 0 to 10000; found {}", n.clients))?;
        let buffer = u64::from(n.streams) * n.window_bytes;
        at.key("write_bytes").check(
            n.write_bytes >= 1 && u64::from(n.write_bytes) + u64::from(n.mss) <= buffer,
            || {
                format!(
                    "expected 1 byte to the send buffer (streams × window_bytes = {buffer}) less a segment ({}); found {}",
                    n.mss, n.write_bytes
                )
            },
        )?;
        at.key("client_cycles").check((0.0..=1e9).contains(&n.client_cycles), || {
            format!("expected 0 to 1e9 cycles; found {}", n.client_cycles)
        })?;
        at.key("copy_gb_per_s").check((0.0..=1000.0).contains(&n.copy_gb_per_s), || {
            format!("expected 0 (no memory time) to 1000 GB/s; found {}", n.copy_gb_per_s)
        })
    }
}

const REQUIRED: [ComponentKind; 3] = [ComponentKind::Tcp, ComponentKind::Ip, ComponentKind::Driver];

/// The components every stack has: TCP, IP and the driver.
pub fn required() -> [ComponentKind; 3] {
    REQUIRED
}

fn validate_run(r: &NetRun, at: &At, duration_ms: f64) -> Result<(), ScenarioError> {
    let table = SpeedTable::newtos();
    match (r.policy, r.cpus.is_empty()) {
        (Some(_), false) => {
            return Err(at.key("policy").err("a run has either [[run.cpu]] tables or a `policy`, not both"));
        }
        (None, true) => {
            return Err(at.key("cpu").err("a run needs [[run.cpu]] tables (a layout) or a `policy`"));
        }
        _ => {}
    }
    for (j, l) in r.load.iter().enumerate() {
        let a = at.index("load", j);
        a.key("gbps").check(l.gbps == 0.0 || gbps(l.gbps), || {
            format!("expected 0 (nothing offered) or {GBPS_RANGE}; found {}", l.gbps)
        })?;
        let prev = if j == 0 { 0.0 } else { r.load[j - 1].at_ms };
        a.key("at_ms").check(l.at_ms.is_finite() && l.at_ms >= prev && l.at_ms <= duration_ms, || {
            format!(
                "expected a time from {prev} (the step before) to duration_ms ({duration_ms}); found {}",
                l.at_ms
            )
        })?;
    }
    if let Some(p) = r.policy {
        let comps = r.components.clone().unwrap_or(REQUIRED.to_vec());
        let ca = at.key("components");
        check_components(&comps, &ca)?;
        let n = r.policy_cpus.unwrap_or(comps.len() as u32);
        at.key("policy_cpus").check((1..=64).contains(&n), || format!("expected 1 to 64; found {n}"))?;
        if p == PolicyName::Spread && (n as usize) < comps.len() {
            return Err(at.key("policy_cpus").err(format!(
                "a `spread` placement needs a CPU per component: {} components, {n} CPUs",
                comps.len()
            )));
        }
        let t = r.target_gbps;
        at.key("target_gbps")
            .check((p == PolicyName::Efficient) == t.is_some() && t.is_none_or(gbps), || {
                format!("expected {GBPS_RANGE} for `efficient`, and only there")
            })?;
        let s = r.sample_ms.unwrap_or(1.0);
        at.key("sample_ms").check(s.is_finite() && s >= 0.01 && s <= duration_ms, || {
            format!("expected 0.01 ms to duration_ms ({duration_ms}); found {s}")
        })?;
        return Ok(());
    }
    for k in ["policy_cpus", "components", "target_gbps", "sample_ms"] {
        let set = match k {
            "policy_cpus" => r.policy_cpus.is_some(),
            "components" => r.components.is_some(),
            "target_gbps" => r.target_gbps.is_some(),
            _ => r.sample_ms.is_some(),
        };
        at.key(k).check(!set, || format!("`{k}` is for runs with a `policy`"))?;
    }
    let mut chip: Option<(usize, u32)> = None;
    let mut all = Vec::new();
    for (j, c) in r.cpus.iter().enumerate() {
        let a = at.index("cpu", j);
        let step = table.by_mhz(c.mhz).map_err(|e| a.key("mhz").err(e.to_string()))?;
        let chip_mhz = table.get(step).chip_mhz;
        match chip {
            Some((first, f)) if f != chip_mhz => {
                return Err(a.key("mhz").err(format!(
                    "the chip runs at one frequency: cpu[{first}] needs it at {f} MHz, {} MHz needs {chip_mhz} MHz \
                     (below 1600 MHz a core is throttled from a chip at 1600)",
                    c.mhz
                )));
            }
            None => chip = Some((j, chip_mhz)),
            _ => {}
        }
        if let Some(core) = c.core {
            let same: Vec<&CpuSpec> = r.cpus.iter().filter(|o| o.core == Some(core)).collect();
            a.key("core").check(same.len() <= 2, || {
                format!("core {core} has {} hyperthreads; a core has 2", same.len())
            })?;
            a.key("mhz").check(same.iter().all(|o| o.mhz == c.mhz), || {
                format!("the hyperthreads of core {core} share its clock: give them one speed")
            })?;
        }
        all.extend(c.components.iter().copied());
    }
    check_components(&all, &at.key("cpu"))
}

fn check_components(comps: &[ComponentKind], at: &At) -> Result<(), ScenarioError> {
    for k in ComponentKind::ALL {
        let n = comps.iter().filter(|&&c| c == k).count();
        let need = REQUIRED.contains(&k);
        at.check(n <= 1 && (n == 1 || !need), || {
            if n > 1 {
                format!("{k} is placed {n} times; a component runs on one CPU")
            } else {
                format!("{k} is not placed; TCP, IP and the driver each need a CPU")
            }
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const GOOD: &str = r#"
name = "t"
title = "t"
[stack]
cpu_mhz = 2267
channel_cycles_per_msg = 50
wakeup_ns = 10000
syscall = { cycles_per_packet = 100, cycles_per_byte = 0 }
tcp = { cycles_per_packet = 800, cycles_per_byte = 1.0 }
ip = { cycles_per_packet = 900, cycles_per_byte = 0 }
filter = { cycles_per_packet = 100, cycles_per_byte = 0 }
driver = { cycles_per_packet = 900, cycles_per_byte = 0 }
[[run]]
label = "a"
[[run.cpu]]
mhz = 1600
components = ["tcp"]
[[run.cpu]]
mhz = 600
components = ["ip", "driver"]
"#;

    fn err(text: &str) -> ScenarioError {
        NetScenario::from_toml(text).expect("parses").validate().expect_err("must be refused")
    }

    #[test]
    fn a_good_scenario_is_valid_and_recognised() {
        NetScenario::from_toml(GOOD).unwrap().validate().unwrap();
        assert!(is_net_scenario(GOOD));
        assert!(!is_net_scenario("name = \"x\"\n[[run]]\nlabel = \"a\"\n"));
    }

    #[test]
    fn a_negative_cost_names_its_field() {
        let e = err(&GOOD.replace("cycles_per_byte = 1.0", "cycles_per_byte = -1.0"));
        assert_eq!(e.dotted_path(), "stack.tcp.cycles_per_byte");
    }

    #[test]
    fn a_frequency_the_machine_lacks_is_refused_with_the_steps() {
        let e = err(&GOOD.replace("mhz = 600", "mhz = 700"));
        assert_eq!(e.dotted_path(), "run[0].cpu[1].mhz");
        assert!(e.message.contains("no speed step of 700 MHz") && e.message.contains("1867"), "{e}");
        let e = err(&GOOD.replace("mhz = 600", "mhz = 2267"));
        assert!(e.message.contains("one frequency"), "{e}");
    }

    #[test]
    fn placements_must_be_whole() {
        let e = err(&GOOD.replace("[\"ip\", \"driver\"]", "[\"ip\"]"));
        assert_eq!(e.dotted_path(), "run[0].cpu");
        assert!(e.message.contains("driver is not placed"), "{e}");
        let e = err(&GOOD.replace("[\"ip\", \"driver\"]", "[\"ip\", \"driver\", \"tcp\"]"));
        assert!(e.message.contains("tcp is placed 2 times"), "{e}");
    }

    #[test]
    fn a_write_must_fit_the_send_buffer() {
        let text = GOOD.replace("[[run]]", "[net]\nclients = 8\nstreams = 1\nwrite_bytes = 65000\n[[run]]");
        let e = err(&text);
        assert_eq!(e.dotted_path(), "net.write_bytes");
        assert!(e.message.contains("65535") && e.message.contains("found 65000"), "{e}");
        let ok = GOOD.replace("[[run]]", "[net]\nclients = 8\n[[run]]");
        NetScenario::from_toml(&ok).unwrap().validate().unwrap();
    }

    #[test]
    fn spread_needs_a_cpu_per_component() {
        let text = GOOD.split("[[run]]").next().unwrap().to_string()
            + "[[run]]\nlabel = \"s\"\npolicy = \"spread\"\npolicy_cpus = 2\n";
        let e = err(&text);
        assert_eq!(e.dotted_path(), "run[0].policy_cpus");
        assert!(e.message.contains("3 components, 2 CPUs"), "{e}");
    }
}
