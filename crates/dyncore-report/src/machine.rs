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

/// Today's date (UTC) as YYYY-MM-DD, for reports and profiles.
pub fn today() -> String {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400) as i64;
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date of a count of days since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`; no date crate is among the allowed
/// dependencies).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The first lines of every bench report: title, machine, date, command.
pub fn report_header(title: &str, machine: &str) -> String {
    format!("# {title}\n\nMachine: {machine}. Date: {}. Command: `{}`.\n\n", today(), command_line())
}

/// The command line that ran this process, for reports ("dyncore bench …").
pub fn command_line() -> String {
    let mut args = std::env::args();
    let exe = args.next().map(|a| {
        std::path::Path::new(&a).file_name().map_or(a.clone(), |f| f.to_string_lossy().into_owned())
    });
    exe.into_iter().chain(args).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(today().len(), 10);
    }
}
