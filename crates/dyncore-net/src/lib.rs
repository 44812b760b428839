//! dyncore-net: the NewtOS network stack, split into components that talk
//! only through dyncore-ring channels.
//!
//! ```text
//!  application ⇄ syscall server ⇄ TCP (smoltcp) ⇄ IP ⇄ packet filter ⇄ driver ⇄ wire
//! ```
//!
//! * [`component`]: what a host sees of a component — a `poll(now)` object
//!   saying what it did ([`component::Progress`]), with a bell to park on
//!   and a crash switch — and its blueprint: what outlives its instances
//!   (its ports and its journal) and its constructor.
//! * [`chan`], [`pool`]: the channels (a dyncore-ring SPSC ring of
//!   cache-line items that outlives the components at its ends) and the
//!   buffer pools whose indices they carry; a component commits what it did
//!   to all of them at once through a journal (`dyncore_ring::journal`).
//! * [`syscall`], [`tcp`], [`ip`], [`filter`], [`driver`]: the components;
//!   [`stack`] builds and wires them; [`tcp_reset`] and [`tcp_recover`]:
//!   how a TCP crash is contained (its connections reset, or resumed from
//!   checkpoints).
//! * [`wire`]: an in-memory wire to a peer stack, and a TUN device to the
//!   Linux kernel's TCP in a network namespace.
//! * [`app`], [`stream`]: the iperf-like sender and receiver and the
//!   end-to-end check of their stream; [`mono`]: the same application on a
//!   monolithic smoltcp stack.
//! * [`host`]: one-thread and thread-per-component hosts, and supervision
//!   (crash → a new instance in fresh memory; live update); [`hosting`]:
//!   components on runtime CPUs, dedicated or shared, with duty-cycle
//!   speeds, live moves and live updates.
//! * [`audit`]: the frame audit (every frame passed each component once);
//!   [`faults`]: a fault campaign (crashes at random components, times and
//!   points, with live updates and moves among them).
//! * [`power`]: where real power figures would come from (RAPL, cpufreq),
//!   probed; the model is `dyncore_core::power`.
//!
//! # Invariants
//!
//! 1. **A component talks only through channels.** It holds no reference
//!    to another component: everything it exchanges is a ring item (a
//!    cache line) naming, at most, a pool buffer that travels with it.
//! 2. **No message is lost or duplicated, including across a crash at any
//!    point.** Rings deliver in order exactly once; a component stages what
//!    a poll did (outputs, frees, allocations, consumed inputs, counts) and
//!    commits it all at once through its journal, whose commit point makes
//!    a batch either invisible (a crash before it: the next instance
//!    handles the batch again) or done (a crash after it: recovery finishes
//!    it) ([`chan`], `dyncore_ring::journal`). Pushes never fail (channels
//!    are sized for every buffer of their pool, [`chan::capacity_for`]).
//! 3. **A buffer has one owner**, checked on every access ([`pool::Pool::with`]),
//!    and every buffer comes back: a stack at rest has none out
//!    ([`component::Blueprint::buffers_out`]).
//! 4. **A restart is a new instance in fresh memory.** The crashed instance
//!    is dropped whole; the new one is built by its blueprint from what
//!    outlives it: the channels and pools at their committed positions, and
//!    what its journal holds. IP, the filter, the driver and the syscall
//!    server lose nothing; TCP's connections were in its memory, so a TCP
//!    crash resets exactly the connections it held ([`tcp_reset`]) or, if
//!    the stack is so configured, resumes them from the checkpoints TCP
//!    committed with every poll ([`tcp_recover`]); the others' crashes
//!    leave them alone.
//! 5. **Wires leave nothing behind**: the TUN wire's namespace and device
//!    are removed on every exit path that runs destructors ([`wire::tun`]).

pub mod app;
pub mod audit;
pub mod chan;
pub mod component;
pub mod control;
pub mod driver;
pub mod faults;
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
mod tcp_device;
pub mod tcp_recover;
pub mod tcp_reset;
pub mod wire;

pub use component::{Component, ComponentKind, Progress};
pub use stack::{Stack, StackConfig};

/// Nanoseconds since `t0` (saturating).
pub(crate) fn elapsed_ns(t0: std::time::Instant) -> dyncore_core::Nanos {
    dyncore_core::nanos(t0.elapsed())
}
