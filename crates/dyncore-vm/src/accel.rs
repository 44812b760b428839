//! Choosing the accelerator: KVM where a guest really boots with it, TCG
//! otherwise. A `/dev/kvm` is not proof: on a nested host a KVM guest can
//! die in early boot (`KVM internal error`), so the rig boots a probe guest
//! once and remembers the answer in the rig's folder, keyed on the kernel,
//! QEMU's version and the host CPU. Every output made in a guest carries
//! the answer (`DYNCORE_VM_ACCEL`): figures from a TCG guest are functional
//! (placements, counts, orderings), never timings.

use std::fs;
use std::path::Path;

/// Whether this process may use `/dev/kvm` at all.
pub fn kvm_device() -> Result<(), String> {
    fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .map(|_| ())
        .map_err(|e| format!("/dev/kvm: {e}"))
}

/// The key a probe's answer is kept under.
pub fn probe_key(kernel_release: &str, qemu_version: &str) -> String {
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    format!("{kernel_release} | {qemu_version} | {cpu}")
}

/// A remembered answer for `key`: `Some(Ok(()))` KVM boots,
/// `Some(Err(why))` it does not.
pub fn remembered(rig_dir: &Path, key: &str) -> Option<Result<(), String>> {
    let text = fs::read_to_string(rig_dir.join("kvm-probe")).ok()?;
    let mut lines = text.lines();
    (lines.next()? == key).then_some(())?;
    match lines.next()? {
        "works" => Some(Ok(())),
        other => Some(Err(other.trim_start_matches("fails: ").to_string())),
    }
}

/// Keeps a probe's answer.
pub fn remember(rig_dir: &Path, key: &str, answer: &Result<(), String>) {
    let line = match answer {
        Ok(()) => "works".to_string(),
        Err(why) => format!("fails: {}", why.lines().next().unwrap_or("")),
    };
    let _ = fs::create_dir_all(rig_dir);
    let _ = fs::write(rig_dir.join("kvm-probe"), format!("{key}\n{line}\n"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_kept_per_key() {
        let d = tempfile::tempdir().unwrap();
        assert!(remembered(d.path(), "k").is_none());
        remember(d.path(), "k", &Err("KVM internal error\nmore".into()));
        assert_eq!(remembered(d.path(), "k"), Some(Err("KVM internal error".into())));
        assert!(remembered(d.path(), "other").is_none());
        remember(d.path(), "k", &Ok(()));
        assert_eq!(remembered(d.path(), "k"), Some(Ok(())));
    }
}
