//! dyncore-core: the mechanisms of dyncore as plain state machines.
//!
//! Nothing here owns a thread, reads a clock, does I/O or draws randomness of
//! its own: time comes in as [`Nanos`], and every decision goes out as an
//! action that a backend (the simulator in `dyncore-sim`, or the live runtime
//! in `dyncore-runtime`) executes. See `docs/architecture.md`.

pub mod cpuset;
pub mod exec;
pub mod idle;
pub mod node;
pub mod placement;
pub mod policies;
pub mod policy;
pub mod power;
pub mod profile;
pub mod proxy;
pub mod reconfig;
pub mod sched;
pub mod speed;
pub mod topology;

pub use cpuset::{CpuId, CpuSet};

/// Time in nanoseconds: virtual time in the simulator, monotonic time live.
/// Names of durations carry the unit last (`min_granularity_ns`).
pub type Nanos = u64;

/// A duration in whole nanoseconds, saturating at `Nanos::MAX` (585 years).
/// The one conversion every crate uses, so that none truncates silently.
pub fn nanos(d: std::time::Duration) -> Nanos {
    Nanos::try_from(d.as_nanos()).unwrap_or(Nanos::MAX)
}
