//! attention-lab-plot: attention pictures, heatmaps of attention weights (or scores), and one panel per head.
//!
//! [`heatmap`] and [`heads_grid`] return a [`Figure`], which shows inline in an evcxr Jupyter
//! notebook (it has an `evcxr_display` method), and writes SVG or PNG files. Token labels,
//! a title, a colour bar and the values written in the cells (for matrices of at most 12x12)
//! are set with builder methods. Colours come from [`viridis`]; NaN cells are light grey and
//! infinite cells red, written `nan`, `inf` and `-inf`.
//!
//! A figure that cannot be drawn (an empty matrix, label counts that are not the matrix's, a
//! bad colour range) is an error of the methods that return `Result` ([`PlotError`]), and
//! [`Figure::to_svg`], so the notebook display, draws the error's message instead: nothing
//! panics. Files are written under a temporary name in the same folder, then renamed.
//!
//! PNG pictures are twice the SVG's size by default ([`Figure::png_scale`]); their text uses
//! the DejaVu Sans font compiled into the crate (no system font is read).
//!
//! It is a crate of its own, not a module of `attention-lab`, because evcxr rebuilds a path
//! dependency in every notebook kernel: only the cells that draw should pay for plotters. In a
//! notebook: `:dep attention-lab-plot = { path = "../plot" }`, then `use attention_lab_plot::*;`.
//!
//! ```
//! use attention_lab::prelude::*;
//! use attention_lab_plot::*;
//!
//! let weights = array![[0.7, 0.3], [0.2, 0.8]];
//! let fig = heatmap(&weights).labels(&["Thinking", "Machines"]).title("weights");
//! let svg = fig.to_svg();
//! assert!(svg.contains("Thinking") && svg.contains("0.70"));
//! ```

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use ndarray::Array2;
use plotters::backend::{BitMapBackend, DrawingBackend, SVGBackend};
use plotters::coord::Shift;
use plotters::drawing::{DrawingArea, DrawingAreaErrorKind, IntoDrawingArea};
use plotters::element::{PathElement, Rectangle, Text};
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::{Color, FontTransform, IntoFont, RGBColor};

use attention_lab::heads::MultiHeadOutput;

/// The font for PNG text (and for measuring text in both formats), DejaVu Sans (see
/// assets/DejaVuSans-LICENSE.txt). SVG files name the family `sans-serif`.
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";

/// Matrices with at most this many rows and columns get their values written in the cells.
const MAX_VALUES_SIDE: usize = 12;
/// Font sizes in plotters units (an SVG `font-size` of size / 1.24 pixels).
const TITLE_SIZE: f64 = 22.0;
const PANEL_TITLE_SIZE: f64 = 18.0;
const LABEL_SIZE: f64 = 16.0;
const TICK_SIZE: f64 = 15.0;
const VALUE_SIZE: f64 = 16.0;
const MARGIN: i32 = 12;
const GAP: i32 = 24;
const BAR_WIDTH: i32 = 18;
const BAR_STRIPS: i32 = 64;
const BAR_MIN_HEIGHT: i32 = 150;
/// At most this many colour bar ticks, at round values.
const BAR_TICKS: usize = 5;
const NAN_COLOUR: RGBColor = RGBColor(200, 200, 200);
const INF_COLOUR: RGBColor = RGBColor(228, 26, 28);
const INK: RGBColor = RGBColor(0, 0, 0);
const BACKGROUND: RGBColor = RGBColor(255, 255, 255);

/// Why a figure could not be drawn or written.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let err = heatmap(&Array2::zeros((0, 3))).render_svg().unwrap_err();
/// assert_eq!(err.to_string(), "cannot plot an empty matrix: panel 1 is 0x3");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum PlotError {
    /// A panel's matrix has no rows or no columns (`panel` counts from 1).
    EmptyMatrix {
        /// Which panel, from 1.
        panel: usize,
        /// Its rows.
        rows: usize,
        /// Its columns.
        cols: usize,
    },
    /// [`heads_grid`] was given a layer output without heads.
    NoHeads,
    /// The number of row or column labels is not the matrix's.
    LabelCount {
        /// `"row"` or `"column"`.
        axis: &'static str,
        /// How many labels were given.
        labels: usize,
        /// How many rows or columns the matrix has.
        expected: usize,
    },
    /// The colour range is not an increasing pair of finite numbers.
    BadRange {
        /// Its low end.
        lo: f64,
        /// Its high end.
        hi: f64,
    },
    /// plotters could not draw (this should not happen).
    Draw(String),
    /// The PNG encoder failed (this should not happen).
    Encode(String),
    /// A file could not be written; the path is the file the caller asked for.
    Write {
        /// The file asked for.
        path: PathBuf,
        /// What went wrong.
        source: io::Error,
    },
}

impl fmt::Display for PlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlotError::EmptyMatrix { panel, rows, cols } => {
                write!(
                    f,
                    "cannot plot an empty matrix: panel {panel} is {rows}x{cols}"
                )
            }
            PlotError::NoHeads => write!(f, "cannot plot the heads of a layer without heads"),
            PlotError::LabelCount {
                axis,
                labels,
                expected,
            } => write!(
                f,
                "{labels} {axis} labels for a matrix with {expected} {axis}s"
            ),
            PlotError::BadRange { lo, hi } => write!(
                f,
                "colour range [{lo}, {hi}] is not an increasing pair of finite numbers"
            ),
            PlotError::Draw(m) => write!(f, "cannot draw the figure: {m}"),
            PlotError::Encode(m) => write!(f, "cannot encode the PNG: {m}"),
            PlotError::Write { path, source } => {
                write!(f, "cannot write {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for PlotError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PlotError::Write { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The viridis colour map (perceptually uniform, dark purple to yellow) at `t` in [0, 1]
/// (clamped; NaN gives the low end), as sRGB bytes.
///
/// A degree-6 polynomial fit of matplotlib's table (within 4/255 of it per channel).
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// assert_eq!(viridis(0.0), (71, 1, 85)); // dark purple
/// assert_eq!(viridis(0.5), (31, 144, 139)); // teal (matplotlib: 33, 145, 140)
/// assert_eq!(viridis(1.0), (252, 231, 33)); // yellow
/// ```
pub fn viridis(t: f64) -> (u8, u8, u8) {
    const C: [[f64; 3]; 7] = [
        [
            0.277_727_327_223_417_7,
            0.005_407_344_544_966_578,
            0.334_099_805_335_306_1,
        ],
        [
            0.105_093_043_108_577_4,
            1.404_613_529_898_575,
            1.384_590_162_594_685,
        ],
        [
            -0.330_861_828_725_556_3,
            0.214_847_559_468_213,
            0.095_095_163_028_236_59,
        ],
        [
            -4.634_230_498_983_486,
            -5.799_100_973_351_585,
            -19.332_440_956_279_87,
        ],
        [
            6.228_269_936_347_081,
            14.179_933_366_805_09,
            56.690_552_600_681_05,
        ],
        [
            4.776_384_997_670_288,
            -13.745_145_377_746_01,
            -65.353_032_633_372_34,
        ],
        [
            -5.435_455_855_934_631,
            4.645_852_612_178_535,
            26.312_435_249_583_2,
        ],
    ];
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let channel = |i: usize| {
        let v = C.iter().rev().fold(0.0, |acc, c| acc * t + c[i]);
        (v.clamp(0.0, 1.0) * 255.0).round() as u8
    };
    (channel(0), channel(1), channel(2))
}

/// How values map to colours.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ColourRange {
    Fixed(f64, f64),
    Auto,
}

#[derive(Debug, Clone)]
struct Panel {
    title: Option<String>,
    matrix: Array2<f64>,
}

/// A picture of one or more matrices as heatmaps sharing one colour scale; made by
/// [`heatmap`] or [`heads_grid`], shown inline by evcxr, written by [`Figure::save_svg`] and
/// [`Figure::save_png`].
///
/// Builder methods set the labels, title, colour bar, cell values and colour range. An empty
/// matrix, or labels whose count is not the matrix's, are errors: the `Result` methods return
/// them and [`Figure::to_svg`] (so the notebook display) draws the message instead.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let fig = heatmap(&array![[0.5, 0.5], [0.1, 0.9]]).title("head 1").colorbar(false);
/// let (width, height) = fig.size()?;
/// assert!(width > 100 && height > 100);
/// # Ok::<(), PlotError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Figure {
    panels: Vec<Panel>,
    title: Option<String>,
    row_labels: Option<Vec<String>>,
    col_labels: Option<Vec<String>>,
    colorbar: bool,
    values: Option<bool>,
    decimals: usize,
    range: ColourRange,
    columns: Option<usize>,
    cell: Option<u32>,
    png_scale: u32,
}

/// A heatmap of one matrix (attention weights, or scores with [`Figure::auto_range`]): row `i`
/// is query token `i`, column `j` is key token `j`.
///
/// By default colours span [0, 1], a colour bar is drawn, and the values are written in the
/// cells when the matrix is at most 12x12.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
/// let out = head.forward(&array![[1.0, 0.0], [0.0, 1.0]])?;
/// let svg = heatmap(&out.weights).labels(&["Thinking", "Machines"]).to_svg();
/// assert!(svg.starts_with("<svg"));
/// # Ok::<(), AttentionError>(())
/// ```
pub fn heatmap(matrix: &Array2<f64>) -> Figure {
    Figure::new(vec![Panel {
        title: None,
        matrix: matrix.clone(),
    }])
}

/// One heatmap panel per head of a layer's output (each head's attention weights), titled
/// `head 1`, `head 2`, …, in a grid of at most 4 columns, sharing one colour bar; `tokens`
/// label both axes of every panel (pass `&[]` for none; for `String` tokens pass `&[]` and
/// chain [`Figure::labels`]).
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let x = array![[1.0, 0.0], [0.0, 1.0]];
/// let heads = vec![
///     Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?,
///     Head::new(Array2::eye(2), -Array2::eye(2), Array2::eye(2))?,
/// ];
/// let out = MultiHead::new(heads, None)?.forward(&x)?;
/// let svg = heads_grid(&out, &["Thinking", "Machines"]).to_svg();
/// assert!(svg.contains("head 2"));
/// # Ok::<(), AttentionError>(())
/// ```
pub fn heads_grid(out: &MultiHeadOutput, tokens: &[&str]) -> Figure {
    let panels = out
        .heads
        .iter()
        .enumerate()
        .map(|(i, h)| Panel {
            title: Some(format!("head {}", i + 1)),
            matrix: h.weights.clone(),
        })
        .collect();
    let fig = Figure::new(panels);
    if tokens.is_empty() {
        fig
    } else {
        fig.labels(tokens)
    }
}

/// Pixel geometry of a figure, computed once per drawing.
struct Layout {
    width: u32,
    height: u32,
    cell: i32,
    grid_columns: usize,
    title_h: i32,
    panel_title_h: i32,
    row_label_w: i32,
    col_labels_rotated: bool,
    panel_w: i32,
    panel_h: i32,
    value_size: Option<f64>,
    lo: f64,
    hi: f64,
    bar: Option<(i32, i32, i32)>,
}

impl Figure {
    fn new(panels: Vec<Panel>) -> Figure {
        Figure {
            panels,
            title: None,
            row_labels: None,
            col_labels: None,
            colorbar: true,
            values: None,
            decimals: 2,
            range: ColourRange::Fixed(0.0, 1.0),
            columns: None,
            cell: None,
            png_scale: 2,
        }
    }

    /// Labels both axes with the tokens (rows are queries, columns keys); `&str`s or
    /// `String`s.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let svg = heatmap(&array![[1.0, 0.0], [0.5, 0.5]]).labels(&["I", "am"]).to_svg();
    /// assert!(svg.contains(">\nam\n<") || svg.contains(">am<"));
    /// ```
    pub fn labels<S: AsRef<str>>(self, tokens: &[S]) -> Figure {
        self.row_labels(tokens).col_labels(tokens)
    }

    /// Labels the rows (queries), top to bottom.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let fig = heatmap(&array![[1.0, 0.0]]).row_labels(&["Thinking"]);
    /// assert!(fig.to_svg().contains("Thinking"));
    /// ```
    pub fn row_labels<S: AsRef<str>>(mut self, labels: &[S]) -> Figure {
        self.row_labels = Some(labels.iter().map(|s| s.as_ref().to_string()).collect());
        self
    }

    /// Labels the columns (keys), left to right; labels wider than a cell are turned upright.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let fig = heatmap(&array![[0.4, 0.6]]).col_labels(&["Thinking", "Machines"]);
    /// assert!(fig.to_svg().contains("Machines"));
    /// ```
    pub fn col_labels<S: AsRef<str>>(mut self, labels: &[S]) -> Figure {
        self.col_labels = Some(labels.iter().map(|s| s.as_ref().to_string()).collect());
        self
    }

    /// Sets the figure's title, drawn above the panels.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// assert!(heatmap(&array![[1.0]]).title("softmax(QKᵀ/√d)").to_svg().contains("softmax"));
    /// ```
    pub fn title(mut self, title: &str) -> Figure {
        self.title = Some(title.to_string());
        self
    }

    /// Draws the colour bar (a vertical scale at the right) or not; drawn by default.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let with = heatmap(&array![[1.0]]).size()?;
    /// let without = heatmap(&array![[1.0]]).colorbar(false).size()?;
    /// assert!(without.0 < with.0);
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn colorbar(mut self, show: bool) -> Figure {
        self.colorbar = show;
        self
    }

    /// Writes the values in the cells, or not. By default they are written when every matrix
    /// is at most 12x12; they are left out anyway when cells are too small to hold them.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let fig = heatmap(&array![[0.25]]).colorbar(false);
    /// assert!(fig.to_svg().contains("0.25"));
    /// assert!(!fig.values(false).to_svg().contains("0.25"));
    /// ```
    pub fn values(mut self, show: bool) -> Figure {
        self.values = Some(show);
        self
    }

    /// Decimals of the values written in the cells and on the colour bar (2 by default,
    /// like `np.round(w, 2)`; -0.00 is written 0.00).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// assert!(heatmap(&array![[0.125]]).decimals(3).to_svg().contains("0.125"));
    /// ```
    pub fn decimals(mut self, decimals: usize) -> Figure {
        self.decimals = decimals.min(10);
        self
    }

    /// Maps `lo..=hi` onto the colour map (values outside are clamped); [0, 1] by default,
    /// right for attention weights.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let svg = heatmap(&array![[-2.0, 2.0]]).range(-2.0, 2.0).to_svg();
    /// assert!(svg.contains("-2.00"));
    /// ```
    pub fn range(mut self, lo: f64, hi: f64) -> Figure {
        self.range = ColourRange::Fixed(lo, hi);
        self
    }

    /// Maps the smallest to the largest finite value of all panels onto the colour map, as
    /// for scores `QKᵀ/√d`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let svg = heatmap(&array![[3.0, 7.0]]).auto_range().to_svg();
    /// assert!(svg.contains("7.00"));
    /// ```
    pub fn auto_range(mut self) -> Figure {
        self.range = ColourRange::Auto;
        self
    }

    /// The number of panel columns of the grid (at most 4 by default).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let x = array![[1.0, 0.0], [0.0, 1.0]];
    /// let heads = vec![Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?; 2];
    /// let out = MultiHead::new(heads, None)?.forward(&x)?;
    /// let wide = heads_grid(&out, &[]).size().unwrap();
    /// let tall = heads_grid(&out, &[]).columns(1).size().unwrap();
    /// assert!(tall.1 > wide.1);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn columns(mut self, columns: usize) -> Figure {
        self.columns = Some(columns.max(1));
        self
    }

    /// The side of a cell in pixels (by default from the matrix size: large for small
    /// matrices); at least 4.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let small = heatmap(&array![[1.0]]).cell_size(20).colorbar(false).size()?;
    /// let large = heatmap(&array![[1.0]]).cell_size(80).colorbar(false).size()?;
    /// assert_eq!(large.0 - small.0, 60);
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn cell_size(mut self, pixels: u32) -> Figure {
        self.cell = Some(pixels.clamp(4, 1000));
        self
    }

    /// The figure's size in pixels, width then height: the SVG's (PNG pictures are
    /// [`Figure::png_size`]).
    ///
    /// # Errors
    /// [`PlotError::EmptyMatrix`], [`PlotError::NoHeads`], [`PlotError::LabelCount`] or
    /// [`PlotError::BadRange`] when the figure cannot be drawn.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let (w, h) = heatmap(&array![[1.0, 0.0]]).size()?;
    /// assert!(w > h);
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn size(&self) -> Result<(u32, u32), PlotError> {
        let lay = self.layout()?;
        Ok((lay.width, lay.height))
    }

    /// Sets how many times larger than the SVG (in pixels per side) PNG pictures are: 2 by
    /// default, from 1 to 8.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let fig = heatmap(&array![[0.2, 0.8]]).png_scale(3);
    /// let (w, h) = fig.size()?;
    /// assert_eq!(fig.png_size()?, (3 * w, 3 * h));
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn png_scale(mut self, scale: u32) -> Figure {
        self.png_scale = scale.clamp(1, 8);
        self
    }

    /// The size in pixels of the figure's PNG pictures: [`Figure::size`] times
    /// [`Figure::png_scale`].
    ///
    /// # Errors
    /// As [`Figure::size`].
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let fig = heatmap(&array![[0.2, 0.8]]);
    /// let (w, h) = fig.size()?;
    /// assert_eq!(fig.png_size()?, (2 * w, 2 * h));
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn png_size(&self) -> Result<(u32, u32), PlotError> {
        let (w, h) = self.size()?;
        Ok((w * self.png_scale, h * self.png_scale))
    }

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

    /// Writes the figure as an SVG file. The file is written under a temporary name in the
    /// same folder and then renamed, so an existing file is never left half-written.
    ///
    /// # Errors
    /// As [`Figure::render_svg`], and [`PlotError::Write`] (naming `path`) when the file
    /// cannot be written.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let path = std::env::temp_dir().join(format!("doc-{}.svg", std::process::id()));
    /// heatmap(&array![[0.3, 0.7]]).save_svg(&path)?;
    /// assert!(std::fs::read_to_string(&path).unwrap().starts_with("<svg"));
    /// # std::fs::remove_file(&path).unwrap();
    /// let err = heatmap(&array![[1.0]]).save_svg("/no/such/folder/w.svg").unwrap_err();
    /// assert!(err.to_string().starts_with("cannot write /no/such/folder/w.svg: "));
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn save_svg(&self, path: impl AsRef<Path>) -> Result<(), PlotError> {
        write_atomically(path.as_ref(), self.render_svg()?.as_bytes())
    }

    /// Writes the figure as a PNG file ([`Figure::to_png`]), through a temporary name in the
    /// same folder and a rename.
    ///
    /// # Errors
    /// As [`Figure::to_png`], and [`PlotError::Write`] (naming `path`) when the file cannot be
    /// written.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let path = std::env::temp_dir().join(format!("doc-{}.png", std::process::id()));
    /// heatmap(&array![[0.3, 0.7]]).save_png(&path)?;
    /// assert!(std::fs::metadata(&path).unwrap().len() > 100);
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn save_png(&self, path: impl AsRef<Path>) -> Result<(), PlotError> {
        write_atomically(path.as_ref(), &self.to_png()?)
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

    /// Checks the figure and computes its geometry.
    fn layout(&self) -> Result<Layout, PlotError> {
        register_font()?;
        if self.panels.is_empty() {
            return Err(PlotError::NoHeads);
        }
        for (i, p) in self.panels.iter().enumerate() {
            let (rows, cols) = p.matrix.dim();
            if rows == 0 || cols == 0 {
                return Err(PlotError::EmptyMatrix {
                    panel: i + 1,
                    rows,
                    cols,
                });
            }
        }
        let (rows, cols) = self.panels.iter().fold((1, 1), |(r, c), p| {
            (r.max(p.matrix.nrows()), c.max(p.matrix.ncols()))
        });
        for p in &self.panels {
            check_labels("row", &self.row_labels, p.matrix.nrows())?;
            check_labels("column", &self.col_labels, p.matrix.ncols())?;
        }
        let (lo, hi) = self.colour_range()?;

        let many = self.panels.len() > 1;
        let cell = match self.cell {
            Some(c) => c as i32,
            None => {
                let budget = if many { 240.0 } else { 480.0 };
                (budget / rows.max(cols) as f64)
                    .round()
                    .clamp(12.0, if many { 48.0 } else { 64.0 }) as i32
            }
        };
        let grid_columns = self.columns.unwrap_or(4).min(self.panels.len()).max(1);
        let grid_rows = self.panels.len().div_ceil(grid_columns);

        let title_h = match &self.title {
            Some(t) => text_size(t, TITLE_SIZE)?.1 as i32 + 16,
            None => 0,
        };
        let panel_title_h = if self.panels.iter().any(|p| p.title.is_some()) {
            text_size("head", PANEL_TITLE_SIZE)?.1 as i32 + 10
        } else {
            0
        };
        let widest = |labels: &Option<Vec<String>>| -> Result<(i32, i32), PlotError> {
            let mut most = (0, 0);
            for l in labels.iter().flatten() {
                let (w, h) = text_size(l, LABEL_SIZE)?;
                most = (most.0.max(w as i32), most.1.max(h as i32));
            }
            Ok(most)
        };
        let (row_w, _) = widest(&self.row_labels)?;
        let row_label_w = if self.row_labels.is_some() {
            row_w + 10
        } else {
            0
        };
        let (col_w, col_h) = widest(&self.col_labels)?;
        let col_labels_rotated = col_w > cell - 4;
        let col_label_h = match (&self.col_labels, col_labels_rotated) {
            (None, _) => 0,
            (Some(_), false) => col_h + 10,
            (Some(_), true) => col_w + 10,
        };
        let panel_w = row_label_w + cols as i32 * cell;
        let panel_h = panel_title_h + rows as i32 * cell + col_label_h;
        let grid_w = grid_columns as i32 * panel_w + (grid_columns as i32 - 1) * GAP;
        let grid_h = grid_rows as i32 * panel_h + (grid_rows as i32 - 1) * GAP;

        let show_values = self
            .values
            .unwrap_or(rows <= MAX_VALUES_SIDE && cols <= MAX_VALUES_SIDE);
        let value_size = if show_values {
            self.value_font_size(cell)?
        } else {
            None
        };

        let top = MARGIN + title_h;
        let mut width = MARGIN + grid_w + MARGIN;
        let mut height = top + grid_h + MARGIN;
        let bar = if self.colorbar {
            let bar_top = top + panel_title_h;
            let span = grid_h - panel_title_h - col_label_h;
            let bar_h = span.max(BAR_MIN_HEIGHT);
            let mut tick_w = 0;
            for t in self.ticks(lo, hi) {
                tick_w = tick_w.max(text_size(&t.1, TICK_SIZE)?.0 as i32);
            }
            let bar_x = MARGIN + grid_w + GAP;
            width = bar_x + BAR_WIDTH + 10 + tick_w + MARGIN;
            height = height.max(bar_top + bar_h + text_size("0", TICK_SIZE)?.1 as i32 + MARGIN);
            Some((bar_x, bar_top, bar_h))
        } else {
            None
        };
        if let Some(t) = &self.title {
            width = width.max(text_size(t, TITLE_SIZE)?.0 as i32 + 2 * MARGIN);
        }
        Ok(Layout {
            width: width as u32,
            height: height as u32,
            cell,
            grid_columns,
            title_h,
            panel_title_h,
            row_label_w,
            col_labels_rotated,
            panel_w,
            panel_h,
            value_size,
            lo,
            hi,
            bar,
        })
    }

    /// The colour range, checked; auto ranges of equal values widen by 0.5 each side.
    fn colour_range(&self) -> Result<(f64, f64), PlotError> {
        let (lo, hi) = match self.range {
            ColourRange::Fixed(lo, hi) => (lo, hi),
            ColourRange::Auto => {
                let finite = self
                    .panels
                    .iter()
                    .flat_map(|p| p.matrix.iter().copied())
                    .filter(|v| v.is_finite());
                let (lo, hi) = finite.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                    (lo.min(v), hi.max(v))
                });
                if lo > hi {
                    (0.0, 1.0)
                } else if lo == hi {
                    (lo - 0.5, hi + 0.5)
                } else {
                    (lo, hi)
                }
            }
        };
        if lo.is_finite() && hi.is_finite() && lo < hi {
            Ok((lo, hi))
        } else {
            Err(PlotError::BadRange { lo, hi })
        }
    }

    /// The font size that fits every value of every panel in a cell, if readable.
    fn value_font_size(&self, cell: i32) -> Result<Option<f64>, PlotError> {
        let mut widest = 0;
        let mut tallest = 1;
        for p in &self.panels {
            for v in p.matrix.iter() {
                let (w, h) = text_size(&format_value(*v, self.decimals), VALUE_SIZE)?;
                widest = widest.max(w);
                tallest = tallest.max(h);
            }
        }
        let room = 0.8 * cell as f64;
        let fit = (room / widest.max(1) as f64)
            .min(0.45 * cell as f64 / tallest as f64)
            .min(1.0);
        let size = VALUE_SIZE * fit;
        Ok((size >= 9.0).then_some(size))
    }

    /// Colour bar ticks, top (high) to bottom: fraction from the bottom and label.
    fn ticks(&self, lo: f64, hi: f64) -> Vec<(f64, String)> {
        // The finest step of 1, 2, 2.5 or 5 times a power of ten with at most 5 ticks.
        let magnitude = 10f64.powf(((hi - lo) / 5.0).log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .iter()
            .map(|m| m * magnitude)
            .find(|step| (hi / step + 1e-9).floor() - (lo / step - 1e-9).ceil() < BAR_TICKS as f64)
            .unwrap_or(hi - lo);
        let first = (lo / step - 1e-9).ceil() as i64;
        let last = (hi / step + 1e-9).floor() as i64;
        (first..=last)
            .rev()
            .map(|k| {
                let v = k as f64 * step;
                ((v - lo) / (hi - lo), format_value(v, self.decimals))
            })
            .collect()
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
                let fill = self.colour(v, lay);
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
            for (f, text) in self.ticks(lay.lo, lay.hi) {
                let y = by + ((1.0 - f) * bh as f64).round() as i32;
                pen.rect((bx + BAR_WIDTH, y), (bx + BAR_WIDTH + 5, y), INK, false)?;
                pen.text(&text, (bx + BAR_WIDTH + 8, y), TICK_SIZE, INK, left, false)?;
            }
        }
        Ok(())
    }

    /// The colour of a cell's value.
    fn colour(&self, v: f64, lay: &Layout) -> RGBColor {
        if v.is_nan() {
            NAN_COLOUR
        } else if v.is_infinite() {
            INF_COLOUR
        } else {
            let (r, g, b) = viridis((v - lay.lo) / (lay.hi - lay.lo));
            RGBColor(r, g, b)
        }
    }
}

fn check_labels(
    axis: &'static str,
    labels: &Option<Vec<String>>,
    expected: usize,
) -> Result<(), PlotError> {
    match labels {
        Some(l) if l.len() != expected => Err(PlotError::LabelCount {
            axis,
            labels: l.len(),
            expected,
        }),
        _ => Ok(()),
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

/// Registers the embedded font with plotters, once per process.
fn register_font() -> Result<(), PlotError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FAMILY, plotters::style::FontStyle::Normal, FONT).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(PlotError::Draw(
            "the embedded font DejaVu Sans is unreadable".into(),
        ))
    }
}

/// Width and height in pixels of `text` at `size`.
fn text_size(text: &str, size: f64) -> Result<(u32, u32), PlotError> {
    (FAMILY, size)
        .into_font()
        .box_size(text)
        .map_err(|e| PlotError::Draw(format!("cannot measure text {text:?}: {e}")))
}

/// NumPy-like short text for a value: `decimals` decimals, `nan`, `inf`, `-inf`, no `-0.00`,
/// and scientific notation from 1e6 on.
fn format_value(v: f64, decimals: usize) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v.abs() >= 1e6 {
        return format!("{v:.1e}");
    }
    let s = format!("{v:.decimals$}");
    match s.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
        _ => s,
    }
}

/// Black or white, whichever contrasts more with `fill` (WCAG relative luminance).
fn text_colour(fill: RGBColor) -> RGBColor {
    let lin = |c: u8| {
        let c = c as f64 / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    let l = 0.2126 * lin(fill.0) + 0.7152 * lin(fill.1) + 0.0722 * lin(fill.2);
    if l > 0.179 {
        INK
    } else {
        BACKGROUND
    }
}

fn draw_error<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// A small SVG that says why a figure could not be drawn.
fn error_svg(message: &str) -> String {
    let escaped = message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let width = 40 + 9 * (message.chars().count() + 12);
    format!(
        "<svg width=\"{width}\" height=\"40\" viewBox=\"0 0 {width} 40\" \
         xmlns=\"http://www.w3.org/2000/svg\">\n<text x=\"10\" y=\"25\" font-family=\"sans-serif\" \
         font-size=\"14\" fill=\"#b00020\">plot error: {escaped}</text>\n</svg>\n"
    )
}

/// Writes `bytes` to a new temporary file beside `path`, then renames it onto `path`.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), PlotError> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let fail = |source: io::Error| PlotError::Write {
        path: path.to_path_buf(),
        source,
    };
    let name = path.file_name().ok_or_else(|| {
        fail(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path names no file",
        ))
    })?;
    let folder = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let tmp = folder.join(format!(
        ".{}.{}-{n}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let write = |tmp: &Path| -> io::Result<()> {
        let mut file: File = OpenOptions::new().write(true).create_new(true).open(tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(tmp, path)
    };
    write(&tmp).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        fail(e)
    })
}
