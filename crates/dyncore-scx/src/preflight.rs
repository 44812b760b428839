// SPDX-License-Identifier: GPL-2.0-only
//! What must hold before a scheduler is loaded, each with a message that
//! says what is missing and what to do (exit 2 from `exec`):
//! root, a kernel with sched_ext, no other sched_ext scheduler loaded, and
//! a command that exists.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use dyncore_core::CpuSet;

/// sched_ext's state, as the kernel gives it.
pub const STATE: &str = "/sys/kernel/sched_ext/state";

/// The machine can load a sched_ext scheduler now, or the reason it cannot.
pub fn machine() -> Result<(), String> {
    if !Path::new("/sys/kernel/sched_ext").is_dir() {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        return Err(format!(
            "this kernel ({}) has no sched_ext (CONFIG_SCHED_CLASS_EXT, Linux 6.12 or later): \
             run the command in the VM rig's guest, whose kernel has it: \
             dyncore vm run --cpus 4 -- dyncore exec --backend scx ...",
            release.trim()
        ));
    }
    let state = std::fs::read_to_string(STATE).map_err(|e| format!("reading {STATE}: {e}"))?;
    if state.trim() != "disabled" {
        let ops = std::fs::read_to_string("/sys/kernel/sched_ext/root/ops").unwrap_or_default();
        let ops = ops.trim();
        return Err(format!(
            "another sched_ext scheduler is loaded (state {}, ops `{}`): stop it first \
             (one BPF scheduler runs at a time)",
            state.trim(),
            if ops.is_empty() { "unknown" } else { ops }
        ));
    }
    if !rustix_is_root() {
        return Err(
            "loading a sched_ext scheduler needs root (CAP_SYS_ADMIN and CAP_BPF): run it with sudo".into()
        );
    }
    Ok(())
}

fn rustix_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The program `argv0` names, found as `execvp` would; the message and
/// the shell's status (127 not found, 126 not executable) otherwise.
pub fn resolve(argv0: &OsStr) -> Result<PathBuf, (i32, String)> {
    let name = Path::new(argv0);
    let candidates: Vec<PathBuf> = if argv0.as_bytes().contains(&b'/') {
        vec![name.to_path_buf()]
    } else {
        let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
        std::env::split_paths(&path).map(|d| d.join(name)).collect()
    };
    let mut not_executable = None;
    for c in candidates {
        if let Ok(m) = std::fs::metadata(&c) {
            if m.is_file() && m.permissions().mode() & 0o111 != 0 {
                return Ok(c);
            }
            not_executable.get_or_insert(c);
        }
    }
    match not_executable {
        Some(c) => Err((126, format!("{}: not an executable file", c.display()))),
        None => Err((127, format!("{}: command not found", name.display()))),
    }
}

/// The CPUs online now (all that `/sys` lists as possible, if it cannot be read).
pub fn online_cpus() -> CpuSet {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect())
}

/// The CPUs this process may run on (its affinity mask); the online
/// ones if it cannot be read.
pub fn allowed_cpus() -> CpuSet {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the kernel fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is this thread; the size is the set's.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0 {
        return online_cpus();
    }
    // SAFETY: c is below CPU_SETSIZE.
    (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_finds_programs_and_says_why_not() {
        assert!(resolve(OsStr::new("sh")).is_ok());
        let (status, m) = resolve(OsStr::new("no-such-program-dyncore")).unwrap_err();
        assert_eq!(status, 127);
        assert!(m.contains("command not found"), "{m}");
        let plain = std::env::temp_dir().join(format!("dyncore-scx-test.{}", std::process::id()));
        std::fs::write(&plain, "not a program").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (status, m) = resolve(plain.as_os_str()).unwrap_err();
        std::fs::remove_file(&plain).unwrap();
        assert_eq!(status, 126, "{m}");
    }
}
