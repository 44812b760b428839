//! File operations on a cgroup filesystem, or on a fixture tree of plain
//! files standing in for one, with errors that name the file.
//!
//! A control file that the arbiter writes often (a group's `tasks`, its
//! quota) is kept open ([`Control`]): each `write(2)` is one command to
//! the kernel, whatever the offset, and reopening it would double the cost
//! of a thread move. A file read often (`tasks` for discovery, a freezer's
//! state) is read again from offset 0 on the open descriptor: cgroup and
//! proc files are generated afresh by every read from the start.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `statfs` magic numbers of the cgroup filesystems.
const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// An error naming what was being done to which file, keeping the
/// system's error number ([`errno_of`]).
pub(crate) fn context(e: io::Error, what: &str, path: &Path) -> io::Error {
    let errno = errno_of(&e);
    io::Error::new(e.kind(), Context { message: format!("{what} {}: {e}", path.display()), errno })
}

/// The system error number of `e`, also through [`context`].
pub(crate) fn errno_of(e: &io::Error) -> Option<i32> {
    e.raw_os_error().or_else(|| e.get_ref()?.downcast_ref::<Context>()?.errno)
}

#[derive(Debug)]
struct Context {
    message: String,
    errno: Option<i32>,
}

impl std::fmt::Display for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Context {}

/// Writes `value` to `path` in one `write(2)` (creating it only on a
/// fixture: on a cgroup filesystem the control files exist or the
/// controller is missing).
pub(crate) fn write(path: &Path, value: &str) -> io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true);
    if !on_cgroupfs(path.parent().unwrap_or(path)) {
        opts.create(true).truncate(true);
    }
    let f = opts.open(path).map_err(|e| context(e, "cannot open", path))?;
    f.write_at(value.as_bytes(), 0)
        .map(drop)
        .map_err(|e| context(e, &format!("cannot write `{value}` to"), path))
}

pub(crate) fn read(path: &Path) -> io::Result<String> {
    std::fs::read_to_string(path).map_err(|e| context(e, "cannot read", path))
}

/// Whether `path` is on a cgroup (v1 or v2) filesystem.
pub(crate) fn on_cgroupfs(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: an all-zero statfs is valid; statfs(2) fills it from a valid
    // NUL-terminated path that outlives the call.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return false;
    }
    let t = s.f_type as i64;
    t == CGROUP_SUPER_MAGIC || t == CGROUP2_SUPER_MAGIC
}

/// Creates the group directory `dir` (an error if it exists: a group is
/// never shared between runs).
pub(crate) fn create_group(dir: &Path) -> io::Result<()> {
    std::fs::create_dir(dir).map_err(|e| context(e, "cannot create the group", dir))
}

/// Removes the (empty) group `dir`. On a cgroup filesystem that is one
/// `rmdir(2)`, which the kernel refuses (`EBUSY`) while the group has
/// tasks or children; on a fixture tree the plain files standing in for
/// the control files are removed first.
pub(crate) fn remove_group(dir: &Path) -> io::Result<()> {
    if !on_cgroupfs(dir) {
        for entry in std::fs::read_dir(dir).map_err(|e| context(e, "cannot list", dir))? {
            let p = entry?.path();
            if p.is_file() {
                std::fs::remove_file(&p).map_err(|e| context(e, "cannot remove", &p))?;
            }
        }
    }
    std::fs::remove_dir(dir).map_err(|e| context(e, "cannot remove the group", dir))
}

/// The thread ids listed in a `tasks` / `cgroup.threads` / `cgroup.procs`
/// text (one per line).
pub(crate) fn parse_ids(text: &str) -> impl Iterator<Item = i32> + '_ {
    text.lines().filter_map(|l| l.trim().parse().ok())
}

/// A control file kept open for repeated writes (and reads from offset 0).
#[derive(Debug)]
pub(crate) struct Control {
    file: File,
    path: PathBuf,
    /// A plain file in a fixture tree, not a control file.
    fixture: bool,
}

impl Control {
    /// Opens `path` for reading and writing.
    pub(crate) fn open(path: PathBuf) -> io::Result<Control> {
        Control::open_with(path, true)
    }

    /// Opens `path` for reading only (`cgroup.events` cannot be written).
    pub(crate) fn open_ro(path: PathBuf) -> io::Result<Control> {
        Control::open_with(path, false)
    }

    fn open_with(path: PathBuf, write: bool) -> io::Result<Control> {
        let fixture = !on_cgroupfs(path.parent().unwrap_or(&path));
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true).write(write || fixture).create(fixture).truncate(false);
        let file = opts.open(&path).map_err(|e| context(e, "cannot open", &path))?;
        Ok(Control { file, path, fixture })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this is a plain file of a fixture tree (tests).
    pub(crate) fn is_fixture(&self) -> bool {
        self.fixture
    }

    /// Writes `value` as one command; returns what the write took.
    pub(crate) fn write(&self, value: &str) -> io::Result<Duration> {
        let t = Instant::now();
        if self.fixture {
            // A fixture keeps the last value written, like a control file.
            self.file.set_len(0).map_err(|e| context(e, "cannot truncate", &self.path))?;
        }
        self.file
            .write_at(value.as_bytes(), 0)
            .map_err(|e| context(e, &format!("cannot write `{value}` to"), &self.path))?;
        Ok(t.elapsed())
    }

    /// Reads the whole file from offset 0 into `buf` (cleared first).
    pub(crate) fn read_into(&self, buf: &mut Vec<u8>) -> io::Result<()> {
        buf.clear();
        let mut chunk = [0u8; 4096];
        loop {
            let n = self
                .file
                .read_at(&mut chunk, buf.len() as u64)
                .map_err(|e| context(e, "cannot read", &self.path))?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixture_group_is_created_written_read_and_removed() {
        let d = tempfile::tempdir().unwrap();
        assert!(!on_cgroupfs(d.path()));
        let g = d.path().join("g");
        create_group(&g).unwrap();
        assert!(create_group(&g).unwrap_err().to_string().contains("cannot create the group"));
        write(&g.join("cpuset.cpus"), "1").unwrap();
        let c = Control::open(g.join("tasks")).unwrap();
        c.write("1234").unwrap();
        c.write("56").unwrap();
        let mut buf = Vec::new();
        c.read_into(&mut buf).unwrap();
        assert_eq!(parse_ids(std::str::from_utf8(&buf).unwrap()).collect::<Vec<_>>(), [56]);
        assert_eq!(read(&g.join("cpuset.cpus")).unwrap(), "1");
        remove_group(&g).unwrap();
        assert!(!g.exists());
    }

    #[test]
    fn errors_name_the_file_and_keep_the_errno() {
        let e = read(Path::new("/nonexistent/dyncore/tasks")).unwrap_err();
        assert!(e.to_string().contains("cannot read /nonexistent/dyncore/tasks"), "{e}");
        assert_eq!(errno_of(&e), Some(libc::ENOENT));
        let again = context(e, "while", Path::new("/x"));
        assert_eq!(errno_of(&again), Some(libc::ENOENT));
    }

    #[test]
    fn the_real_hierarchies_are_told_from_plain_directories() {
        // Only where this machine mounts them; a plain directory never is.
        for root in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"] {
            let p = Path::new(root);
            if p.join("cgroup.procs").exists() {
                assert!(on_cgroupfs(p), "{root}");
            }
        }
        assert!(!on_cgroupfs(Path::new("/proc")));
    }
}
