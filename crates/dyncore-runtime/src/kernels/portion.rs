//! A program's work in kernel units, as a live backend deals it to its
//! threads: [`Portion`] is one thread's work — first its own piece, then
//! tasks from a [`TaskPool`] shared by the program's threads — done by a
//! real kernel that is started over whenever it finishes.
//!
//! This is how a scenario's work, given in milliseconds of one baseline
//! CPU, becomes real work: the backend measures the kernel's units per
//! second alone at the baseline duty ([`super::calibrate`]) and converts
//! every piece and task to units. The *shape* of the work (a sequential
//! program's one piece, a static binding's equal shares, a dynamic
//! binding's pool of small tasks, pmake's coarse jobs) is the backend's to
//! choose; the kernel only supplies real computation and counts it.
//!
//! Invariant: a thread's units add up to its pieces' units to within one
//! kernel step: a step that runs past the end of a piece is credited to
//! the next piece, so only the thread's last step overshoots.

use std::sync::Arc;

use super::{Kernel, MakeKernel, Pool, Progress};

/// Tasks (in units) taken once each, in order, by the threads of a program.
#[derive(Debug)]
pub struct TaskPool {
    units: Vec<u64>,
    next: Pool,
}

impl TaskPool {
    /// A pool of tasks of `units` each, handed out in this order.
    pub fn new(units: Vec<u64>) -> Arc<TaskPool> {
        let next = Pool::new(units.len());
        Arc::new(TaskPool { units, next })
    }

    /// The next task's units, or `None` when every task was taken.
    pub fn take(&self) -> Option<u64> {
        self.next.take().map(|i| self.units[i])
    }

    /// Units of all tasks, taken or not.
    pub fn total_units(&self) -> u64 {
        self.units.iter().sum()
    }
}

/// One thread's work. See the module docs.
pub struct Portion {
    make: MakeKernel,
    inner: Box<dyn Kernel>,
    /// Units left in the current piece.
    left: u64,
    /// Units done beyond the end of the last piece, owed to the next one.
    credit: u64,
    pool: Option<Arc<TaskPool>>,
    done: bool,
}

impl Portion {
    /// A thread that does `first` units, then tasks from `pool` (if any)
    /// until it is empty, with kernels from `make`.
    pub fn new(make: MakeKernel, first: u64, pool: Option<Arc<TaskPool>>) -> Portion {
        let inner = make();
        let mut p = Portion { make, inner, left: first, credit: 0, pool, done: false };
        p.settle();
        p
    }

    /// Pays the credit into the current piece, taking new pieces from the
    /// pool while the current one is paid off; marks the thread done when
    /// none is left.
    fn settle(&mut self) {
        loop {
            let paid = self.left.min(self.credit);
            (self.left, self.credit) = (self.left - paid, self.credit - paid);
            if self.left > 0 {
                return;
            }
            match self.pool.as_ref().and_then(|p| p.take()) {
                Some(units) => self.left = units,
                None => {
                    self.done = true;
                    return;
                }
            }
        }
    }
}

impl Kernel for Portion {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn step_units(&self) -> u64 {
        self.inner.step_units()
    }

    fn step(&mut self) -> Progress {
        if self.done {
            return Progress { units: 0, done: true };
        }
        let p = self.inner.step();
        if p.done {
            // Endless supply: the same computation again.
            self.inner = (self.make)();
        }
        self.credit += p.units;
        self.settle();
        Progress { units: p.units, done: self.done }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::NQueens;

    fn queens() -> MakeKernel {
        Arc::new(|| Box::new(NQueens::new(8)) as Box<dyn Kernel>)
    }

    fn run(p: &mut Portion) -> u64 {
        let mut units = 0;
        loop {
            let s = p.step();
            units += s.units;
            if s.done {
                return units;
            }
        }
    }

    #[test]
    fn a_portion_does_its_units_to_within_one_step_restarting_the_kernel() {
        // 8 queens take 2 057 placements: 50 000 units restart it many times.
        let mut p = Portion::new(queens(), 50_000, None);
        let units = run(&mut p);
        assert!((50_000..50_000 + NQueens::new(8).step_units()).contains(&units), "{units}");
        assert_eq!(p.step(), Progress { units: 0, done: true });
    }

    #[test]
    fn threads_share_a_pool_and_overshoot_only_at_their_end() {
        let pool = TaskPool::new(vec![3_000; 40]);
        let mut threads: Vec<Portion> =
            (0..3).map(|_| Portion::new(queens(), 1_000, Some(pool.clone()))).collect();
        let (mut units, mut live) = (0, 3);
        while live > 0 {
            live = 0;
            for t in &mut threads {
                let s = t.step();
                units += s.units;
                live += usize::from(!s.done);
            }
        }
        assert_eq!(pool.take(), None, "every task was taken");
        let want = 3 * 1_000 + pool.total_units();
        let step = NQueens::new(8).step_units();
        assert!(units >= want && units < want + 3 * step, "{units} for {want}");
    }

    #[test]
    fn an_empty_portion_is_done_at_once() {
        let mut p = Portion::new(queens(), 0, Some(TaskPool::new(Vec::new())));
        assert_eq!(p.step(), Progress { units: 0, done: true });
    }
}
