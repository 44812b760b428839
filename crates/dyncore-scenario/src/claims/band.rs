//! A `≈` check's band: the paper's printed precision, a chart's tick, or
//! the paper's own "about" (the parent module's docs, "Bands"). Split from
//! `claims.rs`; re-exported there.

use super::*;

/// How wide a `≈` is (module docs, "Bands").
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Band {
    /// Printed in the text or a table: `half_unit` is half a unit of the
    /// last printed digit, in the value's unit (for a value, at least
    /// [`PRINTED_FLOOR`] of it).
    Printed { half_unit: f64 },
    /// Read off a chart with this tick spacing (the metric's unit): half a
    /// tick.
    Chart { tick: f64 },
    /// The paper says "about" (`quote`): a fraction of the value (a value
    /// or a figure), or points (a change).
    About { quote: String, width: f64 },
    /// A change computed from printed values (`from` says which): their
    /// printed precision carried through, in points.
    Derived { from: String, width: f64 },
}

/// A `[[paper]]` entry's band fields, as every scenario kind has them.
#[derive(Debug, Clone, Copy, Default)]
pub struct BandFields<'a> {
    /// The paper's digits, where the value's shortest form loses them
    /// ("1.50", or "7.9" for 7900 Mbps printed as 7.9 Gbps).
    pub printed: Option<&'a str>,
    pub tick: Option<f64>,
    pub about: Option<&'a str>,
    pub derived: Option<&'a str>,
    pub band_pct: Option<f64>,
    pub tolerance_pts: Option<f64>,
}

impl Band {
    /// The band of an entry whose target is `target` (its value, or its
    /// change in percent), from its fields (validated by [`check_form`]).
    pub fn of(target: f64, f: BandFields<'_>) -> Band {
        if let Some(tick) = f.tick {
            return Band::Chart { tick };
        }
        if let Some(q) = f.about {
            let width = f.band_pct.map(|p| p / 100.0).or(f.tolerance_pts).unwrap_or(0.0);
            return Band::About { quote: q.to_string(), width };
        }
        if let Some(d) = f.derived {
            return Band::Derived { from: d.to_string(), width: f.tolerance_pts.unwrap_or(0.0) };
        }
        let half_unit = match f.printed.and_then(|p| p.trim().parse::<f64>().ok().map(|v| (p, v))) {
            Some((p, v)) if v != 0.0 => printed_digits_half_unit(p) * (target / v).abs(),
            Some((p, _)) => printed_digits_half_unit(p),
            None => printed_half_unit(target),
        };
        Band::Printed { half_unit }
    }

    /// The half-width around the paper's `value` (a value check).
    pub fn around(&self, value: f64) -> f64 {
        match self {
            Band::Printed { half_unit } => half_unit.max(PRINTED_FLOOR * value.abs()),
            Band::Chart { tick } => tick / 2.0,
            Band::About { width, .. } | Band::Derived { width, .. } => width * value.abs(),
        }
    }

    /// The half-width, in points, around a change.
    pub fn around_change(&self) -> f64 {
        match self {
            Band::Printed { half_unit } => *half_unit,
            Band::Chart { tick } => tick / 2.0,
            Band::About { width, .. } | Band::Derived { width, .. } => *width,
        }
    }

    /// "printed", "half a chart tick of 0.2", "\"approximately 70%\"".
    pub(super) fn describe(&self) -> String {
        match self {
            Band::Printed { .. } => "printed".into(),
            Band::Chart { tick } => format!("half a chart tick of {}", fmt_num(*tick)),
            Band::About { quote, .. } => format!("\"{quote}\""),
            Band::Derived { from, .. } => format!("from {from}"),
        }
    }
}

/// Half a unit of the last digit of `digits` as written: 0.005 for "1.50".
pub(super) fn printed_digits_half_unit(digits: &str) -> f64 {
    let decimals = digits.trim().split_once('.').map_or(0, |(_, d)| d.len()) as i32;
    0.5 * 10f64.powi(-decimals)
}
