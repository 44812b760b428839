//! A line chart over a swept field: for each line, its median as a line
//! with markers and its min–max range as a translucent band, in one or
//! more panels stacked on one x axis (each panel a figure on its own value
//! axis). The x axis is categorical: the field's values in the sweep file's
//! order, evenly spaced (a tax rate from 0.01 to 100 reads as its steps).
//! The legend sits above the plots, as in the bar figures.
//!
//! **Invariants:** every line has one entry per x value (`None`: nothing
//! there, the line and band break); `lo <= median <= hi` where all are set.

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::PALETTE;
use super::axis::Ticks;
use super::frame::*;
use super::text::text_width;

/// One line: the median at each x, and the range its band covers.
#[derive(Debug, Clone, PartialEq)]
pub struct BandLine {
    pub label: String,
    pub median: Vec<Option<f64>>,
    pub lo: Vec<Option<f64>>,
    pub hi: Vec<Option<f64>>,
}

/// One panel: a figure's lines on its own value axis.
#[derive(Debug, Clone, PartialEq)]
pub struct BandPanel {
    /// The value axis's title: the quantity and its unit.
    pub y_title: String,
    pub lines: Vec<BandLine>,
}

/// The chart (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct BandChart {
    pub title: String,
    pub subtitle: String,
    pub x_title: String,
    pub x_labels: Vec<String>,
    pub panels: Vec<BandPanel>,
    /// What the band is, for the legend ("min–max over seeds").
    pub band_label: String,
}

const PANEL_PX: u32 = 300;

impl super::Chart for BandChart {
    fn size(&self) -> (u32, u32) {
        (1000, 170 + PANEL_PX * self.panels.len().max(1) as u32)
    }

    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        self.draw_all(root)
    }
}

impl BandChart {
    /// The labels every panel shares (from the first panel's lines).
    fn legend(&self) -> Vec<(Key, String)> {
        let mut e: Vec<(Key, String)> = self.panels.first().map_or_else(Vec::new, |p| {
            p.lines
                .iter()
                .enumerate()
                .map(|(i, l)| (Key::Swatch(PALETTE[i % PALETTE.len()]), l.label.clone()))
                .collect()
        });
        e.push((Key::Swatch(RGBColor(200, 200, 200)), self.band_label.clone()));
        e
    }

    fn draw_all<DB: DrawingBackend>(&self, area: &Area<DB>) -> Result<()> {
        let (w, h, top) = begin(area, &self.title, &self.subtitle, &self.legend())?;
        let label_room = 46 + 20;
        let n = self.panels.len().max(1) as i32;
        let each = (h - top - label_room - MARGIN) / n;
        // One left edge for all panels: the widest tick labels and a title.
        let axes: Vec<YAxis> = self
            .panels
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let (lo, hi) = range(p);
                let t = top + i as i32 * each + 12;
                YAxis { ticks: Ticks::linear(lo, hi, 5), top: t, bottom: t + each - 24 }
            })
            .collect();
        let widest = axes.iter().map(YAxis::label_width).max().unwrap_or(0);
        let x0 = MARGIN + 48 + widest + 12;
        let x1 = w - MARGIN - 10;
        for (p, axis) in self.panels.iter().zip(&axes) {
            y_title(area, &p.y_title, x0 - widest - 12, axis.top, axis.bottom)?;
            axis.draw(area, x0, x1)?;
            self.draw_lines(area, p, axis, (x0, x1))?;
        }
        let bottom = axes.last().map_or(top, |a| a.bottom);
        let k = self.x_labels.len().max(1);
        let step = f64::from(x1 - x0) / k as f64;
        let size =
            if self.x_labels.iter().all(|l| text_width(l, TICK_PX) < step - 6.0) { TICK_PX } else { 11.0 };
        for (i, l) in self.x_labels.iter().enumerate() {
            let x = (f64::from(x0) + step * (i as f64 + 0.5)).round() as i32;
            ok(area.draw(&PathElement::new(vec![(x, bottom), (x, bottom + 5)], INK.stroke_width(1))))?;
            text(area, l, (x, bottom + 8), size, INK, (HPos::Center, VPos::Top))?;
        }
        ok(area.draw(&PathElement::new(vec![(x0, bottom), (x1, bottom)], INK.stroke_width(1))))?;
        text(area, &self.x_title, ((x0 + x1) / 2, bottom + 32), AXIS_PX, INK, (HPos::Center, VPos::Top))?;
        Ok(())
    }

    fn draw_lines<DB: DrawingBackend>(
        &self,
        area: &Area<DB>,
        p: &BandPanel,
        axis: &YAxis,
        (x0, x1): (i32, i32),
    ) -> Result<()> {
        let k = self.x_labels.len().max(1);
        let step = f64::from(x1 - x0) / k as f64;
        let x = |i: usize| (f64::from(x0) + step * (i as f64 + 0.5)).round() as i32;
        for (li, line) in p.lines.iter().enumerate() {
            let color = PALETTE[li % PALETTE.len()];
            // Bands and lines break where a value is missing.
            for run in runs(line) {
                let mut band: Vec<(i32, i32)> =
                    run.iter().map(|&i| (x(i), axis.y(line.hi[i].unwrap_or(0.0)))).collect();
                band.extend(run.iter().rev().map(|&i| (x(i), axis.y(line.lo[i].unwrap_or(0.0)))));
                if run.len() > 1 {
                    ok(area.draw(&Polygon::new(band, color.mix(0.18).filled())))?;
                } else {
                    let i = run[0];
                    let (a, b) = (axis.y(line.lo[i].unwrap_or(0.0)), axis.y(line.hi[i].unwrap_or(0.0)));
                    ok(area.draw(&Rectangle::new([(x(i) - 4, a), (x(i) + 4, b)], color.mix(0.18).filled())))?;
                }
                let pts: Vec<(i32, i32)> =
                    run.iter().filter_map(|&i| line.median[i].map(|v| (x(i), axis.y(v)))).collect();
                ok(area.draw(&PathElement::new(pts.clone(), color.stroke_width(2))))?;
                for pt in pts {
                    ok(area.draw(&Circle::new(pt, 4, color.filled())))?;
                }
            }
        }
        Ok(())
    }
}

/// The value range of a panel (lo to hi over every line), 0 included when
/// every value is positive and the range reaches within half of it.
fn range(p: &BandPanel) -> (f64, f64) {
    let all = || p.lines.iter().flat_map(|l| l.lo.iter().chain(&l.hi).chain(&l.median).flatten().copied());
    let lo = all().fold(f64::INFINITY, f64::min);
    let hi = all().fold(f64::NEG_INFINITY, f64::max);
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    let lo = if lo > 0.0 && lo < hi / 2.0 { 0.0 } else { lo };
    if hi - lo < 1e-12 { (lo - 0.5 * lo.abs().max(1.0), hi + 0.5 * hi.abs().max(1.0)) } else { (lo, hi) }
}

/// The stretches of x indices where a line has its median and range.
fn runs(line: &BandLine) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut cur = Vec::new();
    for i in 0..line.median.len() {
        if line.median[i].is_some() && line.lo[i].is_some() && line.hi[i].is_some() {
            cur.push(i);
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_band_chart_renders_and_breaks_where_values_are_missing() {
        let line = BandLine {
            label: "a".into(),
            median: vec![Some(1.0), None, Some(2.0), Some(3.0)],
            lo: vec![Some(0.5), None, Some(1.5), Some(2.5)],
            hi: vec![Some(1.5), None, Some(2.5), Some(3.5)],
        };
        assert_eq!(runs(&line), vec![vec![0], vec![2, 3]]);
        let chart = BandChart {
            title: "t".into(),
            subtitle: "s".into(),
            x_title: "x".into(),
            x_labels: vec!["0.01".into(), "1".into(), "10".into(), "100".into()],
            panels: vec![BandPanel { y_title: "speedup".into(), lines: vec![line] }],
            band_label: "min–max over seeds".into(),
        };
        let d = tempfile::tempdir().unwrap();
        crate::plot::write_chart(&d.path().join("band"), &chart).unwrap();
        assert!(std::fs::metadata(d.path().join("band.png")).unwrap().len() > 1000);
        assert!(d.path().join("band.svg").exists());
    }
}
