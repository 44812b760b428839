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
//! TCP holds the connections, which a restart would lose, so it refuses to
//! restart: it is the component NewtOS keeps alive while IP, the filter and
//! the driver are replaced under it.

use std::net::Ipv4Addr;

use dyncore_core::Nanos;
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, Checksum, ChecksumCapabilities, Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration as SmolDuration, Instant as SmolInstant};
use smoltcp::wire::{HardwareAddress, IpCidr};

use crate::chan::{Frame, Inbox, Outbox};
use crate::component::{Common, Component, ComponentKind, NotRestartable, Progress};
use crate::pool::{Alloc, Freer};
use crate::proto::{Call, Reply, SockError, Tagged};

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

/// A client's data pools, as TCP holds them.
pub struct ClientPools {
    /// Frees the client's send buffers once copied into the socket.
    pub send_free: Freer,
    /// Allocates receive buffers to hand data to the client.
    pub recv_alloc: Alloc,
}

/// TCP's channels and pools.
pub struct TcpPorts {
    /// Inbound packets from IP (receive pool, freed here once consumed).
    pub from_ip: Inbox<Frame>,
    pub rx_free: Freer,
    /// Outbound packets to IP (transmit pool, allocated here).
    pub to_ip: Outbox<Frame>,
    pub tx_alloc: Alloc,
    pub from_sc: Inbox<Tagged<Call>>,
    pub to_sc: Outbox<Tagged<Reply>>,
    pub clients: Vec<ClientPools>,
    pub common: Common,
}

pub const COUNTERS: &[&str] =
    &["frames_in", "frames_out", "bytes_sent", "bytes_received", "calls", "no_tx_buffer"];
const FRAMES_IN: usize = 0;
const FRAMES_OUT: usize = 1;
const BYTES_SENT: usize = 2;
const BYTES_RECEIVED: usize = 3;
const CALLS: usize = 4;
const NO_TX_BUFFER: usize = 5;

/// The device smoltcp sees: receive from IP, transmit to IP.
struct ChannelDevice<'a> {
    rx: &'a mut Inbox<Frame>,
    rx_free: &'a mut Freer,
    tx: &'a mut Outbox<Frame>,
    tx_alloc: &'a mut Alloc,
    mtu: usize,
    frames_in: u64,
    frames_out: u64,
    no_tx_buffer: u64,
}

struct RxTok<'a> {
    frame: Frame,
    free: &'a mut Freer,
    count: &'a mut u64,
}

struct TxTok<'a> {
    tx: &'a mut Outbox<Frame>,
    alloc: &'a mut Alloc,
    count: &'a mut u64,
}

impl phy::RxToken for RxTok<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        let Frame { buf, len } = self.frame;
        let r = self.free.pool().with(buf, |b| f(&b[..len as usize]));
        self.free.free(buf);
        *self.count += 1;
        r
    }
}

impl phy::TxToken for TxTok<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        // `transmit`/`receive` checked a buffer was free, and nothing else
        // allocates between the check and the token's use.
        let buf = self.alloc.alloc().expect("a transmit buffer was free when the token was made");
        let r = self.alloc.pool().with(buf, |b| {
            b.resize(len, 0);
            f(b)
        });
        self.tx.push(Frame { buf, len: len as u32 });
        *self.count += 1;
        r
    }
}

impl Device for ChannelDevice<'_> {
    type RxToken<'a>
        = RxTok<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = TxTok<'a>
    where
        Self: 'a;

    fn receive(&mut self, _t: SmolInstant) -> Option<(RxTok<'_>, TxTok<'_>)> {
        // A received packet may need a reply at once: take it only if a
        // transmit buffer is free (otherwise it waits in the channel).
        if self.tx_alloc.available() == 0 {
            self.no_tx_buffer += 1;
            return None;
        }
        let frame = self.rx.peek()?;
        self.rx.commit();
        Some((
            RxTok { frame, free: self.rx_free, count: &mut self.frames_in },
            TxTok { tx: self.tx, alloc: self.tx_alloc, count: &mut self.frames_out },
        ))
    }

    fn transmit(&mut self, _t: SmolInstant) -> Option<TxTok<'_>> {
        if self.tx_alloc.available() == 0 {
            self.no_tx_buffer += 1;
            return None;
        }
        Some(TxTok { tx: self.tx, alloc: self.tx_alloc, count: &mut self.frames_out })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        capabilities(self.mtu, true)
    }
}

/// The call a client is waiting on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Connect,
    Accept,
    /// `done` bytes of `data` are in the socket already.
    Send {
        data: Frame,
        done: u32,
    },
    Recv,
    Close,
}

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
    /// smoltcp's random seed (initial sequence numbers).
    pub seed: u64,
}

/// The TCP component.
pub struct Tcp {
    ports: TcpPorts,
    mtu: usize,
    iface: Interface,
    sockets: SocketSet<'static>,
    clients: Vec<Client>,
    next_port: u16,
    /// When smoltcp next needs a poll (timers), as of the last poll.
    next_poll_ns: Option<Nanos>,
}

const EPHEMERAL_FIRST: u16 = 49152;

impl Tcp {
    pub fn new(mut ports: TcpPorts, cfg: TcpConfig, now_ns: Nanos) -> Self {
        let mut dev = device(&mut ports, cfg.mtu);
        let iface = new_interface(cfg.addr, cfg.seed, &mut dev, now_ns);
        let mut sockets = SocketSet::new(Vec::new());
        let clients = (0..ports.clients.len())
            .map(|_| Client { handle: sockets.add(new_socket(cfg.socket)), pending: None })
            .collect();
        let next_port = EPHEMERAL_FIRST + (cfg.seed % 1000) as u16;
        Tcp { ports, mtu: cfg.mtu, iface, sockets, clients, next_port, next_poll_ns: None }
    }

    /// Starts a call; returns an immediate reply if it fails at once.
    fn start(&mut self, client: usize, call: Call) -> Option<Reply> {
        let c = &mut self.clients[client];
        if c.pending.is_some() {
            // The protocol allows one outstanding call per client.
            return Some(Reply::Error(SockError::InvalidState));
        }
        let sock = self.sockets.get_mut::<tcp::Socket>(c.handle);
        let ok = match call {
            Call::Connect { addr, port } => {
                if sock.state() == tcp::State::TimeWait {
                    sock.abort();
                }
                let local = self.next_port;
                self.next_port = if local == u16::MAX { EPHEMERAL_FIRST } else { local + 1 };
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
                sock.close();
                Some(Pending::Close)
            }
        };
        match ok {
            Some(p) => {
                c.pending = Some(p);
                None
            }
            None => {
                if let Call::Send { data } = call {
                    self.ports.clients[client].send_free.free(data.buf);
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
        let pools = &mut self.ports.clients[client];
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
                    pools.send_free.free(data.buf);
                    Some(Reply::Error(SockError::Reset))
                } else {
                    let n = pools.send_free.pool().with(data.buf, |b| {
                        sock.send_slice(&b[done as usize..data.len as usize]).unwrap_or(0)
                    });
                    copied = n as u64;
                    let done = done + n as u32;
                    if done == data.len {
                        pools.send_free.free(data.buf);
                        Some(Reply::Sent { len: data.len })
                    } else {
                        c.pending = Some(Pending::Send { data, done });
                        None
                    }
                }
            }
            Pending::Recv => {
                if sock.can_recv() {
                    match pools.recv_alloc.alloc() {
                        // The client has not freed its last buffer yet.
                        None => None,
                        Some(buf) => {
                            let cap = pools.recv_alloc.pool().buf_bytes();
                            let len = pools.recv_alloc.pool().with(buf, |b| {
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
                            copied = len as u64;
                            Some(Reply::Data { data: Frame { buf, len: len as u32 } })
                        }
                    }
                } else {
                    match sock.recv(|_| (0, ())) {
                        Err(tcp::RecvError::Finished) => Some(Reply::Eof),
                        Err(tcp::RecvError::InvalidState) => Some(Reply::Error(SockError::Reset)),
                        Ok(()) => None,
                    }
                }
            }
            Pending::Close => match state {
                tcp::State::Closed | tcp::State::TimeWait | tcp::State::FinWait2 => Some(Reply::Closed),
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
                self.ports.to_sc.push(Tagged { client: client as u16, msg: r });
                p.add(1, 0);
            }
            if copied > 0 {
                // Only a completed receive copies out; a send copies in.
                let out = matches!(reply, Some(Reply::Data { .. }));
                self.ports.common.counters.add(if out { BYTES_RECEIVED } else { BYTES_SENT }, copied);
                p.add(0, copied);
            }
        }
    }

    /// One pass of smoltcp over the channels.
    fn poll_iface(&mut self, now_ns: Nanos) -> Progress {
        let mut dev = device(&mut self.ports, self.mtu);
        self.iface.poll(smol_now(now_ns), &mut dev, &mut self.sockets);
        let (i, o, n) = (dev.frames_in, dev.frames_out, dev.no_tx_buffer);
        let c = &self.ports.common.counters;
        c.add(FRAMES_IN, i);
        c.add(FRAMES_OUT, o);
        c.add(NO_TX_BUFFER, n);
        Progress { messages: i + o, bytes: 0 }
    }
}

fn device(ports: &mut TcpPorts, mtu: usize) -> ChannelDevice<'_> {
    ChannelDevice {
        rx: &mut ports.from_ip,
        rx_free: &mut ports.rx_free,
        tx: &mut ports.to_ip,
        tx_alloc: &mut ports.tx_alloc,
        mtu,
        frames_in: 0,
        frames_out: 0,
        no_tx_buffer: 0,
    }
}

impl Component for Tcp {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Tcp
    }

    fn poll(&mut self, now_ns: Nanos) -> Progress {
        // TCP's crash point: there is no message to keep, its state is the
        // connections, and a crash loses them (the host does not restart it).
        self.ports.common.crash.check(ComponentKind::Tcp);
        let mut p = Progress::IDLE;
        // 1. New calls from the syscall server.
        while let Some(t) = self.ports.from_sc.peek() {
            self.ports.from_sc.commit();
            self.ports.common.counters.add(CALLS, 1);
            p.add(1, 0);
            if let Some(r) = self.start(t.client as usize, t.msg) {
                self.ports.to_sc.push(Tagged { client: t.client, msg: r });
            }
        }
        // 2. Copy queued sends in and received data out, so that 3 sends
        //    what was just queued and 4 hands over what 3 received.
        self.advance_all(&mut p);
        // 3. smoltcp: receive, timers, transmit.
        p += self.poll_iface(now_ns);
        // 4. Complete the calls the packets allowed, and send what they queued.
        let before = p;
        self.advance_all(&mut p);
        if p != before {
            p += self.poll_iface(now_ns);
        }
        self.next_poll_ns = self.iface.poll_at(smol_now(now_ns), &self.sockets).map(nanos_of);
        // Frees before replies: a client that sees its reply finds its
        // buffer returned.
        let ports = &mut self.ports;
        ports.from_ip.release();
        ports.from_sc.release();
        ports.rx_free.flush();
        for c in &mut ports.clients {
            c.send_free.flush();
        }
        ports.to_ip.publish();
        ports.to_sc.publish();
        p
    }

    fn has_work(&self) -> bool {
        let p = &self.ports;
        p.from_ip.has_work()
            || p.from_sc.has_work()
            || p.tx_alloc.refill_waiting()
            || p.clients.iter().any(|c| c.recv_alloc.refill_waiting())
    }

    fn deadline_ns(&self, _now_ns: Nanos) -> Option<Nanos> {
        self.next_poll_ns
    }

    fn inbound_fill(&self) -> f64 {
        self.ports.from_ip.fill().max(self.ports.from_sc.fill())
    }

    fn outbound_fill(&self) -> Vec<(ComponentKind, f64)> {
        vec![(ComponentKind::Ip, self.ports.to_ip.fill()), (ComponentKind::Syscall, self.ports.to_sc.fill())]
    }

    fn buffers_out(&mut self) -> usize {
        let p = &mut self.ports;
        p.tx_alloc.outstanding() + p.clients.iter_mut().map(|c| c.recv_alloc.outstanding()).sum::<usize>()
    }

    fn restart(&mut self) -> Result<(), NotRestartable> {
        Err(NotRestartable(ComponentKind::Tcp))
    }

    fn common(&self) -> &Common {
        &self.ports.common
    }
}
