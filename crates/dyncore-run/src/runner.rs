//! Running scenarios and writing their reports: what `dyncore run` and
//! `dyncore check` do, as a library. A program of its own (with its own
//! policies, see `examples/custom-policy/`) uses [`Runner`].

mod live;
mod scx;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use dyncore_core::policies::Registry;
use dyncore_report::outdir::OutDir;
use dyncore_report::{figure, figure_plot, newtos, report};
use dyncore_scenario::load as scenarios;
use dyncore_sim::Scenario;
use dyncore_sim::netstack::scenario::{NetScenario, is_net_scenario};
use dyncore_sim::seeds;
use indicatif::{ProgressBar, ProgressStyle};

pub use live::{Interrupted, apply_time_scale};

/// Where the runs run.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The deterministic simulator.
    #[default]
    Sim,
    /// The live runtime, with the simulator's prediction beside every figure.
    Live,
    /// Both, in one report.
    Both,
    /// Scenarios of commands with each run's policy as the kernel's
    /// scheduler (sched_ext, through `dyncore-scx`), beside the
    /// simulator's prediction.
    Scx,
}

/// What to run and how (the options of `dyncore run`).
#[derive(Debug, Clone, Default)]
pub struct RunArgs {
    /// Scenario files or folders (empty: the shipped scenarios).
    pub files: Vec<PathBuf>,
    /// Override every scenario's seed.
    pub seed: Option<u64>,
    /// Run every run with this many seeds.
    pub seeds: Option<u32>,
    /// Print only the summary.
    pub quiet: bool,
    pub backend: Backend,
    /// Multiply every duration of the scenario by this.
    pub time_scale: Option<f64>,
    /// Live: the duty (percent) of one baseline CPU.
    pub baseline_duty: Option<f64>,
    /// Live: the real CPUs to run on (a cpulist).
    pub real_cpus: Option<String>,
}

/// Runs scenarios with the policies of a registry and writes their reports
/// into a folder: the library behind `dyncore run`.
///
/// ```no_run
/// # fn main() -> anyhow::Result<()> {
/// let runner = dyncore_run::Runner::new("out");
/// runner.run(&dyncore_run::RunArgs { files: vec!["scenarios/fig3-taxation.toml".into()], ..Default::default() })?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Runner {
    registry: Registry,
    out: PathBuf,
}

impl Runner {
    /// A runner of the built-in policies, writing into `out`.
    pub fn new(out: impl Into<PathBuf>) -> Runner {
        Runner { registry: Registry::builtin(), out: out.into() }
    }

    /// The same runner with the policies of `registry` (a program's own
    /// beside the built-in ones: `Registry::builtin().with(&MINE)`).
    #[must_use]
    pub fn with_registry(mut self, registry: Registry) -> Runner {
        self.registry = registry;
        self
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The report folder.
    pub fn out(&self) -> &Path {
        &self.out
    }

    /// Reads, parses and validates one scenario file against this runner's
    /// policies.
    pub fn load(&self, path: &Path) -> Result<Scenario, scenarios::LoadError> {
        scenarios::load_with(path, &self.registry)
    }

    /// `dyncore run`: runs the scenarios of `args` on its backend and
    /// writes their reports, the index and the page.
    pub fn run(&self, args: &RunArgs) -> Result<()> {
        run(self, args)
    }

    /// `dyncore check`: validates the scenarios of `files` (every bad file
    /// is reported, not only the first); one line per good file.
    pub fn check(&self, files: &[PathBuf]) -> Result<Vec<String>> {
        check(self, files)
    }
}

/// Bad input: exit status 2.
#[derive(Debug)]
pub struct BadInput(pub Vec<scenarios::LoadError>);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
                write!(f, "error: ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for BadInput {}

/// Every scenario of one invocation, each input read exactly once (a pipe,
/// `dyncore run <(generate)`, can be read only once), and sorted by kind:
/// the Chameleon-style scenarios and the network-stack (NewtOS) ones.
#[derive(Debug, Default)]
pub struct Inputs {
    pub sims: Vec<(PathBuf, Scenario)>,
    pub nets: Vec<(PathBuf, NetScenario)>,
    /// The text each file was read as, for errors located after loading.
    texts: std::collections::BTreeMap<PathBuf, String>,
}

impl Inputs {
    /// The text `path` was read as (empty if it was not one of the inputs).
    pub fn text(&self, path: &Path) -> &str {
        self.texts.get(path).map_or("", String::as_str)
    }

    /// Whether the user named the files (rather than taking the shipped ones).
    fn named(files: &[PathBuf]) -> bool {
        !files.is_empty()
    }
}

/// Loads every scenario of `files` (or the shipped ones: `scenarios/*.toml`
/// and `scenarios/newtos/*.toml`) with the policies of `registry`, reading
/// each file once and reporting all bad files (not just the first).
pub fn load_inputs(registry: &Registry, files: &[PathBuf]) -> Result<Inputs> {
    let mut paths = scenarios::discover(files).map_err(|e| BadInput(vec![e]))?;
    if !Inputs::named(files) {
        paths.extend(scenarios::discover(&[newtos::default_dir()]).map_err(|e| BadInput(vec![e]))?);
    }
    let mut inputs = Inputs::default();
    let mut bad = Vec::new();
    for p in paths {
        let text = match scenarios::read_text(&p) {
            Ok(t) => t,
            Err(e) => {
                bad.push(e);
                continue;
            }
        };
        if is_net_scenario(&text) {
            match newtos::parse(&p, &text) {
                Ok(s) => inputs.nets.push((p.clone(), s)),
                Err(e) => bad.push(e),
            }
        } else {
            match scenarios::parse_with(&p, &text, registry) {
                Ok(s) => inputs.sims.push((p.clone(), s)),
                Err(e) => bad.push(e),
            }
        }
        inputs.texts.insert(p, text);
    }
    if !bad.is_empty() {
        return Err(BadInput(bad).into());
    }
    // Without case: some file systems ignore it, and two folders differing
    // only in case would be one there.
    let mut names = std::collections::BTreeMap::new();
    let all =
        inputs.sims.iter().map(|(p, s)| (p, &s.name)).chain(inputs.nets.iter().map(|(p, s)| (p, &s.name)));
    for (p, name) in all {
        if let Some(first) = names.insert(name.to_ascii_lowercase(), p.clone()) {
            let message = format!(
                "`{name}` is also the name of {} (names are compared without case); report folders would collide",
                first.display()
            );
            return Err(
                BadInput(vec![scenarios::error_in(p, inputs.text(p), &["name".into()], message)]).into()
            );
        }
    }
    Ok(inputs)
}

/// The Chameleon-style scenarios of `files` (or the shipped ones); see
/// [`load_inputs`] for every kind.
pub fn load_all(registry: &Registry, files: &[PathBuf]) -> Result<Vec<(PathBuf, Scenario)>> {
    Ok(load_inputs(registry, files)?.sims)
}

fn check(runner: &Runner, files: &[PathBuf]) -> Result<Vec<String>> {
    let inputs = load_inputs(runner.registry(), files)?;
    let mut lines = Vec::new();
    for (p, s) in &inputs.sims {
        lines.push(format!("ok  {}  ({}: {} runs)", p.display(), s.name, s.runs.len()));
    }
    for (p, s) in &inputs.nets {
        lines.push(format!("ok  {}  ({}: {} runs)", p.display(), s.name, s.runs.len()));
    }
    Ok(lines)
}

/// Refuses the options of `args` that do not apply to the network-stack
/// scenarios among the inputs (exit 2, naming the option and why), rather
/// than ignoring them.
pub(crate) fn refuse_for_nets(args: &RunArgs, inputs: &Inputs) -> Result<()> {
    let Some((path, _)) = inputs.nets.first() else { return Ok(()) };
    let flag = if args.backend != Backend::Sim {
        Some(
            "--backend live|both: a network-stack scenario runs on the simulator only; its live counterpart is \
              `dyncore stack` (and `dyncore bench stack`)",
        )
    } else if args.time_scale.is_some() {
        Some(
            "--time-scale: a network-stack scenario has no durations to scale (its runs are measured in \
              steady state); leave the flag out",
        )
    } else {
        None
    };
    match flag {
        Some(why) => Err(BadInput(vec![scenarios::LoadError::new(path, why)]).into()),
        None => Ok(()),
    }
}

/// Why a command workload with no `model` cannot run on the simulator.
pub const UNMODELLED: &str = "the simulator cannot run a command; give the workload a `model` (a program that \
                              stands for it, e.g. model = \"nqueen\") or run it with --backend live";

/// The simulator cannot run a command: a scenario with a command workload
/// that gives no `model` is refused (exit 2), located at that `command`.
fn refuse_unmodelled(inputs: &Inputs) -> Result<()> {
    for (path, sc) in &inputs.sims {
        if let Some(at) = sc.unmodelled_command() {
            return Err(
                BadInput(vec![scenarios::error_in(path, inputs.text(path), &at, UNMODELLED.into())]).into()
            );
        }
    }
    Ok(())
}

/// Takes the report folder for this run: checked, created and locked
/// before any work (`dyncore_report::outdir`); refused with exit 2.
pub fn open_out(out: &Path) -> Result<OutDir> {
    let dir =
        OutDir::open(out).map_err(|m| BadInput(vec![scenarios::LoadError::new(Path::new("dyncore"), m)]))?;
    for p in &dir.removed {
        eprintln!("removed {}, left by a run that was killed while writing it", p.display());
    }
    Ok(dir)
}

fn run(runner: &Runner, args: &RunArgs) -> Result<()> {
    let out = runner.out();
    if args.backend == Backend::Sim && (args.baseline_duty.is_some() || args.real_cpus.is_some()) {
        let message = "--baseline-duty and --real-cpus are for --backend live, both or scx".to_string();
        return Err(BadInput(vec![scenarios::LoadError::new(Path::new("dyncore run"), message)]).into());
    }
    match args.backend {
        Backend::Sim => {}
        Backend::Live => return live::run(runner, args, live::Kind::Live),
        Backend::Both => return live::run(runner, args, live::Kind::Both),
        Backend::Scx => return scx::run(runner, args),
    }
    let mut inputs = load_inputs(runner.registry(), &args.files)?;
    refuse_for_nets(args, &inputs)?;
    refuse_unmodelled(&inputs)?;
    // After the inputs are judged (bad input creates nothing), before any
    // run (a folder that cannot take the reports wastes no work).
    let _held = open_out(out)?;
    let mut loaded = std::mem::take(&mut inputs.sims);
    let mut nets = std::mem::take(&mut inputs.nets);
    net_seeds(args, &mut nets)?;
    apply_time_scale(&mut loaded, args.time_scale)?;
    let seeds = seeds_of(args, &mut loaded)?;
    let total: usize = loaded.iter().zip(&seeds).map(|((_, s), k)| s.runs.len() * k.len()).sum::<usize>()
        + nets.iter().map(|(_, s)| s.runs.len() * s.seeds as usize).sum::<usize>();
    let bar = ProgressBar::new(total as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs  {msg}")
            .expect("static template is valid"),
    );
    let mut written = Vec::new();
    let started = std::time::Instant::now();
    // Whether any program of any run finished (NothingFinished otherwise).
    let mut any_finished = loaded.is_empty();
    for ((path, sc), seeds) in loaded.iter().zip(&seeds) {
        bar.set_message(sc.name.clone());
        // Within a run: where virtual time and the event count are, so a
        // long run shows movement (stderr only; reports never see it).
        let progress = |seed: u64, p: &dyncore_sim::RunProgress| {
            if p.done {
                bar.inc(1);
            } else {
                bar.set_message(format!(
                    "{} seed {seed} run {}/{}: virtual {:.1} s of at most {:.0} s, {:.1} M of at most {:.0} M events",
                    sc.name,
                    p.run + 1,
                    p.runs,
                    p.now_ns as f64 / 1e9,
                    p.max_time_ns as f64 / 1e9,
                    p.events as f64 / 1e6,
                    p.max_events as f64 / 1e6,
                ));
            }
        };
        let results = match seeds::run_seeds(sc, seeds, &progress) {
            Ok(r) => r,
            Err(e) => {
                bar.finish_and_clear();
                return Err(budget_error(path, inputs.text(path), &e, &written).into());
            }
        };
        any_finished |= results
            .iter()
            .any(|r| r.runs.iter().any(|run| run.programs.iter().any(|p| p.completion_ns.is_some())));
        let fig = figure::Figure::build(sc, &results);
        let claims = dyncore_sim::scenario::claims::check(sc, &results);
        let w = report::write_scenario(out, path, sc, &results, &fig, &claims)
            .with_context(|| format!("writing the report of {}", sc.name))?;
        if !args.quiet {
            bar.suspend(|| {
                print_scenario(sc, seeds, &results, &fig);
                print_claims(&claims);
            });
        }
        written.push(w);
    }
    for (path, sc) in &nets {
        bar.set_message(sc.name.clone());
        let (w, rep) = newtos::write_scenario(out, path, sc)
            .with_context(|| format!("writing the report of {}", sc.name))?;
        bar.inc((sc.runs.len() * sc.seeds as usize) as u64);
        if !args.quiet {
            bar.suspend(|| {
                say!("\n{} ({})", sc.title, sc.name);
                for r in &rep.rows {
                    say!("  {:<28} {:>8.0} Mbps {:>6.1} W", r.label, r.mbps.median, r.power_w.median);
                }
                print_claims(&rep.claims);
            });
        }
        written.push(w);
    }
    bar.finish_and_clear();
    report::write_index(out, &written, &what_ran(args, out))?;
    let mut counts = figure::PaperCounts::default();
    for w in &written {
        counts += w.counts;
    }
    let n = |k: usize, what: &str| format!("{k} {what}{}", if k == 1 { "" } else { "s" });
    let diff_note = if counts.compared + counts.unmatched + counts.claims() == 0 {
        String::new()
    } else {
        let several = written.iter().any(|w| w.seeds.len() > 1);
        format!(" {} (see docs/results.md).", figure::summary_sentence(&counts, several))
    };
    let counts: Vec<usize> =
        seeds.iter().map(Vec::len).chain(nets.iter().map(|(_, s)| s.seeds as usize)).collect();
    let per_run = counts.iter().copied().max().unwrap_or(1);
    say!(
        "\n{}, {} ({} each{}) in {:.1} s.{diff_note}",
        n(written.len(), "scenario"),
        n(total, "run"),
        n(per_run, "seed"),
        if counts.iter().all(|&k| k == per_run) { "" } else { " at most" },
        started.elapsed().as_secs_f64(),
    );
    say!("Report: {} (and index.md)", out.join("index.html").display());
    if any_finished || !nets.is_empty() { Ok(()) } else { Err(NothingFinished.into()) }
}

/// A run in which no program of any scenario finished: every run reached
/// its `max_time_ns` first. The reports are written; the command exits 3.
#[derive(Debug)]
pub struct NothingFinished;

impl std::fmt::Display for NothingFinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no program finished in any run: every run reached its max_time_ns first (the reports are written; \
             raise max_time_ns or shorten the work)"
        )
    }
}

impl std::error::Error for NothingFinished {}

/// A run stopped at its event budget: bad input (exit 2), located at the
/// `max_events` field to change (or the run, if the file sets none). Reports
/// already written are whole; this scenario's is not written, nor the index.
pub(crate) fn budget_error(
    path: &Path,
    text: &str,
    e: &dyncore_sim::EventBudgetExceeded,
    written: &[report::Written],
) -> BadInput {
    let mut message = e.to_string();
    message += &match written.len() {
        0 => "; nothing was written".to_string(),
        k => format!("; the reports of the {k} scenarios before it are complete, index.md was not written"),
    };
    let field = e.field();
    // Point at the field if the file sets it, else at the run.
    let mut err = if scenarios::has_field(text, &field) {
        scenarios::error_in(path, text, &field, message)
    } else {
        scenarios::error_in(path, text, &["run".into(), e.run.to_string()], message)
    };
    err.field = Some(dyncore_sim::scenario::dotted_path(&field));
    BadInput(vec![err])
}

/// The first line of index.md: what this invocation ran.
fn what_ran(args: &RunArgs, out: &Path) -> String {
    let seed = args.seed.map(|s| format!(" --seed {s}")).unwrap_or_default()
        + &args.seeds.map(|n| format!(" --seeds {n}")).unwrap_or_default()
        + &if out == Path::new("out") { String::new() } else { format!(" --out {}", out.display()) };
    if args.files.is_empty() {
        let command = if seed.is_empty() { String::new() } else { format!(" -- run{seed}") };
        return format!("Every shipped scenario, run on the simulator (`cargo run --release{command}`).");
    }
    let files: Vec<String> = args.files.iter().map(|f| f.display().to_string()).collect();
    format!(
        "The scenarios of {}, run on the simulator (`cargo run --release -- run {}{seed}`).",
        files.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", "),
        files.join(" ")
    )
}

/// The seeds of each scenario: `--seed` or its own, and `--seeds`, its
/// `seeds` or the default; refused if they pass `u64::MAX`.
fn seeds_of(args: &RunArgs, loaded: &mut [(PathBuf, Scenario)]) -> Result<Vec<Vec<u64>>> {
    let mut all = Vec::new();
    for (path, s) in loaded {
        if let Some(seed) = args.seed {
            s.seed = seed;
        }
        let n = args.seeds.or(s.seeds).unwrap_or(seeds::DEFAULT_SEEDS);
        all.push(seeds::seed_list(s.seed, n).ok_or_else(|| {
            BadInput(vec![scenarios::LoadError {
                file: path.clone(),
                at: None,
                field: Some("seed".into()),
                message: format!("seed {} + {n} seeds - 1 does not fit in 64 bits", s.seed),
            }])
        })?);
    }
    Ok(all)
}

/// `--seed` and `--seeds` for the network-stack scenarios, as for the
/// others; refused past their limit of seeds or past `u64::MAX`.
fn net_seeds(
    args: &RunArgs,
    nets: &mut [(PathBuf, dyncore_sim::netstack::scenario::NetScenario)],
) -> Result<()> {
    use dyncore_sim::netstack::scenario::MAX_SEEDS;
    for (path, sc) in nets {
        if let Some(seed) = args.seed {
            sc.seed = seed;
        }
        if let Some(n) = args.seeds {
            sc.seeds = n;
        }
        let bad = |message: String| {
            BadInput(vec![scenarios::LoadError {
                file: path.clone(),
                at: None,
                field: Some("seeds".into()),
                message,
            }])
        };
        if sc.seeds > MAX_SEEDS {
            return Err(bad(format!(
                "a network-stack scenario runs at most {MAX_SEEDS} seeds; asked for {}",
                sc.seeds
            ))
            .into());
        }
        if sc.seed.checked_add(u64::from(sc.seeds) - 1).is_none() {
            return Err(
                bad(format!("seed {} + {} seeds - 1 does not fit in 64 bits", sc.seed, sc.seeds)).into()
            );
        }
    }
    Ok(())
}

/// A scenario's claims on the terminal: the count, and each claim that does
/// not hold.
fn print_claims(claims: &dyncore_sim::claims::Claims) {
    if claims.claims.is_empty() {
        return;
    }
    say!("  {}", dyncore_report::claims_view::sentence(claims));
    for c in claims.claims.iter().filter(|c| c.verdict != dyncore_sim::claims::Verdict::Held) {
        say!("    {} ({}): {}", c.verdict.word(), c.kind.word(), c.claim);
    }
}

/// A scenario's comparison table on the terminal, and which runs did not
/// finish in which seeds.
fn print_scenario(
    sc: &Scenario,
    seeds: &[u64],
    results: &[dyncore_sim::ScenarioResult],
    fig: &figure::Figure,
) {
    let title = format!("{} — {} ({})", sc.name, sc.title, figure_plot::seeds_phrase(seeds));
    say!("\n{}", figure::comparison_table(&title, fig).to_terminal());
    for (i, run) in sc.runs.iter().enumerate() {
        let unfinished: Vec<String> =
            results.iter().filter(|r| !r.runs[i].finished).map(|r| r.seed.to_string()).collect();
        if !unfinished.is_empty() {
            eprintln!(
                "warning: run `{}` hit max_time_ns before every program finished (seed {})",
                run.label,
                unfinished.join(", ")
            );
        }
    }
}
