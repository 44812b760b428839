//! The steps of an [`Arbiter`](super::Arbiter)'s start that stand alone:
//! its configuration checked, the mount table read, and what the run gets
//! beside its mechanism (its weight, the kernel's process events, the
//! controller's own CPU, the warden), each noted in the run's notes.

use std::path::Path;

use dyncore_core::{CpuId, CpuSet, Nanos};

use super::controller::Pinned;
use super::driver::Mech;
use super::procevents::ProcEvents;
use super::registry::Claim;
use super::warden::{Plan, Warden};
use super::{ArbiterConfig, ArbiterError};

/// Checks the configuration before anything is touched: CPUs given, none
/// twice, all allowed to this process; positive periods; a quota period the
/// kernel takes; a controller CPU outside the run's and allowed. Returns
/// the run's CPUs.
pub(super) fn validate(cfg: &ArbiterConfig) -> Result<CpuSet, ArbiterError> {
    let bad = |m: String| Err(ArbiterError::Config(m));
    if cfg.cpus.is_empty() {
        return bad("no CPUs given".into());
    }
    let set: CpuSet = cfg.cpus.iter().copied().collect();
    if set.len() != cfg.cpus.len() {
        return bad(format!(
            "CPUs {:?} name a CPU twice: each runtime CPU needs a real CPU of its own",
            cfg.cpus
        ));
    }
    if cfg.tick_ns == 0 || cfg.poll_ns == 0 || cfg.safety_poll_ns == 0 || cfg.load_sample_ns == 0 {
        return bad("the tick, discovery and load periods must be positive".into());
    }
    if !(1_000..=1_000_000).contains(&cfg.quota_period_us) {
        return bad(format!(
            "a quota period of {} µs is outside the kernel's 1 ms to 1 s",
            cfg.quota_period_us
        ));
    }
    crate::affinity::check_allowed(set.iter()).map_err(|e| ArbiterError::Config(e.to_string()))?;
    if let Some(c) = cfg.controller_cpu {
        if set.contains(c) {
            return bad(format!("the controller's CPU {c} is one of the run's CPUs {set}"));
        }
        crate::affinity::check_allowed([c]).map_err(|e| ArbiterError::Config(e.to_string()))?;
    }
    Ok(set)
}

/// The mount table ([`SystemPaths::mounts`](super::SystemPaths)), the
/// probe's input; an error names the file.
pub(super) fn read_mounts(path: &Path) -> Result<String, ArbiterError> {
    std::fs::read_to_string(path).map_err(|e| {
        ArbiterError::Io(std::io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display())))
    })
}

/// Gives the run's groups `weight`, if asked and they have one (affinity
/// only has none: the notes say so, with how affinity holds threads).
pub(super) fn apply_weight(
    mech: &Mech,
    weight: Option<u32>,
    notes: &mut Vec<String>,
) -> Result<(), ArbiterError> {
    match (mech, weight) {
        (Mech::Affinity(a), w) => {
            notes.push(a.hold_note().to_string());
            if w.is_some() {
                notes.push("the run's weight is not applied with affinity only".into());
            }
        }
        (Mech::Groups(cg), Some(w)) => notes.push(format!("the run's weight: {}", cg.set_weight(w)?)),
        (Mech::Groups(_), None) => {}
    }
    Ok(())
}

/// The kernel's process events, if asked for and permitted, and the full
/// discovery pass's period that goes with them: `safety_poll_ns` with
/// events, `poll_ns` without. The notes say which.
pub(super) fn open_events(cfg: &ArbiterConfig, notes: &mut Vec<String>) -> (Option<ProcEvents>, Nanos) {
    let events = if cfg.events {
        ProcEvents::open()
    } else {
        Err(std::io::Error::other("process events not asked for"))
    };
    let poll_period_ns = match &events {
        Ok(_) => {
            notes.push(format!(
                "threads followed by the kernel's process events, with a full pass every {} ms",
                cfg.safety_poll_ns / 1_000_000
            ));
            cfg.safety_poll_ns
        }
        Err(e) => {
            notes.push(format!("threads found by a full pass every {} ms ({e})", cfg.poll_ns / 1_000_000));
            cfg.poll_ns
        }
    };
    (events.ok(), poll_period_ns)
}

/// Pins the controller (this thread) to `cpu`, if one is given; the notes
/// say where the controller runs.
pub(super) fn pin_controller(
    cpu: Option<CpuId>,
    notes: &mut Vec<String>,
) -> Result<Option<Pinned>, ArbiterError> {
    Ok(match cpu {
        Some(c) => {
            let p = Pinned::pin(c).map_err(ArbiterError::Io)?;
            notes.push(format!("the controller on real CPU {} alone", p.cpu()));
            Some(p)
        }
        None => {
            notes.push("the controller shares the CPUs it may use with the run".into());
            None
        }
    })
}

/// Forks the run's warden (module `warden`) with what it must clean up:
/// the run's groups and its claim. `None` if it could not be forked: the
/// notes say what that costs.
pub(super) fn start_warden(
    name: &str,
    claim: &Claim,
    mech: &Mech,
    notes: &mut Vec<String>,
) -> Option<Warden> {
    let plan = Plan {
        name: name.to_string(),
        v2: false,
        hierarchies: Vec::new(),
        claim: Some((claim.path().to_path_buf(), claim.fd())),
    };
    let plan = match mech {
        Mech::Groups(cg) => {
            let (v2, hierarchies) = cg.for_warden();
            Plan { v2, hierarchies, ..plan }
        }
        Mech::Affinity(_) => plan,
    };
    match Warden::start(&plan) {
        Ok(w) => Some(w),
        Err(e) => {
            notes.push(format!(
                "no warden ({e}): if dyncore is killed with SIGKILL, its commands run on until the next start"
            ));
            None
        }
    }
}
