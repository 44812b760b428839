//! Workloads of Chameleon Table 3 as cost models.
//!
//! Work is measured in nanoseconds of one baseline CPU: a thread with
//! `1_000_000` ns of work finishes after 1 ms on a baseline CPU, after
//! 0.5 ms on a CPU of speed 2.0.
//!
//! * Sequential programs: one thread; a speed class (low/medium/high) picks
//!   the speedup on fast CPUs and fused objects (Table 2).
//! * Parallel programs, by how work is bound to threads:
//!   - `Static` (Blackscholes, Mandelbrot-SB): each thread owns an equal
//!     share (Mandelbrot rows vary in cost: ±`imbalance`, drawn from the
//!     seeded generator); the program ends when its slowest thread does.
//!   - `Dynamic` (Fibonacci, Mandelbrot-DB): a shared pool of small tasks;
//!     a thread that finishes a task takes the next, so fast CPUs do more.
//!   - `Processes` (pmake): like `Dynamic` with coarse jobs of random length.

use serde::Serialize;

pub use dyncore_core::speed::SpeedClass;

/// How a parallel program binds work to threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Binding {
    Static,
    Dynamic,
    Processes,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Shape {
    Sequential,
    Parallel {
        binding: Binding,
        /// Mean task length (Dynamic/Processes), baseline ns.
        task_ns: u64,
        /// Per-thread work spread for Static (fraction), or task-length spread.
        imbalance: f64,
    },
}

/// A Table 3 program.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Program {
    pub name: &'static str,
    pub description: &'static str,
    pub shape: Shape,
    /// Speedup class on fast CPUs / fused objects. Parallel programs are
    /// given `Medium` (the paper does not say; it only matters on ACMPs).
    pub class: SpeedClass,
    /// Default total work, ms of one baseline CPU.
    pub work_ms: f64,
    /// Progress rate when the SMT sibling is busy (§5.5).
    pub smt_factor: f64,
}

impl Program {
    pub fn is_sequential(&self) -> bool {
        matches!(self.shape, Shape::Sequential)
    }
}

const fn seq(name: &'static str, description: &'static str, class: SpeedClass, smt_factor: f64) -> Program {
    Program { name, description, shape: Shape::Sequential, class, work_ms: 4000.0, smt_factor }
}

/// The programs a scenario can name (case-insensitive).
pub const PROGRAMS: [Program; 12] = [
    Program {
        name: "fibonacci",
        description: "task-parallel threads (TBB)",
        shape: Shape::Parallel { binding: Binding::Dynamic, task_ns: 2_000_000, imbalance: 0.5 },
        class: SpeedClass::Medium,
        work_ms: 48_000.0,
        smt_factor: 0.6,
    },
    Program {
        name: "pmake",
        description: "task-parallel processes (parallel make)",
        shape: Shape::Parallel { binding: Binding::Processes, task_ns: 150_000_000, imbalance: 0.75 },
        class: SpeedClass::Medium,
        work_ms: 48_000.0,
        smt_factor: 0.6,
    },
    Program {
        name: "blackscholes",
        description: "data-parallel threads, static partition",
        shape: Shape::Parallel { binding: Binding::Static, task_ns: 0, imbalance: 0.0 },
        class: SpeedClass::Medium,
        work_ms: 48_000.0,
        smt_factor: 0.6,
    },
    Program {
        name: "mandelbrot-sb",
        description: "OpenMP kernel, static binding",
        shape: Shape::Parallel { binding: Binding::Static, task_ns: 0, imbalance: 0.1 },
        class: SpeedClass::Medium,
        work_ms: 48_000.0,
        smt_factor: 0.6,
    },
    Program {
        name: "mandelbrot-db",
        description: "OpenMP kernel, dynamic binding",
        shape: Shape::Parallel { binding: Binding::Dynamic, task_ns: 10_000_000, imbalance: 0.5 },
        class: SpeedClass::Medium,
        work_ms: 48_000.0,
        smt_factor: 0.6,
    },
    seq("gcc", "low-CPU single thread", SpeedClass::Low, 0.85),
    seq("astar", "low-CPU single thread", SpeedClass::Low, 0.8),
    seq("dealII", "medium-CPU single thread", SpeedClass::Medium, 0.7),
    seq("lbm", "medium-CPU single thread", SpeedClass::Medium, 0.7),
    seq("sjeng", "high-CPU single thread", SpeedClass::High, 0.55),
    seq("nqueen", "high-CPU single thread", SpeedClass::High, 0.55),
    seq("h264ref", "high-CPU single thread", SpeedClass::High, 0.6),
];

/// The stand-in for a command workload that gives no `model`: one thread
/// of the medium speed class. It shapes the command's `ThreadSpec` only;
/// the simulator never runs it (a scenario with a command and no model is
/// refused there).
pub const COMMAND: Program = Program {
    name: "command",
    description: "a real program run live (no model)",
    shape: Shape::Sequential,
    class: SpeedClass::Medium,
    work_ms: 0.0,
    smt_factor: 0.7,
};

/// Looks a program up by name (case-insensitive).
pub fn program(name: &str) -> Option<&'static Program> {
    PROGRAMS.iter().find(|p| p.name.eq_ignore_ascii_case(name))
}
