//! A grouped bar figure as a paper prints it: one or more panels, each with
//! its own value axis; in each, a group of bars per category, one bar per
//! series (the median over seeds), a whisker for the min-max range over
//! seeds, a hollow diamond at the paper's value, and a dashed reference line
//! (1 = the baseline, or the ideal) where the figure has one. The legend sits
//! above the plots, so it never covers a bar.

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::PALETTE;
use super::axis::{Ticks, wrap};
use super::frame::*;
use super::text::text_width;

/// One bar: its height, and the range a whisker shows (equal = no whisker).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BarValue {
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

/// A horizontal line at a value every bar is read against.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    /// The line's value (the highest of `over`, when it is given).
    pub value: f64,
    /// Legend text, e.g. "1 = one baseline CPU".
    pub label: String,
    /// Where the reference differs between categories (Figure 4's ideal is
    /// 24 on the 24-CPU runs, 18 and 15 on the smaller ACMP ones): a dashed
    /// segment over each listed category at its own value, and nothing over
    /// the others. Empty: one line across the panel at `value`.
    pub over: Vec<(usize, f64)>,
}

/// One panel: a subset of the categories and series on its own axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Shown above the panel when the figure has several (e.g. "N-Queen").
    pub title: String,
    pub categories: Vec<usize>,
    pub series: Vec<usize>,
    pub reference: Option<Reference>,
    /// The panel's own value-axis title, where panels stacked in rows
    /// measure different things (NewtOS: Gbit/s over a busy fraction);
    /// none: the figure's `y_label`.
    pub y_label: Option<String>,
}

/// How panels are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Stacked, sharing the categories (panels split by series).
    Rows,
    /// Side by side, each with its own categories (panels split by category).
    Columns,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BarFigure {
    pub title: String,
    /// A line under the title saying what bars and whiskers show.
    pub subtitle: String,
    pub x_label: String,
    pub y_label: String,
    pub categories: Vec<String>,
    /// Series names; series `i` is drawn in `PALETTE[i]`.
    pub series: Vec<String>,
    /// `values[series][category]`.
    pub values: Vec<Vec<Option<BarValue>>>,
    /// The paper's value per cell, drawn as a diamond.
    pub paper: Vec<Vec<Option<f64>>>,
    /// Legend text of the whisker (e.g. "min–max over 5 seeds"); none: no whiskers.
    pub spread_label: Option<String>,
    pub panels: Vec<Panel>,
    pub layout: Layout,
}

const CAT_PX: f64 = 15.0;
const CAT_LINE: i32 = 18;
/// Longest upright category label, in pixels (longer ones are shortened).
const UPRIGHT_MAX: f64 = 160.0;

/// Category labels as they will be set.
enum CatLabels {
    /// Horizontal, each wrapped into lines.
    Across { size: f64, lines: Vec<Vec<String>> },
    /// Reading upwards, one line each, when groups are too narrow.
    Upright { size: f64, labels: Vec<String> },
}

/// `text`, cut with "…" to fit `max_px` at `size`.
fn shorten(text: &str, size: f64, max_px: f64) -> String {
    if text_width(text, size) <= max_px {
        return text.to_string();
    }
    let mut s: String = text.to_string();
    while !s.is_empty() && text_width(&format!("{s}…"), size) > max_px {
        s.pop();
    }
    format!("{}…", s.trim_end())
}
const PANEL_TITLE: i32 = 24;

impl BarFigure {
    /// Pixel size: a panel row is 330 px tall.
    pub fn size(&self) -> (u32, u32) {
        let rows = if self.layout == Layout::Rows { self.panels.len().max(1) as u32 } else { 1 };
        (1000, 230 + 330 * rows)
    }

    fn legend_entries(&self) -> Vec<(Key, String)> {
        let mut e: Vec<(Key, String)> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, s)| (Key::Swatch(PALETTE[i % PALETTE.len()]), s.clone()))
            .collect();
        if self.paper.iter().flatten().any(Option::is_some) {
            e.push((Key::Diamond, "paper".into()));
        }
        if let Some(s) = &self.spread_label {
            e.push((Key::Whisker, s.clone()));
        }
        let mut refs: Vec<&str> = Vec::new();
        for r in self.panels.iter().filter_map(|p| p.reference.as_ref()) {
            if !refs.contains(&r.label.as_str()) {
                refs.push(&r.label);
                e.push((Key::Dashed(MUTED), r.label.clone()));
            }
        }
        e
    }

    /// Value range a panel must show: bars, whiskers, paper values, reference.
    fn panel_axis(&self, p: &Panel, top: i32, bottom: i32) -> YAxis {
        let (mut lo, mut hi) = (0.0_f64, f64::NEG_INFINITY);
        let mut see = |v: f64| {
            if v.is_finite() {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        };
        for &s in &p.series {
            for &c in &p.categories {
                if let Some(b) = self.values[s][c] {
                    [b.value, b.low, b.high].into_iter().for_each(&mut see);
                }
                if let Some(v) = self.paper[s][c] {
                    see(v);
                }
            }
        }
        if let Some(r) = &p.reference {
            see(r.value);
        }
        let hi = if hi.is_finite() && hi > lo { hi } else { lo + 1.0 };
        // Target about one tick per 55 px, and a little headroom above the
        // tallest mark so a whisker cap or diamond never sits on the frame.
        let target = ((bottom - top) / 55).clamp(3, 8) as usize;
        YAxis { ticks: Ticks::linear(lo, hi + (hi - lo) * 0.02, target), top, bottom }
    }

    /// Category labels that fit a group's width: wrapped across (up to
    /// three lines, in smaller type if need be), else set upright.
    fn category_labels(&self, cats: &[usize], group_px: f64) -> CatLabels {
        for size in [CAT_PX, 13.0, 11.0] {
            let lines: Vec<Vec<String>> =
                cats.iter().map(|&c| wrap(&self.categories[c], size, group_px - 6.0)).collect();
            let fits = lines.iter().flatten().all(|l| text_width(l, size) <= group_px - 2.0);
            if fits && lines.iter().all(|l| l.len() <= 3) {
                return CatLabels::Across { size, lines };
            }
        }
        let labels = cats.iter().map(|&c| shorten(&self.categories[c], 11.0, UPRIGHT_MAX)).collect();
        CatLabels::Upright { size: 11.0, labels }
    }

    /// Height the category labels take under a panel.
    fn labels_height(&self, cats: &[usize], group_px: f64) -> i32 {
        match self.category_labels(cats, group_px) {
            CatLabels::Across { lines, .. } => {
                CAT_LINE * lines.iter().map(Vec::len).max().unwrap_or(1) as i32
            }
            CatLabels::Upright { size, labels } => {
                labels.iter().map(|l| text_width(l, size).ceil() as i32).max().unwrap_or(0) + 4
            }
        }
    }

    fn draw_category_labels<DB: DrawingBackend>(
        &self,
        area: &Area<DB>,
        p: &Panel,
        x0: i32,
        group: f64,
        y: i32,
    ) -> Result<()> {
        let centre = |gi: usize| (f64::from(x0) + group * (gi as f64 + 0.5)).round() as i32;
        match self.category_labels(&p.categories, group) {
            CatLabels::Across { size, lines } => {
                for (gi, label) in lines.iter().enumerate() {
                    for (li, line) in label.iter().enumerate() {
                        text(
                            area,
                            line,
                            (centre(gi), y + CAT_LINE * li as i32),
                            size,
                            INK,
                            (HPos::Center, VPos::Top),
                        )?;
                    }
                }
            }
            CatLabels::Upright { size, labels } => {
                for (gi, label) in labels.iter().enumerate() {
                    upright_text(area, label, (centre(gi), y), size)?;
                }
            }
        }
        Ok(())
    }

    /// Cell `(s, c)`'s bar from `bx`, `bar` pixels wide: its whisker and
    /// the paper's diamond on its centre line.
    fn draw_bar<DB: DrawingBackend>(
        &self,
        area: &Area<DB>,
        axis: &YAxis,
        (s, c): (usize, usize),
        bx: f64,
        bar: f64,
    ) -> Result<()> {
        let mid = (bx + bar / 2.0).round() as i32;
        if let Some(b) = self.values[s][c] {
            let color = PALETTE[s % PALETTE.len()];
            let (l, r) = ((bx + bar * 0.06).round() as i32, (bx + bar * 0.94).round() as i32);
            let (y0, yv) = (axis.y(0.0_f64.max(axis.ticks.lo())), axis.y(b.value));
            ok(area.draw(&Rectangle::new([(l, y0.min(yv)), (r, y0.max(yv))], color.filled())))?;
            if self.spread_label.is_some() && axis.y(b.low) - axis.y(b.high) >= 2 {
                whisker(area, mid, axis.y(b.low), axis.y(b.high), (bar * 0.25).clamp(3.0, 9.0) as i32)?;
            }
        }
        if let Some(v) = self.paper[s][c] {
            diamond(area, (mid, axis.y(v)), 7)?;
        }
        Ok(())
    }

    fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &Area<DB>,
        p: &Panel,
        axis: &YAxis,
        (x0, x1): (i32, i32),
        with_x_labels: bool,
    ) -> Result<()> {
        axis.draw(area, x0, x1)?;
        if !p.title.is_empty() {
            text(area, &p.title, (x0, axis.top - 8), AXIS_PX, INK, (HPos::Left, VPos::Bottom))?;
        }
        let n_cat = p.categories.len().max(1);
        let group = f64::from(x1 - x0) / n_cat as f64;
        // A group holds the series that have a bar or a paper value there,
        // so a category that only some series reach has no empty slots.
        let shown = |c: usize| -> Vec<usize> {
            p.series
                .iter()
                .copied()
                .filter(|&s| self.values[s][c].is_some() || self.paper[s][c].is_some())
                .collect()
        };
        let widest = p.categories.iter().map(|&c| shown(c).len()).max().unwrap_or(1).max(1);
        // Bars share 80% of a group, but no bar is wider than 110 px.
        let bar = (0.8 * group / widest as f64).min(110.0);
        for (gi, &c) in p.categories.iter().enumerate() {
            let series = shown(c);
            let left = f64::from(x0) + group * (gi as f64 + 0.5) - bar * series.len() as f64 / 2.0;
            for (si, &s) in series.iter().enumerate() {
                self.draw_bar(area, axis, (s, c), left + bar * si as f64, bar)?;
            }
        }
        if let Some(r) = &p.reference {
            let label =
                |v: f64| Ticks { values: vec![v], decimals: if v.fract() == 0.0 { 0 } else { 2 } }.label(v);
            if r.over.is_empty() {
                let y = axis.y(r.value);
                dashed_hline(area, x0, x1, y, MUTED.stroke_width(2))?;
                text(area, &label(r.value), (x1 + 6, y), TICK_PX, MUTED, (HPos::Left, VPos::Center))?;
            }
            for (gi, &c) in p.categories.iter().enumerate() {
                let Some(&(_, v)) = r.over.iter().find(|(k, _)| *k == c) else { continue };
                let (l, rt) = (f64::from(x0) + group * gi as f64, f64::from(x0) + group * (gi as f64 + 1.0));
                let y = axis.y(v);
                dashed_hline(
                    area,
                    (l + 0.04 * group) as i32,
                    (rt - 0.04 * group) as i32,
                    y,
                    MUTED.stroke_width(2),
                )?;
                text(
                    area,
                    &label(v),
                    ((rt - 0.04 * group) as i32, y - 3),
                    TICK_PX,
                    MUTED,
                    (HPos::Right, VPos::Bottom),
                )?;
            }
        }
        ok(area.draw(&PathElement::new(vec![(x0, axis.bottom), (x1, axis.bottom)], INK.stroke_width(1))))?;
        if with_x_labels {
            self.draw_category_labels(area, p, x0, group, axis.bottom + 8)?;
        }
        Ok(())
    }
}

/// The canvas below the legend: its height, where plots start, and the
/// right edge of the plots (room for reference-line values beyond it).
struct Canvas {
    h: i32,
    top: i32,
    right: i32,
}

const X_TITLE_H: i32 = 26;

impl BarFigure {
    fn x_title<DB: DrawingBackend>(&self, area: &Area<DB>, x_mid: i32, y: i32) -> Result<()> {
        text(area, &self.x_label, (x_mid, y), AXIS_PX, INK, (HPos::Center, VPos::Top))
    }

    /// Panels stacked, sharing the categories (labelled under the last).
    fn draw_rows<DB: DrawingBackend>(&self, area: &Area<DB>, c: &Canvas) -> Result<()> {
        let titled = self.panels.len() > 1;
        let n = self.panels.len().max(1) as i32;
        let all: Vec<usize> = (0..self.categories.len()).collect();
        let per_cat = |width: i32| f64::from(width) / all.len().max(1) as f64;
        // The label rows from a first guess of the plot width.
        let bottom_area = 8 + self.labels_height(&all, per_cat(c.right - 120)) + 8 + X_TITLE_H;
        let slot = (c.h - MARGIN - bottom_area - c.top) / n;
        let axes: Vec<YAxis> = self
            .panels
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let top = c.top + slot * i as i32 + if titled { PANEL_TITLE } else { 0 };
                self.panel_axis(p, top, c.top + slot * (i as i32 + 1) - 12)
            })
            .collect();
        let ticks_w = axes.iter().map(YAxis::label_width).max().unwrap_or(0);
        let y_label = |p: &Panel| p.y_label.clone().unwrap_or_else(|| self.y_label.clone());
        let title_lines = (self.panels.iter().zip(&axes))
            .map(|(p, a)| y_title_lines(&y_label(p), a.bottom - a.top))
            .max()
            .unwrap_or(1);
        let x0 = MARGIN + 20 * title_lines + 10 + ticks_w + 10;
        for (i, (p, axis)) in self.panels.iter().zip(&axes).enumerate() {
            y_title(area, &y_label(p), MARGIN + 20 * title_lines, axis.top, axis.bottom)?;
            self.draw_panel(area, p, axis, (x0, c.right), i + 1 == self.panels.len())?;
        }
        let last = axes.last().map_or(c.h, |a| a.bottom);
        self.x_title(
            area,
            (x0 + c.right) / 2,
            last + 8 + self.labels_height(&all, per_cat(c.right - x0)) + 10,
        )
    }

    /// Panels side by side, each with its categories and value axis; a
    /// category gets the same width in every panel.
    fn draw_columns<DB: DrawingBackend>(&self, area: &Area<DB>, c: &Canvas) -> Result<()> {
        let n = self.panels.len() as i32;
        let total_cats: usize = self.panels.iter().map(|p| p.categories.len()).sum::<usize>().max(1);
        let top = c.top + if n > 1 { PANEL_TITLE } else { 0 };
        let guess = f64::from(c.right - 120 * n) / total_cats as f64;
        let labels_h =
            self.panels.iter().map(|p| self.labels_height(&p.categories, guess)).max().unwrap_or(0);
        let bottom = c.h - MARGIN - X_TITLE_H - 8 - labels_h - 8;
        let axes: Vec<YAxis> = self.panels.iter().map(|p| self.panel_axis(p, top, bottom)).collect();
        let title_lines = y_title_lines(&self.y_label, bottom - top);
        let title_w = 20 * title_lines + 10;
        let lefts: Vec<i32> = axes.iter().map(|a| a.label_width() + 18).collect();
        let refs = if self.panels.iter().any(|p| p.reference.is_some()) { 40 } else { 0 };
        let free = c.right - MARGIN - title_w - lefts.iter().sum::<i32>() - refs * (n - 1);
        y_title(area, &self.y_label, MARGIN + 20 * title_lines, top, bottom)?;
        let mut x = MARGIN + title_w;
        for ((p, axis), left) in self.panels.iter().zip(&axes).zip(&lefts) {
            let width = free * p.categories.len() as i32 / total_cats as i32;
            self.draw_panel(area, p, axis, (x + left, x + left + width), true)?;
            x += left + width + refs;
        }
        self.x_title(area, (MARGIN + title_w + c.right) / 2, bottom + 8 + labels_h + 10)
    }
}

impl super::Chart for BarFigure {
    fn size(&self) -> (u32, u32) {
        BarFigure::size(self)
    }

    fn draw<DB: DrawingBackend>(&self, area: &Area<DB>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (w, h, legend_bottom) = begin(area, &self.title, &self.subtitle, &self.legend_entries())?;
        let refs = self.panels.iter().any(|p| p.reference.is_some());
        let canvas = Canvas { h, top: legend_bottom + 10, right: w - MARGIN - if refs { 40 } else { 8 } };
        match self.layout {
            Layout::Rows => self.draw_rows(area, &canvas),
            Layout::Columns => self.draw_columns(area, &canvas),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(layout: Layout) -> BarFigure {
        let v = |value: f64| Some(BarValue { value, low: value * 0.95, high: value * 1.05 });
        BarFigure {
            title: "t".into(),
            subtitle: "s".into(),
            x_label: "program".into(),
            y_label: "speedup vs one baseline CPU (×)".into(),
            categories: vec!["Fibonacci".into(), "a rather long category name".into()],
            series: vec!["CMP".into(), "ACMP-3".into()],
            values: vec![vec![v(24.0), v(1.5)], vec![v(17.0), None]],
            paper: vec![vec![Some(20.0), None], vec![None, Some(2.0)]],
            spread_label: Some("min–max over 5 seeds".into()),
            panels: match layout {
                Layout::Rows => vec![
                    Panel {
                        title: "CMP".into(),
                        categories: vec![0, 1],
                        series: vec![0],
                        reference: None,
                        y_label: None,
                    },
                    Panel {
                        title: "ACMP-3".into(),
                        categories: vec![0, 1],
                        series: vec![1],
                        reference: None,
                        y_label: None,
                    },
                ],
                Layout::Columns => vec![
                    Panel {
                        title: "Fibonacci".into(),
                        categories: vec![0],
                        series: vec![0, 1],
                        reference: Some(Reference { value: 24.0, label: "ideal".into(), over: vec![] }),
                        y_label: None,
                    },
                    Panel {
                        title: "other".into(),
                        categories: vec![1],
                        series: vec![0, 1],
                        reference: Some(Reference {
                            value: 1.0,
                            label: "1 = one baseline CPU".into(),
                            over: vec![],
                        }),
                        y_label: None,
                    },
                ],
            },
            layout,
        }
    }

    /// The axis ends at the first round tick above the data, whiskers and
    /// paper values included: 24 * 1.05 = 25.2 needs 30, not 35.
    #[test]
    fn a_panel_axis_fits_its_data() {
        let f = figure(Layout::Columns);
        let a = f.panel_axis(&f.panels[0], 100, 400);
        assert_eq!((a.ticks.lo(), a.ticks.hi()), (0.0, 30.0), "{:?}", a.ticks);
        let a = f.panel_axis(&f.panels[1], 100, 400);
        assert!(a.ticks.hi() >= 2.0 && a.ticks.hi() <= 2.5, "{:?}", a.ticks);
        assert!(a.y(0.0) == 400 && a.y(a.ticks.hi()) == 100);
    }

    /// Labels never overlap: they wrap, shrink, and past that stand upright
    /// (shortened with "…" if longer than the room under the plot).
    #[test]
    fn category_labels_fit_their_group() {
        let f = figure(Layout::Rows);
        match f.category_labels(&[0, 1], 400.0) {
            CatLabels::Across { size, lines } => {
                assert_eq!(size, CAT_PX);
                assert!(lines.iter().flatten().all(|l| text_width(l, size) <= 398.0));
            }
            CatLabels::Upright { .. } => panic!("wide groups set labels across"),
        }
        assert!(matches!(f.category_labels(&[0, 1], 30.0), CatLabels::Upright { .. }));
        let long = "a label much longer than the room under any plot could ever hold";
        let cut = shorten(long, 11.0, UPRIGHT_MAX);
        assert!(cut.ends_with('…') && text_width(&cut, 11.0) <= UPRIGHT_MAX, "{cut}");
        assert_eq!(shorten("gcc", 11.0, UPRIGHT_MAX), "gcc");
    }

    #[test]
    fn both_layouts_render_to_png_and_svg() {
        let dir = std::env::temp_dir().join(format!("dyncore-bars-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, layout) in [("rows", Layout::Rows), ("columns", Layout::Columns)] {
            let f = figure(layout);
            let stem = dir.join(name);
            crate::plot::write_chart(&stem, &f).unwrap();
            let png = std::fs::read(stem.with_extension("png")).unwrap();
            let (w, h) = f.size();
            assert_eq!(u32::from_be_bytes(png[16..20].try_into().unwrap()), w);
            assert_eq!(u32::from_be_bytes(png[20..24].try_into().unwrap()), h);
            let svg = std::fs::read_to_string(stem.with_extension("svg")).unwrap();
            for label in ["paper", "min–max over 5 seeds", "Fibonacci", "program"] {
                assert!(svg.contains(label), "{name}: {label} missing");
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
