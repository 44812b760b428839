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
pub mod band;
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

const SIZE: (u32, u32) = (1000, 560);

/// The PNG file of an 8-bit RGB image of `size` (the same bytes for the
/// same pixels: fixed compression and filter).
pub fn encode_png(rgb: &[u8], size: (u32, u32)) -> Result<Vec<u8>> {
    anyhow::ensure!(rgb.len() == size.0 as usize * size.1 as usize * 3, "an RGB buffer of the wrong size");
    let mut out = Vec::new();
    let mut e = png::Encoder::new(&mut out, size.0, size.1);
    e.set_color(png::ColorType::Rgb);
    e.set_depth(png::BitDepth::Eight);
    e.set_compression(png::Compression::Default);
    e.set_filter(png::FilterType::Sub);
    e.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
    let mut w = e.write_header().context("encoding a PNG")?;
    w.write_image_data(rgb).context("encoding a PNG")?;
    w.finish().context("encoding a PNG")?;
    Ok(out)
}

/// Writes `chart` to `<stem>.png` and `<stem>.svg`, from the same drawing
/// code. Each is written to `<stem>.tmp.<ext>` and renamed, so no plot is
/// ever half-written. The PNG is drawn into an RGB buffer and encoded by
/// the `png` crate ([`encode_png`]; plotters' own encoder would bring the
/// `image` crate and its JPEG decoder into the build for one format). Its
/// text is set by [`text::CrispText`] (plotters' own bitmap text spaces
/// letters unevenly).
pub fn write_chart(stem: &Path, chart: &impl Chart) -> Result<()> {
    register_font();
    let size = chart.size();
    let (png, tmp) = (stem.with_extension("png"), stem.with_extension("tmp.png"));
    let mut rgb = vec![0u8; size.0 as usize * size.1 as usize * 3];
    {
        let root = text::CrispText(BitMapBackend::with_buffer(&mut rgb, size)).into_drawing_area();
        chart.draw(&root).with_context(|| format!("drawing {}", png.display()))?;
        root.present().map_err(|e| anyhow!("drawing {}: {e}", png.display()))?;
    }
    std::fs::write(&tmp, encode_png(&rgb, size)?).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &png).with_context(|| format!("renaming to {}", png.display()))?;
    let (svg, tmp) = (stem.with_extension("svg"), stem.with_extension("tmp.svg"));
    let root = SVGBackend::new(&tmp, size).into_drawing_area();
    chart.draw(&root).with_context(|| format!("drawing {}", svg.display()))?;
    root.present().map_err(|e| anyhow!("writing {}: {e}", tmp.display()))?;
    drop(root);
    std::fs::rename(&tmp, &svg).with_context(|| format!("renaming to {}", svg.display()))?;
    Ok(())
}
