//! The [`Arbiter`]: its start (probe, sweep, claim, groups), the commands
//! it starts, its loop (discovery, ticks, load samples), and its end (the
//! teardown, on every path).

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::os::fd::AsFd as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dyncore_core::policy::trace::TraceWriter;
use dyncore_core::policy::{Action, CpuState, Event, Policy, ThreadId, ThreadSpec};
use dyncore_core::speed::Duty;
use dyncore_core::{CpuId, Nanos};

use super::affinity_only::AffinityOnly;
use super::cgroups::Cgroups;
use super::controller::Pinned;
use super::discover::ProcTree;
use super::observe::Observer;
use super::probe::{Flavor, Probe, ProbeInput};
use super::procevents::{ProcEvent, ProcEvents};
use super::record::{ArbiterLog, ArbiterRun, CommandRecord};
use super::registry::{self, Claim, StartError};
use super::spawn::{self, ChildPlan, Launched};
use super::start;
use super::teardown::{kill_threads, list_threads, signal_name};
use super::warden::Warden;
use super::{ArbiterConfig, ArbiterError, Loc, Tid};
use crate::backend::{Stopped, TickStats};

/// The mechanism in use.
#[derive(Debug)]
pub(super) enum Mech {
    Groups(Cgroups),
    Affinity(AffinityOnly),
}

/// A live thread of the run, as the arbiter knows it.
#[derive(Debug, Clone)]
pub(super) struct Live {
    pub tid: Tid,
    pub pid: Tid,
    /// Where the arbiter last put it (or found it); `None`: somewhere else
    /// (just found, not yet in a CPU's group or `held`).
    pub actual: Option<Loc>,
    pub alive: bool,
    /// Its CPU time at the last sample.
    pub cpu_sampled_ns: u64,
    /// Handed to the policy as asleep (`Event::Block`, not yet woken).
    pub asleep: bool,
    /// Its CPU time at the last look for sleep.
    pub sleep_seen_ns: u64,
}

/// A started command.
#[derive(Debug)]
pub(super) struct Command {
    pub launched: Launched,
    pub spec: ThreadSpec,
    pub reaped: bool,
    /// Its first thread was found (spawned to the policy).
    pub found: bool,
    /// The name its process will have (`comm`: the program's file name,
    /// at most 15 bytes).
    pub comm: String,
    /// Readable once the process has exited (`pidfd_open`), where the
    /// kernel has it.
    pub pidfd: Option<std::os::fd::OwnedFd>,
}

/// What the arbiter mirrors of one of the policy's CPUs.
#[derive(Debug, Clone, Copy)]
pub(super) struct CpuMirror {
    pub state: CpuState,
    pub since: Nanos,
}

/// A live thread and where it is, for tests and progress lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub thread: ThreadId,
    pub tid: Tid,
    pub pid: Tid,
    pub loc: Option<Loc>,
    /// The real CPU of its runtime CPU, where it runs.
    pub real_cpu: Option<CpuId>,
}

/// How a run ends ([`Arbiter::finish`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// `SIGKILL` what is left at once.
    Kill,
    /// Send this signal to every process of the run, give them the grace
    /// period to exit, then `SIGKILL` what is left: the end of a normal run
    /// (`SIGTERM` for what its command left behind, as systemd stops a
    /// unit), or a signal passed on.
    Signal(i32),
    /// The processes were signalled already (a terminal's Ctrl-C reaches
    /// the whole foreground process group): give them the grace period,
    /// then `SIGKILL` what is left.
    Wait,
}

/// Runs of this process, numbered (part of each run's group name).
static RUNS: AtomicU64 = AtomicU64::new(0);

/// Drives a policy over real CPUs for the commands it starts. See the
/// module doc.
pub struct Arbiter<P: Policy + ?Sized> {
    pub(super) cfg: ArbiterConfig,
    pub(super) policy: Box<P>,
    pub(super) mech: Mech,
    flavor: Flavor,
    name: String,
    notes: Vec<String>,
    swept: Vec<String>,
    claim: Option<Claim>,
    pub(super) commands: Vec<Command>,
    /// Index = the policy's thread id.
    pub(super) threads: Vec<Live>,
    pub(super) by_tid: HashMap<Tid, ThreadId>,
    /// Process → the command it belongs to.
    pub(super) pid_command: HashMap<Tid, usize>,
    pub(super) tree: ProcTree,
    /// The kernel's process events, where permitted.
    pub(super) events: Option<ProcEvents>,
    pub(super) event_buf: Vec<ProcEvent>,
    /// The full discovery pass's period (longer with events).
    pub(super) poll_period_ns: Nanos,
    pub(super) cpus: Vec<CpuMirror>,
    pub(super) offline: Vec<bool>,
    origin: Instant,
    pub(super) now: Nanos,
    pub(super) next_tick: Nanos,
    pub(super) next_poll: Nanos,
    pub(super) load_at: Nanos,
    pub(super) queued: VecDeque<Event>,
    pub(super) out: Vec<Action>,
    /// The representative of the `Fuse`/`Split` whose `Offline`/`Online`
    /// comes next.
    pub(super) pending_rep: Option<CpuId>,
    /// Something may have moved since the last reconcile (a `Dispatch`, a
    /// new thread, a thread found elsewhere): most ticks change nothing.
    pub(super) dirty: bool,
    pub(super) log: ArbiterLog,
    pub(super) record: TraceWriter<Vec<u8>, Vec<u8>>,
    cpu_time_before: Nanos,
    pub(super) scan_buf: Vec<(Tid, Option<Loc>)>,
    torn_down: bool,
    /// What ends the run's commands if this process dies without its
    /// teardown (module `warden`); `None` if it could not be forked (the
    /// notes say so).
    pub(super) warden: Option<Warden>,
    /// The controller pinned to its spare CPU, until the teardown.
    controller: Option<Pinned>,
    /// What really ran where (module `observe`).
    pub(super) observer: Option<Observer>,
    /// Offline (false) or online (true) CPUs whose group the kernel has not
    /// yet reported frozen (thawed): their change is recorded when it does.
    pub(super) pending_changes: Vec<(CpuId, bool)>,
    #[cfg(debug_assertions)]
    pub(super) contract: dyncore_core::policy::contract::Checker,
}

pub(super) fn thread_cpu_ns() -> Nanos {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

pub(super) fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl<P: Policy + ?Sized> Arbiter<P> {
    /// Probes the machine, sweeps what dead runs left, claims the CPUs and
    /// creates the run's groups. Nothing runs yet.
    pub fn new(policy: Box<P>, cfg: ArbiterConfig) -> Result<Arbiter<P>, ArbiterError> {
        crate::testing::assert_held_here("creating cgroups");
        let set = start::validate(&cfg)?;
        let mounts = start::read_mounts(&cfg.paths.mounts)?;
        let euid = rustix::process::geteuid();
        let probe =
            Probe::run(&ProbeInput { mounts: &mounts, prefix: &cfg.paths.prefix, euid: euid.as_raw() });
        let (flavor, mut notes) = probe.choose(cfg.want).map_err(ArbiterError::Unavailable)?;
        let name =
            registry::group_name(&cfg.run_name, std::process::id(), RUNS.fetch_add(1, Ordering::Relaxed));
        let roots = if euid.is_root() { probe.sweep_roots.clone() } else { Vec::new() };
        let (claim, swept) =
            registry::start(&cfg.paths.state_dir, &roots, &name, &set).map_err(|e| match e {
                StartError::Overlap(o) => ArbiterError::Overlap(o),
                StartError::Io(e) => ArbiterError::Io(e),
            })?;
        let mech = match &flavor {
            Flavor::Affinity => Mech::Affinity(AffinityOnly::new(&cfg.cpus, euid.is_root())),
            f => Mech::Groups(Cgroups::create(f, &name, &cfg.cpus, cfg.quota_period_us)?),
        };
        start::apply_weight(&mech, cfg.weight, &mut notes)?;
        let (events, poll_period_ns) = start::open_events(&cfg, &mut notes);
        let controller = start::pin_controller(cfg.controller_cpu, &mut notes)?;
        let warden = start::start_warden(&name, &claim, &mech, &mut notes);
        let mut tree = ProcTree::adopted_by(become_subreaper());
        tree.not_ours.extend(warden.as_ref().map(Warden::pid));
        let n = cfg.cpus.len();
        let mech_is_groups = matches!(mech, Mech::Groups(_));
        let ticks = TickStats { tick_ns: cfg.tick_ns, ..TickStats::default() };
        Ok(Arbiter {
            policy,
            mech,
            flavor,
            name,
            notes,
            swept,
            claim: Some(claim),
            commands: Vec::new(),
            threads: Vec::new(),
            by_tid: HashMap::new(),
            pid_command: HashMap::new(),
            tree,
            events,
            event_buf: Vec::new(),
            poll_period_ns,
            cpus: vec![CpuMirror { state: CpuState::Idle, since: 0 }; n],
            offline: vec![false; n],
            origin: Instant::now(),
            now: 0,
            next_tick: 0,
            next_poll: 0,
            load_at: 0,
            queued: VecDeque::new(),
            out: Vec::new(),
            pending_rep: None,
            dirty: false,
            log: ArbiterLog { ticks, borrowed_ns: vec![0; n], ..ArbiterLog::default() },
            record: TraceWriter::new(Vec::with_capacity(1 << 20), Vec::with_capacity(1 << 20)),
            cpu_time_before: thread_cpu_ns(),
            scan_buf: Vec::new(),
            torn_down: false,
            warden,
            controller,
            observer: Some(Observer::new(mech_is_groups)),
            pending_changes: Vec::new(),
            #[cfg(debug_assertions)]
            contract: dyncore_core::policy::contract::Checker::new(),
            cfg,
        })
    }

    /// One discovery pass now (between the periodic ones): what appeared
    /// is spawned to the policy and placed, what is gone exits.
    pub fn rescan(&mut self) -> Result<(), ArbiterError> {
        self.poll()
    }

    /// The process id of the run's warden (module `warden`), if it has one.
    pub fn warden_pid(&self) -> Option<Tid> {
        self.warden.as_ref().map(Warden::pid)
    }

    /// The mechanism in use.
    pub fn flavor(&self) -> &Flavor {
        &self.flavor
    }

    /// The run's group name (`dyncore.<run>.<pid>.<n>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What the run says about its mechanism (why not a better one).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// What the startup sweep removed.
    pub fn swept(&self) -> &[String] {
        &self.swept
    }

    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// The run's parent group in each hierarchy (empty with affinity only).
    pub fn parent_groups(&self) -> Vec<PathBuf> {
        match &self.mech {
            Mech::Groups(cg) => cg.parents(),
            Mech::Affinity(_) => Vec::new(),
        }
    }

    /// Runtime CPU `cpu`'s group in each hierarchy, and `held`'s.
    pub fn group_dirs(&self, cpu: CpuId) -> (Vec<PathBuf>, Vec<PathBuf>) {
        match &self.mech {
            Mech::Groups(cg) => (cg.cpu_dir(cpu), cg.held_dir()),
            Mech::Affinity(_) => (Vec::new(), Vec::new()),
        }
    }

    /// The arbiter's clock: ns since it started, never below the last time
    /// fed to the policy.
    pub fn now_ns(&self) -> Nanos {
        (self.origin.elapsed().as_nanos() as Nanos).max(self.now)
    }

    /// Commands started and not yet reaped.
    pub fn running_commands(&self) -> usize {
        self.commands.iter().filter(|c| !c.reaped).count()
    }

    /// Live threads and where each is.
    pub fn placements(&self) -> Vec<Placement> {
        self.threads
            .iter()
            .enumerate()
            .filter(|(_, t)| t.alive)
            .map(|(thread, t)| Placement {
                thread,
                tid: t.tid,
                pid: t.pid,
                loc: t.actual,
                real_cpu: match t.actual {
                    Some(Loc::Cpu(c)) => Some(self.cfg.cpus[c]),
                    _ => None,
                },
            })
            .collect()
    }

    /// What was measured so far.
    pub fn log(&self) -> &ArbiterLog {
        &self.log
    }

    /// Whether runtime CPU `cpu` is offline (borrowed into a fused object).
    pub fn is_offline(&self, cpu: CpuId) -> bool {
        self.offline[cpu]
    }

    /// The commands so far (exit statuses once reaped).
    pub fn commands(&self) -> &[CommandRecord] {
        &self.log.commands
    }

    /// Starts `argv` (its program resolved as a shell would) with its
    /// threads described to the policy by `spec` (each thread's own nice
    /// value replaces `spec.nice`). Returns once its first thread is found
    /// and placed where the policy says; a program that cannot be found or
    /// run is refused before anything starts.
    pub fn start(&mut self, argv: &[OsString], spec: ThreadSpec) -> Result<usize, ArbiterError> {
        self.start_with(argv, spec, None)
    }

    /// [`Arbiter::start`], the command's standard output sent to `stdout`
    /// (a descriptor the caller keeps open until the call returns; `None`:
    /// inherited).
    pub fn start_with(
        &mut self,
        argv: &[OsString],
        spec: ThreadSpec,
        stdout: Option<std::os::fd::RawFd>,
    ) -> Result<usize, ArbiterError> {
        let first = argv.first().ok_or(ArbiterError::Launch(spawn::LaunchError::Empty))?;
        let program = spawn::resolve(first).map_err(ArbiterError::Launch)?;
        let plan = ChildPlan {
            join: match &self.mech {
                Mech::Groups(cg) => cg.join_files(),
                Mech::Affinity(_) => Vec::new(),
            },
            gate_cpus: match &self.mech {
                Mech::Groups(_) => None,
                Mech::Affinity(a) => Some(a.real_cpus().clone()),
            },
            born_on: match &self.mech {
                Mech::Groups(_) => Some(self.cfg.cpus.iter().copied().collect()),
                Mech::Affinity(_) => None,
            },
            close: self.claim.iter().map(Claim::fd).collect(),
            stdout,
        };
        let launched = spawn::launch(&program, argv, &plan).map_err(ArbiterError::Io)?;
        let pid = launched.pid;
        let index = self.commands.len();
        let pidfd = super::teardown::pidfd_open(pid);
        if let (Some(w), Some(fd)) = (&mut self.warden, &pidfd) {
            w.follow(pid, fd.as_fd());
        }
        let mut comm: String =
            program.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        comm.truncate(comm.char_indices().nth(15).map_or(comm.len(), |(i, _)| i));
        self.commands.push(Command { launched, spec, reaped: false, found: false, comm, pidfd });
        self.pid_command.insert(pid, index);
        self.log.commands.push(CommandRecord {
            argv: argv.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
            pid,
            started_ns: self.now_ns(),
            exited_ns: None,
            exit: None,
            cpu_ns: 0,
            exec_error: None,
        });
        // Its first thread joins `held` (or waits at the gate) by itself:
        // find it, so that it is spawned and placed before this returns.
        // It appears within milliseconds; the deadline only keeps a broken
        // discovery from hanging the run, so it is far beyond what a loaded
        // machine takes (5 s was reached at load 13 with CPU hogs beside).
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.commands[index].found {
            self.poll()?;
            if self.commands[index].found {
                break;
            }
            if self.commands[index].reaped {
                let r = &self.log.commands[index];
                let why = r.exec_error.clone().unwrap_or_else(|| format!("{:?}", r.exit));
                return Err(ArbiterError::Launch(spawn::LaunchError::Io(std::io::Error::other(format!(
                    "{} ended before it could be placed: {why}",
                    program.display()
                )))));
            }
            if Instant::now() > deadline {
                return Err(ArbiterError::Io(std::io::Error::other(format!(
                    "{} (pid {pid}) did not appear in the run's groups within 30 s",
                    program.display()
                ))));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        self.commands[index].launched.open_gate();
        Ok(index)
    }

    /// Runs until `until_ns` (arbiter time), or until every command has
    /// exited if `stop_when_idle`, or until `stop` is raised: discovery,
    /// ticks, load samples, and whatever the policy does about them.
    pub fn run_until(
        &mut self,
        until_ns: Nanos,
        stop_when_idle: bool,
        stop: &AtomicBool,
    ) -> Result<Stopped, ArbiterError> {
        loop {
            self.drain_queued()?;
            if stop.load(Ordering::Acquire) {
                return Ok(Stopped::Interrupted);
            }
            if stop_when_idle && self.running_commands() == 0 {
                // The reap can come before the kernel's exit events of
                // the command's threads are read: one last full pass
                // feeds the `Exit` of every thread that went with it.
                self.poll()?;
                self.drain_queued()?;
                return Ok(Stopped::Idle);
            }
            let now = self.now_ns();
            if now >= until_ns {
                return Ok(Stopped::Time);
            }
            if now >= self.next_poll {
                self.poll()?;
                continue;
            }
            if now >= self.next_tick {
                self.tick_round(now)?;
                continue;
            }
            let wake = self.next_tick.min(self.next_poll).min(until_ns);
            self.wait((wake - now).min(10_000_000))?;
        }
    }

    fn tick_round(&mut self, now: Nanos) -> Result<(), ArbiterError> {
        self.next_tick = self.log.ticks.round_fed(now, self.next_tick, self.cfg.tick_ns);
        self.sleep_round()?;
        for t in 0..self.threads.len() {
            self.observe(t);
        }
        self.observe_cpus()?;
        for cpu in 0..self.cpus.len() {
            self.feed(Event::Tick { cpu })?;
        }
        if now - self.load_at >= self.cfg.load_sample_ns {
            self.load_round(now)?;
        }
        Ok(())
    }

    pub(super) fn drain_queued(&mut self) -> Result<(), ArbiterError> {
        while let Some(e) = self.queued.pop_front() {
            self.feed(e)?;
        }
        Ok(())
    }

    /// Ends the run as `ending` says (what is left of the commands' trees is
    /// killed at the end in every case); the groups are removed and the
    /// claim released. Returns what was measured and recorded.
    pub fn finish(mut self, ending: Ending) -> ArbiterRun {
        let end = self.now_ns();
        for cpu in 0..self.cpus.len() {
            let m = self.cpus[cpu];
            self.close(cpu, m, end);
        }
        self.sample_all();
        let execution = self.observer.take().map(|o| o.finish(end));
        let teardown = self.teardown(ending);
        let mut log = std::mem::take(&mut self.log);
        for s in &log.slices {
            let t = &mut log.threads[s.thread];
            t.dispatched_ns += s.end_ns - s.start_ns;
            if s.object_cpus > 1 {
                t.fused_ns += s.end_ns - s.start_ns;
            }
        }
        log.controller_cpu_ns = thread_cpu_ns().saturating_sub(self.cpu_time_before);
        let record = std::mem::replace(&mut self.record, TraceWriter::new(Vec::new(), Vec::new()));
        let (events, actions) = record.finish().expect("writing to memory does not fail");
        let text = |b: Vec<u8>| String::from_utf8(b).expect("serde_json writes UTF-8");
        ArbiterRun {
            log,
            events: text(events),
            actions: text(actions),
            end_ns: end,
            mechanism: self.flavor.to_string(),
            notes: std::mem::take(&mut self.notes),
            swept: std::mem::take(&mut self.swept),
            teardown,
            execution,
        }
    }

    /// The teardown (module doc, invariant 3): thaw everything, signal the
    /// trees and wait the grace period as `ending` says, `SIGKILL` what is
    /// left, reap the commands, remove the groups, release the claim. Runs
    /// once; every step goes on after an error. Returns what it did.
    fn teardown(&mut self, ending: Ending) -> Vec<String> {
        if std::mem::replace(&mut self.torn_down, true) {
            return Vec::new();
        }
        let mut lines = Vec::new();
        let mut errors = match &mut self.mech {
            Mech::Groups(cg) => cg.thaw_all(),
            Mech::Affinity(a) => a.release_all(),
        };
        match ending {
            Ending::Signal(sig) => {
                let n = self.signal_tree(sig);
                if n > 0 {
                    lines.push(format!("sent {} to {n} process(es)", signal_name(sig)));
                    self.wait_gone(self.cfg.grace);
                }
            }
            Ending::Wait => self.wait_gone(self.cfg.grace),
            Ending::Kill => {}
        }
        let n = self.signal_tree(libc::SIGKILL);
        if n > 0 {
            lines.push(format!("killed {n} process(es) left with SIGKILL"));
        }
        // Also when nothing was left to kill: a command that has just died
        // may be out of its groups and not yet reapable.
        self.wait_gone(Duration::from_secs(5));
        if let Mech::Groups(cg) = &mut self.mech {
            errors.extend(cg.remove());
        }
        self.claim = None;
        // Last: the warden holds the claim locked until it exits.
        if let Some(w) = &mut self.warden {
            w.disarm();
        }
        self.controller = None;
        lines.extend(errors.iter().map(|e| format!("teardown: {e}")));
        lines
    }

    /// The run's threads now: from its groups, or its process trees.
    fn tree_threads(&mut self) -> Vec<Tid> {
        match &self.mech {
            Mech::Groups(cg) => {
                let mut all: Vec<Tid> = cg.parents().iter().flat_map(|p| list_threads(p)).collect();
                all.sort_unstable();
                all.dedup();
                all
            }
            Mech::Affinity(_) => {
                let roots: Vec<Tid> = self.commands.iter().map(|c| c.launched.pid).collect();
                let mut out = Vec::new();
                let _ = self.tree.scan(&roots, &mut out);
                self.hand_to_warden();
                out
            }
        }
    }

    /// Hands the warden a pidfd of each process the tree found since the
    /// last call (affinity only: with groups, the warden lists them).
    pub(super) fn hand_to_warden(&mut self) {
        let fresh = self.tree.take_fresh();
        if let Some(w) = &mut self.warden {
            for (pid, fd) in fresh {
                w.follow(pid, fd);
            }
        }
    }

    /// Signals every process of the run, each through a pidfd: with
    /// groups, a process found in them now (checked to be in them after
    /// its pidfd is open); with affinity only, every process of the tree,
    /// held by a pidfd since it was found.
    fn signal_tree(&mut self, sig: i32) -> usize {
        let tids = self.tree_threads();
        match &self.mech {
            Mech::Groups(_) => kill_threads(&tids, sig, &self.name),
            Mech::Affinity(_) => self.tree.signal(sig),
        }
    }

    /// Waits (up to `limit`) until the run's groups hold no thread and
    /// every command is reaped, reaping as it goes. Both: a dying process
    /// leaves its groups (the kernel's `cgroup_exit`) before its parent can
    /// reap it (`exit_notify`), and in a slow guest (TCG) a teardown that
    /// looked only at the groups ended in between, leaving the command
    /// unreaped and its exit unknown.
    fn wait_gone(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            self.reap_all();
            let reaped = self.commands.iter().all(|c| c.reaped);
            if (reaped && self.tree_threads().is_empty()) || Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn reap_all(&mut self) {
        for i in 0..self.commands.len() {
            self.reap(i);
        }
        self.reap_adopted();
    }

    /// Reaps every exited process of the run that was reparented to this
    /// one (a child subreaper): a command's orphan, seen in the run, that
    /// is now this process's child. Not a command (those are reaped with
    /// their status) and nothing the run never saw.
    pub(super) fn reap_adopted(&mut self) {
        if self.tree.adopter.is_none() {
            return;
        }
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return };
        let roots: Vec<Tid> = self.commands.iter().map(|c| c.launched.pid).collect();
        for t in tasks.flatten() {
            let Ok(text) = std::fs::read_to_string(t.path().join("children")) else { continue };
            for pid in text.split_whitespace().filter_map(|p| p.parse::<Tid>().ok()) {
                if roots.contains(&pid) || !self.pid_command.contains_key(&pid) {
                    continue;
                }
                // SAFETY: waiting, without blocking, for a child of this
                // process that is of the run and no command.
                if unsafe { libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG) } == pid {
                    self.pid_command.remove(&pid);
                }
            }
        }
    }

    /// Sets the real duty of every CPU to `duty` (a test's baseline, or a
    /// bench's "100% duty" without a policy decision).
    pub fn set_all_duties(&mut self, duty: Duty) -> Result<(), ArbiterError> {
        for cpu in 0..self.cpus.len() {
            self.set_duty(cpu, duty)?;
        }
        Ok(())
    }
}

/// Makes this process a child subreaper, so that a command's process
/// whose parent exits is reparented here, not to init: the run keeps it
/// (placed, held, killed at the end) and reaps it. This process's pid, or
/// None if the kernel refused.
fn become_subreaper() -> Option<Tid> {
    // SAFETY: prctl with integer arguments only.
    let ok = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == 0;
    ok.then(|| std::process::id() as Tid)
}

impl<P: Policy + ?Sized> Drop for Arbiter<P> {
    /// The drop guard: a run that was not finished (a panic, an early
    /// return) still kills its commands and removes its groups.
    fn drop(&mut self) {
        for line in self.teardown(Ending::Kill) {
            eprintln!("dyncore arbiter {}: {line}", self.name);
        }
    }
}
