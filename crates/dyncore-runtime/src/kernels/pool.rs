//! A shared pool of work items handed out in order, once each: the dynamic
//! binding of OpenMP's `schedule(dynamic)` and of a task-parallel runtime's
//! queue. A faster CPU takes more items.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Items `0..len`, each taken by exactly one caller.
#[derive(Debug)]
pub struct Pool {
    next: AtomicUsize,
    len: usize,
}

impl Pool {
    pub fn new(len: usize) -> Pool {
        Pool { next: AtomicUsize::new(0), len }
    }

    /// The next item, or `None` when all were taken.
    pub fn take(&self) -> Option<usize> {
        // Relaxed: the item index is the only thing handed over; the items
        // themselves are immutable and shared through an `Arc`.
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        (i < self.len).then_some(i)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_is_taken_once() {
        let p = std::sync::Arc::new(Pool::new(10_000));
        let takers: Vec<_> = (0..4)
            .map(|_| {
                let p = p.clone();
                std::thread::spawn(move || std::iter::from_fn(|| p.take()).collect::<Vec<_>>())
            })
            .collect();
        let mut all: Vec<usize> = takers.into_iter().flat_map(|t| t.join().unwrap()).collect();
        all.sort_unstable();
        assert_eq!(all, (0..10_000).collect::<Vec<_>>());
        assert_eq!(p.take(), None);
    }
}
