// SPDX-License-Identifier: GPL-2.0-only
//! `dyncore-scx run SCENARIO --run I`: one run of a scenario whose
//! workloads are commands, on the kernel's scheduler. The policy, its
//! parameters and its run context are built from the scenario exactly as
//! the simulator and the arbiter build them (`dyncore_scenario::policy`),
//! and each command is started at its `start_ms` with its own workload's
//! thread spec (`dyncore_scenario::programs::plan_programs`); its standard
//! output goes to /dev/null, as the live backend's does.
//!
//! `dyncore run --backend scx` calls this for every run of a scenario and
//! puts what it measured beside the simulator's prediction.

use std::ffi::OsString;
use std::path::PathBuf;

use dyncore_core::policies::Registry;
use dyncore_scenario::load as scenarios;
use dyncore_scenario::policy::{machine_of, params_of, policy_info, run_context};
use dyncore_scenario::programs::plan_programs;

use crate::plan::{CommandPlan, Plan, SCX_ACTIONS, baseline_duty, run_cpus};

/// Checks `run`'s arguments and the scenario; nothing is created.
pub fn plan(args: &[OsString], registry: &Registry) -> Result<Plan, String> {
    let mut file: Option<PathBuf> = None;
    let (mut index, mut cpus, mut duty, mut json, mut quiet) = (None, None, None, None, false);
    let mut i = 0;
    while i < args.len() {
        let a = args[i].to_str().ok_or_else(|| format!("{:?}: not UTF-8", args[i]))?.to_string();
        let mut value = |name: &str| -> Result<String, String> {
            i += 1;
            args.get(i)
                .and_then(|v| v.to_str())
                .map(str::to_string)
                .ok_or(format!("{name}: expected a value"))
        };
        match a.as_str() {
            "--run" => index = Some(value("--run")?),
            "--cpus" => cpus = Some(value("--cpus")?),
            "--baseline-duty" => duty = Some(value("--baseline-duty")?),
            "--json" => json = Some(PathBuf::from(value("--json")?)),
            "-q" | "--quiet" => quiet = true,
            _ if a.starts_with('-') => return Err(format!("unknown option `{a}`")),
            _ if file.is_none() => file = Some(PathBuf::from(&a)),
            _ => return Err(format!("`{a}`: one scenario file per run")),
        }
        i += 1;
    }
    let file = file.ok_or("no scenario: dyncore-scx run SCENARIO.toml --run INDEX")?;
    let sc = scenarios::load_with(&file, registry).map_err(|e| e.to_string())?;
    let index: usize = match index {
        None if sc.runs.len() == 1 => 0,
        None => {
            return Err(format!(
                "--run INDEX: {} has {} runs (0 to {})",
                file.display(),
                sc.runs.len(),
                sc.runs.len() - 1
            ));
        }
        Some(t) => t.parse().map_err(|_| format!("--run {t}: not a number"))?,
    };
    let spec = sc.runs.get(index).ok_or_else(|| {
        format!(
            "--run {index}: {} has {} run(s) (0 to {})",
            file.display(),
            sc.runs.len(),
            sc.runs.len().saturating_sub(1)
        )
    })?;
    if !spec.has_commands() {
        return Err(format!(
            "{}: run[{index}] (`{}`) has workloads that are not commands: the sched_ext backend runs real \
             programs (built-in programs run on the simulator and the live runtime)",
            file.display(),
            spec.label
        ));
    }
    Registry::refuse_unsupported(policy_info(&sc, index), "sched_ext backend", SCX_ACTIONS)?;
    let machine = machine_of(&sc, index);
    let n = machine.topology.ncpus();
    let all = run_cpus(cpus.as_deref())?;
    if all.len() < n {
        return Err(format!(
            "run `{}` has {n} CPUs; each is a real CPU of its own, and {} are given ({:?})",
            spec.label,
            all.len(),
            all
        ));
    }
    let commands: Vec<CommandPlan> = plan_programs(spec, &machine)
        .into_iter()
        .map(|p| {
            let argv: Vec<String> = p.command.expect("a run of commands");
            CommandPlan {
                label: p.name,
                argv: argv.iter().map(OsString::from).collect(),
                start_ns: p.start_ns,
                spec: p.template,
                stdout_null: true,
            }
        })
        .collect();
    for c in &commands {
        if let Err((_, m)) = crate::preflight::resolve(&c.argv[0]) {
            return Err(format!("{}: run[{index}], `{}`: {m}", file.display(), c.label));
        }
    }
    let params = sc.sim.with(&spec.sim);
    Ok(Plan {
        policy: spec.policy.name.clone(),
        params: params_of(&sc, index),
        ctx: run_context(&sc, index),
        cpus: all[..n].to_vec(),
        baseline: baseline_duty(&duty)?,
        quiet,
        json,
        commands,
        max_time_ns: Some(params.max_time_ns),
        options: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(|s| OsString::from(*s)).collect()
    }

    /// A scenario file in the temporary folder, removed when dropped.
    struct Tmp(PathBuf);

    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn scenario(text: &str) -> (Tmp, String) {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("dyncore-scx-scenario.{}.{n}.toml", std::process::id()));
        std::fs::write(&p, text).unwrap();
        let s = p.display().to_string();
        (Tmp(p), s)
    }

    const TWO: &str = r#"
name = "t"
title = "t"
seed = 1
[[run]]
label = "pinned"
machine = "uniform"
cpus_per_node = 1
max_fuse = 1
policy = "pinned"
[[run.workload]]
command = ["true"]
label = "a"
model = "nqueen"
work_ms = 10
[[run.workload]]
command = ["sh", "-c", "exit 0"]
label = "b"
model = "nqueen"
work_ms = 10
start_ms = 5
"#;

    #[test]
    fn a_run_of_commands_becomes_a_plan_with_each_commands_start_and_spec() {
        let (_t, p) = scenario(TWO);
        let plan = plan(&os(&[&p, "--cpus", "0"]), &Registry::builtin()).unwrap();
        assert_eq!(plan.policy, "pinned");
        assert_eq!(plan.cpus, vec![0]);
        assert_eq!(plan.commands.len(), 2);
        assert_eq!(plan.commands[0].argv, os(&["true"]));
        assert_eq!(plan.commands[1].start_ns, 5_000_000);
        assert!(plan.commands.iter().all(|c| c.stdout_null));
        assert!(plan.max_time_ns.is_some());
    }

    #[test]
    fn refuses_what_it_cannot_run_and_names_why() {
        let r = Registry::builtin();
        let (_t, p) = scenario(TWO);
        let e = plan(&os(&[&p, "--run", "3", "--cpus", "0"]), &r).unwrap_err();
        assert!(e.contains("--run 3") && e.contains("1 run(s)"), "{e}");
        let e = plan(&os(&[&p, "--bogus"]), &r).unwrap_err();
        assert!(e.contains("unknown option `--bogus`"), "{e}");
        let e = plan(&os(&[]), &r).unwrap_err();
        assert!(e.contains("no scenario"), "{e}");
        let (_u, q) = scenario(&TWO.replace("[\"true\"]", "[\"no-such-program-dyncore\"]"));
        let e = plan(&os(&[&q, "--cpus", "0"]), &r).unwrap_err();
        assert!(e.contains("command not found") && e.contains("`a`"), "{e}");
        let (_v, q) = scenario(&TWO.replace("cpus_per_node = 1", "cpus_per_node = 2"));
        let e = plan(&os(&[&q, "--cpus", "0"]), &r).unwrap_err();
        assert!(e.contains("has 2 CPUs"), "{e}");
    }
}
