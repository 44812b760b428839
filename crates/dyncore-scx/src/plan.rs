// SPDX-License-Identifier: GPL-2.0-only
//! The arguments of a run, checked before anything is created: the policy
//! and its parameters, the CPUs, the threads' spec, and the command. The
//! same options as `dyncore exec` (whose `--backend scx` hands them here).

use std::ffi::OsString;

use dyncore_core::policies::{ParamValue, Params, Registry, RunContext, parse_param};
use dyncore_core::policy::ThreadSpec;
use dyncore_core::reconfig::Mode;
use dyncore_core::speed::{Duty, SpeedClass, SpeedModel};
use dyncore_core::topology::{CoreKind, Topology};
use dyncore_core::{CpuId, CpuSet, Nanos};

/// The actions this backend carries out (module `scheduler` says how):
/// every thread action, as every thread backend.
pub use dyncore_core::policy::THREAD_ACTIONS as SCX_ACTIONS;

/// The policies' tick and CFS minimum granularity (`dyncore exec`'s).
pub const TICK_NS: Nanos = 4_000_000;
pub const MIN_GRANULARITY_NS: Nanos = 16_000_000;

/// One command of a run: what it runs, when, and the spec every thread
/// of it is spawned with (the policy sees each thread's own command's).
#[derive(Debug, Clone)]
pub struct CommandPlan {
    pub label: String,
    pub argv: Vec<OsString>,
    /// When it starts, from the run's start.
    pub start_ns: Nanos,
    pub spec: ThreadSpec,
    /// Its standard output goes to /dev/null (a scenario's commands, as
    /// the live backend runs them); else it is the caller's.
    pub stdout_null: bool,
}

/// A checked run.
#[derive(Debug, Clone)]
pub struct Plan {
    pub policy: String,
    pub params: Params,
    pub ctx: RunContext,
    /// Runtime CPU i is real CPU `cpus[i]`.
    pub cpus: Vec<CpuId>,
    /// Duties are scaled by baseline/50% before they become slices.
    pub baseline: Duty,
    pub quiet: bool,
    /// Where the run's record goes as JSON (`--json FILE`).
    pub json: Option<std::path::PathBuf>,
    /// The commands, in the scenario's order (`exec`: one, at once).
    pub commands: Vec<CommandPlan>,
    /// The safety stop: commands still running then are killed (a
    /// scenario's `max_time_ns`; `exec`: none).
    pub max_time_ns: Option<Nanos>,
    /// The subcommand and its arguments as given, to hand to the
    /// scheduler process (which builds the same plan from them).
    pub options: Vec<OsString>,
}

impl Plan {
    /// From a subcommand (`exec` or `run`) and its arguments.
    pub fn from_args(mode: &str, args: &[OsString], registry: &Registry) -> Result<Plan, String> {
        let mut p = match mode {
            "exec" => plan(args, registry)?,
            "run" => crate::scenario::plan(args, registry)?,
            m => return Err(format!("unknown subcommand `{m}`")),
        };
        p.options = std::iter::once(OsString::from(mode)).chain(args.iter().cloned()).collect();
        Ok(p)
    }
}

/// The usage text.
pub const USAGE: &str = "\
usage: dyncore-scx exec --policy NAME [--cpus LIST] [--param NAME=VALUE]... [--tax RATE|auto]
                        [--want-cpus N] [--class low|medium|high] [--max-fuse N]
                        [--baseline-duty PERCENT] [--json FILE] [-q] -- COMMAND ARGS...
       dyncore-scx run SCENARIO.toml --run INDEX [--cpus LIST] [--baseline-duty PERCENT]
                        [--json FILE] [-q]
                                one run of a scenario whose workloads are commands (what
                                `dyncore run --backend scx` runs for each run)
       dyncore-scx check        says whether this machine can run the backend, and if not why
       dyncore-scx policies     the policies, and whether this backend runs each

The command's threads are scheduled by the policy in the kernel (sched_ext, SCHED_EXT for the
command's tasks only); a report follows on stderr. Without --cpus, the run has every CPU
dyncore-scx may run on. Exit status: the command's (128 + N if
signal N killed it); 2 if the run was refused before the command started (no sched_ext,
another scheduler loaded, not root, a policy this backend cannot run, a command not found);
125 if the scheduler failed while the command ran (the command carried on under the fair
class, and ran to its end).";

/// The raw options of `exec`, as given.
#[derive(Debug, Default)]
struct Raw {
    policy: Option<String>,
    params: Vec<String>,
    cpus: Option<String>,
    tax: Option<String>,
    want_cpus: Option<String>,
    class: Option<String>,
    max_fuse: Option<String>,
    baseline_duty: Option<String>,
    json: Option<String>,
    quiet: bool,
}

fn parse_raw(args: &[OsString]) -> Result<(Raw, Vec<OsString>), String> {
    let mut raw = Raw::default();
    // `--param` repeats: its value lands here, then joins `raw.params`.
    let mut param: Option<String> = None;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].to_str().ok_or_else(|| format!("{:?}: not UTF-8", args[i]))?.to_string();
        if a == "--" {
            return Ok((raw, args[i + 1..].to_vec()));
        }
        if a == "-q" || a == "--quiet" {
            raw.quiet = true;
            i += 1;
            continue;
        }
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let slot: &mut Option<String> = match name.as_str() {
            "--policy" => &mut raw.policy,
            "--cpus" => &mut raw.cpus,
            "--tax" => &mut raw.tax,
            "--want-cpus" => &mut raw.want_cpus,
            "--class" => &mut raw.class,
            "--max-fuse" => &mut raw.max_fuse,
            "--baseline-duty" => &mut raw.baseline_duty,
            "--json" => &mut raw.json,
            "--param" => &mut param,
            _ if !a.starts_with('-') => {
                return Err(format!("`{a}`: the command goes after `--` (dyncore-scx exec ... -- COMMAND)"));
            }
            _ => return Err(format!("unknown option `{name}`")),
        };
        let v = match inline {
            Some(v) => v,
            None => {
                i += 1;
                args.get(i)
                    .and_then(|v| v.to_str())
                    .ok_or_else(|| format!("{name}: expected a value"))?
                    .to_string()
            }
        };
        *slot = Some(v);
        if let Some(p) = param.take() {
            raw.params.push(p);
        }
        i += 1;
    }
    Err("no command: dyncore-scx exec ... -- COMMAND ARGS...".into())
}

fn number<T: std::str::FromStr>(name: &str, v: &Option<String>) -> Result<Option<T>, String> {
    v.as_deref().map(|t| t.parse::<T>().map_err(|_| format!("{name} {t}: not a number"))).transpose()
}

/// Checks `exec`'s arguments against `registry`; nothing is created.
pub fn plan(args: &[OsString], registry: &Registry) -> Result<Plan, String> {
    let (raw, argv) = parse_raw(args)?;
    if argv.is_empty() {
        return Err("no command after `--`".into());
    }
    let policy = raw.policy.clone().ok_or("--policy NAME is required (dyncore-scx policies lists them)")?;
    let entry = registry.get(&policy).map_err(|e| format!("--policy: {e}"))?;
    Registry::refuse_unsupported(&entry.info, "sched_ext backend", SCX_ACTIONS)?;
    let given: Vec<(String, ParamValue)> =
        raw.params.iter().map(|p| parse_param(p)).collect::<Result<_, _>>()?;
    let params = registry.validate(&policy, &given).map_err(|e| match e.param {
        Some(p) => format!("--param {p}: {}", e.message),
        None => e.message,
    })?;
    let cpus = run_cpus(raw.cpus.as_deref())?;
    let n = cpus.len();
    let max_fuse = match number::<usize>("--max-fuse", &raw.max_fuse)? {
        None => [4, 2, 1].into_iter().find(|&k| k <= n).unwrap_or(1),
        Some(k) if ![1, 2, 4].contains(&k) => {
            return Err(format!("--max-fuse {k}: objects have 1, 2 or 4 CPUs"));
        }
        Some(k) if k > n => return Err(format!("--max-fuse {k}: the run has {n} CPU(s)")),
        Some(k) => k,
    };
    let baseline = baseline_duty(&raw.baseline_duty)?;
    let class = match raw.class.as_deref() {
        None | Some("medium") => SpeedClass::Medium,
        Some("low") => SpeedClass::Low,
        Some("high") => SpeedClass::High,
        Some(c) => return Err(format!("--class {c}: low, medium or high")),
    };
    let want_cpus = number::<usize>("--want-cpus", &raw.want_cpus)?.unwrap_or(max_fuse);
    if ![1, 2, 4].contains(&want_cpus) || want_cpus > max_fuse {
        return Err(format!(
            "--want-cpus {want_cpus}: an object has 1, 2 or 4 CPUs, at most --max-fuse ({max_fuse})"
        ));
    }
    let speedup = SpeedModel::DYNAMIC.duty(CoreKind::Little, want_cpus, class).speedup();
    let tax = match raw.tax.as_deref() {
        None => 1.0,
        Some("auto") => dyncore_core::sched::auto_tax(want_cpus, speedup),
        Some(t) => match t.parse::<f64>() {
            Ok(x) if x.is_finite() && (0.0..=100.0).contains(&x) => x,
            _ => return Err(format!("--tax {t}: a number from 0 to 100, or auto")),
        },
    };
    let ctx = RunContext {
        topology: Topology::uniform(1, n),
        speed: SpeedModel::DYNAMIC,
        max_fuse,
        tick_ns: TICK_NS,
        min_granularity_ns: MIN_GRANULARITY_NS,
        notify_on_exit: true,
        reconfig_mode: Mode::Bolt,
        seed: 0,
    };
    let spec = ThreadSpec { nice: 0, tax, want_cpus, weight: speedup, affinity: None, class };
    let label = argv.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ");
    let command = CommandPlan { label, argv, start_ns: 0, spec, stdout_null: false };
    Ok(Plan {
        policy,
        params,
        ctx,
        cpus,
        baseline,
        quiet: raw.quiet,
        json: raw.json.map(Into::into),
        commands: vec![command],
        max_time_ns: None,
        options: Vec::new(),
    })
}

/// The run's CPUs from `--cpus LIST`, each online; without the option,
/// every CPU this process may run on (its affinity), as `taskset` would.
pub fn run_cpus(given: Option<&str>) -> Result<Vec<CpuId>, String> {
    let online = crate::preflight::online_cpus();
    let Some(text) = given else {
        let allowed = crate::preflight::allowed_cpus();
        let cpus: Vec<CpuId> = allowed.iter().filter(|&c| online.contains(c)).collect();
        if cpus.is_empty() {
            return Err("no online CPU in this process's affinity: give --cpus LIST".into());
        }
        return Ok(cpus);
    };
    let set: CpuSet = text.parse().map_err(|e| format!("--cpus {text}: not a CPU list: {e}"))?;
    if set.is_empty() {
        return Err(format!("--cpus {text}: names no CPU"));
    }
    if let Some(c) = set.iter().find(|&c| !online.contains(c)) {
        return Err(format!("--cpus {text}: CPU {c} is not online here (online: {online})"));
    }
    Ok(set.iter().collect())
}

/// `--baseline-duty PERCENT` (default 50%, the baseline CPU's).
pub fn baseline_duty(given: &Option<String>) -> Result<Duty, String> {
    match number::<f64>("--baseline-duty", given)? {
        None => Ok(Duty::BASELINE),
        Some(p) => Duty::from_percent(p).map_err(|e| format!("--baseline-duty {p}: {e}")),
    }
}

/// The slice a CPU at the policy's `duty` gets per tick period, and
/// whether it is limited (below a whole CPU): duties are scaled by
/// baseline/50%, as the arbiter scales its quotas.
pub fn slice_for(duty: Duty, baseline: Duty, tick_ns: Nanos) -> (Nanos, bool) {
    let pm = u32::from(duty.per_mille()) * u32::from(baseline.per_mille());
    let base = u32::from(Duty::BASELINE.per_mille());
    let scaled = ((pm + base / 2) / base).clamp(1, 1000);
    let d = Duty::from_per_mille(scaled).unwrap_or(Duty::FULL);
    if d == Duty::FULL { (tick_ns, false) } else { (d.of(tick_ns).max(100_000), true) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(|s| OsString::from(*s)).collect()
    }

    #[test]
    fn refuses_what_it_cannot_run_and_names_why() {
        let r = Registry::builtin();
        let e = plan(&os(&["--policy", "nope", "--cpus", "0", "--", "true"]), &r).unwrap_err();
        assert!(e.contains("unknown policy `nope`"), "{e}");
        let e = plan(&os(&["--policy", "pinned", "--cpus", "0"]), &r).unwrap_err();
        assert!(e.contains("no command"), "{e}");
        let e =
            plan(&os(&["--policy", "pinned", "--cpus", "0", "--bogus", "1", "--", "true"]), &r).unwrap_err();
        assert!(e.contains("unknown option `--bogus`"), "{e}");
        let e = plan(&os(&["--policy", "pinned", "--cpus", "0", "--max-fuse", "3", "--", "true"]), &r)
            .unwrap_err();
        assert!(e.contains("1, 2 or 4"), "{e}");
    }

    #[test]
    fn a_policy_that_emits_what_the_backend_cannot_run_is_refused_by_name() {
        use dyncore_core::policies::PolicyEntry;
        use dyncore_core::policy::{ActionKind, EventKind};
        static STACKY: PolicyEntry = PolicyEntry {
            info: dyncore_core::policies::PolicyInfo {
                name: "stacky",
                summary: "places network-stack components",
                params: &[],
                events: &[EventKind::StackLoad],
                actions: &[ActionKind::Place],
            },
            build: |ctx, params| Registry::builtin().build("pinned", ctx, params).unwrap(),
        };
        let r = Registry::builtin().with(&STACKY);
        let e = plan(&os(&["--policy", "stacky", "--cpus", "0", "--", "true"]), &r).unwrap_err();
        assert!(e.contains("may emit `place`") && e.contains("sched_ext backend cannot execute"), "{e}");
    }

    #[test]
    fn every_shipped_policy_is_accepted() {
        let r = Registry::builtin();
        for name in r.names() {
            let p = plan(&os(&["--policy", name, "--cpus", "0", "--", "true"]), &r)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(p.cpus, vec![0]);
            assert_eq!(p.commands.len(), 1);
            assert_eq!(p.commands[0].argv, os(&["true"]));
            assert!(!p.commands[0].stdout_null, "exec's command keeps the caller's output");
        }
    }

    #[test]
    fn without_cpus_the_run_has_every_cpu_this_process_may_use() {
        let p = plan(&os(&["--policy", "pinned", "--", "true"]), &Registry::builtin()).unwrap();
        let allowed = crate::preflight::allowed_cpus();
        assert_eq!(p.cpus, allowed.iter().collect::<Vec<_>>());
        assert_eq!(p.ctx.topology.ncpus(), p.cpus.len());
    }

    #[test]
    fn slices_follow_the_duty() {
        // At the baseline (50%), a policy duty is delivered as given.
        assert_eq!(slice_for(Duty::FULL, Duty::BASELINE, 4_000_000), (4_000_000, false));
        assert_eq!(slice_for(Duty::BASELINE, Duty::BASELINE, 4_000_000), (2_000_000, true));
        // A 100% baseline doubles it, capped at a whole CPU.
        assert_eq!(slice_for(Duty::BASELINE, Duty::FULL, 4_000_000), (4_000_000, false));
    }
}
