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
//! Its state is its configuration (its address), rebuilt on restart. Both
//! directions are transactional steps (see [`crate::chan`]); filling
//! checksums is idempotent, so a crash mid-fill is repaired by doing it again.

use std::net::Ipv4Addr;

use dyncore_core::Nanos;
use smoltcp::wire::{IpAddress, IpProtocol, Ipv4Packet, TcpPacket};

use crate::chan::{Frame, Inbox, Outbox};
use crate::component::{Common, Component, ComponentKind, NotRestartable, Progress};
use crate::pool::Freer;

/// The IP component's channels and pools.
pub struct IpPorts {
    /// Outbound packets from TCP (transmit pool).
    pub from_tcp: Inbox<Frame>,
    pub to_filter: Outbox<Frame>,
    /// Inbound packets from the filter (receive pool).
    pub from_filter: Inbox<Frame>,
    pub to_tcp: Outbox<Frame>,
    /// Frees transmit buffers (malformed outbound packets).
    pub tx_free: Freer,
    /// Frees receive buffers (dropped inbound packets).
    pub rx_free: Freer,
    pub common: Common,
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

/// The IP component.
pub struct Ip {
    ports: IpPorts,
    addr: Ipv4Addr,
    logic: Logic,
}

impl Ip {
    pub fn new(ports: IpPorts, addr: Ipv4Addr) -> Self {
        Ip { ports, addr, logic: Logic { addr } }
    }

    /// One outbound packet, if any: fill checksums, pass to the filter.
    fn step_out(&mut self) -> Option<u64> {
        let f = self.ports.from_tcp.peek()?;
        let pool = self.ports.tx_free.pool().clone();
        let verdict = pool.with(f.buf, |b| {
            self.ports.common.crash.check(ComponentKind::Ip);
            self.logic.fill_outbound(&mut b[..f.len as usize])
        });
        match verdict {
            Ok(_) => {
                self.ports.to_filter.push(f);
                self.ports.common.counters.add(SENT, 1);
            }
            Err(why) => {
                self.ports.tx_free.free(f.buf);
                self.ports.common.counters.add(why as usize, 1);
            }
        }
        self.ports.from_tcp.commit();
        Some(verdict.unwrap_or(0))
    }

    /// One inbound packet, if any: verify, pass to TCP or drop.
    fn step_in(&mut self) -> Option<u64> {
        let f = self.ports.from_filter.peek()?;
        let pool = self.ports.rx_free.pool().clone();
        let verdict = pool.with(f.buf, |b| {
            self.ports.common.crash.check(ComponentKind::Ip);
            self.logic.check_inbound(&b[..f.len as usize])
        });
        match verdict {
            Ok(_) => {
                self.ports.to_tcp.push(f);
                self.ports.common.counters.add(RECEIVED, 1);
            }
            Err(why) => {
                self.ports.rx_free.free(f.buf);
                self.ports.common.counters.add(why as usize, 1);
            }
        }
        self.ports.from_filter.commit();
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
        let ports = &mut self.ports;
        ports.from_tcp.release();
        ports.from_filter.release();
        ports.to_filter.publish();
        ports.to_tcp.publish();
        ports.tx_free.flush();
        ports.rx_free.flush();
        p
    }

    fn has_work(&self) -> bool {
        self.ports.from_tcp.has_work() || self.ports.from_filter.has_work()
    }

    fn inbound_fill(&self) -> f64 {
        self.ports.from_tcp.fill().max(self.ports.from_filter.fill())
    }

    fn outbound_fill(&self) -> Vec<(ComponentKind, f64)> {
        vec![
            (ComponentKind::Filter, self.ports.to_filter.fill()),
            (ComponentKind::Tcp, self.ports.to_tcp.fill()),
        ]
    }

    fn restart(&mut self) -> Result<(), NotRestartable> {
        self.logic = Logic { addr: self.addr };
        Ok(())
    }

    fn common(&self) -> &Common {
        &self.ports.common
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
