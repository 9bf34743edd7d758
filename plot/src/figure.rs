//! The figure and its builder: [`heatmap`], [`heads_grid`] and the methods that set labels,
//! title, colour bar, values, colour range and sizes. Only what to draw lives here; how large
//! it is drawn is in `layout`, the drawing in `paint`, the files in `output`.

use ndarray::Array2;

use attention_lab::heads::MultiHeadOutput;

/// The widest a figure is shown, in pixels, by default: JupyterLab's output area at 1366 x 768
/// with the file browser open is about 950 pixels wide, and shrinks a wider picture to fit,
/// its text with it.
pub(crate) const MAX_WIDTH: u32 = 900;

/// How values map to colours.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ColourRange {
    Fixed(f64, f64),
    Auto,
}

/// One heatmap: its matrix, and its title above it in a grid of heads.
#[derive(Debug, Clone)]
pub(crate) struct Panel {
    pub(crate) title: Option<String>,
    pub(crate) matrix: Array2<f64>,
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
    pub(crate) panels: Vec<Panel>,
    pub(crate) title: Option<String>,
    pub(crate) row_labels: Option<Vec<String>>,
    pub(crate) col_labels: Option<Vec<String>>,
    pub(crate) colorbar: bool,
    pub(crate) values: Option<bool>,
    pub(crate) decimals: usize,
    pub(crate) range: ColourRange,
    pub(crate) columns: Option<usize>,
    pub(crate) cell: Option<u32>,
    pub(crate) png_scale: u32,
    pub(crate) scale: f64,
    pub(crate) max_width: u32,
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
/// let out = head.forward(&array![[1.0, 0.0], [0.0, 1.0]], &Attend::new())?;
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
/// let out = MultiHead::new(heads, None)?.forward(&x, &Attend::new())?;
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
            scale: 1.0,
            max_width: MAX_WIDTH,
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

    /// How large the figure is shown, 1 the default; 1.5 is a projector's size (text 18 px
    /// and more). Held to 0.5 to 4 (1 when not a number). The SVG's width and height are this
    /// many times its drawing's (its `viewBox`), the PNG's are this times
    /// [`png_scale`](Figure::png_scale) (rounded to whole pixels a pixel), and the layout
    /// fits [`max_width`](Figure::max_width) at this size.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let svg = heatmap(&array![[0.5, 0.5]]).scale(1.5).to_svg();
    /// let (w, h) = heatmap(&array![[0.5, 0.5]]).size()?;
    /// assert!(svg.contains(&format!("width=\"{}\" height=\"{}\" viewBox=\"0 0 {w} {h}\"", 1.5 * w as f64, 1.5 * h as f64)));
    /// assert_eq!(heatmap(&array![[0.5, 0.5]]).scale(1.5).png_size()?, (3 * w, 3 * h));
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn scale(mut self, scale: f64) -> Figure {
        self.scale = if scale.is_nan() {
            1.0
        } else {
            scale.clamp(0.5, 4.0)
        };
        self
    }

    /// The widest the figure may be shown, in pixels at its [`scale`](Figure::scale) (900 by
    /// default: JupyterLab's output area at 1366 x 768 with the file browser open is about 950
    /// wide, and it would shrink a wider picture and its text). A grid too wide first draws
    /// smaller cells (down to 12 pixels, unless [`cell_size`](Figure::cell_size) is set),
    /// then fewer panels a row; what cannot fit in one column of 12-pixel cells is drawn so.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let x = Array2::from_elem((14, 14), 1.0 / 14.0);
    /// let out = MultiHead::new(vec![Head::new(Array2::eye(14), Array2::eye(14), Array2::eye(14))?; 12], None)?.forward(&x, &Attend::new())?;
    /// let grid = heads_grid(&out, &[]).columns(6);
    /// assert!(grid.size().unwrap().0 <= 900);
    /// assert!(grid.clone().scale(1.5).size().unwrap().0 as f64 * 1.5 <= 900.0);
    /// assert!(grid.max_width(4000).size().unwrap().0 > 900); // six panels a row
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn max_width(mut self, pixels: u32) -> Figure {
        self.max_width = pixels.max(1);
        self
    }

    /// The number of panel columns of the grid (at most 4 by default; fewer when the grid
    /// would be wider than [`max_width`](Figure::max_width)).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let x = array![[1.0, 0.0], [0.0, 1.0]];
    /// let heads = vec![Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?; 2];
    /// let out = MultiHead::new(heads, None)?.forward(&x, &Attend::new())?;
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
}
