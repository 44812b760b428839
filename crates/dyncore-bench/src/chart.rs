//! The benches' plots: horizontal bars with the spread the bench measured,
//! and line charts with error bars, drawn through the shared
//! [`dyncore_report::plot::Chart`] (PNG and SVG from one drawing).
//!
//! What a reader of a systems paper needs, and plotters' default mesh does
//! not give:
//!
//! * **Colour by kind** (sidecall, trap, queue peer, kernel path…), with a
//!   legend that names the kinds and says what the box and whisker are.
//! * **The spread**: a bar to the median, a box from p25 to p75 and a
//!   whisker to p99; every bar carries its value as text.
//! * **Readable axes**: a label with quantity and unit; ticks we place
//!   ourselves ([`Axis::ticks`]) at 1-2-5 steps or decades, formatted with
//!   their unit ("100 ns", "10 µs", "2 M"), never "10000.0"; the axis of a
//!   log scale starts at a labelled decade at or below the smallest value, so
//!   every bar can be read against a tick; a label that would overlap its
//!   neighbour is left out.
//! * **Goal lines** where a bench has a goal.
//!
//! Horizontal bars keep long category names readable (they never share a
//! line with a neighbour).

use anyhow::{Result, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use dyncore_report::plot::{Chart, PALETTE};

/// How an axis's values are written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unit {
    /// Nanoseconds, written in ns, µs, ms or s.
    Nanos,
    /// A count or rate, written with SI prefixes ("2 M", "500 k").
    Si,
    /// A plain number ("16").
    Plain,
}

impl Unit {
    /// `v` with three significant digits and its unit.
    pub fn format(self, v: f64) -> String {
        if !v.is_finite() {
            return "–".into();
        }
        let scaled = |steps: &[(f64, &str)]| {
            let (div, unit) =
                steps.iter().find(|(d, _)| v.abs() >= *d).copied().unwrap_or(*steps.last().unwrap());
            format!("{}{unit}", sig3(v / div))
        };
        match self {
            Unit::Nanos => scaled(&[(1e9, " s"), (1e6, " ms"), (1e3, " µs"), (1.0, " ns")]),
            Unit::Si => scaled(&[(1e9, " G"), (1e6, " M"), (1e3, " k"), (1.0, "")]),
            Unit::Plain => sig3(v),
        }
    }
}

/// Three significant digits, without trailing zeros ("1.5", "110", "0.25").
fn sig3(x: f64) -> String {
    let a = x.abs();
    let digits = if a >= 100.0 || a == 0.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        3
    };
    let s = format!("{x:.digits$}");
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
}

/// A value axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// Quantity and unit, e.g. "round trip (log scale)".
    pub label: String,
    pub unit: Unit,
    pub log: bool,
    /// Ticks at exactly these values (e.g. the guest counts), instead of
    /// 1-2-5 steps.
    pub ticks_at: Option<Vec<f64>>,
}

impl Axis {
    pub fn new(label: impl Into<String>, unit: Unit, log: bool) -> Axis {
        Axis { label: label.into(), unit, log, ticks_at: None }
    }

    /// Where `v` sits along the axis (log10 on a log axis).
    fn pos(&self, v: f64) -> f64 {
        if self.log { v.max(f64::MIN_POSITIVE).log10() } else { v }
    }

    /// The axis range for data from `lo` to `hi`: on a log axis, from the
    /// decade at or below `lo` to the decade above `hi` (both labelled); on
    /// a linear one, from 0 to a round number above `hi`.
    pub fn range(&self, lo: f64, hi: f64) -> (f64, f64) {
        if let Some(t) = self.ticks_at.as_ref().filter(|t| !t.is_empty()) {
            let (a, b) =
                (t.iter().copied().fold(f64::INFINITY, f64::min), t.iter().copied().fold(0.0, f64::max));
            return if self.log { (a / 1.5, b * 1.5) } else { (a.min(lo), b.max(hi)) };
        }
        if self.log {
            let lo = if lo.is_finite() && lo > 0.0 { lo } else { 1.0 };
            let hi = if hi.is_finite() && hi > lo { hi } else { lo };
            let a = 10f64.powf(lo.log10().floor());
            let b = 10f64.powf((hi * 1.0001).log10().ceil()).max(a * 10.0);
            (a, b)
        } else {
            let hi = if hi.is_finite() && hi > 0.0 { hi } else { 1.0 };
            let step = nice_step(hi * 1.1 / 6.0);
            (0.0f64.min(lo), (hi * 1.1 / step).ceil() * step)
        }
    }

    /// Ticks in `lo..=hi`: (value, labelled). Log axes get decades, plus 2
    /// and 5 when the axis spans two decades or less (unlabelled 2…9
    /// gridlines otherwise); linear axes get 1-2-5 steps.
    pub fn ticks(&self, lo: f64, hi: f64) -> Vec<(f64, bool)> {
        if let Some(t) = &self.ticks_at {
            return t.iter().map(|&v| (v, true)).collect();
        }
        let within = |v: f64| v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9);
        if self.log {
            let decades = (hi / lo).log10().round() as i32;
            let first = lo.log10().floor() as i32;
            let mut v = Vec::new();
            for k in first..=first + decades {
                let d = 10f64.powi(k);
                for m in 1..10 {
                    let x = d * m as f64;
                    if within(x) {
                        v.push((x, m == 1 || (decades <= 2 && (m == 2 || m == 5))));
                    }
                }
            }
            v
        } else {
            let step = nice_step((hi - lo) / 6.0);
            let mut v = Vec::new();
            let mut x = (lo / step).ceil() * step;
            while x <= hi * (1.0 + 1e-9) {
                v.push((x, true));
                x += step;
            }
            v
        }
    }
}

/// The 1-2-5 step at or above `raw`.
fn nice_step(raw: f64) -> f64 {
    let raw = if raw.is_finite() && raw > 0.0 { raw } else { 1.0 };
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * p).find(|&s| s >= raw * (1.0 - 1e-9)).unwrap_or(10.0 * p)
}

/// One bar: the median, and the spread the bench measured around it.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeBar {
    pub label: String,
    /// Index into [`RangeBars::kinds`].
    pub kind: usize,
    pub value: f64,
    /// The box (p25–p75).
    pub quartiles: Option<(f64, f64)>,
    /// The whisker's far end (p99, or the largest round).
    pub whisker: Option<f64>,
}

/// A vertical reference line, e.g. a goal.
#[derive(Debug, Clone, PartialEq)]
pub struct GoalLine {
    pub at: f64,
    pub label: String,
}

/// Horizontal bars with their spread (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct RangeBars {
    pub title: String,
    pub axis: Axis,
    /// Each kind's legend text and colour; [`RangeBar::kind`] indexes it.
    pub kinds: Vec<(String, RGBColor)>,
    /// Top to bottom.
    pub bars: Vec<RangeBar>,
    pub goals: Vec<GoalLine>,
    /// What the box and whisker show, for the legend (`None`: no spread).
    pub spread_legend: Option<String>,
}

/// One point of a line: the value, and an error bar.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub err: Option<(f64, f64)>,
}

/// A line chart with optional error bars.
#[derive(Debug, Clone, PartialEq)]
pub struct Lines {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<(String, Vec<Point>)>,
    /// What the error bars show, for the legend.
    pub err_legend: Option<String>,
}

const TITLE_PX: i32 = 22;
const TEXT_PX: i32 = 14;
const SMALL_PX: i32 = 12;
/// Dash patterns of successive goal lines (dash, gap), so two lines differ
/// without taking a kind's colour.
const GOAL_DASHES: [(u32, u32); 3] = [(10, 5), (3, 4), (14, 4)];

fn e<E: std::fmt::Debug>(err: E) -> anyhow::Error {
    anyhow!("{err:?}")
}

fn style(px: i32, h: HPos, v: VPos) -> TextStyle<'static> {
    TextStyle::from(("sans-serif", px).into_font()).color(&BLACK).pos(Pos::new(h, v))
}

/// What a legend entry shows before its text.
enum Glyph {
    Fill(RGBColor),
    Stroke(RGBColor),
    /// A box, with a whisker when `true`.
    Box(bool),
    Dash(usize),
}

/// Draws the title and a legend strip (wrapping as needed) on `root`, and
/// returns the area below them for the plot.
fn frame<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    legend: &[(Glyph, String)],
) -> Result<DrawingArea<DB, Shift>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(e)?;
    let (w, _) = root.dim_in_pixel();
    root.draw(&Text::new(title.to_string(), (w as i32 / 2, 8), style(TITLE_PX, HPos::Center, VPos::Top)))
        .map_err(e)?;
    let ts = style(TEXT_PX, HPos::Left, VPos::Center);
    let (mut x, mut y) = (16, 8 + TITLE_PX + 18);
    for (glyph, text) in legend {
        let tw = root.estimate_text_size(text, &ts).map_err(e)?.0 as i32;
        if x + 26 + tw > w as i32 - 16 && x > 16 {
            x = 16;
            y += 22;
        }
        draw_glyph(root, glyph, x, y)?;
        root.draw(&Text::new(text.clone(), (x + 24, y), ts.clone())).map_err(e)?;
        x += 24 + tw + 22;
    }
    Ok(root.split_vertically(y + 16).1)
}

fn draw_glyph<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, g: &Glyph, x: i32, y: i32) -> Result<()>
where
    DB::ErrorType: 'static,
{
    match *g {
        Glyph::Fill(c) => root.draw(&Rectangle::new([(x, y - 6), (x + 16, y + 6)], c.filled())),
        Glyph::Stroke(c) => root.draw(&PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))),
        Glyph::Box(false) => root.draw(&Rectangle::new([(x, y - 5), (x + 16, y + 5)], BLACK.stroke_width(1))),
        Glyph::Box(true) => {
            root.draw(&Rectangle::new([(x, y - 5), (x + 9, y + 5)], BLACK.stroke_width(1))).map_err(e)?;
            root.draw(&PathElement::new(vec![(x + 9, y), (x + 18, y)], BLACK.stroke_width(1))).map_err(e)?;
            root.draw(&PathElement::new(vec![(x + 18, y - 4), (x + 18, y + 4)], BLACK.stroke_width(1)))
        }
        Glyph::Dash(i) => {
            let (dash, gap) = GOAL_DASHES[i % GOAL_DASHES.len()];
            let mut x0 = x;
            while x0 < x + 18 {
                let x1 = (x0 + dash.min(6) as i32).min(x + 18);
                root.draw(&PathElement::new(vec![(x0, y), (x1, y)], BLACK.stroke_width(2))).map_err(e)?;
                x0 = x1 + gap.min(4) as i32;
            }
            Ok(())
        }
    }
    .map_err(e)
}

/// Labels `ticks` along an axis at their pixel positions, skipping any
/// label that would overlap the previous one drawn.
fn tick_labels<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    labels: &[(i32, String)],
    horizontal: bool,
    at: i32,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let s = if horizontal {
        style(TEXT_PX, HPos::Center, VPos::Top)
    } else {
        style(TEXT_PX, HPos::Right, VPos::Center)
    };
    let mut last_end = i32::MIN;
    let mut sorted = labels.to_vec();
    sorted.sort_by_key(|(p, _)| *p);
    for (p, text) in sorted {
        let (tw, th) = root.estimate_text_size(&text, &s).map_err(e)?;
        let half = if horizontal { tw as i32 / 2 } else { th as i32 / 2 };
        if p - half < last_end + 6 {
            continue;
        }
        last_end = p + half;
        let pos = if horizontal { (p, at + 6) } else { (at - 8, p) };
        root.draw(&Text::new(text, pos, s.clone())).map_err(e)?;
    }
    Ok(())
}

/// The plot's frame in pixels, and the axis positions (log10 on a log axis)
/// at its edges: `x0`/`x1` left and right, `y0`/`y1` bottom and top.
struct Plane {
    x0: i32,
    x1: i32,
    y0: i32,
    y1: i32,
    x: (f64, f64),
    y: (f64, f64),
}

impl Plane {
    /// The frame inside `area` less the margins (top, bottom, left, right).
    fn new<DB: DrawingBackend>(
        area: &DrawingArea<DB, Shift>,
        (top, bottom, left, right): (i32, i32, i32, i32),
        x: (f64, f64),
        y: (f64, f64),
    ) -> Plane {
        let (bx, by) = area.get_base_pixel();
        let (w, h) = area.dim_in_pixel();
        Plane { x0: bx + left, x1: bx + w as i32 - right, y0: by + h as i32 - bottom, y1: by + top, x, y }
    }

    fn px(&self, pos: f64) -> i32 {
        let f = (pos - self.x.0) / (self.x.1 - self.x.0);
        self.x0 + (f * f64::from(self.x1 - self.x0)).round() as i32
    }

    fn py(&self, pos: f64) -> i32 {
        let f = (pos - self.y.0) / (self.y.1 - self.y.0);
        self.y0 - (f * f64::from(self.y0 - self.y1)).round() as i32
    }

    /// The two axis lines, left and bottom.
    fn draw_axes<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let l = vec![(self.x0, self.y1), (self.x0, self.y0), (self.x1, self.y0)];
        root.draw(&PathElement::new(l, BLACK.stroke_width(1))).map_err(e)
    }

    /// A value axis over `a..b`, along the bottom (`horizontal`) or the
    /// left: gridlines, tick labels, the axis label (turned on the left).
    fn axis<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        axis: &Axis,
        (a, b): (f64, f64),
        horizontal: bool,
    ) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let mut labels = Vec::new();
        for (v, major) in axis.ticks(a, b) {
            let (at, line) = if horizontal {
                let x = self.px(axis.pos(v));
                (x, vec![(x, self.y0), (x, self.y1)])
            } else {
                let y = self.py(axis.pos(v));
                (y, vec![(self.x0, y), (self.x1, y)])
            };
            root.draw(&PathElement::new(line, grid(major))).map_err(e)?;
            if major {
                labels.push((at, axis.unit.format(v)));
            }
        }
        let font = ("sans-serif", TEXT_PX + 1).into_font();
        if horizontal {
            tick_labels(root, &labels, true, self.y0)?;
            let at = ((self.x0 + self.x1) / 2, self.y0 + 30);
            root.draw(&Text::new(axis.label.clone(), at, style(TEXT_PX + 1, HPos::Center, VPos::Top)))
                .map_err(e)
        } else {
            tick_labels(root, &labels, false, self.x0)?;
            let turned = TextStyle::from(font.transform(FontTransform::Rotate270))
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Top));
            root.draw(&Text::new(axis.label.clone(), (self.x0 - 84, (self.y0 + self.y1) / 2), turned))
                .map_err(e)
        }
    }
}

/// A gridline: darker at a labelled tick.
fn grid(major: bool) -> ShapeStyle {
    if major { RGBColor(200, 200, 200) } else { RGBColor(235, 235, 235) }.stroke_width(1)
}

/// The smallest and largest finite values (positive ones only on a log
/// axis); infinities if none.
fn extent(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    values
        .filter(|v| v.is_finite() && (!log || *v > 0.0))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)))
}

impl RangeBars {
    /// Legend: the kinds shown (a kind keeps its colour in every chart),
    /// what the box and whisker are, the goal lines.
    fn legend(&self) -> Vec<(Glyph, String)> {
        let mut legend: Vec<(Glyph, String)> = self
            .kinds
            .iter()
            .enumerate()
            .filter(|(i, _)| self.bars.iter().any(|b| b.kind == *i))
            .map(|(_, (k, c))| (Glyph::Fill(*c), k.clone()))
            .collect();
        if let Some(s) = &self.spread_legend {
            legend.push((Glyph::Box(self.bars.iter().any(|b| b.whisker.is_some())), s.clone()));
        }
        for (i, g) in self.goals.iter().enumerate() {
            legend.push((Glyph::Dash(i), g.label.clone()));
        }
        legend
    }

    /// The axis range covering every bar, box, whisker and goal line.
    fn value_range(&self) -> (f64, f64) {
        let all = self.bars.iter().flat_map(|b| {
            [Some(b.value), b.whisker, b.quartiles.map(|q| q.0), b.quartiles.map(|q| q.1)]
                .into_iter()
                .flatten()
        });
        let (lo, hi) = extent(all.chain(self.goals.iter().map(|g| g.at)), self.axis.log);
        self.axis.range(lo, hi)
    }

    /// Dashed vertical goal lines, drawn under the bars.
    fn draw_goals<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, p: &Plane) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        for (i, g) in self.goals.iter().enumerate() {
            let (dash, gap) = GOAL_DASHES[i % GOAL_DASHES.len()];
            let x = p.px(self.axis.pos(g.at));
            let mut y = p.y1;
            while y < p.y0 {
                let y2 = (y + dash as i32).min(p.y0);
                root.draw(&PathElement::new(vec![(x, y), (x, y2)], BLACK.stroke_width(2))).map_err(e)?;
                y = y2 + gap as i32;
            }
        }
        Ok(())
    }

    /// Bar `i` (row `y`, counted from the bottom): its label, the bar to the
    /// median, the box and whisker, and the value on a white ground.
    fn draw_bar<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        p: &Plane,
        bar: &RangeBar,
        y: f64,
    ) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let row = p.py(y);
        let small = style(SMALL_PX, HPos::Left, VPos::Center);
        root.draw(&Text::new(bar.label.clone(), (p.x0 - 8, row), style(TEXT_PX, HPos::Right, VPos::Center)))
            .map_err(e)?;
        if !bar.value.is_finite() || (self.axis.log && bar.value <= 0.0) {
            return root.draw(&Text::new("not measured".to_string(), (p.x0 + 6, row), small)).map_err(e);
        }
        let x = |v: f64| p.px(self.axis.pos(v));
        let colour = self.kinds.get(bar.kind).map_or(BLACK, |k| k.1);
        let end_bar = x(bar.value).max(p.x0 + 2);
        root.draw(&Rectangle::new(
            [(p.x0, p.py(y + 0.34)), (end_bar, p.py(y - 0.34))],
            colour.mix(0.85).filled(),
        ))
        .map_err(e)?;
        let mut end = end_bar;
        if let Some((q1, q3)) = bar.quartiles {
            let (l, r) = (x(q1), x(q3).max(x(q1) + 1));
            root.draw(&Rectangle::new([(l, p.py(y + 0.2)), (r, p.py(y - 0.2))], BLACK.stroke_width(1)))
                .map_err(e)?;
            end = end.max(r);
            if let Some(w) = bar.whisker.filter(|w| w.is_finite() && *w > q3) {
                let wx = x(w);
                root.draw(&PathElement::new(vec![(r, row), (wx, row)], BLACK.stroke_width(1))).map_err(e)?;
                root.draw(&PathElement::new(vec![(wx, row - 5), (wx, row + 5)], BLACK.stroke_width(1)))
                    .map_err(e)?;
                end = end.max(wx);
            }
        }
        let value = self.axis.unit.format(bar.value);
        let (tw, th) = root.estimate_text_size(&value, &small).map_err(e)?;
        let (tw, th) = (tw as i32, th as i32);
        let ground = [(end + 4, row - th / 2 - 1), (end + 8 + tw, row + th / 2 + 1)];
        root.draw(&Rectangle::new(ground, WHITE.filled())).map_err(e)?;
        root.draw(&Text::new(value, (end + 6, row), small)).map_err(e)
    }
}

impl Chart for RangeBars {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let area = frame(root, &self.title, &self.legend())?;
        let label_style = style(TEXT_PX, HPos::Right, VPos::Center);
        let mut label_w = 0;
        for b in &self.bars {
            label_w = label_w.max(area.estimate_text_size(&b.label, &label_style).map_err(e)?.0 as i32);
        }
        let (a, b) = self.value_range();
        let n = self.bars.len().max(1) as f64;
        // Room on the right for the last bar's value text.
        let p = Plane::new(
            &area,
            (4, 56, label_w + 16, 70),
            (self.axis.pos(a), self.axis.pos(b)),
            (-0.5, n - 0.5),
        );
        p.axis(root, &self.axis, (a, b), true)?;
        self.draw_goals(root, &p)?;
        for (i, bar) in self.bars.iter().enumerate() {
            self.draw_bar(root, &p, bar, n - 1.0 - i as f64)?;
        }
        p.draw_axes(root)
    }
}

impl Lines {
    fn legend(&self) -> Vec<(Glyph, String)> {
        let mut legend: Vec<(Glyph, String)> = self
            .series
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (Glyph::Stroke(PALETTE[i % PALETTE.len()]), name.clone()))
            .collect();
        if let Some(s) = &self.err_legend {
            legend.push((Glyph::Stroke(BLACK), s.clone()));
        }
        legend
    }

    fn finite_point(&self, p: &Point) -> bool {
        let ok = |v: f64, log: bool| v.is_finite() && (!log || v > 0.0);
        ok(p.x, self.x.log)
            && ok(p.y, self.y.log)
            && p.err.is_none_or(|(l, h)| ok(l, self.y.log) && ok(h, self.y.log))
    }

    /// One series: the line, its points, and their error bars nudged
    /// `nudge` (axis units) sideways so two series' bars do not overlap.
    fn draw_series<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        p: &Plane,
        colour: RGBColor,
        points: &[Point],
        nudge: f64,
    ) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let ok: Vec<&Point> = points.iter().filter(|q| self.finite_point(q)).collect();
        let at = |q: &Point| (p.px(self.x.pos(q.x)), p.py(self.y.pos(q.y)));
        root.draw(&PathElement::new(ok.iter().map(|q| at(q)).collect::<Vec<_>>(), colour.stroke_width(2)))
            .map_err(e)?;
        for q in ok {
            root.draw(&Circle::new(at(q), 3, colour.filled())).map_err(e)?;
            if let Some((lo, hi)) = q.err {
                let x = p.px(self.x.pos(q.x) + nudge);
                let (y_lo, y_hi) = (p.py(self.y.pos(lo)), p.py(self.y.pos(hi)));
                root.draw(&PathElement::new(vec![(x, y_lo), (x, y_hi)], colour.stroke_width(1)))
                    .map_err(e)?;
                for y in [y_lo, y_hi] {
                    root.draw(&PathElement::new(vec![(x - 3, y), (x + 3, y)], colour.stroke_width(1)))
                        .map_err(e)?;
                }
            }
        }
        Ok(())
    }
}

impl Chart for Lines {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        let area = frame(root, &self.title, &self.legend())?;
        let pts = || self.series.iter().flat_map(|(_, p)| p.iter()).filter(|q| self.finite_point(q));
        let ys =
            pts().flat_map(|q| [Some(q.y), q.err.map(|e| e.0), q.err.map(|e| e.1)].into_iter().flatten());
        let (ylo, yhi) = extent(ys, self.y.log);
        let (xlo, xhi) = extent(pts().map(|q| q.x), self.x.log);
        let (ya, yb) = self.y.range(ylo, yhi);
        let (xa, xb) = self.x.range(xlo, xhi);
        let (x_span, y_span) = ((self.x.pos(xa), self.x.pos(xb)), (self.y.pos(ya), self.y.pos(yb)));
        let p = Plane::new(&area, (4, 56, 90, 24), x_span, y_span);
        p.axis(root, &self.y, (ya, yb), false)?;
        p.axis(root, &self.x, (xa, xb), true)?;
        p.draw_axes(root)?;
        let k = self.series.len().max(1) as f64;
        for (si, (_, points)) in self.series.iter().enumerate() {
            let nudge = (si as f64 - (k - 1.0) / 2.0) * 0.012 * (x_span.1 - x_span.0);
            self.draw_series(root, &p, PALETTE[si % PALETTE.len()], points, nudge)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_written_with_their_unit() {
        let ns = |v| Unit::Nanos.format(v);
        assert_eq!(
            [ns(110.0), ns(1500.0), ns(10_000.0), ns(23_000_000.0), ns(0.7)],
            ["110 ns", "1.5 µs", "10 µs", "23 ms", "0.7 ns"]
        );
        assert_eq!(
            [Unit::Si.format(2e6), Unit::Si.format(500e3), Unit::Si.format(0.0)],
            ["2 M", "500 k", "0"]
        );
        assert_eq!([Unit::Plain.format(16.0), Unit::Plain.format(6.94)], ["16", "6.94"]);
        assert_eq!(Unit::Nanos.format(f64::NAN), "–");
    }

    #[test]
    fn log_axes_start_and_end_on_labelled_decades() {
        let a = Axis::new("t", Unit::Nanos, true);
        // The smallest Bolt bar (700 ns) sits above a labelled 100 ns.
        assert_eq!(a.range(700.0, 23e6), (100.0, 1e8));
        let t = a.ticks(100.0, 1e8);
        let labelled: Vec<String> = t.iter().filter(|t| t.1).map(|t| a.unit.format(t.0)).collect();
        assert_eq!(labelled, ["100 ns", "1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms"]);
        // A narrow range gets 1-2-5 labels.
        let t = a.ticks(10.0, 1000.0);
        let labelled: Vec<f64> = t.iter().filter(|t| t.1).map(|t| t.0).collect();
        assert_eq!(labelled, [10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]);
        assert_eq!(a.range(100.0, 100.0), (100.0, 1000.0));
    }

    #[test]
    fn linear_axes_use_round_steps() {
        let a = Axis::new("events/s", Unit::Si, false);
        let (lo, hi) = a.range(0.0, 15.3e6);
        assert_eq!(lo, 0.0);
        assert!((15.3e6 * 1.1..=20e6).contains(&hi), "{hi}");
        let t: Vec<f64> = a.ticks(lo, hi).into_iter().map(|t| t.0).collect();
        assert_eq!(t.first(), Some(&0.0));
        assert!(
            t.windows(2).all(|w| ((w[1] - w[0]) - 5e6).abs() < 1.0 || ((w[1] - w[0]) - 2e6).abs() < 1.0),
            "{t:?}"
        );
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(nice_step(7.0), 10.0);
    }

    #[test]
    fn charts_render_to_png_and_svg() {
        let dir = std::env::temp_dir().join(format!("dyncore-bench-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bars = RangeBars {
            title: "t".into(),
            axis: Axis::new("round trip (log scale)", Unit::Nanos, true),
            kinds: vec![("sidecall".into(), PALETTE[0]), ("trap".into(), PALETTE[1])],
            bars: vec![
                RangeBar {
                    label: "a".into(),
                    kind: 0,
                    value: 110.0,
                    quartiles: Some((100.0, 120.0)),
                    whisker: Some(170.0),
                },
                RangeBar { label: "b".into(), kind: 1, value: f64::NAN, quartiles: None, whisker: None },
            ],
            goals: vec![GoalLine { at: 143.0, label: "goal".into() }],
            spread_legend: Some("box p25–p75, whisker p99".into()),
        };
        dyncore_report::plot::write_chart(&dir.join("bars"), &bars).unwrap();
        let lines = Lines {
            title: "t".into(),
            x: Axis { ticks_at: Some(vec![1.0, 2.0, 4.0]), ..Axis::new("guests", Unit::Plain, true) },
            y: Axis::new("latency", Unit::Nanos, true),
            series: vec![(
                "s".into(),
                vec![Point { x: 1.0, y: 1e4, err: Some((9e3, 2e4)) }, Point { x: 4.0, y: 2e4, err: None }],
            )],
            err_legend: Some("p25–p75".into()),
        };
        dyncore_report::plot::write_chart(&dir.join("lines"), &lines).unwrap();
        for f in ["bars.png", "bars.svg", "lines.png", "lines.svg"] {
            assert!(dir.join(f).metadata().unwrap().len() > 0, "{f}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
