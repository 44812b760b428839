//! CPUs per program over time (Chameleon's Figure 8): stacked steps, the
//! CPUs available as a dashed line, and the events that changed the
//! allocation as dotted verticals labelled above the plot.

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::PALETTE;
use super::axis::Ticks;
use super::frame::*;
use super::text::text_width;

#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub title: String,
    pub subtitle: String,
    pub x_label: String,
    pub y_label: String,
    /// Step boundaries: value `i` of a series holds over `xs[i]..xs[i + 1]`.
    pub xs: Vec<f64>,
    /// One value per step (`xs.len() - 1` of them) per series, stacked.
    pub series: Vec<(String, Vec<f64>)>,
    /// A dashed line across the plot (the CPUs available) and its legend text.
    pub capacity: Option<(f64, String)>,
    /// Vertical markers: (x, short label), e.g. (1.0, "(a) lbm starts").
    pub events: Vec<(f64, String)>,
}

const EVENT_PX: f64 = 13.0;

impl Timeline {
    fn legend_entries(&self) -> Vec<(Key, String)> {
        let mut e: Vec<(Key, String)> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (Key::Swatch(PALETTE[i % PALETTE.len()]), name.clone()))
            .collect();
        if let Some((_, label)) = &self.capacity {
            e.push((Key::Dashed(INK), label.clone()));
        }
        if !self.events.is_empty() {
            e.push((Key::Dotted, "program starts and exits".into()));
        }
        e
    }

    /// Event labels in rows so that no two overlap: (x px, row) per event.
    fn event_rows(&self, x_px: impl Fn(f64) -> i32) -> Vec<(i32, usize)> {
        let mut row_ends: Vec<i32> = Vec::new();
        self.events
            .iter()
            .map(|(x, label)| {
                let px = x_px(*x);
                let half = (text_width(label, EVENT_PX) / 2.0).ceil() as i32 + 4;
                let row = row_ends.iter().position(|&end| end < px - half).unwrap_or(row_ends.len());
                if row == row_ends.len() {
                    row_ends.push(0);
                }
                row_ends[row] = px + half;
                (px, row)
            })
            .collect()
    }
}

impl super::Chart for Timeline {
    fn draw<DB: DrawingBackend>(&self, area: &Area<DB>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        ok(area.fill(&WHITE))?;
        let (w, h) = area.dim_in_pixel();
        let (w, h) = (w as i32, h as i32);
        let y = header(area, &self.title, &self.subtitle)?;
        let legend_bottom = legend(area, &self.legend_entries(), y)?;
        let steps = self.xs.len().saturating_sub(1);
        let total = |i: usize| self.series.iter().map(|(_, v)| v.get(i).copied().unwrap_or(0.0)).sum::<f64>();
        // Headroom over the tallest stack (or the capacity) so its line is not the frame.
        let top_value =
            (0..steps).map(total).fold(self.capacity.as_ref().map_or(0.0, |c| c.0), f64::max).max(1.0) * 1.08;
        let (xlo, xhi) = (self.xs.first().copied().unwrap_or(0.0), self.xs.last().copied().unwrap_or(1.0));
        let x_ticks = Ticks::linear(xlo.min(0.0), xhi.max(xlo + 1e-9), 8);
        let bottom = h - MARGIN - 26 - 8 - 20;
        // The left edge depends on the tick labels, the event rows on the
        // left edge: lay out with a provisional axis first.
        let provisional = YAxis { ticks: Ticks::whole(0.0, top_value, 10), top: legend_bottom, bottom };
        let x0 = MARGIN
            + 20 * y_title_lines(&self.y_label, bottom - legend_bottom - 40)
            + 10
            + provisional.label_width()
            + 10;
        let x1 = w - MARGIN - 8;
        let x_px = |x: f64| {
            let f = (x - x_ticks.lo()) / (x_ticks.hi() - x_ticks.lo());
            (f64::from(x0) + f * f64::from(x1 - x0)).round() as i32
        };
        let rows = self.event_rows(x_px);
        let n_rows = rows.iter().map(|r| r.1 + 1).max().unwrap_or(0) as i32;
        let top = legend_bottom + 6 + 18 * n_rows + 6;
        let axis = YAxis { ticks: Ticks::whole(0.0, top_value, 10), top, bottom };
        axis.draw(area, x0, x1)?;
        y_title(area, &self.y_label, MARGIN + 20 * y_title_lines(&self.y_label, bottom - top), top, bottom)?;
        let mut base = vec![0.0; steps];
        for (si, (_, vals)) in self.series.iter().enumerate() {
            let color = PALETTE[si % PALETTE.len()];
            for (i, (b, span)) in base.iter_mut().zip(self.xs.windows(2)).enumerate() {
                let v = vals.get(i).copied().unwrap_or(0.0);
                if v > 0.0 {
                    let corners = [(x_px(span[0]), axis.y(*b + v)), (x_px(span[1]), axis.y(*b))];
                    ok(area.draw(&Rectangle::new(corners, color.filled())))?;
                    // A white edge between stacked blocks keeps equal colours apart.
                    ok(area.draw(&Rectangle::new(corners, WHITE.stroke_width(1))))?;
                }
                *b += v;
            }
        }
        if let Some((cap, _)) = &self.capacity {
            dashed_hline(area, x0, x1, axis.y(*cap), INK.stroke_width(2))?;
        }
        for ((_, label), (px, row)) in self.events.iter().zip(&rows) {
            dotted_vline(
                area,
                *px,
                legend_bottom + 6 + 18 * *row as i32 + 16,
                bottom,
                MUTED.stroke_width(1),
            )?;
            let ty = legend_bottom + 6 + 18 * *row as i32;
            text(area, label, (*px, ty), EVENT_PX, INK, (HPos::Center, VPos::Top))?;
        }
        for &v in &x_ticks.values {
            let x = x_px(v);
            ok(area.draw(&PathElement::new(vec![(x, bottom), (x, bottom + 5)], INK.stroke_width(1))))?;
            text(area, &x_ticks.label(v), (x, bottom + 8), TICK_PX, INK, (HPos::Center, VPos::Top))?;
        }
        ok(area.draw(&PathElement::new(vec![(x0, bottom), (x1, bottom)], INK.stroke_width(1))))?;
        text(area, &self.x_label, ((x0 + x1) / 2, h - MARGIN - 20), AXIS_PX, INK, (HPos::Center, VPos::Top))?;
        Ok(())
    }
}
