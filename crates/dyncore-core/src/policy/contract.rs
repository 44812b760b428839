//! Checks a policy's traffic against the boundary's contract (the module doc
//! of [`crate::policy`] states it): what the backend promises about the
//! events, and what the policy guarantees about the actions.
//!
//! [`Checker::step`] takes one call — the time, the event, and the actions
//! the policy answered it with — and returns the first violation. Batch
//! invariants (a thread on at most one CPU) are checked at the end of each
//! call, because a call's `Dispatch`es come in CPU order and a thread moving
//! from CPU 5 to CPU 2 is on both for the length of one batch.
//!
//! With a speed oracle ([`Checker::with_speeds`]) the checker also knows
//! which duty each running CPU must have been set to.

use std::collections::BTreeSet;

use super::{Action, CpuState, Event, Policy, ThreadId};
use crate::exec::ExecObject;
use crate::speed::{Duty, SpeedClass, SpeedModel};
use crate::topology::Topology;
use crate::{CpuId, CpuSet, Nanos};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Life {
    Live,
    Exited,
}

/// Why a CPU is offline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Off {
    /// Borrowed into an object by a `Fuse`: its `Split` brings it back.
    Fused,
    /// Parked by a standalone `Offline`: a standalone `Online` brings it back.
    Parked,
}

#[derive(Debug, Clone)]
struct CpuView {
    state: CpuState,
    offline: Option<Off>,
    duty: Option<Duty>,
}

impl Default for CpuView {
    fn default() -> Self {
        CpuView { state: CpuState::Idle, offline: None, duty: None }
    }
}

/// The contract's state machine.
#[derive(Debug, Clone, Default)]
pub struct Checker {
    now: Nanos,
    threads: Vec<(Life, SpeedClass)>,
    cpus: Vec<CpuView>,
    /// Reconfiguration ids ever issued, and those not yet answered.
    issued: BTreeSet<u64>,
    outstanding: BTreeSet<u64>,
    speeds: Option<(SpeedModel, Topology)>,
    /// The machine's CPU count, when known (then the last online CPU is
    /// never taken offline).
    ncpus: Option<usize>,
}

impl Checker {
    pub fn new() -> Checker {
        Checker::default()
    }

    /// Also checks that every running CPU was set to `model`'s duty for its
    /// kind in `topology`, the object's size and the thread's class.
    pub fn with_speeds(model: SpeedModel, topology: Topology) -> Checker {
        let ncpus = Some(topology.ncpus());
        Checker { speeds: Some((model, topology)), ncpus, ..Checker::default() }
    }

    /// Also checks that a machine of `ncpus` CPUs always keeps one online.
    pub fn with_cpus(ncpus: usize) -> Checker {
        Checker { ncpus: Some(ncpus), ..Checker::default() }
    }

    fn cpu(&mut self, cpu: CpuId) -> &mut CpuView {
        if cpu >= self.cpus.len() {
            self.cpus.resize(cpu + 1, CpuView::default());
        }
        &mut self.cpus[cpu]
    }

    fn live(&self, t: ThreadId) -> Result<SpeedClass, String> {
        match self.threads.get(t) {
            Some(&(Life::Live, class)) => Ok(class),
            Some((Life::Exited, _)) => Err(format!("thread {t} has exited")),
            None => Err(format!("thread {t} was never spawned")),
        }
    }

    /// Checks one call: `event` at `now`, answered with `actions`.
    pub fn step(&mut self, now: Nanos, event: &Event, actions: &[Action]) -> Result<(), String> {
        self.event(now, event).map_err(|e| format!("at {now} ns, event {event:?}: {e}"))?;
        for (i, a) in actions.iter().enumerate() {
            // An Offline/Online right after a Fuse/Split is the object's;
            // any other is standalone (parking).
            let object = i.checked_sub(1).is_some_and(|p| {
                matches!(
                    (&actions[p], a),
                    (Action::Fuse { .. }, Action::Offline { .. })
                        | (Action::Split { .. }, Action::Online { .. })
                )
            });
            self.action(a, actions.get(i + 1), object)
                .map_err(|e| format!("at {now} ns, action {a:?}: {e}"))?;
        }
        self.batch().map_err(|e| format!("at {now} ns, after event {event:?}: {e}"))
    }

    fn event(&mut self, now: Nanos, event: &Event) -> Result<(), String> {
        if now < self.now {
            return Err(format!("time went back from {}", self.now));
        }
        self.now = now;
        match event {
            Event::Spawn { thread, spec } => {
                if *thread != self.threads.len() {
                    return Err(format!(
                        "thread ids are dense in spawn order: expected {}",
                        self.threads.len()
                    ));
                }
                self.threads.push((Life::Live, spec.class));
            }
            Event::Exit { thread } => {
                self.live(*thread)?;
                self.threads[*thread].0 = Life::Exited;
            }
            Event::ReconfigDone { id, .. } => {
                if !self.outstanding.remove(&id.0) {
                    return Err("answers no outstanding Offline/Online".into());
                }
            }
            Event::Load { busy_ns, window_ns, .. } => {
                if busy_ns > window_ns {
                    return Err(format!("a CPU busy {busy_ns} ns in a window of {window_ns} ns"));
                }
            }
            Event::StackLoad { sample } => {
                let frac = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
                for (k, c) in &sample.components {
                    if !frac(c.busy) || !frac(c.fill) {
                        return Err(format!("{k}: busy {} and fill {} must lie in 0..=1", c.busy, c.fill));
                    }
                }
                if !(sample.bits_per_s.is_finite() && sample.bits_per_s >= 0.0) {
                    return Err(format!("a bitrate of {} bit/s", sample.bits_per_s));
                }
            }
            Event::Tick { .. } | Event::StackControl { .. } => {}
        }
        Ok(())
    }

    fn object(&self, thread: ThreadId, object: &ExecObject) -> Result<(), String> {
        self.live(thread)?;
        object.check()
    }

    /// An `Offline` (`to` = why) or `Online` (`to` = `None`) of `cpus`;
    /// `why` says which path it is (the object's, or parking).
    fn reconfig(&mut self, id: u64, cpus: &CpuSet, to: Option<Off>, why: Off) -> Result<(), String> {
        if !self.issued.insert(id) {
            return Err(format!("reconfiguration id {id} reused"));
        }
        self.outstanding.insert(id);
        if cpus.is_empty() {
            return Err("names no CPU".into());
        }
        for c in cpus.iter() {
            let v = self.cpu(c);
            match (v.offline, to) {
                (None, None) => return Err(format!("CPU {c} is already online")),
                (Some(_), Some(_)) => return Err(format!("CPU {c} is already offline")),
                (Some(was), None) if was != why => {
                    return Err(format!(
                        "CPU {c} is {}: only {} brings it back online",
                        if was == Off::Fused { "borrowed into an object" } else { "parked" },
                        if was == Off::Fused { "its object's Split" } else { "a standalone Online" }
                    ));
                }
                _ => v.offline = to,
            }
        }
        if let Some(n) = self.ncpus
            && (0..n).all(|c| self.cpus.get(c).is_some_and(|v| v.offline.is_some()))
        {
            return Err("takes the last online CPU offline (one stays online to proxy for the others)".into());
        }
        Ok(())
    }

    fn action(&mut self, a: &Action, next: Option<&Action>, object: bool) -> Result<(), String> {
        match a {
            Action::Fuse { thread, object } => {
                self.object(*thread, object)?;
                match next {
                    Some(Action::Offline { cpus, .. }) if *cpus == object.borrowed => Ok(()),
                    _ => Err("not followed by the Offline of its borrowed CPUs".into()),
                }
            }
            Action::Split { object, .. } => {
                // A thread's exit splits its object: no liveness to check.
                object.check()?;
                match next {
                    Some(Action::Online { cpus, .. }) if *cpus == object.borrowed => Ok(()),
                    _ => Err("not followed by the Online of its borrowed CPUs".into()),
                }
            }
            Action::Offline { id, cpus, .. } => {
                let why = if object { Off::Fused } else { Off::Parked };
                self.reconfig(id.0, cpus, Some(why), why)
            }
            Action::Online { id, cpus, .. } => {
                self.reconfig(id.0, cpus, None, if object { Off::Fused } else { Off::Parked })
            }
            Action::Object { thread, object } => match object {
                Some(o) => self.object(*thread, o),
                None => self.live(*thread).map(|_| ()),
            },
            Action::Migrate { thread, .. } => self.live(*thread).map(|_| ()),
            Action::SetSpeed { cpu, duty } => {
                self.cpu(*cpu).duty = Some(*duty);
                Ok(())
            }
            Action::Dispatch { cpu, state } => self.dispatch(*cpu, *state),
            // A placement policy checks its own layout after every decision
            // (`PlacementPolicy::check`); nothing here tracks components.
            Action::Place { .. } => Ok(()),
        }
    }

    fn dispatch(&mut self, cpu: CpuId, state: CpuState) -> Result<(), String> {
        let v = self.cpu(cpu).clone();
        match state {
            CpuState::Borrowed { .. } if v.offline.is_none() => Err("a borrowed CPU must be offline".into()),
            CpuState::Borrowed { .. } if v.offline == Some(Off::Parked) => {
                Err("a parked CPU is borrowed by no object".into())
            }
            CpuState::Idle | CpuState::Running { .. } if v.offline.is_some() => {
                Err("an offline CPU runs nothing until it is back online".into())
            }
            CpuState::Running { thread, object_cpus } => {
                let class = self.live(thread)?;
                let Some(duty) = v.duty else {
                    return Err("a thread runs before the CPU's speed is set".into());
                };
                if let Some((model, topo)) = &self.speeds {
                    let want = model.duty(topo.kind(cpu), object_cpus, class);
                    if duty != want {
                        return Err(format!("runs at {duty}, the speed model says {want}"));
                    }
                }
                self.cpu(cpu).state = state;
                Ok(())
            }
            _ => {
                self.cpu(cpu).state = state;
                Ok(())
            }
        }
    }

    /// At the end of a call: every thread on at most one CPU, every
    /// borrowed CPU's borrower running, every parked CPU idle.
    fn batch(&self) -> Result<(), String> {
        let mut on: Vec<Option<CpuId>> = vec![None; self.threads.len()];
        for (cpu, v) in self.cpus.iter().enumerate() {
            if v.offline == Some(Off::Parked) && v.state != CpuState::Idle {
                return Err(format!("CPU {cpu} is parked but not idle ({:?})", v.state));
            }
            if let CpuState::Running { thread, .. } = v.state {
                if let Some(other) = on[thread] {
                    return Err(format!("thread {thread} runs on CPUs {other} and {cpu}"));
                }
                if self.threads[thread].0 == Life::Exited {
                    return Err(format!("CPU {cpu} still runs exited thread {thread}"));
                }
                on[thread] = Some(cpu);
            }
        }
        for (cpu, v) in self.cpus.iter().enumerate() {
            if let CpuState::Borrowed { by } = v.state
                && on.get(by).copied().flatten().is_none()
            {
                return Err(format!("CPU {cpu} is borrowed by thread {by}, which runs nowhere"));
            }
        }
        Ok(())
    }
}

/// Replays `events` through `policy`, checking every call with `checker`;
/// returns the first violation.
pub fn check_replay<'a>(
    events: impl IntoIterator<Item = &'a (Nanos, Event)>,
    policy: &mut impl Policy,
    checker: &mut Checker,
) -> Result<(), String> {
    let mut out = Vec::new();
    for (now, event) in events {
        out.clear();
        policy.handle(*now, event, &mut out);
        checker.step(*now, event, &out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{ReconfigId, ThreadSpec};
    use crate::reconfig::Mode;

    fn spawn(t: ThreadId) -> Event {
        let spec = ThreadSpec {
            nice: 0,
            tax: 1.0,
            want_cpus: 2,
            weight: 1.0,
            affinity: None,
            class: SpeedClass::High,
        };
        Event::Spawn { thread: t, spec }
    }

    fn running(thread: ThreadId, object_cpus: usize) -> CpuState {
        CpuState::Running { thread, object_cpus }
    }

    #[test]
    fn a_well_behaved_fuse_passes() {
        let mut c = Checker::with_speeds(SpeedModel::DYNAMIC, Topology::uniform(1, 2));
        let pair = ExecObject::new(&"0-1".parse().unwrap());
        let acts = [
            Action::Fuse { thread: 0, object: pair.clone() },
            Action::Offline { id: ReconfigId(1), cpus: CpuSet::single(1), mode: Mode::Bolt },
            Action::SetSpeed { cpu: 0, duty: Duty::new(750).unwrap() },
            Action::Dispatch { cpu: 0, state: running(0, 2) },
            Action::Dispatch { cpu: 1, state: CpuState::Borrowed { by: 0 } },
        ];
        c.step(0, &spawn(0), &acts).unwrap();
        c.step(5, &Event::ReconfigDone { id: ReconfigId(1), took_ns: 5 }, &[]).unwrap();
        // A second answer to the same id is the backend's fault.
        assert!(c.step(6, &Event::ReconfigDone { id: ReconfigId(1), took_ns: 5 }, &[]).is_err());
    }

    #[test]
    fn each_guarantee_can_fail() {
        let pair = ExecObject::new(&"0-1".parse().unwrap());
        let speed = Action::SetSpeed { cpu: 0, duty: Duty::BASELINE };
        let cases: Vec<(&str, Vec<Action>)> = vec![
            ("speed", vec![Action::Dispatch { cpu: 0, state: running(0, 1) }]),
            ("speed model", vec![speed.clone(), Action::Dispatch { cpu: 0, state: running(0, 2) }]),
            ("Offline", vec![Action::Fuse { thread: 0, object: pair.clone() }, speed.clone()]),
            ("offline", vec![Action::Dispatch { cpu: 1, state: CpuState::Borrowed { by: 0 } }]),
            (
                "runs on CPUs",
                vec![
                    speed.clone(),
                    Action::SetSpeed { cpu: 1, duty: Duty::BASELINE },
                    Action::Dispatch { cpu: 0, state: running(0, 1) },
                    Action::Dispatch { cpu: 1, state: running(0, 1) },
                ],
            ),
            (
                "runs nothing",
                vec![
                    Action::Offline { id: ReconfigId(1), cpus: CpuSet::single(1), mode: Mode::Bolt },
                    Action::Dispatch { cpu: 1, state: CpuState::Idle },
                ],
            ),
            (
                "reused",
                vec![
                    Action::Offline { id: ReconfigId(1), cpus: CpuSet::single(1), mode: Mode::Bolt },
                    Action::Online { id: ReconfigId(1), cpus: CpuSet::single(1), mode: Mode::Bolt },
                ],
            ),
        ];
        for (what, acts) in cases {
            let mut c = Checker::with_speeds(SpeedModel::DYNAMIC, Topology::uniform(1, 2));
            let e = c.step(0, &spawn(0), &acts).expect_err(what);
            assert!(e.contains(what), "{what}: {e}");
        }
        let mut c = Checker::new();
        c.step(10, &spawn(0), &[]).unwrap();
        assert!(c.step(9, &Event::Tick { cpu: 0 }, &[]).unwrap_err().contains("time went back"));
        assert!(c.step(10, &spawn(5), &[]).unwrap_err().contains("dense"));
        let load = Event::Load { cpu: 0, busy_ns: 11, window_ns: 10 };
        assert!(c.step(10, &load, &[]).unwrap_err().contains("window"));
    }

    fn offline(id: u64, cpus: &str) -> Action {
        Action::Offline { id: ReconfigId(id), cpus: cpus.parse().unwrap(), mode: Mode::Bolt }
    }

    fn online(id: u64, cpus: &str) -> Action {
        Action::Online { id: ReconfigId(id), cpus: cpus.parse().unwrap(), mode: Mode::Bolt }
    }

    #[test]
    fn parking_idle_cpus_and_bringing_them_back_passes() {
        let mut c = Checker::with_speeds(SpeedModel::DYNAMIC, Topology::uniform(1, 4));
        // CPUs 1-3 idle: parked in one bulk Offline (no Fuse before it).
        c.step(0, &Event::Tick { cpu: 0 }, &[offline(1, "1-3")]).unwrap();
        c.step(5, &Event::ReconfigDone { id: ReconfigId(1), took_ns: 5 }, &[]).unwrap();
        // A thread arrives: CPU 2 comes back and runs it in the same call
        // (the backend runs it once the online is done).
        let acts = [
            online(2, "2"),
            Action::SetSpeed { cpu: 2, duty: Duty::BASELINE },
            Action::Dispatch { cpu: 2, state: running(0, 1) },
        ];
        c.step(9, &spawn(0), &acts).unwrap();
        // A running CPU is parked once it was dispatched idle.
        let acts = [Action::Dispatch { cpu: 2, state: CpuState::Idle }, offline(3, "2")];
        c.step(12, &Event::Exit { thread: 0 }, &acts).unwrap();
    }

    #[test]
    fn each_parking_rule_can_fail() {
        let setup = || {
            let mut c = Checker::with_speeds(SpeedModel::DYNAMIC, Topology::uniform(1, 4));
            c.step(0, &spawn(0), &[offline(1, "3")]).unwrap();
            c
        };
        let speed = |cpu| Action::SetSpeed { cpu, duty: Duty::BASELINE };
        let pair = ExecObject::new(&"2-3".parse().unwrap());
        let cases: Vec<(&str, Vec<Action>)> = vec![
            (
                "parked but not idle",
                vec![speed(1), Action::Dispatch { cpu: 1, state: running(0, 1) }, offline(2, "1")],
            ),
            ("runs nothing", vec![Action::Dispatch { cpu: 3, state: CpuState::Idle }]),
            ("borrowed by no object", vec![Action::Dispatch { cpu: 3, state: CpuState::Borrowed { by: 0 } }]),
            ("already offline", vec![offline(2, "3")]),
            ("already online", vec![online(2, "1")]),
            ("last online CPU", vec![offline(2, "0-2")]),
            ("names no CPU", vec![offline(2, "")]),
            // A parked CPU comes back by a standalone Online, not a split.
            ("only a standalone Online", vec![Action::Split { thread: 0, object: pair }, online(2, "3")]),
        ];
        for (what, acts) in cases {
            let e = setup().step(1, &Event::Tick { cpu: 0 }, &acts).expect_err(what);
            assert!(e.contains(what), "{what}: {e}");
        }
        // A borrowed CPU comes back with its object's split, not standalone.
        let mut c = Checker::with_speeds(SpeedModel::DYNAMIC, Topology::uniform(1, 4));
        let pair = ExecObject::new(&"0-1".parse().unwrap());
        let fuse = [
            Action::Fuse { thread: 0, object: pair },
            offline(1, "1"),
            Action::SetSpeed { cpu: 0, duty: Duty::new(750).unwrap() },
            Action::Dispatch { cpu: 0, state: running(0, 2) },
            Action::Dispatch { cpu: 1, state: CpuState::Borrowed { by: 0 } },
        ];
        c.step(0, &spawn(0), &fuse).unwrap();
        let e = c.step(1, &Event::Tick { cpu: 0 }, &[online(2, "1")]).unwrap_err();
        assert!(e.contains("its object's Split"), "{e}");
    }
}
