//! Axes that read: tick values at round numbers that cover the data and no
//! more, printed with as many decimals as the step needs (so whole numbers
//! print as "16", not "16.0"), and labels wrapped to the room they have.

use super::text::text_width;

/// Ticks of a linear axis: a round step (1, 2, 2.5 or 5 × 10^k) giving
/// about `target` intervals, from the last multiple of the step at or below
/// `lo` to the first at or above `hi`. The axis spans the first to the last.
#[derive(Debug, Clone, PartialEq)]
pub struct Ticks {
    pub values: Vec<f64>,
    /// Decimals that print every tick exactly (0 for whole steps).
    pub decimals: usize,
}

impl Ticks {
    pub fn linear(lo: f64, hi: f64, target: usize) -> Ticks {
        let (lo, hi) = if hi > lo { (lo, hi) } else { (lo, lo + 1.0) };
        let raw = (hi - lo) / target.max(1) as f64;
        let mag = 10f64.powf(raw.log10().floor());
        let (mantissa, extra) = [(1.0, 0), (2.0, 0), (2.5, 1), (5.0, 0), (10.0, 0)]
            .into_iter()
            .find(|(m, _)| m * mag >= raw)
            .unwrap_or((10.0, 0));
        let step = mantissa * mag;
        let decimals = (-(step.log10().floor()) as i64 + extra).max(0) as usize;
        // Work in whole steps so the printed values carry no rounding noise.
        let (first, last) = ((lo / step + 1e-9).floor() as i64, (hi / step - 1e-9).ceil() as i64);
        Ticks { values: (first..=last).map(|k| k as f64 * step).collect(), decimals }
    }

    /// Whole-number ticks only (counts such as CPUs): the step is at least 1.
    pub fn whole(lo: f64, hi: f64, target: usize) -> Ticks {
        let t = Ticks::linear(lo, hi, target);
        if t.decimals == 0 {
            return t;
        }
        let (first, last) = (lo.floor() as i64, hi.ceil().max(lo.floor() + 1.0) as i64);
        Ticks { values: (first..=last).map(|k| k as f64).collect(), decimals: 0 }
    }

    pub fn lo(&self) -> f64 {
        self.values[0]
    }

    pub fn hi(&self) -> f64 {
        self.values[self.values.len() - 1]
    }

    pub fn label(&self, v: f64) -> String {
        let s = format!("{v:.*}", self.decimals);
        // "-0" from a tiny negative rounding is "0".
        if s.trim_start_matches('-').chars().all(|c| c == '0' || c == '.') {
            s.trim_start_matches('-').into()
        } else {
            s
        }
    }
}

/// `text` broken at spaces into lines no wider than `max_px` at `size`
/// (a single word wider than that keeps a line of its own).
pub fn wrap(text: &str, size: f64, max_px: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        match lines.last_mut() {
            Some(line) if text_width(&format!("{line} {word}"), size) <= max_px => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    if lines.is_empty() {
        lines.push(String::new());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_cover_the_data_with_round_steps() {
        // Figure 4's data tops out at 24: the axis ends at 25, not 35.
        let t = Ticks::linear(0.0, 24.0, 5);
        assert_eq!(t.values, vec![0.0, 5.0, 10.0, 15.0, 20.0, 25.0]);
        assert_eq!(t.label(20.0), "20");
        let t = Ticks::linear(0.0, 1.7, 5);
        assert_eq!(t.values.last(), Some(&2.0));
        assert_eq!(t.decimals, 1);
        assert_eq!(t.label(0.5), "0.5");
        let t = Ticks::linear(0.0, 2.3, 4);
        assert!((t.values[1] - 0.5).abs() < 1e-12 || (t.values[1] - 1.0).abs() < 1e-12, "{t:?}");
        let t = Ticks::linear(0.0, 0.23, 5);
        assert_eq!(t.decimals, 2);
        assert_eq!(t.label(0.05), "0.05");
        // Only the needed decimals: a 2.5 step needs one more.
        let t = Ticks::linear(0.0, 10.0, 4);
        assert_eq!(t.label(t.values[1]), "2.5");
    }

    #[test]
    fn whole_ticks_for_counts() {
        let t = Ticks::whole(0.0, 3.0, 5);
        assert_eq!(t.values, vec![0.0, 1.0, 2.0, 3.0]);
        assert_eq!(t.label(2.0), "2");
        let t = Ticks::whole(0.0, 10.0, 5);
        assert!(t.values.iter().all(|v| v.fract() == 0.0) && t.hi() >= 10.0, "{t:?}");
    }

    #[test]
    fn labels_wrap_at_spaces() {
        let lines = wrap("3* (no notification) with a long tail", 15.0, 120.0);
        assert!(lines.len() >= 2, "{lines:?}");
        assert!(lines.iter().all(|l| text_width(l, 15.0) <= 120.0 || !l.contains(' ')), "{lines:?}");
        assert_eq!(lines.join(" "), "3* (no notification) with a long tail");
        assert_eq!(wrap("gcc", 15.0, 120.0), vec!["gcc"]);
    }
}
