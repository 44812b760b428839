//! The build's identity, `DYNCORE_BUILD_ID`, which keys every sweep part
//! (`sweep::exec::unit_key`): the git revision of the source tree and, if
//! the tree differs from it, a hash of how (`git diff HEAD` and the names
//! of files git does not track). A part made by another build of the
//! simulator or the policies is then never taken for this one's. Without
//! git (a source archive), the package version and "nogit".

use std::path::Path;
use std::process::Command;

fn git(root: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git").arg("-C").arg(root).args(args).output().ok()?;
    out.status.success().then_some(out.stdout)
}

fn fnv(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Any change of the sources (every crate, the lock file) or of git's
    // idea of them (a commit, a checkout, an add) makes it again.
    for p in ["crates", "Cargo.lock", ".git/HEAD", ".git/index", ".git/packed-refs", ".git/refs/heads"] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    let id = match git(&root, &["rev-parse", "--short=12", "HEAD"]) {
        Some(rev) => {
            let rev = String::from_utf8_lossy(&rev).trim().to_string();
            let mut how = git(&root, &["diff", "HEAD", "--", "crates", "Cargo.lock"]).unwrap_or_default();
            how.extend(
                git(&root, &["ls-files", "--others", "--exclude-standard", "crates"]).unwrap_or_default(),
            );
            if how.is_empty() { rev } else { format!("{rev}+{:016x}", fnv(&how)) }
        }
        None => format!("{}-nogit", env!("CARGO_PKG_VERSION")),
    };
    println!("cargo:rustc-env=DYNCORE_BUILD_ID={id}");
}
