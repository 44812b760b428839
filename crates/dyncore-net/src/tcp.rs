//! The TCP component: smoltcp's `Interface` and TCP sockets over a device
//! whose receive and transmit queues are the channels to IP.
//!
//! The device declares IPv4 and TCP checksums offloaded, so smoltcp neither
//! computes nor checks them: the IP component does (see [`crate::ip`]). It
//! is an IP-medium device (whole IP packets, no Ethernet).
//!
//! Each client of the syscall server owns one smoltcp socket. A call is
//! started when it arrives and completed when the socket's state allows
//! (see [`crate::proto::Call`] for when each call replies); until then it is
//! the client's pending call. Data is copied between the clients' pool
//! buffers and smoltcp's socket buffers here: this is TCP's copy, the
//! 60-70% of its work that the paper measures.
//!
//! **A crash is contained**, in one of two ways that the stack's
//! configuration chooses ([`TcpCrash`]). TCP restarts in fresh memory like
//! the others; its connections were in the crashed instance's memory
//! (smoltcp's sockets).
//!
//! * **Reset** ([`crate::tcp_reset`]): the connections are reset. What a
//!   restarted TCP needs for that it checkpoints in its journal, committed
//!   with every poll ([`TcpFacts`]): per client, the calls it took and the
//!   replies it gave (so it owes a reply to a client whose call was in
//!   flight), the send buffer it held, and the connection it held (so it
//!   can make the peer reset it too). A new instance replies
//!   `Error(Reset)` to every call in flight, frees the buffers, and probes
//!   each peer so that it resets its side; the stack stays up, and new
//!   connections work at once.
//! * **Recover** ([`crate::tcp_recover`]): at the end of every poll, before
//!   its commit, TCP checkpoints each client whose connection or call
//!   changed (smoltcp's socket state, the buffered bytes it lacks, the call
//!   in flight) into a store that outlives it, and the commit makes the new
//!   checkpoints current at the same commit point as the segments, replies
//!   and consumed frames of the poll. The rule, in the numbered steps of
//!   [`crate::tcp_recover`]: **the current checkpoint is the state TCP
//!   committed**, so a byte acknowledged to the peer is in the checkpoint's
//!   receive buffer or was delivered in a committed reply, and a byte a
//!   committed `Sent` confirmed is in its send buffer or was acknowledged.
//!   A new instance restores every socket and call in flight from it; the
//!   peer sees a delay, and retransmissions only of what was lost
//!   meanwhile.

use std::net::Ipv4Addr;
use std::sync::Arc;

use dyncore_core::Nanos;
use dyncore_ring::journal::{self, Journal, WordRef};
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Checksum, ChecksumCapabilities, Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration as SmolDuration, Instant as SmolInstant};
use smoltcp::wire::{HardwareAddress, IpCidr, IpEndpoint};

use crate::chan::{Channel, Frame, Inbox, Log, Outbox};
use crate::component::{
    Blueprint, Common, Component, ComponentKind, CrashPoint, Progress, State, Tally, UpdateError, journal_of,
};
use crate::pool::{Alloc, Freer, PoolRef};
use crate::proto::{Call, Reply, SockError, Tagged};
use crate::tcp_device::ChannelDevice;
use crate::tcp_recover::{Checkpoints, Head, Pending, SaveCost, TcpCrash};
use crate::tcp_reset::{Conn, Facts, Probes};

/// smoltcp's time from ours.
pub fn smol_now(now_ns: Nanos) -> SmolInstant {
    SmolInstant::from_micros((now_ns / 1_000) as i64)
}

/// Ours from smoltcp's.
pub fn nanos_of(t: SmolInstant) -> Nanos {
    (t.total_micros().max(0) as u64).saturating_mul(1_000)
}

/// TCP socket settings shared by the split stack and the monolithic one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketConfig {
    /// Bytes of each socket's receive and send buffer.
    pub buffer_bytes: usize,
}

impl Default for SocketConfig {
    fn default() -> Self {
        SocketConfig { buffer_bytes: 256 * 1024 }
    }
}

/// A smoltcp TCP socket configured like every socket of dyncore's stacks.
pub fn new_socket(cfg: SocketConfig) -> tcp::Socket<'static> {
    let mut s = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0; cfg.buffer_bytes]),
        tcp::SocketBuffer::new(vec![0; cfg.buffer_bytes]),
    );
    // A peer that vanished turns into an error instead of a call that never
    // completes.
    s.set_timeout(Some(SmolDuration::from_secs(10)));
    s
}

/// A smoltcp interface with one IPv4 address on an IP-medium device.
pub fn new_interface(addr: Ipv4Addr, seed: u64, device: &mut impl Device, now_ns: Nanos) -> Interface {
    let mut config = Config::new(HardwareAddress::Ip);
    config.random_seed = seed;
    let mut iface = Interface::new(config, device, smol_now(now_ns));
    iface.update_ip_addrs(|a| a.push(IpCidr::new(addr.into(), 24)).expect("one address fits"));
    iface
}

/// Device capabilities of an IP-medium device; `offload` leaves IPv4 and
/// TCP checksums to someone else.
pub fn capabilities(mtu: usize, offload: bool) -> DeviceCapabilities {
    let mut caps = DeviceCapabilities::default();
    caps.medium = Medium::Ip;
    caps.max_transmission_unit = mtu;
    if offload {
        let mut c = ChecksumCapabilities::default();
        c.ipv4 = Checksum::None;
        c.tcp = Checksum::None;
        caps.checksum = c;
    }
    caps
}

/// A client's data pools, as TCP uses them: it frees the client's send
/// buffers (freer `send.1` of `send.0`) and allocates its receive buffers.
#[derive(Clone)]
pub struct ClientPools {
    pub send: (PoolRef, usize),
    pub recv: PoolRef,
}

/// TCP's ports: what outlives its instances.
#[derive(Clone)]
pub struct TcpPorts {
    /// Inbound packets from IP (receive pool; TCP is its freer `rx.1`).
    pub from_ip: Channel<Frame>,
    pub rx: (PoolRef, usize),
    /// Outbound packets to IP (transmit pool, allocated here).
    pub to_ip: Channel<Frame>,
    pub tx: PoolRef,
    pub from_sc: Channel<Tagged<Call>>,
    pub to_sc: Channel<Tagged<Reply>>,
    pub clients: Vec<ClientPools>,
    pub common: Common,
}

impl TcpPorts {
    fn words(&self) -> Vec<WordRef> {
        let mut w = vec![
            self.from_ip.tail_word(),
            self.rx.0.freer_word(self.rx.1),
            self.to_ip.head_word(),
            self.from_sc.tail_word(),
            self.to_sc.head_word(),
        ];
        w.extend(self.tx.alloc_words());
        for c in &self.clients {
            w.push(c.send.0.freer_word(c.send.1));
            w.extend(c.recv.alloc_words());
        }
        w.extend(self.common.counters.words());
        w
    }
}

pub const COUNTERS: &[&str] = &[
    "frames_in",
    "frames_out",
    "bytes_sent",
    "bytes_received",
    "calls",
    "no_tx_buffer",
    "checkpoints",
    "checkpoint_bytes",
    "rst_in",
    "rst_out",
];
const FRAMES_IN: usize = 0;
const FRAMES_OUT: usize = 1;
const BYTES_SENT: usize = 2;
const BYTES_RECEIVED: usize = 3;
const CALLS: usize = 4;
const NO_TX_BUFFER: usize = 5;
const CHECKPOINTS: usize = 6;
const CHECKPOINT_BYTES: usize = 7;
/// Segments with RST received and sent: a connection that ends in an
/// error says which side reset it.
const RST_IN: usize = 8;
const RST_OUT: usize = 9;

/// What TCP checkpoints in its journal (see the module docs): journal
/// words that outlive its instances.
pub struct TcpFacts {
    /// Per client ([`Facts::PER_CLIENT`] words): calls taken, replies
    /// given, the send buffer held (`id + 1`, 0: none), the connection held
    /// ([`Conn`], 0: none), connections reset by restarts, a reset's notice
    /// owed, the generation of its checkpoint and connections recovered by
    /// restarts; then the next ephemeral port and the instances.
    pub(crate) words: Vec<Arc<journal::Counter>>,
    clients: usize,
}

impl TcpFacts {
    fn new(clients: usize) -> Arc<TcpFacts> {
        let n = clients * Facts::PER_CLIENT + Facts::GLOBAL;
        Arc::new(TcpFacts { words: (0..n).map(|_| Arc::new(journal::Counter::new(0))).collect(), clients })
    }

    /// Connections of client `c` that TCP restarts reset.
    pub fn resets(&self, c: usize) -> u64 {
        self.words[c * Facts::PER_CLIENT + Facts::RESETS].get()
    }

    /// Instances of TCP that committed (a poll) so far: 1 + restarts, less
    /// the instances a crash hit before their first commit, which did
    /// nothing anyone saw (see [`crate::tcp_reset`]).
    pub fn instances(&self) -> u64 {
        self.words[self.clients * Facts::PER_CLIENT + Facts::INSTANCES].get()
    }

    /// Whether client `c` holds a connection: TCP replied `Connected` to
    /// it, and no close or error since (committed with the reply).
    pub fn connected(&self, c: usize) -> bool {
        self.words[c * Facts::PER_CLIENT + Facts::CONN].get() != 0
    }

    /// Connections of client `c` that TCP restarts resumed from their
    /// checkpoints (`--tcp-crash recover`, [`crate::tcp_recover`]).
    pub fn recovered(&self, c: usize) -> u64 {
        self.words[c * Facts::PER_CLIENT + Facts::RECOVERED].get()
    }
}

/// TCP's blueprint (see [`crate::component::Blueprint`]).
pub struct TcpBlueprint {
    ports: TcpPorts,
    cfg: TcpConfig,
    facts: Arc<TcpFacts>,
    checkpoints: Arc<Checkpoints>,
    journal: Arc<Journal>,
}

impl TcpBlueprint {
    pub fn new(ports: TcpPorts, cfg: TcpConfig) -> Self {
        let facts = TcpFacts::new(ports.clients.len());
        let mut words = ports.words();
        words.extend(facts.words.iter().map(|w| w.clone() as WordRef));
        let journal = journal_of(words);
        let checkpoints = Arc::new(Checkpoints::new(ports.clients.len()));
        TcpBlueprint { ports, cfg, facts, checkpoints, journal }
    }

    /// What TCP checkpoints (connections reset, instances).
    pub fn facts(&self) -> &Arc<TcpFacts> {
        &self.facts
    }
}

impl Blueprint for TcpBlueprint {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Tcp
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

    fn build(&self, now_ns: Nanos) -> Box<dyn Component> {
        Box::new(Tcp::attach(self, now_ns))
    }

    fn at_version(&self, _version: u32) -> Result<Arc<dyn Blueprint>, UpdateError> {
        Err(UPDATE_REFUSED.clone())
    }

    fn accepts(&self, _state: &State) -> Result<(), UpdateError> {
        Err(UPDATE_REFUSED.clone())
    }

    fn build_from(&self, _state: State, _now_ns: Nanos) -> Box<dyn Component> {
        unreachable!("TCP accepts no state")
    }

    fn buffers_out(&self) -> usize {
        self.ports.tx.outstanding() + self.ports.clients.iter().map(|c| c.recv.outstanding()).sum::<usize>()
    }
}

/// Why TCP cannot be updated live.
static UPDATE_REFUSED: std::sync::LazyLock<UpdateError> = std::sync::LazyLock::new(|| {
    UpdateError(
        "TCP cannot be updated live: its state is smoltcp's sockets, and no versioned state type carries them \
         (a crash restarts TCP, and resets its connections or recovers them from checkpoints: --tcp-crash)"
            .into(),
    )
});

struct Client {
    handle: SocketHandle,
    pending: Option<Pending>,
}

/// TCP configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpConfig {
    pub addr: Ipv4Addr,
    pub mtu: usize,
    pub socket: SocketConfig,
    /// smoltcp's random seed (initial sequence numbers); each instance
    /// mixes in its number, so a restarted TCP does not reuse them.
    pub seed: u64,
    /// What a crash does to the connections TCP held.
    pub crash: TcpCrash,
}

/// The TCP component: one instance, attached to its ports.
pub struct Tcp {
    from_ip: Inbox<Frame>,
    rx_free: Freer,
    to_ip: Outbox<Frame>,
    tx_alloc: Alloc,
    from_sc: Inbox<Tagged<Call>>,
    to_sc: Outbox<Tagged<Reply>>,
    /// Per client: its send pool's freer and its receive pool's allocator.
    pools: Vec<(Freer, Alloc)>,
    tally: Tally,
    facts: Facts,
    probes: Probes,
    crash: TcpCrash,
    /// Where it checkpoints its connections (`TcpCrash::Recover`).
    checkpoints: Arc<Checkpoints>,
    /// A new instance has not polled yet (it commits what it resumed).
    fresh: bool,
    common: Common,
    journal: Arc<Journal>,
    addr: Ipv4Addr,
    mtu: usize,
    /// The first ephemeral port this stack uses.
    first_port: u16,
    iface: Interface,
    sockets: SocketSet<'static>,
    clients: Vec<Client>,
    /// When smoltcp next needs a poll (timers), as of the last poll.
    next_poll_ns: Option<Nanos>,
}

const EPHEMERAL_FIRST: u16 = 49152;

/// The local port of the first connection a stack built with `seed` opens
/// (the next ones take the ports after it).
pub fn first_ephemeral_port(seed: u64) -> u16 {
    EPHEMERAL_FIRST + (seed % 1000) as u16
}

impl Tcp {
    /// A new instance: attaches the ports, and resets what a crashed
    /// instance left (see the module docs; staged, committed by the first
    /// poll).
    fn attach(bp: &TcpBlueprint, now_ns: Nanos) -> Tcp {
        let p = &bp.ports;
        let log = Log::Journal(bp.journal.clone());
        let mut facts = Facts::attach(&bp.facts.words, &log, p.clients.len());
        let instance = facts.begin_instance();
        let seed = bp.cfg.seed.wrapping_add(instance.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut from_ip = p.from_ip.inbox(&log);
        let mut rx_free = p.rx.0.freer(p.rx.1, &log);
        let mut to_ip = p.to_ip.outbox(&log);
        let mut tx_alloc = p.tx.alloc(&log);
        let mut dev = ChannelDevice {
            rx: &mut from_ip,
            rx_free: &mut rx_free,
            tx: &mut to_ip,
            tx_alloc: &mut tx_alloc,
            mtu: bp.cfg.mtu,
            frames_in: 0,
            frames_out: 0,
            no_tx_buffer: 0,
            rst_in: 0,
            rst_out: 0,
        };
        let iface = new_interface(bp.cfg.addr, seed, &mut dev, now_ns);
        let mut sockets = SocketSet::new(Vec::new());
        let clients = (0..p.clients.len())
            .map(|_| Client { handle: sockets.add(new_socket(bp.cfg.socket)), pending: None })
            .collect();
        let mut t = Tcp {
            from_ip,
            rx_free,
            to_ip,
            tx_alloc,
            from_sc: p.from_sc.inbox(&log),
            to_sc: p.to_sc.outbox(&log),
            pools: p.clients.iter().map(|c| (c.send.0.freer(c.send.1, &log), c.recv.alloc(&log))).collect(),
            tally: Tally::attach(&p.common.counters, &log),
            facts,
            probes: Probes::default(),
            crash: bp.cfg.crash,
            checkpoints: bp.checkpoints.clone(),
            fresh: bp.cfg.crash == TcpCrash::Recover,
            common: p.common.clone(),
            journal: bp.journal.clone(),
            addr: bp.cfg.addr,
            mtu: bp.cfg.mtu,
            first_port: first_ephemeral_port(bp.cfg.seed),
            iface,
            sockets,
            clients,
            next_poll_ns: None,
        };
        for c in 0..t.clients.len() {
            match t.crash {
                TcpCrash::Reset => t.reset_client(c),
                TcpCrash::Recover => t.recover_client(c),
            }
        }
        t
    }

    /// What a crashed instance held for client `c`, from the facts it
    /// committed: a reply `Error(Reset)` to its call in flight, its send
    /// buffer freed, and the peer of its connection probed (see
    /// [`crate::tcp_reset`]).
    fn reset_client(&mut self, c: usize) {
        let held = self.facts.reset_client(c);
        if held.reply_owed {
            self.reply(c, Reply::Error(SockError::Reset));
        }
        if let Some(buf) = held.send_buffer {
            self.pools[c].0.free(buf);
        }
        if let Some(conn) = held.conn {
            self.probes.add(conn);
        }
    }

    /// Resumes client `c`'s connection and call in flight from its current
    /// checkpoint ([`crate::tcp_recover`], step 5); resets it if smoltcp
    /// refuses the checkpoint.
    fn recover_client(&mut self, c: usize) {
        let generation = self.facts.generation(c);
        let sock = self.sockets.get_mut::<tcp::Socket>(self.clients[c].handle);
        match self.checkpoints.restore(c, generation, self.iface.context(), sock) {
            Ok(head) => {
                let pending = head.and_then(|h| h.pending);
                assert_eq!(
                    self.facts.call_in_flight(c),
                    pending.is_some(),
                    "client {c}: the checkpoint's call in flight is the one the facts count"
                );
                self.clients[c].pending = pending;
                if head.is_some_and(|h| !matches!(h.sock.state(), tcp::State::Closed | tcp::State::Listen)) {
                    self.facts.count_recovered(c);
                }
            }
            Err(_) => self.reset_client(c),
        }
    }

    /// Step 2 of [`crate::tcp_recover`]: checkpoints every client whose
    /// state changed, staging its new generation.
    fn save_checkpoints(&mut self) {
        let mut cost = SaveCost::default();
        for (c, client) in self.clients.iter().enumerate() {
            let sock = self.sockets.get::<tcp::Socket>(client.handle);
            let head = Head { sock: sock.checkpoint(), pending: client.pending };
            let generation = self.facts.generation(c);
            if self.checkpoints.save(c, generation, head, sock, &mut cost) {
                self.facts.set_generation(c, generation + 1);
            }
        }
        self.tally.add(CHECKPOINTS, cost.saves);
        self.tally.add(CHECKPOINT_BYTES, cost.bytes);
    }

    /// Pushes a reply to client `c` and counts it in the facts.
    fn reply(&mut self, c: usize, r: Reply) {
        self.to_sc.push(Tagged { client: c as u16, msg: r });
        self.facts.replied(c);
        match r {
            Reply::Connected => {
                let s = self.sockets.get::<tcp::Socket>(self.clients[c].handle);
                self.facts.set_conn(c, Conn::of(s.local_endpoint(), s.remote_endpoint()));
            }
            Reply::Closed | Reply::Error(_) => self.facts.set_conn(c, None),
            _ => {}
        }
    }

    /// Starts a call; returns an immediate reply if it fails at once.
    fn start(&mut self, client: usize, call: Call) -> Option<Reply> {
        if self.clients[client].pending.is_some() {
            // The protocol allows one outstanding call per client.
            if let Call::Send { data } = call {
                self.pools[client].0.free(data.buf);
            }
            return Some(Reply::Error(SockError::InvalidState));
        }
        // A reset this client has not been told of (crate::tcp_reset, 2):
        // a new connection clears it, any other call is told.
        if self.facts.take_notice(client) && !matches!(call, Call::Connect { .. } | Call::Accept { .. }) {
            if let Call::Send { data } = call {
                self.pools[client].0.free(data.buf);
            }
            return Some(Reply::Error(SockError::Reset));
        }
        let c = &mut self.clients[client];
        let sock = self.sockets.get_mut::<tcp::Socket>(c.handle);
        let ok = match call {
            Call::Connect { addr, port } => {
                if sock.state() == tcp::State::TimeWait {
                    sock.abort();
                }
                let local = self.facts.take_port(self.first_port);
                sock.connect(self.iface.context(), (addr, port), local).map(|_| Pending::Connect).ok()
            }
            Call::Accept { port } => {
                if sock.state() == tcp::State::TimeWait {
                    sock.abort();
                }
                sock.listen(port).map(|_| Pending::Accept).ok()
            }
            Call::Send { data } => Some(Pending::Send { data, done: 0 }),
            Call::Recv => Some(Pending::Recv),
            Call::Close => {
                let active = sock.state() == tcp::State::Established;
                sock.close();
                Some(Pending::Close { active })
            }
        };
        match ok {
            Some(p) => {
                if let Pending::Send { data, .. } = p {
                    self.facts.set_held(client, Some(data.buf));
                }
                c.pending = Some(p);
                None
            }
            None => {
                if let Call::Send { data } = call {
                    self.pools[client].0.free(data.buf);
                }
                Some(Reply::Error(SockError::InvalidState))
            }
        }
    }

    /// Advances a client's pending call; returns its reply when complete
    /// and the payload bytes copied (into the socket for a send, out of it
    /// for a receive).
    fn advance(&mut self, client: usize) -> (Option<Reply>, u64) {
        let c = &mut self.clients[client];
        let Some(pending) = c.pending else { return (None, 0) };
        let sock = self.sockets.get_mut::<tcp::Socket>(c.handle);
        let (send_free, recv_alloc) = &mut self.pools[client];
        let state = sock.state();
        let mut copied = 0;
        let reply = match pending {
            Pending::Connect | Pending::Accept => match state {
                tcp::State::Established | tcp::State::CloseWait => Some(Reply::Connected),
                tcp::State::Closed if pending == Pending::Connect => Some(Reply::Error(SockError::Refused)),
                tcp::State::Closed => Some(Reply::Error(SockError::Reset)),
                _ => None,
            },
            Pending::Send { data, done } => {
                if !sock.may_send() {
                    send_free.free(data.buf);
                    self.facts.set_held(client, None);
                    Some(Reply::Error(SockError::Reset))
                } else {
                    let n = send_free.pool().with(data.buf, |b| {
                        sock.send_slice(&b[done as usize..data.len as usize]).unwrap_or(0)
                    });
                    copied = n as u64;
                    let done = done + n as u32;
                    if done == data.len {
                        send_free.free(data.buf);
                        self.facts.set_held(client, None);
                        Some(Reply::Sent { len: data.len })
                    } else {
                        c.pending = Some(Pending::Send { data, done });
                        None
                    }
                }
            }
            Pending::Recv => {
                let r = recv_into(sock, recv_alloc);
                if let Some(Reply::Data { data }) = r {
                    copied = data.len.into();
                }
                r
            }
            // `Closed` promises that the peer acknowledged everything sent
            // (crate::proto::Call::Close); an aborted close is an error.
            Pending::Close { active } => match state {
                tcp::State::TimeWait | tcp::State::FinWait2 => Some(Reply::Closed),
                tcp::State::Closed if active => Some(Reply::Error(SockError::Reset)),
                tcp::State::Closed => Some(Reply::Closed),
                _ => None,
            },
        };
        if reply.is_some() {
            c.pending = None;
        }
        (reply, copied)
    }

    /// Advances every client's call, pushing replies.
    fn advance_all(&mut self, p: &mut Progress) {
        for client in 0..self.clients.len() {
            let (reply, copied) = self.advance(client);
            if let Some(r) = reply {
                self.reply(client, r);
                p.add(1, 0);
            }
            if copied > 0 {
                // Only a completed receive copies out; a send copies in.
                let out = matches!(reply, Some(Reply::Data { .. }));
                self.tally.add(if out { BYTES_RECEIVED } else { BYTES_SENT }, copied);
                p.add(0, copied);
            }
        }
    }

    /// One pass of smoltcp over the channels.
    fn poll_iface(&mut self, now_ns: Nanos) -> Progress {
        let mut dev = ChannelDevice {
            rx: &mut self.from_ip,
            rx_free: &mut self.rx_free,
            tx: &mut self.to_ip,
            tx_alloc: &mut self.tx_alloc,
            mtu: self.mtu,
            frames_in: 0,
            frames_out: 0,
            no_tx_buffer: 0,
            rst_in: 0,
            rst_out: 0,
        };
        self.iface.poll(smol_now(now_ns), &mut dev, &mut self.sockets);
        let (i, o, n) = (dev.frames_in, dev.frames_out, dev.no_tx_buffer);
        self.tally.add(FRAMES_IN, i);
        self.tally.add(FRAMES_OUT, o);
        self.tally.add(NO_TX_BUFFER, n);
        self.tally.add(RST_IN, dev.rst_in);
        self.tally.add(RST_OUT, dev.rst_out);
        Progress { messages: i + o, bytes: 0 }
    }
}

/// A receive call's data: a buffer of the client's receive pool filled
/// from the socket, `Eof`, an error, or nothing yet.
fn recv_into(sock: &mut tcp::Socket<'static>, alloc: &mut Alloc) -> Option<Reply> {
    if !sock.can_recv() {
        return match sock.recv(|_| (0, ())) {
            Err(tcp::RecvError::Finished) => Some(Reply::Eof),
            Err(tcp::RecvError::InvalidState) => Some(Reply::Error(SockError::Reset)),
            Ok(()) => None,
        };
    }
    // `None`: the client has not freed its last buffer yet.
    let buf = alloc.alloc()?;
    let cap = alloc.pool().buf_bytes();
    let len = alloc.pool().with(buf, |b| {
        // The socket's ring may wrap: at most two pieces.
        for _ in 0..2 {
            let room = cap - b.len();
            let n = sock
                .recv(|d| {
                    let n = d.len().min(room);
                    b.extend_from_slice(&d[..n]);
                    (n, n)
                })
                .unwrap_or(0);
            if n == 0 || b.len() == cap {
                break;
            }
        }
        b.len()
    });
    Some(Reply::Data { data: Frame { buf, len: len as u32 } })
}

impl Component for Tcp {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Tcp
    }

    fn poll(&mut self, now_ns: Nanos) -> Progress {
        let mut p = Progress::IDLE;
        // 0. A new instance's probes to the peers of reset connections.
        let probes = self.probes.emit(now_ns, self.addr, &mut self.to_ip, &mut self.tx_alloc);
        self.tally.add(FRAMES_OUT, probes);
        p.messages += probes;
        // 1. New calls from the syscall server.
        while let Some(t) = self.from_sc.peek() {
            self.from_sc.commit();
            self.facts.called(t.client as usize);
            self.tally.add(CALLS, 1);
            p.add(1, 0);
            if let Some(r) = self.start(t.client as usize, t.msg) {
                self.reply(t.client as usize, r);
            }
        }
        // 2. Copy queued sends in and received data out, so that 3 sends
        //    what was just queued and 4 hands over what 3 received.
        self.advance_all(&mut p);
        // 3. smoltcp: receive, timers, transmit.
        p += self.poll_iface(now_ns);
        // TCP's crash point: in the middle of its work, frames taken and
        // segments built, nothing committed.
        self.common.crash.check(ComponentKind::Tcp, CrashPoint::Logic);
        // 4. Complete the calls the packets allowed, and send what they queued.
        let before = p;
        self.advance_all(&mut p);
        if p != before {
            p += self.poll_iface(now_ns);
        }
        self.next_poll_ns = self.iface.poll_at(smol_now(now_ns), &self.sockets).map(nanos_of);
        if let Some(t) = self.probes.next_ns() {
            self.next_poll_ns = Some(self.next_poll_ns.map_or(t, |n| n.min(t)));
        }
        self.from_ip.release();
        self.from_sc.release();
        self.tx_alloc.release();
        for (_, recv) in &mut self.pools {
            recv.release();
        }
        if self.crash == TcpCrash::Recover {
            self.save_checkpoints();
        }
        self.fresh = false;
        self.common.commit(ComponentKind::Tcp, &self.journal);
        p
    }

    fn has_work(&self) -> bool {
        self.from_ip.has_work()
            || self.from_sc.has_work()
            || self.tx_alloc.refill_waiting()
            || self.pools.iter().any(|(_, a)| a.refill_waiting())
            || self.probes.due()
            || self.fresh
    }

    fn deadline_ns(&self, now_ns: Nanos) -> Option<Nanos> {
        // A resumed instance's timers are smoltcp's, known after its first
        // poll: until then it is due (a host that sleeps until the earliest
        // deadline would otherwise sleep past them).
        if self.fresh { Some(now_ns) } else { self.next_poll_ns }
    }

    fn inbound_fill(&self) -> f64 {
        self.from_ip.fill().max(self.from_sc.fill())
    }

    fn outbound_fill(&self) -> Vec<(ComponentKind, f64)> {
        vec![(ComponentKind::Ip, self.to_ip.fill()), (ComponentKind::Syscall, self.to_sc.fill())]
    }

    fn export(&self) -> Result<State, UpdateError> {
        Err(UPDATE_REFUSED.clone())
    }

    fn common(&self) -> &Common {
        &self.common
    }
}

/// The address and port pair of a connection, as [`Conn`] packs them.
pub(crate) fn endpoints(ep: Option<IpEndpoint>) -> Option<(Ipv4Addr, u16)> {
    let ep = ep?;
    let smoltcp::wire::IpAddress::Ipv4(a) = ep.addr;
    Some((a, ep.port))
}
