//! dyncore-ring: shared-memory channels (cache-line slots, SPSC rings, spin-then-park waiter).
