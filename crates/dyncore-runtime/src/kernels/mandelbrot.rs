//! Mandelbrot, the OpenMP kernel of Table 3: escape-time iterations over a
//! grid of points, a row at a time. Mandelbrot-DB takes rows from a shared
//! pool (dynamic binding: a faster CPU does more rows), Mandelbrot-SB
//! gets a fixed range of rows (static binding: the program waits for the
//! slowest thread). One unit is one iteration of `z ← z² + c`.
//!
//! Check: the stepped kernels, however the rows are dealt, find the same
//! points inside the set as [`Grid::count_inside`], a plain loop; the
//! area they give is the set's (about 1.506).

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Kernel, Pool, Progress};

/// Iterations per step (plus the rest of one pixel): about 20 µs on the
/// reference machine.
const STEP_ITERATIONS: u64 = 6_144;

/// The points: `width × height` over the rectangle
/// [-2, 0.5] × [-1.25, 1.25] of the complex plane.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grid {
    pub width: usize,
    pub height: usize,
    pub max_iterations: u32,
}

impl Grid {
    const X0: f64 = -2.0;
    const X1: f64 = 0.5;
    const Y0: f64 = -1.25;
    const Y1: f64 = 1.25;

    /// Iterations at point (`row`, `col`); `max_iterations` means inside.
    fn iterations(&self, row: usize, col: usize) -> u32 {
        let cx = Self::X0 + (Self::X1 - Self::X0) * (col as f64 + 0.5) / self.width as f64;
        let cy = Self::Y0 + (Self::Y1 - Self::Y0) * (row as f64 + 0.5) / self.height as f64;
        let (mut x, mut y, mut i) = (0.0f64, 0.0f64, 0);
        while i < self.max_iterations && x * x + y * y <= 4.0 {
            (x, y) = (x * x - y * y + cx, 2.0 * x * y + cy);
            i += 1;
        }
        i
    }

    /// Points inside the set, by a plain loop (the check of the kernels).
    pub fn count_inside(&self) -> u64 {
        (0..self.height)
            .flat_map(|r| (0..self.width).map(move |c| (r, c)))
            .filter(|&(r, c)| self.iterations(r, c) == self.max_iterations)
            .count() as u64
    }

    /// The area of the rectangle times the fraction of points inside.
    pub fn area(&self, inside: u64) -> f64 {
        (Self::X1 - Self::X0) * (Self::Y1 - Self::Y0) * inside as f64 / (self.width * self.height) as f64
    }

    /// Thread `t` of `threads`'s rows under static binding (equal shares,
    /// the first ones one row longer when they do not divide).
    pub fn static_rows(&self, t: usize, threads: usize) -> Range<usize> {
        let (base, extra) = (self.height / threads, self.height % threads);
        let start = t * base + t.min(extra);
        start..start + base + usize::from(t < extra)
    }
}

/// Where a thread's rows come from.
#[derive(Debug, Clone)]
pub enum Rows {
    /// Mandelbrot-SB: a fixed range.
    Static(Range<usize>),
    /// Mandelbrot-DB: a pool shared by the threads.
    Dynamic(Arc<Pool>),
}

/// Results shared by the threads of one program.
#[derive(Debug, Default)]
pub struct MandelbrotSums {
    pub inside: AtomicU64,
    pub iterations: AtomicU64,
}

/// One thread of a Mandelbrot program.
#[derive(Debug)]
pub struct Mandelbrot {
    grid: Grid,
    rows: Rows,
    /// The row being computed and the next column.
    at: Option<(usize, usize)>,
    sums: Arc<MandelbrotSums>,
}

impl Mandelbrot {
    pub fn new(grid: Grid, rows: Rows, sums: Arc<MandelbrotSums>) -> Mandelbrot {
        assert!(grid.width > 0 && grid.height > 0 && grid.max_iterations > 0, "empty grid {grid:?}");
        Mandelbrot { grid, rows, at: None, sums }
    }

    fn next_row(&mut self) -> Option<usize> {
        match &mut self.rows {
            Rows::Static(r) => r.next(),
            Rows::Dynamic(pool) => pool.take().filter(|&r| r < self.grid.height),
        }
    }
}

impl Kernel for Mandelbrot {
    fn name(&self) -> &'static str {
        match self.rows {
            Rows::Static(_) => "mandelbrot-sb",
            Rows::Dynamic(_) => "mandelbrot-db",
        }
    }

    fn step_units(&self) -> u64 {
        STEP_ITERATIONS
    }

    fn step(&mut self) -> Progress {
        let (mut units, mut inside) = (0u64, 0u64);
        let mut done = false;
        while units < STEP_ITERATIONS {
            let (row, col) = match self.at {
                Some(at) => at,
                None => match self.next_row() {
                    Some(r) => (r, 0),
                    None => {
                        done = true;
                        break;
                    }
                },
            };
            let i = self.grid.iterations(row, col);
            units += u64::from(i.max(1));
            inside += u64::from(i == self.grid.max_iterations);
            self.at = (col + 1 < self.grid.width).then_some((row, col + 1));
        }
        self.sums.inside.fetch_add(inside, Ordering::Relaxed);
        self.sums.iterations.fetch_add(units, Ordering::Relaxed);
        Progress { units, done }
    }
}
