//! The IP component: checksums and header checks, between TCP and the
//! packet filter.
//!
//! smoltcp builds and parses IP headers itself (its `Interface` is TCP's
//! front end), so what NewtOS's IP server does that smoltcp leaves to a
//! device is split out here: TCP's device declares IPv4 and TCP checksums
//! *offloaded* (`Checksum::None`, as the paper's driver offloaded them for
//! outgoing traffic), and this component
//!
//! * on send, fills the TCP checksum (over the pseudo-header and the whole
//!   segment) and the IPv4 header checksum;
//! * on receive, checks the header (length, version, no fragments, addressed
//!   to this stack, TCP) and verifies both checksums, dropping what fails,
//!   with a counter per reason.
//!
//! Its state is its configuration (its address): a restarted instance gets
//! it from its blueprint, an updated one from the old instance's
//! [`IpState`]. Both directions are transactional steps (see
//! [`crate::chan`]); filling checksums is idempotent, so a crash mid-fill is
//! repaired by doing it again.

use std::net::Ipv4Addr;

use dyncore_core::Nanos;
use smoltcp::wire::{IpAddress, IpProtocol, Ipv4Packet, TcpPacket};

use std::sync::Arc;

use dyncore_ring::journal::{Journal, WordRef};

use crate::chan::{Channel, Frame, Inbox, Log, Outbox};
use crate::component::{
    Blueprint, Common, Component, ComponentKind, CrashPoint, Progress, State, StateBody, Tally, UpdateError,
    journal_of, only_version,
};
use crate::pool::{Freer, PoolRef};

/// The IP component's ports: what outlives its instances.
#[derive(Clone)]
pub struct IpPorts {
    /// Outbound packets from TCP (transmit pool).
    pub from_tcp: Channel<Frame>,
    pub to_filter: Channel<Frame>,
    /// Inbound packets from the filter (receive pool).
    pub from_filter: Channel<Frame>,
    pub to_tcp: Channel<Frame>,
    /// The transmit pool and IP's freer in it (malformed outbound packets).
    pub tx: (PoolRef, usize),
    /// The receive pool and IP's freer in it (dropped inbound packets).
    pub rx: (PoolRef, usize),
    pub common: Common,
}

impl IpPorts {
    fn words(&self) -> Vec<WordRef> {
        let mut w = vec![
            self.from_tcp.tail_word(),
            self.to_filter.head_word(),
            self.from_filter.tail_word(),
            self.to_tcp.head_word(),
            self.tx.0.freer_word(self.tx.1),
            self.rx.0.freer_word(self.rx.1),
        ];
        w.extend(self.common.counters.words());
        w
    }
}

/// IP's state, for a live update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IpState {
    V1 { addr: Ipv4Addr },
}

/// IP's blueprint (see [`crate::component::Blueprint`]).
#[derive(Clone)]
pub struct IpBlueprint {
    ports: IpPorts,
    addr: Ipv4Addr,
    journal: Arc<Journal>,
}

impl IpBlueprint {
    pub fn new(ports: IpPorts, addr: Ipv4Addr) -> Self {
        let journal = journal_of(ports.words());
        IpBlueprint { ports, addr, journal }
    }

    fn attach(&self, addr: Ipv4Addr) -> Box<dyn Component> {
        let p = &self.ports;
        let log = Log::Journal(self.journal.clone());
        Box::new(Ip {
            from_tcp: p.from_tcp.inbox(&log),
            to_filter: p.to_filter.outbox(&log),
            from_filter: p.from_filter.inbox(&log),
            to_tcp: p.to_tcp.outbox(&log),
            tx_free: p.tx.0.freer(p.tx.1, &log),
            rx_free: p.rx.0.freer(p.rx.1, &log),
            tally: Tally::attach(&p.common.counters, &log),
            common: p.common.clone(),
            journal: self.journal.clone(),
            logic: Logic { addr },
        })
    }
}

impl Blueprint for IpBlueprint {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Ip
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
        self.attach(self.addr)
    }

    fn at_version(&self, version: u32) -> Result<Arc<dyn Blueprint>, UpdateError> {
        only_version(ComponentKind::Ip, version)?;
        Ok(Arc::new(self.clone()))
    }

    fn accepts(&self, state: &State) -> Result<(), UpdateError> {
        match state.body {
            StateBody::Ip(IpState::V1 { .. }) => Ok(()),
            _ => Err(UpdateError(format!("IP cannot start from {}'s state", state.kind))),
        }
    }

    fn build_from(&self, state: State, _now_ns: Nanos) -> Box<dyn Component> {
        let StateBody::Ip(IpState::V1 { addr }) = state.body else { unreachable!("checked by accepts") };
        self.attach(addr)
    }
}

/// Counter names, in index order.
pub const COUNTERS: &[&str] = &[
    "sent",
    "received",
    "malformed",
    "bad_ip_checksum",
    "bad_tcp_checksum",
    "not_for_us",
    "fragment",
    "not_tcp",
];
const SENT: usize = 0;
const RECEIVED: usize = 1;

/// Why an inbound (or outbound) packet was dropped: the counter index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Drop {
    Malformed = 2,
    BadIpChecksum = 3,
    BadTcpChecksum = 4,
    NotForUs = 5,
    Fragment = 6,
    NotTcp = 7,
}

/// What the IP component knows: its address. Rebuilt on restart.
struct Logic {
    addr: Ipv4Addr,
}

impl Logic {
    /// Checks an inbound packet; returns the TCP payload length.
    fn check_inbound(&self, pkt: &[u8]) -> Result<u64, Drop> {
        let ip = Ipv4Packet::new_checked(pkt).map_err(|_| Drop::Malformed)?;
        if ip.version() != 4 {
            return Err(Drop::Malformed);
        }
        if !ip.verify_checksum() {
            return Err(Drop::BadIpChecksum);
        }
        if ip.dst_addr() != self.addr {
            return Err(Drop::NotForUs);
        }
        if ip.more_frags() || ip.frag_offset() != 0 {
            return Err(Drop::Fragment);
        }
        if ip.next_header() != IpProtocol::Tcp {
            return Err(Drop::NotTcp);
        }
        let (src, dst) = (IpAddress::Ipv4(ip.src_addr()), IpAddress::Ipv4(ip.dst_addr()));
        let tcp = TcpPacket::new_checked(ip.payload()).map_err(|_| Drop::Malformed)?;
        if !tcp.verify_checksum(&src, &dst) {
            return Err(Drop::BadTcpChecksum);
        }
        Ok(tcp.payload().len() as u64)
    }

    /// Fills the checksums of an outbound packet; returns the TCP payload
    /// length. Idempotent.
    fn fill_outbound(&self, pkt: &mut [u8]) -> Result<u64, Drop> {
        let mut ip = Ipv4Packet::new_checked(pkt).map_err(|_| Drop::Malformed)?;
        if ip.src_addr() != self.addr {
            return Err(Drop::Malformed);
        }
        let (src, dst) = (IpAddress::Ipv4(ip.src_addr()), IpAddress::Ipv4(ip.dst_addr()));
        let mut payload = 0;
        if ip.next_header() == IpProtocol::Tcp {
            let mut tcp = TcpPacket::new_checked(ip.payload_mut()).map_err(|_| Drop::Malformed)?;
            tcp.fill_checksum(&src, &dst);
            payload = tcp.payload_mut().len() as u64;
        }
        ip.fill_checksum();
        Ok(payload)
    }
}

/// The IP component: one instance, attached to its ports.
pub struct Ip {
    from_tcp: Inbox<Frame>,
    to_filter: Outbox<Frame>,
    from_filter: Inbox<Frame>,
    to_tcp: Outbox<Frame>,
    tx_free: Freer,
    rx_free: Freer,
    tally: Tally,
    common: Common,
    journal: Arc<Journal>,
    logic: Logic,
}

impl Ip {
    /// One outbound packet, if any: fill checksums, pass to the filter.
    fn step_out(&mut self) -> Option<u64> {
        let f = self.from_tcp.peek()?;
        let pool = self.tx_free.pool().clone();
        let verdict = pool.with(f.buf, |b| {
            self.common.crash.check(ComponentKind::Ip, CrashPoint::Logic);
            self.logic.fill_outbound(&mut b[..f.len as usize])
        });
        match verdict {
            Ok(_) => {
                self.to_filter.push(f);
                self.tally.add(SENT, 1);
            }
            Err(why) => {
                self.tx_free.free(f.buf);
                self.tally.add(why as usize, 1);
            }
        }
        self.from_tcp.commit();
        Some(verdict.unwrap_or(0))
    }

    /// One inbound packet, if any: verify, pass to TCP or drop.
    fn step_in(&mut self) -> Option<u64> {
        let f = self.from_filter.peek()?;
        let pool = self.rx_free.pool().clone();
        let verdict = pool.with(f.buf, |b| {
            self.common.crash.check(ComponentKind::Ip, CrashPoint::Logic);
            self.logic.check_inbound(&b[..f.len as usize])
        });
        match verdict {
            Ok(_) => {
                self.to_tcp.push(f);
                self.tally.add(RECEIVED, 1);
            }
            Err(why) => {
                self.rx_free.free(f.buf);
                self.tally.add(why as usize, 1);
            }
        }
        self.from_filter.commit();
        Some(verdict.unwrap_or(0))
    }
}

impl Component for Ip {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Ip
    }

    fn poll(&mut self, _now_ns: Nanos) -> Progress {
        let mut p = Progress::IDLE;
        while let Some(bytes) = self.step_out() {
            p.add(1, bytes);
        }
        while let Some(bytes) = self.step_in() {
            p.add(1, bytes);
        }
        self.from_tcp.release();
        self.from_filter.release();
        self.common.commit(ComponentKind::Ip, &self.journal);
        p
    }

    fn has_work(&self) -> bool {
        self.from_tcp.has_work() || self.from_filter.has_work()
    }

    fn inbound_fill(&self) -> f64 {
        self.from_tcp.fill().max(self.from_filter.fill())
    }

    fn outbound_fill(&self) -> Vec<(ComponentKind, f64)> {
        vec![(ComponentKind::Filter, self.to_filter.fill()), (ComponentKind::Tcp, self.to_tcp.fill())]
    }

    fn export(&self) -> Result<State, UpdateError> {
        Ok(State {
            kind: ComponentKind::Ip,
            version: 1,
            body: StateBody::Ip(IpState::V1 { addr: self.logic.addr }),
        })
    }

    fn common(&self) -> &Common {
        &self.common
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use smoltcp::wire::{Ipv4Repr, TcpControl, TcpRepr, TcpSeqNumber};

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// A TCP segment from A to B with `payload`, checksums left zero.
    fn segment(payload: &[u8]) -> Vec<u8> {
        let tcp = TcpRepr {
            src_port: 1000,
            dst_port: 2000,
            control: TcpControl::Psh,
            seq_number: TcpSeqNumber(7),
            ack_number: None,
            window_len: 100,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload,
        };
        let ip = Ipv4Repr {
            src_addr: A,
            dst_addr: B,
            next_header: IpProtocol::Tcp,
            payload_len: tcp.buffer_len(),
            hop_limit: 64,
        };
        let mut buf = vec![0; ip.buffer_len() + tcp.buffer_len()];
        let caps = smoltcp::phy::ChecksumCapabilities::ignored();
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        ip.emit(&mut p, &caps);
        let mut t = TcpPacket::new_unchecked(p.payload_mut());
        tcp.emit(&mut t, &A.into(), &B.into(), &caps);
        buf
    }

    #[test]
    fn checksums_filled_on_send_verify_on_receive() {
        let sender = Logic { addr: A };
        let receiver = Logic { addr: B };
        let mut pkt = segment(b"hello");
        assert_eq!(receiver.check_inbound(&pkt), Err(Drop::BadIpChecksum), "zero checksums must not pass");
        assert_eq!(sender.fill_outbound(&mut pkt), Ok(5));
        assert_eq!(receiver.check_inbound(&pkt), Ok(5));
        // Idempotent: filling again changes nothing.
        let before = pkt.clone();
        sender.fill_outbound(&mut pkt).unwrap();
        assert_eq!(pkt, before);
    }

    #[test]
    fn damage_is_caught_by_the_right_checksum() {
        let sender = Logic { addr: A };
        let receiver = Logic { addr: B };
        let mut pkt = segment(b"payload bytes");
        sender.fill_outbound(&mut pkt).unwrap();
        let mut payload_hit = pkt.clone();
        let last = payload_hit.len() - 1;
        payload_hit[last] ^= 0x10;
        assert_eq!(receiver.check_inbound(&payload_hit), Err(Drop::BadTcpChecksum));
        let mut header_hit = pkt.clone();
        header_hit[8] ^= 1; // TTL
        assert_eq!(receiver.check_inbound(&header_hit), Err(Drop::BadIpChecksum));
        assert_eq!(Logic { addr: A }.check_inbound(&pkt), Err(Drop::NotForUs));
        assert_eq!(receiver.check_inbound(&pkt[..10]), Err(Drop::Malformed));
    }
}
