//! Where real power figures would come from, probed: RAPL energy counters
//! (`/sys/class/powercap/intel-rapl:*`) and cpufreq
//! (`/sys/devices/system/cpu/cpu*/cpufreq`). Where they exist they are
//! read; where they do not (this project's machines have neither), the
//! probe says so and every power figure is the model's
//! (`dyncore_core::power`), labelled as modelled.

use std::io;
use std::path::{Path, PathBuf};

/// A RAPL power zone (a package, its cores, DRAM).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaplZone {
    pub name: String,
    energy_uj: PathBuf,
    /// The counter wraps after this many microjoules.
    pub max_energy_range_uj: u64,
}

impl RaplZone {
    /// The zone's energy counter, in microjoules (wraps).
    pub fn read_uj(&self) -> io::Result<u64> {
        read_u64(&self.energy_uj)
    }
}

/// Energy between two readings of a counter that wraps at `max_uj`.
pub fn energy_delta_uj(before_uj: u64, after_uj: u64, max_uj: u64) -> u64 {
    if after_uj >= before_uj { after_uj - before_uj } else { max_uj - before_uj + after_uj }
}

/// A CPU with a cpufreq driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuFreq {
    pub cpu: usize,
    cur_khz: PathBuf,
    pub available_khz: Vec<u64>,
}

impl CpuFreq {
    /// Its current frequency, in kHz.
    pub fn read_khz(&self) -> io::Result<u64> {
        read_u64(&self.cur_khz)
    }
}

/// What the machine offers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PowerSources {
    pub rapl: Vec<RaplZone>,
    pub cpufreq: Vec<CpuFreq>,
}

/// Measures the energy of the RAPL package zones over an interval.
#[derive(Debug, Clone)]
pub struct EnergyMeter {
    zones: Vec<RaplZone>,
    start_uj: Vec<u64>,
}

impl EnergyMeter {
    /// Starts measuring, or `None` where the machine has no package zone
    /// (or a counter cannot be read).
    pub fn start(sources: &PowerSources) -> Option<EnergyMeter> {
        let zones: Vec<RaplZone> =
            sources.rapl.iter().filter(|z| z.name.starts_with("package")).cloned().collect();
        if zones.is_empty() {
            return None;
        }
        let start_uj = zones.iter().map(RaplZone::read_uj).collect::<io::Result<_>>().ok()?;
        Some(EnergyMeter { zones, start_uj })
    }

    /// Joules since [`EnergyMeter::start`] (each counter's wrap undone).
    pub fn joules(&self) -> io::Result<f64> {
        let mut uj = 0;
        for (z, &s) in self.zones.iter().zip(&self.start_uj) {
            uj += energy_delta_uj(s, z.read_uj()?, z.max_energy_range_uj);
        }
        Ok(uj as f64 / 1e6)
    }
}

fn read_u64(p: &Path) -> io::Result<u64> {
    std::fs::read_to_string(p)?
        .trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", p.display())))
}

fn sorted_dir(p: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(p)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

impl PowerSources {
    /// Probes the machine (`/sys`).
    pub fn probe() -> PowerSources {
        PowerSources::probe_at(Path::new("/sys"))
    }

    /// Probes a sysfs tree rooted at `sys` (tests use a fake one).
    pub fn probe_at(sys: &Path) -> PowerSources {
        let rapl = sorted_dir(&sys.join("class/powercap"))
            .into_iter()
            .filter(|z| z.file_name().is_some_and(|n| n.to_string_lossy().starts_with("intel-rapl:")))
            .filter_map(|z| {
                let energy_uj = z.join("energy_uj");
                read_u64(&energy_uj).ok()?;
                Some(RaplZone {
                    name: std::fs::read_to_string(z.join("name"))
                        .map(|s| s.trim().to_string())
                        .unwrap_or_default(),
                    max_energy_range_uj: read_u64(&z.join("max_energy_range_uj")).unwrap_or(u64::MAX),
                    energy_uj,
                })
            })
            .collect();
        let cpufreq = sorted_dir(&sys.join("devices/system/cpu"))
            .into_iter()
            .filter_map(|c| {
                let cpu = c.file_name()?.to_str()?.strip_prefix("cpu")?.parse().ok()?;
                let cur_khz = c.join("cpufreq/scaling_cur_freq");
                read_u64(&cur_khz).ok()?;
                let available_khz = std::fs::read_to_string(c.join("cpufreq/scaling_available_frequencies"))
                    .map(|s| s.split_whitespace().filter_map(|f| f.parse().ok()).collect())
                    .unwrap_or_default();
                Some(CpuFreq { cpu, cur_khz, available_khz })
            })
            .collect();
        let mut s = PowerSources { rapl, cpufreq };
        s.cpufreq.sort_by_key(|c| c.cpu);
        s
    }

    /// One line for a report: what is real and what is modelled.
    pub fn describe(&self) -> String {
        let rapl = if self.rapl.is_empty() {
            "RAPL missing (no /sys/class/powercap/intel-rapl:* zone)".to_string()
        } else {
            let names: Vec<_> = self.rapl.iter().map(|z| z.name.as_str()).collect();
            format!("RAPL zones: {}", names.join(", "))
        };
        let freq = if self.cpufreq.is_empty() {
            "cpufreq missing (no cpu*/cpufreq)".to_string()
        } else {
            format!("cpufreq on {} CPUs", self.cpufreq.len())
        };
        let verdict =
            if self.rapl.is_empty() { "power figures are modelled" } else { "power is measured by RAPL" };
        format!("{rapl}; {freq}: {verdict}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_sys(name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("dyncore-power-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        root
    }

    fn write(p: PathBuf, s: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    }

    #[test]
    fn finds_rapl_zones_and_cpufreq_where_they_exist() {
        let sys = fake_sys("present");
        let z = sys.join("class/powercap/intel-rapl:0");
        write(z.join("name"), "package-0\n");
        write(z.join("energy_uj"), "123456\n");
        write(z.join("max_energy_range_uj"), "262143328850\n");
        // A zone that is not RAPL, and a CPU without cpufreq.
        write(sys.join("class/powercap/dtpm/energy_uj"), "1\n");
        write(sys.join("devices/system/cpu/cpu1/cpufreq/scaling_cur_freq"), "1600000\n");
        write(sys.join("devices/system/cpu/cpu1/cpufreq/scaling_available_frequencies"), "2267000 1600000\n");
        write(sys.join("devices/system/cpu/cpu0/online"), "1\n");
        let s = PowerSources::probe_at(&sys);
        assert_eq!(s.rapl.len(), 1);
        assert_eq!(s.rapl[0].name, "package-0");
        assert_eq!(s.rapl[0].read_uj().unwrap(), 123456);
        assert_eq!(s.rapl[0].max_energy_range_uj, 262143328850);
        assert_eq!(s.cpufreq.len(), 1);
        assert_eq!((s.cpufreq[0].cpu, s.cpufreq[0].read_khz().unwrap()), (1, 1600000));
        assert_eq!(s.cpufreq[0].available_khz, [2267000, 1600000]);
        assert!(s.describe().contains("measured by RAPL"), "{}", s.describe());
        std::fs::remove_dir_all(sys).unwrap();
    }

    #[test]
    fn an_energy_meter_sums_the_packages_across_a_wrap() {
        let sys = fake_sys("meter");
        let zone = |n: usize, name: &str, uj: u64| {
            let z = sys.join(format!("class/powercap/intel-rapl:{n}"));
            write(z.join("name"), name);
            write(z.join("energy_uj"), &uj.to_string());
            write(z.join("max_energy_range_uj"), "1000000000");
        };
        zone(0, "package-0", 999_000_000);
        zone(1, "package-1", 5_000_000);
        zone(2, "dram", 0);
        let s = PowerSources::probe_at(&sys);
        let m = EnergyMeter::start(&s).unwrap();
        // Package 0 wraps: 999 J → 1000 J (wrap) → 2 J: 3 J; package 1: 7 J; DRAM is not a package.
        zone(0, "package-0", 2_000_000);
        zone(1, "package-1", 12_000_000);
        zone(2, "dram", 50_000_000);
        assert!((m.joules().unwrap() - 10.0).abs() < 1e-9);
        assert!(EnergyMeter::start(&PowerSources::default()).is_none());
        std::fs::remove_dir_all(sys).unwrap();
    }

    #[test]
    fn says_what_is_missing() {
        let s = PowerSources::probe_at(&fake_sys("absent"));
        assert_eq!(s, PowerSources::default());
        let d = s.describe();
        assert!(d.contains("RAPL missing") && d.contains("cpufreq missing") && d.contains("modelled"), "{d}");
    }

    #[test]
    fn energy_counters_wrap() {
        assert_eq!(energy_delta_uj(100, 250, 1000), 150);
        assert_eq!(energy_delta_uj(900, 50, 1000), 150);
    }
}
