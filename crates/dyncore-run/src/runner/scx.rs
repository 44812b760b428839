//! `dyncore run --backend scx`: a scenario's runs of commands with the
//! run's policy as the kernel's scheduler (sched_ext, through the separate
//! GPL binary `dyncore-scx`), beside the simulator's prediction.
//!
//! For each scenario (every run's workloads commands, as for the live
//! backend):
//!
//! 1. everything is checked first, exit 2 with nothing started: the
//!    commands exist, each run fits the real CPUs, `dyncore-scx` is built
//!    and this kernel can load it (`dyncore-scx check`);
//! 2. predict: the simulator runs the same scenario and seed, every fuse
//!    and split charged as `reconfig = "free"` — on the kernel's scheduler
//!    a fuse is a map write that keeps the borrowed CPUs empty, no hotplug
//!    (the report says so); no prediction where a command gives no `model`;
//! 3. each distinct command alone: `dyncore-scx exec --policy pinned` on
//!    the first real CPU, its wall time (fork to reap) its work, as the
//!    live backend measures it under the arbiter;
//! 4. each run: `dyncore-scx run FILE --run I`, which builds the policy
//!    from the scenario as the simulator does, starts every command at its
//!    `start_ms` with its own thread spec, and records what the kernel ran
//!    where; its execution checker's verdict comes with it;
//! 5. the report (`report.md`, `results.json`): per program its wall time
//!    and speedup beside the prediction's, per run its reconfigurations,
//!    actuation delay and verdict, and `dyncore-scx`'s own per-thread
//!    report.
//!
//! Ctrl-C, SIGTERM and SIGHUP stop the run in progress: the backend's
//! process group (its scheduler and the commands) is killed — the kernel
//! unloads the scheduler when its process dies — the report of what ran is
//! written marked INCOMPLETE, and dyncore exits 128 + the signal.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::{Context, Result};
use dyncore_core::CpuSet;
use dyncore_report::table::Table;
use dyncore_runtime::arbiter::Signals;
use dyncore_scenario::load as scenarios;
use dyncore_sim::cost::Mechanism;
use dyncore_sim::{Scenario, ScenarioResult};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use super::{BadInput, RunArgs, Runner};

fn bad(file: &Path, message: impl Into<String>) -> anyhow::Error {
    BadInput(vec![scenarios::LoadError::new(file, message)]).into()
}

/// What one invocation of `dyncore-scx` left: its `--json` outcome (None
/// if it wrote none), its stderr, and whether a signal stopped the run.
struct Invoked {
    json: Option<Value>,
    stderr: String,
    interrupted: bool,
    status: Option<i32>,
}

/// Runs `dyncore-scx ARGS` in a process group of its own, its stdout to
/// /dev/null and its stderr kept; kills the group if `stop` is raised.
fn invoke(bin: &Path, args: &[String], json: &Path, stop: &AtomicBool) -> Result<Invoked> {
    let _ = std::fs::remove_file(json);
    let err_path = json.with_extension("stderr");
    let err = std::fs::File::create(&err_path).with_context(|| format!("creating {}", err_path.display()))?;
    let mut cmd = std::process::Command::new(bin);
    // `--json FILE` right after the subcommand: an `exec`'s command follows `--`.
    cmd.args(&args[..1]).arg("--json").arg(json).args(&args[1..]);
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(err);
    cmd.process_group(0);
    let mut child = cmd.spawn().with_context(|| format!("starting {}", bin.display()))?;
    let mut interrupted = false;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if stop.load(std::sync::atomic::Ordering::SeqCst) && !interrupted {
            interrupted = true;
            // SAFETY: signalling the process group we created.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let _ = std::fs::remove_file(&err_path);
    let json = std::fs::read(json).ok().and_then(|b| serde_json::from_slice(&b).ok());
    Ok(Invoked { json, stderr, interrupted, status: status.code() })
}

/// One distinct command alone: its argv and wall time (ns).
struct Alone {
    argv: Vec<String>,
    wall_ns: u64,
}

/// One run as `dyncore-scx run` gave it.
struct RunOut {
    index: usize,
    json: Value,
    text: String,
}

/// `dyncore run --backend scx`.
pub fn run(runner: &Runner, args: &RunArgs) -> Result<()> {
    let me = Path::new("dyncore run");
    check_options(me, args)?;
    let inputs = super::load_inputs(runner.registry(), &args.files)?;
    let chosen = choose_scenarios(me, args, &inputs)?;
    let allowed =
        dyncore_runtime::affinity::allowed_cpus().context("reading this process's affinity mask")?;
    let real = dyncore_live::fit::real_cpus(args.real_cpus.as_deref(), &allowed).map_err(|m| bad(me, m))?;
    for (path, sc) in &chosen {
        dyncore_live::commands_scenario::check(path, inputs.text(path), sc, &real, None)
            .map_err(|e| BadInput(vec![e]))?;
    }
    let bin = checked_binary(me)?;
    let signals = Signals::install().context("installing the signal handlers")?;
    let out = runner.out();
    let _held = super::open_out(out)?;
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}").expect("static template"),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    let scx = Scx {
        bin: &bin,
        real: &real,
        baseline_duty: args.baseline_duty,
        stop: signals.stop_flag(),
        bar: &bar,
    };
    let mut index_lines = Vec::new();
    let mut interrupted = false;
    for (path, sc) in &chosen {
        let predicted = match sc.unmodelled_command() {
            None => Some(
                dyncore_sim::run_quietly(&super::live::prediction_scenario(sc, Mechanism::Free))
                    .map_err(|e| super::budget_error(path, inputs.text(path), &e, &[]))?,
            ),
            Some(_) => None,
        };
        let dir = out.join(&sc.name);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let (alone, incomplete) = scx.measure_alone(sc, &dir)?;
        let (runs, incomplete) = match incomplete {
            None => scx.run_each(path, sc, &dir)?,
            Some(why) => (Vec::new(), Some(why)),
        };
        let r = Report {
            source: path,
            sc,
            alone: &alone,
            runs: &runs,
            predicted: predicted.as_ref(),
            incomplete,
        };
        r.write(&dir)?;
        if !args.quiet {
            bar.suspend(|| r.print());
        }
        index_lines.push(format!("* [{}]({}/report.md): {}", sc.name, sc.name, sc.title));
        if r.incomplete.is_some() {
            interrupted = true;
            break;
        }
    }
    bar.finish_and_clear();
    write_index(out, &args.files, &index_lines)?;
    say!("Report: {} (and each scenario's report.md)", out.join("index.md").display());
    if interrupted && let Some(r) = signals.received() {
        let after =
            "the backend's scheduler and commands killed; the report of what ran is marked INCOMPLETE";
        return Err(super::Interrupted { signal: r.signal, after }.into());
    }
    Ok(())
}

/// Refuses the options a run of real programs on the kernel's scheduler
/// cannot honour: several seeds, a time scale.
fn check_options(me: &Path, args: &RunArgs) -> Result<()> {
    if args.seeds.is_some_and(|n| n > 1) {
        return Err(bad(me, "--seeds: a run of real programs is run with one seed"));
    }
    if args.time_scale.is_some_and(|x| x != 1.0) {
        return Err(bad(
            me,
            "--time-scale: a scenario of commands cannot be scaled (a real program takes the time it takes)",
        ));
    }
    Ok(())
}

/// The scenarios to run, `--seed` applied: those whose every run's
/// workloads are commands. A scenario named on the command line that is
/// not (or a network-stack one) is bad input, and so is finding none.
fn choose_scenarios(me: &Path, args: &RunArgs, inputs: &super::Inputs) -> Result<Vec<(PathBuf, Scenario)>> {
    if let Some((path, _)) = inputs.nets.first().filter(|_| !args.files.is_empty()) {
        return Err(bad(path, "--backend scx: a network-stack scenario runs on the simulator only"));
    }
    let mut chosen: Vec<(PathBuf, Scenario)> = Vec::new();
    for (path, sc) in &inputs.sims {
        if sc.runs.iter().all(|r| r.has_commands()) {
            chosen.push((path.clone(), sc.clone()));
        } else if !args.files.is_empty() {
            return Err(bad(
                path,
                "--backend scx runs real programs on the kernel's scheduler: every run's workloads must be \
                 commands (built-in programs run with --backend sim, live or both)",
            ));
        }
    }
    if chosen.is_empty() {
        return Err(bad(
            me,
            "--backend scx: no scenario of commands among the shipped ones; name one, e.g. \
             scenarios/live/real-programs.toml",
        ));
    }
    for (_, sc) in &mut chosen {
        if let Some(seed) = args.seed {
            sc.seed = seed;
        }
    }
    Ok(chosen)
}

/// The `dyncore-scx` binary, found and able to load here
/// (`dyncore-scx check`); bad input saying why not otherwise.
fn checked_binary(me: &Path) -> Result<PathBuf> {
    let Some(bin) = crate::scx_binary::find() else {
        return Err(bad(me, format!("--backend scx: {}", crate::scx_binary::NEEDS)));
    };
    let check = std::process::Command::new(&bin)
        .arg("check")
        .output()
        .with_context(|| format!("running {} check", bin.display()))?;
    if !check.status.success() {
        let said = String::from_utf8_lossy(&check.stdout);
        return Err(bad(me, format!("--backend scx: {}", said.trim())));
    }
    Ok(bin)
}

/// Writes `index.md`: what ran, and a line per scenario's report.
fn write_index(out: &Path, files: &[PathBuf], index_lines: &[String]) -> Result<()> {
    let files: Vec<String> = files.iter().map(|f| format!(" {}", f.display())).collect();
    let index = format!(
        "# dyncore report: the sched_ext backend\n\nScenarios of real programs run with each run's policy as \
         the kernel's scheduler (`cargo run --release -- run --backend scx{}`), beside the simulator's \
         prediction.\n\n{}\n",
        files.concat(),
        index_lines.join("\n")
    );
    std::fs::write(out.join("index.md"), index)?;
    Ok(())
}

/// What every invocation of `dyncore-scx` in a run shares: the binary, the
/// real CPUs, `--baseline-duty`, the signal handlers' stop flag and the
/// progress line.
struct Scx<'a> {
    bin: &'a Path,
    real: &'a CpuSet,
    baseline_duty: Option<f64>,
    stop: &'a AtomicBool,
    bar: &'a ProgressBar,
}

impl Scx<'_> {
    /// Each distinct command of `sc` alone (`dyncore-scx exec --policy
    /// pinned` on the first real CPU), its wall time its work; and why the
    /// scenario is incomplete, if a signal stopped it. A command that does
    /// not exit 0 is an error: its time is not its work.
    fn measure_alone(&self, sc: &Scenario, dir: &Path) -> Result<(Vec<Alone>, Option<String>)> {
        let first_cpu = self.real.first().expect("checked: at least one CPU").to_string();
        let mut alone: Vec<Alone> = Vec::new();
        let mut incomplete: Option<String> = None;
        let distinct = dyncore_live::commands_scenario::distinct_commands(sc);
        for argv in &distinct {
            self.bar.set_message(format!(
                "{}: `{}` alone (pinned, CPU {first_cpu})",
                sc.name,
                argv.join(" ")
            ));
            let mut a: Vec<String> =
                ["exec", "-q", "--policy", "pinned", "--cpus", &first_cpu].map(String::from).to_vec();
            if let Some(d) = self.baseline_duty {
                a.extend(["--baseline-duty".into(), d.to_string()]);
            }
            a.push("--".into());
            a.extend(argv.iter().cloned());
            let got = invoke(self.bin, &a, &dir.join("alone.json"), self.stop)?;
            if got.interrupted {
                incomplete = Some("interrupted while measuring the commands alone".into());
                break;
            }
            let c = got.json.as_ref().and_then(|j| j["commands"].get(0).cloned()).unwrap_or(Value::Null);
            match (c["status"].as_u64(), c["exited_ns"].as_u64(), c["started_ns"].as_u64()) {
                (Some(0), Some(end), Some(start)) => {
                    alone.push(Alone { argv: argv.clone(), wall_ns: end - start })
                }
                _ => {
                    self.bar.finish_and_clear();
                    anyhow::bail!(
                        "`{}` alone under dyncore-scx did not exit 0 (its time is not its work; exit {:?}):\n{}",
                        argv.join(" "),
                        got.status,
                        got.stderr.trim()
                    );
                }
            }
        }
        let _ = std::fs::remove_file(dir.join("alone.json"));
        Ok((alone, incomplete))
    }

    /// Each run of `sc` (`dyncore-scx run FILE --run I`), in order, its
    /// record kept in `dir`, until one is stopped by a signal or leaves no
    /// record; and why the scenario is incomplete, if it is.
    fn run_each(&self, path: &Path, sc: &Scenario, dir: &Path) -> Result<(Vec<RunOut>, Option<String>)> {
        let mut runs: Vec<RunOut> = Vec::new();
        for i in 0..sc.runs.len() {
            let label = &sc.runs[i].label;
            self.bar.set_message(format!("{}: run `{label}` on the kernel's scheduler", sc.name));
            let mut a = vec!["run".to_string(), path.display().to_string(), "--run".into(), i.to_string()];
            a.extend(["--cpus".into(), self.real.to_string()]);
            if let Some(d) = self.baseline_duty {
                a.extend(["--baseline-duty".into(), d.to_string()]);
            }
            let json_path = dir.join(format!("scx-run-{i}.json"));
            let got = invoke(self.bin, &a, &json_path, self.stop)?;
            if got.interrupted {
                return Ok((runs, Some(format!("interrupted during run `{label}`"))));
            }
            match got.json {
                Some(json) => runs.push(RunOut { index: i, json, text: got.stderr }),
                None => {
                    let why = format!(
                        "run `{label}`: dyncore-scx wrote no record (exit {:?}): {}",
                        got.status,
                        got.stderr.trim()
                    );
                    return Ok((runs, Some(why)));
                }
            }
        }
        Ok((runs, None))
    }
}

/// A scenario's scx report.
struct Report<'a> {
    source: &'a Path,
    sc: &'a Scenario,
    alone: &'a [Alone],
    runs: &'a [RunOut],
    predicted: Option<&'a ScenarioResult>,
    incomplete: Option<String>,
}

fn secs(ns: u64) -> String {
    format!("{:.2}", ns as f64 / 1e9)
}

impl Report<'_> {
    fn alone_ns(&self, argv: &[String]) -> Option<u64> {
        self.alone.iter().find(|a| a.argv == argv).map(|a| a.wall_ns)
    }

    /// Per program: (run, label, argv, wall ns, speedup, status, threads,
    /// CPU ns, CPUs, predicted speedup, predicted completion ns).
    fn programs(&self) -> Vec<BTreeMap<&'static str, Value>> {
        let mut rows = Vec::new();
        for r in self.runs {
            let rec = &r.json["record"];
            for (p, c) in r.json["commands"].as_array().into_iter().flatten().enumerate() {
                let argv: Vec<String> = c["argv"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.as_str().map(String::from))
                    .collect();
                let wall = match (c["status"].as_u64(), c["exited_ns"].as_u64(), c["started_ns"].as_u64()) {
                    (Some(0), Some(e), Some(s)) => Some(e - s),
                    _ => None,
                };
                let speedup = wall.zip(self.alone_ns(&argv)).map(|(w, a)| a as f64 / w.max(1) as f64);
                let threads: Vec<&Value> = rec["threads"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|t| t["command"].as_u64() == Some(p as u64))
                    .collect();
                let cpu_ns: u64 = threads.iter().filter_map(|t| t["cpu_ns"].as_u64()).sum();
                let mut cpus: Vec<u64> = threads
                    .iter()
                    .flat_map(|t| t["cpus"].as_array().into_iter().flatten())
                    .filter_map(Value::as_u64)
                    .collect();
                cpus.sort_unstable();
                cpus.dedup();
                let pred =
                    self.predicted.and_then(|pr| pr.runs.get(r.index)).and_then(|run| run.programs.get(p));
                let mut m = BTreeMap::new();
                m.insert("run", Value::from(self.sc.runs[r.index].label.clone()));
                m.insert("program", c["label"].clone());
                m.insert("command", Value::from(argv.join(" ")));
                m.insert("status", c["status"].clone());
                m.insert("wall_ns", wall.map_or(Value::Null, Value::from));
                m.insert("speedup", speedup.map_or(Value::Null, |x| Value::from((x * 1e4).round() / 1e4)));
                m.insert("threads", Value::from(threads.len()));
                m.insert("cpu_ns", Value::from(cpu_ns));
                m.insert("cpus", Value::from(cpus));
                m.insert("predicted_speedup", pred.and_then(|x| x.speedup).map_or(Value::Null, Value::from));
                m.insert(
                    "predicted_completion_ns",
                    pred.and_then(|x| x.completion_ns).map_or(Value::Null, Value::from),
                );
                rows.push(m);
            }
        }
        rows
    }

    fn programs_table(&self) -> Table {
        let mut t = Table::new(
            format!(
                "{}: real programs on the kernel's scheduler (sched_ext) beside the simulator's prediction",
                self.sc.name
            ),
            &[
                "run",
                "program",
                "threads",
                "CPU (s)",
                "CPUs",
                "wall (s)",
                "speedup",
                "predicted speedup",
                "predicted (s)",
            ],
        );
        let opt =
            |v: &Value, f: &dyn Fn(&Value) -> String| if v.is_null() { "—".to_string() } else { f(v) };
        for m in self.programs() {
            let wall = match (m["wall_ns"].as_u64(), m["status"].as_u64()) {
                (Some(w), _) => secs(w),
                (None, Some(st)) => format!("exit {st}"),
                _ => "did not end".into(),
            };
            t.row(vec![
                m["run"].as_str().unwrap_or_default().into(),
                m["program"].as_str().unwrap_or_default().into(),
                m["threads"].to_string(),
                secs(m["cpu_ns"].as_u64().unwrap_or(0)),
                m["cpus"]
                    .as_array()
                    .map_or(String::new(), |c| c.iter().map(Value::to_string).collect::<Vec<_>>().join(",")),
                wall,
                opt(&m["speedup"], &|v| format!("{:.2}", v.as_f64().unwrap_or(0.0))),
                opt(&m["predicted_speedup"], &|v| format!("{:.2}", v.as_f64().unwrap_or(0.0))),
                opt(&m["predicted_completion_ns"], &|v| secs(v.as_u64().unwrap_or(0))),
            ]);
        }
        t
    }

    fn runs_table(&self) -> Table {
        let mut t = Table::new(
            "Runs: what the policy did and what the execution checker found in the kernel's running/stopping records",
            &[
                "run",
                "policy",
                "CPUs",
                "fuses",
                "splits",
                "offline",
                "runs checked",
                "violations",
                "dispatch → running p50 / p99 (ms)",
                "scheduler",
            ],
        );
        for r in self.runs {
            let rec = &r.json["record"];
            let v = &r.json["verdict"];
            let kinds = |k: &str| {
                rec["actions"].as_array().into_iter().flatten().filter(|a| a["action"]["kind"] == k).count()
            };
            let ms = |x: &Value| x.as_u64().map_or("—".into(), |n| format!("{:.2}", n as f64 / 1e6));
            t.row(vec![
                self.sc.runs[r.index].label.clone(),
                rec["policy"].as_str().unwrap_or_default().into(),
                rec["cpus"]
                    .as_array()
                    .map_or(String::new(), |c| c.iter().map(Value::to_string).collect::<Vec<_>>().join(",")),
                kinds("fuse").to_string(),
                kinds("split").to_string(),
                kinds("offline").to_string(),
                v["slices"].to_string(),
                v["violation_count"].to_string(),
                format!("{} / {}", ms(&v["start"]["p50_ns"]), ms(&v["start"]["p99_ns"])),
                r.json["scheduler"].as_str().unwrap_or_default().into(),
            ]);
        }
        t
    }

    fn markdown(&self) -> String {
        let sc = self.sc;
        let mut s = format!("# {} — on the kernel's scheduler (sched_ext)\n\n", sc.title);
        if let Some(why) = &self.incomplete {
            let _ = writeln!(s, "**INCOMPLETE**: {why}. What follows is what ran before that.\n");
        }
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let tcg = std::env::var("DYNCORE_VM_ACCEL").is_ok_and(|a| a == "tcg");
        let _ = writeln!(
            s,
            "Each run's policy, built from the scenario as the simulator builds it, was the kernel's scheduler \
             for the run's commands (`SCHED_EXT`, partial switch; kernel {}), through `dyncore-scx`. Each \
             speedup is the command's wall time alone (one CPU under `pinned` on the same backend) over its \
             wall time in the run, fork to reap. The prediction is the simulator's for the same scenario and \
             seed ({}), every fuse and split charged as `reconfig = \"free\"`: here a fuse keeps the borrowed \
             CPUs empty by the scheduler's own placement, with no hotplug. Reproduce with `cargo run --release \
             -- run --backend scx {}`.{}\n",
            kernel.trim(),
            sc.seed,
            self.source.display(),
            if tcg { " **In a TCG guest: every time here is emulated, not a timing.**" } else { "" }
        );
        if self.predicted.is_none() {
            s += "No simulated prediction: not every command gives a `model`.\n\n";
        }
        s += "## Programs\n\n";
        s += &self.programs_table().to_markdown();
        s += "\n## Alone\n\n| command | wall alone (s) |\n|---|---|\n";
        for a in self.alone {
            let _ = writeln!(s, "| `{}` | {} |", a.argv.join(" "), secs(a.wall_ns));
        }
        s += "\n## Runs\n\n";
        s += &self.runs_table().to_markdown();
        for r in self.runs {
            let v = &r.json["verdict"];
            let _ = writeln!(s, "\n## Run `{}`: dyncore-scx's report\n", sc.runs[r.index].label);
            for viol in v["violations"].as_array().into_iter().flatten().take(5) {
                let _ = writeln!(s, "* violation: {}", viol["message"].as_str().unwrap_or_default());
            }
            let _ = writeln!(s, "```text\n{}\n```", r.text.trim());
        }
        s
    }

    /// Writes the scenario's `report.md` and `results.json` into `dir`.
    fn write(&self, dir: &Path) -> Result<()> {
        let md = self.markdown();
        std::fs::write(dir.join("report.md"), &md).with_context(|| format!("writing {}", dir.display()))?;
        let json = serde_json::to_string_pretty(&self.json())? + "\n";
        std::fs::write(dir.join("results.json"), json)?;
        Ok(())
    }

    /// Prints the programs' and the runs' tables, and why the report is
    /// incomplete if it is.
    fn print(&self) {
        say!("\n{}", self.programs_table().to_terminal());
        say!("{}", self.runs_table().to_terminal());
        if let Some(why) = &self.incomplete {
            say!("INCOMPLETE: {why}");
        }
    }

    fn json(&self) -> Value {
        serde_json::json!({
            "scenario": self.sc.name,
            "backend": "scx",
            "incomplete": self.incomplete,
            "alone": self.alone.iter().map(|a| serde_json::json!({"argv": a.argv, "wall_ns": a.wall_ns})).collect::<Vec<_>>(),
            "programs": self.programs(),
            "runs": self.runs.iter().map(|r| serde_json::json!({
                "run": self.sc.runs[r.index].label,
                "scheduler": r.json["scheduler"],
                "verdict": r.json["verdict"],
                "record_file": format!("scx-run-{}.json", r.index),
                "commands": r.json["commands"],
            })).collect::<Vec<_>>(),
            "simulator": self.predicted.map(|p| &p.runs),
        })
    }
}
