//! dyncore-net: the NewtOS network stack, split into components that talk
//! only through dyncore-ring channels.
//!
//! ```text
//!  application ⇄ syscall server ⇄ TCP (smoltcp) ⇄ IP ⇄ packet filter ⇄ driver ⇄ wire
//! ```
//!
//! * [`component`]: what a host sees of a component — a `poll(now)` object
//!   saying what it did ([`component::Progress`]), with a bell to park on,
//!   a crash switch and a restart.
//! * [`chan`], [`pool`]: the channels (a dyncore-ring SPSC ring of
//!   cache-line items, with peek/commit so a message survives a crash) and
//!   the buffer pools whose indices they carry.
//! * [`syscall`], [`tcp`], [`ip`], [`filter`], [`driver`]: the components;
//!   [`stack`] builds and wires them.
//! * [`wire`]: an in-memory wire to a peer stack, and a TUN device to the
//!   Linux kernel's TCP in a network namespace.
//! * [`app`], [`stream`]: the iperf-like sender and receiver and the
//!   end-to-end check of their stream; [`mono`]: the same application on a
//!   monolithic smoltcp stack.
//! * [`host`]: one-thread and thread-per-component hosts, and supervision
//!   (crash → restart); [`hosting`]: components on runtime CPUs, dedicated
//!   or shared, with duty-cycle speeds and live moves.
//! * [`power`]: where real power figures would come from (RAPL, cpufreq),
//!   probed; the model is `dyncore_core::power`.
//!
//! # Invariants
//!
//! 1. **A component talks only through channels.** It holds no reference
//!    to another component: everything it exchanges is a ring item (a
//!    cache line) naming, at most, a pool buffer that travels with it.
//! 2. **No message is lost or duplicated, including across a restart.**
//!    Rings deliver in order exactly once; a component takes a message,
//!    runs its logic, and only then emits results and commits the message,
//!    so a crash in the logic leaves the message for the next instance and
//!    no output behind ([`chan`]). Pushes never fail (channels are sized
//!    for every buffer of their pool, [`chan::capacity_for`]).
//! 3. **A buffer has one owner**, checked on every access ([`pool::Pool::with`]),
//!    and every buffer comes back: a stack at rest has none out
//!    ([`component::Component::buffers_out`]).
//! 4. **Restart keeps the rings.** IP, the filter, the driver (and the
//!    stateless syscall server) restart as fresh instances on the same
//!    ports; TCP refuses (its connections are the state NewtOS keeps), and
//!    its connections survive the others' restarts.
//! 5. **Wires leave nothing behind**: the TUN wire's namespace and device
//!    are removed on every exit path that runs destructors ([`wire::tun`]).

pub mod app;
pub mod chan;
pub mod component;
pub mod control;
pub mod driver;
pub mod filter;
pub mod host;
pub mod hosting;
pub mod ip;
pub mod mono;
pub mod pool;
pub mod power;
pub mod proto;
pub mod stack;
pub mod stream;
pub mod syscall;
pub mod tcp;
pub mod wire;

pub use component::{Component, ComponentKind, Progress};
pub use stack::{Stack, StackConfig};

/// Nanoseconds since `t0` (saturating).
pub(crate) fn elapsed_ns(t0: std::time::Instant) -> dyncore_core::Nanos {
    dyncore_core::nanos(t0.elapsed())
}
