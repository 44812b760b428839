//! dyncore-runtime: dyncore's live backend on Linux.
//!
//! * [`sidecore`]: a core dedicated to a service, called through shared-memory
//!   sidecalls instead of traps (the Sidecore paper).
//! * [`cpu`]: runtime CPUs (pinned workers) that go offline and online the Bolt
//!   way, with processor proxies (Bolt; Chameleon §3.1, §4.1).
//! * [`kernels`]: the Table 3 programs as compute kernels run in small
//!   steps, counting their work in units.
//! * [`threads`]: threads placed on runtime CPUs by a policy ("run thread
//!   T on CPU c"), with events when they finish.
//! * [`backend`]: the live backend of the policy boundary: a policy's
//!   actions executed on runtime CPUs, events fed back on the runtime's clock.
//! * [`machine`]: the real machine's topology from sysfs, and whether a
//!   fused pair can be a real SMT core.
//! * [`affinity`]: pinning and the process's allowed CPUs.
//! * [`arbiter`]: unmodified processes placed, throttled and fused by a
//!   policy, through cgroups (or CPU affinity).
//! * [`wait`]: lock-free waiting with a deadline ([`spin_until`]).
//! * [`testing`]: the guard every test on real CPUs holds.

pub mod affinity;
pub mod arbiter;
pub mod backend;
pub mod cpu;
pub mod kernels;
pub mod machine;
pub mod sidecore;
pub mod testing;
pub mod threads;
pub mod wait;

pub use wait::{Spin, spin_until, spin_until_with};
