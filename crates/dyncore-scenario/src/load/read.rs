//! Reading a scenario file's text, whatever the path names: a regular file,
//! a pipe (`dyncore run <(generate)`), a FIFO with no writer, a device such
//! as `/dev/zero`, a folder, or something unreadable. Each gets an accurate
//! error; nothing blocks forever or reads without bound.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use super::{LoadError, line_col};

/// Most bytes read from one scenario file: 1 MiB, 60× the largest shipped
/// scenario, and the bound on what `/dev/zero` or an endless pipe can make
/// the command read.
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// The text of the scenario file at `path`.
pub fn read_text(path: &Path) -> Result<String, LoadError> {
    let err = |message: String| LoadError { file: path.to_path_buf(), at: None, field: None, message };
    let meta = std::fs::metadata(path).map_err(|e| err(io_message(&e)))?;
    let kind = meta.file_type();
    let what = if kind.is_dir() {
        Some("a folder; name a scenario file, or pass the folder to take every *.toml in it")
    } else if kind.is_char_device() {
        Some("a character device, not a scenario file")
    } else if kind.is_block_device() {
        Some("a block device, not a scenario file")
    } else if kind.is_socket() {
        Some("a socket, not a scenario file")
    } else {
        None
    };
    if let Some(what) = what {
        return Err(err(format!("is {what}")));
    }
    // O_NONBLOCK: opening a FIFO that no process writes would otherwise
    // wait forever. It is cleared again before reading, so a pipe whose
    // writer is still writing is read to its end.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| err(io_message(&e)))?;
    if kind.is_fifo() {
        set_blocking(&file).map_err(|e| err(io_message(&e)))?;
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1).read_to_end(&mut bytes).map_err(|e| err(io_message(&e)))?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(err(format!(
            "is larger than {} MiB, the most read from a scenario file; is it a scenario?",
            MAX_FILE_BYTES >> 20
        )));
    }
    if bytes.is_empty() {
        return Err(err(if kind.is_fifo() {
            "is a pipe that gave nothing to read (no process was writing it)".into()
        } else {
            "is empty; a scenario needs `name`, `title` and at least one [[run]]".into()
        }));
    }
    String::from_utf8(bytes).map_err(|e| {
        let bytes = e.as_bytes();
        let good = e.utf8_error().valid_up_to();
        // The prefix is valid UTF-8 by definition of valid_up_to.
        let prefix = std::str::from_utf8(&bytes[..good]).unwrap_or_default();
        LoadError {
            file: path.to_path_buf(),
            at: Some(line_col(prefix, prefix.len())),
            field: None,
            message: format!("byte 0x{:02x} is not UTF-8; a scenario is UTF-8 text", bytes[good]),
        }
    })
}

/// An I/O error in words a user acts on.
fn io_message(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or folder".into(),
        std::io::ErrorKind::PermissionDenied => "cannot be read: permission denied".into(),
        std::io::ErrorKind::IsADirectory => "is a folder, not a scenario file".into(),
        _ => format!("cannot be read: {e}"),
    }
}

/// Clears `O_NONBLOCK` on an open file.
fn set_blocking(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: `fd` is an open descriptor owned by `file` for the duration of
    // both calls; F_GETFL/F_SETFL read and set status flags only.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_folders_and_missing_files_say_what_they_are() {
        let e = read_text(Path::new("/dev/zero")).unwrap_err();
        assert!(e.message.contains("character device"), "{e}");
        let e = read_text(Path::new("/")).unwrap_err();
        assert!(e.message.contains("folder"), "{e}");
        let e = read_text(Path::new("/nonexistent/x.toml")).unwrap_err();
        assert_eq!(e.message, "no such file or folder");
    }

    #[test]
    fn invalid_utf8_has_a_line_and_column() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("bad.toml");
        std::fs::write(&p, b"name = \"t\"\ntitle = \"ab\xffc\"\n").unwrap();
        let e = read_text(&p).unwrap_err();
        assert_eq!(e.at, Some((2, 12)), "{e}");
        assert!(e.message.contains("0xff") && e.message.contains("UTF-8"), "{e}");
    }

    #[test]
    fn big_files_are_refused_after_reading_at_most_the_cap() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.toml");
        std::fs::write(&p, vec![b'#'; MAX_FILE_BYTES + 10]).unwrap();
        assert!(read_text(&p).unwrap_err().message.contains("larger than 1 MiB"));
        std::fs::write(&p, b"").unwrap();
        assert!(read_text(&p).unwrap_err().message.contains("empty"));
    }

    #[test]
    fn a_fifo_without_writer_does_not_block() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fifo.toml");
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_text(&p).unwrap_err();
        assert!(e.message.contains("pipe that gave nothing"), "{e}");
    }
}
