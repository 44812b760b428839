//! The `sync` shim (tokio style): `std` atomics, cells and threads normally,
//! loom's under `cfg(dyncore_loom)`, so the same protocol code is both run and
//! model-checked.
//!
//! [`UnsafeCell`] always has loom's closure API (`with`, `with_mut`), so a
//! data race in a protocol shows up as a loom failure rather than UB.

#[cfg(not(dyncore_loom))]
mod imp {
    pub use std::sync::Arc;
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

    /// `std::cell::UnsafeCell` with loom's closure API.
    #[derive(Debug)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(v: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(v))
        }

        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }

    #[inline(always)]
    pub(crate) fn spin_loop() {
        std::hint::spin_loop();
    }

    #[inline]
    pub(crate) fn yield_now() {
        std::thread::yield_now();
    }
}

#[cfg(dyncore_loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub use loom::sync::Arc;
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

    #[inline]
    pub(crate) fn spin_loop() {
        // A spin under loom must let the other threads run.
        loom::thread::yield_now();
    }

    #[inline]
    pub(crate) fn yield_now() {
        loom::thread::yield_now();
    }
}

pub use imp::Arc;
pub(crate) use imp::*;
