//! The messages of the socket calls: application → syscall server → TCP,
//! and back. Each fits a ring item (a cache line); data travels in pool
//! buffers named by a [`Frame`].
//!
//! Protocol: a client has at most one call outstanding, and every call gets
//! exactly one reply (the syscall server and TCP never drop or invent one).
//! So the control channels hold at most one message per client.

use std::net::Ipv4Addr;

use crate::chan::Frame;

/// A call from an application, as the stack sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// Open a connection; replies `Connected` once established.
    Connect { addr: Ipv4Addr, port: u16 },
    /// Listen on a port and wait for one connection; replies `Connected`.
    Accept { port: u16 },
    /// Queue the bytes in a buffer of the client's send pool; replies
    /// `Sent` once TCP has taken all of them (and freed the buffer).
    Send { data: Frame },
    /// Wait for received bytes; replies `Data` (a buffer of the client's
    /// receive pool) or `Eof`.
    Recv,
    /// Close the sending side; replies `Closed` once the peer has
    /// acknowledged everything sent, including the FIN.
    Close,
}

/// Why a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SockError {
    /// The peer refused or never answered the connection.
    Refused,
    /// The connection was reset (or timed out) while in use.
    Reset,
    /// The call does not fit the socket's state (send before connect, ...).
    InvalidState,
}

impl std::fmt::Display for SockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SockError::Refused => "connection refused or unanswered",
            SockError::Reset => "connection reset or timed out",
            SockError::InvalidState => "call not valid in the socket's state",
        })
    }
}

impl std::error::Error for SockError {}

/// The reply to a [`Call`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Connected,
    Sent { len: u32 },
    Data { data: Frame },
    Eof,
    Closed,
    Error(SockError),
}

/// A message on the syscall server ↔ TCP channels: which client it is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tagged<T> {
    pub client: u16,
    pub msg: T,
}

const _: () = assert!(size_of::<Tagged<Call>>() <= 64 && size_of::<Tagged<Reply>>() <= 64);
