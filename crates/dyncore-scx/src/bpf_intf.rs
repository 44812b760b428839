// SPDX-License-Identifier: GPL-2.0-only
//! Bindings of `bpf/intf.h`, generated at build time.
#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, dead_code)]
include!(concat!(env!("OUT_DIR"), "/bpf_intf.rs"));
