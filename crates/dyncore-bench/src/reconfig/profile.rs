//! `--write-profile PATH`: the machine profile
//! ([`dyncore_core::profile::MachineProfile`]) the simulator's `runtime`
//! reconfiguration mechanism charges, from what this run measured in the
//! one-runtime-CPU-per-real-CPU layout (no oversubscription: the costs are
//! those of the mechanism, not of four workers sharing a core).
//!
//! For each mode and direction:
//!
//! * `step_ns`: the median of each critical step, by `Step::name`, over
//!   every occurrence timed in the breakdown passes of one-CPU calls (and,
//!   for Bolt online, the cold onlines that re-create the cache);
//! * `call_ns`: the whole one-CPU call's median (timed with step timing
//!   off) minus the sum of its plan's step medians — the control lock, the
//!   planner's view and planning — never negative.

use std::path::Path;

use anyhow::{Context, Result};
use dyncore_core::profile::{CallCosts, MachineProfile, ModeCosts};
use dyncore_runtime::cpu::Mode;

use super::Layout;
use super::measure::{ColdOnline, Steps, Sweep};
use crate::RoundSamples;

/// The costs of one direction: `steps` (and `extra`, steps seen only in
/// other plans of the same direction) and the whole call's `samples`.
fn call_costs(samples: &RoundSamples, steps: &Steps, extra: Option<&Steps>) -> Option<CallCosts> {
    let whole = samples.spread()?.median_ns;
    let mut step_ns: std::collections::BTreeMap<String, u64> =
        steps.medians().into_iter().map(|(n, v)| (n.to_string(), v)).collect();
    let in_plan: f64 = steps.plan.iter().map(|n| step_ns.get(*n).copied().unwrap_or(0) as f64).sum();
    for (n, v) in extra.map(Steps::medians).unwrap_or_default() {
        step_ns.entry(n.to_string()).or_insert(v);
    }
    Some(CallCosts { call_ns: (whole - in_plan).max(0.0).round() as u64, step_ns })
}

fn mode_costs(sweep: &Sweep, cold: Option<&ColdOnline>) -> Option<ModeCosts> {
    Some(ModeCosts {
        offline: call_costs(&sweep.offline, &sweep.offline_steps, None)?,
        online: call_costs(&sweep.online, &sweep.online_steps, cold.map(|c| &c.steps))?,
    })
}

/// The profile of `layout` (its one-CPU sweeps of both modes); `None` if
/// either was not measured.
pub fn build(layout: &Layout, machine: &str, command: &str, date: &str) -> Option<MachineProfile> {
    let one = |mode: Mode| layout.sweeps.iter().find(|s| s.mode == mode && s.cpus == 1);
    Some(MachineProfile {
        machine: machine.into(),
        measured_on: date.into(),
        command: command.into(),
        runtime_cpus: layout.runtime_cpus(),
        real_cpus: layout.real_cpus.len(),
        bolt: mode_costs(one(Mode::Bolt)?, layout.cold.as_ref())?,
        naive: mode_costs(one(Mode::Naive)?, None)?,
        stack: None,
    })
}

/// Writes `profile` as TOML to `path`, with a comment saying what it is,
/// and checks that it reads back the same. A `[stack]` section already in
/// the file (written by `dyncore bench stack --write-profile`) is kept:
/// this bench measures reconfiguration only.
pub fn write(path: &Path, profile: &MachineProfile) -> Result<()> {
    let mut profile = profile.clone();
    if profile.stack.is_none()
        && let Ok(old) = std::fs::read_to_string(path)
        && let Ok(old) = toml::from_str::<MachineProfile>(&old)
    {
        profile.stack = old.stack;
    }
    let profile = &profile;
    let body = toml::to_string_pretty(profile).context("serialising the machine profile")?;
    let back: MachineProfile = toml::from_str(&body).context("the machine profile does not read back")?;
    anyhow::ensure!(&back == profile, "the machine profile changed on reading back");
    let text = format!(
        "# Machine profile: per-step costs of runtime CPU reconfiguration, measured by\n\
         # `dyncore bench reconfig --write-profile` (see dyncore_core::profile and\n\
         # docs/results.md, \"Reconfiguration\"). Nanoseconds; medians of one-CPU calls\n\
         # with one runtime CPU per real CPU.\n{body}"
    );
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    dyncore_report::report::write_file(path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}
