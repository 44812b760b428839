//! Synchronous request/response over cache-line slots: one slot per client,
//! polled by one server (the ffwd delegation shape, and the Sidecore paper's
//! shared-page sidecall).
//!
//! A slot is `BATCH_MAX` request lines (client → server) and `BATCH_MAX`
//! reply lines (server → client), each exactly one cache line: a header
//! (`seq`, `len`, used in line 0 only) and a `Copy` payload of at most
//! [`PAYLOAD_MAX`] bytes, so a one-request call moves one line each way.
//!
//! Protocol for call number `n` of a client (`seq` counts calls per slot):
//!
//! 1. The client (owner of the slot, so of its request lines while no call
//!    is outstanding) writes `k` payloads into `req[0..k]`, stores `len = k`,
//!    then `req[0].seq = n` (release), then notifies the server's waiter.
//! 2. The server sees `req[0].seq != resp[0].seq` (acquire), reads the `k`
//!    requests, writes `k` replies into `resp[0..k]`, stores
//!    `resp[0].seq = n` (release) and notifies the client's waiter.
//! 3. The client sees `resp[0].seq == n` (acquire) and reads the replies.
//!
//! Invariants: a request line is written only by its client and only while
//! `req.seq == resp.seq` (no call outstanding); a reply line is written only
//! by the server and only while `req.seq != resp.seq`. Each side reads the
//! other's lines only after the acquire that pairs with the writer's release,
//! so payloads are never raced. A client that timed out keeps its call
//! outstanding until the reply arrives; if dropped first, its slot stays
//! claimed forever (leaked, never reused) because the server may still be
//! reading its request.
//!
//! Closing the channel ([`CallChannel::close`]) marks it closed and wakes
//! every waiting client, which then fails with [`CallError::Closed`] rather
//! than hang.

use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::sync::{Arc, AtomicBool, AtomicU32, Ordering, UnsafeCell};
use crate::waiter::{SpinPolicy, Waiter};

/// Most requests in one batched call (one request line each).
#[cfg(not(dyncore_loom))]
pub const BATCH_MAX: usize = 16;
/// Most requests in one batched call (kept tiny under loom).
#[cfg(dyncore_loom)]
pub const BATCH_MAX: usize = 2;

/// Largest payload (request or reply) with 8-byte alignment: a cache line
/// minus the 8-byte header.
pub const PAYLOAD_MAX: usize = 56;

/// One cache line: header plus payload.
#[repr(C, align(64))]
struct Line<T> {
    seq: AtomicU32,
    len: AtomicU32,
    payload: UnsafeCell<MaybeUninit<T>>,
}

#[cfg(not(dyncore_loom))]
const _: () = assert!(size_of::<Line<[u64; PAYLOAD_MAX / 8]>>() == 64, "a full-size line is one cache line");
#[cfg(not(dyncore_loom))]
const _: () = assert!(size_of::<Line<()>>() == 64 && align_of::<Line<u8>>() == 64);

impl<T> Line<T> {
    /// Post-monomorphisation check that `T` fits the line.
    #[cfg(not(dyncore_loom))]
    const FITS: () = assert!(size_of::<Line<T>>() == 64, "payload larger than a cache line minus header");

    fn new() -> Self {
        #[cfg(not(dyncore_loom))]
        let () = Self::FITS;
        Line {
            seq: AtomicU32::new(0),
            len: AtomicU32::new(0),
            payload: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }
}

struct Slot<Req, Resp> {
    req: [Line<Req>; BATCH_MAX],
    resp: [Line<Resp>; BATCH_MAX],
    /// The client parks here waiting for its reply.
    waiter: Waiter,
    claimed: CachePadded<AtomicBool>,
}

/// Why a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallError {
    /// The server side closed the channel (the service stopped).
    Closed,
    /// No reply within the timeout; the call stays outstanding.
    TimedOut,
    /// An earlier call timed out and its reply has still not arrived.
    Busy,
    /// More requests than [`BATCH_MAX`] in one batch.
    BatchTooLarge(usize),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Closed => write!(f, "the service has stopped (channel closed)"),
            CallError::TimedOut => write!(f, "no reply from the service within the timeout"),
            CallError::Busy => write!(f, "an earlier call timed out and its reply has not arrived yet"),
            CallError::BatchTooLarge(n) => write!(f, "batch of {n} requests exceeds BATCH_MAX = {BATCH_MAX}"),
        }
    }
}

impl std::error::Error for CallError {}

/// The shared memory of a request/response channel.
pub struct CallChannel<Req, Resp> {
    slots: Box<[Slot<Req, Resp>]>,
    /// The server parks here when no request is pending.
    server_waiter: Waiter,
    closed: CachePadded<AtomicBool>,
    server_taken: AtomicBool,
}

// SAFETY: payload cells are only accessed under the slot protocol (module
// docs), which hands each line between exactly one writer and one reader with
// release/acquire; the payloads themselves are `Send`.
unsafe impl<Req: Send, Resp: Send> Sync for CallChannel<Req, Resp> {}
// SAFETY: as above; the channel owns only `Send` payloads and atomics.
unsafe impl<Req: Send, Resp: Send> Send for CallChannel<Req, Resp> {}

impl<Req: Copy + Send, Resp: Copy + Send> CallChannel<Req, Resp> {
    /// A channel with `capacity` client slots.
    pub fn new(capacity: usize) -> Arc<Self> {
        assert!(capacity > 0, "a channel needs at least one client slot");
        let slots = (0..capacity)
            .map(|_| Slot {
                req: std::array::from_fn(|_| Line::new()),
                resp: std::array::from_fn(|_| Line::new()),
                waiter: Waiter::new(),
                claimed: CachePadded::new(AtomicBool::new(false)),
            })
            .collect();
        Arc::new(CallChannel {
            slots,
            server_waiter: Waiter::new(),
            closed: CachePadded::new(AtomicBool::new(false)),
            server_taken: AtomicBool::new(false),
        })
    }

    /// Number of client slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Closes the channel: pending and future calls fail with
    /// [`CallError::Closed`]; every parked client and the server are woken.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for s in self.slots.iter() {
            s.waiter.notify();
        }
        self.server_waiter.notify();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Wakes the server if it is parked in [`CallServer::wait`] (after
    /// changing something it should look at). Callable from any thread.
    pub fn wake_server(&self) {
        self.server_waiter.notify();
    }
}

/// A client's handle: owns one slot. It is `Send` and `Sync` (both derived
/// from its fields); what keeps one call in flight per slot is that every
/// call takes `&mut self`, so a shared `&CallClient` can only read
/// [`CallClient::slot`]. Asserted at compile time below.
pub struct CallClient<Req, Resp> {
    chan: Arc<CallChannel<Req, Resp>>,
    idx: usize,
    /// Number of the last call submitted on this slot.
    seq: u32,
    outstanding: bool,
}

// The doc above says `Send + Sync`; keep it true.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<CallClient<u64, u64>>();
};

impl<Req: Copy + Send, Resp: Copy + Send> CallClient<Req, Resp> {
    /// Claims a free slot, or `None` when all are taken.
    pub fn new(chan: &Arc<CallChannel<Req, Resp>>) -> Option<Self> {
        let idx = chan.slots.iter().position(|s| {
            s.claimed.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
        })?;
        let slot = &chan.slots[idx];
        // The previous owner released the slot only with no call outstanding.
        let seq = slot.req[0].seq.load(Ordering::Acquire);
        debug_assert_eq!(
            seq,
            slot.resp[0].seq.load(Ordering::Acquire),
            "claimed a slot with a call in flight"
        );
        Some(CallClient { chan: chan.clone(), idx, seq, outstanding: false })
    }

    /// Index of this client's slot.
    pub fn slot(&self) -> usize {
        self.idx
    }

    /// One request, one reply.
    pub fn call(
        &mut self,
        req: Req,
        policy: &SpinPolicy,
        timeout: Option<Duration>,
    ) -> Result<Resp, CallError> {
        let mut out = [MaybeUninit::<Resp>::uninit()];
        self.call_into(&[req], &mut out, policy, timeout)?;
        // SAFETY: `call_into` returned Ok, so it initialised all of `out`.
        Ok(unsafe { out[0].assume_init() })
    }

    /// Up to [`BATCH_MAX`] requests published with one sequence store and
    /// answered with one: `out[i]` is the reply to `reqs[i]`.
    pub fn call_batch(
        &mut self,
        reqs: &[Req],
        out: &mut Vec<Resp>,
        policy: &SpinPolicy,
        timeout: Option<Duration>,
    ) -> Result<(), CallError> {
        let mut buf = [MaybeUninit::<Resp>::uninit(); BATCH_MAX];
        let k = reqs.len();
        if k > BATCH_MAX {
            return Err(CallError::BatchTooLarge(k));
        }
        self.call_into(reqs, &mut buf[..k], policy, timeout)?;
        out.clear();
        // SAFETY: `call_into` returned Ok, so it initialised `buf[..k]`.
        out.extend(buf[..k].iter().map(|r| unsafe { r.assume_init() }));
        Ok(())
    }

    fn call_into(
        &mut self,
        reqs: &[Req],
        out: &mut [MaybeUninit<Resp>],
        policy: &SpinPolicy,
        timeout: Option<Duration>,
    ) -> Result<(), CallError> {
        // Both callers bound the batch (`call` sends one, `call_batch` checks).
        debug_assert!(reqs.len() == out.len() && reqs.len() <= BATCH_MAX);
        if reqs.is_empty() {
            return Ok(());
        }
        let chan = &*self.chan;
        let slot = &chan.slots[self.idx];
        // A closed channel wins over an outstanding call: it will never end.
        if chan.is_closed() {
            return Err(CallError::Closed);
        }
        if self.outstanding {
            if slot.resp[0].seq.load(Ordering::Acquire) != self.seq {
                return Err(CallError::Busy);
            }
            self.outstanding = false;
        }
        // 1. Write the requests, then publish them with one release store.
        let n = self.seq.wrapping_add(1);
        for (line, r) in slot.req.iter().zip(reqs) {
            // SAFETY: no call is outstanding (checked above), so by the slot
            // invariant only this client touches its request lines now.
            line.payload.with_mut(|p| unsafe { (*p).write(*r) });
        }
        slot.req[0].len.store(reqs.len() as u32, Ordering::Relaxed);
        slot.req[0].seq.store(n, Ordering::Release);
        self.seq = n;
        self.outstanding = true;
        chan.server_waiter.notify();
        // 3. Wait for the reply (or for the channel to close).
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let got = slot.waiter.wait_until(policy, deadline, || {
            if slot.resp[0].seq.load(Ordering::Acquire) == n {
                Some(Ok(()))
            } else if chan.is_closed() {
                Some(Err(CallError::Closed))
            } else {
                None
            }
        });
        match got {
            None => Err(CallError::TimedOut),
            Some(Err(e)) => Err(e),
            Some(Ok(())) => {
                for (line, o) in slot.resp.iter().zip(out.iter_mut()) {
                    // SAFETY: the acquire load of `resp[0].seq == n` pairs with
                    // the server's release after it wrote these reply lines,
                    // and the server writes none until our next call.
                    *o = MaybeUninit::new(line.payload.with(|p| unsafe { (*p).assume_init_read() }));
                }
                self.outstanding = false;
                Ok(())
            }
        }
    }
}

impl<Req, Resp> Drop for CallClient<Req, Resp> {
    fn drop(&mut self) {
        let slot = &self.chan.slots[self.idx];
        // A slot whose request may still be read by the server is leaked.
        if !self.outstanding || slot.resp[0].seq.load(Ordering::Acquire) == self.seq {
            slot.claimed.store(false, Ordering::Release);
        }
    }
}

/// What [`CallServer::wait`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum ServerWake {
    /// At least one request is pending.
    Work,
    /// The channel was closed.
    Closed,
    /// The deadline passed with nothing pending.
    Idle,
}

/// The server's handle (at most one at a time per channel).
pub struct CallServer<Req, Resp> {
    chan: Arc<CallChannel<Req, Resp>>,
}

impl<Req: Copy + Send, Resp: Copy + Send> CallServer<Req, Resp> {
    /// Takes the server role, or `None` if another handle has it.
    pub fn new(chan: &Arc<CallChannel<Req, Resp>>) -> Option<Self> {
        chan.server_taken
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| CallServer { chan: chan.clone() })
    }

    /// Whether any client has a request pending.
    pub fn has_pending(&self) -> bool {
        self.chan
            .slots
            .iter()
            .any(|s| s.req[0].seq.load(Ordering::Acquire) != s.resp[0].seq.load(Ordering::Relaxed))
    }

    /// Serves every pending call once, in slot order; `f(slot, request)`
    /// computes a reply. Returns the number of requests served. Once the
    /// channel is closed no further call is served (the one being served
    /// when it closed completes): its waiting clients have been told the
    /// channel is closed, and a reply after that would be one they may or
    /// may not see, depending on when they woke.
    pub fn poll(&mut self, mut f: impl FnMut(usize, &Req) -> Resp) -> usize {
        let mut served = 0;
        for (i, s) in self.chan.slots.iter().enumerate() {
            if self.chan.is_closed() {
                break;
            }
            // 2. A request is pending when its seq differs from our reply's
            //    (we are the only writer of resp.seq, so relaxed reads it).
            let n = s.req[0].seq.load(Ordering::Acquire);
            if n == s.resp[0].seq.load(Ordering::Relaxed) {
                continue;
            }
            let k = s.req[0].len.load(Ordering::Relaxed) as usize;
            assert!((1..=BATCH_MAX).contains(&k), "corrupt batch length {k} in slot {i}");
            for j in 0..k {
                // SAFETY: the acquire of `req.seq` pairs with the client's
                // release after writing these lines; it writes no more until
                // we publish the reply.
                let r = s.req[j].payload.with(|p| unsafe { (*p).assume_init_read() });
                let reply = f(i, &r);
                // SAFETY: reply lines are ours while the call is pending.
                s.resp[j].payload.with_mut(|p| unsafe { (*p).write(reply) });
            }
            s.resp[0].seq.store(n, Ordering::Release);
            s.waiter.notify();
            served += k;
        }
        served
    }

    /// Waits (spinning per `policy`, then parking) until a request is
    /// pending, the channel closes, or `deadline` passes.
    pub fn wait(&self, policy: &SpinPolicy, deadline: Option<Instant>) -> ServerWake {
        self.chan
            .server_waiter
            .wait_until(policy, deadline, || {
                // Closed first: a closed channel serves nothing more
                // (`poll`), pending or not.
                if self.chan.is_closed() {
                    Some(ServerWake::Closed)
                } else if self.has_pending() {
                    Some(ServerWake::Work)
                } else {
                    None
                }
            })
            .unwrap_or(ServerWake::Idle)
    }
}

impl<Req, Resp> Drop for CallServer<Req, Resp> {
    fn drop(&mut self) {
        self.chan.server_taken.store(false, Ordering::Release);
    }
}
