//! `dyncore exec`: one command, unmodified, under a policy of the registry
//! on real CPUs — the arbiter (`dyncore_runtime::arbiter`) started from
//! the command line, the way `taskset` and `systemd-run --wait` start a
//! command and `scx_*` schedulers run beside it.
//!
//! ```text
//! dyncore exec --policy chameleon [--cpus 0-1] [--param NAME=VALUE]... [--tax X|auto] [--want-cpus N]
//!              [--class low|medium|high] [--trace FILE] [--out DIR] -- COMMAND ARGS...
//! ```
//!
//! The command's own output goes where dyncore's goes (it inherits the
//! terminal); dyncore's summary follows on stderr, as `time` prints its
//! own. Exit status, as a shell and `env`/`timeout` give it:
//!
//! | status | when |
//! |---|---|
//! | the command's | it exited (128 + N when signal N killed it) |
//! | 127 / 126 | the command was not found / is not executable (nothing was created) |
//! | 130 / 143 / 129 | dyncore got SIGINT (Ctrl-C) / SIGTERM / SIGHUP: the command's tree was signalled, reaped, and the groups removed |
//! | 2 | bad arguments, or a run refused before anything started (unknown policy or parameter, CPUs not allowed or held by another run, mechanism unavailable) |
//! | 125 | dyncore itself failed while the command ran (the tree was killed and the groups removed) |

pub(crate) mod out;
mod scx;
mod trace;

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use dyncore_core::policies::{ParamValue, Params, Registry, RunContext};
use dyncore_core::policy::ThreadSpec;
use dyncore_core::reconfig::Mode;
use dyncore_core::sched::auto_tax;
use dyncore_core::speed::{Duty, SpeedClass, SpeedModel};
use dyncore_core::topology::{CoreKind, Topology};
use dyncore_core::{CpuId, CpuSet};
use dyncore_runtime::arbiter::{
    Arbiter, ArbiterConfig, ArbiterError, ArbiterRun, Ending, Signals, Want, resolve, spare_cpu,
};
use dyncore_runtime::backend::DutyScale;

/// The actions the arbiter carries out: every thread action (`Place` moves
/// network-stack components, which a process has none of).
pub const ARBITER_ACTIONS: &[dyncore_core::policy::ActionKind] = dyncore_scenario::policy::THREAD_ACTIONS;

/// The scheduler's tick and minimum granularity (the scenarios' defaults).
const TICK_NS: u64 = 4_000_000;
const MIN_GRANULARITY_NS: u64 = 16_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Class {
    Low,
    Medium,
    High,
}

impl From<Class> for SpeedClass {
    fn from(c: Class) -> SpeedClass {
        match c {
            Class::Low => SpeedClass::Low,
            Class::Medium => SpeedClass::Medium,
            Class::High => SpeedClass::High,
        }
    }
}

/// `dyncore exec`'s arguments (see the module doc).
#[derive(Debug, clap::Args)]
#[command(after_help = "Exit status: the command's (128 + N if signal N killed it); 127 not found, 126 not \
                        executable; 130/143/129 on SIGINT/SIGTERM/SIGHUP (the command's tree signalled and \
                        reaped); 2 for bad arguments or a refused run (nothing created); 125 if dyncore \
                        failed while the command ran.")]
pub struct Args {
    /// The policy, by name (`dyncore policies` lists them).
    #[arg(long)]
    pub policy: String,
    /// A parameter of the policy, NAME=VALUE (repeatable), e.g. `--param idle_ms=2`.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    pub params: Vec<String>,
    /// The real CPUs the command runs on, a cpulist ("0-1", "2,4"): runtime CPU i is the i-th
    /// (default: every CPU this process may use, its affinity mask).
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Every thread's tax rate on borrowed CPUs (a number, or `auto`: what the fused object buys).
    #[arg(long, value_name = "RATE|auto")]
    pub tax: Option<String>,
    /// CPUs of the fused object each thread asks for (1: none; default: the largest object).
    #[arg(long, value_name = "N")]
    pub want_cpus: Option<usize>,
    /// How much the threads gain from fused objects (Table 2's speed classes).
    #[arg(long, value_enum, default_value_t = Class::Medium)]
    pub class: Class,
    /// Largest fused object, in CPUs (1, 2 or 4; default: the largest that the CPUs hold).
    #[arg(long, value_name = "N")]
    pub max_fuse: Option<usize>,
    /// The duty cycle (percent of a real CPU) that stands for one baseline CPU; every duty the
    /// policy sets is scaled with it (default 50, Table 2's baseline: a fused pair runs at 75%).
    #[arg(long, value_name = "PERCENT")]
    pub baseline_duty: Option<f64>,
    /// How threads are placed and held: auto (cgroup v2, else v1, else affinity), cgroup2,
    /// cgroup1 or affinity.
    #[arg(long, default_value = "auto")]
    pub mechanism: String,
    /// Who schedules the command's threads: `arbiter` (dyncore places them from outside, through
    /// cgroups or affinity) or `scx` (the policy is the kernel's scheduler for them, through
    /// sched_ext: the separate dyncore-scx binary, GPL-2.0; Linux 6.12+ built with sched_ext).
    #[arg(long, default_value = "arbiter", value_parser = ["arbiter", "scx"])]
    pub backend: String,
    /// The run's CFS weight against the machine's other processes (1024 = one nice-0 process).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=262_144))]
    pub weight: Option<u32>,
    /// Write a Perfetto trace (JSON; opens in ui.perfetto.dev) of the run.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// No summary on stderr (the command's own output is untouched).
    #[arg(long, short)]
    pub quiet: bool,
    /// The command and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "COMMAND")]
    pub command: Vec<OsString>,
}

/// Where the sched_ext backend's binary is, if built.
pub fn scx_binary() -> Option<PathBuf> {
    scx::find()
}

/// A refused invocation: exit 2.
#[derive(Debug)]
pub struct Refused(pub String);

/// Everything a run needs, checked.
#[derive(Debug)]
pub struct Plan {
    pub policy: String,
    pub params: Params,
    pub ctx: RunContext,
    pub spec: ThreadSpec,
    pub cfg: ArbiterConfig,
    pub argv: Vec<OsString>,
}

pub use dyncore_core::policies::parse_param;

/// The run's CPUs: a cpulist of CPUs this process may use.
fn real_cpus(text: Option<&str>) -> Result<Vec<CpuId>, String> {
    let allowed = dyncore_runtime::affinity::allowed_cpus()
        .map_err(|e| format!("reading the CPUs this process may use: {e}"))?;
    let Some(text) = text else { return Ok(allowed.iter().collect()) };
    let set: CpuSet = text.parse().map_err(|e| format!("--cpus {text}: not a CPU list: {e}"))?;
    if set.is_empty() {
        return Err(format!("--cpus {text}: names no CPU"));
    }
    let outside: CpuSet = set.iter().filter(|&c| !allowed.contains(c)).collect();
    if !outside.is_empty() {
        return Err(format!(
            "--cpus {text}: this process may not use CPU(s) {outside} (it may use {allowed}: its affinity mask)"
        ));
    }
    Ok(set.iter().collect())
}

/// The largest object the machine fuses, and the duty scale, checked
/// against every duty the speed model can ask for.
fn machine(args: &Args, n: usize) -> Result<(usize, DutyScale), String> {
    let max_fuse = match args.max_fuse {
        None => [4, 2, 1].into_iter().find(|&k| k <= n).unwrap_or(1),
        Some(k) if ![1, 2, 4].contains(&k) => {
            return Err(format!("--max-fuse {k}: fused objects have 1, 2 or 4 CPUs"));
        }
        Some(k) if k > n => return Err(format!("--max-fuse {k}: the run has {n} CPU(s)")),
        Some(k) => k,
    };
    let scale = match args.baseline_duty {
        None => DutyScale::default(),
        Some(p) => DutyScale {
            baseline: Duty::from_percent(p)
                .map_err(|e| format!("--baseline-duty {p}: {e} (a duty cycle is in (0, 100]%)"))?,
        },
    };
    for size in [1, 2, 4].into_iter().filter(|&k| k <= max_fuse) {
        for class in [SpeedClass::Low, SpeedClass::Medium, SpeedClass::High] {
            let d = SpeedModel::DYNAMIC.duty(CoreKind::Little, size, class);
            if scale.apply(d).is_err() {
                return Err(format!(
                    "--baseline-duty {}: an object of {size} CPU(s) runs at {d} of the baseline's 50%, \
                     more than a whole CPU; lower it or pass --max-fuse 1",
                    scale.baseline.percent()
                ));
            }
        }
    }
    Ok((max_fuse, scale))
}

/// Checks the arguments; nothing is created.
pub fn plan(args: &Args, registry: &Registry) -> Result<Plan, Refused> {
    let bad = |m: String| Refused(m);
    let entry = registry.get(&args.policy).map_err(|e| bad(format!("--policy: {e}")))?;
    Registry::refuse_unsupported(&entry.info, "arbiter", ARBITER_ACTIONS).map_err(bad)?;
    let given: Vec<(String, ParamValue)> =
        args.params.iter().map(|p| parse_param(p)).collect::<Result<_, _>>().map_err(bad)?;
    let params = registry.validate(&args.policy, &given).map_err(|e| {
        bad(match e.param {
            Some(p) => format!("--param {p}: {}", e.message),
            None => e.message,
        })
    })?;
    let cpus = real_cpus(args.cpus.as_deref()).map_err(bad)?;
    let (max_fuse, duty_scale) = machine(args, cpus.len()).map_err(bad)?;
    let want: Want = args.mechanism.parse().map_err(|e| bad(format!("--mechanism: {e}")))?;
    let class = SpeedClass::from(args.class);
    let want_cpus = args.want_cpus.unwrap_or(max_fuse);
    if ![1, 2, 4].contains(&want_cpus) || want_cpus > max_fuse {
        return Err(bad(format!(
            "--want-cpus {want_cpus}: an object has 1, 2 or 4 CPUs, at most --max-fuse ({max_fuse})"
        )));
    }
    let speedup = SpeedModel::DYNAMIC.duty(CoreKind::Little, want_cpus, class).speedup();
    let tax = match args.tax.as_deref() {
        None => 1.0,
        Some("auto") => auto_tax(want_cpus, speedup),
        Some(t) => match t.parse::<f64>() {
            Ok(x) if x.is_finite() && (0.0..=100.0).contains(&x) => x,
            _ => return Err(bad(format!("--tax {t}: a number from 0 to 100, or auto"))),
        },
    };
    let n = cpus.len();
    let run: CpuSet = cpus.iter().copied().collect();
    let mut cfg = ArbiterConfig::new("exec", cpus);
    cfg.want = want;
    cfg.weight = args.weight;
    cfg.duty_scale = duty_scale;
    cfg.controller_cpu = spare_cpu(&run);
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
    if let Some(t) = &args.trace {
        dyncore_report::outdir::check_writable("--trace", t).map_err(bad)?;
    }
    Ok(Plan { policy: args.policy.clone(), params, ctx, spec, cfg, argv: args.command.clone() })
}

/// What ended a run that started.
struct Ran {
    run: ArbiterRun,
    /// The signal dyncore received, if one stopped it.
    signal: Option<i32>,
    /// Dyncore's own failure while the command ran.
    failure: Option<String>,
}

/// Runs `dyncore exec`; returns its exit status (module doc).
/// `registry` holds the policies `--policy` may name (the built-in ones,
/// and an out-of-tree crate's own: `dyncore::cli::main`); `--backend scx`
/// runs the `dyncore-scx` binary, whose policies are the built-in ones.
pub fn main(args: &Args, out: Option<&std::path::Path>, registry: &Registry) -> ExitCode {
    if args.backend == "scx" {
        return scx::exec(args, out);
    }
    let plan = match plan(args, registry) {
        Ok(p) => p,
        Err(Refused(m)) => return fail(2, &m),
    };
    // The program is found before anything is created.
    if let Err(e) = resolve(&plan.argv[0]) {
        return fail(e.exit_status(), &e.to_string());
    }
    // The report folder is taken (checked, created, locked) before the
    // run, as `dyncore run` takes its own: two runs never write into one.
    let _held = match out.map(dyncore_report::outdir::OutDir::open).transpose() {
        Ok(held) => held,
        Err(m) => return fail(2, &m),
    };
    let ran = match start_and_run(&plan, registry) {
        Ok(r) => r,
        Err(e) => return refused(&e),
    };
    if !args.quiet {
        eprint!("{}", header(&plan, &ran.run));
        eprint!("{}", ran.run.summary());
    }
    let mut status = match (ran.signal, &ran.failure) {
        (Some(sig), _) => 128 + sig,
        (None, Some(m)) => {
            eprintln!("dyncore exec: error: {m}");
            125
        }
        (None, None) => ran.run.log.commands.first().and_then(|c| c.exit).map_or(125, |e| e.shell_status()),
    };
    let written = out::write(&plan, &ran.run, args.trace.as_deref(), out);
    if let Err(e) = written {
        eprintln!("dyncore exec: error: {e}");
        if status == 0 {
            status = 125;
        }
    }
    ExitCode::from(status.clamp(0, 255) as u8)
}

fn fail(status: i32, message: &str) -> ExitCode {
    eprintln!("dyncore exec: {message}");
    ExitCode::from(status as u8)
}

/// An arbiter that could not start, or a command that could not: how
/// dyncore exits for it.
fn refused(e: &ArbiterError) -> ExitCode {
    match e {
        ArbiterError::Launch(l) => fail(l.exit_status(), &l.to_string()),
        ArbiterError::Config(_) | ArbiterError::Unavailable(_) | ArbiterError::Overlap(_) => {
            fail(2, &e.to_string())
        }
        _ => fail(125, &format!("error: {e}")),
    }
}

/// Starts the arbiter and the command, and runs until the command's tree
/// is done or a signal comes. An error: nothing of the run is left.
fn start_and_run(plan: &Plan, registry: &Registry) -> Result<Ran, ArbiterError> {
    let signals = Signals::install().map_err(ArbiterError::Io)?;
    let policy = registry
        .build(&plan.policy, &plan.ctx, &plan.params)
        .map_err(|e| ArbiterError::Config(e.to_string()))?;
    let mut a = Arbiter::new(policy, plan.cfg.clone())?;
    a.start(&plan.argv, plan.spec.clone())?;
    let result = a.run_until(u64::MAX, true, signals.stop_flag());
    let (ending, failure) = match (&result, signals.ending()) {
        (_, Some(ending)) => (ending, None),
        // Whatever the command left behind is asked to stop, as systemd
        // stops a unit, then killed after the grace period.
        (Ok(_), None) => (Ending::Signal(libc::SIGTERM), None),
        (Err(e), None) => (Ending::Kill, Some(e.to_string())),
    };
    let signal = signals.received().map(|r| r.signal);
    let check = a.policy().check().err();
    let run = a.finish(ending);
    let failure = failure.or(check.map(|e| format!("the policy's invariants broke: {e}")));
    Ok(Ran { run, signal, failure })
}

/// The first line of the summary: what ran where.
fn header(plan: &Plan, run: &ArbiterRun) -> String {
    let cpus: CpuSet = plan.cfg.cpus.iter().copied().collect();
    let params: Vec<String> = plan.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let guest = if dyncore_report::machine::timings_are_real() {
        String::new()
    } else {
        "dyncore exec: in a TCG guest (dyncore vm): the times below are not timings; \
         placements, counts and the execution check are\n"
            .to_string()
    };
    format!(
        "\ndyncore exec: policy `{}`{} on CPUs {cpus}, baseline duty {}, {:.1} ms\n{guest}",
        plan.policy,
        if params.is_empty() { String::new() } else { format!(" ({})", params.join(", ")) },
        plan.cfg.duty_scale.baseline,
        run.end_ns as f64 / 1e6
    )
}

#[cfg(test)]
mod tests;
