//! The policy boundary: events in, actions out, time as an argument. This is
//! the contract every backend implements (docs/architecture.md, "The policy
//! boundary", explains it with the simulator and the live runtime side by
//! side).
//!
//! A policy is a deterministic state machine behind one call,
//! [`Policy::handle`]: the backend passes the time and one [`Event`]; the
//! policy appends the [`Action`]s the backend must execute, in order. The
//! same events at the same times give the same actions, byte for byte —
//! which is what lets a live run's event trace be replayed through the
//! policy alone ([`trace`]).
//!
//! There is one `Event` and one `Action` enum for every policy — Chameleon's
//! cluster scheduler (and its Linux-like mode) and NewtOS's component
//! placement ([`crate::placement::PlacementPolicy`]) — so a backend and the
//! trace format have one contract. A backend executes the actions of the
//! policy it drives and refuses, as an error, a kind it does not run (the
//! thread executors run no network-stack components; a stack host runs no
//! threads).
//!
//! ## Placement (NewtOS)
//! A stack host feeds [`Event::StackControl`] (start, a mode, a move by
//! hand, a speed by hand; validated first with
//! [`PlacementPolicy::validate`](crate::placement::PlacementPolicy::validate))
//! and periodic [`Event::StackLoad`] samples, and executes every
//! [`Action::Place`] in order by applying its decision to its own layout
//! ([`Layout::apply`](crate::placement::Layout::apply)): it moves
//! components between its CPUs and sets their speed steps. A placement
//! policy ignores the thread events; Chameleon's ignores the stack events.
//!
//! ## What the backend promises
//! 1. `now` never decreases from one call to the next.
//! 2. Threads are named by the backend, densely, in spawn order: the n-th
//!    [`Event::Spawn`] carries thread id n. A thread is spawned once and
//!    exits at most once, after its spawn ([`Event::Exit`] when its work is
//!    done). Once spawned, a thread is runnable until it exits, except
//!    between an [`Event::Block`] and the next [`Event::Wake`]: a backend
//!    that sees threads sleep says so (the arbiter, which runs real
//!    processes); one whose threads never sleep (the simulator, the live
//!    runtime's kernels) never sends them. A thread is blocked only while
//!    runnable, woken only while blocked, and may exit in either state.
//! 3. Every CPU ticks ([`Event::Tick`]) periodically while anything runs,
//!    an offline one too (a policy ignores the ticks it has no use for).
//! 4. Actions are executed in the order given. Every [`Action::Offline`] and
//!    [`Action::Online`] is answered by exactly one [`Event::ReconfigDone`]
//!    with its id, when its critical path is done, saying what it took. A
//!    backend serialises the reconfigurations of one CPU: one asked for
//!    while an earlier one of the same CPU is in progress starts when that
//!    ends (the kernel does the same under its hotplug lock). The policy
//!    never learns costs in advance: it learns that a reconfiguration ended
//!    from the event, which works for a backend whose costs are unknown (a
//!    real machine).
//! 5. A CPU runs what the last [`Action::Dispatch`] for it says, at the duty
//!    cycle the last [`Action::SetSpeed`] for it says, and nothing while it
//!    is reconfiguring: a thread dispatched on a CPU in the call that brings
//!    it online starts when the online's critical path is done.
//! 6. A load sample's busy time is at most its window.
//!
//! ## What the policy guarantees
//! Checked on recorded traffic by [`contract::Checker`] (a test walks every
//! shipped scenario's trace through it):
//! 1. A thread runs on at most one CPU at a time, and only between its spawn
//!    and its exit.
//! 2. A CPU's speed is set before a thread first runs on it, and again after
//!    every fuse and split of an object it represents, before the thread
//!    runs there at the new size.
//! 3. A [`Action::Fuse`] is followed at once by the [`Action::Offline`] of
//!    its borrowed CPUs, a [`Action::Split`] by their [`Action::Online`].
//!    An `Offline` or `Online` that does not follow a `Fuse` or `Split` is
//!    *standalone*: it parks CPUs (Bolt: takes them out of the OS's use, to
//!    save power) or brings parked CPUs back.
//! 4. A CPU taken offline runs nothing until it is brought back online, by
//!    the path that took it offline:
//!    * borrowed by a fuse, its only state is [`CpuState::Borrowed`] by the
//!      fused thread, until its object's `Split` and `Online`;
//!    * parked by a standalone `Offline`, it is [`CpuState::Idle`] from the
//!      end of the call that parks it (a policy dispatches it `Idle` first
//!      if it ran a thread) and is dispatched nothing until a standalone
//!      `Online` brings it back (a `Dispatch` may follow that `Online` in
//!      the same call).
//!
//!    Offline is asked only of online CPUs and online only of offline ones;
//!    an `Offline` names at least one CPU and never the last online one (an
//!    online CPU proxies for the offline ones); reconfiguration ids are
//!    never reused.
//! 5. Every execution object carried by an action passes
//!    [`ExecObject::check`](crate::exec::ExecObject::check).

pub mod contract;
pub mod execution;
pub mod trace;

use serde::{Deserialize, Serialize};

use crate::exec::ExecObject;
use crate::placement::{Control, Decision, LoadSample};
use crate::reconfig::Mode;
use crate::speed::{Duty, SpeedClass};
use crate::{CpuId, CpuSet, Nanos};

/// A thread, named by the backend (dense, in spawn order).
pub type ThreadId = usize;

/// Names one `Offline` or `Online` action and the `ReconfigDone` that
/// answers it. Assigned by the policy, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ReconfigId(pub u64);

/// A policy: a deterministic state machine between events and actions.
///
/// A backend holds a policy as `Box<dyn Policy + Send>` (from the registry,
/// [`crate::policies`]) and knows nothing else of it: every output it
/// reports is built from the events it fed and the actions it got back.
pub trait Policy {
    /// Handles one event at `now`; appends the actions the backend must
    /// execute, in order. Deterministic: the same events at the same times
    /// give the same actions.
    fn handle(&mut self, now: Nanos, event: &Event, out: &mut Vec<Action>);

    /// Checks the policy's own invariants (a backend calls it at the end of
    /// a run, and may call it more often); the error says which one broke.
    /// The default checks nothing.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

impl<P: Policy + ?Sized> Policy for Box<P> {
    fn handle(&mut self, now: Nanos, event: &Event, out: &mut Vec<Action>) {
        (**self).handle(now, event, out);
    }

    fn check(&self) -> Result<(), String> {
        (**self).check()
    }
}

/// The kinds of [`Event`], as a policy declares which it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Spawn,
    Exit,
    Block,
    Wake,
    Tick,
    ReconfigDone,
    Load,
    StackLoad,
    StackControl,
}

/// The kinds of [`Action`], as a policy declares which it may emit and a
/// backend which it can execute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    Dispatch,
    SetSpeed,
    Fuse,
    Split,
    Offline,
    Online,
    Migrate,
    Object,
    Place,
}

impl EventKind {
    pub const ALL: [EventKind; 9] = [
        EventKind::Spawn,
        EventKind::Exit,
        EventKind::Block,
        EventKind::Wake,
        EventKind::Tick,
        EventKind::ReconfigDone,
        EventKind::Load,
        EventKind::StackLoad,
        EventKind::StackControl,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EventKind::Spawn => "spawn",
            EventKind::Exit => "exit",
            EventKind::Block => "block",
            EventKind::Wake => "wake",
            EventKind::Tick => "tick",
            EventKind::ReconfigDone => "reconfig_done",
            EventKind::Load => "load",
            EventKind::StackLoad => "stack_load",
            EventKind::StackControl => "stack_control",
        }
    }
}

impl ActionKind {
    pub const ALL: [ActionKind; 9] = [
        ActionKind::Dispatch,
        ActionKind::SetSpeed,
        ActionKind::Fuse,
        ActionKind::Split,
        ActionKind::Offline,
        ActionKind::Online,
        ActionKind::Migrate,
        ActionKind::Object,
        ActionKind::Place,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ActionKind::Dispatch => "dispatch",
            ActionKind::SetSpeed => "set_speed",
            ActionKind::Fuse => "fuse",
            ActionKind::Split => "split",
            ActionKind::Offline => "offline",
            ActionKind::Online => "online",
            ActionKind::Migrate => "migrate",
            ActionKind::Object => "object",
            ActionKind::Place => "place",
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Display for ActionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What every thread backend executes (the simulator, the live runtime,
/// the arbiter, the sched_ext backend): every action but `Place`, which
/// moves network-stack components.
pub const THREAD_ACTIONS: &[ActionKind] = &[
    ActionKind::Dispatch,
    ActionKind::SetSpeed,
    ActionKind::Fuse,
    ActionKind::Split,
    ActionKind::Offline,
    ActionKind::Online,
    ActionKind::Migrate,
    ActionKind::Object,
];

/// What a thread is and wants, given when it is spawned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadSpec {
    /// Nice level, -20..=19 (CFS weights).
    pub nice: i32,
    /// Tax rate on borrowed CPUs (Chameleon §4.3.3).
    pub tax: f64,
    /// CPUs of the `sequential` object wanted (1 = none).
    pub want_cpus: usize,
    /// Weight of the property: its importance, e.g. its speedup.
    pub weight: f64,
    /// CPUs the thread may run on (`None` = all).
    pub affinity: Option<CpuSet>,
    /// How much the thread gains from fast CPUs and fused objects (Table 3).
    pub class: SpeedClass,
}

/// Backend → policy. Each is stamped with the time it happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// A thread is created with `spec` and is runnable.
    Spawn { thread: ThreadId, spec: ThreadSpec },
    /// A thread finished its work.
    Exit { thread: ThreadId },
    /// A thread stopped being runnable: it sleeps (for a child, a pipe, a
    /// lock, the disk). A policy that reads it runs something else; one
    /// that does not keeps dispatching the thread, whose CPU then idles.
    Block { thread: ThreadId },
    /// A blocked thread is runnable again.
    Wake { thread: ThreadId },
    /// The periodic tick of a CPU.
    Tick { cpu: CpuId },
    /// The reconfiguration `id` asked for by an `Offline` or `Online`
    /// action finished its critical path; it took `took_ns` from its start
    /// (not counting time queued behind an earlier reconfiguration).
    ReconfigDone { id: ReconfigId, took_ns: Nanos },
    /// `cpu` was busy running threads for `busy_ns` of the last `window_ns`.
    /// The Chameleon policy ignores it; placement policies use it.
    Load { cpu: CpuId, busy_ns: Nanos, window_ns: Nanos },
    /// A network stack's load over the last sample period (placement
    /// policies): each component's busy fraction, how full its inbound
    /// channels are, whether a sender reported it cannot keep up, and the
    /// stream's bitrate.
    StackLoad { sample: LoadSample },
    /// A request to a placement policy: start, a mode, a move, a speed.
    StackControl { control: Control },
}

/// A CPU's state, as the backend must run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum CpuState {
    /// Runs nothing.
    Idle,
    /// Runs `thread`, on an object of `object_cpus` CPUs (1 = native).
    Running { thread: ThreadId, object_cpus: usize },
    /// Borrowed into `by`'s fused object: offline, runs nothing.
    Borrowed { by: ThreadId },
}

/// Policy → backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[must_use]
pub enum Action {
    /// `cpu` now runs as `state` says. Every call ends with one of these per
    /// CPU whose state changed, in CPU order, so a backend can mirror the
    /// machine exactly.
    Dispatch { cpu: CpuId, state: CpuState },
    /// `cpu` runs at `duty` from now on (Table 2 as duty cycles).
    SetSpeed { cpu: CpuId, duty: Duty },
    /// `thread` activates `object`: its representative runs the thread,
    /// its borrowed CPUs go offline (the `Offline` that follows).
    Fuse { thread: ThreadId, object: ExecObject },
    /// `thread` deactivates `object`: its borrowed CPUs come back (the
    /// `Online` that follows).
    Split { thread: ThreadId, object: ExecObject },
    /// Take `cpus` offline with `mode` (Bolt: critical steps only, proxies
    /// installed); answered by `ReconfigDone { id }`. Right after a `Fuse`,
    /// its borrowed CPUs; otherwise standalone: idle CPUs parked (one bulk
    /// call for several, Bolt §3.3).
    Offline { id: ReconfigId, cpus: CpuSet, mode: Mode },
    /// Bring `cpus` back online with `mode`; answered by `ReconfigDone { id }`.
    /// Right after a `Split`, its borrowed CPUs; otherwise parked CPUs.
    Online { id: ReconfigId, cpus: CpuSet, mode: Mode },
    /// `thread` moved from `from`'s run queue to `to`'s (`defrag`: the node
    /// manager moved it to defragment its node).
    Migrate { thread: ThreadId, from: CpuId, to: CpuId, defrag: bool },
    /// A node manager gave `thread` a new execution object (`None`: none).
    Object { thread: ThreadId, object: Option<ExecObject> },
    /// A placement decision — dedicate a CPU to a component, consolidate
    /// components on a CPU, move one, set a CPU's speed step — with the
    /// reason it was taken.
    Place { decision: Decision },
}

impl Event {
    pub fn kind(&self) -> EventKind {
        match self {
            Event::Spawn { .. } => EventKind::Spawn,
            Event::Exit { .. } => EventKind::Exit,
            Event::Block { .. } => EventKind::Block,
            Event::Wake { .. } => EventKind::Wake,
            Event::Tick { .. } => EventKind::Tick,
            Event::ReconfigDone { .. } => EventKind::ReconfigDone,
            Event::Load { .. } => EventKind::Load,
            Event::StackLoad { .. } => EventKind::StackLoad,
            Event::StackControl { .. } => EventKind::StackControl,
        }
    }
}

impl Action {
    pub fn kind(&self) -> ActionKind {
        match self {
            Action::Dispatch { .. } => ActionKind::Dispatch,
            Action::SetSpeed { .. } => ActionKind::SetSpeed,
            Action::Fuse { .. } => ActionKind::Fuse,
            Action::Split { .. } => ActionKind::Split,
            Action::Offline { .. } => ActionKind::Offline,
            Action::Online { .. } => ActionKind::Online,
            Action::Migrate { .. } => ActionKind::Migrate,
            Action::Object { .. } => ActionKind::Object,
            Action::Place { .. } => ActionKind::Place,
        }
    }
}
