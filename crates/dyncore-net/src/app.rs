//! The application: an iperf-like sender and receiver over the syscall
//! server's sockets, each hashing the stream it sends or receives (see
//! [`crate::stream`]) so the two digests can be compared.
//!
//! Both are state machines polled like components (one call outstanding at
//! a time, as a synchronous caller), so they run in the one-thread host as
//! well as on threads of their own, where a host parks them on their
//! socket's bell between replies.
//!
//! Each keeps a record of its connections ([`Connection`]): what went
//! through it, and whether it completed or was reset. One made with
//! [`Sender::reconnect`] / [`Receiver::reconnect`] opens a new connection
//! after a reset and carries on (the sender sends the rest of its bytes on
//! it, as a new stream: connection `k` carries the stream for
//! [`connection_seed`]`(seed, k)`), as an application would after its stack
//! restarted TCP.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dyncore_core::Nanos;

use crate::chan::Bell;
use crate::component::Progress;
use crate::proto::SockError;
use crate::stream::{Digest, StreamGen, StreamHash, StreamVerifier};
use crate::syscall::{Completion, Socket, UserCall};

/// Anything a host polls besides components: the applications.
pub trait App: Send {
    fn poll(&mut self, now_ns: Nanos) -> Progress;
    /// Finished, successfully or not.
    fn is_done(&self) -> bool;
    /// Whether a reply waits (a parked application's wake condition).
    fn has_work(&self) -> bool;
    /// The latest time it must be polled again without work (timers of a
    /// stack it runs itself, as the monolithic stack does).
    fn deadline_ns(&self) -> Option<Nanos> {
        None
    }
    fn bell(&self) -> &Arc<Bell>;
    /// The stream so far (the current connection's).
    fn report(&self) -> StreamReport;
    /// Why it failed, if it did.
    fn error(&self) -> Option<&str>;
    /// Every connection that ended, in order.
    fn connections(&self) -> &[Connection] {
        &[]
    }
}

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Closed after the whole stream.
    Completed,
    /// Reset (the stack's TCP restarted, or the peer's).
    Reset,
}

/// One connection of an application, as it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    /// The seed of the stream it carried.
    pub seed: u64,
    /// What went through it: bytes accepted by send calls, or received.
    pub digest: Digest,
    /// The bytes of a send call that a reset interrupted: TCP may have
    /// sent some of them before it crashed, so a receiver may have got up
    /// to this many bytes more than `digest` counts.
    pub interrupted: u64,
    /// Where the received bytes first differed from the stream (a
    /// receiver that verifies; `None`: nowhere).
    pub first_mismatch: Option<u64>,
    pub outcome: Outcome,
    pub started_ns: Option<Nanos>,
    pub ended_ns: Nanos,
}

/// Checks a sender's connection against the receiver's paired with it
/// (connection `k` of each); what the check found, or what is wrong.
///
/// What it checks holds when only the senders' stack restarts TCP (every
/// campaign here crashes the stack under test, where the senders are):
///
/// * A **completed** sender's connection delivered exactly what was sent,
///   and the receiver completed it too: its close completed only once the
///   receiver's TCP acknowledged every byte and the FIN, and a reset
///   connection is always told to its application, even when its next call
///   is the close ([`crate::tcp_reset`], 2), so a completed connection was
///   never reset.
/// * A **reset** one delivered an intact prefix of what its send calls
///   took, plus at most the send call the reset interrupted (TCP may have
///   sent part of it); the rest was in the crashed TCP's memory.
/// * The receiver verified the bytes against the stream of the sender's
///   seed (a receiver that does not verify has seed 0: not checked).
pub fn check_pair(s: &Connection, r: &Connection) -> Result<&'static str, String> {
    if r.seed != 0 && r.seed != s.seed {
        return Err(format!("paired with another stream (seeds {:#x} and {:#x})", s.seed, r.seed));
    }
    if let Some(b) = r.first_mismatch {
        return Err(format!("byte {b} differs from the stream"));
    }
    match (s.outcome, r.outcome) {
        (Outcome::Completed, Outcome::Completed) if s.digest == r.digest => Ok("checksums match"),
        (Outcome::Completed, o) => Err(format!("sent {}, received {} ({o:?})", s.digest, r.digest)),
        (Outcome::Reset, _) if r.digest.bytes <= s.digest.bytes + s.interrupted => {
            Ok(if r.seed != 0 { "prefix intact" } else { "prefix (unchecked)" })
        }
        (Outcome::Reset, _) => Err(format!("received {} bytes, more than were sent", r.digest.bytes)),
    }
}

/// The stream seed of connection `k` of an application seeded `seed`.
pub fn connection_seed(seed: u64, k: u64) -> u64 {
    seed.wrapping_add(k.wrapping_mul(0x9e37_79b9_7f4a_7c15))
}

/// Where an application is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    Start,
    Connecting,
    Streaming,
    Closing,
    Done,
    Failed(String),
}

/// What an application knows of its stream: where it is, the hash of the
/// bytes so far, and when the stream started and ended.
#[derive(Debug, Clone)]
pub struct StreamState {
    pub phase: Phase,
    pub hash: StreamHash,
    pub started_ns: Option<Nanos>,
    pub finished_ns: Option<Nanos>,
}

impl Default for StreamState {
    fn default() -> Self {
        StreamState::new()
    }
}

impl StreamState {
    pub fn new() -> Self {
        StreamState { phase: Phase::Start, hash: StreamHash::new(), started_ns: None, finished_ns: None }
    }

    pub fn report(&self) -> StreamReport {
        StreamReport {
            digest: self.hash.digest(),
            started_ns: self.started_ns,
            finished_ns: self.finished_ns,
        }
    }

    pub fn error(&self) -> Option<&str> {
        match &self.phase {
            Phase::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// Finished, successfully or not.
    pub fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done | Phase::Failed(_))
    }
}

/// Timing and the digest of a finished (or running) stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamReport {
    pub digest: Digest,
    /// When the connection was established and when the stream ended.
    pub started_ns: Option<Nanos>,
    pub finished_ns: Option<Nanos>,
}

impl StreamReport {
    /// Payload bits per second over the stream's duration.
    pub fn bits_per_s(&self) -> Option<f64> {
        let (s, f) = (self.started_ns?, self.finished_ns?);
        (f > s).then(|| self.digest.bytes as f64 * 8.0 * 1e9 / (f - s) as f64)
    }
}

/// A refused connection is retried this often, so a sender started at the
/// same time as its receiver waits for it to listen (as a client waits for a
/// server coming up), for at most [`CONNECT_ATTEMPTS`] tries.
pub const CONNECT_RETRY_NS: Nanos = 10_000_000;
pub const CONNECT_ATTEMPTS: u32 = 100;

/// Sends `total` bytes of the stream for `seed` to a peer, then closes.
pub struct Sender {
    sock: Socket,
    peer: (Ipv4Addr, u16),
    total: u64,
    stream: StreamGen,
    chunk: Vec<u8>,
    /// Bytes of `chunk` already taken by a send call.
    chunk_off: usize,
    /// Bytes of the outstanding send call.
    in_flight: usize,
    st: StreamState,
    attempts: u32,
    /// When to try connecting again after a refusal.
    retry_at_ns: Option<Nanos>,
    /// Set (by a Ctrl-C handler): stop sending and close cleanly.
    cancel: Option<Arc<AtomicBool>>,
    seed: u64,
    /// Open a new connection after a reset.
    reconnect: bool,
    conns: Vec<Connection>,
    /// Bytes sent on earlier connections.
    sent_before: u64,
    /// What a receiver that reconnects needs to know to stop waiting.
    progress: Arc<SenderProgress>,
}

/// A sender's progress as its receiver sees it ([`Receiver::until_done`]).
#[derive(Debug, Default)]
pub struct SenderProgress {
    done: AtomicBool,
    /// Connections that ended.
    connections: std::sync::atomic::AtomicU64,
}

impl SenderProgress {
    /// Done, after `connections` connections.
    pub fn done_after(&self) -> Option<u64> {
        self.done.load(Ordering::Acquire).then(|| self.connections.load(Ordering::Acquire))
    }
}

impl Sender {
    pub fn new(sock: Socket, peer: (Ipv4Addr, u16), total: u64, seed: u64) -> Self {
        Sender {
            sock,
            peer,
            total,
            stream: StreamGen::new(seed),
            chunk: Vec::new(),
            chunk_off: 0,
            in_flight: 0,
            st: StreamState::new(),
            attempts: 0,
            retry_at_ns: None,
            cancel: None,
            seed,
            reconnect: false,
            conns: Vec::new(),
            sent_before: 0,
            progress: Arc::default(),
        }
    }

    /// Its progress, for its receiver ([`Receiver::until_done`]).
    pub fn progress(&self) -> Arc<SenderProgress> {
        self.progress.clone()
    }

    /// After a reset, sends the rest of its bytes on a new connection
    /// (module docs).
    pub fn reconnect(mut self) -> Self {
        self.reconnect = true;
        self
    }

    /// Bytes this connection is to carry.
    fn goal(&self) -> u64 {
        self.total - self.sent_before
    }

    /// Ends the current connection with `outcome`.
    fn end_connection(&mut self, outcome: Outcome, now_ns: Nanos) {
        // In `Streaming` the call outstanding is always a send.
        let interrupted = if outcome == Outcome::Reset && self.st.phase == Phase::Streaming {
            self.in_flight as u64
        } else {
            0
        };
        self.conns.push(Connection {
            seed: connection_seed(self.seed, self.conns.len() as u64),
            digest: self.st.hash.digest(),
            interrupted,
            first_mismatch: None,
            outcome,
            started_ns: self.st.started_ns,
            ended_ns: now_ns,
        });
        self.progress.connections.store(self.conns.len() as u64, Ordering::Release);
    }

    /// A reset connection: on to the next, or done if nothing is left (the
    /// bytes the reset lost are lost: a new connection carries a new
    /// stream).
    fn next_connection(&mut self, now_ns: Nanos) {
        self.end_connection(Outcome::Reset, now_ns);
        self.sent_before += self.st.hash.digest().bytes;
        self.stream = StreamGen::new(connection_seed(self.seed, self.conns.len() as u64));
        self.chunk.clear();
        self.chunk_off = 0;
        self.st = StreamState::new();
        self.attempts = 0;
        self.retry_at_ns = None;
        if self.goal() == 0 || self.cancelled() {
            self.st.phase = Phase::Done;
            self.st.finished_ns = Some(now_ns);
        }
    }

    /// Stops the stream early, closing the connection cleanly, once `flag`
    /// is set (the receiver still gets every byte sent, then EOF).
    pub fn cancel_on(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancel = Some(flag);
        self
    }

    fn cancelled(&self) -> bool {
        self.cancel.as_ref().is_some_and(|c| c.load(Ordering::Acquire))
    }

    pub fn phase(&self) -> &Phase {
        &self.st.phase
    }

    fn fail(&mut self, what: &str, e: SockError) {
        self.st.phase = Phase::Failed(format!("sender: {what}: {e}"));
    }

    /// Submits the next send (refilling the chunk from the stream).
    fn send_next(&mut self) {
        if self.chunk_off == self.chunk.len() {
            let n = (self.goal() - self.stream.position()).min(self.sock.send_max() as u64) as usize;
            self.chunk.resize(n, 0);
            self.stream.fill(&mut self.chunk);
            self.chunk_off = 0;
        }
        let taken =
            self.sock.submit(UserCall::Send(&self.chunk[self.chunk_off..])).expect("no call outstanding");
        self.in_flight = taken;
    }

    /// Handles a completion.
    fn complete(&mut self, c: Completion, now_ns: Nanos, p: &mut Progress) {
        match (&self.st.phase, c) {
            (Phase::Connecting, Completion::Connected) => {
                self.st.phase = Phase::Streaming;
                self.st.started_ns = Some(now_ns);
            }
            (Phase::Streaming, Completion::Sent(n)) => {
                debug_assert_eq!(n, self.in_flight);
                self.st.hash.update(&self.chunk[self.chunk_off..self.chunk_off + n]);
                self.chunk_off += n;
                p.add(1, n as u64);
            }
            (Phase::Closing, Completion::Closed) => {
                self.st.phase = Phase::Done;
                self.st.finished_ns = Some(now_ns);
                self.end_connection(Outcome::Completed, now_ns);
            }
            (Phase::Connecting, Completion::Error(SockError::Refused))
                if self.attempts < CONNECT_ATTEMPTS =>
            {
                self.st.phase = Phase::Start;
                self.retry_at_ns = Some(now_ns + CONNECT_RETRY_NS);
            }
            // The stack's TCP restarted while this connect was in flight:
            // there was no connection yet; try again.
            (Phase::Connecting, Completion::Error(SockError::Reset)) if self.reconnect => {
                self.st.phase = Phase::Start;
                self.retry_at_ns = None;
            }
            (Phase::Streaming | Phase::Closing, Completion::Error(SockError::Reset)) if self.reconnect => {
                self.next_connection(now_ns)
            }
            (_, Completion::Error(e)) => self.fail("call failed", e),
            (phase, c) => self.st.phase = Phase::Failed(format!("sender: unexpected {c:?} while {phase:?}")),
        }
    }
}

impl App for Sender {
    fn poll(&mut self, now_ns: Nanos) -> Progress {
        let mut p = Progress::IDLE;
        if self.st.phase == Phase::Start && self.retry_at_ns.is_none_or(|t| now_ns >= t) {
            let (addr, port) = self.peer;
            self.sock.submit(UserCall::Connect { addr, port }).expect("no call outstanding");
            self.st.phase = Phase::Connecting;
            self.attempts += 1;
            p.add(1, 0);
        }
        let Some(c) = self.sock.poll_reply(&mut |_| ()) else { return p };
        self.complete(c, now_ns, &mut p);
        if self.st.is_done() {
            self.progress.done.store(true, Ordering::Release);
        }
        if self.st.phase == Phase::Streaming {
            if self.st.hash.digest().bytes == self.goal() || self.cancelled() {
                self.sock.submit(UserCall::Close).expect("no call outstanding");
                self.st.phase = Phase::Closing;
            } else {
                self.send_next();
            }
        }
        p
    }

    fn is_done(&self) -> bool {
        self.st.is_done()
    }

    fn has_work(&self) -> bool {
        // A sender waiting to retry a refused connection has no work
        // before its deadline.
        (self.st.phase == Phase::Start && self.retry_at_ns.is_none()) || self.sock.has_reply()
    }

    fn deadline_ns(&self) -> Option<Nanos> {
        if self.st.phase == Phase::Start { self.retry_at_ns } else { None }
    }

    fn bell(&self) -> &Arc<Bell> {
        self.sock.bell()
    }

    fn report(&self) -> StreamReport {
        self.st.report()
    }

    fn error(&self) -> Option<&str> {
        self.st.error()
    }

    fn connections(&self) -> &[Connection] {
        &self.conns
    }
}

/// Accepts one connection, receives until the peer closes, hashes what it
/// got (and, optionally, compares it with the stream byte by byte).
pub struct Receiver {
    sock: Socket,
    port: u16,
    verify_seed: Option<u64>,
    verifier: Option<StreamVerifier>,
    st: StreamState,
    reconnect: bool,
    conns: Vec<Connection>,
    /// Its sender's progress: waiting for a next connection once the
    /// sender is done and every connection it had is accounted for here
    /// means there is none.
    sender: Option<Arc<SenderProgress>>,
    last_poll_ns: Nanos,
}

impl Receiver {
    /// `verify_seed`: compare with the stream for that seed as bytes arrive.
    pub fn new(sock: Socket, port: u16, verify_seed: Option<u64>) -> Self {
        Receiver {
            sock,
            port,
            verify_seed,
            verifier: verify_seed.map(StreamVerifier::new),
            st: StreamState::new(),
            reconnect: false,
            conns: Vec::new(),
            sender: None,
            last_poll_ns: 0,
        }
    }

    /// After a reset, accepts the next connection (module docs).
    pub fn reconnect(mut self) -> Self {
        self.reconnect = true;
        self
    }

    /// Done when, after a reset, it waits for a next connection, the
    /// sender is done, and this side has seen as many connections end as
    /// the sender had: a reset may lose the end of a stream, and with it
    /// the EOF that would have ended this side.
    pub fn until_done(mut self, sender: Arc<SenderProgress>) -> Self {
        self.sender = Some(sender);
        self
    }

    /// Waiting for a connection after a reset.
    fn waiting_after_reset(&self) -> bool {
        self.st.phase == Phase::Connecting && !self.conns.is_empty()
    }

    fn end_connection(&mut self, outcome: Outcome, now_ns: Nanos) {
        let k = self.conns.len() as u64;
        self.conns.push(Connection {
            seed: self.verify_seed.map_or(0, |s| connection_seed(s, k)),
            digest: self.st.hash.digest(),
            interrupted: 0,
            first_mismatch: self.first_mismatch(),
            outcome,
            started_ns: self.st.started_ns,
            ended_ns: now_ns,
        });
    }

    /// The current connection was reset: accept the next.
    fn next_connection(&mut self, now_ns: Nanos) {
        self.end_connection(Outcome::Reset, now_ns);
        let k = self.conns.len() as u64;
        self.verifier = self.verify_seed.map(|s| StreamVerifier::new(connection_seed(s, k)));
        self.st = StreamState::new();
    }

    pub fn phase(&self) -> &Phase {
        &self.st.phase
    }

    /// Where the received bytes first differ from the stream (with a seed).
    pub fn first_mismatch(&self) -> Option<u64> {
        self.verifier.as_ref().and_then(StreamVerifier::first_mismatch)
    }
}

impl App for Receiver {
    fn poll(&mut self, now_ns: Nanos) -> Progress {
        let mut p = Progress::IDLE;
        self.last_poll_ns = now_ns;
        let seen = self.conns.len() as u64;
        if self.waiting_after_reset() && self.sender.as_ref().and_then(|s| s.done_after()) == Some(seen) {
            self.st.phase = Phase::Done;
            return p;
        }
        if self.st.phase == Phase::Start {
            self.sock.submit(UserCall::Accept { port: self.port }).expect("no call outstanding");
            self.st.phase = Phase::Connecting;
            p.add(1, 0);
        }
        let (hash, verifier) = (&mut self.st.hash, &mut self.verifier);
        let Some(c) = self.sock.poll_reply(&mut |d| {
            hash.update(d);
            if let Some(v) = verifier {
                v.update(d);
            }
        }) else {
            return p;
        };
        let next = match (&self.st.phase, c) {
            (Phase::Connecting, Completion::Connected) => {
                self.st.phase = Phase::Streaming;
                self.st.started_ns = Some(now_ns);
                Some(UserCall::Recv)
            }
            (Phase::Streaming, Completion::Received(n)) => {
                p.add(1, n as u64);
                Some(UserCall::Recv)
            }
            (Phase::Streaming, Completion::Eof) => {
                self.st.finished_ns = Some(now_ns);
                self.st.phase = Phase::Closing;
                Some(UserCall::Close)
            }
            (Phase::Closing, Completion::Closed) => {
                self.st.phase = Phase::Done;
                self.end_connection(Outcome::Completed, now_ns);
                None
            }
            // The whole stream came (EOF); the close met a reset.
            (Phase::Closing, Completion::Error(SockError::Reset)) if self.reconnect => {
                self.st.phase = Phase::Done;
                self.end_connection(Outcome::Completed, now_ns);
                None
            }
            (Phase::Connecting, Completion::Error(SockError::Reset)) if self.reconnect => {
                self.st.phase = Phase::Start;
                None
            }
            (Phase::Streaming, Completion::Error(SockError::Reset)) if self.reconnect => {
                self.next_connection(now_ns);
                None
            }
            (_, Completion::Error(e)) => {
                self.st.phase = Phase::Failed(format!("receiver: call failed: {e}"));
                None
            }
            (phase, c) => {
                self.st.phase = Phase::Failed(format!("receiver: unexpected {c:?} while {phase:?}"));
                None
            }
        };
        if let Some(call) = next {
            self.sock.submit(call).expect("no call outstanding");
        }
        p
    }

    fn is_done(&self) -> bool {
        self.st.is_done()
    }

    fn has_work(&self) -> bool {
        self.st.phase == Phase::Start || self.sock.has_reply()
    }

    fn deadline_ns(&self) -> Option<Nanos> {
        // The sender's flag does not ring this side's bell: look again soon.
        (self.sender.is_some() && self.waiting_after_reset()).then(|| self.last_poll_ns + 1_000_000)
    }

    fn bell(&self) -> &Arc<Bell> {
        self.sock.bell()
    }

    fn report(&self) -> StreamReport {
        self.st.report()
    }

    fn error(&self) -> Option<&str> {
        self.st.error()
    }

    fn connections(&self) -> &[Connection] {
        &self.conns
    }
}
