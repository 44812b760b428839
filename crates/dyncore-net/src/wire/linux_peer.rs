//! The Linux kernel's TCP as the peer of a stack on a TUN wire: a thread
//! that enters the wire's network namespace and sends or receives the
//! iperf-like stream with ordinary `std::net` sockets, hashing it the same
//! way ([`crate::stream`]).
//!
//! Every wait is bounded by a time limit and a cancel flag, so a peer never
//! outlives a stack that stopped (Ctrl-C, an error).

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::tun::TunNet;
use crate::stream::{Digest, StreamGen, StreamHash};

/// How long a blocked socket call waits before checking the cancel flag.
const POLL: Duration = Duration::from_millis(20);

fn expired(deadline: Instant, cancel: &AtomicBool) -> io::Result<()> {
    if cancel.load(Ordering::Acquire) {
        return Err(io::Error::new(io::ErrorKind::Interrupted, "cancelled"));
    }
    if Instant::now() >= deadline {
        return Err(io::Error::new(io::ErrorKind::TimedOut, "the Linux peer timed out"));
    }
    Ok(())
}

fn is_retry(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted)
}

/// Starts a thread that listens on `port` inside the namespace, accepts one
/// connection and reads until the peer closes; returns what it received.
pub fn receiver(
    net: &TunNet,
    port: u16,
    limit: Duration,
    cancel: Arc<AtomicBool>,
) -> io::Result<JoinHandle<io::Result<Digest>>> {
    let ns = net.namespace_path();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || -> io::Result<Digest> {
        let deadline = Instant::now() + limit;
        let listener = (|| {
            TunNet::enter_path(&ns)?;
            let l = TcpListener::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port))?;
            l.set_nonblocking(true)?;
            Ok(l)
        })();
        let _ = ready_tx.send(listener.as_ref().map(|_| ()).map_err(|e: &io::Error| e.to_string()));
        let listener = listener?;
        let mut conn = loop {
            expired(deadline, &cancel)?;
            match listener.accept() {
                Ok((c, _)) => break c,
                Err(e) if is_retry(&e) => std::thread::sleep(Duration::from_millis(1)),
                Err(e) => return Err(e),
            }
        };
        conn.set_nonblocking(false)?;
        conn.set_read_timeout(Some(POLL))?;
        let mut hash = StreamHash::new();
        let mut buf = vec![0; 256 * 1024];
        loop {
            expired(deadline, &cancel)?;
            match conn.read(&mut buf) {
                Ok(0) => return Ok(hash.digest()),
                Ok(n) => hash.update(&buf[..n]),
                Err(e) if is_retry(&e) => {}
                Err(e) => return Err(e),
            }
        }
    });
    // Listening before the stack connects.
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(h),
        Ok(Err(e)) => Err(io::Error::other(format!("Linux receiver: {e}"))),
        Err(_) => Err(io::Error::other("Linux receiver thread died")),
    }
}

/// Starts a thread that connects from inside the namespace to `to` (the
/// stack, which may still be coming up: refusals are retried), sends
/// `total` bytes of the stream for `seed` and closes; returns what it sent.
pub fn sender(
    net: &TunNet,
    to: SocketAddrV4,
    total: u64,
    seed: u64,
    limit: Duration,
    cancel: Arc<AtomicBool>,
) -> JoinHandle<io::Result<Digest>> {
    let ns = net.namespace_path();
    std::thread::spawn(move || -> io::Result<Digest> {
        let deadline = Instant::now() + limit;
        TunNet::enter_path(&ns)?;
        let mut conn = loop {
            expired(deadline, &cancel)?;
            match TcpStream::connect_timeout(&to.into(), POLL) {
                Ok(c) => break c,
                Err(e) if is_retry(&e) || e.kind() == io::ErrorKind::ConnectionRefused => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(e),
            }
        };
        conn.set_write_timeout(Some(POLL))?;
        let mut stream = StreamGen::new(seed);
        let mut hash = StreamHash::new();
        let mut buf = vec![0; 64 * 1024];
        while stream.position() < total {
            let n = buf.len().min((total - stream.position()) as usize);
            stream.fill(&mut buf[..n]);
            let mut off = 0;
            while off < n {
                expired(deadline, &cancel)?;
                match conn.write(&buf[off..n]) {
                    Ok(k) => {
                        hash.update(&buf[off..off + k]);
                        off += k;
                    }
                    Err(e) if is_retry(&e) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        conn.shutdown(std::net::Shutdown::Write)?;
        // Wait for the stack to close its side, so everything was received.
        conn.set_read_timeout(Some(POLL))?;
        let mut b = [0u8; 1];
        loop {
            expired(deadline, &cancel)?;
            match conn.read(&mut b) {
                Ok(0) => return Ok(hash.digest()),
                Ok(_) => {}
                Err(e) if is_retry(&e) => {}
                Err(e) => return Err(e),
            }
        }
    })
}
