//! The VM rig: a small QEMU guest with a pinned kernel (Linux with
//! sched_ext) and a chosen topology, booted in seconds, that runs one
//! command and brings back its output and exit status. It reaches what this
//! host lacks: cgroup v2 with controllers, SMT siblings, more CPUs to hot-plug,
//! sched_ext.
//!
//! How a run goes ([`run()`]):
//!
//! 1. the request is checked ([`spec::Topology::new`], the command is looked
//!    up) before anything boots: a bad one is a [`VmError::BadArgs`];
//! 2. the accelerator is chosen ([`accel`]): KVM where a guest boots with it
//!    on this machine, TCG otherwise;
//! 3. a per-run initramfs is built ([`initramfs`]): busybox, `/init`, the
//!    command's script. The guest's root is the host's `/`, read-only over
//!    virtiofs (`virtiofsd` on the host), so the command, its libraries and
//!    every file it names are where they are on the host; the folders asked
//!    for (`--rw`, by default the working folder) are writable, so outputs
//!    come back as they are written;
//! 4. QEMU boots it; the command's stdout and stderr come back over two
//!    virtio ports and are copied to the rig's as they arrive, the kernel's
//!    console goes to a log that is printed (its last lines) only when
//!    something fails;
//! 5. the guest writes `exit N` to a third port and powers off; the rig
//!    exits N.
//!
//! Invariants: no QEMU or virtiofsd outlives the rig. Both are the rig's
//! children with `PR_SET_PDEATHSIG = SIGKILL` (a rig killed with SIGKILL
//! takes them along), each in its own process group, killed on every way out
//! of [`run()`] (error, timeout, signal). A guest that panics, hangs past its
//! limit or fails to boot is an error with the console's last lines; never a
//! status of the command.

pub mod accel;
pub mod initramfs;
pub mod kernel;
pub mod run;
pub mod spec;

use std::fmt;
use std::path::{Path, PathBuf};

pub use run::{HostTools, Options, Outcome, run};
pub use spec::{Accel, Cgroup, Topology};

/// What went wrong, in a user's words.
#[derive(Debug)]
pub enum VmError {
    /// The request cannot be run (a topology that cannot be built, a
    /// command that is not there, a folder that does not exist).
    BadArgs(String),
    /// No kernel to boot.
    NoKernel(String),
    /// The machine lacks a tool, or fetching or checking the kernel failed.
    Setup(String),
    /// The guest did not run the command to its end: it did not boot,
    /// panicked, or hung past its limit. `console` is its last lines,
    /// `log` the whole console, kept.
    Guest { what: String, console: String, log: Option<PathBuf> },
    /// The rig was stopped by this signal; the guest was killed.
    Interrupted(i32),
}

impl fmt::Display for VmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VmError::BadArgs(s) | VmError::NoKernel(s) | VmError::Setup(s) => f.write_str(s),
            VmError::Guest { what, console, log } => {
                write!(f, "{what}")?;
                if !console.is_empty() {
                    write!(f, "\n--- the guest console's last lines ---\n{}", console.trim_end())?;
                    write!(f, "\n---")?;
                }
                if let Some(l) = log {
                    write!(f, "\nthe whole console: {}", l.display())?;
                }
                Ok(())
            }
            VmError::Interrupted(sig) => write!(f, "interrupted by signal {sig}: the guest was stopped"),
        }
    }
}

impl std::error::Error for VmError {}

impl VmError {
    /// The rig's exit status for this error: 2 for anything the rig
    /// refused or could not do, 128 + the signal when it was stopped.
    pub fn exit_status(&self) -> u8 {
        match self {
            VmError::Interrupted(sig) => u8::try_from(128 + sig).unwrap_or(255),
            _ => 2,
        }
    }
}

/// The rig's folder: `$DYNCORE_VM_DIR`, else `vm/` in the cargo target
/// folder the running binary was built into (`target/release/dyncore` →
/// `target/vm`), else `target/vm` under the working folder.
pub fn rig_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("DYNCORE_VM_DIR") {
        return PathBuf::from(d);
    }
    let exe = std::env::current_exe().ok();
    // target/<profile>/dyncore or target/<profile>/deps/<test>.
    let target = exe.as_deref().and_then(|e| {
        e.ancestors()
            .skip(1)
            .take(3)
            .find(|a| a.file_name().is_some_and(|n| n == "target"))
            .map(Path::to_path_buf)
    });
    target.unwrap_or_else(|| PathBuf::from("target")).join("vm")
}
