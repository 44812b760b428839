//! Text for the PNG plots, placed glyph by glyph from the font's own metrics.
//!
//! plotters' bitmap text (its `ab_glyph` font backend) drops each glyph's
//! left side bearing and truncates the pen position to whole pixels, so
//! words come out with uneven gaps ("parall el", "0. 01"). [`CrispText`]
//! wraps any backend and draws text itself: every glyph is positioned at its
//! fractional pen position plus kerning and rasterised with its bounds, and
//! the anchor is placed with the font's ascent and descent. Everything other
//! than text is passed through untouched, so the same chart code draws both
//! the PNG (through this wrapper) and the SVG (whose text the viewer sets).

use std::sync::OnceLock;

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{
    BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind,
};

fn font() -> &'static FontRef<'static> {
    static FONT: OnceLock<FontRef<'static>> = OnceLock::new();
    // The bundled font is a valid TrueType file; failure here is a build defect.
    FONT.get_or_init(|| FontRef::try_from_slice(super::FONT_BYTES).expect("bundled DejaVuSans.ttf must load"))
}

/// Horizontal layout of one line: each glyph's pen position, and the width.
struct Line {
    glyphs: Vec<(ab_glyph::GlyphId, f32)>,
    width: f32,
}

fn layout(text: &str, size: f32) -> Line {
    let f = font().as_scaled(PxScale::from(size));
    let mut glyphs = Vec::with_capacity(text.len());
    let mut pen = 0.0_f32;
    let mut prev = None;
    for c in text.chars() {
        let id = f.glyph_id(c);
        if let Some(p) = prev {
            pen += f.kern(p, id);
        }
        glyphs.push((id, pen));
        pen += f.h_advance(id);
        prev = Some(id);
    }
    Line { glyphs, width: pen }
}

/// Width in pixels of `text` set at `size` pixels: the same measure for the
/// PNG and the SVG, so both get the same layout.
pub fn text_width(text: &str, size: f64) -> f64 {
    f64::from(layout(text, size as f32).width)
}

/// A backend whose text is set glyph by glyph from the bundled font (see the
/// module doc); every other call goes to the wrapped backend.
pub struct CrispText<DB>(pub DB);

impl<DB: DrawingBackend> DrawingBackend for CrispText<DB> {
    type ErrorType = DB::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.0.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.present()
    }

    fn draw_pixel(
        &mut self,
        p: BackendCoord,
        c: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_pixel(p, c)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.0.blit_bitmap(pos, size, src)
    }

    fn estimate_text_size<S: BackendTextStyle>(
        &self,
        text: &str,
        style: &S,
    ) -> Result<(u32, u32), DrawingErrorKind<Self::ErrorType>> {
        let size = style.size() as f32;
        Ok((layout(text, size).width.ceil() as u32, size.ceil() as u32))
    }

    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let size = style.size() as f32;
        let f = font().as_scaled(PxScale::from(size));
        let line = layout(text, size);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0.0,
            HPos::Center => -line.width / 2.0,
            HPos::Right => -line.width,
        };
        // Baseline below the anchor point; Center centres the box from the
        // descent to the ascent on it.
        let baseline = match style.anchor().v_pos {
            VPos::Top => f.ascent(),
            VPos::Center => (f.ascent() + f.descent()) / 2.0,
            VPos::Bottom => f.descent(),
        };
        let trans = style.transform();
        let (w, h) = self.get_size();
        let mut pixels = Vec::new();
        for (id, pen) in line.glyphs {
            let glyph = id.with_scale_and_position(PxScale::from(size), point(dx + pen, baseline));
            let Some(outline) = font().outline_glyph(glyph) else { continue };
            let b = outline.px_bounds();
            outline.draw(|x, y, coverage| {
                if coverage > 0.0 {
                    pixels.push((b.min.x as i32 + x as i32, b.min.y as i32 + y as i32, coverage));
                }
            });
        }
        for (x, y, coverage) in pixels {
            let (x, y) = trans.transform(x, y);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && y >= 0 && (x as u32) < w && (y as u32) < h {
                let c = BackendColor { alpha: color.alpha * f64::from(coverage.min(1.0)), rgb: color.rgb };
                self.0.draw_pixel((x, y), c)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plotters::prelude::*;
    use plotters::style::text_anchor::Pos;

    /// Ink bounding box (x0, y0, x1, y1) of `text` drawn at `at` with `anchor`.
    fn ink(
        text: &str,
        at: (i32, i32),
        anchor: (HPos, VPos),
        transform: FontTransform,
        size: f64,
    ) -> (i32, i32, i32, i32) {
        // CrispText needs no registered font, but the same drawing through
        // plotters' own text (to see this test fail without CrispText) does.
        crate::plot::register_font();
        let (w, h) = (200u32, 200u32);
        let mut buf = vec![255u8; (w * h * 3) as usize];
        {
            let root = CrispText(BitMapBackend::with_buffer(&mut buf, (w, h))).into_drawing_area();
            let style = ("sans-serif", size)
                .into_font()
                .transform(transform)
                .color(&BLACK)
                .pos(Pos::new(anchor.0, anchor.1));
            root.draw(&Text::new(text.to_string(), at, style)).unwrap();
            root.present().unwrap();
        }
        let (mut x0, mut y0, mut x1, mut y1) = (i32::MAX, i32::MAX, i32::MIN, i32::MIN);
        for y in 0..h as i32 {
            for x in 0..w as i32 {
                if buf[((y as u32 * w + x as u32) * 3) as usize] < 128 {
                    (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
                }
            }
        }
        (x0, y0, x1, y1)
    }

    #[test]
    fn anchors_place_the_ink_where_asked() {
        // Centred both ways: digits sit on the point to within 2 px.
        let (x0, y0, x1, y1) =
            ink("0.50", (100, 100), (HPos::Center, VPos::Center), FontTransform::None, 20.0);
        assert!(((x0 + x1) / 2 - 100).abs() <= 2, "{x0}..{x1}");
        assert!(((y0 + y1) / 2 - 100).abs() <= 2, "{y0}..{y1}");
        // Right-aligned: the ink ends at the point (a tick label).
        let (_, _, x1, _) = ink("25", (100, 100), (HPos::Right, VPos::Center), FontTransform::None, 20.0);
        assert!((95..=100).contains(&x1), "{x1}");
        // Top-anchored: the ink starts just below the point.
        let (_, y0, _, _) = ink("Ag", (100, 100), (HPos::Left, VPos::Top), FontTransform::None, 20.0);
        assert!((100..=106).contains(&y0), "{y0}");
        // Rotated to read upwards, right end at the point: the ink hangs below it.
        let (x0, y0, x1, y1) =
            ink("label", (100, 60), (HPos::Right, VPos::Center), FontTransform::Rotate270, 20.0);
        assert!(y0 >= 58 && y1 > y0 + 30 && ((x0 + x1) / 2 - 100).abs() <= 3, "{x0},{y0} {x1},{y1}");
    }

    /// Each glyph keeps its left side bearing and fractional pen position
    /// (plotters' own bitmap text starts every glyph's ink at the pen,
    /// which is what spaced words unevenly): "l" at 40 px inks from about
    /// 50 + its bearing, and "il" puts the "l" one advance of "i" later.
    #[test]
    fn glyphs_keep_their_bearings() {
        let f = font().as_scaled(PxScale::from(40.0));
        let bearing = f.h_side_bearing(f.glyph_id('l'));
        assert!(bearing >= 2.0, "DejaVu's l has a visible bearing at 40 px: {bearing}");
        let (x0, _, _, _) = ink("l", (50, 100), (HPos::Left, VPos::Center), FontTransform::None, 40.0);
        assert!((x0 as f32 - (50.0 + bearing)).abs() <= 1.0, "ink at {x0}, bearing {bearing}");
        let (_, _, x1_l, _) = ink("l", (50, 100), (HPos::Left, VPos::Center), FontTransform::None, 40.0);
        let (_, _, x1_il, _) = ink("il", (50, 100), (HPos::Left, VPos::Center), FontTransform::None, 40.0);
        let l = layout("il", 40.0);
        assert!(
            ((x1_il - x1_l) as f32 - l.glyphs[1].1).abs() <= 1.0,
            "{} vs {}",
            x1_il - x1_l,
            l.glyphs[1].1
        );
    }
}
