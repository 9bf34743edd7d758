//! The model view: a small heatmap for every layer and head of an encoder, and beside it the
//! head view of the one picked (click another panel in the notebook to open it).

use ndarray::{s, Array2, Array4, ArrayView4};

use crate::colormap::{cell_colour, INK};
use crate::error::PlotError;
use crate::font::{register_font, text_size, TICK_SIZE};
use crate::head_view::{new_view, out_of_range, strings, HeadView, MIN_WEIGHT};
use crate::scene::{text, title_item, Anchor, Item, Scene, MARGIN};

/// A panel's side in pixels: twelve heads and the head view beside them fit a 1366 x 768
/// screen in JupyterLab.
const PANEL: f64 = 26.0;
const GAP: f64 = 3.0;
/// Between the grid and the head view.
const APART: f64 = 12.0;
/// Panels of longer inputs show the largest weight of each block of cells.
const MAX_CELLS: usize = 56;

/// Every layer's and head's attention weights as a grid of small heatmaps (layers down, heads
/// across), with the head view of one of them beside it: made by [`model_view`], shown inline
/// by evcxr as HTML, written by [`ModelView::save_svg`] and [`ModelView::save_png`].
///
/// In the notebook a click on a panel opens that layer in the head view with that head shown
/// (the others a click on their colour away); the title and the frame follow the heads shown.
/// When the grid and the head view together are wider than the output area (12 heads at 150%
/// on a 1366 x 768 screen), the head view goes under the grid, its key side closer if need be.
/// The grid is drawn without scripts; opening another panel needs them (a trusted notebook),
/// and the weights as bytes, which the view carries up to 1 MiB of them (3 bytes a weight:
/// layers x heads x tokens², about 40 layers and heads of 90 tokens); beyond that, `select`
/// picks the panel shown. Self-attention only: the model view of cross-attention is an error
/// (use [`head_view`](crate::head_view) with `keys`).
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let attentions = Array4::from_elem((2, 3, 4, 4), 0.25); // layers x heads x tokens x tokens
/// let svg = model_view(&attentions, &["a", "b", "c", "d"]).to_svg()?;
/// assert_eq!(svg.matches("<image").count(), 6);
/// # Ok::<(), PlotError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ModelView {
    pub(crate) attentions: Array4<f64>,
    pub(crate) tokens: Vec<String>,
    pub(crate) layer: usize,
    pub(crate) head: usize,
    pub(crate) sentence_b: Option<usize>,
    pub(crate) title: Option<String>,
    pub(crate) png_scale: u32,
    pub(crate) scale: f64,
    pub(crate) min_weight: f64,
}

/// The model view of attention weights given as layers x heads x queries x keys (an
/// encoder's `attentions()`), `tokens` on both sides.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let attentions = Array4::from_elem((1, 2, 2, 2), 0.5);
/// let svg = model_view(&attentions, &["Thinking", "Machines"]).to_svg()?;
/// assert!(svg.contains(">layer 0<") && svg.contains(">head 1<"));
/// # Ok::<(), PlotError>(())
/// ```
pub fn model_view<'a, S: AsRef<str>>(
    attentions: impl Into<ArrayView4<'a, f64>>,
    tokens: &[S],
) -> ModelView {
    ModelView {
        attentions: attentions.into().to_owned(),
        tokens: strings(tokens),
        layer: 0,
        head: 0,
        sentence_b: None,
        title: None,
        png_scale: 2,
        scale: 1.0,
        min_weight: MIN_WEIGHT,
    }
}

impl ModelView {
    /// Opens layer `layer`, head `head` (both from 0) in the head view beside the grid.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let attentions = Array4::from_elem((2, 2, 2, 2), 0.5);
    /// let svg = model_view(&attentions, &["a", "b"]).select(1, 1).to_svg()?;
    /// assert!(svg.contains(">layer 1, head 2<")); // heads are named from 1, as heads_grid does
    /// let err = model_view(&attentions, &["a", "b"]).select(2, 0).to_svg().unwrap_err();
    /// assert_eq!(err.to_string(), "there is no layer 2: they are 0 to 1");
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn select(mut self, layer: usize, head: usize) -> ModelView {
        (self.layer, self.head) = (layer, head);
        self
    }

    /// The tokens from `first` on are a second sentence, B: the head view beside the grid
    /// then has a menu keeping the lines from A to A, A to B, B to A or B to B (as
    /// [`HeadView::sentence_b`]).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let attentions = Array4::from_elem((1, 1, 3, 3), 1.0 / 3.0);
    /// let svg = model_view(&attentions, &["a", "b", "c"]).sentence_b(1).to_svg()?;
    /// assert!(svg.contains("data-b=\"1\""));
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn sentence_b(mut self, first: usize) -> ModelView {
        self.sentence_b = Some(first);
        self
    }

    /// Draws the head view's lines for weights of at least `w` only (as
    /// [`HeadView::min_weight`]: 0.001 by default).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let attentions = Array4::from_elem((1, 1, 2, 2), 0.5);
    /// assert!(model_view(&attentions, &["a", "b"]).min_weight(0.0).to_svg()?.contains(">lines for every weight above 0<"));
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn min_weight(mut self, w: f64) -> ModelView {
        self.min_weight = w;
        self
    }

    /// The head view beside the grid: every layer, the picked one shown with the picked head.
    fn detail(&self) -> HeadView {
        let mut view =
            new_view(vec![], Some(self.attentions.clone()), self.tokens.clone()).layer(self.layer);
        view.shown = Some(vec![self.head]);
        view.sentence_b = self.sentence_b;
        view.title = Some(format!("layer {}, head {}", self.layer, self.head + 1));
        view.png_scale = self.png_scale;
        view.min_weight(self.min_weight)
    }

    /// The grid and the head view beside it, one scene.
    pub(crate) fn scene(&self, interactive: bool) -> Result<Scene, PlotError> {
        register_font()?;
        let (layers, heads, rows, cols) = self.attentions.dim();
        out_of_range("layer", self.layer, layers)?;
        out_of_range("head", self.head, heads)?;
        if rows != cols {
            return Err(PlotError::NotSelfAttention {
                queries: rows,
                keys: cols,
            });
        }
        let detail = self.detail();
        detail.check()?;
        let label_w = text_size(&format!("layer {}", layers - 1), TICK_SIZE)?.0 as f64;
        let left = MARGIN + label_w + 8.0;
        let mut items = Vec::new();
        let (top, title_w) = title_item(&mut items, &self.title, (MARGIN, MARGIN))?;
        let mut y = top;
        items.push(text((MARGIN, y + 8.0), "head", TICK_SIZE, Anchor::Start));
        for h in 0..heads {
            let x = left + h as f64 * (PANEL + GAP) + PANEL / 2.0;
            let number = text(
                (x, y + 8.0),
                &(h + 1).to_string(),
                TICK_SIZE,
                Anchor::Middle,
            );
            items.push(number.tagged("alab-panel-head", vec![("h", h)]));
        }
        y += 22.0;
        for l in 0..layers {
            let py = y + l as f64 * (PANEL + GAP);
            let label = format!("layer {l}");
            items.push(text(
                (MARGIN, py + PANEL / 2.0),
                &label,
                TICK_SIZE,
                Anchor::Start,
            ));
            for h in 0..heads {
                let px = left + h as f64 * (PANEL + GAP);
                let w = self.attentions.slice(s![l, h, .., ..]);
                items.push(Item::Raster {
                    at: (px, py),
                    size: (PANEL, PANEL),
                    cells: pooled(&w.to_owned()).mapv(|v| cell_colour(v, 0.0, 1.0)),
                    data: vec![("l", l), ("h", h)],
                    tip: Some(format!("layer {l}, head {}: click to open", h + 1)),
                });
            }
        }
        let pick = (
            left + self.head as f64 * (PANEL + GAP) - 2.0,
            y + self.layer as f64 * (PANEL + GAP) - 2.0,
        );
        items.push(Item::Rect {
            at: pick,
            size: (PANEL + 4.0, PANEL + 4.0),
            fill: None,
            stroke: Some(INK),
            data: vec![("pick", 1)],
            tip: None,
        });
        let grid_w = left + heads as f64 * (PANEL + GAP);
        let grid_h = y + layers as f64 * (PANEL + GAP) + MARGIN;
        let beside = detail.scene_at(interactive, (grid_w + APART, top))?;
        let mut data = vec![
            ("layers", layers.to_string()),
            ("heads", heads.to_string()),
            ("tokens", rows.to_string()),
            ("grid-top", crate::scene::num(y)),
            ("grid-left", crate::scene::num(left)),
            ("panel", crate::scene::num(PANEL + GAP)),
        ];
        data.extend(beside.data);
        items.push(Item::Group {
            class: "alab-detail",
            data: vec![],
            hidden: false,
            items: beside.items,
        });
        Ok(Scene {
            width: (grid_w + MARGIN).max(beside.width).max(title_w).ceil(),
            height: grid_h.max(beside.height).ceil(),
            scale: self.scale,
            data,
            items,
        })
    }
}

/// The weights as at most `MAX_CELLS` x `MAX_CELLS` cells, each the largest weight of its
/// block (so a strong weight never disappears from a long input's panel).
fn pooled(w: &Array2<f64>) -> Array2<f64> {
    let (rows, cols) = w.dim();
    let (r, c) = (rows.min(MAX_CELLS), cols.min(MAX_CELLS));
    let mut out = Array2::from_elem((r, c), f64::NEG_INFINITY);
    for ((i, j), &v) in w.indexed_iter() {
        let cell = &mut out[[i * r / rows, j * c / cols]];
        if v.is_nan() || v > *cell {
            *cell = v;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_inputs_are_pooled_by_their_largest_weight() {
        let mut w = Array2::zeros((112, 112));
        w[[3, 101]] = 0.9;
        let p = pooled(&w);
        assert_eq!(p.dim(), (56, 56));
        assert_eq!(p[[1, 50]], 0.9);
        assert_eq!(p.iter().filter(|&&v| v > 0.0).count(), 1);
        let small = Array2::from_elem((3, 3), 0.5);
        assert_eq!(pooled(&small), small);
    }
}
