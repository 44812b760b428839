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
//! channels), so it restarts like IP.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dyncore_core::Nanos;
use dyncore_ring::SpinPolicy;

use crate::chan::{Bell, Frame, Inbox, Outbox};
use crate::component::{Common, Component, ComponentKind, NotRestartable, Progress};
use crate::pool::{Alloc, Freer};
use crate::proto::{Call, Reply, SockError, Tagged};

/// One client's channels, as the server holds them.
pub struct ClientLink {
    pub calls: Inbox<Call>,
    pub replies: Outbox<Reply>,
}

/// The syscall server's channels.
pub struct SyscallPorts {
    pub clients: Vec<ClientLink>,
    pub to_tcp: Outbox<Tagged<Call>>,
    pub from_tcp: Inbox<Tagged<Reply>>,
    pub common: Common,
}

pub const COUNTERS: &[&str] = &["calls", "replies"];
const CALLS: usize = 0;
const REPLIES: usize = 1;

/// The syscall server component.
pub struct SyscallServer {
    ports: SyscallPorts,
}

impl SyscallServer {
    pub fn new(ports: SyscallPorts) -> Self {
        SyscallServer { ports }
    }
}

impl Component for SyscallServer {
    fn kind(&self) -> ComponentKind {
        ComponentKind::Syscall
    }

    fn poll(&mut self, _now_ns: Nanos) -> Progress {
        let mut p = Progress::IDLE;
        let ports = &mut self.ports;
        for (client, link) in ports.clients.iter_mut().enumerate() {
            while let Some(call) = link.calls.peek() {
                ports.common.crash.check(ComponentKind::Syscall);
                ports.to_tcp.push(Tagged { client: client as u16, msg: call });
                link.calls.commit();
                ports.common.counters.add(CALLS, 1);
                p.add(1, 0);
            }
            link.calls.release();
        }
        while let Some(t) = ports.from_tcp.peek() {
            ports.common.crash.check(ComponentKind::Syscall);
            let link = ports.clients.get_mut(t.client as usize).expect("TCP replies only to known clients");
            link.replies.push(t.msg);
            ports.from_tcp.commit();
            ports.common.counters.add(REPLIES, 1);
            p.add(1, 0);
        }
        ports.from_tcp.release();
        ports.to_tcp.publish();
        for link in &mut ports.clients {
            link.replies.publish();
        }
        p
    }

    fn has_work(&self) -> bool {
        self.ports.from_tcp.has_work() || self.ports.clients.iter().any(|c| c.calls.has_work())
    }

    fn inbound_fill(&self) -> f64 {
        self.ports.clients.iter().map(|c| c.calls.fill()).fold(self.ports.from_tcp.fill(), f64::max)
    }

    fn outbound_fill(&self) -> Vec<(ComponentKind, f64)> {
        // Replies to clients go to applications, not components.
        vec![(ComponentKind::Tcp, self.ports.to_tcp.fill())]
    }

    fn restart(&mut self) -> Result<(), NotRestartable> {
        Ok(())
    }

    fn common(&self) -> &Common {
        &self.ports.common
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
