//! The syscall server, and the application's side of it ([`Socket`]).
//!
//! An application's calls are synchronous: it makes one call, and that call
//! completes with exactly one reply. The syscall server turns each call into
//! an asynchronous message to TCP (tagged with the client), and TCP's
//! eventual reply back into the completion of that call, ringing the
//! client's bell so that a client parked in [`Socket::call`] wakes. It is the
//! stack's only rendezvous point, as in NewtOS, where it is the one server
//! that uses the kernel's synchronous IPC.
//!
//! A client blocks in [`Socket::call`] (spin, then park on its bell), or,
//! when it shares a thread with the stack (the one-thread host), submits
//! with [`Socket::submit`] and polls with [`Socket::poll_reply`]; either way
//! it has at most one call outstanding.
//!
//! The server holds no state of its own (calls and replies are in its
//! channels), so a restarted instance is its ports.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dyncore_core::Nanos;
use dyncore_ring::SpinPolicy;
use dyncore_ring::journal::{Journal, WordRef};

use crate::chan::{Bell, Channel, Frame, Inbox, Log, Outbox};
use crate::component::{
    Blueprint, Common, Component, ComponentKind, CrashPoint, Progress, State, StateBody, Tally, UpdateError,
    journal_of, only_version,
};
use crate::pool::{Alloc, Freer};
use crate::proto::{Call, Reply, SockError, Tagged};

/// One client's channels, as the server holds them.
#[derive(Clone)]
pub struct ClientLink {
    pub calls: Channel<Call>,
    pub replies: Channel<Reply>,
}

/// The syscall server's ports: what outlives its instances.
#[derive(Clone)]
pub struct SyscallPorts {
    pub clients: Vec<ClientLink>,
    pub to_tcp: Channel<Tagged<Call>>,
    pub from_tcp: Channel<Tagged<Reply>>,
    pub common: Common,
}

impl SyscallPorts {
    fn words(&self) -> Vec<WordRef> {
        let mut w = vec![self.to_tcp.head_word(), self.from_tcp.tail_word()];
        for c in &self.clients {
            w.push(c.calls.tail_word());
            w.push(c.replies.head_word());
        }
        w.extend(self.common.counters.words());
        w
    }
}

pub const COUNTERS: &[&str] = &["calls", "replies"];
const CALLS: usize = 0;
const REPLIES: usize = 1;

/// The syscall server's blueprint (see [`crate::component::Blueprint`]).
#[derive(Clone)]
pub struct SyscallBlueprint {
    ports: SyscallPorts,
    journal: Arc<Journal>,
}

impl SyscallBlueprint {
    pub fn new(ports: SyscallPorts) -> Self {
        let journal = journal_of(ports.words());
        SyscallBlueprint { ports, journal }
    }
}

impl Blueprint for SyscallBlueprint {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Syscall
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
        Box::new(SyscallServer {
            clients: p.clients.iter().map(|c| (c.calls.inbox(&log), c.replies.outbox(&log))).collect(),
            to_tcp: p.to_tcp.outbox(&log),
            from_tcp: p.from_tcp.inbox(&log),
            tally: Tally::attach(&p.common.counters, &log),
            common: p.common.clone(),
            journal: self.journal.clone(),
        })
    }

    fn at_version(&self, version: u32) -> Result<Arc<dyn Blueprint>, UpdateError> {
        only_version(ComponentKind::Syscall, version)?;
        Ok(Arc::new(self.clone()))
    }

    fn accepts(&self, state: &State) -> Result<(), UpdateError> {
        match (state.kind, &state.body) {
            (ComponentKind::Syscall, StateBody::Ports) => Ok(()),
            _ => Err(UpdateError(format!("the syscall server cannot start from {}'s state", state.kind))),
        }
    }

    fn build_from(&self, _state: State, now_ns: Nanos) -> Box<dyn Component> {
        self.build(now_ns)
    }
}

/// The syscall server component: one instance, attached to its ports.
pub struct SyscallServer {
    clients: Vec<(Inbox<Call>, Outbox<Reply>)>,
    to_tcp: Outbox<Tagged<Call>>,
    from_tcp: Inbox<Tagged<Reply>>,
    tally: Tally,
    common: Common,
    journal: Arc<Journal>,
}

impl Component for SyscallServer {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Syscall
    }

    fn poll(&mut self, _now_ns: Nanos) -> Progress {
        let mut p = Progress::IDLE;
        for (client, (calls, _)) in self.clients.iter_mut().enumerate() {
            while let Some(call) = calls.peek() {
                self.common.crash.check(ComponentKind::Syscall, CrashPoint::Logic);
                self.to_tcp.push(Tagged { client: client as u16, msg: call });
                calls.commit();
                self.tally.add(CALLS, 1);
                p.add(1, 0);
            }
            calls.release();
        }
        while let Some(t) = self.from_tcp.peek() {
            self.common.crash.check(ComponentKind::Syscall, CrashPoint::Logic);
            let (_, replies) =
                self.clients.get_mut(t.client as usize).expect("TCP replies only to known clients");
            replies.push(t.msg);
            self.from_tcp.commit();
            self.tally.add(REPLIES, 1);
            p.add(1, 0);
        }
        self.from_tcp.release();
        self.common.commit(ComponentKind::Syscall, &self.journal);
        p
    }

    fn has_work(&self) -> bool {
        self.from_tcp.has_work() || self.clients.iter().any(|(c, _)| c.has_work())
    }

    fn inbound_fill(&self) -> f64 {
        self.clients.iter().map(|(c, _)| c.fill()).fold(self.from_tcp.fill(), f64::max)
    }

    fn outbound_fill(&self) -> Vec<(ComponentKind, f64)> {
        // Replies to clients go to applications, not components.
        vec![(ComponentKind::Tcp, self.to_tcp.fill())]
    }

    fn export(&self) -> Result<State, UpdateError> {
        Ok(State { kind: ComponentKind::Syscall, version: 1, body: StateBody::Ports })
    }

    fn common(&self) -> &Common {
        &self.common
    }
}

/// A call as the application makes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserCall<'a> {
    Connect {
        addr: Ipv4Addr,
        port: u16,
    },
    Accept {
        port: u16,
    },
    /// Sends a prefix of the bytes (as much as one send buffer holds; see
    /// [`Socket::submit`]'s result).
    Send(&'a [u8]),
    Recv,
    Close,
}

/// How a call completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    Connected,
    Sent(usize),
    /// This many bytes were handed to the receive sink.
    Received(usize),
    Eof,
    Closed,
    Error(SockError),
}

/// Why a call could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// A call is already outstanding on this socket.
    Busy,
    /// No reply within the timeout (the call stays outstanding).
    TimedOut,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CallError::Busy => "a call is already outstanding on this socket",
            CallError::TimedOut => "no reply from the stack within the timeout",
        })
    }
}

impl std::error::Error for CallError {}

/// The application's handle on one socket of the stack.
pub struct Socket {
    calls: Outbox<Call>,
    replies: Inbox<Reply>,
    bell: Arc<Bell>,
    /// Send buffers: allocated here, freed by TCP.
    send_alloc: Alloc,
    /// Receive buffers: allocated by TCP, freed here.
    recv_free: Freer,
    outstanding: bool,
}

impl Socket {
    pub fn new(
        calls: Outbox<Call>,
        replies: Inbox<Reply>,
        bell: Arc<Bell>,
        send_alloc: Alloc,
        recv_free: Freer,
    ) -> Self {
        Socket { calls, replies, bell, send_alloc, recv_free, outstanding: false }
    }

    /// Largest send (one send buffer).
    pub fn send_max(&self) -> usize {
        self.send_alloc.pool().buf_bytes()
    }

    /// Starts a call. For `Send`, returns how many bytes it took (a prefix,
    /// at most [`Socket::send_max`]); 0 otherwise.
    pub fn submit(&mut self, call: UserCall<'_>) -> Result<usize, CallError> {
        if self.outstanding {
            return Err(CallError::Busy);
        }
        let (msg, taken) = match call {
            UserCall::Connect { addr, port } => (Call::Connect { addr, port }, 0),
            UserCall::Accept { port } => (Call::Accept { port }, 0),
            UserCall::Recv => (Call::Recv, 0),
            UserCall::Close => (Call::Close, 0),
            UserCall::Send(bytes) => {
                // One call outstanding and TCP frees a buffer before it
                // replies, so a pool of two never runs dry.
                let buf =
                    self.send_alloc.alloc().expect("send pool holds more buffers than calls outstanding");
                let n = bytes.len().min(self.send_max());
                self.send_alloc.pool().with(buf, |b| b.extend_from_slice(&bytes[..n]));
                (Call::Send { data: Frame { buf, len: n as u32 } }, n)
            }
        };
        self.calls.push(msg);
        self.calls.publish();
        self.outstanding = true;
        Ok(taken)
    }

    /// The completion of the outstanding call, if its reply has come.
    /// Received bytes are handed to `sink` (then the buffer is freed).
    pub fn poll_reply(&mut self, sink: &mut dyn FnMut(&[u8])) -> Option<Completion> {
        let reply = self.replies.peek()?;
        self.replies.commit();
        self.replies.release();
        self.outstanding = false;
        Some(match reply {
            Reply::Connected => Completion::Connected,
            Reply::Sent { len } => Completion::Sent(len as usize),
            Reply::Eof => Completion::Eof,
            Reply::Closed => Completion::Closed,
            Reply::Error(e) => Completion::Error(e),
            Reply::Data { data } => {
                self.recv_free.pool().with(data.buf, |b| sink(&b[..data.len as usize]));
                self.recv_free.free(data.buf);
                self.recv_free.flush();
                Completion::Received(data.len as usize)
            }
        })
    }

    /// Makes a call and waits for its completion: spins, then parks on the
    /// socket's bell. `Err(TimedOut)` leaves the call outstanding.
    pub fn call(
        &mut self,
        call: UserCall<'_>,
        sink: &mut dyn FnMut(&[u8]),
        timeout: Option<Duration>,
    ) -> Result<Completion, CallError> {
        self.submit(call)?;
        self.wait(sink, timeout)
    }

    /// Waits for the outstanding call's completion.
    pub fn wait(
        &mut self,
        sink: &mut dyn FnMut(&[u8]),
        timeout: Option<Duration>,
    ) -> Result<Completion, CallError> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            if let Some(c) = self.poll_reply(sink) {
                return Ok(c);
            }
            let replies = &self.replies;
            self.bell
                .waiter()
                .wait_until(&SpinPolicy::CLIENT, deadline, || replies.has_work().then_some(()))
                .ok_or(CallError::TimedOut)?;
        }
    }

    /// Whether a reply waits (a parked client's wake condition).
    pub fn has_reply(&self) -> bool {
        self.replies.has_work()
    }

    /// The bell the stack rings when a reply is published.
    pub fn bell(&self) -> &Arc<Bell> {
        &self.bell
    }
}
