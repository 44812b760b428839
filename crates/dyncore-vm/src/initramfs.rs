//! The guest's initial root: a `newc` cpio archive, built per run, holding
//! busybox, `/init` and the command's script. The guest's real root is the
//! host's `/`, shared read-only over virtiofs; `/init` mounts it, lays the
//! guest's own `/proc`, `/sys`, `/dev`, cgroup and scratch folders over it,
//! makes the writable folders writable, and runs the command chrooted.
//!
//! Invariants: every entry's name is relative and unique; directories
//! precede their contents; the archive ends with the `TRAILER!!!` entry and
//! each header and body is padded to 4 bytes (the kernel's
//! `init/initramfs.c` reads nothing else).

use std::io::{self, Write};

/// One entry of the archive.
enum Entry<'a> {
    Dir,
    File { mode: u32, data: &'a [u8] },
    CharDev { major: u32, minor: u32 },
}

/// A `newc` cpio writer (the format the kernel unpacks into its rootfs).
pub struct Cpio<W: Write> {
    out: W,
    ino: u32,
    written: u64,
}

impl<W: Write> Cpio<W> {
    /// A writer onto `out`.
    pub fn new(out: W) -> Self {
        Cpio { out, ino: 1, written: 0 }
    }

    /// A directory.
    pub fn dir(&mut self, name: &str) -> io::Result<()> {
        self.entry(name, Entry::Dir)
    }

    /// A regular file with its permission bits (e.g. `0o755`).
    pub fn file(&mut self, name: &str, mode: u32, data: &[u8]) -> io::Result<()> {
        self.entry(name, Entry::File { mode, data })
    }

    /// A character device node.
    pub fn char_dev(&mut self, name: &str, major: u32, minor: u32) -> io::Result<()> {
        self.entry(name, Entry::CharDev { major, minor })
    }

    /// Writes the trailer and returns the output.
    pub fn finish(mut self) -> io::Result<W> {
        self.header("TRAILER!!!", 0, 0, 0, 0, 0)?;
        self.out.flush()?;
        Ok(self.out)
    }

    fn entry(&mut self, name: &str, e: Entry<'_>) -> io::Result<()> {
        assert!(!name.starts_with('/') && !name.is_empty(), "cpio names are relative: {name}");
        let (mode, data, rmaj, rmin): (u32, &[u8], u32, u32) = match e {
            Entry::Dir => (0o040755, &[], 0, 0),
            Entry::File { mode, data } => (0o100000 | mode, data, 0, 0),
            Entry::CharDev { major, minor } => (0o020600, &[], major, minor),
        };
        let nlink = if mode & 0o040000 != 0 { 2 } else { 1 };
        self.header(name, mode, nlink, data.len(), rmaj, rmin)?;
        self.out.write_all(data)?;
        self.written += data.len() as u64;
        self.pad()
    }

    fn header(
        &mut self,
        name: &str,
        mode: u32,
        nlink: u32,
        size: usize,
        rmaj: u32,
        rmin: u32,
    ) -> io::Result<()> {
        let size = u32::try_from(size).map_err(|_| io::Error::other("a cpio file is under 4 GiB"))?;
        let ino = self.ino;
        self.ino += 1;
        // c_magic, then 13 eight-digit hex fields: ino mode uid gid nlink
        // mtime filesize devmajor devminor rdevmajor rdevminor namesize check.
        let h = format!(
            "070701{ino:08x}{mode:08x}{:08x}{:08x}{nlink:08x}{:08x}{size:08x}{:08x}{:08x}{rmaj:08x}{rmin:08x}{:08x}{:08x}",
            0,
            0,
            0,
            0,
            0,
            name.len() + 1,
            0
        );
        self.out.write_all(h.as_bytes())?;
        self.out.write_all(name.as_bytes())?;
        self.out.write_all(&[0])?;
        self.written += (h.len() + name.len() + 1) as u64;
        self.pad()
    }

    fn pad(&mut self) -> io::Result<()> {
        let n = (4 - self.written % 4) % 4;
        self.out.write_all(&[0u8; 3][..n as usize])?;
        self.written += n;
        Ok(())
    }
}

/// The folders of the initial root: where the host's root is mounted
/// (`newroot`, and `hostrw`, its writable twin that never enters the
/// chroot) and the kernel's file systems.
pub const DIRS: &[&str] = &["bin", "dev", "proc", "sys", "tmp", "newroot", "hostrw"];

/// The guest's `/init`, a busybox shell script. Its steps, in order:
///
/// 1. mount `/proc`, `/sys`, `/dev`; find the virtio ports by name;
/// 2. mount the host's root (virtiofs tag `hostfs`) at `/hostrw`, bind it
///    to `/newroot` and make that read-only;
/// 3. lay tmpfs over `/tmp`, `/run`, `/var/tmp` and `/root`, then bind each
///    writable folder from `/hostrw` (so a writable folder under `/tmp` is
///    the host's);
/// 4. mount `/proc`, `/sys`, `/dev`, the cgroup hierarchy asked for,
///    debugfs and tracefs inside `/newroot`;
/// 5. run `/run/dyncore-vm/cmd.sh` chrooted, stdout and stderr to their
///    ports, stdin from `/dev/null`;
/// 6. `sync`, write `exit N` to the status port, power off.
///
/// A step that fails writes `init-error <what>` to the status port and
/// powers off, so the host names the step.
pub const INIT: &str = r#"#!/bin/busybox sh
export PATH=/bin
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/null >/dev/ttyS0 2>&1
port() {
    for p in /sys/class/virtio-ports/*; do
        [ "$(cat "$p/name" 2>/dev/null)" = "$1" ] && echo "/dev/${p##*/}" && return 0
    done
    echo /dev/null
}
STATUS=$(port dyncore.status)
OUT=$(port dyncore.stdout)
ERR=$(port dyncore.stderr)
fail() {
    echo "dyncore-vm init: $*"
    echo "init-error $*" >"$STATUS"
    poweroff -f
    sleep 60
}
arg() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" /proc/cmdline; }
CGROUP=$(arg dyncore.cgroup)
ACCEL=$(arg dyncore.accel)
mount -t virtiofs hostfs /hostrw || fail "mounting the host's root (virtiofs) failed"
mount --bind /hostrw /newroot || fail "bind /newroot"
mount -o remount,bind,ro /newroot || fail "making the host's root read-only"
for d in /tmp /run /var/tmp /root; do
    [ -d "/newroot$d" ] && { mount -t tmpfs -o mode=1777 tmpfs "/newroot$d" || fail "tmpfs on $d"; }
done
while read -r d; do
    [ -n "$d" ] || continue
    mkdir -p "/newroot$d" 2>/dev/null
    mount --bind "/hostrw$d" "/newroot$d" || fail "making $d writable"
done </rw.list
mount -t proc proc /newroot/proc || fail "proc"
mount -t sysfs sysfs /newroot/sys || fail "sysfs"
mount -t devtmpfs devtmpfs /newroot/dev || fail "devtmpfs"
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts devpts /newroot/dev/pts
mount -t tmpfs tmpfs /newroot/dev/shm
mount -t debugfs debugfs /newroot/sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /newroot/sys/kernel/tracing 2>/dev/null
case "$CGROUP" in
v2)
    mount -t cgroup2 cgroup2 /newroot/sys/fs/cgroup || fail "cgroup2"
    for c in cpuset cpu memory pids; do
        echo "+$c" >/newroot/sys/fs/cgroup/cgroup.subtree_control || fail "enabling the $c controller"
    done
    ;;
v1)
    mount -t tmpfs -o mode=755 cgroup /newroot/sys/fs/cgroup || fail "cgroup tmpfs"
    for c in cpu,cpuacct cpuset freezer memory pids; do
        mkdir -p "/newroot/sys/fs/cgroup/$c"
        mount -t cgroup -o "$c" cgroup "/newroot/sys/fs/cgroup/$c" 2>/dev/null || rmdir "/newroot/sys/fs/cgroup/$c"
    done
    ln -s cpu,cpuacct /newroot/sys/fs/cgroup/cpu
    ln -s cpu,cpuacct /newroot/sys/fs/cgroup/cpuacct
    ;;
esac
mkdir -p /newroot/run/dyncore-vm
cp /cmd.sh /newroot/run/dyncore-vm/cmd.sh
echo "ready" >"$STATUS"
chroot /newroot /bin/sh /run/dyncore-vm/cmd.sh >"$OUT" 2>"$ERR"
rc=$?
sync
echo "exit $rc" >"$STATUS"
poweroff -f
sleep 60
"#;

/// Quotes `s` for a POSIX shell: single quotes, with each `'` as `'\''`.
pub fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The command's script: its environment, its folder, then the command,
/// `exec`ed so its exit status is the script's.
pub fn command_script(env: &[(String, String)], cwd: &str, argv: &[String]) -> String {
    let mut s = String::from("# written by dyncore vm run\n");
    for (k, v) in env {
        s.push_str(&format!("export {k}={}\n", shell_quote(v)));
    }
    s.push_str(&format!(
        "cd {} || {{ echo \"dyncore vm: the guest has no folder {}\" >&2; exit 127; }}\n",
        shell_quote(cwd),
        cwd.replace('"', "")
    ));
    let cmd: Vec<String> = argv.iter().map(|a| shell_quote(a)).collect();
    s.push_str(&format!("exec {}\n", cmd.join(" ")));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newc_entries_are_aligned_and_trailed() {
        let mut c = Cpio::new(Vec::new());
        c.dir("bin").unwrap();
        c.file("bin/x", 0o755, b"abc").unwrap();
        c.char_dev("console", 5, 1).unwrap();
        let out = c.finish().unwrap();
        assert_eq!(out.len() % 4, 0);
        assert!(out.starts_with(b"070701"));
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("bin/x\0"));
        assert!(text.contains("TRAILER!!!\0"));
        // The file's header: mode 0100755, size 3.
        let at = text.find("bin/x").unwrap() - 110;
        assert_eq!(&text[at + 14..at + 22], "000081ed");
        assert_eq!(&text[at + 54..at + 62], "00000003");
    }

    #[test]
    fn quoting_survives_quotes_and_spaces() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        let s =
            command_script(&[("A".into(), "x y".into())], "/w", &["sh".into(), "-c".into(), "exit 3".into()]);
        assert!(s.contains("export A='x y'"));
        assert!(s.ends_with("exec 'sh' '-c' 'exit 3'\n"));
    }
}
