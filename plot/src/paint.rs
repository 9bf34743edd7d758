//! Drawing: paints a [`Figure`] or a [`LinePlot`] with plotters as an SVG document or PNG
//! bytes, or as a small SVG saying why it cannot be drawn, and shows it in an evcxr notebook.

use plotters::backend::{BitMapBackend, DrawingBackend, SVGBackend};
use plotters::coord::Shift;
use plotters::drawing::{DrawingArea, DrawingAreaErrorKind, IntoDrawingArea};
use plotters::element::{PathElement, Rectangle, Text};
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{Color, FontTransform, IntoFont, RGBColor};

use attention_lab::html;

use crate::colormap::{cell_colour, text_colour, viridis, BACKGROUND, GRID, INK, SERIES};
use crate::error::{draw_error, PlotError};
use crate::figure::Figure;
use crate::font::{FAMILY, LABEL_SIZE, PANEL_TITLE_SIZE, TICK_SIZE, TITLE_SIZE};
use crate::head_view::HeadView;
use crate::layout::{Layout, LinesLayout, BAR_WIDTH, GAP, MARGIN, SAMPLE_LENGTH, TICK_LENGTH};
use crate::lines::LinePlot;
use crate::model_view::ModelView;
use crate::neuron_view::NeuronView;
use crate::scene::{num, svg_img, Anchor, Item, Scene};
use crate::values::{format_value, ticks};

/// The most pixels a PNG may have (its RGB buffer is 3 bytes a pixel).
const MAX_PNG_PIXELS: u64 = 50_000_000;

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
        render_svg(self)
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
        to_svg(self)
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
        to_png(self)
    }

    /// Shows the figure in an evcxr Jupyter notebook (evcxr calls this for a cell's value).
    ///
    /// Prints `text/html` holding an `<img>` whose source is the SVG (a `data:` URI): it
    /// renders in Jupyter Notebook, JupyterLab and VS Code, and still shows when a saved
    /// notebook is reopened untrusted (JupyterLab 4 then refuses `image/svg+xml` outputs and
    /// strips `<svg>` elements from HTML, but keeps images with `data:` sources).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// heatmap(&array![[0.5, 0.5]]).evcxr_display(); // prints EVCXR_BEGIN_CONTENT text/html …
    /// ```
    pub fn evcxr_display(&self) {
        evcxr_display(self);
    }
}

/// What every kind of picture (a heatmap [`Figure`], a [`LinePlot`]) has, so that one piece of
/// code turns any of them into SVG, PNG, a notebook display and files.
pub(crate) trait Picture {
    /// The picture's geometry, computed once per drawing.
    type Layout;
    /// Checks the picture and computes its geometry.
    fn layout(&self) -> Result<Self::Layout, PlotError>;
    /// The size in pixels (the SVG's) of a picture with this geometry.
    fn size_of(lay: &Self::Layout) -> (u32, u32);
    /// How many times larger than the SVG its PNG pictures are.
    fn png_scale(&self) -> u32;
    /// How large it is shown: its SVG's width and height are this many times its drawing's,
    /// and its PNG's this times `png_scale` (rounded).
    fn scale(&self) -> f64 {
        1.0
    }
    /// Draws the picture on any plotters backend, every length times `zoom`.
    fn paint<DB: DrawingBackend>(
        &self,
        lay: &Self::Layout,
        root: &DrawingArea<DB, Shift>,
        zoom: i32,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>;
}

/// The picture as an SVG document, or why it cannot be drawn.
pub(crate) fn render_svg<P: Picture>(picture: &P) -> Result<String, PlotError> {
    let lay = picture.layout()?;
    let mut svg = String::new();
    let (w, h) = P::size_of(&lay);
    {
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        picture.paint(&lay, &root, 1).map_err(draw_error)?;
        root.present().map_err(draw_error)?;
    }
    // Shown `scale` times as large: the width and height change, the viewBox stays.
    let scale = picture.scale();
    let drawn = format!("<svg width=\"{w}\" height=\"{h}\" ");
    if scale != 1.0 && svg.starts_with(&drawn) {
        let (sw, sh) = (num(w as f64 * scale), num(h as f64 * scale));
        svg.replace_range(
            ..drawn.len(),
            &format!("<svg width=\"{sw}\" height=\"{sh}\" "),
        );
    }
    Ok(svg)
}

/// How many PNG pixels a picture's pixel is ([`crate::values::zoom`]).
pub(crate) fn png_zoom<P: Picture>(picture: &P) -> u32 {
    crate::values::zoom(picture.png_scale(), picture.scale())
}

/// The picture as an SVG document, or a small SVG stating why it cannot be drawn.
pub(crate) fn to_svg<P: Picture>(picture: &P) -> String {
    render_svg(picture).unwrap_or_else(|e| error_svg(&e.to_string()))
}

/// The picture as PNG file bytes (8-bit RGB), `png_scale` times the SVG's size.
pub(crate) fn to_png<P: Picture>(picture: &P) -> Result<Vec<u8>, PlotError> {
    let lay = picture.layout()?;
    let mut paint = |root: &BitmapArea<'_>, zoom: i32| picture.paint(&lay, root, zoom);
    bitmap_png(P::size_of(&lay), png_zoom(picture), &mut paint)
}

type BitmapArea<'b> = DrawingArea<BitMapBackend<'b>, Shift>;
type BitmapResult<'b> =
    Result<(), DrawingAreaErrorKind<<BitMapBackend<'b> as DrawingBackend>::ErrorType>>;

/// Paints on an RGB bitmap of `size` times `zoom` and encodes it as PNG. Not generic, so one
/// copy serves every kind of picture (each copy costs a notebook's first cell build time).
fn bitmap_png(
    (w, h): (u32, u32),
    zoom: u32,
    paint: &mut dyn for<'b> FnMut(&BitmapArea<'b>, i32) -> BitmapResult<'b>,
) -> Result<Vec<u8>, PlotError> {
    let (width, height) = (w as u64 * zoom as u64, h as u64 * zoom as u64);
    // The RGB buffer is allocated whole: refuse what would exhaust memory.
    if width * height > MAX_PNG_PIXELS {
        return Err(PlotError::TooLarge { width, height });
    }
    let (w, h) = (width as u32, height as u32);
    let mut rgb = vec![0u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        paint(&root, zoom as i32).map_err(draw_error)?;
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

/// Prints the picture's SVG as evcxr's `text/html` content: an `<img>` of the SVG, which
/// JupyterLab still shows when the notebook is reopened untrusted.
pub(crate) fn evcxr_display<P: Picture>(picture: &P) {
    println!(
        "EVCXR_BEGIN_CONTENT text/html\n{}\nEVCXR_END_CONTENT",
        svg_img(&to_svg(picture), "alab-figure", "figure")
    );
}

impl Picture for Figure {
    type Layout = Layout;

    fn layout(&self) -> Result<Layout, PlotError> {
        Figure::layout(self)
    }

    fn size_of(lay: &Layout) -> (u32, u32) {
        (lay.width, lay.height)
    }

    fn png_scale(&self) -> u32 {
        self.png_scale
    }

    fn scale(&self) -> f64 {
        self.scale
    }

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
            // Labels are shared: the rows' left of a grid row, the columns' under a panel
            // with none below it.
            let first = k % lay.grid_columns == 0;
            let last = k + lay.grid_columns >= self.panels.len();
            let px = MARGIN + lay.row_label_w + (k % lay.grid_columns) as i32 * (lay.panel_w + GAP);
            let py = top + (k / lay.grid_columns) as i32 * (lay.panel_h + GAP);
            let (mx, my) = (px, py + lay.panel_title_h);
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
            let rows_labelled = if first {
                self.row_labels.as_deref()
            } else {
                None
            };
            for (i, l) in rows_labelled.unwrap_or_default().iter().enumerate() {
                let at = (mx - 6, my + i as i32 * c + c / 2);
                pen.text(l, at, LABEL_SIZE, INK, right, false)?;
            }
            let below = Pos::new(HPos::Center, VPos::Top);
            let (pos, upright) = if lay.col_labels_rotated {
                (right, true)
            } else {
                (below, false)
            };
            let columns_labelled = if last {
                self.col_labels.as_deref()
            } else {
                None
            };
            for (j, l) in columns_labelled.unwrap_or_default().iter().enumerate() {
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

impl LinePlot {
    /// The plot as an SVG document.
    ///
    /// # Errors
    /// [`PlotError::NoSeries`], [`PlotError::NoPoints`] or [`PlotError::SeriesLength`] when
    /// the plot cannot be drawn.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let err = line_plot(&[0.0, 1.0]).render_svg().unwrap_err();
    /// assert_eq!(err.to_string(), "a line plot needs at least one series");
    /// ```
    pub fn render_svg(&self) -> Result<String, PlotError> {
        render_svg(self)
    }

    /// The plot as an SVG document; a plot that cannot be drawn (see
    /// [`LinePlot::render_svg`]) gives a small SVG stating why, so a notebook shows the
    /// reason.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let svg = line_plot(&[0.0, 10.0]).series("a", &[0.0, 1.0]).to_svg();
    /// assert!(svg.starts_with("<svg") && svg.contains("<polyline"));
    /// assert!(line_plot(&[0.0]).to_svg().contains("plot error: a line plot needs"));
    /// ```
    pub fn to_svg(&self) -> String {
        to_svg(self)
    }

    /// The plot as PNG file bytes (8-bit RGB), [`LinePlot::png_scale`] times the size of the
    /// SVG; text is in the embedded DejaVu Sans.
    ///
    /// # Errors
    /// As [`LinePlot::render_svg`], and [`PlotError::Encode`] should the encoder fail.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let png = line_plot(&[0.0, 1.0]).series("a", &[0.0, 1.0]).to_png()?;
    /// assert_eq!(&png[1..4], b"PNG");
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn to_png(&self) -> Result<Vec<u8>, PlotError> {
        to_png(self)
    }

    /// Shows the plot in an evcxr Jupyter notebook as an image of its SVG (`text/html`), as
    /// [`Figure::evcxr_display`] does.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// line_plot(&[0.0, 1.0]).series("a", &[0.0, 1.0]).evcxr_display(); // prints EVCXR_BEGIN_CONTENT text/html …
    /// ```
    pub fn evcxr_display(&self) {
        evcxr_display(self);
    }
}

impl Picture for LinePlot {
    type Layout = LinesLayout;

    fn layout(&self) -> Result<LinesLayout, PlotError> {
        LinePlot::layout(self)
    }

    fn size_of(lay: &LinesLayout) -> (u32, u32) {
        (lay.width, lay.height)
    }

    fn png_scale(&self) -> u32 {
        self.png_scale
    }

    #[allow(
        clippy::too_many_lines,
        reason = "the line plot's layers in painting order (grid, series, frame, ticks), one drawing area"
    )]
    fn paint<DB: DrawingBackend>(
        &self,
        lay: &LinesLayout,
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
        let (left, top, w, h) = (lay.left, lay.top, lay.plot_w, lay.plot_h);
        let (right, bottom) = (left + w, top + h);
        let px = |v: f64| left as f64 + lay.x.fraction(v) * w as f64;
        let py = |v: f64| bottom as f64 - lay.y.fraction(v) * h as f64;
        // Grid lines first, under the series; then the series, the frame and the ticks.
        let x_ticks: Vec<(i32, &String)> = lay
            .x
            .ticks
            .iter()
            .map(|(f, t)| (left + (f * w as f64).round() as i32, t))
            .collect();
        let y_ticks: Vec<(i32, &String)> = lay
            .y
            .ticks
            .iter()
            .map(|(f, t)| (bottom - (f * h as f64).round() as i32, t))
            .collect();
        for &(x, _) in &x_ticks {
            pen.line(
                &[(x as f64, top as f64), (x as f64, bottom as f64)],
                GRID,
                1,
            )?;
        }
        for &(y, _) in &y_ticks {
            pen.line(
                &[(left as f64, y as f64), (right as f64, y as f64)],
                GRID,
                1,
            )?;
        }
        for (k, series) in self.series.iter().enumerate() {
            let colour = SERIES[k % SERIES.len()];
            // A point that is not finite breaks the line.
            let points = self
                .x
                .iter()
                .zip(&series.y)
                .map(|(&x, &y)| (x.is_finite() && y.is_finite()).then(|| (px(x), py(y))));
            let mut run = Vec::new();
            for point in points.chain([None]) {
                match point {
                    Some(p) => run.push(p),
                    None => {
                        if run.len() > 1 {
                            pen.line(&run, colour, 2)?;
                        }
                        run.clear();
                    }
                }
            }
        }
        pen.rect((left, top), (right, bottom), INK, false)?;
        let below = Pos::new(HPos::Center, VPos::Top);
        for &(x, t) in &x_ticks {
            let mark = [
                (x as f64, bottom as f64),
                (x as f64, (bottom + TICK_LENGTH) as f64),
            ];
            pen.line(&mark, INK, 1)?;
            pen.text(
                t,
                (x, bottom + TICK_LENGTH + 3),
                TICK_SIZE,
                INK,
                below,
                false,
            )?;
        }
        let before = Pos::new(HPos::Right, VPos::Center);
        for &(y, t) in &y_ticks {
            pen.rect((left - TICK_LENGTH, y), (left, y), INK, false)?;
            pen.text(
                t,
                (left - TICK_LENGTH - 3, y),
                TICK_SIZE,
                INK,
                before,
                false,
            )?;
        }
        if let Some(l) = &self.x_label {
            let at = (left + w / 2, bottom + lay.x_tick_h + 4);
            pen.text(l, at, LABEL_SIZE, INK, below, false)?;
        }
        if let Some(l) = &self.y_label {
            pen.text(l, (MARGIN, top + h / 2), LABEL_SIZE, INK, below, true)?;
        }
        let (lx, ly, lw, lh, entry_h) = lay.legend;
        let after = Pos::new(HPos::Left, VPos::Center);
        for (k, series) in self.series.iter().enumerate() {
            let y = ly + 4 + k as i32 * entry_h + entry_h / 2;
            let sample = [(lx + 8) as f64, (lx + 8 + SAMPLE_LENGTH) as f64];
            let colour = SERIES[k % SERIES.len()];
            pen.line(&[(sample[0], y as f64), (sample[1], y as f64)], colour, 2)?;
            let at = (lx + 16 + SAMPLE_LENGTH, y);
            pen.text(&series.name, at, LABEL_SIZE, INK, after, false)?;
        }
        pen.rect((lx, ly), (lx + lw, ly + lh), INK, false)
    }
}

/// The interactive views paint their scene.
macro_rules! scene_picture {
    ($($view:ty),*) => {$(
        impl Picture for $view {
            type Layout = Scene;

            fn layout(&self) -> Result<Scene, PlotError> {
                self.scene(false)
            }

            fn size_of(scene: &Scene) -> (u32, u32) {
                (scene.width as u32, scene.height as u32)
            }

            fn png_scale(&self) -> u32 {
                self.png_scale
            }

            fn scale(&self) -> f64 {
                self.scale
            }

            fn paint<DB: DrawingBackend>(
                &self,
                scene: &Scene,
                root: &DrawingArea<DB, Shift>,
                zoom: i32,
            ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
                root.fill(&BACKGROUND)?;
                paint_items(&scene.items, root, zoom as f64)
            }
        }

        impl $view {
            /// The view as PNG file bytes (8-bit RGB) of the current selection, `png_scale`
            /// times the size of its SVG, in the same colours; text in the embedded DejaVu Sans.
            ///
            /// # Errors
            /// As `to_svg`, and [`PlotError::Encode`] should the encoder fail.
            ///
            /// ```
            /// use attention_lab::prelude::*;
            /// use attention_lab_plot::*;
            ///
            /// let png = head_view_weights(&Array3::from_elem((1, 1, 1), 1.0), &["a"]).to_png()?;
            /// assert_eq!(&png[1..4], b"PNG");
            /// # Ok::<(), PlotError>(())
            /// ```
            pub fn to_png(&self) -> Result<Vec<u8>, PlotError> {
                to_png(self)
            }
        }
    )*};
}

scene_picture!(HeadView, ModelView, NeuronView);

/// Paints scene items (in SVG pixels) on a backend whose pixels are `zoom` times smaller.
fn paint_items<DB: DrawingBackend>(
    items: &[Item],
    root: &DrawingArea<DB, Shift>,
    zoom: f64,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let at = |(x, y): (f64, f64)| ((x * zoom).round() as i32, (y * zoom).round() as i32);
    for item in items {
        match item {
            Item::Line { hidden: true, .. } | Item::Group { hidden: true, .. } => {}
            Item::Line {
                from,
                to,
                colour,
                opacity,
                width,
                ..
            } => {
                let style = colour
                    .mix(opacity.clamp(0.0, 1.0))
                    .stroke_width((width * zoom).round().max(1.0) as u32);
                root.draw(&PathElement::new(vec![at(*from), at(*to)], style))?;
            }
            Item::Rect {
                at: corner,
                size,
                fill,
                stroke,
                ..
            } => {
                let ends = [at(*corner), at((corner.0 + size.0, corner.1 + size.1))];
                if let Some(f) = fill {
                    root.draw(&Rectangle::new(ends, f.filled()))?;
                }
                if let Some(s) = stroke {
                    root.draw(&Rectangle::new(ends, s.stroke_width(zoom as u32)))?;
                }
            }
            Item::Text {
                at: point,
                text,
                size,
                colour,
                anchor,
                ..
            } => {
                let h = match anchor {
                    Anchor::Start => HPos::Left,
                    Anchor::Middle => HPos::Center,
                    Anchor::End => HPos::Right,
                };
                let style = (FAMILY, size * zoom)
                    .into_font()
                    .color(colour)
                    .pos(Pos::new(h, VPos::Center));
                root.draw(&Text::new(text.clone(), at(*point), style))?;
            }
            Item::Raster {
                at: corner,
                size,
                cells,
                ..
            } => {
                let (rows, cols) = cells.dim();
                let (cw, ch) = (size.0 / cols as f64, size.1 / rows as f64);
                for ((i, j), c) in cells.indexed_iter() {
                    let (x, y) = (corner.0 + j as f64 * cw, corner.1 + i as f64 * ch);
                    let ends = [at((x, y)), at((x + cw, y + ch))];
                    root.draw(&Rectangle::new(ends, c.filled()))?;
                }
            }
            Item::Group { items, .. } => paint_items(items, root, zoom)?,
        }
    }
    Ok(())
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
            let ends = [(x0 as f64, y0 as f64), (x1 as f64, y1 as f64)];
            self.line(&ends, colour, 1)
        } else {
            self.root
                .draw(&Rectangle::new(corners, colour.stroke_width(z as u32)))
        }
    }

    /// A line through `points` (in figure units, rounded only once zoomed), `width` wide.
    fn line(
        &self,
        points: &[(f64, f64)],
        colour: RGBColor,
        width: u32,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let z = self.zoom as f64;
        let zoomed = points
            .iter()
            .map(|&(x, y)| ((x * z).round() as i32, (y * z).round() as i32))
            .collect::<Vec<_>>();
        let style = colour.stroke_width(width * self.zoom as u32);
        self.root.draw(&PathElement::new(zoomed, style))
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
pub(crate) fn error_svg(message: &str) -> String {
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
