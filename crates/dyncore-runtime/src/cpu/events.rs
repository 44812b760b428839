//! What a runtime tells whoever listens: failed tasks and calls, and CPUs
//! its watchdogs find stalled or recovered. Every event carries a time on
//! the runtime's monotonic clock ([`super::Runtime::now_ns`]).
//!
//! Failures are also kept in a list ([`super::Runtime::failures`]) so that a
//! caller that did not subscribe can still read them; subscribers
//! ([`super::Runtime::subscribe`]) get every event from the moment they
//! subscribe, through a channel that never blocks the sender (a dropped
//! receiver is forgotten at the next event).

use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};

use dyncore_core::CpuId;

use super::sync::lock;

/// What failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailedWork {
    /// A task's step panicked; the task was dropped (blocks it held stay
    /// allocated and show in [`super::Runtime::memory`] as leaked).
    Task { name: String },
    /// A remote-call handler panicked (on the addressed CPU or its proxy).
    Call { handled_on: CpuId },
}

/// A task or call that panicked. The CPU went on serving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFailure {
    pub at_ns: u64,
    /// The CPU the work was for (a proxy runs calls for offline CPUs).
    pub cpu: CpuId,
    pub work: FailedWork,
    /// The panic's message.
    pub message: String,
}

impl std::fmt::Display for TaskFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.work {
            FailedWork::Task { name } => {
                write!(f, "task {name} on CPU {} panicked: {}", self.cpu, self.message)
            }
            FailedWork::Call { handled_on } => write!(
                f,
                "remote call to CPU {} (handled on CPU {handled_on}) panicked: {}",
                self.cpu, self.message
            ),
        }
    }
}

/// An event of a runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeEvent {
    Failed(TaskFailure),
    /// The watchdog saw `cpu` with work and no progress for a whole period;
    /// its worker last went round its loop at `since_ns`.
    Stalled {
        at_ns: u64,
        cpu: CpuId,
        since_ns: u64,
    },
    /// A stalled CPU's worker moved again after `stalled_ns`.
    Recovered {
        at_ns: u64,
        cpu: CpuId,
        stalled_ns: u64,
    },
}

/// The panic message in a payload from `catch_unwind`.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic with a non-string payload)".to_string()
    }
}

#[derive(Default)]
pub(crate) struct Events {
    subscribers: Mutex<Vec<Sender<RuntimeEvent>>>,
    failures: Mutex<Vec<TaskFailure>>,
}

impl Events {
    pub(crate) fn subscribe(&self) -> Receiver<RuntimeEvent> {
        let (tx, rx) = channel();
        lock(&self.subscribers).push(tx);
        rx
    }

    pub(crate) fn emit(&self, e: RuntimeEvent) {
        if let RuntimeEvent::Failed(f) = &e {
            lock(&self.failures).push(f.clone());
        }
        lock(&self.subscribers).retain(|s| s.send(e.clone()).is_ok());
    }

    pub(crate) fn failures(&self) -> Vec<TaskFailure> {
        lock(&self.failures).clone()
    }
}
