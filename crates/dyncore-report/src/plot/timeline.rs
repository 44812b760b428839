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

/// Where things go, in pixels: plot columns `x0..x1` over the x ticks,
/// the value axis, and the row of each event label (from `labels_top`).
struct Layout {
    x0: i32,
    x1: i32,
    x_ticks: Ticks,
    axis: YAxis,
    rows: Vec<(i32, usize)>,
    labels_top: i32,
}

const EVENT_ROW: i32 = 18;

impl Layout {
    fn x(&self, x: f64) -> i32 {
        let f = (x - self.x_ticks.lo()) / (self.x_ticks.hi() - self.x_ticks.lo());
        (f64::from(self.x0) + f * f64::from(self.x1 - self.x0)).round() as i32
    }
}

impl Timeline {
    fn layout(&self, w: i32, h: i32, legend_bottom: i32) -> Layout {
        let steps = self.xs.len().saturating_sub(1);
        let total = |i: usize| self.series.iter().map(|(_, v)| v.get(i).copied().unwrap_or(0.0)).sum::<f64>();
        // Headroom over the tallest stack (or the capacity) so its line is not the frame.
        let capacity = self.capacity.as_ref().map_or(0.0, |c| c.0);
        let top_value = (0..steps).map(total).fold(capacity, f64::max).max(1.0) * 1.08;
        let (xlo, xhi) = (self.xs.first().copied().unwrap_or(0.0), self.xs.last().copied().unwrap_or(1.0));
        let bottom = h - MARGIN - 26 - 8 - 20;
        // The left edge depends on the tick labels, the event rows on the
        // left edge: lay out with a provisional axis first.
        let mut l = Layout {
            x0: 0,
            x1: w - MARGIN - 8,
            x_ticks: Ticks::linear(xlo.min(0.0), xhi.max(xlo + 1e-9), 8),
            axis: YAxis { ticks: Ticks::whole(0.0, top_value, 10), top: legend_bottom, bottom },
            rows: Vec::new(),
            labels_top: legend_bottom + 6,
        };
        let title_w = 20 * y_title_lines(&self.y_label, bottom - legend_bottom - 40);
        l.x0 = MARGIN + title_w + 10 + l.axis.label_width() + 10;
        l.rows = self.event_rows(|x| l.x(x));
        let n_rows = l.rows.iter().map(|r| r.1 as i32 + 1).max().unwrap_or(0);
        l.axis.top = l.labels_top + EVENT_ROW * n_rows + 6;
        l
    }

    fn draw_stack<DB: DrawingBackend>(&self, area: &Area<DB>, l: &Layout) -> Result<()> {
        let mut base = vec![0.0; self.xs.len().saturating_sub(1)];
        for (si, (_, vals)) in self.series.iter().enumerate() {
            let color = PALETTE[si % PALETTE.len()];
            for (i, (b, span)) in base.iter_mut().zip(self.xs.windows(2)).enumerate() {
                let v = vals.get(i).copied().unwrap_or(0.0);
                if v > 0.0 {
                    let corners = [(l.x(span[0]), l.axis.y(*b + v)), (l.x(span[1]), l.axis.y(*b))];
                    ok(area.draw(&Rectangle::new(corners, color.filled())))?;
                    // A white edge between stacked blocks keeps equal colours apart.
                    ok(area.draw(&Rectangle::new(corners, WHITE.stroke_width(1))))?;
                }
                *b += v;
            }
        }
        Ok(())
    }

    fn draw_events<DB: DrawingBackend>(&self, area: &Area<DB>, l: &Layout) -> Result<()> {
        for ((_, label), &(px, row)) in self.events.iter().zip(&l.rows) {
            let y = l.labels_top + EVENT_ROW * row as i32;
            dotted_vline(area, px, y + 16, l.axis.bottom, MUTED.stroke_width(1))?;
            text(area, label, (px, y), EVENT_PX, INK, (HPos::Center, VPos::Top))?;
        }
        Ok(())
    }

    fn draw_x_axis<DB: DrawingBackend>(&self, area: &Area<DB>, l: &Layout) -> Result<()> {
        let bottom = l.axis.bottom;
        for &v in &l.x_ticks.values {
            let x = l.x(v);
            ok(area.draw(&PathElement::new(vec![(x, bottom), (x, bottom + 5)], INK.stroke_width(1))))?;
            text(area, &l.x_ticks.label(v), (x, bottom + 8), TICK_PX, INK, (HPos::Center, VPos::Top))?;
        }
        ok(area.draw(&PathElement::new(vec![(l.x0, bottom), (l.x1, bottom)], INK.stroke_width(1))))?;
        let mid = (l.x0 + l.x1) / 2;
        text(area, &self.x_label, (mid, bottom + 8 + 20 + 8), AXIS_PX, INK, (HPos::Center, VPos::Top))
    }
}

impl super::Chart for Timeline {
    fn draw<DB: DrawingBackend>(&self, area: &Area<DB>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (w, h, legend_bottom) = begin(area, &self.title, &self.subtitle, &self.legend_entries())?;
        let l = self.layout(w, h, legend_bottom);
        l.axis.draw(area, l.x0, l.x1)?;
        let title_lines = y_title_lines(&self.y_label, l.axis.bottom - l.axis.top);
        y_title(area, &self.y_label, MARGIN + 20 * title_lines, l.axis.top, l.axis.bottom)?;
        self.draw_stack(area, &l)?;
        if let Some((cap, _)) = &self.capacity {
            dashed_hline(area, l.x0, l.x1, l.axis.y(*cap), INK.stroke_width(2))?;
        }
        self.draw_events(area, &l)?;
        self.draw_x_axis(area, &l)
    }
}
