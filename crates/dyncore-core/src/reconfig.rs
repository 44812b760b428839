//! Reconfiguration plans (Bolt §3): taking CPUs offline or online as a list
//! of steps, each marked [`Kind::Critical`] (done before the call returns)
//! or [`Kind::Deferred`] (done later, or never).
//!
//! This module only *plans*: [`plan_offline`] and [`plan_online`] look at a
//! [`ReconfigState`] (which CPUs are online, which still hold their per-CPU
//! cache, registry entry and helper thread, who proxies for whom) and return
//! a [`Plan`], which a backend executes (`dyncore-runtime` moves real
//! threads; the simulator's `runtime` mechanism charges each plan's
//! critical path from a [`crate::profile::MachineProfile`]).
//!
//! Two modes:
//!
//! * [`Mode::Naive`] does what Linux hotplug does, all of it on the critical
//!   path: a barrier with every CPU (`stop_machine`), run-queue migration, a
//!   grace period, freeing the per-CPU cache, folding statistics, removing
//!   the registry entry, stopping and joining the helper thread. A bulk call
//!   is one single-CPU plan after another, as the paper's native baseline.
//! * [`Mode::Bolt`] keeps only what correctness needs on the critical path
//!   (stop dispatch, migrate the run queue, redirect the mailbox to a proxy,
//!   update the active mask); the rest is deferred: statistics are folded
//!   and the helper parked lazily ([`Deferral::Lazily`]), the cache is kept
//!   for reuse and freed only under memory pressure or after a while
//!   ([`Deferral::UnderPressure`]), the registry entry stays and reads
//!   offline. A bulk call updates the active mask once and orders per-CPU
//!   steps phase by phase (every CPU is asked to stop before any is waited
//!   for), so the waits overlap.
//!
//! Invariants of every plan (checked by [`Plan::check`], asserted when built):
//! 1. Every critical step comes before every deferred step.
//! 2. Offline: a CPU's `InstallProxy` comes before its `StopDispatch`
//!    (Chameleon §4.1: the proxy takes messages before the CPU stops, so a
//!    message may be seen twice but is never stranded).
//! 3. Online: a CPU's `RemoveProxy` comes before its `StartDispatch` (pending
//!    messages are replayed on the returning CPU before it runs a task).
//! 4. At least one owned CPU stays online; the plan touches only owned CPUs.

use std::fmt;

use crate::proxy::ProxyTable;
use crate::{CpuId, CpuSet};

/// How a reconfiguration is executed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Everything on the critical path, one CPU at a time (Linux hotplug).
    Naive,
    /// Critical steps only, deferred work later, bulk in one pass (Bolt).
    Bolt,
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Naive => "naive",
            Mode::Bolt => "bolt",
        })
    }
}

/// Which way the CPUs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Offline,
    Online,
}

/// When a deferred step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Deferral {
    /// At the backend's next housekeeping tick after the call returned
    /// (cancelled if the CPU comes back first).
    Lazily,
    /// Only under memory pressure, or after the backend's keep time (Bolt
    /// §3.2: memory is kept for reuse; a master thread reclaims it).
    UnderPressure,
}

/// Whether a step is on the critical path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Done before the call returns.
    Critical,
    /// Done after the call returned, or never.
    Deferred(Deferral),
}

/// One step of a reconfiguration. Global steps name no CPU; per-CPU steps
/// name the CPU they act on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Step {
    /// Rendezvous with every online CPU: each stops between task steps and
    /// waits (Linux `stop_machine`). Naive only.
    StopTheWorld,
    /// Releases the CPUs held by [`Step::StopTheWorld`].
    ResumeTheWorld,
    /// Removes CPUs from the active mask: no new work is placed on them.
    Deactivate(CpuSet),
    /// Adds CPUs to the active mask.
    Activate(CpuSet),
    /// Redirects the CPU's mailbox to `proxy`, which from now on handles its
    /// messages with the CPU's per-CPU state. If the CPU proxies for others,
    /// those move to `proxy` too (no chains).
    InstallProxy { cpu: CpuId, proxy: CpuId },
    /// Gives the CPU its mailbox back; what is pending is replayed on it.
    RemoveProxy { cpu: CpuId, proxy: CpuId },
    /// The CPU takes no new task step or message.
    StopDispatch { cpu: CpuId },
    /// Waits until the CPU is between steps (Bolt's *entry* point).
    AwaitStopped { cpu: CpuId },
    /// Moves the CPU's queued tasks to active CPUs.
    MigrateRunQueue { cpu: CpuId },
    /// The CPU runs tasks again (after replaying its mailbox).
    StartDispatch { cpu: CpuId },
    /// Waits until every online CPU has passed a quiescent point.
    GracePeriod,
    /// Adds the CPU's statistics into the global totals and zeroes them.
    FoldStats { cpu: CpuId },
    /// Returns the CPU's memory cache to the shared pool.
    FreeCache { cpu: CpuId },
    /// Gives the CPU a new memory cache, filled from the shared pool.
    CreateCache { cpu: CpuId },
    /// Deletes the CPU's registry entry (sysfs directory removal).
    RemoveRegistryEntry { cpu: CpuId },
    /// Creates the CPU's registry entry.
    CreateRegistryEntry { cpu: CpuId },
    /// Stops the CPU's helper thread and joins it.
    StopHelper { cpu: CpuId },
    /// Spawns the CPU's helper thread.
    StartHelper { cpu: CpuId },
    /// Asks the CPU's helper thread to park, without waiting for it.
    ParkHelper { cpu: CpuId },
    /// Cancels a park request (the helper resumes, or never parked).
    UnparkHelper { cpu: CpuId },
}

impl Step {
    /// A short name, the same for every CPU (for tables and breakdowns).
    pub fn name(&self) -> &'static str {
        match self {
            Step::StopTheWorld => "stop-the-world",
            Step::ResumeTheWorld => "resume-the-world",
            Step::Deactivate(_) => "deactivate",
            Step::Activate(_) => "activate",
            Step::InstallProxy { .. } => "install-proxy",
            Step::RemoveProxy { .. } => "remove-proxy",
            Step::StopDispatch { .. } => "stop-dispatch",
            Step::AwaitStopped { .. } => "await-stopped",
            Step::MigrateRunQueue { .. } => "migrate-run-queue",
            Step::StartDispatch { .. } => "start-dispatch",
            Step::GracePeriod => "grace-period",
            Step::FoldStats { .. } => "fold-stats",
            Step::FreeCache { .. } => "free-cache",
            Step::CreateCache { .. } => "create-cache",
            Step::RemoveRegistryEntry { .. } => "remove-registry-entry",
            Step::CreateRegistryEntry { .. } => "create-registry-entry",
            Step::StopHelper { .. } => "stop-helper",
            Step::StartHelper { .. } => "start-helper",
            Step::ParkHelper { .. } => "park-helper",
            Step::UnparkHelper { .. } => "unpark-helper",
        }
    }

    /// The CPU a per-CPU step acts on; `None` for global steps.
    pub fn cpu(&self) -> Option<CpuId> {
        match *self {
            Step::StopTheWorld
            | Step::ResumeTheWorld
            | Step::Deactivate(_)
            | Step::Activate(_)
            | Step::GracePeriod => None,
            Step::InstallProxy { cpu, .. }
            | Step::RemoveProxy { cpu, .. }
            | Step::StopDispatch { cpu }
            | Step::AwaitStopped { cpu }
            | Step::MigrateRunQueue { cpu }
            | Step::StartDispatch { cpu }
            | Step::FoldStats { cpu }
            | Step::FreeCache { cpu }
            | Step::CreateCache { cpu }
            | Step::RemoveRegistryEntry { cpu }
            | Step::CreateRegistryEntry { cpu }
            | Step::StopHelper { cpu }
            | Step::StartHelper { cpu }
            | Step::ParkHelper { cpu }
            | Step::UnparkHelper { cpu } => Some(cpu),
        }
    }

    /// The steps that undo this one (empty: nothing to undo — a wait, a
    /// grace period, folded statistics, migrated tasks, which simply run
    /// where they were moved).
    pub fn inverse(&self) -> Vec<Step> {
        match self {
            Step::StopTheWorld => vec![Step::ResumeTheWorld],
            Step::ResumeTheWorld => vec![Step::StopTheWorld],
            Step::Deactivate(s) => vec![Step::Activate(s.clone())],
            Step::Activate(s) => vec![Step::Deactivate(s.clone())],
            &Step::InstallProxy { cpu, proxy } => vec![Step::RemoveProxy { cpu, proxy }],
            &Step::RemoveProxy { cpu, proxy } => vec![Step::InstallProxy { cpu, proxy }],
            &Step::StopDispatch { cpu } => vec![Step::StartDispatch { cpu }],
            &Step::StartDispatch { cpu } => {
                vec![Step::StopDispatch { cpu }, Step::AwaitStopped { cpu }, Step::MigrateRunQueue { cpu }]
            }
            Step::AwaitStopped { .. }
            | Step::MigrateRunQueue { .. }
            | Step::GracePeriod
            | Step::FoldStats { .. } => vec![],
            &Step::FreeCache { cpu } => vec![Step::CreateCache { cpu }],
            &Step::CreateCache { cpu } => vec![Step::FreeCache { cpu }],
            &Step::RemoveRegistryEntry { cpu } => vec![Step::CreateRegistryEntry { cpu }],
            &Step::CreateRegistryEntry { cpu } => vec![Step::RemoveRegistryEntry { cpu }],
            &Step::StopHelper { cpu } => vec![Step::StartHelper { cpu }],
            &Step::StartHelper { cpu } => vec![Step::StopHelper { cpu }],
            &Step::ParkHelper { cpu } => vec![Step::UnparkHelper { cpu }],
            &Step::UnparkHelper { cpu } => vec![Step::ParkHelper { cpu }],
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Deactivate(s) | Step::Activate(s) => write!(f, "{} {{{s}}}", self.name()),
            Step::InstallProxy { cpu, proxy } => write!(f, "install-proxy of CPU {cpu} on CPU {proxy}"),
            Step::RemoveProxy { cpu, proxy } => write!(f, "remove-proxy of CPU {cpu} from CPU {proxy}"),
            s => match s.cpu() {
                Some(c) => write!(f, "{} of CPU {c}", s.name()),
                None => f.write_str(s.name()),
            },
        }
    }
}

/// A step and whether it is on the critical path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedStep {
    pub step: Step,
    pub kind: Kind,
}

/// What a helper thread is doing, as far as planning is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelperView {
    Running,
    /// Asked to park (it may not have yet).
    Parked,
    Stopped,
}

/// One CPU as the planner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuView {
    pub online: bool,
    /// The CPU holds a memory cache (online, or offline and kept).
    pub cache: bool,
    /// The CPU has a registry entry.
    pub registry_entry: bool,
    pub helper: HelperView,
}

impl CpuView {
    /// An online CPU with everything in place.
    pub const ONLINE: CpuView =
        CpuView { online: true, cache: true, registry_entry: true, helper: HelperView::Running };
}

/// Everything the planner needs: the owned CPUs `0..cpus.len()` and who
/// proxies for whom.
#[derive(Debug, Clone)]
pub struct ReconfigState {
    pub cpus: Vec<CpuView>,
    pub proxies: ProxyTable,
}

impl ReconfigState {
    /// `n` CPUs, all online, no proxies.
    pub fn all_online(n: usize) -> Self {
        ReconfigState { cpus: vec![CpuView::ONLINE; n], proxies: ProxyTable::new(n) }
    }

    /// The online CPUs.
    pub fn online(&self) -> CpuSet {
        self.cpus.iter().enumerate().filter(|(_, v)| v.online).map(|(c, _)| c).collect()
    }

    /// Records what a finished plan did, as the runtime's view would show it
    /// (the simulator's `runtime` mechanism and the tests keep their state
    /// with it). Deferred steps are applied as if they had run — the
    /// runtime's view shows a helper asked to park as parked at once —
    /// except [`Deferral::UnderPressure`] ones, which by definition have not.
    pub fn apply(&mut self, plan: &Plan) {
        for ps in &plan.steps {
            if ps.kind == Kind::Deferred(Deferral::UnderPressure) {
                continue;
            }
            match &ps.step {
                Step::Deactivate(s) => s.iter().for_each(|c| self.cpus[c].online = false),
                Step::Activate(s) => s.iter().for_each(|c| self.cpus[c].online = true),
                &Step::InstallProxy { cpu, proxy } => {
                    self.proxies.install(cpu, proxy).expect("a planned proxy is valid");
                }
                &Step::RemoveProxy { cpu, .. } => {
                    self.proxies.remove(cpu);
                }
                &Step::FreeCache { cpu } => self.cpus[cpu].cache = false,
                &Step::CreateCache { cpu } => self.cpus[cpu].cache = true,
                &Step::RemoveRegistryEntry { cpu } => self.cpus[cpu].registry_entry = false,
                &Step::CreateRegistryEntry { cpu } => self.cpus[cpu].registry_entry = true,
                &Step::StopHelper { cpu } => self.cpus[cpu].helper = HelperView::Stopped,
                &Step::StartHelper { cpu } | &Step::UnparkHelper { cpu } => {
                    self.cpus[cpu].helper = HelperView::Running
                }
                &Step::ParkHelper { cpu } => self.cpus[cpu].helper = HelperView::Parked,
                _ => {}
            }
        }
    }
}

/// A reconfiguration to execute.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a plan does nothing unless executed"]
pub struct Plan {
    pub mode: Mode,
    pub direction: Direction,
    /// CPUs that change state.
    pub cpus: CpuSet,
    /// CPUs asked for that are already in the target state: a no-op for
    /// them, reported, not an error.
    pub already: CpuSet,
    pub steps: Vec<PlannedStep>,
}

impl Plan {
    /// Nothing to do: every CPU asked for is already in the target state.
    pub fn is_noop(&self) -> bool {
        self.cpus.is_empty()
    }

    /// Number of critical steps (they come first).
    pub fn critical_len(&self) -> usize {
        self.steps.iter().take_while(|s| s.kind == Kind::Critical).count()
    }

    /// The steps that undo the first `failed` steps (the step at index
    /// `failed` failed before having any effect), newest first. Keeps
    /// invariant 2 for the undo too: an `InstallProxy` of a CPU is moved
    /// ahead of that CPU's `StopDispatch`.
    pub fn rollback(&self, failed: usize) -> Vec<Step> {
        let mut undo: Vec<Step> = self.steps[..failed].iter().rev().flat_map(|s| s.step.inverse()).collect();
        let mut i = 0;
        while i < undo.len() {
            if let Step::InstallProxy { cpu, .. } = undo[i]
                && let Some(j) = undo[..i].iter().position(|s| *s == Step::StopDispatch { cpu })
            {
                let s = undo.remove(i);
                undo.insert(j, s);
            }
            i += 1;
        }
        undo
    }

    /// Checks the invariants in the module docs.
    pub fn check(&self) -> Result<(), String> {
        let crit = self.critical_len();
        if self.steps[crit..].iter().any(|s| s.kind == Kind::Critical) {
            return Err("a critical step follows a deferred one".into());
        }
        let pos = |want: &Step| self.steps.iter().position(|s| s.step == *want);
        for cpu in self.cpus.iter() {
            let (first, then) = match self.direction {
                Direction::Offline => (
                    self.steps
                        .iter()
                        .position(|s| matches!(s.step, Step::InstallProxy { cpu: c, .. } if c == cpu)),
                    pos(&Step::StopDispatch { cpu }),
                ),
                Direction::Online => (
                    self.steps
                        .iter()
                        .position(|s| matches!(s.step, Step::RemoveProxy { cpu: c, .. } if c == cpu)),
                    pos(&Step::StartDispatch { cpu }),
                ),
            };
            match (first, then) {
                (Some(a), Some(b)) if a < b => {}
                _ => return Err(format!("CPU {cpu}: proxy step missing or after the dispatch step")),
            }
        }
        Ok(())
    }
}

/// Why a reconfiguration was refused (nothing was done).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanError {
    /// The set is empty.
    Empty,
    /// These CPUs are not owned (the owned ones are `0..owned`).
    NotOwned { cpus: CpuSet, owned: usize },
    /// Taking these CPUs offline would leave no CPU online.
    LastOnline { cpus: CpuSet },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::Empty => f.write_str("no CPU given"),
            PlanError::NotOwned { cpus, owned } => {
                let s = if cpus.len() == 1 { "" } else { "s" };
                write!(
                    f,
                    "CPU{s} {cpus} not owned by this runtime (it owns CPUs 0-{})",
                    owned.saturating_sub(1)
                )
            }
            PlanError::LastOnline { cpus } => write!(
                f,
                "refusing to take CPU(s) {cpus} offline: that would leave no online CPU (at least one must stay)"
            ),
        }
    }
}

impl std::error::Error for PlanError {}

fn validate(cpus: &CpuSet, state: &ReconfigState) -> Result<(), PlanError> {
    if cpus.is_empty() {
        return Err(PlanError::Empty);
    }
    let owned = state.cpus.len();
    if cpus.last().is_some_and(|c| c >= owned) {
        return Err(PlanError::NotOwned { cpus: cpus.iter().filter(|&c| c >= owned).collect(), owned });
    }
    Ok(())
}

fn crit(step: Step) -> PlannedStep {
    PlannedStep { step, kind: Kind::Critical }
}

fn deferred(step: Step, d: Deferral) -> PlannedStep {
    PlannedStep { step, kind: Kind::Deferred(d) }
}

/// Plans taking `cpus` offline. CPUs already offline are reported in
/// [`Plan::already`]; if all are, the plan is a no-op.
///
/// Proxies are dealt round-robin over the CPUs that stay online, lowest
/// first, so a bulk offline spreads the proxying work.
pub fn plan_offline(mode: Mode, cpus: &CpuSet, state: &ReconfigState) -> Result<Plan, PlanError> {
    validate(cpus, state)?;
    let online = state.online();
    let going = cpus.intersection(&online);
    let already = cpus.difference(&online);
    let staying = online.difference(&going);
    if going.is_empty() {
        return Ok(Plan { mode, direction: Direction::Offline, cpus: going, already, steps: vec![] });
    }
    if staying.is_empty() {
        return Err(PlanError::LastOnline { cpus: going });
    }
    let proxies: Vec<CpuId> = staying.iter().collect();
    let proxy_of = |i: usize| proxies[i % proxies.len()];
    let mut steps = Vec::new();
    match mode {
        Mode::Naive => {
            // One CPU after another, everything critical (hotplug).
            for (i, cpu) in going.iter().enumerate() {
                let v = state.cpus[cpu];
                steps.extend([
                    crit(Step::StopTheWorld),
                    crit(Step::Deactivate(CpuSet::single(cpu))),
                    crit(Step::InstallProxy { cpu, proxy: proxy_of(i) }),
                    crit(Step::StopDispatch { cpu }),
                    crit(Step::AwaitStopped { cpu }),
                    crit(Step::MigrateRunQueue { cpu }),
                    crit(Step::ResumeTheWorld),
                    crit(Step::GracePeriod),
                    crit(Step::FoldStats { cpu }),
                ]);
                if v.cache {
                    steps.push(crit(Step::FreeCache { cpu }));
                }
                if v.registry_entry {
                    steps.push(crit(Step::RemoveRegistryEntry { cpu }));
                }
                if v.helper != HelperView::Stopped {
                    steps.push(crit(Step::StopHelper { cpu }));
                }
            }
        }
        Mode::Bolt => {
            // Global update once; per-CPU steps phase by phase so that the
            // waits for the CPUs to stop overlap.
            steps.push(crit(Step::Deactivate(going.clone())));
            for (i, cpu) in going.iter().enumerate() {
                steps.push(crit(Step::InstallProxy { cpu, proxy: proxy_of(i) }));
            }
            steps.extend(going.iter().map(|cpu| crit(Step::StopDispatch { cpu })));
            steps.extend(going.iter().map(|cpu| crit(Step::AwaitStopped { cpu })));
            steps.extend(going.iter().map(|cpu| crit(Step::MigrateRunQueue { cpu })));
            steps.extend(going.iter().map(|cpu| deferred(Step::FoldStats { cpu }, Deferral::Lazily)));
            for cpu in going.iter() {
                if state.cpus[cpu].helper == HelperView::Running {
                    steps.push(deferred(Step::ParkHelper { cpu }, Deferral::Lazily));
                }
            }
            for cpu in going.iter() {
                if state.cpus[cpu].cache {
                    steps.push(deferred(Step::FreeCache { cpu }, Deferral::UnderPressure));
                }
            }
        }
    }
    let plan = Plan { mode, direction: Direction::Offline, cpus: going, already, steps };
    debug_assert_eq!(plan.check(), Ok(()));
    Ok(plan)
}

/// Plans bringing `cpus` online. CPUs already online are reported in
/// [`Plan::already`]; if all are, the plan is a no-op.
///
/// Both modes re-create what the CPU no longer has (cache, registry entry,
/// helper thread); Bolt has less to re-create because its offline kept it.
pub fn plan_online(mode: Mode, cpus: &CpuSet, state: &ReconfigState) -> Result<Plan, PlanError> {
    validate(cpus, state)?;
    let online = state.online();
    let coming = cpus.difference(&online);
    let already = cpus.intersection(&online);
    if coming.is_empty() {
        return Ok(Plan { mode, direction: Direction::Online, cpus: coming, already, steps: vec![] });
    }
    let mut steps = Vec::new();
    let prepare = |cpu: CpuId, steps: &mut Vec<PlannedStep>| {
        let v = state.cpus[cpu];
        if !v.cache {
            steps.push(crit(Step::CreateCache { cpu }));
        }
        if !v.registry_entry {
            steps.push(crit(Step::CreateRegistryEntry { cpu }));
        }
        match v.helper {
            HelperView::Stopped => steps.push(crit(Step::StartHelper { cpu })),
            HelperView::Parked => steps.push(crit(Step::UnparkHelper { cpu })),
            HelperView::Running => {}
        }
    };
    let remove_proxy = |cpu: CpuId| {
        let proxy = state.proxies.proxied_by(cpu);
        debug_assert!(proxy.is_some(), "offline CPU {cpu} has no proxy");
        proxy.map(|proxy| crit(Step::RemoveProxy { cpu, proxy }))
    };
    match mode {
        Mode::Naive => {
            for cpu in coming.iter() {
                prepare(cpu, &mut steps);
                steps.extend(remove_proxy(cpu));
                steps.push(crit(Step::Activate(CpuSet::single(cpu))));
                steps.push(crit(Step::StartDispatch { cpu }));
            }
        }
        Mode::Bolt => {
            for cpu in coming.iter() {
                prepare(cpu, &mut steps);
            }
            steps.extend(coming.iter().filter_map(remove_proxy));
            steps.push(crit(Step::Activate(coming.clone())));
            steps.extend(coming.iter().map(|cpu| crit(Step::StartDispatch { cpu })));
        }
    }
    let plan = Plan { mode, direction: Direction::Online, cpus: coming, already, steps };
    debug_assert_eq!(plan.check(), Ok(()));
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> CpuSet {
        s.parse().unwrap()
    }

    fn names(p: &Plan) -> Vec<String> {
        p.steps.iter().map(|s| s.step.to_string()).collect()
    }

    #[test]
    fn bolt_offline_keeps_only_four_kinds_of_step_critical() {
        let st = ReconfigState::all_online(4);
        let p = plan_offline(Mode::Bolt, &set("3"), &st).unwrap();
        // 1 deactivate + (install, stop, await, migrate) for one CPU = 5 critical;
        // fold + park + free = 3 deferred.
        assert_eq!(p.critical_len(), 5);
        assert_eq!(p.steps.len(), 8);
        assert_eq!(
            names(&p)[..5],
            [
                "deactivate {3}",
                "install-proxy of CPU 3 on CPU 0",
                "stop-dispatch of CPU 3",
                "await-stopped of CPU 3",
                "migrate-run-queue of CPU 3"
            ]
        );
        let free = p.steps.iter().find(|s| matches!(s.step, Step::FreeCache { .. })).unwrap();
        assert_eq!(free.kind, Kind::Deferred(Deferral::UnderPressure));
        assert!(!p.steps.iter().any(|s| matches!(s.step, Step::RemoveRegistryEntry { .. })));
    }

    #[test]
    fn naive_offline_puts_everything_on_the_critical_path() {
        let st = ReconfigState::all_online(4);
        let p = plan_offline(Mode::Naive, &set("2"), &st).unwrap();
        // 9 fixed steps + free cache + remove entry + stop helper = 12, all critical.
        assert_eq!(p.steps.len(), 12);
        assert_eq!(p.critical_len(), 12);
        assert_eq!(p.steps[0].step, Step::StopTheWorld);
        assert!(p.steps.iter().any(|s| s.step == Step::GracePeriod));
    }

    #[test]
    fn bulk_bolt_updates_the_mask_once_naive_once_per_cpu() {
        let st = ReconfigState::all_online(8);
        let cpus = set("4-7");
        let bolt = plan_offline(Mode::Bolt, &cpus, &st).unwrap();
        let naive = plan_offline(Mode::Naive, &cpus, &st).unwrap();
        let count = |p: &Plan, n: &str| p.steps.iter().filter(|s| s.step.name() == n).count();
        assert_eq!(count(&bolt, "deactivate"), 1);
        assert_eq!(count(&naive, "deactivate"), 4);
        assert_eq!(count(&bolt, "stop-the-world"), 0);
        assert_eq!(count(&naive, "stop-the-world"), 4);
        // Bolt: 1 + 4 × 4 critical = 17; naive: 4 × 12 = 48.
        assert_eq!(bolt.critical_len(), 17);
        assert_eq!(naive.critical_len(), 48);
        // Every stop is issued before any wait (the waits overlap).
        let last_stop = bolt.steps.iter().rposition(|s| s.step.name() == "stop-dispatch").unwrap();
        let first_wait = bolt.steps.iter().position(|s| s.step.name() == "await-stopped").unwrap();
        assert!(last_stop < first_wait);
        // Proxies dealt round-robin over the staying CPUs 0-3.
        let proxies: Vec<_> = bolt
            .steps
            .iter()
            .filter_map(|s| match s.step {
                Step::InstallProxy { proxy, .. } => Some(proxy),
                _ => None,
            })
            .collect();
        assert_eq!(proxies, [0, 1, 2, 3]);
    }

    #[test]
    fn refuses_the_last_online_cpu_and_foreign_cpus() {
        let mut st = ReconfigState::all_online(3);
        assert_eq!(
            plan_offline(Mode::Bolt, &set("0-2"), &st),
            Err(PlanError::LastOnline { cpus: set("0-2") })
        );
        let p = plan_offline(Mode::Bolt, &set("1-2"), &st).unwrap();
        st.apply(&p);
        let err = plan_offline(Mode::Naive, &set("0"), &st).unwrap_err();
        assert_eq!(err, PlanError::LastOnline { cpus: set("0") });
        assert!(err.to_string().contains("no online CPU"), "{err}");
        let err = plan_online(Mode::Bolt, &set("2,7,9"), &st).unwrap_err();
        assert_eq!(err, PlanError::NotOwned { cpus: set("7,9"), owned: 3 });
        assert_eq!(err.to_string(), "CPUs 7,9 not owned by this runtime (it owns CPUs 0-2)");
        assert_eq!(plan_offline(Mode::Bolt, &CpuSet::new(), &st), Err(PlanError::Empty));
    }

    #[test]
    fn already_in_target_state_is_a_reported_noop() {
        let mut st = ReconfigState::all_online(4);
        let p = plan_online(Mode::Bolt, &set("1-2"), &st).unwrap();
        assert!(p.is_noop() && p.steps.is_empty());
        assert_eq!(p.already, set("1-2"));
        let p = plan_offline(Mode::Bolt, &set("3"), &st).unwrap();
        st.apply(&p);
        // Offline of {2,3}: 3 is already offline, 2 goes.
        let p = plan_offline(Mode::Bolt, &set("2-3"), &st).unwrap();
        assert_eq!((p.cpus.clone(), p.already.clone()), (set("2"), set("3")));
    }

    #[test]
    fn bolt_online_after_bolt_offline_recreates_nothing() {
        let mut st = ReconfigState::all_online(4);
        let off = plan_offline(Mode::Bolt, &set("2-3"), &st).unwrap();
        st.apply(&off);
        // Kept: cache (freed only under pressure), registry entry; helper parked.
        assert!(st.cpus[2].cache && st.cpus[2].registry_entry);
        assert_eq!(st.cpus[2].helper, HelperView::Parked);
        let on = plan_online(Mode::Bolt, &set("2-3"), &st).unwrap();
        // 2 × unpark + 2 × remove-proxy + activate + 2 × start = 7, no create-*.
        assert_eq!(on.steps.len(), 7);
        assert!(!on.steps.iter().any(|s| s.step.name().starts_with("create")));
        st.apply(&on);
        assert_eq!(st.online(), set("0-3"));
        assert_eq!(st.proxies.check(), Ok(()));
    }

    #[test]
    fn naive_online_after_naive_offline_recreates_everything() {
        let mut st = ReconfigState::all_online(2);
        st.apply(&plan_offline(Mode::Naive, &set("1"), &st).unwrap());
        assert_eq!(
            st.cpus[1],
            CpuView { online: false, cache: false, registry_entry: false, helper: HelperView::Stopped }
        );
        let on = plan_online(Mode::Naive, &set("1"), &st).unwrap();
        assert_eq!(
            names(&on),
            [
                "create-cache of CPU 1",
                "create-registry-entry of CPU 1",
                "start-helper of CPU 1",
                "remove-proxy of CPU 1 from CPU 0",
                "activate {1}",
                "start-dispatch of CPU 1"
            ]
        );
    }

    #[test]
    fn a_cpu_that_proxies_hands_its_charges_over() {
        let mut st = ReconfigState::all_online(3);
        st.apply(&plan_offline(Mode::Bolt, &set("2"), &st).unwrap());
        assert_eq!(st.proxies.proxied_by(2), Some(0));
        // CPU 0 proxies for 2; taking 0 offline moves 2 to 0's proxy, 1.
        st.apply(&plan_offline(Mode::Bolt, &set("0"), &st).unwrap());
        assert_eq!(st.proxies.proxying_for(1), set("0,2"));
        let on = plan_online(Mode::Bolt, &set("2"), &st).unwrap();
        assert!(on.steps.iter().any(|s| s.step == Step::RemoveProxy { cpu: 2, proxy: 1 }));
    }

    #[test]
    fn rollback_undoes_in_reverse_and_keeps_proxy_before_stop() {
        let st = ReconfigState::all_online(4);
        let p = plan_offline(Mode::Naive, &set("3"), &st).unwrap();
        // Failing at free-cache (index 9): undo fold(–), grace(–),
        // resume→stop-the-world, migrate(–), await(–), stop→start,
        // install→remove-proxy, deactivate→activate, stop-the-world→resume.
        let undo: Vec<String> = p.rollback(9).iter().map(|s| s.to_string()).collect();
        assert_eq!(
            undo,
            [
                "stop-the-world",
                "start-dispatch of CPU 3",
                "remove-proxy of CPU 3 from CPU 0",
                "activate {3}",
                "resume-the-world"
            ]
        );
        // Online bulk failing at the second start-dispatch: the first CPU is
        // stopped again, and its proxy is reinstalled *before* it stops.
        let mut st = st;
        st.apply(&plan_offline(Mode::Bolt, &set("2-3"), &st).unwrap());
        let on = plan_online(Mode::Bolt, &set("2-3"), &st).unwrap();
        let second_start = on.steps.iter().position(|s| s.step == Step::StartDispatch { cpu: 3 }).unwrap();
        let undo = on.rollback(second_start);
        let install = undo.iter().position(|s| *s == Step::InstallProxy { cpu: 2, proxy: 0 }).unwrap();
        let stop = undo.iter().position(|s| *s == Step::StopDispatch { cpu: 2 }).unwrap();
        assert!(install < stop, "{undo:?}");
        assert_eq!(p.rollback(0), Vec::<Step>::new(), "failing at the first step undoes nothing");
    }

    #[test]
    fn check_rejects_a_plan_that_stops_before_installing_the_proxy() {
        let st = ReconfigState::all_online(2);
        let mut p = plan_offline(Mode::Bolt, &set("1"), &st).unwrap();
        p.steps.swap(1, 2); // stop-dispatch before install-proxy
        assert!(p.check().is_err());
        let mut p = plan_offline(Mode::Bolt, &set("1"), &st).unwrap();
        let last = p.steps.len() - 1;
        p.steps[last].kind = Kind::Critical;
        assert!(p.check().is_err());
    }
}
