//! The guest's kernel: a Debian package pinned by version and SHA-256,
//! fetched once with `apt-get download` against a sources list used for
//! nothing else, checked, unpacked with `dpkg-deb -x` and cached under the
//! rig's folder (`target/vm/` beside the dyncore binary).
//!
//! Nothing here adds a suite to the machine's apt sources: the archive's
//! lists live in the rig's own folder, and only `.deb` files are fetched,
//! never installed. Where the pinned version has left the archive, the
//! newest cloud kernel whose config has `CONFIG_SCHED_CLASS_EXT=y` is taken,
//! and [`Kernel::note`] says which.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

use crate::VmError;

/// The pinned kernel: Debian's trixie-backports cloud flavour, which has
/// sched_ext, BTF, virtiofs, SMT/MC scheduling and CPU hotplug built in.
pub struct Pinned {
    /// The kernel release (`uname -r`).
    pub release: &'static str,
    /// The Debian package version of both packages.
    pub version: &'static str,
    /// SHA-256 of `linux-binary-<release>` (holds `vmlinuz`).
    pub binary_sha256: &'static str,
    /// SHA-256 of `linux-base-<release>` (holds `config`).
    pub base_sha256: &'static str,
}

/// The kernel every guest boots unless told otherwise.
pub const PINNED: Pinned = Pinned {
    release: "7.3.4+deb13-cloud-amd64",
    version: "7.3.4-1~bpo13+1",
    binary_sha256: "c4fbc8e404958693b28825474c20742d70594d65ca58aea7be6a279c81eb6fa0",
    base_sha256: "e08baa43706ba6e8daff58029b039f46beecfb3b3750c6fa0d6d5ca508a46a43",
};

/// The archive the kernel comes from, and the key its index is signed with
/// (bookworm's `debian-archive-keyring` carries trixie's keys).
const SUITE: &str = "trixie-backports";
const KEYRING: &str = "/usr/share/keyrings/debian-archive-trixie-automatic.gpg";
const MIRROR: &str = "http://deb.debian.org/debian";

/// The kernel config options a guest needs, each with why.
pub const REQUIRED_CONFIG: &[(&str, &str)] = &[
    ("CONFIG_SCHED_CLASS_EXT=y", "sched_ext, for the scx backend"),
    ("CONFIG_VIRTIO_FS=y", "the host's root, shared into the guest"),
    ("CONFIG_HOTPLUG_CPU=y", "CPU hotplug, for Bolt"),
    ("CONFIG_SCHED_SMT=y", "SMT siblings"),
    ("CONFIG_NUMA=y", "sockets as NUMA nodes"),
    ("CONFIG_CPUSETS=y", "the cgroup cpuset controller"),
    ("CONFIG_VIRTIO_CONSOLE=y", "the command's output ports"),
];

/// A kernel ready to boot.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The bzImage.
    pub vmlinuz: PathBuf,
    /// Its release, as `uname -r` prints it in the guest.
    pub release: String,
    /// Set when this is not the pinned kernel: which one, and why.
    pub note: Option<String>,
}

/// The kernel that `setup` cached, or a [`VmError::NoKernel`] that says how
/// to get one.
pub fn locate(rig_dir: &Path) -> Result<Kernel, VmError> {
    let current = rig_dir.join("kernel/current");
    let release = fs::read_to_string(&current).map_err(|_| {
        VmError::NoKernel(format!(
            "no guest kernel in {}: run `dyncore vm setup` once (it fetches Linux {} from Debian's {SUITE})",
            rig_dir.join("kernel").display(),
            PINNED.release
        ))
    })?;
    let release = release.trim().to_string();
    from_path(
        &rig_dir.join("kernel").join(&release).join("vmlinuz"),
        (release != PINNED.release).then(|| {
            format!(
                "kernel {release} (the pinned {} had left the archive when it was set up)",
                PINNED.release
            )
        }),
    )
}

/// A kernel at `path` (`--kernel`), checked to exist.
pub fn from_path(path: &Path, note: Option<String>) -> Result<Kernel, VmError> {
    let meta = fs::metadata(path).map_err(|e| {
        VmError::NoKernel(format!(
            "no kernel at {}: {e} (run `dyncore vm setup`, or give --kernel a bzImage)",
            path.display()
        ))
    })?;
    if !meta.is_file() || meta.len() < 1024 * 1024 {
        return Err(VmError::NoKernel(format!("{} is not a kernel image", path.display())));
    }
    let release = path
        .parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Kernel { vmlinuz: path.to_path_buf(), release, note })
}

/// The hex SHA-256 of a file.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let data = fs::read(path)?;
    Ok(Sha256::digest(&data).iter().map(|b| format!("{b:02x}")).collect())
}

/// The options that point apt at the rig's own sources list, lists and
/// cache, and at no state of the machine's.
fn apt_options(apt: &Path) -> Vec<String> {
    let d = apt.display();
    vec![
        format!("-oDir::Etc::SourceList={d}/sources.list"),
        "-oDir::Etc::SourceParts=/dev/null".into(),
        format!("-oDir::State::Lists={d}/lists"),
        format!("-oDir::Cache={d}/cache"),
        "-oDir::State::Status=/dev/null".into(),
        "-oAPT::Architectures=amd64".into(),
        "-oAPT::Sandbox::User=root".into(),
        "-oDebug::NoLocking=true".into(),
    ]
}

fn run(cmd: &mut Command, what: &str) -> Result<String, VmError> {
    let out = cmd.output().map_err(|e| VmError::Setup(format!("{what}: {e}")))?;
    if !out.status.success() {
        return Err(VmError::Setup(format!(
            "{what} failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Fetches, checks and unpacks the kernel into `rig_dir/kernel/`, unless it
/// is there already. `say` gets one line per step.
pub fn setup(rig_dir: &Path, say: &mut dyn FnMut(&str)) -> Result<Kernel, VmError> {
    if let Ok(k) = locate(rig_dir) {
        say(&format!("kernel: {} (cached in {})", k.release, rig_dir.join("kernel").display()));
        return Ok(k);
    }
    if !Path::new(KEYRING).exists() {
        return Err(VmError::Setup(format!(
            "{KEYRING} is missing: install the `debian-archive-keyring` package (it signs the kernel's archive)"
        )));
    }
    let apt = rig_dir.join("apt");
    for d in ["lists/partial", "cache/archives/partial", "debs"] {
        fs::create_dir_all(apt.join(d)).map_err(|e| VmError::Setup(format!("{}: {e}", apt.display())))?;
    }
    fs::write(apt.join("sources.list"), format!("deb [signed-by={KEYRING}] {MIRROR} {SUITE} main\n"))
        .map_err(|e| VmError::Setup(e.to_string()))?;
    let opts = apt_options(&apt);
    say(&format!(
        "kernel: reading Debian's {SUITE} index (into {}, not the machine's apt lists)",
        apt.display()
    ));
    run(Command::new("apt-get").args(&opts).args(["-q", "update"]), "apt-get update")?;

    let debs = apt.join("debs");
    let pinned = fetch_pair(&opts, &debs, PINNED.release, PINNED.version);
    let (release, note) = match pinned {
        Ok((bin, base)) => {
            for (path, want) in [(&bin, PINNED.binary_sha256), (&base, PINNED.base_sha256)] {
                let got = sha256_file(path).map_err(|e| VmError::Setup(e.to_string()))?;
                if got != want {
                    return Err(VmError::Setup(format!(
                        "{} has SHA-256 {got}, the pinned one is {want}: refusing it",
                        path.display()
                    )));
                }
            }
            say(&format!("kernel: {} {} fetched, SHA-256 matches the pin", PINNED.release, PINNED.version));
            unpack(rig_dir, PINNED.release, &bin, &base)?;
            (PINNED.release.to_string(), None)
        }
        Err(e) => {
            say(&format!(
                "kernel: the pinned {} is not in the archive ({e}); looking for the newest with sched_ext",
                PINNED.release
            ));
            let release = newest_with_scx(rig_dir, &opts, &debs, say)?;
            let note = format!("kernel {release}: the pinned {} has left the archive", PINNED.release);
            say(&note);
            (release, Some(note))
        }
    };
    fs::write(rig_dir.join("kernel/current"), format!("{release}\n"))
        .map_err(|e| VmError::Setup(e.to_string()))?;
    let mut k = locate(rig_dir)?;
    k.note = note;
    Ok(k)
}

/// Downloads `linux-binary-REL` and `linux-base-REL` at `version` (`None`:
/// the archive's) into `debs`; the two files' paths.
fn fetch_pair(
    opts: &[String],
    debs: &Path,
    release: &str,
    version: &str,
) -> Result<(PathBuf, PathBuf), VmError> {
    let mut paths = Vec::new();
    for pkg in [format!("linux-binary-{release}"), format!("linux-base-{release}")] {
        let spec = if version.is_empty() { pkg.clone() } else { format!("{pkg}={version}") };
        run(
            Command::new("apt-get").args(opts).args(["-q", "download", &spec]).current_dir(debs),
            &format!("apt-get download {spec}"),
        )?;
        let found = fs::read_dir(debs)
            .map_err(|e| VmError::Setup(e.to_string()))?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(&format!("{pkg}_"))))
            .max()
            .ok_or_else(|| VmError::Setup(format!("apt-get download {spec} left no file")))?;
        paths.push(found);
    }
    Ok((paths[0].clone(), paths[1].clone()))
}

/// Unpacks both packages and keeps `vmlinuz` and `config` in
/// `rig_dir/kernel/REL/`, after checking the config.
fn unpack(rig_dir: &Path, release: &str, bin: &Path, base: &Path) -> Result<(), VmError> {
    let dest = rig_dir.join("kernel").join(release);
    let tree = dest.join("tree");
    let _ = fs::remove_dir_all(&tree);
    fs::create_dir_all(&tree).map_err(|e| VmError::Setup(e.to_string()))?;
    for deb in [bin, base] {
        run(Command::new("dpkg-deb").arg("-x").arg(deb).arg(&tree), "dpkg-deb -x")?;
    }
    let modules = tree.join("usr/lib/modules").join(release);
    for f in ["vmlinuz", "config"] {
        fs::rename(modules.join(f), dest.join(f))
            .map_err(|e| VmError::Setup(format!("{f} in the packages: {e}")))?;
    }
    let _ = fs::remove_dir_all(&tree);
    let config = fs::read_to_string(dest.join("config")).map_err(|e| VmError::Setup(e.to_string()))?;
    let missing: Vec<String> = REQUIRED_CONFIG
        .iter()
        .filter(|(opt, _)| !config.lines().any(|l| l == *opt))
        .map(|(opt, why)| format!("{opt} ({why})"))
        .collect();
    if !missing.is_empty() {
        return Err(VmError::Setup(format!("kernel {release}'s config lacks {}", missing.join(", "))));
    }
    Ok(())
}

/// The newest `linux-binary-*-cloud-amd64` whose config has sched_ext,
/// fetched and unpacked; its release.
fn newest_with_scx(
    rig_dir: &Path,
    opts: &[String],
    debs: &Path,
    say: &mut dyn FnMut(&str),
) -> Result<String, VmError> {
    let names = run(
        Command::new("apt-cache").args(opts).args([
            "search",
            "--names-only",
            r"^linux-binary-[0-9.]+\+deb[0-9]+-cloud-amd64$",
        ]),
        "apt-cache search",
    )?;
    let mut releases: Vec<String> = names
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|p| p.strip_prefix("linux-binary-"))
        .map(str::to_string)
        .collect();
    releases.sort_by_key(|r| std::cmp::Reverse(version_key(r)));
    for release in releases {
        let (bin, base) = match fetch_pair(opts, debs, &release, "") {
            Ok(p) => p,
            Err(e) => {
                say(&format!("kernel: {release}: {e}"));
                continue;
            }
        };
        match unpack(rig_dir, &release, &bin, &base) {
            Ok(()) => return Ok(release),
            Err(e) => say(&format!("kernel: {release} skipped: {e}")),
        }
    }
    Err(VmError::Setup(format!("no cloud kernel in {SUITE} has CONFIG_SCHED_CLASS_EXT=y")))
}

/// `7.3.4+deb13-…` → `[7, 3, 4]`, for ordering releases.
fn version_key(release: &str) -> Vec<u64> {
    release.split('+').next().unwrap_or("").split('.').filter_map(|n| n.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_order_by_number_not_text() {
        let mut r = vec!["6.19.9+deb13-cloud-amd64", "7.3.4+deb13-cloud-amd64", "6.19.14+deb13-cloud-amd64"];
        r.sort_by_key(|r| std::cmp::Reverse(version_key(r)));
        assert_eq!(r, ["7.3.4+deb13-cloud-amd64", "6.19.14+deb13-cloud-amd64", "6.19.9+deb13-cloud-amd64"]);
    }

    #[test]
    fn a_missing_kernel_says_how_to_get_one() {
        let d = tempfile::tempdir().unwrap();
        let e = locate(d.path()).unwrap_err().to_string();
        assert!(e.contains("dyncore vm setup"), "{e}");
        let e = from_path(&d.path().join("nope"), None).unwrap_err().to_string();
        assert!(e.contains("no kernel at"), "{e}");
    }
}
