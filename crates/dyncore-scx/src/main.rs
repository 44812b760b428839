// SPDX-License-Identifier: GPL-2.0-only
//! `dyncore-scx`: a dyncore policy as the Linux kernel's scheduler for a
//! command's threads (`exec`), or for the commands of a scenario's run
//! (`run`), through sched_ext.
//!
//! Two halves (docs/architecture.md, "The sched_ext backend"): a small BPF
//! program (`bpf/dyncore.bpf.c`) that carries out, at every wake-up, slice
//! end and kick, where the policy runs each task, and sends the kernel's
//! callbacks up; and this program, which runs the same policy code as the
//! simulator and the arbiter on those events (module `scheduler`).
//!
//! GPL-2.0-only, as the kernel requires of a `sched_ext_ops` program; the
//! rest of dyncore is MIT OR Apache-2.0 and runs it as a separate binary.

mod bpf_intf;
mod bpf_skel;
mod mirror;
mod plan;
mod preflight;
mod record;
mod report;
mod scenario;
mod scheduler;
mod supervise;

use std::ffi::OsString;
use std::process::ExitCode;

use dyncore_core::policies::Registry;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    match args.get(1).and_then(|a| a.to_str()) {
        Some(mode @ ("exec" | "run")) => supervise::main(mode, &args[2..]),
        Some("scheduler") => scheduler::main(&args[2..]),
        Some("check") => match preflight::machine() {
            Ok(()) => {
                println!("sched_ext: available (state disabled, root): `dyncore-scx exec` can run here");
                ExitCode::SUCCESS
            }
            Err(m) => {
                println!("sched_ext: not usable here: {m}");
                ExitCode::from(2)
            }
        },
        Some("policies") => {
            for e in Registry::builtin().entries() {
                let ok = Registry::refuse_unsupported(&e.info, "sched_ext backend", plan::SCX_ACTIONS);
                println!(
                    "{:<12} {}",
                    e.info.name,
                    ok.err().unwrap_or_else(|| "runs on the sched_ext backend".into())
                );
            }
            ExitCode::SUCCESS
        }
        Some("-h" | "--help" | "help") => {
            println!("{}", plan::USAGE);
            ExitCode::SUCCESS
        }
        Some("--version" | "-V") => {
            println!("dyncore-scx {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        other => {
            if let Some(o) = other {
                eprintln!("dyncore-scx: unknown subcommand `{o}`");
            }
            eprintln!("{}", plan::USAGE);
            ExitCode::from(2)
        }
    }
}
