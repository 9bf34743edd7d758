//! Why a figure could not be drawn or written: [`PlotError`].

use std::fmt;
use std::io;
use std::path::PathBuf;

use plotters::drawing::DrawingAreaErrorKind;

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
    /// [`heads_grid`](crate::heads_grid) was given a layer output without heads.
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
    /// A [`LinePlot`](crate::LinePlot) has no series to draw.
    NoSeries,
    /// A [`LinePlot`](crate::LinePlot) has no x values.
    NoPoints,
    /// A series of a [`LinePlot`](crate::LinePlot) has not one value per x value.
    SeriesLength {
        /// The series' name.
        series: String,
        /// How many values it has.
        values: usize,
        /// How many x values the plot has.
        expected: usize,
    },
    /// A view's attention weights have no queries or no keys.
    EmptyWeights {
        /// Queries.
        rows: usize,
        /// Keys.
        cols: usize,
    },
    /// A head's weights are not the shape of the first head's.
    HeadShape {
        /// Which head, from 0.
        head: usize,
        /// Its shape.
        shape: (usize, usize),
        /// The first head's shape.
        expected: (usize, usize),
    },
    /// A view was given not one token a query (or a key).
    TokenCount {
        /// `"query"` or `"key"`.
        side: &'static str,
        /// How many tokens were given.
        tokens: usize,
        /// How many queries (or keys) the weights have.
        expected: usize,
    },
    /// A head, layer or token picked by index does not exist.
    OutOfRange {
        /// What was picked: `"head"`, `"layer"`, `"query token"`.
        what: &'static str,
        /// The index asked for.
        index: usize,
        /// How many there are.
        len: usize,
    },
    /// [`HeadView::top_k`](crate::HeadView::top_k) was given 0.
    ZeroTopK,
    /// The model view was given weights with other key than query counts (cross-attention).
    NotSelfAttention {
        /// Queries.
        queries: usize,
        /// Keys.
        keys: usize,
    },
    /// A PNG would have more than 50 million pixels (150 MB before compression).
    TooLarge {
        /// Its width in pixels.
        width: u64,
        /// Its height in pixels.
        height: u64,
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
            PlotError::NoSeries => write!(f, "a line plot needs at least one series"),
            PlotError::NoPoints => write!(f, "cannot plot lines over no x values"),
            PlotError::SeriesLength {
                series,
                values,
                expected,
            } => write!(
                f,
                "series {series:?} has {values} values for {expected} x values"
            ),
            PlotError::EmptyWeights { rows, cols } => {
                write!(f, "cannot draw attention weights of shape {rows}x{cols}")
            }
            PlotError::HeadShape {
                head,
                shape,
                expected,
            } => write!(
                f,
                "head {head}'s weights are {}x{}, but head 0's are {}x{}",
                shape.0, shape.1, expected.0, expected.1
            ),
            PlotError::TokenCount {
                side,
                tokens,
                expected,
            } => {
                let axis = if *side == "query" { "row" } else { "column" };
                write!(
                    f,
                    "expected {expected} {side} tokens (one a {axis} of the weights), got {tokens}"
                )
            }
            PlotError::OutOfRange { what, index, len } => match len {
                0 => write!(f, "there is no {what} {index}: there are none"),
                _ => write!(f, "there is no {what} {index}: they are 0 to {}", len - 1),
            },
            PlotError::ZeroTopK => write!(f, "top_k must be at least 1"),
            PlotError::NotSelfAttention { queries, keys } => write!(
                f,
                "the model view draws self-attention (as many keys as queries), but the \
                 weights have {queries} queries and {keys} keys; use head_view with .keys()"
            ),
            PlotError::TooLarge { width, height } => write!(
                f,
                "a PNG of {width}x{height} pixels is more than 50 million pixels: lower \
                 png_scale, or draw fewer tokens"
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

/// A plotters drawing error as [`PlotError::Draw`].
pub(crate) fn draw_error<E: std::error::Error + Send + Sync>(
    e: DrawingAreaErrorKind<E>,
) -> PlotError {
    PlotError::Draw(e.to_string())
}
