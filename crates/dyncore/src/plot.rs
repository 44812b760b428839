//! Plots for reports: grouped bar charts and line charts, each written as PNG
//! and SVG side by side; the scenario figures ([`bars::BarFigure`], with
//! panels, seed spread and the paper's values, and [`timeline::Timeline`])
//! are drawn in pixels by the submodules.
//!
//! plotters is built without its default font backend (which looks for system
//! fonts and panics on machines that have none); the DejaVu Sans face is
//! bundled in `assets/` and registered once, so plots render the same on every
//! machine.

use std::path::Path;
use std::sync::Once;

pub mod axis;
pub mod bars;
mod frame;
pub mod text;
pub mod timeline;

use anyhow::{Context, Result, anyhow};
use plotters::coord::Shift;
use plotters::prelude::*;

static FONT: Once = Once::new();
const FONT_BYTES: &[u8] = include_bytes!("../../../assets/DejaVuSans.ttf");

fn register_font() {
    FONT.call_once(|| {
        // The bundled font is a valid TrueType file; failure here is a build defect.
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT_BYTES)
            .map_err(|_| ())
            .expect("bundled DejaVuSans.ttf must load");
    });
}

/// Palette shared by every plot (colour-blind friendly, Okabe-Ito).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(240, 228, 66),
    RGBColor(0, 0, 0),
];

/// One named series of a bar chart: one value per category (NaN = missing).
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub values: Vec<f64>,
}

/// A grouped bar chart: categories along x, one bar per series in each group.
#[derive(Debug, Clone)]
pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub categories: Vec<String>,
    pub series: Vec<Series>,
    /// Logarithmic y axis (for latencies spanning decades).
    pub log_y: bool,
}

/// A line chart: each series is a list of (x, y) points.
#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<(String, Vec<(f64, f64)>)>,
    pub log_x: bool,
    pub log_y: bool,
}

/// A chart that can draw itself on any plotters backend.
pub trait Chart {
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32) {
        SIZE
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static;
}

impl Chart for BarChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        draw_bars(root, self)
    }
}

impl Chart for LineChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        draw_lines(root, self)
    }
}

const SIZE: (u32, u32) = (1000, 560);

/// Writes `chart` to `<stem>.png` and `<stem>.svg`, from the same drawing
/// code. Each is drawn into `<stem>.tmp.<ext>` (plotters picks the image
/// format from the extension) and renamed, so no plot is ever half-written.
/// The PNG's text is set by [`text::CrispText`] (plotters' own bitmap text
/// spaces letters unevenly).
pub fn write_chart(stem: &Path, chart: &impl Chart) -> Result<()> {
    register_font();
    let size = chart.size();
    let (png, tmp) = (stem.with_extension("png"), stem.with_extension("tmp.png"));
    let root = text::CrispText(BitMapBackend::new(&tmp, size)).into_drawing_area();
    chart.draw(&root).with_context(|| format!("drawing {}", png.display()))?;
    root.present().map_err(|e| anyhow!("writing {}: {e}", tmp.display()))?;
    drop(root);
    std::fs::rename(&tmp, &png).with_context(|| format!("renaming to {}", png.display()))?;
    let (svg, tmp) = (stem.with_extension("svg"), stem.with_extension("tmp.svg"));
    let root = SVGBackend::new(&tmp, size).into_drawing_area();
    chart.draw(&root).with_context(|| format!("drawing {}", svg.display()))?;
    root.present().map_err(|e| anyhow!("writing {}: {e}", tmp.display()))?;
    drop(root);
    std::fs::rename(&tmp, &svg).with_context(|| format!("renaming to {}", svg.display()))?;
    Ok(())
}

/// Writes `chart` to `<stem>.png` and `<stem>.svg`.
pub fn write_bar_chart(stem: &Path, chart: &BarChart) -> Result<()> {
    write_chart(stem, chart)
}

/// Writes `chart` to `<stem>.png` and `<stem>.svg`.
pub fn write_line_chart(stem: &Path, chart: &LineChart) -> Result<()> {
    write_chart(stem, chart)
}

fn finite_range(vals: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in vals.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log { (lo / 2.0, hi * 2.0) } else { (0.0_f64.min(lo), if hi > 0.0 { hi * 1.15 } else { 1.0 }) }
}

fn draw_bars<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, c: &BarChart) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
    let n_cat = c.categories.len().max(1);
    let n_ser = c.series.len().max(1);
    let (lo, hi) = finite_range(c.series.iter().flat_map(|s| s.values.iter().copied()), c.log_y);
    // Headroom above the tallest bar for the legend.
    let hi = if c.log_y { hi * 4.0 } else { hi / 1.15 * (1.2 + 0.07 * n_ser as f64) };
    let mut builder = ChartBuilder::on(root);
    builder.caption(&c.title, ("sans-serif", 22)).margin(12).x_label_area_size(70).y_label_area_size(80);
    // x in category units: category i spans i-0.5..i+0.5, its bars share
    // the middle 80%. Ticks are asked for at every half unit so every
    // category centre gets one whatever step plotters picks; only centres
    // are labelled.
    let width = 0.8 / n_ser as f64;
    macro_rules! body {
        ($chart:expr, $base:expr) => {{
            let mut chart = $chart;
            let cats = c.categories.clone();
            let label_size = if n_cat > 8 { 12 } else { 15 };
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(2 * n_cat + 1)
                .x_label_formatter(&|x: &f64| {
                    let r = x.round();
                    if (x - r).abs() < 1e-6 && r >= 0.0 {
                        cats.get(r as usize).cloned().unwrap_or_default()
                    } else {
                        String::new()
                    }
                })
                .x_label_style(("sans-serif", label_size))
                .y_desc(&c.y_label)
                .y_label_style(("sans-serif", 15))
                .draw()
                .map_err(|e| anyhow!("{e:?}"))?;
            for (si, s) in c.series.iter().enumerate() {
                let color = PALETTE[si % PALETTE.len()];
                let bars = s.values.iter().enumerate().filter(|(_, v)| v.is_finite()).map(move |(ci, v)| {
                    let x0 = ci as f64 - 0.4 + si as f64 * width;
                    Rectangle::new([(x0, $base), (x0 + width * 0.92, *v)], color.filled())
                });
                chart
                    .draw_series(bars)
                    .map_err(|e| anyhow!("{e:?}"))?
                    .label(s.name.clone())
                    .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 15))
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(|e| anyhow!("{e:?}"))?;
        }};
    }
    let xr = -0.5..(n_cat as f64 - 0.5);
    if c.log_y {
        body!(builder.build_cartesian_2d(xr, (lo..hi).log_scale()).map_err(|e| anyhow!("{e:?}"))?, lo)
    } else {
        body!(builder.build_cartesian_2d(xr, lo..hi).map_err(|e| anyhow!("{e:?}"))?, 0.0)
    }
    Ok(())
}

fn draw_lines<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, c: &LineChart) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
    let (xlo, xhi) = finite_range(c.series.iter().flat_map(|(_, p)| p.iter().map(|p| p.0)), c.log_x);
    let (ylo, yhi) = finite_range(c.series.iter().flat_map(|(_, p)| p.iter().map(|p| p.1)), c.log_y);
    let (xlo, xhi) = if c.log_x { (xlo, xhi) } else { (xlo.min(0.0), xhi / 1.15) };
    let mut builder = ChartBuilder::on(root);
    builder.caption(&c.title, ("sans-serif", 22)).margin(12).x_label_area_size(50).y_label_area_size(80);
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(&c.x_label)
                .y_desc(&c.y_label)
                .label_style(("sans-serif", 15))
                .draw()
                .map_err(|e| anyhow!("{e:?}"))?;
            for (si, (name, pts)) in c.series.iter().enumerate() {
                let color = PALETTE[si % PALETTE.len()];
                let pts: Vec<(f64, f64)> = pts
                    .iter()
                    .copied()
                    .filter(|(x, y)| x.is_finite() && y.is_finite() && (!c.log_y || *y > 0.0))
                    .collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
                    .map_err(|e| anyhow!("{e:?}"))?
                    .label(name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
                chart
                    .draw_series(pts.into_iter().map(|p| Circle::new(p, 3, color.filled())))
                    .map_err(|e| anyhow!("{e:?}"))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .label_font(("sans-serif", 15))
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| anyhow!("{e:?}"))?;
        }};
    }
    match (c.log_x, c.log_y) {
        (false, false) => {
            body!(builder.build_cartesian_2d(xlo..xhi, ylo..yhi).map_err(|e| anyhow!("{e:?}"))?)
        }
        (false, true) => {
            body!(builder.build_cartesian_2d(xlo..xhi, (ylo..yhi).log_scale()).map_err(|e| anyhow!("{e:?}"))?)
        }
        (true, false) => {
            body!(builder.build_cartesian_2d((xlo..xhi).log_scale(), ylo..yhi).map_err(|e| anyhow!("{e:?}"))?)
        }
        (true, true) => body!(
            builder
                .build_cartesian_2d((xlo..xhi).log_scale(), (ylo..yhi).log_scale())
                .map_err(|e| anyhow!("{e:?}"))?
        ),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_png_and_svg_without_system_fonts() {
        let dir = std::env::temp_dir().join(format!("dyncore-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let stem = dir.join("bars");
        write_bar_chart(
            &stem,
            &BarChart {
                title: "t".into(),
                y_label: "ns".into(),
                categories: vec!["a".into(), "b".into()],
                series: vec![Series { name: "s".into(), values: vec![1.0, f64::NAN] }],
                log_y: true,
            },
        )
        .unwrap();
        let png = std::fs::read(stem.with_extension("png")).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let svg = std::fs::read_to_string(stem.with_extension("svg")).unwrap();
        assert!(svg.contains("<svg"));
        let stem = dir.join("lines");
        write_line_chart(
            &stem,
            &LineChart {
                title: "t".into(),
                x_label: "x".into(),
                y_label: "y".into(),
                series: vec![("s".into(), vec![(1.0, 2.0), (2.0, 3.0)])],
                log_x: false,
                log_y: false,
            },
        )
        .unwrap();
        assert!(stem.with_extension("png").exists());
        std::fs::remove_dir_all(&dir).ok();
    }
}
