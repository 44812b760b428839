//! Drawing pieces shared by the figure charts: the title block, a legend
//! laid out in rows above the plot (so it never covers data), a y axis with
//! round ticks and gridlines, dashed lines and markers. All in pixels.

use anyhow::{Result, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::axis::{Ticks, wrap};
use super::text::text_width;

pub type Area<DB> = DrawingArea<DB, Shift>;

/// Near-black for text and axes, grey for gridlines and secondary text.
pub const INK: RGBColor = RGBColor(33, 33, 33);
pub const MUTED: RGBColor = RGBColor(96, 96, 96);
pub const GRID: RGBColor = RGBColor(222, 222, 222);

pub const TITLE_PX: f64 = 22.0;
pub const SUBTITLE_PX: f64 = 14.0;
pub const LEGEND_PX: f64 = 15.0;
pub const TICK_PX: f64 = 14.0;
pub const AXIS_PX: f64 = 16.0;
pub const MARGIN: i32 = 16;

/// plotters' errors carry the backend's error type; reports only need the text.
pub fn ok<T, E: std::fmt::Debug>(r: Result<T, E>) -> Result<T> {
    r.map_err(|e| anyhow!("{e:?}"))
}

pub fn text<DB: DrawingBackend>(
    area: &Area<DB>,
    s: &str,
    at: (i32, i32),
    size: f64,
    color: RGBColor,
    anchor: (HPos, VPos),
) -> Result<()> {
    let style = ("sans-serif", size).into_font().color(&color).pos(Pos::new(anchor.0, anchor.1));
    ok(area.draw(&Text::new(s.to_string(), at, style)))
}

/// Text reading bottom to top (a y-axis label), centred on `at`.
pub fn vertical_text<DB: DrawingBackend>(area: &Area<DB>, s: &str, at: (i32, i32), size: f64) -> Result<()> {
    let style = ("sans-serif", size)
        .into_font()
        .transform(FontTransform::Rotate270)
        .color(&INK)
        .pos(Pos::new(HPos::Center, VPos::Center));
    ok(area.draw(&Text::new(s.to_string(), at, style)))
}

/// A dashed line from `from` to `to`, horizontal or vertical.
fn dashes<DB: DrawingBackend>(
    area: &Area<DB>,
    from: (i32, i32),
    to: (i32, i32),
    (dash, gap): (i32, i32),
    style: ShapeStyle,
) -> Result<()> {
    let len = (to.0 - from.0).abs().max((to.1 - from.1).abs());
    let at = |d: i32| (from.0 + (to.0 - from.0).signum() * d, from.1 + (to.1 - from.1).signum() * d);
    let mut d = 0;
    while d < len {
        ok(area.draw(&PathElement::new(vec![at(d), at((d + dash).min(len))], style)))?;
        d += dash + gap;
    }
    Ok(())
}

/// A category label reading upwards, its end just below `top` (an x axis).
pub fn upright_text<DB: DrawingBackend>(area: &Area<DB>, s: &str, top: (i32, i32), size: f64) -> Result<()> {
    let style = ("sans-serif", size)
        .into_font()
        .transform(FontTransform::Rotate270)
        .color(&INK)
        .pos(Pos::new(HPos::Right, VPos::Center));
    ok(area.draw(&Text::new(s.to_string(), top, style)))
}

/// A horizontal dashed line from `x0` to `x1`.
pub fn dashed_hline<DB: DrawingBackend>(
    area: &Area<DB>,
    x0: i32,
    x1: i32,
    y: i32,
    style: ShapeStyle,
) -> Result<()> {
    dashes(area, (x0, y), (x1, y), (8, 5), style)
}

/// A vertical dotted line from `y0` to `y1`.
pub fn dotted_vline<DB: DrawingBackend>(
    area: &Area<DB>,
    x: i32,
    y0: i32,
    y1: i32,
    style: ShapeStyle,
) -> Result<()> {
    dashes(area, (x, y0), (x, y1), (3, 4), style)
}

/// The paper's value: a hollow diamond, visible on a bar and off it.
pub fn diamond<DB: DrawingBackend>(area: &Area<DB>, (x, y): (i32, i32), r: i32) -> Result<()> {
    let pts = vec![(x, y - r), (x + r, y), (x, y + r), (x - r, y)];
    ok(area.draw(&Polygon::new(pts.clone(), WHITE.filled())))?;
    let mut outline = pts;
    outline.push((x, y - r));
    ok(area.draw(&PathElement::new(outline, INK.stroke_width(2))))
}

/// The min-max range over seeds: a vertical line with caps.
pub fn whisker<DB: DrawingBackend>(area: &Area<DB>, x: i32, y_lo: i32, y_hi: i32, cap: i32) -> Result<()> {
    let s = INK.stroke_width(2);
    ok(area.draw(&PathElement::new(vec![(x, y_lo), (x, y_hi)], s)))?;
    ok(area.draw(&PathElement::new(vec![(x - cap, y_lo), (x + cap, y_lo)], s)))?;
    ok(area.draw(&PathElement::new(vec![(x - cap, y_hi), (x + cap, y_hi)], s)))
}

/// What a legend entry shows before its text.
#[derive(Debug, Clone)]
pub enum Key {
    Swatch(RGBColor),
    Diamond,
    Whisker,
    Dashed(RGBColor),
    Dotted,
}

/// A white canvas with the title block and legend drawn: returns its width,
/// its height and the y below the legend, where the plots start.
pub fn begin<DB: DrawingBackend>(
    area: &Area<DB>,
    title: &str,
    subtitle: &str,
    entries: &[(Key, String)],
) -> Result<(i32, i32, i32)> {
    ok(area.fill(&WHITE))?;
    let (w, h) = area.dim_in_pixel();
    let y = header(area, title, subtitle)?;
    Ok((w as i32, h as i32, legend(area, entries, y)?))
}

/// Title, and a muted subtitle line under it; returns the y below them.
pub fn header<DB: DrawingBackend>(area: &Area<DB>, title: &str, subtitle: &str) -> Result<i32> {
    let (w, _) = area.dim_in_pixel();
    let mut y = MARGIN - 4;
    for line in wrap(title, TITLE_PX, f64::from(w) - 2.0 * f64::from(MARGIN)) {
        text(area, &line, (w as i32 / 2, y), TITLE_PX, INK, (HPos::Center, VPos::Top))?;
        y += 28;
    }
    if !subtitle.is_empty() {
        for line in wrap(subtitle, SUBTITLE_PX, f64::from(w) - 2.0 * f64::from(MARGIN)) {
            text(area, &line, (w as i32 / 2, y), SUBTITLE_PX, MUTED, (HPos::Center, VPos::Top))?;
            y += 19;
        }
    }
    Ok(y + 4)
}

/// Legend entries in centred rows from `y`; returns the y below the last row.
pub fn legend<DB: DrawingBackend>(area: &Area<DB>, entries: &[(Key, String)], y: i32) -> Result<i32> {
    let (w, _) = area.dim_in_pixel();
    let key_w = 22;
    let gap = 22;
    let widths: Vec<i32> =
        entries.iter().map(|(_, s)| key_w + 6 + text_width(s, LEGEND_PX).ceil() as i32).collect();
    // Greedy rows that fit the width.
    let mut rows: Vec<Vec<usize>> = vec![vec![]];
    let mut row_w = 0;
    for (i, &ew) in widths.iter().enumerate() {
        let row = rows.last_mut().expect("at least one row");
        if !row.is_empty() && row_w + gap + ew > w as i32 - 2 * MARGIN {
            rows.push(vec![i]);
            row_w = ew;
        } else {
            row_w += if row.is_empty() { ew } else { gap + ew };
            row.push(i);
        }
    }
    let mut y = y;
    for row in rows.iter().filter(|r| !r.is_empty()) {
        let total: i32 = row.iter().map(|&i| widths[i]).sum::<i32>() + gap * (row.len() as i32 - 1);
        let mut x = (w as i32 - total) / 2;
        let cy = y + 9;
        for &i in row {
            let (key, label) = &entries[i];
            draw_key(area, key, x, cy)?;
            text(area, label, (x + key_w + 6, cy), LEGEND_PX, INK, (HPos::Left, VPos::Center))?;
            x += widths[i] + gap;
        }
        y += 24;
    }
    Ok(y)
}

fn draw_key<DB: DrawingBackend>(area: &Area<DB>, key: &Key, x: i32, cy: i32) -> Result<()> {
    match key {
        Key::Swatch(c) => ok(area.draw(&Rectangle::new([(x + 3, cy - 7), (x + 19, cy + 7)], c.filled()))),
        Key::Diamond => diamond(area, (x + 11, cy), 7),
        Key::Whisker => whisker(area, x + 11, cy + 8, cy - 8, 5),
        Key::Dashed(c) => dashed_hline(area, x, x + 22, cy, c.stroke_width(2)),
        Key::Dotted => {
            ok(area.draw(&PathElement::new(vec![(x + 11, cy - 9), (x + 11, cy + 9)], MUTED.stroke_width(1))))
        }
    }
}

/// A vertical value axis mapped onto pixel rows `top..=bottom`.
#[derive(Debug, Clone)]
pub struct YAxis {
    pub ticks: Ticks,
    pub top: i32,
    pub bottom: i32,
}

impl YAxis {
    pub fn y(&self, v: f64) -> i32 {
        let (lo, hi) = (self.ticks.lo(), self.ticks.hi());
        let f = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
        (f64::from(self.bottom) - f * f64::from(self.bottom - self.top)).round() as i32
    }

    /// Width of the widest tick label.
    pub fn label_width(&self) -> i32 {
        self.ticks
            .values
            .iter()
            .map(|&v| text_width(&self.ticks.label(v), TICK_PX).ceil() as i32)
            .max()
            .unwrap_or(0)
    }

    /// Gridlines across `x0..x1`, tick labels right-aligned left of `x0`.
    pub fn draw<DB: DrawingBackend>(&self, area: &Area<DB>, x0: i32, x1: i32) -> Result<()> {
        for &v in &self.ticks.values {
            let y = self.y(v);
            let line = if v == 0.0 { INK.stroke_width(1) } else { GRID.stroke_width(1) };
            ok(area.draw(&PathElement::new(vec![(x0, y), (x1, y)], line)))?;
            ok(area.draw(&PathElement::new(vec![(x0 - 5, y), (x0, y)], INK.stroke_width(1))))?;
            text(area, &self.ticks.label(v), (x0 - 8, y), TICK_PX, INK, (HPos::Right, VPos::Center))?;
        }
        ok(area.draw(&PathElement::new(vec![(x0, self.top), (x0, self.bottom)], INK.stroke_width(1))))
    }
}

/// A y-axis title, wrapped to `height` and set bottom to top with its
/// lines ending at `x_right`; returns the width it took.
pub fn y_title<DB: DrawingBackend>(
    area: &Area<DB>,
    title: &str,
    x_right: i32,
    top: i32,
    bottom: i32,
) -> Result<i32> {
    let lines = wrap(title, AXIS_PX, f64::from(bottom - top - 8).max(60.0));
    let n = lines.len() as i32;
    for (i, line) in lines.iter().enumerate() {
        let x = x_right - (n - i as i32) * 20 + 10;
        vertical_text(area, line, (x, (top + bottom) / 2), AXIS_PX)?;
    }
    Ok(n * 20)
}

/// Lines a y-axis title needs for a plot `height` pixels tall.
pub fn y_title_lines(title: &str, height: i32) -> i32 {
    wrap(title, AXIS_PX, f64::from(height - 8).max(60.0)).len() as i32
}
