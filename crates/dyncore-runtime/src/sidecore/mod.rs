//! Sidecores (being built).
