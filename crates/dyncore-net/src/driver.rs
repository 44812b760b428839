//! The driver: moves frames between the filter and the wire.
//!
//! Outbound, it copies a frame from its transmit buffer onto the wire and
//! frees the buffer; when the wire is full it keeps the frame in its inbox
//! (uncommitted) and tries again next poll. Inbound, it takes a buffer from
//! the receive pool, lets the wire fill it, and passes it to the filter;
//! with no free buffer it leaves frames on the wire (the stack is pushing
//! back).
//!
//! Its state is nothing beyond its ports: the wire's end is one of them,
//! so a restarted driver attaches a new port to the same wire. On the
//! in-memory wire the wire's rings and pools are committed in the driver's
//! journal with the rest of its poll; a device's reads and writes cannot be
//! (see [`crate::wire::tun::TunEnd`]).

use std::sync::Arc;

use dyncore_core::Nanos;
use dyncore_ring::journal::{Journal, WordRef};

use crate::chan::{Channel, Frame, Inbox, Log, Outbox};
use crate::component::{
    Blueprint, Common, Component, ComponentKind, CrashPoint, Progress, State, StateBody, Tally, UpdateError,
    journal_of, only_version,
};
use crate::pool::{Alloc, Freer, PoolRef};
use crate::wire::{Wire, WirePort};

/// The driver's ports: what outlives its instances.
#[derive(Clone)]
pub struct DriverPorts {
    /// Outbound frames from the filter (transmit pool).
    pub from_filter: Channel<Frame>,
    pub tx: (PoolRef, usize),
    /// Inbound frames to the filter (receive pool, allocated here).
    pub to_filter: Channel<Frame>,
    pub rx: PoolRef,
    pub wire: Arc<dyn Wire>,
    /// Its bell is the wire's (arrivals ring it).
    pub common: Common,
}

impl DriverPorts {
    fn words(&self) -> Vec<WordRef> {
        let mut w =
            vec![self.from_filter.tail_word(), self.tx.0.freer_word(self.tx.1), self.to_filter.head_word()];
        w.extend(self.rx.alloc_words());
        w.extend(self.wire.words());
        w.extend(self.common.counters.words());
        w
    }
}

/// The driver's blueprint (see [`crate::component::Blueprint`]).
#[derive(Clone)]
pub struct DriverBlueprint {
    ports: DriverPorts,
    journal: Arc<Journal>,
}

impl DriverBlueprint {
    pub fn new(ports: DriverPorts) -> Self {
        let journal = journal_of(ports.words());
        DriverBlueprint { ports, journal }
    }
}

impl Blueprint for DriverBlueprint {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Driver
    }

    fn version(&self) -> u32 {
        1
    }

    fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    fn common(&self) -> &Common {
        &self.ports.common
    }

    fn build(&self, _now_ns: Nanos) -> Box<dyn Component> {
        let p = &self.ports;
        let log = Log::Journal(self.journal.clone());
        Box::new(Driver {
            from_filter: p.from_filter.inbox(&log),
            tx_free: p.tx.0.freer(p.tx.1, &log),
            to_filter: p.to_filter.outbox(&log),
            rx_alloc: p.rx.alloc(&log),
            wire: p.wire.attach(&log),
            tally: Tally::attach(&p.common.counters, &log),
            common: p.common.clone(),
            journal: self.journal.clone(),
        })
    }

    fn at_version(&self, version: u32) -> Result<Arc<dyn Blueprint>, UpdateError> {
        only_version(ComponentKind::Driver, version)?;
        Ok(Arc::new(self.clone()))
    }

    fn accepts(&self, state: &State) -> Result<(), UpdateError> {
        match (state.kind, &state.body) {
            (ComponentKind::Driver, StateBody::Ports) => Ok(()),
            _ => Err(UpdateError(format!("the driver cannot start from {}'s state", state.kind))),
        }
    }

    fn build_from(&self, _state: State, now_ns: Nanos) -> Box<dyn Component> {
        self.build(now_ns)
    }

    fn buffers_out(&self) -> usize {
        self.ports.rx.outstanding()
    }
}

pub const COUNTERS: &[&str] = &["sent", "received", "oversize", "wire_full", "no_rx_buffer"];
const SENT: usize = 0;
const RECEIVED: usize = 1;
const OVERSIZE: usize = 2;
const WIRE_FULL: usize = 3;
const NO_RX_BUFFER: usize = 4;

/// The driver component: one instance, attached to its ports.
pub struct Driver {
    from_filter: Inbox<Frame>,
    tx_free: Freer,
    to_filter: Outbox<Frame>,
    rx_alloc: Alloc,
    wire: Box<dyn WirePort>,
    tally: Tally,
    common: Common,
    journal: Arc<Journal>,
}

/// What happened to one outbound frame.
enum Out {
    Sent(u64),
    Oversize,
    WireFull,
}

impl Driver {
    /// One outbound frame, if any and if the wire takes it.
    fn step_out(&mut self) -> Option<Out> {
        let p = self;
        let f = p.from_filter.peek()?;
        let mtu = p.wire.mtu();
        let out = p.tx_free.pool().clone().with(f.buf, |b| {
            p.common.crash.check(ComponentKind::Driver, CrashPoint::Logic);
            let frame = &b[..f.len as usize];
            if frame.len() > mtu {
                Out::Oversize
            } else if p.wire.send(frame).is_err() {
                Out::WireFull
            } else {
                Out::Sent(f.len.into())
            }
        });
        match out {
            Out::WireFull => {
                p.tally.add(WIRE_FULL, 1);
                return Some(out);
            }
            Out::Oversize => p.tally.add(OVERSIZE, 1),
            Out::Sent(_) => p.tally.add(SENT, 1),
        }
        p.tx_free.free(f.buf);
        p.from_filter.commit();
        Some(out)
    }

    /// One inbound frame, if the wire has one and a buffer is free.
    fn step_in(&mut self) -> Option<u64> {
        let p = self;
        if !p.wire.has_work() && p.wire.park_limit_ns().is_none() {
            return None;
        }
        let Some(buf) = p.rx_alloc.peek() else {
            p.tally.add(NO_RX_BUFFER, 1);
            return None;
        };
        let pool = p.rx_alloc.pool().clone();
        // The buffer is taken only if a frame came into it.
        let len = pool.with(buf, |b| if p.wire.recv(b) { Some(b.len()) } else { None })?;
        p.rx_alloc.take();
        p.to_filter.push(Frame { buf, len: len as u32 });
        p.tally.add(RECEIVED, 1);
        Some(len as u64)
    }
}

impl Component for Driver {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Driver
    }

    fn poll(&mut self, _now_ns: Nanos) -> Progress {
        let mut p = Progress::IDLE;
        while let Some(out) = self.step_out() {
            match out {
                Out::Sent(bytes) => p.add(1, bytes),
                Out::Oversize => p.add(1, 0),
                Out::WireFull => break,
            }
        }
        // At most a batch in, like any inbox.
        for _ in 0..crate::chan::BATCH {
            match self.step_in() {
                Some(bytes) => p.add(1, bytes),
                None => break,
            }
        }
        self.from_filter.release();
        self.rx_alloc.release();
        self.wire.flush();
        self.common.commit(ComponentKind::Driver, &self.journal);
        p
    }

    fn has_work(&self) -> bool {
        // Inbound frames count only if there is a buffer to take them; a
        // driver waiting for buffers is woken by the returns (its bell).
        self.from_filter.has_work() || self.wire.has_work() || self.rx_alloc.refill_waiting()
    }

    fn deadline_ns(&self, now_ns: Nanos) -> Option<Nanos> {
        self.wire.park_limit_ns().map(|l| now_ns + l)
    }

    fn inbound_fill(&self) -> f64 {
        self.from_filter.fill()
    }

    fn outbound_fill(&self) -> Vec<(ComponentKind, f64)> {
        vec![(ComponentKind::Filter, self.to_filter.fill())]
    }

    fn export(&self) -> Result<State, UpdateError> {
        Ok(State { kind: ComponentKind::Driver, version: 1, body: StateBody::Ports })
    }

    fn common(&self) -> &Common {
        &self.common
    }
}
