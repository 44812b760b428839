//! NewtOS's split network stack in the simulator (Hruby et al., "When
//! Slower is Faster", and issue 11): an event-driven model of a TCP sender
//! whose components (syscall server, TCP, IP, packet filter, driver) run on
//! CPUs of chosen speeds, joined by channels, feeding a 10 Gbps NIC.
//!
//! # The model
//!
//! * **Components** cost cycles per packet and per payload byte
//!   ([`StackCosts`](dyncore_core::profile::StackCosts), the same numbers a machine profile's `[stack]` holds);
//!   each message a component takes from a channel costs
//!   `channel_cycles_per_msg` more. A CPU that hosts several components runs
//!   them round-robin, each for up to [`NetParams::batch`] messages a turn.
//!   A turn that starts after the CPU slept, or on a different component
//!   than the CPU ran last, costs [`NetParams::turn_cycles`] more: a core
//!   that sleeps less, or carries one component, amortises it over more
//!   messages.
//! * **Data path:** (syscall server →) TCP → IP (→ filter) → driver → the
//!   NIC's FIFO, which serialises frames onto a [`NetParams::link_gbps`]
//!   link. TCP sends a segment whenever its window (`streams ×
//!   window_bytes`) has room and the application has data (unlimited, or an
//!   offered load). **ACK path:** the receiver acknowledges every
//!   `ack_every` segments after `remote_ns` (plus seeded jitter); the ACK
//!   goes NIC → driver → (filter →) IP → TCP, which opens the window.
//! * **Sleep and wake-up:** a CPU with nothing to do polls for
//!   [`NetParams::spin_ns`] (0 for NewtOS's MWAIT), then sleeps in the
//!   Nehalem idle state its governor picks ([`NetParams::governor`]:
//!   `menu`, `always-c1`, `always-c1e`, `always-c3`, `always-c6`; see [`idle`] and
//!   [`dyncore_core::idle`]). A message for a sleeping CPU is served only
//!   after that state's exit latency; a hyperthread whose sibling is awake
//!   wakes as from C1 (the core never slept). Governor `fixed` charges the
//!   profile's `wakeup_ns` on every wake-up instead (what the live runtime
//!   has). This is the paper's explanation of "slower is faster": a busier
//!   core sleeps less, so fewer wake-ups add to the round trip of
//!   window-limited streams — which needs deep states to matter.
//! * **The copy's memory time:** TCP's copy of a segment's payload also
//!   waits `bytes / copy_gb_per_s` for memory ([`NetParams::copy_gb_per_s`];
//!   0 by default, 7.4 GB/s assumed in the NewtOS scenarios, see
//!   [`calibrate`]). The wait does not shrink with a P-state's faster clock
//!   (2267–1600 MHz: the memory keeps its own) and stretches with a
//!   throttled core's duty cycle (below 1600 MHz clock modulation stops
//!   the whole core); it is not slowed by a busy sibling hyperthread.
//! * **Synchronous writes** (opt-in, [`NetParams::clients`]; see
//!   [`writes`]): K application threads, each with one blocking write
//!   through the syscall server, which then runs on the system's core at
//!   the chip's frequency; a write's round trip holds the server's, TCP's
//!   and the client's wake-ups. Off in the shipped scenarios (the
//!   application's data is there whenever TCP wants it).
//! * **Work beside the stack** ([`Beside`]): the application and the
//!   receiver on the model's CPUs, for the live bench's predictions.
//! * **Machine:** each CPU has a speed step of
//!   [`SpeedTable::newtos`](dyncore_core::power::SpeedTable::newtos); a job's
//!   time is its cycles over the step's effective MHz. Two CPUs with the
//!   same `core` are hyperthreads of one core: a job that starts while the
//!   sibling is busy runs `smt_factor` times slower.
//! * **Power** per core from
//!   [`PowerModel::newtos`](dyncore_core::power::PowerModel): busy at its
//!   step while either thread runs, asleep otherwise; cores that host
//!   nothing are power-gated (0 W).
//!
//! Determinism: virtual nanoseconds, one event queue ordered by (time,
//! sequence number), one ChaCha generator seeded from the run's seed (the
//! receiver's ACK jitter and, under an offered load, the application's
//! Poisson writes). The same inputs give the same [`Outcome`].
//!
//! Invariants (asserted): virtual time never goes backwards; bytes in flight
//! never exceed the window; a CPU runs one job at a time; busy time never
//! exceeds elapsed time; with synchronous writes, a client has one write
//! outstanding and TCP's buffered bytes never exceed its send buffer.

use dyncore_core::Nanos;

mod beside;
pub mod calibrate;
pub mod claims;
pub mod idle;
mod jobtime;
mod outcome;
mod params;
pub mod policy;
pub mod predict;
mod queue;
pub mod run;
mod sample;
pub mod scale;
pub mod scenario;
mod sim;
mod traffic;
pub mod writes;

pub use beside::Beside;
pub use outcome::{ComponentOutcome, CpuOutcome, FULL_RESOURCES_MHZ, Outcome};
pub use params::{CpuSpec, LoadStep, NetParams};
pub use sim::{RunInput, Sim};

fn ms(v: f64) -> Nanos {
    round_ns(v * 1e6)
}

/// `x.round() as Nanos` (to the nearest, halves away from zero; negative
/// and NaN to 0, beyond `Nanos::MAX` to it), bit for bit, without
/// `f64::round`, which without SSE4.1 is a library call of some forty
/// instructions: the model rounds at every job.
#[inline]
fn round_ns(x: f64) -> Nanos {
    // Below 2^62 through `i64`, whose conversions are one instruction each
    // (`u64`'s are several); exact: `whole` is `x` truncated, and the
    // fraction is representable in `x`'s own precision.
    if (0.0..4.611_686_018_427_388e18).contains(&x) {
        let whole = x as i64;
        let up = x - whole as f64 >= 0.5;
        return (whole + i64::from(up)) as Nanos;
    }
    x.round() as Nanos
}

/// Runs a fixed layout to the end and returns its outcome.
pub fn simulate(input: &RunInput<'_>) -> Outcome {
    let mut sim = Sim::new(input);
    let end = sim.end_ns();
    sim.run_until(end);
    sim.outcome()
}

#[cfg(test)]
mod tests;
