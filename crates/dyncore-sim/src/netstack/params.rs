//! The model's inputs besides the costs: traffic and machine parameters, a
//! CPU of a layout, and an offered load.

use dyncore_core::Nanos;
use dyncore_core::placement::ComponentKind;
use serde::{Deserialize, Serialize};

use super::idle::GovernorName;

/// Traffic and machine parameters of the model; every field has a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetParams {
    /// Link speed, Gbit/s.
    pub link_gbps: f64,
    /// Payload bytes per segment.
    pub mss: u32,
    /// Bytes a frame adds on the wire (headers, preamble, gap).
    pub frame_overhead: u32,
    /// Concurrent TCP streams.
    pub streams: u32,
    /// Window of each stream, bytes (lwIP: no window scaling, 64 KiB).
    pub window_bytes: u64,
    /// From the last bit of a segment on the wire to its ACK reaching the
    /// NIC: propagation and the receiver's turnaround, ns.
    pub remote_ns: Nanos,
    /// Mean of the exponential jitter added to `remote_ns`, ns.
    pub remote_jitter_ns: Nanos,
    /// The receiver acknowledges every this many segments.
    pub ack_every: u32,
    /// ... or this long after an unacknowledged segment, ns.
    pub delack_ns: Nanos,
    /// Messages a component handles in one turn on a shared CPU.
    pub batch: u32,
    /// How long a CPU with nothing to do polls before it sleeps, ns (0:
    /// it sleeps at once, as MWAIT lets NewtOS's cores; a live runtime CPU
    /// polls a few hundred times first). A message that comes while it
    /// polls is served at once, without a wake-up.
    pub spin_ns: Nanos,
    /// Cycles a component's turn costs before its first message: after the
    /// CPU slept (caches and TLB refilled, channels checked) or when the CPU
    /// switches to it from another component (a context switch).
    pub turn_cycles: f64,
    /// Slowdown of a job that starts while its sibling hyperthread is busy.
    pub smt_factor: f64,
    /// Application threads writing through the syscall server, each with
    /// one blocking write outstanding (0: none; the application's data is
    /// there whenever the stack wants it). See [`super::writes`].
    pub clients: u32,
    /// Bytes of each client's write.
    pub write_bytes: u32,
    /// Cycles a client spends per write outside the stack (its kernel trap
    /// and the context switches of a blocking call), at the chip's
    /// frequency.
    pub client_cycles: f64,
    /// Bandwidth of TCP's copy of the payload, GB/s: the copy's memory time,
    /// `bytes / copy_gb_per_s` ns, which does not scale with the core's
    /// clock (0: none, the copy costs cycles only).
    pub copy_gb_per_s: f64,
    /// Which governor picks a sleeping CPU's idle state (`menu`;
    /// `always-c1`, `always-c1e`, `always-c3`, `always-c6`: NewtOS's own
    /// fixed-hint MWAIT, one per hint; or `fixed`: `[stack] wakeup_ns` for
    /// every wake-up, no states).
    pub governor: GovernorName,
    /// Simulated time, ms.
    pub duration_ms: f64,
    /// Time before measuring starts, ms.
    pub warmup_ms: f64,
}

impl Default for NetParams {
    fn default() -> Self {
        NetParams {
            link_gbps: 10.0,
            mss: 1448,
            frame_overhead: 90,
            streams: 8,
            window_bytes: 65535,
            remote_ns: 30_000,
            remote_jitter_ns: 5_000,
            ack_every: 2,
            delack_ns: 200_000,
            batch: 1,
            spin_ns: 0,
            turn_cycles: 1000.0,
            smt_factor: 1.3,
            clients: 0,
            write_bytes: 8192,
            client_cycles: 0.0,
            copy_gb_per_s: 0.0,
            governor: GovernorName::Menu,
            duration_ms: 20.0,
            warmup_ms: 4.0,
        }
    }
}

/// One CPU of a layout: its speed and the components it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpuSpec {
    /// Effective MHz: a step of the machine's speed table.
    pub mhz: u32,
    pub components: Vec<ComponentKind>,
    /// CPUs with the same core are hyperthreads of one core (default: a
    /// core of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<u32>,
}

/// An application that offers `gbps` (payload) from `at_ms` on; unlimited
/// (`None`) before the first entry.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadStep {
    pub at_ms: f64,
    pub gbps: f64,
}
