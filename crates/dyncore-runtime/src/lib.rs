//! dyncore-runtime: the live backend on Linux (pinned runtime CPUs, sidecores, reconfiguration).
