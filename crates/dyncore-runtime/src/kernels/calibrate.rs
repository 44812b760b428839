//! Running kernels on runtime CPUs: [`KernelTask`], and [`calibrate`], the
//! baseline a live speedup is measured against (a kernel's units per second
//! alone at a given duty on a given CPU, in the same run).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dyncore_core::CpuId;

use super::Kernel;
use crate::cpu::{Ctx, Duty, PlaceError, Runtime, Task, TaskPoll};

/// A kernel as a runtime task: one kernel step per runtime step; the units
/// done are added to a shared counter.
pub struct KernelTask {
    kernel: Box<dyn Kernel>,
    units: Arc<AtomicU64>,
}

impl KernelTask {
    pub fn new(kernel: Box<dyn Kernel>, units: Arc<AtomicU64>) -> KernelTask {
        KernelTask { kernel, units }
    }
}

impl Task for KernelTask {
    fn step(&mut self, _cx: &mut Ctx<'_>) -> TaskPoll {
        let p = self.kernel.step();
        self.units.fetch_add(p.units, Ordering::Relaxed);
        if p.done { TaskPoll::Ready } else { TaskPoll::Pending }
    }

    fn name(&self) -> String {
        format!("kernel {}", self.kernel.name())
    }
}

/// A kernel's throughput alone on one runtime CPU at one duty cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    pub kernel: &'static str,
    pub cpu: CpuId,
    pub duty: Duty,
    pub units: u64,
    pub steps: u64,
    /// From the start of the first step to the end of the last, throttled
    /// idle time included.
    pub elapsed_ns: u64,
    /// The longest and the mean kernel step (wall time: a step preempted by
    /// the host is longer).
    pub max_step_ns: u64,
    pub mean_step_ns: u64,
}

impl Calibration {
    pub fn units_per_s(&self) -> f64 {
        self.units as f64 * 1e9 / self.elapsed_ns.max(1) as f64
    }
}

/// Why a calibration could not be made.
#[derive(Debug, Clone, PartialEq)]
pub enum CalibrationError {
    Place(PlaceError),
    /// The CPU has other tasks queued: the kernel would not run alone.
    Busy {
        cpu: CpuId,
        queued: usize,
    },
    /// The CPU went offline during the measurement; the task ran elsewhere.
    Moved {
        cpu: CpuId,
        to: CpuId,
    },
    /// The kernel panicked (see `Runtime::failures`).
    Failed,
    /// No result within the window plus the runtime's wait deadline.
    TimedOut,
}

impl std::fmt::Display for CalibrationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CalibrationError::Place(e) => e.fmt(f),
            CalibrationError::Busy { cpu, queued } => {
                write!(f, "CPU {cpu} has {queued} other task(s) queued: a calibration runs the kernel alone")
            }
            CalibrationError::Moved { cpu, to } => {
                write!(f, "CPU {cpu} went offline during the calibration (the kernel moved to CPU {to})")
            }
            CalibrationError::Failed => f.write_str("the kernel panicked during the calibration"),
            CalibrationError::TimedOut => f.write_str("the calibration did not finish in time"),
        }
    }
}

impl std::error::Error for CalibrationError {}

type Outcome = Arc<Mutex<Option<Result<Calibration, CalibrationError>>>>;

struct CalibrationTask<F> {
    make: F,
    kernel: Box<dyn Kernel>,
    cpu: CpuId,
    duty: Duty,
    window: Duration,
    start: Option<Instant>,
    units: u64,
    steps: u64,
    max_step_ns: u64,
    total_step_ns: u64,
    outcome: Outcome,
}

impl<F: Fn() -> Box<dyn Kernel> + Send + 'static> CalibrationTask<F> {
    fn finish(&self, r: Result<Calibration, CalibrationError>) -> TaskPoll {
        *self.outcome.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        TaskPoll::Ready
    }
}

impl<F: Fn() -> Box<dyn Kernel> + Send + 'static> Task for CalibrationTask<F> {
    fn step(&mut self, cx: &mut Ctx<'_>) -> TaskPoll {
        if cx.cpu() != self.cpu {
            return self.finish(Err(CalibrationError::Moved { cpu: self.cpu, to: cx.cpu() }));
        }
        let t0 = Instant::now();
        let start = *self.start.get_or_insert(t0);
        let p = self.kernel.step();
        let t1 = Instant::now();
        let step_ns = ns(t1 - t0);
        (self.units, self.steps) = (self.units + p.units, self.steps + 1);
        self.max_step_ns = self.max_step_ns.max(step_ns);
        self.total_step_ns += step_ns;
        if p.done {
            // Run for the whole window: start the kernel over.
            self.kernel = (self.make)();
        }
        if t1 - start < self.window {
            return TaskPoll::Pending;
        }
        self.finish(Ok(Calibration {
            kernel: self.kernel.name(),
            cpu: self.cpu,
            duty: self.duty,
            units: self.units,
            steps: self.steps,
            elapsed_ns: ns(t1 - start),
            max_step_ns: self.max_step_ns,
            mean_step_ns: self.total_step_ns / self.steps,
        }))
    }

    fn name(&self) -> String {
        format!("calibration of kernel {}", self.kernel.name())
    }
}

impl<F> Drop for CalibrationTask<F> {
    /// Dropped without a result: its step panicked.
    fn drop(&mut self) {
        let mut o = self.outcome.lock().unwrap_or_else(|p| p.into_inner());
        if o.is_none() {
            *o = Some(Err(CalibrationError::Failed));
        }
    }
}

use dyncore_core::nanos as ns;

/// Runs kernels from `make` alone on runtime CPU `cpu` at `duty` for
/// `window` (a kernel that finishes is started over), and gives its
/// throughput. The CPU's duty is restored afterwards. Must not be called
/// from a task.
pub fn calibrate(
    rt: &Runtime,
    cpu: CpuId,
    duty: Duty,
    window: Duration,
    make: impl Fn() -> Box<dyn Kernel> + Send + 'static,
) -> Result<Calibration, CalibrationError> {
    let queued = rt.queued(cpu).map_err(CalibrationError::Place)?;
    if queued > 0 {
        return Err(CalibrationError::Busy { cpu, queued });
    }
    let before = rt.duty(cpu).map_err(CalibrationError::Place)?;
    rt.set_duty(cpu, duty).map_err(CalibrationError::Place)?;
    let outcome: Outcome = Arc::default();
    let task = CalibrationTask {
        kernel: make(),
        make,
        cpu,
        duty,
        window,
        start: None,
        units: 0,
        steps: 0,
        max_step_ns: 0,
        total_step_ns: 0,
        outcome: outcome.clone(),
    };
    let placed = rt.spawn_on(cpu, task).map_err(CalibrationError::Place);
    let deadline = Instant::now() + window + rt.wait_deadline();
    let result = placed.and_then(|()| {
        loop {
            if let Some(r) = outcome.lock().unwrap_or_else(|p| p.into_inner()).take() {
                break r;
            }
            if Instant::now() > deadline {
                break Err(CalibrationError::TimedOut);
            }
            std::thread::sleep(Duration::from_micros(500));
        }
    });
    rt.set_duty(cpu, before).map_err(CalibrationError::Place)?;
    result
}
