//! Sidecores: a core dedicated to a service, called through shared-memory
//! sidecalls instead of traps (Kumar et al., "Re-architecting VMMs for
//! multicore systems: the sidecore approach").
//!
//! A [`Sidecore`] is a thread pinned to one CPU that polls a
//! [`dyncore_ring::CallChannel`] and answers requests with a [`Service`].
//! Each client thread takes a [`Client`] handle (one cache-line slot) and
//! calls [`Client::call`].
//!
//! ```
//! use std::sync::Arc;
//! use dyncore_runtime::sidecore::{NullService, Sidecore, SidecoreConfig};
//!
//! let cpu = dyncore_runtime::affinity::allowed_cpus()?.last().expect("a CPU");
//! let sidecore = Sidecore::start(Arc::new(NullService), SidecoreConfig::on_cpu(cpu))?;
//! let mut client = sidecore.client()?;
//! assert_eq!(client.call(())?, 0); // a sidecall through shared memory
//! sidecore.set_enabled(false);
//! assert_eq!(client.call(())?, 0); // the same code, now a null system call
//! sidecore.set_enabled(true);
//! drop(sidecore);
//! assert!(client.call(()).is_err()); // stopped: an error, not a hang
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Protocol of one call:
//!
//! 1. The client reads the sidecore's on/off flag. Off: it runs
//!    [`Service::trap`] itself (the kernel path: a system call, a VM exit, a
//!    lock) and is done — the same client code, no rebuild (§IV of the paper).
//! 2. On: the client writes the request into its slot and publishes it
//!    (see `dyncore_ring::call` for the slot protocol), then spins and
//!    finally parks waiting for the reply, for at most `call_timeout`.
//! 3. The sidecore, polling every slot, runs [`Service::serve`] and
//!    publishes the reply. When off, or idle past its spin budget, it parks
//!    on a futex; a published request wakes it, so a request that raced with
//!    switching off is still answered.
//!
//! Invariants and failure behaviour:
//! * A sidecore starts only on a CPU that exists and is in the process's
//!   affinity mask; otherwise [`Sidecore::start`] refuses with the reason.
//! * A client never hangs: a sidecore that stopped (dropped, or its thread
//!   died) closes the channel, which wakes and fails every waiting client
//!   with [`SidecallError::Stopped`]; a sidecore that is alive but stuck
//!   yields [`SidecallError::TimedOut`] after `call_timeout`.
//! * Dropping the [`Sidecore`] closes the channel before joining its thread.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use dyncore_core::CpuId;
use dyncore_ring::{CallChannel, CallClient, CallError, CallServer, ChannelArc, ServerWake, SpinPolicy};

pub mod irq;
pub mod services;

pub use irq::{IrqConfig, IrqMode, IrqReport};
pub use services::{
    CpuidLeaf, CpuidRegs, NullService, PteUpdate, QueryService, RadixMap, StateService, StateTrap,
};

/// A service that can run on a sidecore (sidecall path) or in the caller
/// (trap path). Requests and replies are plain `Copy` data of at most
/// [`dyncore_ring::PAYLOAD_MAX`] bytes, so no serialisation is needed.
pub trait Service: Send + Sync + 'static {
    type Request: Copy + Send + 'static;
    type Reply: Copy + Send + 'static;

    /// The sidecall path: runs on the sidecore.
    fn serve(&self, req: &Self::Request) -> Self::Reply;

    /// The trap path: runs in the calling thread when the sidecore is off.
    fn trap(&self, req: &Self::Request) -> Self::Reply;
}

/// How a sidecore is set up.
#[derive(Debug, Clone)]
pub struct SidecoreConfig {
    /// The CPU the sidecore thread is pinned to.
    pub cpu: CpuId,
    /// Client slots (one per concurrently attached client thread).
    pub max_clients: usize,
    /// How long the sidecore polls an idle channel before parking.
    pub server_policy: SpinPolicy,
    /// How long a client spins for its reply before parking.
    pub client_policy: SpinPolicy,
    /// Longest a client waits for a reply before failing.
    pub call_timeout: Duration,
    /// Start switched on.
    pub enabled: bool,
}

impl SidecoreConfig {
    /// Defaults for a dedicated core: poll ~ms before parking, 8 clients, 1 s timeout.
    pub fn on_cpu(cpu: CpuId) -> Self {
        SidecoreConfig {
            cpu,
            max_clients: 8,
            server_policy: SpinPolicy::SERVER,
            client_policy: SpinPolicy::CLIENT,
            call_timeout: Duration::from_secs(1),
            enabled: true,
        }
    }
}

/// Why a sidecall failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SidecallError {
    /// The sidecore stopped (dropped, or its thread ended).
    Stopped { cpu: CpuId },
    /// No reply within the timeout: the sidecore is alive but not answering.
    TimedOut { cpu: CpuId, timeout: Duration },
    /// An earlier call timed out and its reply is still outstanding.
    Busy { cpu: CpuId },
    /// Every client slot is taken.
    NoFreeSlot { cpu: CpuId, capacity: usize },
    /// A batch larger than [`dyncore_ring::BATCH_MAX`].
    BatchTooLarge(usize),
}

impl std::fmt::Display for SidecallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SidecallError::Stopped { cpu } => write!(f, "the sidecore on CPU {cpu} has stopped"),
            SidecallError::TimedOut { cpu, timeout } => {
                write!(f, "no reply from the sidecore on CPU {cpu} within {timeout:?}")
            }
            SidecallError::Busy { cpu } => {
                write!(f, "an earlier sidecall to CPU {cpu} timed out and is still outstanding")
            }
            SidecallError::NoFreeSlot { cpu, capacity } => {
                write!(f, "all {capacity} client slots of the sidecore on CPU {cpu} are taken")
            }
            SidecallError::BatchTooLarge(n) => {
                write!(f, "a batch of {n} exceeds the maximum of {}", dyncore_ring::BATCH_MAX)
            }
        }
    }
}

impl std::error::Error for SidecallError {}

struct Shared<S: Service> {
    service: Arc<S>,
    chan: ChannelArc<CallChannel<S::Request, S::Reply>>,
    enabled: CachePadded<AtomicBool>,
    served: CachePadded<AtomicU64>,
    cfg: SidecoreConfig,
}

/// A core dedicated to `S`. Dropping it stops the thread and fails every
/// waiting client.
pub struct Sidecore<S: Service> {
    shared: Arc<Shared<S>>,
    thread: Option<JoinHandle<()>>,
}

/// Closes the channel when the sidecore thread ends, however it ends
/// (including a panic in the service), so clients fail instead of hanging.
struct CloseOnExit<Req: Copy + Send, Resp: Copy + Send>(ChannelArc<CallChannel<Req, Resp>>);

impl<Req: Copy + Send, Resp: Copy + Send> Drop for CloseOnExit<Req, Resp> {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl<S: Service> Sidecore<S> {
    /// Starts the sidecore thread pinned to `cfg.cpu`. Refuses, with the
    /// reason, a CPU that does not exist or that the process's affinity
    /// mask does not allow.
    pub fn start(service: Arc<S>, cfg: SidecoreConfig) -> io::Result<Self> {
        crate::testing::assert_held_here("starting a sidecore");
        if cfg.max_clients == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a sidecore needs at least one client slot",
            ));
        }
        let chan = CallChannel::new(cfg.max_clients);
        let mut server = CallServer::new(&chan).expect("a new channel has no server yet");
        let shared = Arc::new(Shared {
            service,
            chan,
            enabled: CachePadded::new(AtomicBool::new(cfg.enabled)),
            served: CachePadded::new(AtomicU64::new(0)),
            cfg,
        });
        let (tx, rx) = mpsc::channel();
        let sh = shared.clone();
        let thread =
            std::thread::Builder::new().name(format!("sidecore-{}", sh.cfg.cpu)).spawn(move || {
                let _close = CloseOnExit(sh.chan.clone());
                // Refuses, with the reason, a CPU that is missing or not allowed.
                if let Err(e) = crate::affinity::pin_current_thread(sh.cfg.cpu) {
                    let _ = tx.send(Err(e));
                    return;
                }
                let _ = tx.send(Ok(()));
                serve_loop(&sh, &mut server);
            })?;
        match rx.recv() {
            Ok(Ok(())) => Ok(Sidecore { shared, thread: Some(thread) }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(io::Error::new(e.kind(), format!("cannot start a sidecore: {e}")))
            }
            Err(_) => {
                let _ = thread.join();
                Err(io::Error::other("the sidecore thread ended before it started serving"))
            }
        }
    }

    /// The CPU this sidecore runs on.
    pub fn cpu(&self) -> CpuId {
        self.shared.cfg.cpu
    }

    /// A handle for one client thread (claims a slot).
    pub fn client(&self) -> Result<Client<S>, SidecallError> {
        let call = CallClient::new(&self.shared.chan)
            .ok_or(SidecallError::NoFreeSlot { cpu: self.cpu(), capacity: self.shared.chan.capacity() })?;
        Ok(Client { shared: self.shared.clone(), call })
    }

    /// Switches the sidecore on or off at run time. Off: clients take the
    /// trap path and the sidecore parks instead of polling.
    pub fn set_enabled(&self, on: bool) {
        self.shared.enabled.store(on, Ordering::Release);
        // Let a parked sidecore notice (it re-checks and parks again if idle).
        self.shared.chan.wake_server();
    }

    pub fn is_enabled(&self) -> bool {
        self.shared.enabled.load(Ordering::Acquire)
    }

    /// Requests served on the sidecall path so far (every request whose
    /// reply a client has received is counted).
    pub fn served(&self) -> u64 {
        self.shared.served.load(Ordering::Relaxed)
    }

    /// The service (e.g. to inspect its state after a run).
    pub fn service(&self) -> &Arc<S> {
        &self.shared.service
    }

    /// Stops taking sidecalls, without waiting for the sidecore thread:
    /// waiting and future sidecalls fail with [`SidecallError::Stopped`];
    /// the one being served, if any, completes, and no other is served
    /// after it. [`Sidecore::stop`] (or a drop) then waits for the thread.
    pub fn close(&self) {
        self.shared.chan.close();
    }

    /// Stops the sidecore: waiting and future sidecalls fail with
    /// [`SidecallError::Stopped`]; returns once the sidecore thread has
    /// (when the call being served returns). Same as dropping it.
    pub fn stop(self) {}
}

impl<S: Service> Drop for Sidecore<S> {
    fn drop(&mut self) {
        self.shared.chan.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_loop<S: Service>(sh: &Shared<S>, server: &mut CallServer<S::Request, S::Reply>) {
    let service = &*sh.service;
    let mut served = sh.served.load(Ordering::Relaxed);
    loop {
        // Count before the reply is published, so a client that has its
        // reply also sees it counted in `Sidecore::served`.
        let n = server.poll(|_, r| {
            let reply = service.serve(r);
            served += 1;
            sh.served.store(served, Ordering::Relaxed);
            reply
        });
        if n > 0 {
            continue;
        }
        // Off: park at once (free the core); on: poll for the budget first.
        let policy = if sh.enabled.load(Ordering::Acquire) { sh.cfg.server_policy } else { SpinPolicy::PARK };
        match server.wait(&policy, None) {
            ServerWake::Work => {}
            ServerWake::Closed => return,
            ServerWake::Idle => unreachable!("waiting without a deadline"),
        }
    }
}

/// One client thread's handle to a sidecore.
pub struct Client<S: Service> {
    shared: Arc<Shared<S>>,
    call: CallClient<S::Request, S::Reply>,
}

impl<S: Service> Client<S> {
    /// The call a program makes: a sidecall when the sidecore is on, the
    /// trap path when it is off.
    pub fn call(&mut self, req: S::Request) -> Result<S::Reply, SidecallError> {
        if self.shared.enabled.load(Ordering::Relaxed) { self.sidecall(req) } else { Ok(self.trap(req)) }
    }

    /// Always the sidecall path.
    pub fn sidecall(&mut self, req: S::Request) -> Result<S::Reply, SidecallError> {
        let cfg = &self.shared.cfg;
        self.call.call(req, &cfg.client_policy, Some(cfg.call_timeout)).map_err(|e| self.error(e))
    }

    /// Several requests in one round trip (one publication each way) when
    /// the sidecore is on; one trap each when it is off.
    pub fn call_batch(&mut self, reqs: &[S::Request], out: &mut Vec<S::Reply>) -> Result<(), SidecallError> {
        if self.shared.enabled.load(Ordering::Relaxed) {
            let cfg = &self.shared.cfg;
            self.call
                .call_batch(reqs, out, &cfg.client_policy, Some(cfg.call_timeout))
                .map_err(|e| self.error(e))
        } else {
            out.clear();
            out.extend(reqs.iter().map(|r| self.shared.service.trap(r)));
            Ok(())
        }
    }

    /// Always the trap path.
    pub fn trap(&self, req: S::Request) -> S::Reply {
        self.shared.service.trap(&req)
    }

    fn error(&self, e: CallError) -> SidecallError {
        let cpu = self.shared.cfg.cpu;
        match e {
            CallError::Closed => SidecallError::Stopped { cpu },
            CallError::TimedOut => SidecallError::TimedOut { cpu, timeout: self.shared.cfg.call_timeout },
            CallError::Busy => SidecallError::Busy { cpu },
            CallError::BatchTooLarge(n) => SidecallError::BatchTooLarge(n),
        }
    }
}

#[cfg(test)]
mod tests;
