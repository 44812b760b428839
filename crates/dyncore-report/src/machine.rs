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
    format!("{cpus} CPUs available, {model}{hv}, Linux {}", kernel_release())
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
