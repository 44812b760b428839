//! User-level tasks: work done in steps, so that a CPU can be emptied
//! between two steps (the point where Bolt's *entry* latency ends).

use dyncore_core::CpuId;

use super::cache::{BLOCK_BYTES, Block, MemError, Pool};
use super::percpu::{CpuCounters, Local};

/// What a step returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum TaskPoll {
    /// More steps to come: the task is queued again (possibly on another
    /// CPU, if this one goes offline meanwhile).
    Pending,
    /// Finished: the task is dropped.
    Ready,
}

/// A task. A step should be short (it delays offline calls and grace
/// periods) and must not block on the runtime itself (no `offline`,
/// `synchronize`, … from inside a step).
pub trait Task: Send + 'static {
    fn step(&mut self, cx: &mut Ctx<'_>) -> TaskPoll;

    /// What the task is, for failure reports (called only when a step
    /// panics).
    fn name(&self) -> String {
        std::any::type_name::<Self>().to_string()
    }

    /// Called by the worker right after a step that returned (not one that
    /// panicked), with the time the step ended on the runtime's clock
    /// (`Runtime::now_ns`), which the worker reads anyway: a task that
    /// records its own execution ([`Ctx::step_started_ns`] to this) reads
    /// no clock of its own. The default does nothing.
    fn stepped(&mut self, _end_ns: u64) {}
}

impl<F> Task for F
where
    F: FnMut(&mut Ctx<'_>) -> TaskPoll + Send + 'static,
{
    fn step(&mut self, cx: &mut Ctx<'_>) -> TaskPoll {
        self(cx)
    }
}

/// What a step sees: the CPU it runs on and that CPU's memory cache.
pub struct Ctx<'a> {
    pub(crate) cpu: CpuId,
    pub(crate) real_cpu: CpuId,
    pub(crate) pool: &'a Pool,
    pub(crate) local: &'a mut Local,
    pub(crate) invalidation: u64,
    /// The start of the runtime's clock.
    pub(crate) epoch: std::time::Instant,
    /// When the worker started this step (see [`Ctx::step_started_ns`]).
    pub(crate) step_started_ns: u64,
}

impl Ctx<'_> {
    /// The runtime CPU running this step.
    pub fn cpu(&self) -> CpuId {
        self.cpu
    }

    /// The real CPU that runtime CPU is pinned to.
    pub fn real_cpu(&self) -> CpuId {
        self.real_cpu
    }

    /// The newest invalidation this CPU has applied.
    pub fn invalidation_generation(&self) -> u64 {
        self.invalidation
    }

    /// When the worker started this step, on the runtime's clock: read
    /// before it took the task from its run queue, so no earlier than the
    /// time the task was queued, and no later than anything the step does.
    pub fn step_started_ns(&self) -> u64 {
        self.step_started_ns
    }

    /// Now, on the runtime's clock (`Runtime::now_ns`).
    pub fn now_ns(&self) -> u64 {
        dyncore_core::nanos(self.epoch.elapsed())
    }

    /// Allocates a block from this CPU's cache.
    pub fn alloc(&mut self) -> Result<Block, MemError> {
        let cache = self.local.cache.as_mut().ok_or(MemError::NoCache)?;
        let b = self.pool.alloc(cache)?;
        self.local.stats.allocs += 1;
        Ok(b)
    }

    /// Frees a block into this CPU's cache (wherever it was allocated).
    pub fn free(&mut self, b: Block) -> Result<(), MemError> {
        let cache = self.local.cache.as_mut().ok_or(MemError::NoCache)?;
        self.pool.free(cache, b)?;
        self.local.stats.frees += 1;
        Ok(())
    }

    /// The bytes of a block this task holds.
    pub fn bytes<'b>(&'b self, b: &'b mut Block) -> &'b mut [u8; BLOCK_BYTES] {
        self.pool.bytes(b)
    }
}

/// What a remote-call handler sees: the CPU the call was addressed to and
/// that CPU's per-CPU state, even when a proxy runs it.
pub struct CallCx<'a> {
    pub(crate) cpu: CpuId,
    pub(crate) handled_on: CpuId,
    pub(crate) stats: &'a CpuCounters,
}

impl CallCx<'_> {
    /// The CPU the call was addressed to.
    pub fn cpu(&self) -> CpuId {
        self.cpu
    }

    /// The CPU running the handler: the addressed CPU, or its proxy.
    pub fn handled_on(&self) -> CpuId {
        self.handled_on
    }

    /// Whether a proxy runs the handler (the addressed CPU is offline).
    pub fn by_proxy(&self) -> bool {
        self.cpu != self.handled_on
    }

    /// The addressed CPU's statistics, this call included: per-CPU state
    /// that a proxy reads on the offline CPU's behalf.
    pub fn stats(&self) -> &CpuCounters {
        self.stats
    }
}
