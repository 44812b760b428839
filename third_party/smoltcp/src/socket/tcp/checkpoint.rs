//! dyncore patch (see third_party/README.md): a checkpoint of a TCP
//! socket's connection state, and its restore into a fresh socket.
//!
//! A host whose TCP restarts in fresh memory (a crashed component of a
//! split network stack) resumes its connections from the last checkpoint
//! it kept outside that memory. The checkpoint is the connection's
//! state as the peer and the application could have seen it:
//!
//! * the state, the listen endpoint and the 4-tuple;
//! * the send side: the oldest unacknowledged sequence number (the start
//!   of the transmit buffer), the highest sent, the peer's window, window
//!   scale, MSS and SACK permission, and the RTT estimator;
//! * the receive side: the sequence number of the first byte of the
//!   receive buffer, the last acknowledgment and window advertised, the
//!   timestamp last seen, and whether the FIN arrived;
//! * how many bytes each buffer holds; the bytes themselves are read with
//!   [`Socket::checkpoint_rx_bytes`] and [`Socket::checkpoint_tx_bytes`]
//!   (so a caller can copy only what changed since its last checkpoint).
//!
//! What it leaves out, and what [`Socket::restore`] does instead:
//!
//! * out-of-order data (the reassembly buffer): dropped. It was never
//!   acknowledged cumulatively, so the peer retransmits it (a peer that saw
//!   it in a SACK block must not discard it before a cumulative ACK, RFC
//!   2018 section 8);
//! * the delayed-ACK timer: idle, so an ACK owed goes out at the next poll;
//!   the inactivity timeout counts from the restore. The retransmission,
//!   zero-window-probe, keep-alive and close timer is kept as it was (its
//!   instants are the caller's clock, which must go on across the restore:
//!   a retransmission due while the host was down fires at once), and so
//!   are the duplicate-ACK count and a fast retransmit due; with sequence
//!   space in flight and that timer idle, the retransmission timer is
//!   started;
//! * the congestion controller: a fresh one (as after an idle period);
//! * the socket's configuration (buffers, timeout, keep-alive, Nagle, ACK
//!   delay, hop limit, timestamp generator): the restored socket's own.

use super::{AckDelayTimer, RttEstimator, Socket, State, Timer, Tuple, congestion};
use crate::socket::Context;
use crate::storage::Assembler;
use crate::time::Instant;
use crate::wire::{IpEndpoint, IpListenEndpoint, TcpSeqNumber};

/// A TCP connection's state, without its buffered bytes (module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TcpCheckpoint {
    state: State,
    timer: Timer,
    local_rx_dup_acks: u8,
    pending_fast_retransmit: bool,
    listen_endpoint: IpListenEndpoint,
    tuple: Option<Tuple>,
    rtte: RttEstimator,
    rx_fin_received: bool,
    local_seq_no: TcpSeqNumber,
    remote_seq_no: TcpSeqNumber,
    remote_last_seq: TcpSeqNumber,
    remote_last_ack: Option<TcpSeqNumber>,
    remote_last_win: u16,
    remote_win_shift: u8,
    remote_win_len: usize,
    remote_win_scale: Option<u8>,
    remote_has_sack: bool,
    remote_mss: usize,
    local_rx_last_seq: Option<TcpSeqNumber>,
    local_rx_last_ack: Option<TcpSeqNumber>,
    last_remote_tsval: u32,
    rx_len: usize,
    tx_len: usize,
}

impl TcpCheckpoint {
    /// The connection state.
    pub fn state(&self) -> State {
        self.state
    }

    /// The local endpoint, if connected.
    pub fn local_endpoint(&self) -> Option<IpEndpoint> {
        Some(self.tuple?.local)
    }

    /// The remote endpoint, if connected.
    pub fn remote_endpoint(&self) -> Option<IpEndpoint> {
        Some(self.tuple?.remote)
    }

    /// The sequence number of the receive buffer's first byte.
    pub fn rx_start(&self) -> TcpSeqNumber {
        self.remote_seq_no
    }

    /// Bytes in the receive buffer (in order, not yet read).
    pub fn rx_len(&self) -> usize {
        self.rx_len
    }

    /// The sequence number of the transmit buffer's first byte (the oldest
    /// unacknowledged).
    pub fn tx_start(&self) -> TcpSeqNumber {
        self.local_seq_no
    }

    /// Bytes in the transmit buffer (in flight or not yet sent).
    pub fn tx_len(&self) -> usize {
        self.tx_len
    }
}

/// Why [`Socket::restore`] refused.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RestoreError {
    /// The socket is not closed.
    InvalidState,
    /// The bytes given are not the checkpoint's, or do not fit the buffers.
    BadBuffers,
}

impl<'a> Socket<'a> {
    /// The connection's state now, without its buffered bytes (module docs).
    pub fn checkpoint(&self) -> TcpCheckpoint {
        TcpCheckpoint {
            state: self.state,
            timer: self.timer,
            local_rx_dup_acks: self.local_rx_dup_acks,
            pending_fast_retransmit: self.pending_fast_retransmit,
            listen_endpoint: self.listen_endpoint,
            tuple: self.tuple,
            rtte: self.rtte,
            rx_fin_received: self.rx_fin_received,
            local_seq_no: self.local_seq_no,
            remote_seq_no: self.remote_seq_no,
            remote_last_seq: self.remote_last_seq,
            remote_last_ack: self.remote_last_ack,
            remote_last_win: self.remote_last_win,
            remote_win_shift: self.remote_win_shift,
            remote_win_len: self.remote_win_len,
            remote_win_scale: self.remote_win_scale,
            remote_has_sack: self.remote_has_sack,
            remote_mss: self.remote_mss,
            local_rx_last_seq: self.local_rx_last_seq,
            local_rx_last_ack: self.local_rx_last_ack,
            last_remote_tsval: self.last_remote_tsval,
            rx_len: self.rx_buffer.len(),
            tx_len: self.tx_buffer.len(),
        }
    }

    /// The receive buffer's bytes from `offset` on, as one contiguous
    /// piece (shorter than what is left where the ring wraps; empty past
    /// the end).
    pub fn checkpoint_rx_bytes(&self, offset: usize) -> &[u8] {
        self.rx_buffer.get_allocated(offset, usize::MAX)
    }

    /// The transmit buffer's bytes from `offset` on, like
    /// [`Socket::checkpoint_rx_bytes`].
    pub fn checkpoint_tx_bytes(&self, offset: usize) -> &[u8] {
        self.tx_buffer.get_allocated(offset, usize::MAX)
    }

    /// Resumes the connection of `cp` in this closed socket, with `rx` and
    /// `tx` its buffered bytes (each as pieces, in order). Timers start
    /// from `cx`'s time (module docs).
    pub fn restore(
        &mut self,
        cx: &mut Context,
        cp: &TcpCheckpoint,
        rx: &[&[u8]],
        tx: &[&[u8]],
    ) -> Result<(), RestoreError> {
        if self.state != State::Closed {
            return Err(RestoreError::InvalidState);
        }
        let len = |p: &[&[u8]]| p.iter().map(|s| s.len()).sum::<usize>();
        if len(rx) != cp.rx_len
            || len(tx) != cp.tx_len
            || cp.rx_len > self.rx_buffer.capacity()
            || cp.tx_len > self.tx_buffer.capacity()
        {
            return Err(RestoreError::BadBuffers);
        }
        self.reset();
        for p in rx {
            self.rx_buffer.enqueue_slice(p);
        }
        for p in tx {
            self.tx_buffer.enqueue_slice(p);
        }
        self.restore_fields(cp, cx.now());
        Ok(())
    }

    fn restore_fields(&mut self, cp: &TcpCheckpoint, now: Instant) {
        self.state = cp.state;
        self.listen_endpoint = cp.listen_endpoint;
        self.tuple = cp.tuple;
        self.rtte = cp.rtte;
        self.rx_fin_received = cp.rx_fin_received;
        self.local_seq_no = cp.local_seq_no;
        self.remote_seq_no = cp.remote_seq_no;
        self.remote_last_seq = cp.remote_last_seq;
        self.remote_last_ack = cp.remote_last_ack;
        self.remote_last_win = cp.remote_last_win;
        self.remote_win_shift = cp.remote_win_shift;
        self.remote_win_len = cp.remote_win_len;
        self.remote_win_scale = cp.remote_win_scale;
        self.remote_has_sack = cp.remote_has_sack;
        self.remote_mss = cp.remote_mss;
        self.local_rx_last_seq = cp.local_rx_last_seq;
        self.local_rx_last_ack = cp.local_rx_last_ack;
        self.local_rx_dup_acks = cp.local_rx_dup_acks;
        self.pending_fast_retransmit = cp.pending_fast_retransmit;
        self.last_remote_tsval = cp.last_remote_tsval;
        self.assembler = Assembler::new();
        self.ack_delay_timer = AckDelayTimer::Idle;
        self.congestion_controller = congestion::AnyController::new();
        let open = !matches!(cp.state, State::Closed | State::Listen);
        self.remote_last_ts = open.then_some(now);
        self.timer = cp.timer;
        if self.timer.is_idle() && cp.remote_last_seq != cp.local_seq_no {
            self.timer.set_for_retransmit(now, self.rtte.retransmission_timeout());
        }
    }
}
