//! A network-stack scenario's claims against its [`RunRow`]s: each
//! `[[paper]]` entry's figures (a run's metric over the seeds) resolved,
//! then evaluated by [`crate::claims`].

use dyncore_core::placement::ComponentKind;

use super::run::RunRow;
use super::scenario::{NetPaper, NetScenario, NetSide};
use crate::claims::{Band, Claims, Entry, Observed, Operand, Provenance, assemble};

/// What the code that computes metric `m` makes it from (see
/// [`crate::claims::Provenance`]): `resources` is the configured MHz of the
/// stack's cores over 4 × 1200 (`netstack::outcome`), and `chip_w` is
/// `PowerModel::newtos().chip_w` of the configured chip MHz, a closed form
/// fitted to Table 2's watts ([`super::run`]): no simulated run enters
/// either. Every other metric is measured from the simulated runs.
pub fn provenance(m: &str) -> Provenance {
    match m {
        "resources" => Provenance::Input,
        "chip_w" => Provenance::Input,
        _ => Provenance::Simulated,
    }
}

/// Why metric `m` has [`Provenance::Input`], for the loader's refusal.
pub fn input_reason(m: &str) -> String {
    match m {
        "resources" => {
            "`resources` is the configured MHz of the stack's cores over 4800, a scenario input".into()
        }
        "chip_w" => "`chip_w` is a closed form of the configured chip MHz, fitted to Table 2's watts".into(),
        _ => format!("`{m}` is computed from the scenario's inputs alone"),
    }
}

/// The metric `m` of `row` over the seeds.
fn metric_of(row: &RunRow, m: &str) -> Result<Observed, String> {
    let none = || {
        format!(
            "run `{}` has no {m} (a layout by hand has no energy; a policy run no utilisation or chip)",
            row.label
        )
    };
    match m {
        "mbps" => Ok(row.mbps.clone()),
        "power_w" => Ok(row.power_w.clone()),
        "resources" => Ok(Observed::one(row.resources)),
        "chip_w" => row.chip_w.map(Observed::one).ok_or_else(none),
        "normalised_utilisation" => row.normalised_utilisation.clone().ok_or_else(none),
        "energy_j" => row.energy_j.clone().ok_or_else(none),
        _ => {
            let k: ComponentKind = m
                .strip_prefix("busy.")
                .and_then(|c| c.parse().ok())
                .ok_or_else(|| format!("no metric `{m}`"))?;
            row.busy
                .iter()
                .find(|(c, _)| *c == k)
                .map(|(_, b)| b.clone())
                .ok_or_else(|| format!("{k} is not placed by hand in run `{}`", row.label))
        }
    }
}

fn observe(rows: &[RunRow], run: &str, metric: &str) -> Operand {
    let label = format!("{metric} of {run}");
    let observed = rows
        .iter()
        .find(|r| r.label == run)
        .ok_or_else(|| format!("no run `{run}`"))
        .and_then(|r| metric_of(r, metric));
    Operand { label, observed, provenance: provenance(metric) }
}

fn side(rows: &[RunRow], p: &NetPaper, o: &NetSide) -> Operand {
    observe(rows, o.run.as_deref().unwrap_or(&p.run), o.metric.as_deref().unwrap_or(&p.metric))
}

/// Every claim of `sc` against `rows` (from [`super::run::run_scenario`]).
pub fn check(sc: &NetScenario, rows: &[RunRow]) -> Claims {
    let entries = sc
        .paper
        .iter()
        .map(|p| Entry {
            subject: observe(rows, &p.run, &p.metric),
            relation: p.relation,
            value: p.value,
            than: p.than.as_ref().map(|o| side(rows, p, o)),
            change_pct: p.change_pct,
            from: p.from.as_ref().map(|o| side(rows, p, o)),
            band: Band::of(p.value.or(p.change_pct).unwrap_or(0.0), p.band_fields()),
            claim: p.claim.clone(),
            kind: p.kind,
            basis: p.basis.clone().unwrap_or_default(),
            source: p.source.clone(),
            note: p.note.clone(),
        })
        .collect();
    assemble(&sc.expect, entries)
}
