//! Runtime CPUs and reconfiguration (being built).
