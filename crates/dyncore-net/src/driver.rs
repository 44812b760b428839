//! The driver: moves frames between the filter and the wire.
//!
//! Outbound, it copies a frame from its transmit buffer onto the wire and
//! frees the buffer; when the wire is full it keeps the frame in its inbox
//! (uncommitted) and tries again next poll. Inbound, it takes a buffer from
//! the receive pool, lets the wire fill it, and passes it to the filter;
//! with no free buffer it leaves frames on the wire (the stack is pushing
//! back).
//!
//! Its state is nothing beyond its ports: the wire port is one of them, so
//! a restarted driver is attached to the same wire.

use dyncore_core::Nanos;

use crate::chan::{Frame, Inbox, Outbox};
use crate::component::{Common, Component, ComponentKind, NotRestartable, Progress};
use crate::pool::{Alloc, Freer};
use crate::wire::WirePort;

/// The driver's channels, pools and wire.
pub struct DriverPorts {
    /// Outbound frames from the filter (transmit pool).
    pub from_filter: Inbox<Frame>,
    pub tx_free: Freer,
    /// Inbound frames to the filter (receive pool, allocated here).
    pub to_filter: Outbox<Frame>,
    pub rx_alloc: Alloc,
    pub wire: Box<dyn WirePort>,
    /// Its bell is the wire's (arrivals ring it).
    pub common: Common,
}

pub const COUNTERS: &[&str] = &["sent", "received", "oversize", "wire_full", "no_rx_buffer"];
const SENT: usize = 0;
const RECEIVED: usize = 1;
const OVERSIZE: usize = 2;
const WIRE_FULL: usize = 3;
const NO_RX_BUFFER: usize = 4;

/// The driver component.
pub struct Driver {
    ports: DriverPorts,
}

/// What happened to one outbound frame.
enum Out {
    Sent(u64),
    Oversize,
    WireFull,
}

impl Driver {
    pub fn new(ports: DriverPorts) -> Self {
        Driver { ports }
    }

    /// One outbound frame, if any and if the wire takes it.
    fn step_out(&mut self) -> Option<Out> {
        let p = &mut self.ports;
        let f = p.from_filter.peek()?;
        let mtu = p.wire.mtu();
        let out = p.tx_free.pool().clone().with(f.buf, |b| {
            p.common.crash.check(ComponentKind::Driver);
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
                p.common.counters.add(WIRE_FULL, 1);
                return Some(out);
            }
            Out::Oversize => p.common.counters.add(OVERSIZE, 1),
            Out::Sent(_) => p.common.counters.add(SENT, 1),
        }
        p.tx_free.free(f.buf);
        p.from_filter.commit();
        Some(out)
    }

    /// One inbound frame, if the wire has one and a buffer is free.
    fn step_in(&mut self) -> Option<u64> {
        let p = &mut self.ports;
        if !p.wire.has_work() && p.wire.park_limit_ns().is_none() {
            return None;
        }
        let Some(buf) = p.rx_alloc.alloc() else {
            p.common.counters.add(NO_RX_BUFFER, 1);
            return None;
        };
        let pool = p.rx_alloc.pool().clone();
        let len = pool.with(buf, |b| if p.wire.recv(b) { Some(b.len()) } else { None });
        let Some(len) = len else {
            p.rx_alloc.unalloc(buf);
            return None;
        };
        p.to_filter.push(Frame { buf, len: len as u32 });
        p.common.counters.add(RECEIVED, 1);
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
        let ports = &mut self.ports;
        ports.from_filter.release();
        ports.tx_free.flush();
        ports.to_filter.publish();
        ports.wire.flush();
        p
    }

    fn has_work(&self) -> bool {
        // Inbound frames count only if there is a buffer to take them; a
        // driver waiting for buffers is woken by the returns (its bell).
        self.ports.from_filter.has_work()
            || self.ports.wire.has_work()
            || self.ports.rx_alloc.refill_waiting()
    }

    fn deadline_ns(&self, now_ns: Nanos) -> Option<Nanos> {
        self.ports.wire.park_limit_ns().map(|l| now_ns + l)
    }

    fn inbound_fill(&self) -> f64 {
        self.ports.from_filter.fill()
    }

    fn outbound_fill(&self) -> Vec<(ComponentKind, f64)> {
        vec![(ComponentKind::Filter, self.ports.to_filter.fill())]
    }

    fn buffers_out(&mut self) -> usize {
        self.ports.rx_alloc.outstanding()
    }

    fn restart(&mut self) -> Result<(), NotRestartable> {
        // No state of its own: the new instance is its ports.
        Ok(())
    }

    fn common(&self) -> &Common {
        &self.ports.common
    }
}
