//! A monolithic smoltcp stack: interface, one TCP socket and the iperf-like
//! application in one poll loop, straight on a wire port — the paper's
//! "stack on a single core" (§4.5), the baseline B1, and a peer for the
//! split stack built from different code.
//!
//! smoltcp computes and verifies every checksum itself here, so a split
//! stack talking to a monolithic one has its IP component's checksums
//! checked by independent code.

use std::net::Ipv4Addr;
use std::sync::Arc;

use dyncore_core::Nanos;
use smoltcp::iface::{Interface, SocketHandle, SocketSet};
use smoltcp::phy::{self, Device, DeviceCapabilities};
use smoltcp::socket::tcp;
use smoltcp::time::Instant as SmolInstant;

use crate::app::{App, Phase, StreamReport, StreamState};
use crate::chan::Bell;
use crate::component::Progress;
use crate::stream::{StreamGen, StreamVerifier};
use crate::tcp::{SocketConfig, capabilities, nanos_of, new_interface, new_socket, smol_now};
use crate::wire::WirePort;

/// What the monolithic stack's application does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MonoRole {
    /// Connect to `peer` and send `total` bytes of the stream for `seed`.
    Send { peer: (Ipv4Addr, u16), total: u64, seed: u64 },
    /// Accept one connection on `port` and receive until the peer closes.
    Receive { port: u16, verify_seed: Option<u64> },
}

/// The device: frames straight to and from the wire.
struct WireDevice {
    wire: Box<dyn WirePort>,
    rx: Vec<u8>,
    tx: Vec<u8>,
    frames: u64,
}

struct MonoRx<'a>(&'a [u8]);

struct MonoTx<'a> {
    wire: &'a mut dyn WirePort,
    buf: &'a mut Vec<u8>,
    frames: &'a mut u64,
}

impl phy::RxToken for MonoRx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.0)
    }
}

impl phy::TxToken for MonoTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        self.buf.clear();
        self.buf.resize(len, 0);
        let r = f(self.buf);
        // `can_send` was true when the token was made and nothing sent since.
        if self.wire.send(self.buf).is_err() {
            unreachable!("the wire refused a frame after saying it had room");
        }
        *self.frames += 1;
        r
    }
}

impl Device for WireDevice {
    type RxToken<'a>
        = MonoRx<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = MonoTx<'a>
    where
        Self: 'a;

    fn receive(&mut self, _t: SmolInstant) -> Option<(MonoRx<'_>, MonoTx<'_>)> {
        if !self.wire.can_send() || !self.wire.recv(&mut self.rx) {
            return None;
        }
        self.frames += 1;
        Some((
            MonoRx(&self.rx),
            MonoTx { wire: self.wire.as_mut(), buf: &mut self.tx, frames: &mut self.frames },
        ))
    }

    fn transmit(&mut self, _t: SmolInstant) -> Option<MonoTx<'_>> {
        if !self.wire.can_send() {
            return None;
        }
        Some(MonoTx { wire: self.wire.as_mut(), buf: &mut self.tx, frames: &mut self.frames })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        capabilities(self.wire.mtu(), false)
    }
}

/// The monolithic stack with its application.
pub struct Mono {
    dev: WireDevice,
    iface: Interface,
    sockets: SocketSet<'static>,
    handle: SocketHandle,
    role: MonoRole,
    stream: Option<StreamGen>,
    verifier: Option<StreamVerifier>,
    /// The application's buffer (what a `send`/`recv` call would copy).
    chunk: Vec<u8>,
    chunk_off: usize,
    st: StreamState,
    next_poll_ns: Option<Nanos>,
    local_port: u16,
}

/// Bytes the application moves per call (like the split stack's buffers).
const CHUNK_BYTES: usize = 64 * 1024;

impl Mono {
    pub fn new(
        wire: Box<dyn WirePort>,
        addr: Ipv4Addr,
        socket: SocketConfig,
        seed: u64,
        role: MonoRole,
        now_ns: Nanos,
    ) -> Self {
        let mut dev = WireDevice { wire, rx: Vec::new(), tx: Vec::new(), frames: 0 };
        let iface = new_interface(addr, seed, &mut dev, now_ns);
        let mut sockets = SocketSet::new(Vec::new());
        let handle = sockets.add(new_socket(socket));
        let (stream, verifier) = match role {
            MonoRole::Send { seed, .. } => (Some(StreamGen::new(seed)), None),
            MonoRole::Receive { verify_seed, .. } => (None, verify_seed.map(StreamVerifier::new)),
        };
        Mono {
            dev,
            iface,
            sockets,
            handle,
            role,
            stream,
            verifier,
            chunk: Vec::new(),
            chunk_off: 0,
            st: StreamState::new(),
            next_poll_ns: None,
            local_port: 49152 + (seed % 1000) as u16,
        }
    }

    pub fn phase(&self) -> &Phase {
        &self.st.phase
    }

    /// Frames the stack received and sent.
    pub fn frames(&self) -> u64 {
        self.dev.frames
    }

    /// Where received bytes first differ from the stream (receiver with a seed).
    pub fn first_mismatch(&self) -> Option<u64> {
        self.verifier.as_ref().and_then(StreamVerifier::first_mismatch)
    }

    /// The application's side: move bytes between its chunk and the socket.
    fn app(&mut self, now_ns: Nanos) -> u64 {
        let sock = self.sockets.get_mut::<tcp::Socket>(self.handle);
        let state = sock.state();
        match (&self.st.phase, self.role) {
            (Phase::Start, MonoRole::Send { peer, .. }) => {
                match sock.connect(self.iface.context(), peer, self.local_port) {
                    Ok(()) => self.st.phase = Phase::Connecting,
                    Err(e) => self.st.phase = Phase::Failed(format!("connect: {e:?}")),
                }
                0
            }
            (Phase::Start, MonoRole::Receive { port, .. }) => {
                match sock.listen(port) {
                    Ok(()) => self.st.phase = Phase::Connecting,
                    Err(e) => self.st.phase = Phase::Failed(format!("listen: {e:?}")),
                }
                0
            }
            (Phase::Connecting, _) => {
                if matches!(state, tcp::State::Established | tcp::State::CloseWait) {
                    self.st.phase = Phase::Streaming;
                    self.st.started_ns = Some(now_ns);
                } else if state == tcp::State::Closed {
                    self.st.phase = Phase::Failed("connection refused or reset".into());
                }
                0
            }
            (Phase::Streaming, MonoRole::Send { total, .. }) => {
                let stream = self.stream.as_mut().expect("a sender has a generator");
                if self.chunk_off == self.chunk.len() {
                    let n = (total - stream.position()).min(CHUNK_BYTES as u64) as usize;
                    self.chunk.resize(n, 0);
                    stream.fill(&mut self.chunk);
                    self.chunk_off = 0;
                }
                let n = sock.send_slice(&self.chunk[self.chunk_off..]).unwrap_or(0);
                self.st.hash.update(&self.chunk[self.chunk_off..self.chunk_off + n]);
                self.chunk_off += n;
                if self.st.hash.digest().bytes == total {
                    sock.close();
                    self.st.phase = Phase::Closing;
                } else if !sock.may_send() {
                    self.st.phase = Phase::Failed("connection reset while sending".into());
                }
                n as u64
            }
            (Phase::Streaming, MonoRole::Receive { .. }) => {
                self.chunk.resize(CHUNK_BYTES, 0);
                match sock.recv_slice(&mut self.chunk) {
                    Ok(n) => {
                        self.st.hash.update(&self.chunk[..n]);
                        if let Some(v) = &mut self.verifier {
                            v.update(&self.chunk[..n]);
                        }
                        n as u64
                    }
                    Err(tcp::RecvError::Finished) => {
                        self.st.finished_ns = Some(now_ns);
                        sock.close();
                        self.st.phase = Phase::Closing;
                        0
                    }
                    Err(tcp::RecvError::InvalidState) => {
                        self.st.phase = Phase::Failed("connection reset while receiving".into());
                        0
                    }
                }
            }
            // The sender closed first: a clean close passes TIME-WAIT (10 s
            // long, so it is seen); CLOSED straight from FIN-WAIT means
            // smoltcp aborted it (a reset, or its timeout) with something
            // unacknowledged.
            (Phase::Closing, MonoRole::Send { .. }) if state == tcp::State::Closed => {
                self.st.phase = Phase::Failed("the close was aborted (reset or timed out)".into());
                0
            }
            (Phase::Closing, _) => {
                // Done once both FINs are acknowledged (by us too): an
                // application that stopped polling at FIN-WAIT-2 would leave
                // its peer's FIN unanswered, since here the stack stops with it.
                if matches!(state, tcp::State::Closed | tcp::State::TimeWait) {
                    self.st.finished_ns.get_or_insert(now_ns);
                    self.st.phase = Phase::Done;
                }
                0
            }
            (Phase::Done | Phase::Failed(_), _) => 0,
        }
    }
}

impl App for Mono {
    fn poll(&mut self, now_ns: Nanos) -> Progress {
        let frames_before = self.dev.frames;
        let mut bytes = self.app(now_ns);
        self.iface.poll(smol_now(now_ns), &mut self.dev, &mut self.sockets);
        bytes += self.app(now_ns);
        self.iface.poll(smol_now(now_ns), &mut self.dev, &mut self.sockets);
        self.dev.wire.flush();
        self.next_poll_ns = self.iface.poll_at(smol_now(now_ns), &self.sockets).map(nanos_of);
        Progress { messages: self.dev.frames - frames_before, bytes }
    }

    fn is_done(&self) -> bool {
        self.st.is_done()
    }

    fn has_work(&self) -> bool {
        self.dev.wire.has_work()
    }

    fn deadline_ns(&self) -> Option<Nanos> {
        self.next_poll_ns
    }

    fn bell(&self) -> &Arc<Bell> {
        self.dev.wire.bell()
    }

    fn report(&self) -> StreamReport {
        self.st.report()
    }

    fn error(&self) -> Option<&str> {
        self.st.error()
    }
}
