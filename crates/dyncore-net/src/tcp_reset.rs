//! How a TCP crash is contained: what TCP checkpoints so that a new
//! instance can reset exactly the connections the crashed one held.
//!
//! smoltcp keeps a connection's state (sequence numbers, windows, buffered
//! data, timers) inside its socket. With `TcpCrash::Reset` a TCP restarted
//! in fresh memory does not resume a connection (`TcpCrash::Recover` does,
//! from checkpoints: [`crate::tcp_recover`]); it *resets* it, like a host
//! that rebooted. What it must not do is leave anyone waiting:
//!
//! 1. **Every call in flight gets its reply.** TCP counts, per client, the
//!    calls it took and the replies it gave, in its journal with the rest of
//!    each poll ([`Facts`]). A new instance owes `calls - replies` (0 or 1:
//!    one call outstanding per client) and replies `Error(Reset)`; the
//!    application sees the error on the call it was waiting in.
//! 2. **Every reset is told, once.** A connection reset while its client
//!    had no call in flight (between a reply and its next call) is told on
//!    that next call: the new instance records the notice as owed, in the
//!    journal, and answers the client's next `send`, `recv` or `close` with
//!    `Error(Reset)`; a `connect`/`accept` opens a new connection and
//!    clears it. (The new socket is closed, and a close of a closed socket
//!    completes: without the notice a sender that closes next would count
//!    a reset connection completed.) Invariant, whatever the points at
//!    which instances crash: every connection TCP counts reset
//!    ([`Facts::RESETS`]) is told to its client exactly once, as
//!    `Error(Reset)` on the call in flight at the crash or on the client's
//!    next call after it (a `connect`/`accept` excepted, which means the
//!    client is done with it).
//! 3. **No buffer leaks.** A `send` call's buffer, held by TCP until the
//!    bytes are in the socket, is recorded while held; a new instance frees
//!    it.
//! 4. **The peer resets its side.** The connection's addresses and ports
//!    are recorded while it is open; a new instance sends the peer a bare
//!    ACK that is outside any window it could have (two, with
//!    acknowledgment numbers half the sequence space apart, so one of them
//!    is beyond what the peer sent). A peer answers such a segment with an
//!    ACK (RFC 9293 3.10.7.4; RFC 5961's challenge ACK), which carries its
//!    next expected sequence number; the new TCP, which has no socket for
//!    it, answers that with a RST at exactly that number (smoltcp's reply to
//!    a segment for no socket), which the peer accepts. A peer that is
//!    sending data gets the same RST at its next segment. The probes go out
//!    three times (at once, 100 ms and 300 ms later), in case one is lost.
//!
//! Each instance also counts itself (so smoltcp's initial sequence numbers
//! differ from a crashed instance's) and keeps the next ephemeral port (so
//! a new connection does not reuse a reset one's port). Like every fact,
//! the count is staged and committed with the instance's first poll: an
//! instance that crashes before its first commit did nothing anyone saw
//! (no segment, no reply), and the next instance takes its number and
//! redoes its resets. So the committed count is the instances that
//! committed: `1 + restarts` when every instance finishes a poll before
//! the next crash, less one for each instance a crash hit before that.

use std::net::Ipv4Addr;
use std::sync::Arc;

use dyncore_core::Nanos;
use dyncore_ring::journal;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    IpEndpoint, IpProtocol, Ipv4Packet, Ipv4Repr, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber,
};

use crate::chan::{Frame, Log, Outbox};
use crate::component::Tally;
use crate::pool::{Alloc, BufId};

/// A connection as TCP records it: the peer's address and port, and ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conn {
    pub remote: Ipv4Addr,
    pub remote_port: u16,
    pub local_port: u16,
}

impl Conn {
    /// The connection of a socket's two endpoints, if it has both.
    pub fn of(local: Option<IpEndpoint>, remote: Option<IpEndpoint>) -> Option<Conn> {
        let (_, local_port) = crate::tcp::endpoints(local)?;
        let (remote, remote_port) = crate::tcp::endpoints(remote)?;
        Some(Conn { remote, remote_port, local_port })
    }

    /// One word (0: none; ports are never 0).
    pub fn pack(c: Option<Conn>) -> u64 {
        c.map_or(0, |c| {
            (u64::from(u32::from(c.remote)) << 32)
                | (u64::from(c.remote_port) << 16)
                | u64::from(c.local_port)
        })
    }

    pub fn unpack(v: u64) -> Option<Conn> {
        (v != 0).then(|| Conn {
            remote: Ipv4Addr::from((v >> 32) as u32),
            remote_port: (v >> 16) as u16,
            local_port: v as u16,
        })
    }
}

/// What a crashed instance held for one client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    /// A call was in flight: it is owed a reply (`Error(Reset)`).
    pub reply_owed: bool,
    /// No call was in flight, and the client's connection was reset (now
    /// or by an instance before): its next call is owed `Error(Reset)`
    /// ([`Facts::take_notice`]).
    pub notice_owed: bool,
    /// A send call's buffer TCP held.
    pub send_buffer: Option<BufId>,
    /// The connection it held.
    pub conn: Option<Conn>,
}

/// TCP's checkpoint, as one instance stages it in its journal.
pub struct Facts {
    t: Tally,
    clients: usize,
}

impl Facts {
    /// Words per client: calls taken, replies given, the send buffer held
    /// (`id + 1`, 0: none), the connection held ([`Conn::pack`]),
    /// connections reset, a reset's notice owed (1: owed), the generation
    /// of its checkpoint and connections recovered (`--tcp-crash
    /// recover`, [`crate::tcp_recover`]).
    pub const PER_CLIENT: usize = 8;
    const CALLS: usize = 0;
    const REPLIES: usize = 1;
    const HELD: usize = 2;
    pub const CONN: usize = 3;
    pub const RESETS: usize = 4;
    const NOTICE: usize = 5;
    const GENERATION: usize = 6;
    pub const RECOVERED: usize = 7;
    /// Words after the clients': the next ephemeral port, the instances.
    pub const GLOBAL: usize = 2;
    const NEXT_PORT: usize = 0;
    pub const INSTANCES: usize = 1;

    pub fn attach(words: &[Arc<journal::Counter>], log: &Log, clients: usize) -> Facts {
        assert_eq!(words.len(), clients * Facts::PER_CLIENT + Facts::GLOBAL);
        Facts { t: Tally::over(words, log), clients }
    }

    fn at(&self, c: usize, k: usize) -> usize {
        debug_assert!(c < self.clients);
        c * Facts::PER_CLIENT + k
    }

    fn global(&self, k: usize) -> usize {
        self.clients * Facts::PER_CLIENT + k
    }

    /// Counts a new instance; returns its number (1 for the first).
    pub fn begin_instance(&mut self) -> u64 {
        let i = self.global(Facts::INSTANCES);
        self.t.add(i, 1);
        self.t.get(i)
    }

    pub fn called(&mut self, c: usize) {
        let i = self.at(c, Facts::CALLS);
        self.t.add(i, 1);
    }

    pub fn replied(&mut self, c: usize) {
        let i = self.at(c, Facts::REPLIES);
        self.t.add(i, 1);
    }

    pub fn set_held(&mut self, c: usize, buf: Option<BufId>) {
        let i = self.at(c, Facts::HELD);
        self.t.set(i, buf.map_or(0, |b| u64::from(b) + 1));
    }

    pub fn set_conn(&mut self, c: usize, conn: Option<Conn>) {
        let i = self.at(c, Facts::CONN);
        self.t.set(i, Conn::pack(conn));
    }

    /// Whether client `c` has a call in flight (taken, not replied to).
    pub fn call_in_flight(&self, c: usize) -> bool {
        self.t.get(self.at(c, Facts::CALLS)) > self.t.get(self.at(c, Facts::REPLIES))
    }

    /// The generation of client `c`'s checkpoint (staged).
    pub fn generation(&self, c: usize) -> u64 {
        self.t.get(self.at(c, Facts::GENERATION))
    }

    pub fn set_generation(&mut self, c: usize, generation: u64) {
        let i = self.at(c, Facts::GENERATION);
        self.t.set(i, generation);
    }

    /// Counts a connection of client `c` resumed from its checkpoint.
    pub fn count_recovered(&mut self, c: usize) {
        let i = self.at(c, Facts::RECOVERED);
        self.t.add(i, 1);
    }

    /// The next ephemeral port (from `first` on, wrapping within 49152-65535).
    pub fn take_port(&mut self, first: u16) -> u16 {
        let i = self.global(Facts::NEXT_PORT);
        let v = self.t.get(i);
        let port = if v == 0 { first } else { v as u16 };
        let next = if port == u16::MAX { 49152 } else { port + 1 };
        self.t.set(i, u64::from(next));
        port
    }

    /// What a crashed instance held for client `c` (the facts as
    /// committed), and stages it as dealt with: the owed reply counted
    /// (the caller pushes it), the buffer and the connection cleared, the
    /// reset counted, and, with no call in flight to tell, the notice
    /// owed to the client's next call (module docs, 2).
    pub fn reset_client(&mut self, c: usize) -> Held {
        let g = |k| self.t.get(self.at(c, k));
        let reply_owed = g(Facts::CALLS) > g(Facts::REPLIES);
        let held = g(Facts::HELD);
        let conn = Conn::unpack(g(Facts::CONN));
        // An owed reply is the notice; else one owed before still is.
        let notice_owed = !reply_owed && (conn.is_some() || g(Facts::NOTICE) != 0);
        if held != 0 {
            self.set_held(c, None);
        }
        if conn.is_some() {
            self.set_conn(c, None);
            let i = self.at(c, Facts::RESETS);
            self.t.add(i, 1);
        }
        self.set_notice(c, notice_owed);
        Held { reply_owed, notice_owed, send_buffer: (held != 0).then(|| (held - 1) as BufId), conn }
    }

    fn set_notice(&mut self, c: usize, owed: bool) {
        let i = self.at(c, Facts::NOTICE);
        self.t.set(i, u64::from(owed));
    }

    /// Takes the notice of a reset owed to client `c` (staged: the caller
    /// answers the call it takes it for with `Error(Reset)`, or opens a new
    /// connection); whether one was owed.
    pub fn take_notice(&mut self, c: usize) -> bool {
        let owed = self.t.get(self.at(c, Facts::NOTICE)) != 0;
        if owed {
            self.set_notice(c, false);
        }
        owed
    }
}

/// When the probes go out, after a new instance's first poll.
const PROBE_AT_NS: [Nanos; 3] = [0, 100_000_000, 300_000_000];

/// The probes a new instance sends to the peers of reset connections.
#[derive(Debug, Default)]
pub struct Probes {
    conns: Vec<Conn>,
    start_ns: Option<Nanos>,
    round: usize,
}

impl Probes {
    pub fn add(&mut self, c: Conn) {
        self.conns.push(c);
    }

    /// The first round is due (a parked TCP must poll to send it).
    pub fn due(&self) -> bool {
        !self.conns.is_empty() && self.start_ns.is_none()
    }

    /// When the next round is due.
    pub fn next_ns(&self) -> Option<Nanos> {
        let s = self.start_ns?;
        (!self.conns.is_empty() && self.round < PROBE_AT_NS.len()).then(|| s + PROBE_AT_NS[self.round])
    }

    /// Sends a round if one is due (and transmit buffers are free);
    /// returns the segments sent.
    pub fn emit(
        &mut self,
        now_ns: Nanos,
        addr: Ipv4Addr,
        to_ip: &mut Outbox<Frame>,
        alloc: &mut Alloc,
    ) -> u64 {
        if self.conns.is_empty() || self.round >= PROBE_AT_NS.len() {
            return 0;
        }
        let start = *self.start_ns.get_or_insert(now_ns);
        if now_ns < start + PROBE_AT_NS[self.round] {
            return 0;
        }
        let mut sent = 0;
        for c in &self.conns {
            for ack in [0x1000_0000u32, 0x9000_0000] {
                let Some(buf) = alloc.alloc() else { return sent };
                let len = alloc.pool().with(buf, |b| write_probe(b, addr, c, ack));
                to_ip.push(Frame { buf, len: len as u32 });
                sent += 1;
            }
        }
        self.round += 1;
        sent
    }
}

/// A bare ACK from `addr` to `c`'s peer with a sequence number no window
/// holds and acknowledgment number `ack`; checksums are left to IP.
fn write_probe(b: &mut Vec<u8>, addr: Ipv4Addr, c: &Conn, ack: u32) -> usize {
    let tcp = TcpRepr {
        src_port: c.local_port,
        dst_port: c.remote_port,
        control: TcpControl::None,
        seq_number: TcpSeqNumber(ack.wrapping_add(0x4000_0000) as i32),
        ack_number: Some(TcpSeqNumber(ack as i32)),
        window_len: 0,
        window_scale: None,
        max_seg_size: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload: &[],
    };
    let ip = Ipv4Repr {
        src_addr: addr,
        dst_addr: c.remote,
        next_header: IpProtocol::Tcp,
        payload_len: tcp.buffer_len(),
        hop_limit: 64,
    };
    let n = ip.buffer_len() + tcp.buffer_len();
    b.clear();
    b.resize(n, 0);
    let caps = ChecksumCapabilities::ignored();
    let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
    ip.emit(&mut p, &caps);
    tcp.emit(&mut TcpPacket::new_unchecked(p.payload_mut()), &addr.into(), &c.remote.into(), &caps);
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_packs_into_one_word() {
        let c = Conn { remote: Ipv4Addr::new(10, 0, 0, 2), remote_port: 5001, local_port: 49153 };
        assert_eq!(Conn::unpack(Conn::pack(Some(c))), Some(c));
        assert_eq!(Conn::pack(None), 0);
        assert_eq!(Conn::unpack(0), None);
    }

    #[test]
    fn a_new_instance_owes_the_reply_frees_the_buffer_and_resets_the_connection_once() {
        let words: Vec<_> =
            (0..Facts::PER_CLIENT + Facts::GLOBAL).map(|_| Arc::new(journal::Counter::new(0))).collect();
        let mut f = Facts::attach(&words, &Log::Direct, 1);
        assert_eq!(f.begin_instance(), 1);
        let conn = Conn { remote: Ipv4Addr::new(10, 0, 0, 2), remote_port: 5001, local_port: 49153 };
        f.called(0);
        f.replied(0);
        f.set_conn(0, Some(conn));
        f.called(0);
        f.set_held(0, Some(7));
        // A crash here: the next instance finds all of it.
        let mut g = Facts::attach(&words, &Log::Direct, 1);
        assert_eq!(g.begin_instance(), 2);
        assert_eq!(
            g.reset_client(0),
            Held { reply_owed: true, notice_owed: false, send_buffer: Some(7), conn: Some(conn) }
        );
        g.replied(0);
        assert_eq!(words[Facts::RESETS].get(), 1);
        let mut h = Facts::attach(&words, &Log::Direct, 1);
        h.begin_instance();
        assert_eq!(
            h.reset_client(0),
            Held { reply_owed: false, notice_owed: false, send_buffer: None, conn: None },
            "dealt with once"
        );
    }

    fn journaled() -> (Vec<Arc<journal::Counter>>, Arc<journal::Journal>, Log) {
        let words: Vec<_> =
            (0..Facts::PER_CLIENT + Facts::GLOBAL).map(|_| Arc::new(journal::Counter::new(0))).collect();
        let j = crate::component::journal_of(words.iter().map(|w| w.clone() as journal::WordRef).collect());
        let log = Log::Journal(j.clone());
        (words, j, log)
    }

    /// An instance crashes with the connection open and no call in flight
    /// (its client has the reply `Connected`); the next one crashes before
    /// its first commit; the one after commits, and then crashes too
    /// before the client calls again. The reset is counted once, and the
    /// notice is owed until the client's next call takes it, once.
    #[test]
    fn a_reset_with_no_call_in_flight_is_told_on_the_next_call_once_across_crashes() {
        let (words, j, log) = journaled();
        let conn = Conn { remote: Ipv4Addr::new(10, 0, 0, 2), remote_port: 5001, local_port: 49153 };
        let mut f = Facts::attach(&words, &log, 1);
        assert_eq!(f.begin_instance(), 1);
        f.called(0);
        f.set_conn(0, Some(conn));
        f.replied(0);
        j.commit_now();
        drop(f);
        j.recover();
        let owed = Held { reply_owed: false, notice_owed: true, send_buffer: None, conn: Some(conn) };
        // Instance 2 crashes before its first commit: nothing it staged counts.
        let mut g = Facts::attach(&words, &log, 1);
        assert_eq!(g.begin_instance(), 2);
        assert_eq!(g.reset_client(0), owed);
        drop(g);
        j.recover();
        assert_eq!(words[Facts::RESETS].get(), 0);
        // Instance 3 takes its number, resets the connection, commits.
        let mut h = Facts::attach(&words, &log, 1);
        assert_eq!(h.begin_instance(), 2, "an instance that never committed is not counted");
        assert_eq!(h.reset_client(0), owed);
        j.commit_now();
        drop(h);
        j.recover();
        assert_eq!(words[Facts::RESETS].get(), 1);
        // Instance 4: the connection is gone, the notice still owed.
        let mut k = Facts::attach(&words, &log, 1);
        assert_eq!(k.begin_instance(), 3);
        assert_eq!(k.reset_client(0), Held { conn: None, ..owed });
        k.called(0);
        assert!(k.take_notice(0), "the next call is told");
        k.replied(0);
        assert!(!k.take_notice(0), "once");
        j.commit_now();
        let mut m = Facts::attach(&words, &log, 1);
        m.begin_instance();
        assert_eq!(
            m.reset_client(0),
            Held { reply_owed: false, notice_owed: false, send_buffer: None, conn: None }
        );
        assert_eq!(words[Facts::RESETS].get(), 1, "counted once");
    }

    /// A call in flight at the crash is the one told: no notice is owed
    /// after its reply, even if one was owed before.
    #[test]
    fn the_reply_to_the_call_in_flight_is_the_notice() {
        let (words, j, log) = journaled();
        let conn = Conn { remote: Ipv4Addr::new(10, 0, 0, 2), remote_port: 5001, local_port: 49153 };
        let mut f = Facts::attach(&words, &log, 1);
        f.begin_instance();
        f.called(0);
        f.set_conn(0, Some(conn));
        f.replied(0);
        f.called(0);
        j.commit_now();
        drop(f);
        j.recover();
        let mut g = Facts::attach(&words, &log, 1);
        g.begin_instance();
        let held = g.reset_client(0);
        assert_eq!((held.reply_owed, held.notice_owed, held.conn), (true, false, Some(conn)));
        assert!(!g.take_notice(0));
    }

    #[test]
    fn ephemeral_ports_move_on_across_instances() {
        let words: Vec<_> =
            (0..Facts::PER_CLIENT + Facts::GLOBAL).map(|_| Arc::new(journal::Counter::new(0))).collect();
        let mut f = Facts::attach(&words, &Log::Direct, 1);
        assert_eq!((f.take_port(50000), f.take_port(50000)), (50000, 50001));
        let mut g = Facts::attach(&words, &Log::Direct, 1);
        assert_eq!(g.take_port(50000), 50002);
    }
}
