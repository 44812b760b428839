//! dyncore-sim: the deterministic discrete-event simulator (virtual nanoseconds, seeded).
