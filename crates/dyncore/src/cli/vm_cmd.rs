//! `dyncore vm`: the VM rig (`dyncore_vm`) from the command line.
//!
//! ```text
//! dyncore vm setup
//! dyncore vm run [--cpus N] [--smt T] [--sockets S] [--mem MIB] [--cgroup v1|v2]
//!                [--accel auto|kvm|tcg] [--timeout SECS] [--rw DIR]... [--env K=V]...
//!                [--kernel BZIMAGE] [--console] -- COMMAND ARGS...
//! ```
//!
//! The command's stdout and stderr are the rig's, as they come; the rig
//! says nothing more when it works (one line with `--verbose`), and prints
//! the guest console's last lines when it does not. Exit status: the
//! command's; 2 when the rig refuses or the guest fails (no kernel, a
//! topology that cannot be built, a command that is not there, a panic, a
//! hang past `--timeout`); 130 / 143 / 129 on SIGINT / SIGTERM / SIGHUP
//! (the guest is killed first).

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use dyncore_vm::{Accel, Cgroup, HostTools, Options, Topology, VmError, kernel};

/// `dyncore vm`'s commands.
#[derive(Debug, clap::Subcommand)]
pub enum VmCmd {
    /// Install and check what the rig needs, once: QEMU, busybox and SeaBIOS from this machine's
    /// own Debian suite, the pinned kernel (SHA-256 checked) into target/vm/, then a test boot.
    Setup,
    /// Boot a guest with the topology asked for, run COMMAND in it (the host's files, read-only;
    /// the working folder writable), and exit with its status.
    Run(RunArgs),
}

#[derive(Debug, clap::Args)]
#[command(after_help = "Exit status: the command's; 2 when the rig refuses the run or the guest fails \
                        (the console's last lines are printed); 130/143/129 on SIGINT/SIGTERM/SIGHUP. \
                        Inside the guest DYNCORE_VM_ACCEL says kvm or tcg: TCG figures are functional \
                        (placements, counts, orderings), never timings.")]
pub struct RunArgs {
    /// Logical CPUs (1 to 64).
    #[arg(long, default_value_t = 2)]
    cpus: u32,
    /// SMT threads per core.
    #[arg(long, default_value_t = 1)]
    smt: u32,
    /// Sockets, each a NUMA node.
    #[arg(long, default_value_t = 1)]
    sockets: u32,
    /// Guest memory in MiB (default: 1024, more with many CPUs).
    #[arg(long, value_name = "MIB")]
    mem: Option<u32>,
    /// The cgroup hierarchy: v2 (only; controllers enabled) or v1.
    #[arg(long, value_enum, default_value_t = CgroupArg::V2)]
    cgroup: CgroupArg,
    /// KVM where a guest boots with it here, else TCG (auto); or force one.
    #[arg(long, value_enum, default_value_t = AccelArg::Auto)]
    accel: AccelArg,
    /// The most seconds the guest may run, boot included.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    timeout: u64,
    /// A host folder the guest may write (repeatable; default: the working folder).
    #[arg(long, value_name = "DIR")]
    rw: Vec<PathBuf>,
    /// A variable for the command, K=V (repeatable).
    #[arg(long, value_name = "K=V")]
    env: Vec<String>,
    /// Boot this bzImage instead of the pinned kernel.
    #[arg(long, value_name = "BZIMAGE")]
    kernel: Option<PathBuf>,
    /// Copy the guest's console to stderr as it runs.
    #[arg(long)]
    console: bool,
    /// One line on stderr at the end: accelerator, kernel, boot and wall time.
    #[arg(long, short)]
    verbose: bool,
    /// The command and its arguments (`dyncore` is this binary).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum CgroupArg {
    V1,
    V2,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum AccelArg {
    Auto,
    Kvm,
    Tcg,
}

fn fail(status: u8, m: &str) -> ExitCode {
    eprintln!("dyncore vm: error: {m}");
    ExitCode::from(status)
}

/// Runs `dyncore vm …`.
pub fn main(cmd: &VmCmd) -> ExitCode {
    match cmd {
        VmCmd::Setup => setup(),
        VmCmd::Run(a) => run(a),
    }
}

fn options(a: &RunArgs) -> Result<Options, VmError> {
    let topology = Topology::new(a.cpus, a.smt, a.sockets)?;
    let mut env = Vec::new();
    for kv in &a.env {
        let Some((k, v)) = kv.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            return Err(VmError::BadArgs(format!("--env {kv}: expected NAME=VALUE")));
        };
        env.push((k.to_string(), v.to_string()));
    }
    let cwd = std::env::current_dir().map_err(|e| VmError::BadArgs(format!("the working folder: {e}")))?;
    if a.timeout == 0 {
        return Err(VmError::BadArgs("--timeout 0: give the guest at least a second".into()));
    }
    Ok(Options {
        topology,
        mem_mib: a.mem,
        cgroup: match a.cgroup {
            CgroupArg::V1 => Cgroup::V1,
            CgroupArg::V2 => Cgroup::V2,
        },
        accel: match a.accel {
            AccelArg::Auto => Accel::Auto,
            AccelArg::Kvm => Accel::Kvm,
            AccelArg::Tcg => Accel::Tcg,
        },
        timeout: Duration::from_secs(a.timeout),
        rw: if a.rw.is_empty() { vec![cwd.clone()] } else { a.rw.clone() },
        env,
        cwd,
        argv: a.command.clone(),
        kernel: a.kernel.clone(),
        console: a.console,
    })
}

fn run(a: &RunArgs) -> ExitCode {
    let opts = match options(a) {
        Ok(o) => o,
        Err(e) => return fail(e.exit_status(), &e.to_string()),
    };
    let signals = match dyncore_runtime::arbiter::Signals::install() {
        Ok(s) => s,
        Err(e) => return fail(2, &format!("signal handlers: {e}")),
    };
    let flag = signals.signal_flag();
    let sig = || flag.load(std::sync::atomic::Ordering::Acquire);
    match dyncore_vm::run(&dyncore_vm::rig_dir(), &opts, signals.stop_flag(), &sig) {
        Ok(o) => {
            if a.verbose {
                eprintln!(
                    "dyncore vm: {} in {} guest ({}), kernel {}: boot {}, wall {:.1} s{}",
                    o.status,
                    o.accel.name().to_uppercase(),
                    opts.topology,
                    o.kernel,
                    o.boot.map_or("?".into(), |b| format!("{:.1} s", b.as_secs_f64())),
                    o.wall.as_secs_f64(),
                    o.accel_note.map(|n| format!("; {n}")).unwrap_or_default()
                );
            }
            ExitCode::from(o.status.clamp(0, 255) as u8)
        }
        Err(e) => fail(e.exit_status(), &e.to_string()),
    }
}

fn setup() -> ExitCode {
    let dir = dyncore_vm::rig_dir();
    let say = |s: &str| eprintln!("dyncore vm setup: {s}");
    if let Err(e) = HostTools::find() {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if !root {
            return fail(2, &format!("{e}; as root, `dyncore vm setup` installs them"));
        }
        say(&format!(
            "installing {} from this machine's own suite",
            dyncore_vm::run::HOST_PACKAGES.join(" ")
        ));
        let install = || {
            Command::new("apt-get")
                .args(["install", "-y", "-q", "--no-install-recommends"])
                .args(dyncore_vm::run::HOST_PACKAGES)
                .env("DEBIAN_FRONTEND", "noninteractive")
                .status()
                .is_ok_and(|s| s.success())
        };
        if !install() {
            let _ = Command::new("apt-get").args(["update", "-q"]).status();
            if !install() {
                return fail(2, "apt-get install failed (see above)");
            }
        }
    }
    let tools = match HostTools::find() {
        Ok(t) => t,
        Err(e) => return fail(2, &e.to_string()),
    };
    say(&format!(
        "{}; virtiofsd {}; busybox {}",
        tools.qemu_version(),
        tools.virtiofsd.display(),
        tools.busybox.display()
    ));
    let k = match kernel::setup(&dir, &mut |s| say(s)) {
        Ok(k) => k,
        Err(e) => return fail(2, &e.to_string()),
    };
    if let Some(n) = &k.note {
        say(n);
    }
    say("test boot: 2 CPUs, cgroup v2, `uname -r`");
    let Ok(cwd) = std::env::current_dir() else { return fail(2, "no working folder") };
    let opts = Options {
        topology: Topology::new(2, 1, 1).expect("2 CPUs is a topology"),
        mem_mib: None,
        cgroup: Cgroup::V2,
        accel: Accel::Auto,
        timeout: Duration::from_secs(180),
        rw: Vec::new(),
        env: Vec::new(),
        cwd,
        argv: vec!["uname".into(), "-r".into()],
        kernel: None,
        console: false,
    };
    let never = std::sync::atomic::AtomicBool::new(false);
    match dyncore_vm::run(&dir, &opts, &never, &|| 0) {
        Ok(o) if o.status == 0 => {
            say(&format!(
                "ready: the guest booted on {} in {:.1} s{} (rig folder {})",
                o.accel.name().to_uppercase(),
                o.wall.as_secs_f64(),
                o.accel_note.map(|n| format!("; {n}")).unwrap_or_default(),
                dir.display()
            ));
            ExitCode::SUCCESS
        }
        Ok(o) => fail(2, &format!("the test boot's `uname -r` exited {}", o.status)),
        Err(e) => fail(2, &e.to_string()),
    }
}
