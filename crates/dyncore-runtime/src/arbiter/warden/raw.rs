//! The warden's system calls: each on memory the caller made before the
//! fork (paths built in fixed buffers, files read into given buffers), with
//! no allocation and no lock, as a process forked from a multithreaded one
//! must make them (module `warden`, invariant 3).

use std::io;
use std::os::fd::RawFd;

use super::super::Tid;

pub(super) struct Writer<'a> {
    pub buf: &'a mut [u8],
    pub len: usize,
}

impl Writer<'_> {
    pub(super) fn put(&mut self, s: &[u8]) {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
    }

    pub(super) fn num(&mut self, mut v: usize) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.put(&digits[i..]);
    }
}

/// `/proc/<pid>[/task/<tid>]/<file>` in `buf`, NUL-terminated.
pub(super) fn proc_path(buf: &mut [u8], pid: Tid, tid: Option<Tid>, file: &[u8]) -> *const libc::c_char {
    let mut w = Writer { buf, len: 0 };
    w.put(b"/proc/");
    w.num(pid as usize);
    if let Some(t) = tid {
        w.put(b"/task/");
        w.num(t as usize);
    }
    w.put(b"/");
    w.put(file);
    w.put(b"\0");
    w.buf.as_ptr().cast()
}

/// `/proc/<pid>/<file>` read into `buf`; `None` if gone or empty.
pub(super) fn read_proc<'b>(buf: &'b mut [u8], pid: Tid, file: &[u8]) -> Option<&'b [u8]> {
    let mut path = [0u8; 64];
    let n = read_file(proc_path(&mut path, pid, None, file), buf);
    (n > 0).then(|| &buf[..n as usize])
}

pub(super) fn parse_id(s: &[u8]) -> Option<Tid> {
    if s.is_empty() || s.len() > 9 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(s.iter().fold(0, |v, &d| v * 10 + (d - b'0') as Tid))
}

/// Reads `path` into `buf` (as much as fits); the length, or −1.
pub(super) fn read_file(path: *const libc::c_char, buf: &mut [u8]) -> isize {
    // SAFETY: a NUL-terminated path; the buffer is valid for its length.
    unsafe {
        let fd = libc::open(path, libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return -1;
        }
        let mut len = 0usize;
        while len < buf.len() {
            let n = libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len);
            if n <= 0 {
                break;
            }
            len += n as usize;
        }
        libc::close(fd);
        len as isize
    }
}

pub(super) fn write_file(path: *const libc::c_char, value: &[u8]) {
    // SAFETY: a NUL-terminated path and a valid buffer.
    unsafe {
        let fd = libc::open(path, libc::O_WRONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::write(fd, value.as_ptr().cast(), value.len());
            libc::close(fd);
        }
    }
}

pub(super) fn pidfd_open(pid: Tid) -> RawFd {
    // SAFETY: no pointers.
    unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) as RawFd }
}

pub(super) fn pidfd_signal(fd: RawFd, sig: i32) -> bool {
    // SAFETY: a descriptor and a signal number, no siginfo.
    unsafe {
        libc::syscall(libc::SYS_pidfd_send_signal, fd, sig, std::ptr::null::<libc::siginfo_t>(), 0) == 0
    }
}

pub(super) fn exited(fd: RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd, no waiting.
    unsafe { libc::poll(&mut p, 1, 0) == 1 && p.revents != 0 }
}

pub(super) fn close(fd: RawFd) {
    // SAFETY: a descriptor this process owns.
    unsafe { libc::close(fd) };
}

/// Closes descriptors `first..=last` (`close_range(2)`, Linux 5.9; one
/// by one up to 4096 where it is missing).
pub(super) fn close_range(first: RawFd, last: RawFd) {
    // SAFETY: closing descriptors of this process, no pointers.
    if unsafe { libc::syscall(libc::SYS_close_range, first as u32, last as u32, 0) } != 0 {
        for fd in first..=last.min(4096) {
            close(fd);
        }
    }
}

pub(super) fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

pub(super) fn now_ms() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is valid for writing.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

pub(super) fn sleep_ms(ms: u64) {
    let t = libc::timespec { tv_sec: 0, tv_nsec: (ms * 1_000_000) as libc::c_long };
    // SAFETY: a valid timespec.
    unsafe { libc::nanosleep(&t, std::ptr::null_mut()) };
}

pub(super) fn exit(code: i32) -> ! {
    // SAFETY: ends this process at once (no destructors, no atexit).
    unsafe { libc::_exit(code) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_paths_and_ids_are_made_without_allocating() {
        let mut b = [0u8; 96];
        let p = proc_path(&mut b, 1234, Some(56), b"children");
        // SAFETY: proc_path NUL-terminates.
        let s = unsafe { std::ffi::CStr::from_ptr(p) };
        assert_eq!(s.to_str().unwrap(), "/proc/1234/task/56/children");
        assert_eq!(parse_id(b"4194304"), Some(4_194_304));
        assert_eq!(parse_id(b""), None);
        assert_eq!(parse_id(b"12a"), None);
    }
}
