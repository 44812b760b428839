//! dyncore-ring: shared-memory channels between cores.
//!
//! * [`call`]: synchronous request/response over cache-line slots, one slot
//!   per client, polled by one server (the sidecall transport).
//! * [`ring`](mod@ring): a single-producer single-consumer ring of cache-line cells
//!   with batched head/tail publication (NewtOS component queues).
//! * [`journal`]: commits the positions of several rings at once, so a
//!   component that crashes between any two steps loses and duplicates
//!   nothing, and one restarted in fresh memory resumes where it committed.
//! * [`waiter`]: spin-then-park waiting (UMWAIT where the CPU has `waitpkg`,
//!   else `spin_loop`, then a futex) with a wake handshake that never loses a
//!   wake-up.
//!
//! ```
//! use dyncore_ring::{CallChannel, CallClient, CallServer, ServerWake, SpinPolicy};
//!
//! let chan = CallChannel::<u64, u64>::new(4); // four client slots
//! let mut server = CallServer::new(&chan).unwrap();
//! let t = std::thread::spawn(move || loop {
//!     server.poll(|_slot, x| x * 2);
//!     if server.wait(&SpinPolicy::CLIENT, None) == ServerWake::Closed {
//!         break;
//!     }
//! });
//! let mut client = CallClient::new(&chan).unwrap();
//! assert_eq!(client.call(21, &SpinPolicy::CLIENT, None), Ok(42));
//! chan.close();
//! t.join().unwrap();
//! ```
//!
//! This is the crate with the `unsafe`: each block says why it is sound, each
//! protocol is described step by step in its module and model-checked with
//! loom (`RUSTFLAGS="--cfg dyncore_loom" cargo test --release -p dyncore-ring
//! --lib -- loom`), where the private `sync` module swaps `std` for loom.

pub mod call;
pub mod journal;
mod park;
pub mod ring;
mod sync;
pub mod waiter;
pub mod waitpkg;

pub use call::{BATCH_MAX, CallChannel, CallClient, CallError, CallServer, PAYLOAD_MAX, ServerWake};
/// Re-exported so users pad their own shared words the same way.
pub use crossbeam_utils::CachePadded;
pub use journal::{CommitPoint, Journal, Word, WordRef};
pub use ring::{Consumer, Probe, Producer, RingRef, ring};
/// The `Arc` channels are shared through: `std::sync::Arc`, or loom's under
/// `cfg(dyncore_loom)` (hold channels in this type to compile in both).
pub use sync::Arc as ChannelArc;
pub use waiter::{SpinPolicy, Waiter};

#[cfg(all(test, not(dyncore_loom)))]
mod tests;

#[cfg(all(test, dyncore_loom))]
mod loom_tests;
