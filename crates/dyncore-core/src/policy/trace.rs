//! Recording and replaying a policy's traffic: the first conformance test.
//!
//! A backend records every event it feeds a policy and every action it gets
//! back ([`Recorder`], or [`TraceWriter`] where the backend calls the policy
//! itself). Replaying the event trace through a fresh policy with no
//! backend ([`replay`]) must give the same action trace, byte for byte: the
//! proof that the policy's decisions depend on the events alone, so the
//! same policy code drives the simulator and the live runtime.
//!
//! ## Format
//! JSON lines, one per event or action, in the order they happened; the
//! time is in nanoseconds (virtual in the simulator, monotonic live):
//!
//! ```text
//! {"t":4000000,"event":{"kind":"tick","cpu":3}}
//! {"t":4000000,"action":{"kind":"dispatch","cpu":3,"state":{"state":"running","thread":7,"object_cpus":2}}}
//! ```
//!
//! Serialisation is serde_json's: integers exactly, floats in the shortest
//! form that reads back to the same bits (the crate enables
//! `float_roundtrip`), CPU sets as cpulists. Equal values give equal bytes.
//!
//! [`decision_kinds`] reduces an action trace to its sequence of decisions
//! (fuse, split, migrate, ...), which the second conformance test compares
//! between the simulator and the live runtime.

use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use super::{Action, Event, Policy};
use crate::{Nanos, placement};

#[derive(Serialize)]
struct EventOut<'a> {
    t: Nanos,
    event: &'a Event,
}

#[derive(Deserialize)]
struct EventIn {
    t: Nanos,
    event: Event,
}

#[derive(Serialize)]
struct ActionOut<'a> {
    t: Nanos,
    action: &'a Action,
}

#[derive(Deserialize)]
struct ActionIn {
    t: Nanos,
    action: Action,
}

/// Writes the event and action traces as JSON lines. Write errors are kept
/// (the first one) and returned by [`TraceWriter::finish`], so recording
/// never disturbs the policy it records.
#[derive(Debug)]
pub struct TraceWriter<E: Write, A: Write> {
    events: E,
    actions: A,
    error: Option<io::Error>,
}

impl<E: Write, A: Write> TraceWriter<E, A> {
    pub fn new(events: E, actions: A) -> TraceWriter<E, A> {
        TraceWriter { events, actions, error: None }
    }

    /// Records one event at `now` and the actions the policy answered it with.
    pub fn record(&mut self, now: Nanos, event: &Event, actions: &[Action]) {
        if self.error.is_some() {
            return;
        }
        let mut r = write_line(&mut self.events, &EventOut { t: now, event });
        for action in actions {
            r = r.and_then(|()| write_line(&mut self.actions, &ActionOut { t: now, action }));
        }
        if let Err(e) = r {
            self.error = Some(e);
        }
    }

    /// The two sinks (events, actions), or the first write error.
    pub fn finish(mut self) -> io::Result<(E, A)> {
        match self.error.take() {
            Some(e) => Err(e),
            None => {
                self.events.flush()?;
                self.actions.flush()?;
                Ok((self.events, self.actions))
            }
        }
    }
}

fn write_line<W: Write, T: Serialize>(w: &mut W, value: &T) -> io::Result<()> {
    serde_json::to_writer(&mut *w, value).map_err(io::Error::other)?;
    w.write_all(b"\n")
}

/// Wraps any policy and records its traffic.
#[derive(Debug)]
pub struct Recorder<P, E: Write, A: Write> {
    policy: P,
    trace: TraceWriter<E, A>,
}

impl<P: Policy, E: Write, A: Write> Recorder<P, E, A> {
    pub fn new(policy: P, events: E, actions: A) -> Recorder<P, E, A> {
        Recorder { policy, trace: TraceWriter::new(events, actions) }
    }

    /// The policy, and the two trace sinks or the first write error.
    pub fn into_parts(self) -> (P, io::Result<(E, A)>) {
        (self.policy, self.trace.finish())
    }
}

impl<P: Policy, E: Write, A: Write> Policy for Recorder<P, E, A> {
    fn handle(&mut self, now: Nanos, event: &Event, out: &mut Vec<Action>) {
        let start = out.len();
        self.policy.handle(now, event, out);
        self.trace.record(now, event, &out[start..]);
    }
}

/// A trace line that does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    /// 1-based line number.
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for TraceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "trace line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for TraceError {}

fn parse<T: for<'de> Deserialize<'de>>(text: &str) -> Result<Vec<T>, TraceError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| TraceError { line: i + 1, message: e.to_string() }))
        .collect()
}

/// Reads an event trace.
pub fn parse_events(text: &str) -> Result<Vec<(Nanos, Event)>, TraceError> {
    Ok(parse::<EventIn>(text)?.into_iter().map(|e| (e.t, e.event)).collect())
}

/// Reads an action trace.
pub fn parse_actions(text: &str) -> Result<Vec<(Nanos, Action)>, TraceError> {
    Ok(parse::<ActionIn>(text)?.into_iter().map(|a| (a.t, a.action)).collect())
}

/// Feeds `events` to `policy` with no backend; returns the action trace in
/// the recording format.
pub fn replay<'a>(events: impl IntoIterator<Item = &'a (Nanos, Event)>, policy: &mut impl Policy) -> String {
    let mut trace = TraceWriter::new(io::sink(), Vec::new());
    let mut out = Vec::new();
    for (now, event) in events {
        out.clear();
        policy.handle(*now, event, &mut out);
        trace.record(*now, event, &out);
    }
    let (_, actions) = trace.finish().expect("writing to memory does not fail");
    String::from_utf8(actions).expect("serde_json writes UTF-8")
}

/// A kind of decision, for comparing what two backends made a policy do
/// without comparing when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    Fuse,
    Split,
    Offline,
    Online,
    Migrate,
    Object,
    /// Placement (NewtOS): a CPU given to one component.
    Dedicate,
    /// Placement: components gathered on one CPU.
    Consolidate,
    /// Placement: one component moved to another CPU.
    MoveComponent,
    /// Placement: a CPU's speed step set.
    SetStep,
}

/// The decisions of an action trace, in order: every action but `Dispatch`
/// and `SetSpeed`, which follow from them and from timing. A placement
/// decision counts as its own kind.
pub fn decision_kinds<'a>(actions: impl IntoIterator<Item = &'a Action>) -> Vec<DecisionKind> {
    actions
        .into_iter()
        .filter_map(|a| match a {
            Action::Fuse { .. } => Some(DecisionKind::Fuse),
            Action::Split { .. } => Some(DecisionKind::Split),
            Action::Offline { .. } => Some(DecisionKind::Offline),
            Action::Online { .. } => Some(DecisionKind::Online),
            Action::Migrate { .. } => Some(DecisionKind::Migrate),
            Action::Object { .. } => Some(DecisionKind::Object),
            Action::Place { decision } => Some(match decision.action {
                placement::Action::Dedicate { .. } => DecisionKind::Dedicate,
                placement::Action::Consolidate { .. } => DecisionKind::Consolidate,
                placement::Action::Migrate { .. } => DecisionKind::MoveComponent,
                placement::Action::SetSpeed { .. } => DecisionKind::SetStep,
            }),
            Action::Dispatch { .. } | Action::SetSpeed { .. } => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{CpuState, ReconfigId, ThreadSpec};
    use crate::reconfig::Mode;
    use crate::sched::{ClusterScheduler, Config};
    use crate::speed::{SpeedClass, SpeedModel};
    use crate::topology::Topology;

    const MS: Nanos = 1_000_000;

    fn chameleon() -> ClusterScheduler {
        ClusterScheduler::new(
            Topology::uniform(1, 4),
            Config {
                min_granularity_ns: 16 * MS,
                chameleon: true,
                notify_on_exit: true,
                max_fuse: 4,
                speed: SpeedModel::DYNAMIC,
                reconfig_mode: Mode::Bolt,
            },
        )
    }

    fn spec(want_cpus: usize, tax: f64) -> ThreadSpec {
        ThreadSpec { nice: 0, tax, want_cpus, weight: 1.75, affinity: None, class: SpeedClass::Medium }
    }

    /// A small backend: spawns, ticks, answers reconfigurations at once, exits.
    fn drive(policy: &mut impl Policy) {
        let mut out = Vec::new();
        let mut now = 0;
        policy.handle(now, &Event::Spawn { thread: 0, spec: spec(4, 0.1) }, &mut out);
        policy.handle(now, &Event::Spawn { thread: 1, spec: spec(1, 1.0) }, &mut out);
        for _ in 0..20 {
            now += 4 * MS;
            let answered: Vec<ReconfigId> = out
                .drain(..)
                .filter_map(|a| match a {
                    Action::Offline { id, .. } | Action::Online { id, .. } => Some(id),
                    _ => None,
                })
                .collect();
            for id in answered {
                policy.handle(now, &Event::ReconfigDone { id, took_ns: 1_000 }, &mut out);
            }
            for cpu in 0..4 {
                policy.handle(now, &Event::Tick { cpu }, &mut out);
            }
        }
        policy.handle(now, &Event::Exit { thread: 0 }, &mut out);
    }

    #[test]
    fn replaying_a_recording_gives_the_same_actions_byte_for_byte() {
        let mut rec = Recorder::new(chameleon(), Vec::new(), Vec::new());
        drive(&mut rec);
        let (_, sinks) = rec.into_parts();
        let (events, actions) = sinks.unwrap();
        let (events, actions) = (String::from_utf8(events).unwrap(), String::from_utf8(actions).unwrap());
        assert!(actions.contains(r#""kind":"fuse""#), "{actions}");
        let parsed = parse_events(&events).unwrap();
        assert_eq!(replay(&parsed, &mut chameleon()), actions);
        // The trace reads back to the same values.
        let back = parse_actions(&actions).unwrap();
        assert!(
            back.iter().any(|(_, a)| matches!(a, Action::Dispatch { state: CpuState::Running { .. }, .. }))
        );
    }

    #[test]
    fn a_different_event_gives_a_different_trace() {
        // The comparison can fail: replaying with thread 0's tax changed
        // changes the actions.
        let mut rec = Recorder::new(chameleon(), Vec::new(), Vec::new());
        drive(&mut rec);
        let (events, actions) = rec.into_parts().1.unwrap();
        let mut parsed = parse_events(std::str::from_utf8(&events).unwrap()).unwrap();
        let Event::Spawn { spec, .. } = &mut parsed[0].1 else { panic!("first event is a spawn") };
        spec.want_cpus = 2;
        assert_ne!(replay(&parsed, &mut chameleon()).as_bytes(), &actions[..]);
    }

    #[test]
    fn decision_kinds_keep_decisions_in_order() {
        let mut rec = Recorder::new(chameleon(), Vec::new(), Vec::new());
        drive(&mut rec);
        let actions = parse_actions(std::str::from_utf8(&rec.into_parts().1.unwrap().1).unwrap()).unwrap();
        let kinds = decision_kinds(actions.iter().map(|(_, a)| a));
        // The quad's object is assigned, then fused (Fuse, Offline) and, at
        // the exit, split (Split, Online).
        assert_eq!(kinds.first(), Some(&DecisionKind::Object));
        let fuse = kinds.iter().position(|k| *k == DecisionKind::Fuse).unwrap();
        assert_eq!(kinds[fuse + 1], DecisionKind::Offline);
        assert_eq!(&kinds[kinds.len() - 2..], [DecisionKind::Split, DecisionKind::Online]);
    }

    #[test]
    fn a_bad_line_is_named() {
        let e = parse_events("{\"t\":1,\"event\":{\"kind\":\"tick\",\"cpu\":0}}\nnot json\n").unwrap_err();
        assert_eq!(e.line, 2);
    }
}
