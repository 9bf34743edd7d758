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
//! Three interactive views show where heads look, each as one self-contained HTML output (an
//! SVG drawn in Rust, so it shows without scripts, and a few KB of inline script that add the
//! interaction; no network): [`head_view`] (lines from query to key tokens, one colour a
//! head of twelve told apart with colour blindness too ([`head_colour`]), each head's lines
//! apart, their opacity [`line_opacity`]; hover a token, toggle heads, pick a layer of
//! [`head_view_layers`]), [`model_view`] (a small heatmap for every layer and head; click one
//! to open it in the head view beside the grid, or under it when the output area is narrow)
//! and [`neuron_view`] (one head's q, k, q·k,
//! scaling, mask, softmax and weighted values for one query; [`neuron_view_layers`] for
//! every layer). Their `save_svg` and `save_png` write the static picture of the current
//! selection, `scale` sizes them (1.5 for a projector; their toolbar follows it), and tokens
//! show as [`pretty_token`] writes them. In the notebook each view lays itself out for the
//! output area's width, read when it is drawn and whenever it is resized (the head view's
//! key side moves closer, the model view's open layer goes under the grid), and a view taller
//! than the notebook's panel closes up its rows, then scrolls inside itself under its toolbar.
//! Figures take `scale` too, and fit [`Figure::max_width`] (900 pixels, JupyterLab's output
//! area at 1366 x 768 with the file browser open) with smaller cells or fewer panels a row, so
//! that JupyterLab never shrinks their text.
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
// The views (head_view, model_view, neuron_view) make a scene, which scene writes as SVG,
// paint as PNG and interactive wraps for the notebook.
mod colormap;
mod error;
mod figure;
mod font;
mod generation;
mod generation_view;
mod head_view;
mod interactive;
mod layout;
mod lines;
mod model_view;
mod neuron_view;
mod next_token_view;
mod output;
mod paint;
mod scene;
mod values;

pub use colormap::{head_colour, line_opacity, viridis};
pub use error::PlotError;
pub use figure::{heads_grid, heatmap, Figure};
pub use generation::GenerationError;
pub use generation_view::{generation_view, GenerationSteps, GenerationView};
pub use head_view::{head_view, head_view_layers, head_view_weights, pretty_token, HeadView};
pub use lines::{line_plot, LinePlot};
pub use model_view::{model_view, ModelView};
pub use neuron_view::{neuron_view, neuron_view_layers, NeuronView};
pub use next_token_view::{next_token_view, next_token_view_with, NextTokenView};
