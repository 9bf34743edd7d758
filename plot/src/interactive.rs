//! The interactive views in a notebook: each view's SVG (drawn in Rust, so it shows without
//! scripts, carried as an `<img>` that untrusted output keeps) inside one `<div>` with a few KB
//! of inline style and script that make the picture live SVG again and add hovering, clicking
//! and the SVG download. No CDN, no require.js, no JupyterLab extension, no ids: the script
//! finds its view as its own parent, so views in one notebook do not meet.

use crate::error::PlotError;
use crate::head_view::HeadView;
use crate::model_view::ModelView;
use crate::neuron_view::NeuronView;
use crate::paint::error_svg;
use crate::scene::{svg_img, Scene};

const STYLE: &str = include_str!("../assets/view.css");
const SCRIPT: &str = include_str!("../assets/view.js");

/// The script as the notebook gets it: without its comment lines and indentation.
fn compact(script: &str) -> String {
    script
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The view's HTML: the scene's SVG with the style and the script, or the error's message.
fn html(kind: &str, scene: Result<Scene, PlotError>) -> String {
    page(kind, scene.map_err(|e| e.to_string()), "", "", SCRIPT)
}

/// A view's page: `<div data-view=KIND ATTRIBUTES>` holding the views' style (and
/// `more_style`), the scene's SVG and `script` compacted; or a small picture of the error's
/// message. `attributes` are ` data-name="value"` pairs, already escaped.
pub(crate) fn page(
    kind: &str,
    scene: Result<Scene, String>,
    attributes: &str,
    more_style: &str,
    script: &str,
) -> String {
    match scene {
        Ok(scene) => format!(
            "<div class=\"alab-view\" data-view=\"{kind}\"{attributes}>\n<style>{STYLE}{more_style}</style>\n{}\n<script>{}</script>\n</div>\n",
            svg_img(
                &scene.to_svg(Some(&format!("alab-{kind}"))),
                "alab-picture",
                &kind.replace('-', " ")
            ),
            compact(script)
        ),
        Err(e) => svg_img(&error_svg(&e), "alab-figure", "plot error"),
    }
}

/// Prints HTML as evcxr's `text/html` content.
pub(crate) fn display(html: &str) {
    println!(
        "EVCXR_BEGIN_CONTENT text/html\n{}\nEVCXR_END_CONTENT",
        html.trim_end()
    );
}

macro_rules! interactive {
    ($view:ty, $kind:literal, $what:literal) => {
        impl $view {
            #[doc = concat!("The ", $what, " as an SVG document: the static picture of the current selection, what [`", stringify!($view), "::save_svg`] writes.")]
            ///
            /// # Errors
            /// [`PlotError`] naming what does not fit: token counts, heads, indices out of range.
            ///
            /// ```
            /// use attention_lab::prelude::*;
            /// use attention_lab_plot::*;
            ///
            /// let w = Array2::<f64>::eye(2);
            /// let out = MultiHead::split(&w, &w, &w, 1, None)?.forward(&array![[1.0, 0.0]], &Attend::new())?;
            /// let err = head_view(&out, &["a", "b"]).to_svg().unwrap_err();
            /// assert_eq!(err.to_string(), "expected 1 query tokens (one a row of the weights), got 2");
            /// # Ok::<(), AttentionError>(())
            /// ```
            pub fn to_svg(&self) -> Result<String, PlotError> {
                Ok(self.scene(false)?.to_svg(None))
            }

            #[doc = concat!("The ", $what, " as one self-contained HTML fragment for a notebook: the SVG drawn in Rust as an image of itself (which untrusted output keeps), then a few KB of inline style and script that make it live SVG and add the interaction. A view that cannot be drawn gives a small picture stating why.")]
            ///
            /// ```
            /// use attention_lab::prelude::*;
            /// use attention_lab_plot::*;
            ///
            /// let weights = Array3::from_elem((1, 2, 2), 0.5);
            /// let html = head_view_weights(&weights, &["a", "b"]).to_html();
            /// assert!(html.starts_with("<div class=\"alab-view\""));
            /// assert_eq!(html, head_view_weights(&weights, &["a", "b"]).to_html()); // byte-stable
            /// ```
            pub fn to_html(&self) -> String {
                html($kind, self.scene(true))
            }

            #[doc = concat!("Shows the ", $what, " in an evcxr Jupyter notebook as `text/html` (evcxr calls this for a cell's value).")]
            ///
            /// ```
            /// use attention_lab::prelude::*;
            /// use attention_lab_plot::*;
            ///
            /// head_view_weights(&Array3::from_elem((1, 1, 1), 1.0), &["a"]).evcxr_display(); // prints EVCXR_BEGIN_CONTENT text/html …
            /// ```
            pub fn evcxr_display(&self) {
                display(&self.to_html());
            }

            /// A title above the view.
            ///
            /// ```
            /// use attention_lab::prelude::*;
            /// use attention_lab_plot::*;
            ///
            /// let weights = Array3::from_elem((1, 1, 1), 1.0);
            /// assert!(head_view_weights(&weights, &["a"]).title("layer 0").to_svg()?.contains(">layer 0<"));
            /// # Ok::<(), PlotError>(())
            /// ```
            pub fn title(mut self, title: &str) -> $view {
                self.title = Some(title.to_string());
                self
            }

            /// How large the view is shown in the notebook and in its SVG file, 1 the default;
            /// 1.5 is a projector's size, where labels are 19 px tall and legends 18 px. Held to
            /// 0.5 to 4 (1 when not a number); in the notebook the view's size menu changes it
            /// again, and the view lays itself out for the output area's width. PNG files are
            /// this times [`png_scale`](Self::png_scale) the picture's size (rounded).
            ///
            /// ```
            /// use attention_lab::prelude::*;
            /// use attention_lab_plot::*;
            ///
            /// let weights = Array3::from_elem((1, 1, 1), 1.0);
            /// let normal = head_view_weights(&weights, &["a"]).to_svg()?;
            /// let large = head_view_weights(&weights, &["a"]).scale(1.5).to_svg()?;
            /// let width = |svg: &str| svg.split("width=\"").nth(1).unwrap().split('"').next().unwrap().parse::<f64>().unwrap();
            /// assert_eq!(width(&large), 1.5 * width(&normal));
            /// # Ok::<(), PlotError>(())
            /// ```
            pub fn scale(mut self, scale: f64) -> $view {
                self.scale = if scale.is_nan() { 1.0 } else { scale.clamp(0.5, 4.0) };
                self
            }

            /// How many times larger than the SVG its PNG pictures are (2 by default; at
            /// least 1).
            ///
            /// ```
            /// use attention_lab::prelude::*;
            /// use attention_lab_plot::*;
            ///
            /// let weights = Array3::from_elem((1, 1, 1), 1.0);
            /// let png = head_view_weights(&weights, &["a"]).png_scale(1).to_png()?;
            /// assert_eq!(&png[1..4], b"PNG");
            /// # Ok::<(), PlotError>(())
            /// ```
            pub fn png_scale(mut self, scale: u32) -> $view {
                self.png_scale = scale.max(1);
                self
            }
        }
    };
}

interactive!(HeadView, "head-view", "head view");
interactive!(ModelView, "model-view", "model view");
interactive!(NeuronView, "neuron-view", "neuron view");
