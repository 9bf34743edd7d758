//! Drawing: paints a [`Figure`] with plotters as an SVG document or PNG bytes, or as a small
//! SVG saying why it cannot be drawn, and shows it in an evcxr notebook.

use plotters::backend::{BitMapBackend, DrawingBackend, SVGBackend};
use plotters::coord::Shift;
use plotters::drawing::{DrawingArea, DrawingAreaErrorKind, IntoDrawingArea};
use plotters::element::{PathElement, Rectangle, Text};
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{Color, FontTransform, IntoFont, RGBColor};

use attention_lab::html;

use crate::colormap::{cell_colour, text_colour, viridis, BACKGROUND, INK};
use crate::error::{draw_error, PlotError};
use crate::figure::Figure;
use crate::font::{FAMILY, LABEL_SIZE, PANEL_TITLE_SIZE, TICK_SIZE, TITLE_SIZE};
use crate::layout::{Layout, BAR_WIDTH, GAP, MARGIN};
use crate::values::{format_value, ticks};

/// The colour bar is drawn as this many strips of one colour each.
const BAR_STRIPS: i32 = 64;

impl Figure {
    /// The figure as an SVG document.
    ///
    /// # Errors
    /// [`PlotError::EmptyMatrix`], [`PlotError::NoHeads`], [`PlotError::LabelCount`] or
    /// [`PlotError::BadRange`] when the figure cannot be drawn.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let err = heatmap(&array![[1.0]]).labels(&["a", "b"]).render_svg().unwrap_err();
    /// assert_eq!(err.to_string(), "2 row labels for a matrix with 1 rows");
    /// ```
    pub fn render_svg(&self) -> Result<String, PlotError> {
        let lay = self.layout()?;
        let mut svg = String::new();
        {
            let root =
                SVGBackend::with_string(&mut svg, (lay.width, lay.height)).into_drawing_area();
            self.paint(&lay, &root, 1).map_err(draw_error)?;
            root.present().map_err(draw_error)?;
        }
        Ok(svg)
    }

    /// The figure as an SVG document; a figure that cannot be drawn (see
    /// [`Figure::render_svg`]) gives a small SVG stating why, so a notebook shows the reason.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let svg = heatmap(&array![[0.1, 0.9]]).to_svg();
    /// assert!(svg.starts_with("<svg") && svg.contains("0.90"));
    /// assert!(heatmap(&Array2::zeros((0, 0))).to_svg().contains("empty matrix"));
    /// ```
    pub fn to_svg(&self) -> String {
        self.render_svg()
            .unwrap_or_else(|e| error_svg(&e.to_string()))
    }

    /// The figure as PNG file bytes (8-bit RGB), [`Figure::png_scale`] times the size of
    /// the SVG (twice by default, sharp on high-density screens and in print); text is in
    /// the embedded DejaVu Sans.
    ///
    /// # Errors
    /// As [`Figure::render_svg`], and [`PlotError::Encode`] should the encoder fail.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let png = heatmap(&array![[0.2, 0.8]]).to_png()?;
    /// assert_eq!(&png[1..4], b"PNG");
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn to_png(&self) -> Result<Vec<u8>, PlotError> {
        let lay = self.layout()?;
        let zoom = self.png_scale;
        let (w, h) = (lay.width * zoom, lay.height * zoom);
        let mut rgb = vec![0u8; w as usize * h as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
            self.paint(&lay, &root, zoom as i32).map_err(draw_error)?;
            root.present().map_err(draw_error)?;
        }
        let mut bytes = Vec::new();
        let mut encoder = png::Encoder::new(&mut bytes, w, h);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let encode = |e: png::EncodingError| PlotError::Encode(e.to_string());
        let mut writer = encoder.write_header().map_err(encode)?;
        writer.write_image_data(&rgb).map_err(encode)?;
        writer.finish().map_err(encode)?;
        Ok(bytes)
    }

    /// Shows the figure in an evcxr Jupyter notebook (evcxr calls this for a cell's value).
    ///
    /// Prints the SVG as `text/html`: inline SVG renders in Jupyter Notebook, JupyterLab and
    /// VS Code, and still shows when a saved notebook is reopened untrusted (JupyterLab
    /// refuses untrusted `image/svg+xml` outputs but keeps sanitised HTML, SVG included).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// heatmap(&array![[0.5, 0.5]]).evcxr_display(); // prints EVCXR_BEGIN_CONTENT text/html …
    /// ```
    pub fn evcxr_display(&self) {
        println!(
            "EVCXR_BEGIN_CONTENT text/html\n{}\nEVCXR_END_CONTENT",
            self.to_svg().trim_end()
        );
    }

    /// Draws the figure on any plotters backend, every length times `zoom`.
    fn paint<DB: DrawingBackend>(
        &self,
        lay: &Layout,
        root: &DrawingArea<DB, Shift>,
        zoom: i32,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let pen = Pen { root, zoom };
        root.fill(&BACKGROUND)?;
        let centre = Pos::new(HPos::Center, VPos::Center);
        if let Some(t) = &self.title {
            let at = (lay.width as i32 / 2, MARGIN + lay.title_h / 2);
            pen.text(t, at, TITLE_SIZE, INK, centre, false)?;
        }
        let top = MARGIN + lay.title_h;
        let c = lay.cell;
        for (k, panel) in self.panels.iter().enumerate() {
            let px = MARGIN + (k % lay.grid_columns) as i32 * (lay.panel_w + GAP);
            let py = top + (k / lay.grid_columns) as i32 * (lay.panel_h + GAP);
            let (mx, my) = (px + lay.row_label_w, py + lay.panel_title_h);
            let (rows, cols) = panel.matrix.dim();
            let (w, h) = (cols as i32 * c, rows as i32 * c);
            if let Some(t) = &panel.title {
                let at = (mx + w / 2, py + lay.panel_title_h / 2);
                pen.text(t, at, PANEL_TITLE_SIZE, INK, centre, false)?;
            }
            for ((i, j), &v) in panel.matrix.indexed_iter() {
                let (x, y) = (mx + j as i32 * c, my + i as i32 * c);
                let fill = cell_colour(v, lay.lo, lay.hi);
                pen.rect((x, y), (x + c, y + c), fill, true)?;
                if let Some(size) = lay.value_size {
                    let text = format_value(v, self.decimals);
                    let at = (x + c / 2, y + c / 2);
                    pen.text(&text, at, size, text_colour(fill), centre, false)?;
                }
            }
            pen.rect((mx, my), (mx + w, my + h), INK, false)?;
            let right = Pos::new(HPos::Right, VPos::Center);
            for (i, l) in self.row_labels.iter().flatten().enumerate() {
                let at = (mx - 6, my + i as i32 * c + c / 2);
                pen.text(l, at, LABEL_SIZE, INK, right, false)?;
            }
            let below = Pos::new(HPos::Center, VPos::Top);
            let (pos, upright) = if lay.col_labels_rotated {
                (right, true)
            } else {
                (below, false)
            };
            for (j, l) in self.col_labels.iter().flatten().enumerate() {
                let at = (mx + j as i32 * c + c / 2, my + h + 6);
                pen.text(l, at, LABEL_SIZE, INK, pos, upright)?;
            }
        }
        if let Some((bx, by, bh)) = lay.bar {
            for s in 0..BAR_STRIPS {
                let y0 = by + (s * bh) / BAR_STRIPS;
                let y1 = by + ((s + 1) * bh) / BAR_STRIPS;
                let (r, g, b) = viridis(1.0 - (s as f64 + 0.5) / BAR_STRIPS as f64);
                pen.rect((bx, y0), (bx + BAR_WIDTH, y1), RGBColor(r, g, b), true)?;
            }
            pen.rect((bx, by), (bx + BAR_WIDTH, by + bh), INK, false)?;
            let left = Pos::new(HPos::Left, VPos::Center);
            for (f, text) in ticks(lay.lo, lay.hi, self.decimals) {
                let y = by + ((1.0 - f) * bh as f64).round() as i32;
                pen.rect((bx + BAR_WIDTH, y), (bx + BAR_WIDTH + 5, y), INK, false)?;
                pen.text(&text, (bx + BAR_WIDTH + 8, y), TICK_SIZE, INK, left, false)?;
            }
        }
        Ok(())
    }
}

/// Draws in figure units on a backend whose pixels are `zoom` times smaller.
struct Pen<'a, DB: DrawingBackend> {
    root: &'a DrawingArea<DB, Shift>,
    zoom: i32,
}

impl<DB: DrawingBackend> Pen<'_, DB> {
    /// A filled rectangle, or its outline (a line when it is flat).
    fn rect(
        &self,
        (x0, y0): (i32, i32),
        (x1, y1): (i32, i32),
        colour: RGBColor,
        filled: bool,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let z = self.zoom;
        let corners = [(x0 * z, y0 * z), (x1 * z, y1 * z)];
        if filled {
            self.root.draw(&Rectangle::new(corners, colour.filled()))
        } else if y0 == y1 {
            let line = PathElement::new(corners.to_vec(), colour.stroke_width(z as u32));
            self.root.draw(&line)
        } else {
            self.root
                .draw(&Rectangle::new(corners, colour.stroke_width(z as u32)))
        }
    }

    /// Text anchored at `pos`, read bottom to top when `upright`.
    fn text(
        &self,
        text: &str,
        (x, y): (i32, i32),
        size: f64,
        colour: RGBColor,
        pos: Pos,
        upright: bool,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let z = self.zoom;
        let mut style = (FAMILY, size * z as f64)
            .into_font()
            .color(&colour)
            .pos(pos);
        if upright {
            style = style.transform(FontTransform::Rotate270);
        }
        self.root
            .draw(&Text::new(text.to_string(), (x * z, y * z), style))
    }
}

/// A small SVG that says why a figure could not be drawn.
fn error_svg(message: &str) -> String {
    let escaped = html::escape(message);
    let width = 40 + 9 * (message.chars().count() + 12);
    format!(
        "<svg width=\"{width}\" height=\"40\" viewBox=\"0 0 {width} 40\" \
         xmlns=\"http://www.w3.org/2000/svg\">\n<text x=\"10\" y=\"25\" font-family=\"sans-serif\" \
         font-size=\"14\" fill=\"#b00020\">plot error: {escaped}</text>\n</svg>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::error_svg;

    #[test]
    fn error_svgs_escape_the_message_and_are_as_wide_as_it() {
        let svg = error_svg("a <b> & c");
        assert!(
            svg.contains(">plot error: a &lt;b&gt; &amp; c</text>"),
            "{svg}"
        );
        // 9 pixels a character of "plot error: " and the message, and 40 more.
        assert!(svg.starts_with("<svg width=\"229\" height=\"40\""), "{svg}");
    }
}
