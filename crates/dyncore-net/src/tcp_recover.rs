//! How a TCP crash is survived (`--tcp-crash recover`): TCP checkpoints
//! each connection, with the journal commit of every poll, to a store that
//! outlives its instances, and a new instance resumes the connections from
//! it.
//!
//! A checkpoint of client `c` is smoltcp's [`TcpCheckpoint`] of its socket
//! (state, 4-tuple, sequence numbers, windows, RTT estimator: the dyncore
//! patch of smoltcp, see third_party/README.md), the bytes in its receive
//! and send buffers, and the client's call in flight (`Pending`). The
//! store keeps two per client and a generation per client in TCP's
//! journal; the current checkpoint is the one the committed generation
//! names.
//!
//! # The rule: a checkpoint is what TCP committed
//!
//! 1. **Poll.** TCP takes calls and frames, runs smoltcp, builds segments
//!    and replies. Nothing is visible yet (the journal's protocol,
//!    `dyncore_ring::journal`).
//! 2. **Save.** At the end of the poll, before the commit, for each client
//!    whose state changed since its current checkpoint (the header
//!    compares unequal; equal headers mean equal bytes, as a buffer's bytes
//!    are named by their sequence numbers), TCP writes the other of its
//!    two checkpoints and stages the generation `+ 1`. It copies only the
//!    bytes that the older checkpoint lacks (new data at the buffer's
//!    end); the current one is not touched.
//! 3. **Commit.** The journal's commit publishes, at one commit point, the
//!    segments to IP, the replies to the syscall server, the frames and
//!    calls consumed, and the new generations.
//! 4. **Crash.** A crash before the commit point leaves the old
//!    generations: the new instance resumes from the state before the
//!    poll, and the poll's calls and frames are delivered to it again. A
//!    crash after it finishes the commit (`Journal::recover`): the new
//!    instance resumes from the state after the poll.
//! 5. **Resume.** A new instance restores each client's current
//!    checkpoint into a fresh socket ([`tcp::Socket::restore`]), takes its
//!    call in flight back (a `send`'s buffer with it), and counts the
//!    connection recovered.
//!
//! So what the restored state holds equals what the world was told: every
//! byte TCP acknowledged to the peer (in a committed segment) is in the
//! restored receive buffer or was in a committed reply to the
//! application; every byte a committed `Sent` reply confirmed is in the
//! restored send buffer or was acknowledged by the peer; every segment
//! the peer got is below the restored send sequence number. Invariant,
//! asserted on resume: a client has a call in flight in its checkpoint
//! exactly when TCP's facts count one more call taken than replies given.
//!
//! **What the peer sees**: a delay (the restart time), and nothing else if
//! no segment was lost meanwhile: its segments wait in the channel from
//! IP, and the new instance acknowledges them. Segments dropped while TCP
//! was down (a full channel) or out-of-order data (not checkpointed) are
//! retransmitted by the peer; what TCP had in flight is retransmitted by
//! the new instance after its RTO if the peer's ACK does not come.
//!
//! A connection in the middle of its handshake is checkpointed like any
//! other (SYN-SENT resends its SYN after the RTO). If a checkpoint cannot be
//! restored, TCP resets that connection as `--tcp-crash reset` does
//! ([`crate::tcp_reset`]) and counts it reset, not recovered.

use std::collections::VecDeque;

use dyncore_ring::journal::TwoSlots;

use smoltcp::iface::Context;
use smoltcp::socket::tcp::{self, TcpCheckpoint};

use crate::chan::Frame;

/// What a TCP crash does to the connections TCP held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TcpCrash {
    /// Reset them ([`crate::tcp_reset`]).
    #[default]
    Reset,
    /// Resume them from TCP's checkpoints (this module).
    Recover,
}

/// The call a client is waiting on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pending {
    Connect,
    Accept,
    /// `done` bytes of `data` are in the socket already.
    Send {
        data: Frame,
        done: u32,
    },
    Recv,
    /// `active`: this side closed first (from ESTABLISHED), so a clean
    /// close passes FIN-WAIT-2 or TIME-WAIT; reaching CLOSED straight from
    /// FIN-WAIT-1 means the connection was aborted (reset, or smoltcp's
    /// timeout) with the FIN, and maybe data, unacknowledged.
    Close {
        active: bool,
    },
}

/// A client's checkpoint without its bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Head {
    pub sock: TcpCheckpoint,
    pub pending: Option<Pending>,
}

/// One checkpoint: `head` names the bytes (`None` while it is written).
#[derive(Default)]
struct Saved {
    head: Option<Head>,
    rx: VecDeque<u8>,
    tx: VecDeque<u8>,
}

/// The checkpoints of every client: two each, the current one named by
/// the client's generation in TCP's journal (module docs; the protocol is
/// [`TwoSlots`]'s, model-checked there).
pub struct Checkpoints {
    slots: Vec<TwoSlots<Saved>>,
}

/// What saving cost, for the counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SaveCost {
    /// Checkpoints written.
    pub saves: u64,
    /// Buffered bytes copied into them.
    pub bytes: u64,
}

impl Checkpoints {
    pub fn new(clients: usize) -> Checkpoints {
        Checkpoints { slots: (0..clients).map(|_| Default::default()).collect() }
    }

    /// Step 2 for client `c`, whose committed generation is `generation`:
    /// writes the other checkpoint if `head` differs from the current
    /// one; returns whether it did (the caller stages `generation + 1`).
    pub(crate) fn save(
        &self,
        c: usize,
        generation: u64,
        head: Head,
        sock: &tcp::Socket<'_>,
        cost: &mut SaveCost,
    ) -> bool {
        if self.slots[c].current(generation).head == Some(head) {
            return false;
        }
        let mut next = self.slots[c].next(generation);
        let old = next.head.take();
        let same_conn = |h: &Head| {
            h.sock.local_endpoint() == head.sock.local_endpoint()
                && h.sock.remote_endpoint() == head.sock.remote_endpoint()
        };
        let old = old.filter(same_conn);
        let (rx_from, tx_from) = (
            old.map(|h| (h.sock.rx_start(), h.sock.rx_len())),
            old.map(|h| (h.sock.tx_start(), h.sock.tx_len())),
        );
        let cp = head.sock;
        cost.bytes +=
            sync(&mut next.rx, rx_from, (cp.rx_start(), cp.rx_len()), |o| sock.checkpoint_rx_bytes(o));
        cost.bytes +=
            sync(&mut next.tx, tx_from, (cp.tx_start(), cp.tx_len()), |o| sock.checkpoint_tx_bytes(o));
        next.head = Some(head);
        cost.saves += 1;
        true
    }

    /// Step 5 for client `c`: restores its current checkpoint into `sock`
    /// (closed); returns the call in flight it held, or `None` if there is
    /// no checkpoint, or `Err` if smoltcp refused it.
    pub(crate) fn restore(
        &self,
        c: usize,
        generation: u64,
        cx: &mut Context,
        sock: &mut tcp::Socket<'_>,
    ) -> Result<Option<Head>, tcp::RestoreError> {
        let saved = self.slots[c].current(generation);
        let Some(head) = saved.head else { return Ok(None) };
        let (r0, r1) = saved.rx.as_slices();
        let (t0, t1) = saved.tx.as_slices();
        sock.restore(cx, &head.sock, &[r0, r1], &[t0, t1])?;
        Ok(Some(head))
    }
}

/// Brings `buf`, the bytes from sequence number `from.0` (`from.1` of
/// them), to the `to.1` bytes from `to.0`, reading the socket's buffer
/// from an offset with `read`: drops what left at the front, appends what
/// came at the back. With no usable `from` (none, another connection, or
/// not a range `to` continues), copies all. Returns the bytes copied.
fn sync<'s>(
    buf: &mut VecDeque<u8>,
    from: Option<(smoltcp::wire::TcpSeqNumber, usize)>,
    to: (smoltcp::wire::TcpSeqNumber, usize),
    read: impl Fn(usize) -> &'s [u8],
) -> u64 {
    let keep = from.and_then(|(start, len)| {
        debug_assert_eq!(buf.len(), len);
        let gone = to.0.0.wrapping_sub(start.0);
        let gone = usize::try_from(gone).ok().filter(|&g| g <= len)?;
        (len - gone <= to.1).then_some(gone)
    });
    match keep {
        Some(gone) => {
            buf.drain(..gone);
        }
        None => buf.clear(),
    }
    let mut copied = 0;
    while buf.len() < to.1 {
        let piece = read(buf.len());
        assert!(!piece.is_empty(), "the socket holds the bytes its checkpoint counts");
        let n = piece.len().min(to.1 - buf.len());
        buf.extend(&piece[..n]);
        copied += n as u64;
    }
    copied
}

#[cfg(test)]
mod tests {
    use super::*;
    use smoltcp::wire::TcpSeqNumber;

    /// `sync` keeps the bytes still buffered and copies only new ones.
    #[test]
    fn sync_copies_only_what_is_new() {
        let stream: Vec<u8> = (0..=255).collect();
        let at = |s: i32, n: usize| (TcpSeqNumber(s), n);
        let s = &stream;
        let read = |base: usize| move |o: usize| &s[base + o..];
        let mut buf = VecDeque::new();
        assert_eq!(sync(&mut buf, None, at(100, 10), read(0)), 10);
        assert!(buf.iter().copied().eq(0..10u8));
        // 4 acknowledged at the front, 6 more queued at the back.
        assert_eq!(sync(&mut buf, Some(at(100, 10)), at(104, 12), read(4)), 6);
        assert!(buf.iter().copied().eq(4..16u8));
        // Not a continuation (behind the old start): copied in full.
        assert_eq!(sync(&mut buf, Some(at(104, 12)), at(90, 3), read(0)), 3);
        assert!(buf.iter().copied().eq(0..3u8));
        // Across the sequence space's wrap.
        let mut buf = VecDeque::new();
        sync(&mut buf, None, at(i32::MAX - 1, 4), read(0));
        assert_eq!(sync(&mut buf, Some(at(i32::MAX - 1, 4)), at(i32::MIN + 1, 5), read(3)), 4);
        assert!(buf.iter().copied().eq(3..8u8));
    }
}
