//! The report folder (`--out`): checked before any work, held by one run at
//! a time, and filled one whole scenario folder at a time.
//!
//! * [`OutDir::open`] runs before anything is loaded or run. A path that is
//!   a file, a device, a folder that cannot be created or written (`/proc`,
//!   a read-only mount, no permission) is refused with one line in our own
//!   words, so the command exits 2 before doing work it could not save.
//! * It takes an exclusive `flock` on `OUT/.dyncore.lock` (with the holder's
//!   pid written in it). A second run into the same folder is refused at
//!   once, naming the pid of the first; runs into different folders go side
//!   by side. The kernel drops the lock when the process dies, however it
//!   dies, so a killed run never blocks the next one.
//! * Each scenario's folder is written into `OUT/.<name>.tmp-<pid>` and
//!   renamed into place whole ([`Staged::commit`]); an old folder of that
//!   name is renamed aside first and removed after. A reader (or a crash)
//!   sees the old folder or the new one, never a mix of two runs.
//! * Staged folders left by a killed run are removed by the next run that
//!   takes the lock, which says what it removed. Only the lock holder
//!   stages, so under the lock every staged folder is stale.
//!
//! **Invariants:** nothing writes into `OUT` without holding the lock (the
//! callers take an [`OutDir`] before writing); a scenario folder under its
//! own name is always whole; a staged folder is never left behind by a run
//! that ends normally or fails (dropped [`Staged`] removes itself).

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The lock file's name inside the report folder.
pub const LOCK_FILE: &str = ".dyncore.lock";

/// A report folder held for writing. The lock is released when it drops.
#[derive(Debug)]
pub struct OutDir {
    path: PathBuf,
    _lock: File,
    /// Staged folders of earlier, killed runs that [`OutDir::open`] removed.
    pub removed: Vec<PathBuf>,
}

impl OutDir {
    /// Checks `out`, creates it if needed, and locks it. The error is one
    /// line for the user (the caller makes it exit 2).
    pub fn open(out: &Path) -> Result<OutDir, String> {
        let shown = out.display();
        if let Ok(meta) = std::fs::metadata(out)
            && !meta.is_dir()
        {
            use std::os::unix::fs::FileTypeExt;
            let t = meta.file_type();
            let what = if t.is_char_device() || t.is_block_device() {
                "a device"
            } else if t.is_fifo() {
                "a pipe"
            } else if t.is_socket() {
                "a socket"
            } else {
                "a file"
            };
            return Err(format!("--out {shown}: is {what}, not a folder; name a folder for the reports"));
        }
        std::fs::create_dir_all(out)
            .map_err(|e| format!("--out {shown}: cannot create the folder: {}", io_words(&e)))?;
        let lock_path = out.join(LOCK_FILE);
        let mut lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock_path)
            .map_err(|e| {
                // The folder exists: "not found" here means its file system
                // makes no files (/proc, /sys), not a missing folder.
                let why = if e.kind() == std::io::ErrorKind::NotFound && out.is_dir() {
                    "its file system does not hold files of ours (a system file system such as /proc or /sys)"
                        .to_string()
                } else {
                    io_words(&e)
                };
                format!("--out {shown}: cannot write into the folder: {why}")
            })?;
        if !try_lock(&lock) {
            let mut pid = String::new();
            let _ = lock.read_to_string(&mut pid);
            let who = match pid.trim() {
                "" => "another dyncore run".to_string(),
                p => format!("another dyncore run (pid {p})"),
            };
            return Err(format!(
                "--out {shown}: {who} is writing its reports into this folder; wait for it to finish, or \
                 give another --out"
            ));
        }
        let pid_written = lock.set_len(0).and_then(|()| lock.rewind()).and_then(|()| {
            write!(lock, "{}", std::process::id())?;
            lock.flush()
        });
        pid_written.map_err(|e| format!("--out {shown}: cannot write into the folder: {}", io_words(&e)))?;
        let removed = remove_stale(out);
        Ok(OutDir { path: out.to_path_buf(), _lock: lock, removed })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A folder for the scenario `name`'s report, written aside and renamed
    /// into place by [`Staged::commit`].
    pub fn stage(&self, name: &str) -> Result<Staged> {
        stage(&self.path, name)
    }
}

/// [`OutDir::stage`] for a caller that holds the lock on `out`.
pub fn stage(out: &Path, name: &str) -> Result<Staged> {
    let dest = crate::report::report_dir(out, name)?;
    stage_as(out, name, dest)
}

/// The folder `sweep-NAME` of the sweep `name` (a name a scenario could
/// have; the `sweep-` prefix is reserved for sweeps), staged as [`stage`]
/// stages a scenario's.
pub fn stage_sweep(out: &Path, name: &str) -> Result<Staged> {
    crate::report::report_dir(out, name)?;
    let folder = format!("sweep-{name}");
    let dest = out.join(&folder);
    stage_as(out, &folder, dest)
}

fn stage_as(out: &Path, name: &str, dest: PathBuf) -> Result<Staged> {
    let tmp = out.join(format!(".{name}.tmp-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).with_context(|| format!("removing {}", tmp.display()))?;
    }
    let guard = InProgress::unfinished(&tmp);
    std::fs::create_dir(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    Ok(Staged { tmp, dest, done: false, _guard: guard })
}

/// A scenario's report folder being written: [`Staged::path`] until
/// [`Staged::commit`] renames it to its name. Dropped without a commit, it
/// removes itself.
#[derive(Debug)]
pub struct Staged {
    tmp: PathBuf,
    dest: PathBuf,
    done: bool,
    _guard: InProgress,
}

impl Staged {
    /// Where to write the report's files now.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// The folder's final path.
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// Puts the folder in place whole, replacing an older one of the name.
    pub fn commit(mut self) -> Result<PathBuf> {
        let old = self.tmp.with_file_name(
            self.tmp.file_name().unwrap_or_default().to_string_lossy().replacen(".tmp-", ".old-", 1),
        );
        let had_old = match std::fs::symlink_metadata(&self.dest) {
            Ok(_) => {
                std::fs::rename(&self.dest, &old)
                    .with_context(|| format!("moving the older {} aside", self.dest.display()))?;
                true
            }
            Err(_) => false,
        };
        std::fs::rename(&self.tmp, &self.dest)
            .with_context(|| format!("renaming {} to {}", self.tmp.display(), self.dest.display()))?;
        self.done = true;
        if had_old {
            let removed =
                if old.is_dir() { std::fs::remove_dir_all(&old) } else { std::fs::remove_file(&old) };
            removed.with_context(|| format!("removing the older report {}", old.display()))?;
        }
        Ok(self.dest.clone())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// What this process is writing and would leave behind half-done if a
/// signal ended it: staged folders, `.tmp` files, and report folders made
/// but not yet written (removed only while still empty).
static IN_PROGRESS: std::sync::Mutex<Vec<(PathBuf, bool)>> = std::sync::Mutex::new(Vec::new());

/// A path in progress (see [`abandon_in_progress`]) while the guard lives.
#[derive(Debug)]
pub struct InProgress(PathBuf);

impl InProgress {
    /// `path` (a file or a folder, removed whole) is unfinished.
    pub fn unfinished(path: &Path) -> InProgress {
        InProgress::add(path, false)
    }

    /// Folder `path` was made for files not written yet: removed if a
    /// signal finds it still empty.
    pub fn empty_folder(path: &Path) -> InProgress {
        InProgress::add(path, true)
    }

    fn add(path: &Path, only_if_empty: bool) -> InProgress {
        if let Ok(mut v) = IN_PROGRESS.lock() {
            v.push((path.to_path_buf(), only_if_empty));
        }
        InProgress(path.to_path_buf())
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        if let Ok(mut v) = IN_PROGRESS.lock()
            && let Some(i) = v.iter().rposition(|(p, _)| *p == self.0)
        {
            v.remove(i);
        }
    }
}

/// Removes everything in progress (for a process that a signal is about
/// to end, from another thread); how many paths it removed.
pub fn abandon_in_progress() -> usize {
    let Ok(v) = IN_PROGRESS.lock() else { return 0 };
    abandon(&v)
}

fn abandon(v: &[(PathBuf, bool)]) -> usize {
    let mut removed = 0;
    for (p, only_if_empty) in v.iter().rev() {
        let gone = match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() && *only_if_empty => std::fs::remove_dir(p).is_ok(),
            Ok(m) if m.is_dir() => {
                // Files may still be landing in it: try a few times.
                (0..5).any(|_| std::fs::remove_dir_all(p).is_ok() || !p.exists())
            }
            Ok(_) => std::fs::remove_file(p).is_ok(),
            Err(_) => false,
        };
        removed += usize::from(gone);
    }
    removed
}

/// Removes the staged folders (`.NAME.tmp-PID`, `.NAME.old-PID`) of runs
/// that died; the caller holds the lock, so none is in use.
fn remove_stale(out: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(out) else { return Vec::new() };
    let mut removed = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let staged = name.starts_with('.') && (name.contains(".tmp-") || name.contains(".old-"));
        if staged && e.file_type().is_ok_and(|t| t.is_dir()) && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed.sort();
    removed
}

fn try_lock(file: &File) -> bool {
    loop {
        // SAFETY: the descriptor is open for the duration of the call; flock
        // takes no pointers.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return true;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return false;
        }
    }
}

/// An I/O error in words a user acts on (no `os error N`).
pub fn io_words(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::PermissionDenied => "permission denied".into(),
        K::NotFound => "a folder on the way does not exist and cannot be made".into(),
        K::NotADirectory => "a part of the path is a file, not a folder".into(),
        K::ReadOnlyFilesystem => "the file system is read-only".into(),
        K::StorageFull => "the disk is full".into(),
        K::AlreadyExists => "something else already has that name".into(),
        _ => match e.raw_os_error() {
            Some(libc::EROFS) => "the file system is read-only".into(),
            Some(libc::ENOTDIR) => "a part of the path is a file, not a folder".into(),
            Some(libc::EACCES | libc::EPERM) => "permission denied".into(),
            Some(libc::EINVAL | libc::EOPNOTSUPP) => "this file system does not hold report files".into(),
            _ => {
                let s = e.to_string();
                s.split(" (os error").next().unwrap_or(&s).to_lowercase()
            }
        },
    }
}

/// `path` can take the file that `flag` writes, checked before any work:
/// a regular file or a new one, in an existing folder where a file can be
/// created (it is written through a temporary beside it). Not a folder, a
/// FIFO or a device (`/dev/full` took a trace and lost it), nor a folder
/// such as `/proc` that takes no new files.
pub fn check_writable(flag: &str, path: &Path) -> Result<(), String> {
    check_output(flag, path, false)
}

/// [`check_writable`] for a writer that creates the file's missing folders
/// (a machine profile): the nearest folder that exists must take files.
pub fn check_writable_creating(flag: &str, path: &Path) -> Result<(), String> {
    check_output(flag, path, true)
}

fn check_output(flag: &str, path: &Path, creates_folders: bool) -> Result<(), String> {
    let say = |why: String| Err(format!("{flag} {}: {why}", path.display()));
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => return say("is a folder; name a file".into()),
        Ok(m) if !m.is_file() => {
            return say("is not a regular file (a FIFO, a device or a socket); name a file".into());
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return say("permission denied".into()),
        Err(_) => return say("cannot be looked at".into()),
    }
    let mut parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if creates_folders {
        while !parent.exists()
            && let Some(up) = parent.parent().filter(|p| !p.as_os_str().is_empty())
        {
            parent = up;
        }
    }
    if !parent.is_dir() {
        return say(format!("folder {} does not exist", parent.display()));
    }
    let probe = parent.join(format!(".dyncore-write-check.{}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            say(format!("folder {} is not writable here (permission denied)", parent.display()))
        }
        Err(_) => say(format!("folder {} takes no new files", parent.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_in_progress_is_listed_while_guarded_and_abandoned_whole() {
        let d = tempfile::tempdir().unwrap();
        let staged = stage(d.path(), "fig9").unwrap();
        std::fs::write(staged.path().join("report.md"), b"half").unwrap();
        let listed = |p: &Path| IN_PROGRESS.lock().unwrap().iter().any(|(q, _)| q == p);
        assert!(listed(staged.path()), "a staged folder is in progress");
        let tmp = d.path().join("index.md.tmp");
        std::fs::write(&tmp, b"half").unwrap();
        let empty = d.path().join("bench-x");
        std::fs::create_dir(&empty).unwrap();
        let full = d.path().join("bench-y");
        std::fs::create_dir(&full).unwrap();
        std::fs::write(full.join("r.md"), b"done").unwrap();
        let list = vec![
            (staged.path().to_path_buf(), false),
            (tmp.clone(), false),
            (empty.clone(), true),
            (full.clone(), true),
        ];
        assert_eq!(abandon(&list), 3);
        assert!(!staged.path().exists() && !tmp.exists() && !empty.exists());
        assert!(full.join("r.md").exists(), "a folder with files in it is kept");
        let path = staged.path().to_path_buf();
        drop(staged);
        assert!(!listed(&path), "dropped: no longer in progress");
    }

    #[test]
    fn refuses_what_is_not_a_writable_folder() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let cases = [
            (file.clone(), "is a file"),
            (PathBuf::from("/dev/null"), "is a device"),
            (file.join("sub"), "a part of the path is a file"),
            (PathBuf::from("/proc/self"), "cannot write into the folder"),
            (PathBuf::from("/proc"), "does not hold files of ours"),
        ];
        for (p, want) in cases {
            let e = OutDir::open(&p).unwrap_err();
            assert!(e.contains(want), "{}: {e}", p.display());
            assert!(!e.contains("os error"), "{e}");
        }
    }

    #[test]
    fn a_second_holder_is_refused_and_the_first_pid_named() {
        let d = tempfile::tempdir().unwrap();
        let first = OutDir::open(d.path()).unwrap();
        // flock locks belong to the open file description: a second open in
        // this process conflicts exactly as another process's would.
        let e = OutDir::open(d.path()).unwrap_err();
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        drop(first);
        OutDir::open(d.path()).unwrap();
    }

    #[test]
    fn a_staged_folder_appears_whole_and_replaces_the_old_one() {
        let d = tempfile::tempdir().unwrap();
        let out = OutDir::open(d.path()).unwrap();
        let s = out.stage("fig3").unwrap();
        std::fs::write(s.path().join("a"), b"1").unwrap();
        assert!(!d.path().join("fig3").exists(), "nothing under the name before the commit");
        s.commit().unwrap();
        let s = out.stage("fig3").unwrap();
        std::fs::write(s.path().join("b"), b"2").unwrap();
        s.commit().unwrap();
        let names: Vec<_> =
            std::fs::read_dir(d.path().join("fig3")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("b")], "the new folder replaced the old one whole");
        let dropped = out.stage("fig4").unwrap();
        let tmp = dropped.path().to_path_buf();
        drop(dropped);
        assert!(!tmp.exists() && !d.path().join("fig4").exists(), "an uncommitted folder removes itself");
    }

    #[test]
    fn the_next_run_removes_what_a_killed_run_staged() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(".fig3.tmp-99999")).unwrap();
        std::fs::write(d.path().join(".fig3.tmp-99999").join("report.md"), b"half").unwrap();
        std::fs::create_dir(d.path().join("keep")).unwrap();
        let out = OutDir::open(d.path()).unwrap();
        assert_eq!(out.removed, vec![d.path().join(".fig3.tmp-99999")]);
        assert!(d.path().join("keep").exists());
    }
}
