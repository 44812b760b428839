//! Plots for reports: grouped bar charts and line charts, each written as PNG
//! and SVG side by side.
//!
//! plotters is built without its default font backend (which looks for system
//! fonts and panics on machines that have none); the DejaVu Sans face is
//! bundled in `assets/` and registered once, so plots render the same on every
//! machine.

use std::path::Path;
use std::sync::Once;

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

/// A stacked step chart: values hold from one time to the next, and the
/// series are stacked (for CPU allocations over time).
#[derive(Debug, Clone)]
pub struct StackedChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// Step boundaries: value `i` of a series holds over `xs[i]..xs[i + 1]`.
    pub xs: Vec<f64>,
    /// One value per step (`xs.len() - 1` of them) per series.
    pub series: Vec<(String, Vec<f64>)>,
    /// Drawn as a dashed line across the chart (e.g. the CPUs available).
    pub capacity: Option<f64>,
}

/// A chart that can draw itself on any plotters backend.
pub trait Chart {
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

impl Chart for StackedChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        draw_stacked(root, self)
    }
}

const SIZE: (u32, u32) = (1000, 560);

/// Writes `chart` to `<stem>.png` and `<stem>.svg`, from the same drawing
/// code. Each is drawn into `<stem>.tmp.<ext>` (plotters picks the image
/// format from the extension) and renamed, so no plot is ever half-written.
pub fn write_chart(stem: &Path, chart: &impl Chart) -> Result<()> {
    register_font();
    let (png, tmp) = (stem.with_extension("png"), stem.with_extension("tmp.png"));
    let root = BitMapBackend::new(&tmp, SIZE).into_drawing_area();
    chart.draw(&root).with_context(|| format!("drawing {}", png.display()))?;
    root.present().map_err(|e| anyhow!("writing {}: {e}", tmp.display()))?;
    drop(root);
    std::fs::rename(&tmp, &png).with_context(|| format!("renaming to {}", png.display()))?;
    let (svg, tmp) = (stem.with_extension("svg"), stem.with_extension("tmp.svg"));
    let root = SVGBackend::new(&tmp, SIZE).into_drawing_area();
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

fn draw_stacked<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, c: &StackedChart) -> Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow!("{e:?}"))?;
    let steps = c.xs.len().saturating_sub(1);
    let total = |i: usize| c.series.iter().map(|(_, v)| v.get(i).copied().unwrap_or(0.0)).sum::<f64>();
    let top = (0..steps).map(total).fold(c.capacity.unwrap_or(0.0), f64::max).max(1.0);
    let (xlo, xhi) = (c.xs.first().copied().unwrap_or(0.0), c.xs.last().copied().unwrap_or(1.0).max(1e-9));
    let mut chart = ChartBuilder::on(root)
        .caption(&c.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(50)
        .y_label_area_size(70)
        .build_cartesian_2d(xlo..xhi, 0.0..top * 1.25)
        .map_err(|e| anyhow!("{e:?}"))?;
    // Whole numbers on y when the values are counts.
    let y_ticks = if top <= 32.0 { (top * 1.25).ceil() as usize + 1 } else { 10 };
    chart
        .configure_mesh()
        .x_desc(&c.x_label)
        .y_desc(&c.y_label)
        .y_labels(y_ticks)
        .y_label_formatter(&|y: &f64| {
            if (y - y.round()).abs() < 1e-6 { format!("{y:.0}") } else { String::new() }
        })
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(|e| anyhow!("{e:?}"))?;
    let mut base = vec![0.0; steps];
    for (si, (name, vals)) in c.series.iter().enumerate() {
        let color = PALETTE[si % PALETTE.len()];
        let rects: Vec<_> = (0..steps)
            .filter(|&i| vals.get(i).copied().unwrap_or(0.0) > 0.0)
            .map(|i| {
                let v = vals[i];
                Rectangle::new([(c.xs[i], base[i]), (c.xs[i + 1], base[i] + v)], color.mix(0.85).filled())
            })
            .collect();
        for (i, b) in base.iter_mut().enumerate() {
            *b += vals.get(i).copied().unwrap_or(0.0);
        }
        chart
            .draw_series(rects)
            .map_err(|e| anyhow!("{e:?}"))?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
    }
    if let Some(cap) = c.capacity {
        chart
            .draw_series(DashedLineSeries::new(vec![(xlo, cap), (xhi, cap)], 6, 4, BLACK.stroke_width(1)))
            .map_err(|e| anyhow!("{e:?}"))?
            .label(format!("{cap:.0} CPUs"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| anyhow!("{e:?}"))?;
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
        std::fs::remove_dir_all(&dir).ok();
    }
}
