//! What the simulator's memory costs per simulated CPU and per simulated
//! thread, *measured*: the peak resident set (`VmHWM` of
//! `/proc/self/status`) of a process that runs one simulation and nothing
//! else, at (C CPUs, T threads), (C/2 CPUs, T threads) and (C CPUs, 2T
//! threads). The differences divided by C/2 and by T are the bytes one more
//! CPU and one more thread cost; what the process holds whatever it
//! simulates (the program, its libraries, the allocator's arenas) cancels
//! out.
//!
//! Each probe runs in a child process of the calling program, which must
//! call [`child_if_asked`] first thing in its `main`: a process started
//! with [`PROBE_ENV`] set runs the probe it names, prints the peak, and
//! exits. The probe's machine is the dynamic one of `C / 16` nodes of 16
//! CPUs with the mix of [`crate::large_mix`] (that of `bench sim`'s large
//! machine): its threads are half in one dynamic-binding parallel program,
//! a quarter in a task-parallel one, the rest sequential programs asking
//! for fused objects, with work for about 100 ms of the whole machine, so
//! every probe simulates about as long: the per-CPU figure includes what a
//! CPU's ticks and slices add over that time (the trace, the record), the
//! per-thread figure what a thread's state and its program add.

use std::path::Path;
use std::process::Command;

use crate::Scenario;
use crate::large_mix::LargeMix;

/// The environment variable that makes a process a probe: `CPUS,THREADS`.
pub const PROBE_ENV: &str = "DYNCORE_SIM_MEMORY_PROBE";

/// The measured figures.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Footprint {
    /// The largest probe: C CPUs and T threads.
    pub cpus: usize,
    pub threads: usize,
    /// Peak resident set of each probe, KiB: (C, T), (C/2, T), (C, 2T).
    pub peak_kib: [u64; 3],
    /// Bytes per simulated CPU and per simulated thread.
    pub bytes_per_cpu: f64,
    pub bytes_per_thread: f64,
}

impl Footprint {
    /// One line for a report.
    pub fn text(&self) -> String {
        format!(
            "memory, measured (peak RSS of a process per probe; differences): {:.0} bytes per simulated CPU, \
             {:.0} bytes per simulated thread (at {} CPUs and {} threads; peaks {} / {} / {} KiB at \
             ({c}, {t}), ({}, {t}), ({c}, {}))",
            self.bytes_per_cpu,
            self.bytes_per_thread,
            self.cpus,
            self.threads,
            self.peak_kib[0],
            self.peak_kib[1],
            self.peak_kib[2],
            self.cpus / 2,
            2 * self.threads,
            c = self.cpus,
            t = self.threads,
        )
    }
}

/// The peak resident set of this process so far, KiB (`None` off Linux).
pub fn peak_rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find_map(|l| l.strip_prefix("VmHWM:"))?.trim().strip_suffix("kB")?.trim().parse().ok()
}

/// The probe's scenario: `cpus` CPUs (a multiple of 16) and `threads`
/// threads (a multiple of 4).
pub fn probe_scenario(cpus: usize, threads: usize) -> Result<Scenario, String> {
    if cpus == 0 || !cpus.is_multiple_of(16) || threads < 4 || !threads.is_multiple_of(4) {
        return Err(format!("a probe needs CPUs in 16s and threads in 4s, not {cpus} and {threads}"));
    }
    // Work for ~100 ms of the whole machine, whatever the counts, so that
    // every probe simulates about as long.
    let ms = 100.0 * cpus as f64 / threads as f64;
    let text = LargeMix {
        name: "memory-probe",
        title: "memory probe",
        label: "probe",
        nodes: cpus / 16,
        threads,
        work_per_thread_ms: ms,
        sequential_work_ms: ms,
        work_scale: 1.0,
        gcc_start_ms: None,
    }
    .toml();
    let s = Scenario::from_toml(&text).map_err(|e| format!("probe scenario: {e}"))?;
    s.validate().map_err(|e| format!("probe scenario: {e}"))?;
    Ok(s)
}

/// If this process was started as a probe ([`PROBE_ENV`]), runs it, prints
/// `vmhwm_kib N` and exits; otherwise returns at once.
pub fn child_if_asked() {
    let Ok(spec) = std::env::var(PROBE_ENV) else { return };
    let code = match run_probe(&spec) {
        Ok(kib) => {
            println!("vmhwm_kib {kib}");
            0
        }
        Err(e) => {
            eprintln!("{PROBE_ENV}={spec}: {e}");
            2
        }
    };
    std::process::exit(code);
}

fn run_probe(spec: &str) -> Result<u64, String> {
    let (c, t) = spec.split_once(',').ok_or("expected CPUS,THREADS")?;
    let parse = |x: &str| x.trim().parse::<usize>().map_err(|e| format!("{x}: {e}"));
    let s = probe_scenario(parse(c)?, parse(t)?)?;
    let r = crate::run_one(&s, 0).map_err(|e| e.to_string())?;
    if !r.finished {
        return Err("the probe's run did not finish".into());
    }
    let kib = peak_rss_kib().ok_or("no VmHWM in /proc/self/status")?;
    drop(r);
    Ok(kib)
}

/// Runs `exe` (a program that calls [`child_if_asked`]) as three probes and
/// returns the footprint at `cpus` CPUs and `threads` threads.
pub fn measure(exe: &Path, cpus: usize, threads: usize) -> Result<Footprint, String> {
    let probe = |c: usize, t: usize| -> Result<u64, String> {
        let o = Command::new(exe)
            .env(PROBE_ENV, format!("{c},{t}"))
            .output()
            .map_err(|e| format!("starting {}: {e}", exe.display()))?;
        let out = String::from_utf8_lossy(&o.stdout);
        out.lines()
            .find_map(|l| l.strip_prefix("vmhwm_kib "))
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| format!("probe ({c}, {t}) failed: {}", String::from_utf8_lossy(&o.stderr).trim()))
    };
    let full = probe(cpus, threads)?;
    let half_cpus = probe(cpus / 2, threads)?;
    let double_threads = probe(cpus, 2 * threads)?;
    let bytes = |a: u64, b: u64| (a as f64 - b as f64) * 1024.0;
    Ok(Footprint {
        cpus,
        threads,
        peak_kib: [full, half_cpus, double_threads],
        bytes_per_cpu: bytes(full, half_cpus) / (cpus / 2) as f64,
        bytes_per_thread: bytes(double_threads, full) / threads as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_is_read_and_probes_are_sized_as_asked() {
        if cfg!(target_os = "linux") {
            assert!(peak_rss_kib().is_some_and(|k| k > 0));
        }
        let s = probe_scenario(32, 64).unwrap();
        let threads: u32 = s.runs[0].workloads.iter().map(|w| w.count * w.threads.unwrap_or(1)).sum();
        assert_eq!((threads, s.runs[0].nodes), (64, Some(2)));
        assert!(probe_scenario(30, 64).is_err());
        assert!(probe_scenario(32, 6).is_err());
    }
}
