//! A TUN device whose other side is the Linux kernel's TCP, inside a network
//! namespace that [`TunNet::create`] makes and [`TunNet`]'s drop removes.
//!
//! TUN is the layer-3 kind of TAP device: it carries IP packets without an
//! Ethernet header, which is what smoltcp's IP medium speaks.
//!
//! Steps of [`TunNet::create`] (every one undone on failure, and on drop):
//! 1. remove namespaces left by earlier processes that died without
//!    cleaning up (named `dyncore-<pid>-<n>` for a pid that is gone);
//! 2. `ip netns add dyncore-<pid>-<n>`;
//! 3. open `/dev/net/tun` and create the device `dctun<pid>n<n>` (not
//!    persistent: it disappears when its file descriptor closes);
//! 4. move the device into the namespace, give it the kernel's address and
//!    the MTU, bring it and the namespace's loopback up.
//!
//! A thread reaches the kernel's side with [`TunNet::enter`] (`setns`),
//! after which its sockets live in the namespace.
//!
//! Nothing is left behind when the process exits normally, unwinds from a
//! panic, or is interrupted through the caller's Ctrl-C handler (all of
//! which drop the guard). A process killed with SIGKILL leaves its
//! namespace; step 1 of the next run removes it.

use std::fs::File;
use std::io::{Read, Write};
use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use dyncore_core::Nanos;

use dyncore_ring::journal::WordRef;

use super::{Wire, WireFull, WirePort};
use crate::chan::{Bell, Log};
use crate::component::Counters;

/// The kernel side's address inside the namespace.
pub const LINUX_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// The split stack's address on the TUN wire.
pub const STACK_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
const PREFIX_LEN: u8 = 24;

/// How long a driver on a TUN wire may park: the kernel cannot ring our
/// bell, so a parked driver looks at the device this often.
const PARK_LIMIT_NS: Nanos = 50_000;

/// Why the TUN wire cannot be used here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TUN wire unavailable: {}", self.0)
    }
}

impl std::error::Error for Unavailable {}

/// Checks, without changing anything, that this process can create a
/// namespace and a TUN device: `/dev/net/tun` opens, the process has
/// CAP_NET_ADMIN, and `ip netns` works.
pub fn probe() -> Result<(), Unavailable> {
    if !std::path::Path::new("/proc/self/ns/net").exists() {
        return Err(Unavailable("the kernel has no network namespaces (/proc/self/ns/net)".into()));
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .map_err(|e| Unavailable(format!("cannot open /dev/net/tun: {e}")))?;
    if !has_cap_net_admin() {
        return Err(Unavailable("the process lacks CAP_NET_ADMIN (run as root)".into()));
    }
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map_err(|e| Unavailable(format!("cannot run `ip` (iproute2): {e}")))?;
    if !out.status.success() {
        return Err(Unavailable(format!(
            "`ip netns list` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// CAP_NET_ADMIN (bit 12) in the effective set, from /proc/self/status.
fn has_cap_net_admin() -> bool {
    const CAP_NET_ADMIN: u32 = 12;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim().to_string();
            u64::from_str_radix(&hex, 16).ok()
        })
        .is_some_and(|caps| caps & (1 << CAP_NET_ADMIN) != 0)
}

fn ip(args: &[&str]) -> Result<(), Unavailable> {
    let out =
        Command::new("ip").args(args).output().map_err(|e| Unavailable(format!("cannot run `ip`: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Unavailable(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Names of the network namespaces (`ip netns list`).
pub fn namespaces() -> Vec<String> {
    Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a network interface of that name exists in this namespace.
pub fn link_exists(name: &str) -> bool {
    std::path::Path::new("/sys/class/net").join(name).exists()
}

/// Step 1: namespaces of processes that no longer exist.
fn remove_stale_namespaces() {
    for ns in namespaces() {
        let Some(pid) = ns.strip_prefix("dyncore-").and_then(|r| r.split('-').next()) else { continue };
        if pid.parse::<u32>().is_ok() && !std::path::Path::new("/proc").join(pid).exists() {
            let _ = ip(&["netns", "del", &ns]);
        }
    }
}

/// A namespace holding a TUN device; removed on drop.
#[derive(Debug)]
pub struct TunNet {
    ns: String,
    dev: String,
    mtu: usize,
}

impl TunNet {
    /// Creates the namespace and the device (steps in the module docs) and
    /// returns the guard and the stack's end of the wire.
    pub fn create(mtu: usize) -> Result<(TunNet, TunEnd), Unavailable> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        // Namespaces are machine-wide, and the sweep below removes those of
        // dead processes: tests that create them must not overlap.
        dyncore_runtime::testing::assert_held("creating a network namespace");
        probe()?;
        remove_stale_namespaces();
        let pid = std::process::id();
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let ns = format!("dyncore-{pid}-{n}");
        let dev = format!("dctun{}n{n}", pid % 1_000_000);
        ip(&["netns", "add", &ns])?;
        // From here the guard removes the namespace on every path.
        let net = TunNet { ns, dev, mtu };
        let file = open_tun(&net.dev)?;
        let addr = format!("{LINUX_ADDR}/{PREFIX_LEN}");
        let mtu_s = mtu.to_string();
        ip(&["link", "set", "dev", &net.dev, "netns", &net.ns])?;
        ip(&["-n", &net.ns, "addr", "add", &addr, "dev", &net.dev])?;
        ip(&["-n", &net.ns, "link", "set", "dev", &net.dev, "mtu", &mtu_s, "up"])?;
        ip(&["-n", &net.ns, "link", "set", "dev", "lo", "up"])?;
        let end = TunEnd { file: Arc::new(file), mtu, bell: Bell::new(), counters: Counters::new(COUNTERS) };
        Ok((net, end))
    }

    /// The namespace's name.
    pub fn namespace(&self) -> &str {
        &self.ns
    }

    /// The device's name (inside the namespace).
    pub fn device(&self) -> &str {
        &self.dev
    }

    pub fn mtu(&self) -> usize {
        self.mtu
    }

    /// The namespace's file (what `setns` takes).
    pub fn namespace_path(&self) -> PathBuf {
        PathBuf::from(format!("/var/run/netns/{}", self.ns))
    }

    /// Moves the calling thread into the namespace, where its sockets see
    /// the device (and the kernel's address [`LINUX_ADDR`]).
    pub fn enter(&self) -> std::io::Result<()> {
        TunNet::enter_path(&self.namespace_path())
    }

    /// Moves the calling thread into the namespace at `path`.
    pub fn enter_path(path: &Path) -> std::io::Result<()> {
        let f = File::open(path)?;
        rustix::thread::move_into_link_name_space(
            f.as_fd(),
            Some(rustix::thread::LinkNameSpaceType::Network),
        )?;
        Ok(())
    }
}

impl Drop for TunNet {
    fn drop(&mut self) {
        // Deleting the namespace deletes the device in it; a device still in
        // this namespace (setup failed before the move) goes with its fd.
        if let Err(e) = ip(&["netns", "del", &self.ns]) {
            eprintln!("warning: removing network namespace {}: {e}", self.ns);
        }
    }
}

/// Step 3: `/dev/net/tun`, non-blocking, attached to a new TUN device.
fn open_tun(dev: &str) -> Result<File, Unavailable> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")
        .map_err(|e| Unavailable(format!("cannot open /dev/net/tun: {e}")))?;
    assert!(dev.len() < libc::IFNAMSIZ, "device name {dev} too long");
    // SAFETY: `ifreq` is plain old data (integers, arrays and a union of
    // them), for which all-zero bytes are a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(dev.bytes()) {
        *d = s as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    use std::os::fd::AsRawFd;
    // SAFETY: TUNSETIFF reads and writes one `ifreq`, which `req` is and
    // which outlives the call; the descriptor is open.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) };
    if rc < 0 {
        return Err(Unavailable(format!("TUNSETIFF {dev}: {}", std::io::Error::last_os_error())));
    }
    Ok(file)
}

const COUNTERS: &[&str] = &["sent", "received", "full", "dropped", "corrupted"];
const SENT: usize = 0;
const RECEIVED: usize = 1;
const FULL: usize = 2;

/// The stack's end of a TUN wire: the device's file descriptor, which
/// outlives the driver attached to it.
///
/// Reads and writes of a device cannot be undone, so they are not part of
/// the driver's journal: a driver that crashes after writing a frame and
/// before committing writes it again when its batch is redone (the peer's
/// TCP drops the duplicate), and a frame it read in a batch that is redone
/// is lost (TCP retransmits it), as on any wire that loses and duplicates.
pub struct TunEnd {
    file: Arc<File>,
    mtu: usize,
    bell: Arc<Bell>,
    counters: Arc<Counters>,
}

impl Wire for TunEnd {
    fn mtu(&self) -> usize {
        self.mtu
    }

    fn bell(&self) -> &Arc<Bell> {
        &self.bell
    }

    fn words(&self) -> Vec<WordRef> {
        Vec::new()
    }

    fn attach(&self, _log: &Log) -> Box<dyn WirePort> {
        Box::new(TunPort {
            file: self.file.clone(),
            mtu: self.mtu,
            bell: self.bell.clone(),
            counters: self.counters.clone(),
        })
    }

    fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }
}

/// A driver's port on a TUN wire.
pub struct TunPort {
    file: Arc<File>,
    mtu: usize,
    bell: Arc<Bell>,
    counters: Arc<Counters>,
}

impl WirePort for TunPort {
    fn mtu(&self) -> usize {
        self.mtu
    }

    fn can_send(&mut self) -> bool {
        // The kernel takes a write unless its queue is full, which only the
        // write can tell.
        true
    }

    fn send(&mut self, frame: &[u8]) -> Result<(), WireFull> {
        match (&*self.file).write(frame) {
            Ok(_) => {
                self.counters.add(SENT, 1);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                self.counters.add(FULL, 1);
                Err(WireFull)
            }
            // The device went away (its namespace was removed): the frame is
            // lost like a frame on an unplugged cable.
            Err(_) => Ok(()),
        }
    }

    fn recv(&mut self, buf: &mut Vec<u8>) -> bool {
        buf.clear();
        buf.resize(self.mtu, 0);
        match (&*self.file).read(buf) {
            Ok(n) if n > 0 => {
                buf.truncate(n);
                self.counters.add(RECEIVED, 1);
                true
            }
            _ => {
                buf.clear();
                false
            }
        }
    }

    fn flush(&mut self) {}

    fn has_work(&self) -> bool {
        // Only a read can tell; a parked driver re-polls within the limit.
        false
    }

    fn bell(&self) -> &Arc<Bell> {
        &self.bell
    }

    fn park_limit_ns(&self) -> Option<Nanos> {
        Some(PARK_LIMIT_NS)
    }

    fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }
}
