//! Where a report was measured: one line about this machine.

/// One line describing the machine a benchmark ran on, for reports.
pub fn machine_description() -> String {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let hv = if cpu_has_flag("hypervisor") { ", under a hypervisor" } else { "" };
    format!("{cpus} CPUs available, {model}{hv}, Linux {}{}", kernel_release(), vm_guest_note())
}

/// The accelerator when this process runs in a `dyncore vm` guest (`kvm`
/// or `tcg`, from `DYNCORE_VM_ACCEL`), else `None`.
pub fn vm_accel() -> Option<String> {
    std::env::var("DYNCORE_VM_ACCEL").ok().filter(|a| !a.is_empty())
}

/// Whether figures measured here are timings: not in a TCG guest, whose
/// CPUs are emulated (its figures are functional: placements, counts,
/// orderings).
pub fn timings_are_real() -> bool {
    vm_accel().is_none_or(|a| a != "tcg")
}

/// ", in a dyncore vm guest (TCG: …)" for a guest, else nothing.
pub fn vm_guest_note() -> String {
    match vm_accel().as_deref() {
        None => String::new(),
        Some("tcg") => {
            ", in a dyncore vm guest under TCG (emulated CPUs: functional figures only, not timings)".into()
        }
        Some(a) => format!(", in a dyncore vm guest under {}", a.to_uppercase()),
    }
}

/// Whether `/proc/cpuinfo` lists `flag` for the first CPU.
pub fn cpu_has_flag(flag: &str) -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("flags")).map(|l| l.split_whitespace().any(|f| f == flag))
        })
        .unwrap_or(false)
}

pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default()
}
