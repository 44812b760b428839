//! `dyncore exec --backend scx`: the same command line, handed to the
//! sched_ext backend, `dyncore-scx` — a binary of its own because its BPF
//! half must be GPL (the kernel accepts a `sched_ext_ops` program only
//! from a GPL-compatible one) and because it needs clang and libelf to
//! build; the rest of dyncore builds without them. The arguments are
//! checked here first (the same checks and exit 2 as the arbiter's), then
//! `dyncore-scx exec` replaces this process, so that its exit status and
//! signals are the command's.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::ExitCode;

use super::Args;

pub use crate::scx_binary::{NEEDS, find};

/// The `dyncore-scx exec` arguments for `args`, or why they do not apply.
pub fn forward(args: &Args) -> Result<Vec<OsString>, String> {
    if args.mechanism != "auto" {
        return Err("--mechanism: not with --backend scx (the kernel's scheduler places the threads)".into());
    }
    if args.weight.is_some() {
        return Err("--weight: not with --backend scx (the command's tasks are all SCHED_EXT)".into());
    }
    if args.trace.is_some() {
        return Err("--trace: not yet with --backend scx (its record: dyncore-scx exec --json FILE)".into());
    }
    let mut v: Vec<OsString> = vec!["exec".into(), "--policy".into(), args.policy.clone().into()];
    for p in &args.params {
        v.extend(["--param".into(), p.into()]);
    }
    let opt = |v: &mut Vec<OsString>, name: &str, value: Option<String>| {
        if let Some(x) = value {
            v.extend([name.into(), x.into()]);
        }
    };
    opt(&mut v, "--cpus", args.cpus.clone());
    opt(&mut v, "--tax", args.tax.clone());
    opt(&mut v, "--want-cpus", args.want_cpus.map(|n| n.to_string()));
    opt(&mut v, "--max-fuse", args.max_fuse.map(|n| n.to_string()));
    opt(&mut v, "--baseline-duty", args.baseline_duty.map(|d| d.to_string()));
    let class = match args.class {
        super::Class::Low => "low",
        super::Class::Medium => "medium",
        super::Class::High => "high",
    };
    v.extend(["--class".into(), class.into()]);
    if args.quiet {
        v.push("-q".into());
    }
    v.push("--".into());
    v.extend(args.command.iter().cloned());
    Ok(v)
}

/// Checks, finds `dyncore-scx`, and becomes it.
pub fn exec(args: &Args, out: Option<&Path>) -> ExitCode {
    let fail = |m: &str| {
        eprintln!("dyncore exec: {m}");
        ExitCode::from(2)
    };
    if out.is_some() {
        return fail("--out: not yet with --backend scx (its record: dyncore-scx exec --json FILE)");
    }
    let forwarded = match forward(args) {
        Ok(v) => v,
        Err(m) => return fail(&m),
    };
    let Some(bin) = find() else { return fail(NEEDS) };
    let e = std::process::Command::new(&bin).args(&forwarded).exec();
    fail(&format!("running {}: {e}", bin.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct T {
        #[command(flatten)]
        a: Args,
    }

    #[test]
    fn forwards_the_policy_options_and_refuses_the_arbiters() {
        let t = T::parse_from([
            "x",
            "--backend",
            "scx",
            "--policy",
            "chameleon",
            "--cpus",
            "0-3",
            "--param",
            "a=1",
            "--",
            "make",
            "-j4",
        ]);
        let v = forward(&t.a).unwrap();
        let s: Vec<String> = v.iter().map(|o| o.to_string_lossy().into_owned()).collect();
        assert_eq!(s[..3], ["exec", "--policy", "chameleon"]);
        assert!(s.windows(2).any(|w| w == ["--param", "a=1"]), "{s:?}");
        assert!(s.windows(2).any(|w| w == ["--cpus", "0-3"]), "{s:?}");
        assert_eq!(s[s.len() - 3..], ["--", "make", "-j4"]);
        let t = T::parse_from([
            "x",
            "--backend",
            "scx",
            "--policy",
            "p",
            "--cpus",
            "0",
            "--weight",
            "4",
            "--",
            "m",
        ]);
        assert!(forward(&t.a).unwrap_err().contains("--weight"));
    }
}
