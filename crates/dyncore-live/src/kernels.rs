//! Real work for a live run: each Table 3 program is a compute kernel of
//! `dyncore_runtime::kernels`, and its work — milliseconds of one baseline
//! CPU in the scenario — becomes kernel units through a calibration of that
//! kernel alone on one runtime CPU at the baseline duty, measured in the
//! same run on the same machine.
//!
//! | programs | kernel |
//! |---|---|
//! | every sequential program (gcc, astar, dealII, lbm, sjeng, N-Queen, h264ref) | N-Queens (12 queens, started over as often as needed): the paper ran "a simple N-Queen program for sequential programs" (§5.2), their speed class is what differs |
//! | fibonacci | Fibonacci (the call tree of fib(27) cut at fib(16)) |
//! | pmake | pmake's mixing-round jobs |
//! | blackscholes | Black-Scholes over a 4096-option portfolio |
//! | mandelbrot-sb, mandelbrot-db | Mandelbrot, a 96×96 grid, rows in order (-SB) or from a pool (-DB) |
//!
//! The shape of a program's work is the simulator's
//! (`dyncore_sim::programs::deal_work`: one piece, equal shares, or a
//! shared pool of tasks of the program's length): each piece is converted
//! to units and done by a `Portion` of the kernel.

use std::sync::Arc;
use std::time::Duration;

use dyncore_runtime::cpu::{Duty, Runtime};
use dyncore_runtime::kernels::{
    BlackScholes, Calibration, CalibrationError, FibJobs, Fibonacci, Grid, Kernel, MakeKernel, Mandelbrot,
    MandelbrotSums, NQueens, Pmake, PmakeJobs, Pool, Rows, calibrate,
};
use dyncore_sim::workload::{Program, Shape};

/// The kernel a program runs, and a name for it in reports.
pub fn kernel_for(p: &Program) -> (&'static str, MakeKernel) {
    let make: MakeKernel = match (p.name, p.shape) {
        (_, Shape::Sequential) => Arc::new(|| Box::new(NQueens::new(12)) as Box<dyn Kernel>),
        ("fibonacci", _) => Arc::new(|| Box::new(Fibonacci::new(FibJobs::new(27, 16))) as Box<dyn Kernel>),
        ("pmake", _) => {
            Arc::new(|| Box::new(Pmake::new(PmakeJobs::new(7, 64, 4_096, 65_536))) as Box<dyn Kernel>)
        }
        ("blackscholes", _) => {
            let options = BlackScholes::portfolio(11, 4096);
            Arc::new(move || {
                Box::new(BlackScholes::new(options.clone(), 0..options.len(), Arc::default()))
                    as Box<dyn Kernel>
            })
        }
        ("mandelbrot-sb" | "mandelbrot-db", _) => {
            let dynamic = p.name == "mandelbrot-db";
            let grid = Grid { width: 96, height: 96, max_iterations: 256 };
            Arc::new(move || {
                let rows = if dynamic {
                    Rows::Dynamic(Arc::new(Pool::new(grid.height)))
                } else {
                    Rows::Static(0..grid.height)
                };
                Box::new(Mandelbrot::new(grid, rows, Arc::new(MandelbrotSums::default()))) as Box<dyn Kernel>
            })
        }
        (other, _) => unreachable!("program `{other}` has no kernel: every Table 3 program is listed"),
    };
    let name = make().name();
    (name, make)
}

/// A kernel's units per second alone at the baseline duty.
#[derive(Debug, Clone)]
pub struct Rate {
    pub kernel: &'static str,
    pub before: Calibration,
    /// Measured again after the run (`None`: the run was interrupted or
    /// ended in an error): how far the machine drifted meanwhile.
    pub after: Option<Calibration>,
}

impl Rate {
    /// Units per second the work was sized with (measured before the run).
    pub fn sizing_units_per_s(&self) -> f64 {
        self.before.units_per_s()
    }

    /// Units per second the speedups are measured against: the mean of the
    /// calibrations before and after the run (before alone if there is no
    /// after), so that a machine that drifted during the run counts half
    /// as much.
    pub fn units_per_s(&self) -> f64 {
        match &self.after {
            Some(a) => (self.before.units_per_s() + a.units_per_s()) / 2.0,
            None => self.before.units_per_s(),
        }
    }

    /// After over before, minus 1 (`None`: not measured after).
    pub fn drift(&self) -> Option<f64> {
        self.after.as_ref().map(|a| a.units_per_s() / self.before.units_per_s() - 1.0)
    }
}

/// How long each calibration runs: 300 throttle periods of 1 ms; the
/// kernels' steps are about 20 µs, so 7 500 steps at 50%.
pub const CALIBRATION: Duration = Duration::from_millis(300);

/// Measures `make`'s kernel alone on runtime CPU 0 at `baseline`.
pub fn measure(rt: &Runtime, baseline: Duty, make: &MakeKernel) -> Result<Calibration, CalibrationError> {
    let make = make.clone();
    calibrate(rt, 0, baseline, CALIBRATION, move || make())
}

/// Units of `ns` baseline nanoseconds at `units_per_s` (at least 1).
pub fn units(ns: u64, units_per_s: f64) -> u64 {
    ((ns as f64 * units_per_s / 1e9).round() as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_program_has_a_kernel_that_runs() {
        for p in dyncore_sim::workload::PROGRAMS {
            let (name, make) = kernel_for(&p);
            let mut k = make();
            assert_eq!(k.name(), name);
            let s = k.step();
            assert!(s.units > 0, "{}: {s:?}", p.name);
            if !p.is_sequential() {
                assert_eq!(name, p.name, "a parallel program runs its own kernel");
            }
        }
        assert_eq!(units(1_000_000, 5e7), 50_000);
        assert_eq!(units(0, 5e7), 1);
    }
}
