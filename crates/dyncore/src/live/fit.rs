//! Fit: which real CPU each runtime CPU of a scenario's machine runs on.
//!
//! A scenario names runtime CPUs only (its machine's CPUs, and `pin`
//! cpulists within them); the real CPUs come from `--real-cpus` (default:
//! every CPU this process may use), refused before anything starts when it
//! names a CPU the process may not use. A machine of N CPUs on R real CPUs:
//!
//! * N ≤ R: runtime CPU i runs alone on the i-th real CPU; a real CPU left
//!   over, if any, takes the controller (the thread that runs the policy),
//!   so that it disturbs no runtime CPU;
//! * N > R: the run still goes, the runtime CPUs dealt round-robin over
//!   the real ones, and every figure of the run is labelled
//!   OVERSUBSCRIBED: runtime CPUs sharing a real CPU take time from each
//!   other, so their duty cycles are no longer what the policy set, and
//!   such a figure is never counted as agreeing with the simulator.

use dyncore_core::{CpuId, CpuSet};

/// Where one run's runtime CPUs go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fit {
    /// Real CPU of each runtime CPU.
    pub real: Vec<CpuId>,
    pub oversubscribed: bool,
    /// A real CPU no runtime CPU uses, for the controller.
    pub spare: Option<CpuId>,
}

impl Fit {
    /// `cpus` runtime CPUs over the real CPUs `real` (not empty).
    pub fn new(cpus: usize, real: &CpuSet) -> Fit {
        let list: Vec<CpuId> = real.iter().collect();
        assert!(!list.is_empty(), "no real CPU to run on");
        Fit {
            real: (0..cpus).map(|i| list[i % list.len()]).collect(),
            oversubscribed: cpus > list.len(),
            spare: list.get(cpus).copied(),
        }
    }

    /// "runtime CPUs 0-1 on real CPUs 0, 1" / "... 4 runtime CPUs on 2 real CPUs (2 each)".
    pub fn describe(&self) -> String {
        let reals: Vec<String> = self.real.iter().map(|c| c.to_string()).collect();
        let mut s = format!("{} runtime CPU(s) on real CPU(s) {}", self.real.len(), reals.join(", "));
        if self.oversubscribed {
            let distinct: std::collections::BTreeSet<_> = self.real.iter().collect();
            s += &format!(
                " — OVERSUBSCRIBED: {} runtime CPUs share {} real CPUs",
                self.real.len(),
                distinct.len()
            );
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
    use super::*;

    #[test]
    fn runtime_cpus_are_dealt_over_the_real_ones() {
        let two: CpuSet = "0-1".parse().unwrap();
        let f = Fit::new(2, &two);
        assert_eq!((f.real.clone(), f.oversubscribed, f.spare), (vec![0, 1], false, None));
        let f = Fit::new(4, &two);
        assert_eq!((f.real.clone(), f.oversubscribed), (vec![0, 1, 0, 1], true));
        assert!(f.describe().contains("OVERSUBSCRIBED"));
        let f = Fit::new(2, &"2,4,6".parse().unwrap());
        assert_eq!((f.real.clone(), f.spare), (vec![2, 4], Some(6)));
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
