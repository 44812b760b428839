// SPDX-License-Identifier: GPL-2.0-only
//! The skeleton of `bpf/dyncore.bpf.c`, generated at build time.
#![allow(clippy::all, clippy::pedantic, dead_code, unused_imports)]
include!(concat!(env!("OUT_DIR"), "/bpf_skel.rs"));
