//! The kernel's process events (the proc connector, `linux/cn_proc.h`):
//! a netlink socket on which the kernel reports every `fork`/`clone` and
//! `exit` on the machine as it happens, with the time it happened.
//!
//! The arbiter listens where it may (root: the socket needs
//! `CAP_NET_ADMIN`) and wakes on each event: a thread created by one of the
//! run's processes is spawned to the policy within microseconds, instead of
//! at the next discovery pass, and the passes themselves become a slow
//! safety net. Events can be lost when the socket's buffer overflows
//! (`ENOBUFS`): the arbiter then makes a full pass at once.
//!
//! Layout of one datagram: `nlmsghdr` (16 bytes), `cn_msg` (20 bytes), then
//! `proc_event`: `what` (u32), `cpu` (u32), `timestamp_ns` (u64, the
//! kernel's monotonic clock), and the event's data at offset 16 of it.

use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};

use super::Tid;

const NETLINK_CONNECTOR: i32 = 11;
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const NLMSG_DONE: u16 = 3;
const NLMSG_HDR: usize = 16;
const CN_MSG: usize = 20;
const PROC_EVENT_FORK: u32 = 0x0000_0001;
const PROC_EVENT_EXEC: u32 = 0x0000_0002;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;

/// One event of interest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcEvent {
    /// Thread `parent` of process `parent_tgid` created thread `child` of
    /// process `child_tgid` (a new process when the two differ), at
    /// `at_ns` on the monotonic clock.
    Fork { parent: Tid, parent_tgid: Tid, child: Tid, child_tgid: Tid, at_ns: u64 },
    /// Process `tgid` called `exec` (from any of its threads: the thread
    /// that did takes the process's id, and the others end).
    Exec { tgid: Tid },
    /// Thread `tid` exited.
    Exit { tid: Tid },
}

/// A listening proc-connector socket.
#[derive(Debug)]
pub(crate) struct ProcEvents {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl ProcEvents {
    /// Opens a non-blocking socket and subscribes to the events; an error
    /// (not root, no `CONFIG_PROC_EVENTS`) says why.
    pub(crate) fn open() -> io::Result<ProcEvents> {
        let fail = |what: &str| {
            let e = io::Error::last_os_error();
            io::Error::new(e.kind(), format!("the kernel's process events: {what}: {e}"))
        };
        // SAFETY: socket(2) takes no pointers.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                NETLINK_CONNECTOR,
            )
        };
        if raw < 0 {
            return Err(fail("socket"));
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an all-zero sockaddr_nl is valid; the fields are set below.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups = CN_IDX_PROC;
        // SAFETY: `addr` is a valid sockaddr_nl of the size given.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&raw const addr).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(fail("bind"));
        }
        // A large buffer: a busy machine forks a lot, and only overflow
        // loses events. (SO_RCVBUFFORCE needs root; it is a hint.)
        let size: libc::c_int = 4 << 20;
        // SAFETY: `size` is a valid int of the size given.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&raw const size).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        let mut msg = Vec::with_capacity(NLMSG_HDR + CN_MSG + 4);
        let total = (NLMSG_HDR + CN_MSG + 4) as u32;
        msg.extend_from_slice(&total.to_ne_bytes());
        msg.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        msg.extend_from_slice(&0u16.to_ne_bytes()); // flags
        msg.extend_from_slice(&0u32.to_ne_bytes()); // seq
        msg.extend_from_slice(&std::process::id().to_ne_bytes());
        for v in [CN_IDX_PROC, CN_VAL_PROC, 0, 0] {
            msg.extend_from_slice(&v.to_ne_bytes());
        }
        msg.extend_from_slice(&4u16.to_ne_bytes()); // len of the op
        msg.extend_from_slice(&0u16.to_ne_bytes()); // flags
        msg.extend_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
        // SAFETY: `msg` is a valid buffer of the length given.
        let n = unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if n != msg.len() as isize {
            return Err(fail("subscribe"));
        }
        Ok(ProcEvents { fd, buf: vec![0; 64 << 10] })
    }

    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Reads every pending event into `out`; `Ok(true)` if some were lost
    /// (the buffer overflowed: a full pass is needed).
    pub(crate) fn drain(&mut self, out: &mut Vec<ProcEvent>) -> io::Result<bool> {
        let mut lost = false;
        loop {
            // SAFETY: `buf` is valid for writes of its length.
            let n =
                unsafe { libc::recv(self.fd.as_raw_fd(), self.buf.as_mut_ptr().cast(), self.buf.len(), 0) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => return Ok(lost),
                    Some(libc::ENOBUFS) => lost = true,
                    Some(libc::EINTR) => {}
                    _ => return Err(e),
                }
                continue;
            }
            parse(&self.buf[..n as usize], out);
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Parses the netlink messages of one datagram.
fn parse(mut b: &[u8], out: &mut Vec<ProcEvent>) {
    while b.len() >= NLMSG_HDR {
        let len = u32_at(b, 0).unwrap_or(0) as usize;
        if len < NLMSG_HDR || len > b.len() {
            return;
        }
        if let Some(e) = event(&b[NLMSG_HDR..len]) {
            out.push(e);
        }
        b = &b[len.next_multiple_of(4).min(b.len())..];
    }
}

/// One `cn_msg` holding a `proc_event`.
fn event(cn: &[u8]) -> Option<ProcEvent> {
    if u32_at(cn, 0)? != CN_IDX_PROC || u32_at(cn, 4)? != CN_VAL_PROC {
        return None;
    }
    let ev = cn.get(CN_MSG..)?;
    let pid = |at: usize| u32_at(ev, 16 + at).map(|v| v as Tid);
    match u32_at(ev, 0)? {
        PROC_EVENT_FORK => Some(ProcEvent::Fork {
            parent: pid(0)?,
            parent_tgid: pid(4)?,
            child: pid(8)?,
            child_tgid: pid(12)?,
            at_ns: u64_at(ev, 8)?,
        }),
        PROC_EVENT_EXEC => Some(ProcEvent::Exec { tgid: pid(4)? }),
        PROC_EVENT_EXIT => Some(ProcEvent::Exit { tid: pid(0)? }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A datagram as the kernel writes it.
    fn datagram(what: u32, data: [u32; 4], at_ns: u64) -> Vec<u8> {
        let mut ev = Vec::new();
        ev.extend_from_slice(&what.to_ne_bytes());
        ev.extend_from_slice(&1u32.to_ne_bytes()); // cpu
        ev.extend_from_slice(&at_ns.to_ne_bytes());
        for d in data {
            ev.extend_from_slice(&d.to_ne_bytes());
        }
        let mut cn = Vec::new();
        for v in [CN_IDX_PROC, CN_VAL_PROC, 7, 0] {
            cn.extend_from_slice(&v.to_ne_bytes());
        }
        cn.extend_from_slice(&(ev.len() as u16).to_ne_bytes());
        cn.extend_from_slice(&0u16.to_ne_bytes());
        cn.extend(ev);
        let mut nl = Vec::new();
        nl.extend_from_slice(&((NLMSG_HDR + cn.len()) as u32).to_ne_bytes());
        nl.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        nl.extend_from_slice(&[0; 10]);
        nl.extend(cn);
        nl
    }

    #[test]
    fn fork_exec_and_exit_events_are_parsed_and_others_skipped() {
        let mut out = Vec::new();
        parse(&datagram(PROC_EVENT_FORK, [10, 10, 11, 10], 1234), &mut out);
        parse(&datagram(PROC_EVENT_EXIT, [11, 10, 0, 0], 0), &mut out);
        parse(&datagram(PROC_EVENT_EXEC, [12, 10, 0, 0], 0), &mut out);
        parse(&datagram(4 /* uid */, [10, 10, 0, 0], 0), &mut out);
        parse(&datagram(PROC_EVENT_FORK, [1, 2, 3, 4], 0)[..40], &mut out); // cut short
        assert_eq!(
            out,
            [
                ProcEvent::Fork { parent: 10, parent_tgid: 10, child: 11, child_tgid: 10, at_ns: 1234 },
                ProcEvent::Exit { tid: 11 },
                ProcEvent::Exec { tgid: 10 },
            ]
        );
    }

    #[test]
    fn a_real_thread_is_reported_when_root() {
        let mut ev = match ProcEvents::open() {
            Ok(ev) => ev,
            Err(e) => {
                crate::testing::skip(crate::testing::Need::Root, &format!("no process events: {e}"));
                return;
            }
        };
        let child = std::thread::spawn(|| rustix::thread::gettid().as_raw_nonzero().get()).join().unwrap();
        let me = std::process::id() as Tid;
        let mut out = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let forked = |out: &[ProcEvent]| {
            out.iter().any(|e| matches!(e, ProcEvent::Fork { child: c, child_tgid, .. } if *c == child && *child_tgid == me))
        };
        let exited = |out: &[ProcEvent]| out.contains(&ProcEvent::Exit { tid: child });
        while !(forked(&out) && exited(&out)) && std::time::Instant::now() < deadline {
            ev.drain(&mut out).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(forked(&out), "no fork event for thread {child}");
        assert!(exited(&out), "no exit event for thread {child}");
    }
}
