//! Fit: which real CPU each runtime CPU of a scenario's machine runs on,
//! and whether the real CPUs can give every runtime CPU the duty cycles
//! the policy may set.
//!
//! A scenario names runtime CPUs only (its machine's CPUs, and `pin`
//! cpulists within them); the real CPUs come from `--real-cpus` (default:
//! every CPU this process may use), refused before anything starts when it
//! names a CPU the process may not use.
//!
//! A machine of N runtime CPUs on R real CPUs is dealt in contiguous blocks
//! of ⌈N / R⌉ runtime CPUs per real CPU (one each when N ≤ R; a real CPU
//! left over takes the controller, so that it disturbs no runtime CPU).
//! Contiguous blocks keep the CPUs of an aligned pair or quad together, so
//! that when one of them runs fused the others are borrowed (idle) on the
//! same real CPU. What a real CPU must give its block at most — its *peak
//! demand* — is the largest sum of duties its runtime CPUs can be set to
//! at once, over every way the machine's objects can cover them (each CPU
//! idle, native, or the representative of an aligned object whose other
//! CPUs are borrowed), at the fastest speed class, scaled by
//! `--baseline-duty`.
//!
//! * A block whose peak demand exceeds what real-time threads may use of a
//!   real CPU (`sched_rt_runtime_us / sched_rt_period_us`, 95% by default)
//!   makes the run OVERSUBSCRIBED: its runtime CPUs would take time from
//!   each other, so their duty cycles are not what the policy set. The run
//!   still goes; every figure of it is labelled and never counted as
//!   agreeing with the simulator.
//! * Two runtime CPUs at a 45% baseline (`--baseline-duty 45`) fit one
//!   real CPU (90%), so a 24-CPU machine fits 12 real CPUs: a user with 16
//!   or more cores runs the shipped 24-CPU scenarios live, unlabelled (one
//!   core is left for the controller).
//! * A runtime CPU alone on a real CPU whose own peak (a fused quad's 100%)
//!   exceeds the real-time share is not oversubscribed, but cannot get its
//!   full duty: the report warns, and the duty report measures the
//!   shortfall (a throttling error).

use dyncore_core::speed::{Duty, SpeedClass};
use dyncore_core::{CpuId, CpuSet};
use dyncore_runtime::backend::DutyScale;
use dyncore_sim::machine::MachineSpec;

/// Where one run's runtime CPUs go.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// Real CPU of each runtime CPU.
    pub real: Vec<CpuId>,
    /// Each real CPU used, its runtime CPUs and their peak demand (a share
    /// of the real CPU).
    pub blocks: Vec<(CpuId, CpuSet, f64)>,
    /// The share of a real CPU real-time threads may use.
    pub capacity: f64,
    /// A real CPU hosts several runtime CPUs whose peak demand exceeds
    /// `capacity`.
    pub oversubscribed: bool,
    /// A real CPU no runtime CPU uses, for the controller.
    pub spare: Option<CpuId>,
}

/// The share of a real CPU that `SCHED_FIFO` threads may use: the kernel's
/// `sched_rt_runtime_us / sched_rt_period_us` (1 when unlimited or
/// unreadable).
pub fn realtime_capacity() -> f64 {
    let read =
        |f: &str| std::fs::read_to_string(format!("/proc/sys/kernel/{f}")).ok()?.trim().parse::<i64>().ok();
    match (read("sched_rt_runtime_us"), read("sched_rt_period_us")) {
        (Some(r), Some(p)) if r >= 0 && p > 0 => (r as f64 / p as f64).min(1.0),
        _ => 1.0,
    }
}

/// The fastest duty `cpu` can be set to as the representative of an
/// object of `size` CPUs, scaled.
fn duty_of(m: &MachineSpec, scale: DutyScale, cpu: CpuId, size: usize) -> f64 {
    [SpeedClass::Low, SpeedClass::Medium, SpeedClass::High]
        .into_iter()
        .map(|class| m.speed.duty(m.topology.kind(cpu), size, class))
        .map(|d| scale.apply(d).map_or(f64::INFINITY, |d: Duty| d.percent() / 100.0))
        .fold(0.0, f64::max)
}

/// The largest sum of duties the CPUs `block[i..]` can have at once (see
/// the module docs), the CPUs below `covered` being borrowed.
fn peak(m: &MachineSpec, scale: DutyScale, block: &[CpuId], i: usize, covered: CpuId) -> f64 {
    let Some(&cpu) = block.get(i) else { return 0.0 };
    if cpu < covered {
        return peak(m, scale, block, i + 1, covered);
    }
    // Idle (or borrowed by an object whose representative is elsewhere).
    let mut best = peak(m, scale, block, i + 1, covered);
    let (node_start, node_len) = m.topology.node_range(m.topology.node_of(cpu));
    for size in [1, 2, 4].into_iter().filter(|&k| k <= m.max_fuse) {
        let aligned = (cpu - node_start).is_multiple_of(size) && cpu + size <= node_start + node_len;
        if aligned {
            let rest = peak(m, scale, block, i + 1, cpu + size);
            best = best.max(duty_of(m, scale, cpu, size) + rest);
        }
    }
    best
}

impl Fit {
    /// The runtime CPUs of `m` over the real CPUs `real` (not empty), with
    /// duties scaled by `scale`, on real CPUs of which real-time threads
    /// may use `capacity`.
    pub fn new(m: &MachineSpec, real: &CpuSet, scale: DutyScale, capacity: f64) -> Fit {
        let list: Vec<CpuId> = real.iter().collect();
        assert!(!list.is_empty(), "no real CPU to run on");
        let n = m.topology.ncpus();
        let per = n.div_ceil(list.len()).max(1);
        let real_of: Vec<CpuId> = (0..n).map(|c| list[c / per]).collect();
        let blocks: Vec<(CpuId, CpuSet, f64)> = (0..n.div_ceil(per))
            .map(|b| {
                let cpus: Vec<CpuId> = (b * per..((b + 1) * per).min(n)).collect();
                (list[b], cpus.iter().copied().collect(), peak(m, scale, &cpus, 0, 0))
            })
            .collect();
        // A little slack: a demand of exactly the capacity fits.
        let oversubscribed = blocks.iter().any(|(_, cpus, p)| cpus.len() > 1 && *p > capacity + 1e-9);
        Fit { real: real_of, spare: list.get(blocks.len()).copied(), blocks, capacity, oversubscribed }
    }

    /// Real CPUs where one runtime CPU alone can be asked for more than
    /// real-time threads may use.
    pub fn over_limit(&self) -> Vec<(CpuId, f64)> {
        self.blocks
            .iter()
            .filter(|(_, cpus, p)| cpus.len() == 1 && *p > self.capacity + 1e-9)
            .map(|(r, _, p)| (*r, *p))
            .collect()
    }

    /// The blocks that make the run oversubscribed, in words.
    pub fn crowded(&self) -> String {
        let over: Vec<String> = self
            .blocks
            .iter()
            .filter(|(_, cpus, p)| cpus.len() > 1 && *p > self.capacity + 1e-9)
            .map(|(r, cpus, p)| {
                format!("runtime CPUs {cpus} share real CPU {r} and can ask for {:.1}% of it", p * 100.0)
            })
            .collect();
        format!("{}, more than the {:.0}% real-time threads may use", over.join("; "), self.capacity * 100.0)
    }

    /// Where the runtime CPUs run, in words.
    pub fn describe(&self) -> String {
        let blocks: Vec<String> = self
            .blocks
            .iter()
            .map(|(r, cpus, p)| format!("{cpus} on real CPU {r} (peak {:.1}%)", p * 100.0))
            .collect();
        let mut s = format!(
            "runtime CPUs: {}; real-time threads may use {:.0}% of a real CPU",
            blocks.join(", "),
            self.capacity * 100.0
        );
        if self.oversubscribed {
            s += " — OVERSUBSCRIBED";
        }
        match self.spare {
            Some(c) => s += &format!("; the controller on real CPU {c} alone"),
            None => s += "; the controller shares the real CPUs (real-time, above the workers)",
        }
        s
    }
}

/// The real CPUs to run on: `asked` (a cpulist) or every allowed one;
/// refused, with the reason, if `asked` is empty or names a CPU outside
/// `allowed`.
pub fn real_cpus(asked: Option<&str>, allowed: &CpuSet) -> Result<CpuSet, String> {
    let Some(text) = asked else { return Ok(allowed.clone()) };
    let set: CpuSet = text.parse().map_err(|e| format!("--real-cpus {text}: not a CPU list: {e}"))?;
    if set.is_empty() {
        return Err(format!("--real-cpus {text}: names no CPU"));
    }
    let outside: CpuSet = set.iter().filter(|&c| !allowed.contains(c)).collect();
    if !outside.is_empty() {
        return Err(format!(
            "--real-cpus {text}: this process may not use CPU(s) {outside} (it may use {allowed}: its affinity mask)"
        ));
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use dyncore_sim::Scenario;

    use super::*;

    fn machine(name: &str, extra: &str) -> MachineSpec {
        let text = format!(
            "name = \"t\"\ntitle = \"t\"\n[[run]]\nlabel = \"a\"\nmachine = \"{name}\"\npolicy = \"chameleon\"\n{extra}\n[[run.workload]]\nprogram = \"gcc\"\n"
        );
        let s = Scenario::from_toml(&text).unwrap();
        s.validate().unwrap();
        MachineSpec::build(&s.runs[0]).unwrap()
    }

    fn scale(pm: u32) -> DutyScale {
        DutyScale { baseline: Duty::from_per_mille(pm).unwrap() }
    }

    #[test]
    fn a_pair_on_two_real_cpus_fits_one_each() {
        let m = machine("uniform", "cpus_per_node = 2\nmax_fuse = 2");
        let f = Fit::new(&m, &"0-1".parse().unwrap(), DutyScale::default(), 0.95);
        assert_eq!((f.real.clone(), f.oversubscribed, f.spare), (vec![0, 1], false, None));
        // CPU 0 can be the pair's representative at 75%; CPU 1 only native.
        assert_eq!(f.blocks.iter().map(|b| b.2).collect::<Vec<_>>(), [0.75, 0.5]);
        assert!(f.over_limit().is_empty());
        let f = Fit::new(&m, &"2,4,6".parse().unwrap(), DutyScale::default(), 0.95);
        assert_eq!((f.real.clone(), f.spare), (vec![2, 4], Some(6)));
    }

    #[test]
    fn two_runtime_cpus_per_real_cpu_fit_at_a_45_percent_baseline_only() {
        // The shipped 24-CPU dynamic machine on 16 real CPUs: blocks of 2.
        let m = machine("dynamic", "");
        let real: CpuSet = "0-15".parse().unwrap();
        // At 50%: an aligned pair, both native, asks for 100% > 95%.
        let f = Fit::new(&m, &real, DutyScale::default(), 0.95);
        assert!(f.oversubscribed, "{}", f.describe());
        assert_eq!(f.blocks.len(), 12);
        assert_eq!(f.blocks[0].2, 1.0, "a quad's representative at 100%, or both native at 50%");
        // At 45%: 90% either way; CPU 15 is left for the controller.
        let f = Fit::new(&m, &real, scale(450), 0.95);
        assert!(!f.oversubscribed, "{}", f.describe());
        assert!(f.blocks.iter().all(|b| b.2 <= 0.9 + 1e-9), "{:?}", f.blocks);
        assert_eq!((f.real[0], f.real[1], f.real[23], f.spare), (0, 0, 11, Some(12)));
        // On 2 real CPUs nothing fits.
        assert!(Fit::new(&m, &"0-1".parse().unwrap(), scale(450), 0.95).oversubscribed);
    }

    #[test]
    fn a_quad_alone_on_its_real_cpus_is_over_the_real_time_limit_not_oversubscribed() {
        let m = machine("uniform", "");
        let f = Fit::new(&m, &"0-3".parse().unwrap(), DutyScale::default(), 0.95);
        assert!(!f.oversubscribed);
        assert_eq!(f.over_limit(), [(0, 1.0)]);
    }

    #[test]
    fn real_cpus_outside_the_mask_are_refused() {
        let allowed: CpuSet = "0-1".parse().unwrap();
        assert_eq!(real_cpus(None, &allowed).unwrap(), allowed);
        assert_eq!(real_cpus(Some("1"), &allowed).unwrap(), "1".parse().unwrap());
        let e = real_cpus(Some("0-7"), &allowed).unwrap_err();
        assert!(e.contains("CPU(s) 2-7") && e.contains("affinity mask"), "{e}");
        assert!(real_cpus(Some("x"), &allowed).is_err());
    }
}
