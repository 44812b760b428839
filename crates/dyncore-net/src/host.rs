//! Hosts for phase A: what runs the components until runtime CPUs do.
//!
//! * [`Supervised`] wraps a component: it polls it under `catch_unwind`,
//!   and when the component panics (an injected crash or a bug), drops the
//!   instance whole, recovers its journal (finishing a commit the crash
//!   interrupted) and builds a new instance from the component's blueprint,
//!   in fresh memory, attached to the same ports at their committed
//!   positions; it times each restart from the crash to the new instance
//!   ready, and to its first message handled. It also carries out live
//!   updates ([`Supervised::update`]) between two polls.
//! * [`RoundRobin`] polls every component and application in turn on the
//!   calling thread (a consolidated core). With a virtual clock it is
//!   deterministic: time advances a tick per round and, when a whole round
//!   does nothing, jumps to the earliest timer (a core sleeping until its
//!   next interrupt).
//! * [`run_threads`] gives every component and application a plain thread
//!   (temporary, for tests: phase B puts them on runtime CPUs). A thread
//!   that finds no work for [`PARK_AFTER_EMPTY_POLLS`] polls in a row parks
//!   on its bell until work or its deadline comes.

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Once};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dyncore_core::Nanos;
use dyncore_core::placement::{ComponentSample, LoadSample};
use dyncore_ring::SpinPolicy;

use crate::app::App;
use crate::chan::clock_ns;
use crate::component::{Blueprint, Component, ComponentKind, INJECTED_CRASH, Progress, UpdateError};

/// Installs (once) a panic hook that keeps injected crashes off stderr and
/// passes every other panic to the previous hook.
pub fn quiet_injected_crashes() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("");
            if !msg.starts_with(INJECTED_CRASH) {
                prev(info);
            }
        }));
    });
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// What a host measured about one component.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    pub polls: u64,
    pub empty_polls: u64,
    /// Time spent in polls that did work (timed hosts only).
    pub busy_ns: u64,
    /// Times it parked for want of work.
    pub parks: u64,
    pub messages: u64,
    pub bytes: u64,
    pub restarts: u64,
    /// Longest restart: from the crash to the new instance ready.
    pub restart_ns_max: u64,
    /// Restarts whose recovery finished a commit the crash interrupted.
    pub redone: u64,
    /// Live updates, and the longest pause one caused.
    pub updates: u64,
    pub update_pause_ns_max: u64,
}

/// The restart times of one component (ns), in the order they happened.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restarts {
    /// From the crash (the injected crash firing, or the panic caught) to
    /// the new instance built and attached.
    pub ready_ns: Vec<u64>,
    /// From the crash to the first message the new instance handled.
    pub first_message_ns: Vec<u64>,
}

/// A live update carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Updated {
    pub kind: ComponentKind,
    pub from: u32,
    pub to: u32,
    /// From the old instance's last poll to the new instance ready: the
    /// component handled nothing in between.
    pub pause_ns: u64,
}

/// A component under supervision (see the module docs).
pub struct Supervised {
    component: Option<Box<dyn Component>>,
    blueprint: Arc<dyn Blueprint>,
    pub load: Load,
    /// The panic message of the last crash.
    pub last_crash: Option<String>,
    pub restarts: Restarts,
    /// The last crash's time ([`clock_ns`]), until the new instance handles
    /// a message.
    awaiting_first: Option<u64>,
}

impl Supervised {
    /// Builds the first instance of `blueprint`'s component.
    pub fn new(blueprint: Arc<dyn Blueprint>, now_ns: Nanos) -> Self {
        Supervised {
            component: Some(blueprint.build(now_ns)),
            blueprint,
            load: Load::default(),
            last_crash: None,
            restarts: Restarts::default(),
            awaiting_first: None,
        }
    }

    /// The instance running now.
    pub fn component(&self) -> &dyn Component {
        self.component.as_deref().expect("a supervised component always has an instance between polls")
    }

    pub fn kind(&self) -> ComponentKind {
        self.blueprint.kind()
    }

    pub fn blueprint(&self) -> &Arc<dyn Blueprint> {
        &self.blueprint
    }

    /// Buffers out of the pools its instances allocate from (zero at rest).
    pub fn buffers_out(&self) -> usize {
        self.blueprint.buffers_out()
    }

    /// Polls; on a panic, drops the instance and builds a new one (module
    /// docs).
    pub fn poll(&mut self, now_ns: Nanos) -> Progress {
        let c = self.component.as_mut().expect("an instance between polls");
        let switch = c.crash_switch().clone();
        let fired = switch.fired();
        let p = match catch_unwind(AssertUnwindSafe(|| c.poll(now_ns))) {
            Ok(p) => p,
            Err(payload) => {
                let crashed_at = if switch.fired() != fired { switch.fired_at_ns() } else { clock_ns() };
                self.restart(now_ns, crashed_at);
                self.last_crash = Some(panic_message(payload.as_ref()));
                Progress::IDLE
            }
        };
        if p.messages > 0
            && let Some(t) = self.awaiting_first.take()
        {
            self.restarts.first_message_ns.push(clock_ns().saturating_sub(t));
        }
        self.load.polls += 1;
        if p.is_idle() {
            self.load.empty_polls += 1;
        }
        self.load.messages += p.messages;
        self.load.bytes += p.bytes;
        p
    }

    /// A new instance in fresh memory after a crash at `crashed_at`.
    fn restart(&mut self, now_ns: Nanos, crashed_at: u64) {
        // The crashed instance goes whole: its memory, its private
        // positions, the handles it attached.
        self.component = None;
        let rec = self.blueprint.journal().recover();
        self.component = Some(self.blueprint.build(now_ns));
        let ns = clock_ns().saturating_sub(crashed_at);
        self.restarts.ready_ns.push(ns);
        self.awaiting_first = Some(crashed_at);
        self.load.restarts += 1;
        self.load.redone += u64::from(rec.redone);
        self.load.restart_ns_max = self.load.restart_ns_max.max(ns);
    }

    /// Replaces the instance with one of `version`, started from the old
    /// one's state, between two polls (the old instance has committed
    /// everything it did). Nothing changes if the update is refused.
    pub fn update(&mut self, version: u32, now_ns: Nanos) -> Result<Updated, UpdateError> {
        let t0 = clock_ns();
        let target = self.blueprint.at_version(version)?;
        let state = self.component().export()?;
        target.accepts(&state)?;
        let from = self.component().version();
        self.component = None;
        self.component = Some(target.build_from(state, now_ns));
        self.blueprint = target;
        let pause_ns = clock_ns().saturating_sub(t0);
        self.load.updates += 1;
        self.load.update_pause_ns_max = self.load.update_pause_ns_max.max(pause_ns);
        Ok(Updated { kind: self.kind(), from, to: version, pause_ns })
    }
}

/// A placement sample of one stack's components over a window that began
/// when their loads were `before` (same order) and lasted `window_ns`: each
/// component's busy fraction (from the host's busy time, so timed hosts
/// only), how full its inbound channels are, and whether a sender's channel
/// to it is at least `behind_fill` full (the "cannot keep up" hint).
pub fn load_sample(
    stack: &[Supervised],
    before: &[Load],
    window_ns: Nanos,
    bits_per_s: f64,
    behind_fill: f64,
) -> LoadSample {
    assert_eq!(stack.len(), before.len(), "one earlier load per component");
    let behind: BTreeSet<ComponentKind> = stack
        .iter()
        .flat_map(|s| s.component().outbound_fill())
        .filter(|&(_, fill)| fill >= behind_fill)
        .map(|(k, _)| k)
        .collect();
    let components = stack
        .iter()
        .zip(before)
        .map(|(s, b)| {
            let k = s.kind();
            let busy = s.load.busy_ns.saturating_sub(b.busy_ns) as f64 / window_ns.max(1) as f64;
            (
                k,
                ComponentSample {
                    busy: busy.min(1.0),
                    fill: s.component().inbound_fill(),
                    behind: behind.contains(&k),
                },
            )
        })
        .collect();
    LoadSample { components, bits_per_s }
}

/// A host's clock.
#[derive(Debug, Clone, Copy)]
pub enum Clock {
    /// Virtual time: `tick_ns` per round, starting at `now_ns`.
    Virtual { now_ns: Nanos, tick_ns: Nanos },
    /// Monotonic time since `epoch`.
    Real { epoch: Instant },
}

/// The run ended without the condition becoming true.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stalled {
    pub rounds: u64,
    pub why: String,
}

impl std::fmt::Display for Stalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "stalled after {} rounds: {}", self.rounds, self.why)
    }
}

impl std::error::Error for Stalled {}

/// Every component and application polled in turn on one thread.
pub struct RoundRobin {
    pub components: Vec<Supervised>,
    pub apps: Vec<Box<dyn App>>,
    clock: Clock,
    rounds: u64,
}

impl RoundRobin {
    pub fn new(blueprints: Vec<Arc<dyn Blueprint>>, apps: Vec<Box<dyn App>>, clock: Clock) -> Self {
        let now = match clock {
            Clock::Virtual { now_ns, .. } => now_ns,
            Clock::Real { epoch } => crate::elapsed_ns(epoch),
        };
        let components = blueprints.into_iter().map(|b| Supervised::new(b, now)).collect();
        RoundRobin { components, apps, clock, rounds: 0 }
    }

    pub fn now_ns(&self) -> Nanos {
        match self.clock {
            Clock::Virtual { now_ns, .. } => now_ns,
            Clock::Real { epoch } => crate::elapsed_ns(epoch),
        }
    }

    pub fn rounds(&self) -> u64 {
        self.rounds
    }

    /// Polls everything once; returns whether anything did work.
    pub fn round(&mut self) -> bool {
        let now = self.now_ns();
        let mut busy = false;
        for s in &mut self.components {
            busy |= !s.poll(now).is_idle();
        }
        for a in &mut self.apps {
            busy |= !a.poll(now).is_idle();
        }
        self.rounds += 1;
        if let Clock::Virtual { now_ns, tick_ns } = &mut self.clock {
            let next = *now_ns + *tick_ns;
            // An idle round: sleep until the earliest timer.
            let wake = if busy {
                next
            } else {
                let comps = self.components.iter().filter_map(|s| s.component().deadline_ns(*now_ns));
                comps.chain(self.apps.iter().filter_map(|a| a.deadline_ns())).min().unwrap_or(next)
            };
            *now_ns = wake.max(next);
        }
        busy
    }

    /// Runs rounds until `done` (asked before every round) or `max_rounds`.
    /// `done` may also act between rounds (arm a crash, change a rule).
    pub fn run_until(
        &mut self,
        max_rounds: u64,
        mut done: impl FnMut(&mut RoundRobin) -> bool,
    ) -> Result<u64, Stalled> {
        let start = self.rounds;
        while self.rounds - start < max_rounds {
            if done(self) {
                return Ok(self.rounds - start);
            }
            self.round();
        }
        Err(Stalled { rounds: max_rounds, why: format!("condition not met by {} ns", self.now_ns()) })
    }
}

/// A thread finding no work this many polls in a row parks.
pub const PARK_AFTER_EMPTY_POLLS: u32 = 256;

/// What [`Threads::stop`] returns: everything, back from the threads.
pub struct ThreadRun {
    pub components: Vec<Supervised>,
    pub apps: Vec<Box<dyn App>>,
    pub wall_ns: Nanos,
}

/// Every component and application on a thread of its own.
pub struct Threads {
    epoch: Instant,
    stop: Arc<AtomicBool>,
    apps_done: Arc<AtomicUsize>,
    n_apps: usize,
    bells: Vec<Arc<crate::chan::Bell>>,
    components: Vec<JoinHandle<Supervised>>,
    apps: Vec<JoinHandle<Box<dyn App>>>,
}

impl Threads {
    /// Starts a thread per component and per application.
    pub fn start(blueprints: Vec<Arc<dyn Blueprint>>, apps: Vec<Box<dyn App>>) -> Threads {
        let epoch = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let apps_done = Arc::new(AtomicUsize::new(0));
        let n_apps = apps.len();
        let mut bells = Vec::new();
        let components = blueprints
            .into_iter()
            .map(|b| {
                bells.push(b.common().bell.clone());
                let stop = stop.clone();
                std::thread::spawn(move || component_thread(Supervised::new(b, 0), epoch, &stop))
            })
            .collect();
        let apps = apps
            .into_iter()
            .map(|a| {
                bells.push(a.bell().clone());
                let (stop, done) = (stop.clone(), apps_done.clone());
                std::thread::spawn(move || app_thread(a, epoch, &stop, &done))
            })
            .collect();
        Threads { epoch, stop, apps_done, n_apps, bells, components, apps }
    }

    /// Waits until every application is done or `limit` passes; returns
    /// whether they all finished.
    pub fn wait_apps(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.apps_done.load(Ordering::Acquire) < self.n_apps {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Stops every thread and takes everything back.
    pub fn stop(mut self) -> ThreadRun {
        self.signal_stop();
        let wall_ns = crate::elapsed_ns(self.epoch);
        let components = std::mem::take(&mut self.components).into_iter().map(rejoin).collect();
        let apps = std::mem::take(&mut self.apps).into_iter().map(rejoin).collect();
        ThreadRun { components, apps, wall_ns }
    }

    fn signal_stop(&self) {
        self.stop.store(true, Ordering::Release);
        for b in &self.bells {
            b.ring();
        }
    }
}

impl Drop for Threads {
    /// A host dropped without [`Threads::stop`] (a failing test) still
    /// stops and joins its threads.
    fn drop(&mut self) {
        self.signal_stop();
        for h in self.components.drain(..) {
            let _ = h.join();
        }
        for h in self.apps.drain(..) {
            let _ = h.join();
        }
    }
}

/// Runs every component and application on its own thread until every
/// application is done or `limit` passes; returns whether they finished.
pub fn run_threads(
    blueprints: Vec<Arc<dyn Blueprint>>,
    apps: Vec<Box<dyn App>>,
    limit: Duration,
) -> (ThreadRun, bool) {
    let t = Threads::start(blueprints, apps);
    let finished = t.wait_apps(limit);
    (t.stop(), finished)
}

/// Joins a thread, re-raising its panic (a component whose constructor
/// panicked).
fn rejoin<T>(h: JoinHandle<T>) -> T {
    h.join().unwrap_or_else(|p| resume_unwind(p))
}

fn deadline_at(epoch: Instant, ns: Option<Nanos>) -> Option<Instant> {
    ns.map(|ns| epoch + Duration::from_nanos(ns))
}

fn component_thread(mut s: Supervised, epoch: Instant, stop: &AtomicBool) -> Supervised {
    let bell = s.component().bell().clone();
    let mut empty = 0;
    while !stop.load(Ordering::Acquire) {
        let t0 = Instant::now();
        let now = t0.duration_since(epoch).as_nanos() as Nanos;
        if s.poll(now).is_idle() {
            empty += 1;
        } else {
            s.load.busy_ns += crate::elapsed_ns(t0);
            empty = 0;
        }
        if empty >= PARK_AFTER_EMPTY_POLLS {
            empty = 0;
            s.load.parks += 1;
            let deadline = deadline_at(epoch, s.component().deadline_ns(now));
            let c = s.component();
            let _ = bell.waiter().wait_until(&SpinPolicy::PARK, deadline, || {
                (c.has_work() || stop.load(Ordering::Acquire)).then_some(())
            });
        }
    }
    s
}

fn app_thread(mut a: Box<dyn App>, epoch: Instant, stop: &AtomicBool, done: &AtomicUsize) -> Box<dyn App> {
    let bell = a.bell().clone();
    let mut empty = 0;
    while !stop.load(Ordering::Acquire) && !a.is_done() {
        if a.poll(crate::elapsed_ns(epoch)).is_idle() {
            empty += 1;
        } else {
            empty = 0;
        }
        if empty >= PARK_AFTER_EMPTY_POLLS {
            empty = 0;
            let app = &a;
            // Until work, or the application's own timer (a monolithic
            // stack's TCP timers, a connection retry).
            let deadline = deadline_at(epoch, app.deadline_ns());
            let _ = bell.waiter().wait_until(&SpinPolicy::PARK, deadline, || {
                (app.has_work() || stop.load(Ordering::Acquire)).then_some(())
            });
        }
    }
    done.fetch_add(1, Ordering::AcqRel);
    a
}
