//! attention-lab-plot: attention pictures, heatmaps of attention weights (or scores), one
//! panel per head, and line plots (such as dimensions of the positional encoding against
//! position).
//!
//! [`heatmap`] and [`heads_grid`] return a [`Figure`], which shows inline in an evcxr Jupyter
//! notebook (it has an `evcxr_display` method), and writes SVG or PNG files. Token labels,
//! a title, a colour bar and the values written in the cells (for matrices of at most 12x12)
//! are set with builder methods. Colours come from [`viridis`]; NaN cells are light grey and
//! infinite cells red, written `nan`, `inf` and `-inf`. [`line_plot`] returns a [`LinePlot`]:
//! series of y against x with axis labels, ticks, a legend and a title, shown and written the
//! same ways.
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

// One module a job; the flow goes one way: figure and lines (what to draw) -> layout (how
// large) -> paint (drawing) -> output (files), with error, colormap, font and values beneath.
mod colormap;
mod error;
mod figure;
mod font;
mod layout;
mod lines;
mod output;
mod paint;
mod values;

pub use colormap::viridis;
pub use error::PlotError;
pub use figure::{heads_grid, heatmap, Figure};
pub use lines::{line_plot, LinePlot};
