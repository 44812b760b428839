// SPDX-License-Identifier: GPL-2.0-only
//! Compiles the BPF half (`src/bpf/dyncore.bpf.c`) with clang, through
//! scx's own build helper (its headers and the kernel's `vmlinux.h`), and
//! generates the Rust skeleton and the bindings of `src/bpf/intf.h`.
fn main() {
    scx_cargo::BpfBuilder::new()
        .expect("the sched_ext backend needs clang (>= 16; Debian: clang-19) to build its BPF half")
        .enable_intf("src/bpf/intf.h", "bpf_intf.rs")
        .enable_skel("src/bpf/dyncore.bpf.c", "bpf")
        .build()
        .expect("building the BPF half failed");
}
