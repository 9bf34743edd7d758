//! The model view: a small heatmap for every layer and head of an encoder, and below it the
//! head view of the one picked (click another panel in the notebook to open it).

use ndarray::{s, Array2, Array4, ArrayView4};

use crate::colormap::{cell_colour, INK};
use crate::error::PlotError;
use crate::font::{register_font, text_size, TICK_SIZE};
use crate::head_view::{largest, out_of_range, strings, HeadView};
use crate::scene::{base64, text, title_item, Anchor, Item, Scene, MARGIN};

/// A panel's side in pixels.
const PANEL: f64 = 56.0;
const GAP: f64 = 6.0;
/// The most weights the notebook's model view carries to open panels (1 MiB as bytes).
const MAX_DATA: usize = 1 << 20;
/// Panels of longer inputs show the largest weight of each block of cells.
const MAX_CELLS: usize = 56;

/// Every layer's and head's attention weights as a grid of small heatmaps (layers down, heads
/// across), with the head view of one of them below: made by [`model_view`], shown inline by
/// evcxr as HTML, written by [`ModelView::save_svg`] and [`ModelView::save_png`].
///
/// In the notebook a click on a panel opens that layer in the head view with that head shown
/// (the others a click on their colour away). The grid is drawn without scripts; opening
/// another panel needs them (a trusted notebook), and the weights as bytes, which the view
/// carries up to 1 MiB of them (layers x heads x tokens², about 40 layers and heads of 128
/// tokens); beyond that, `select` picks the panel shown. Self-attention only: the model view of
/// cross-attention is an error (use [`head_view`](crate::head_view) with `keys`).
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
    pub(crate) title: Option<String>,
    pub(crate) png_scale: u32,
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
/// assert!(svg.contains(">layer 0<") && svg.contains(">head 2<"));
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
        title: None,
        png_scale: 2,
    }
}

impl ModelView {
    /// Opens layer `layer`, head `head` (both from 0) in the head view below the grid.
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

    /// The head view below the grid: the picked layer, only the picked head's lines drawn
    /// (the notebook's script draws the others from the grid's data when asked).
    fn detail(&self) -> HeadView {
        let layer = self.attentions.slice(s![self.layer, .., .., ..]);
        let weights = layer
            .outer_iter()
            .enumerate()
            .map(|(h, w)| {
                if h == self.head {
                    w.to_owned()
                } else {
                    Array2::zeros(w.dim())
                }
            })
            .collect();
        HeadView {
            weights,
            queries: self.tokens.clone(),
            keys: None,
            shown: Some(vec![self.head]),
            query: None,
            top_k: None,
            title: Some(format!("layer {}, head {}", self.layer, self.head + 1)),
            png_scale: self.png_scale,
        }
    }

    /// The grid and the head view below it, one scene.
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
        let (mut y, title_w) = title_item(&mut items, &self.title, MARGIN)?;
        for h in 0..heads {
            let x = left + h as f64 * (PANEL + GAP) + PANEL / 2.0;
            items.push(text(
                (x, y + 8.0),
                &format!("head {}", h + 1),
                TICK_SIZE,
                Anchor::Middle,
            ));
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
        let grid_w = left + heads as f64 * (PANEL + GAP) + MARGIN;
        let top = y + layers as f64 * (PANEL + GAP) + 8.0;
        let below = detail.scene_from(interactive, top + MARGIN)?;
        let mut data = vec![
            ("layers", layers.to_string()),
            ("heads", heads.to_string()),
            ("tokens", rows.to_string()),
        ];
        // Opening panels needs every weight as a byte; past MAX_DATA bytes the grid and the
        // picked panel are shown, and the others are opened with `select`.
        if interactive && layers * heads * rows * cols <= MAX_DATA {
            data.push(("weights", self.quantised(detail.kept().0)));
            data.push(("layer", self.layer.to_string()));
            data.push(("head", self.head.to_string()));
        }
        data.extend(below.data);
        items.push(Item::Group {
            class: "alab-detail",
            data: vec![],
            hidden: false,
            items: below.items,
        });
        Ok(Scene {
            width: grid_w.max(below.width).max(title_w).ceil(),
            height: below.height.ceil(),
            data,
            items,
        })
    }

    /// Each layer's weights as bytes (weight x 255, rounded), heads x queries x keys, in
    /// base64, comma separated: what the script draws a panel's lines from. Long inputs keep
    /// each query's `k` largest weights, as the head view does.
    fn quantised(&self, k: usize) -> String {
        self.attentions
            .outer_iter()
            .map(|layer| {
                let mut bytes = Vec::with_capacity(layer.len());
                for w in layer.outer_iter() {
                    for row in w.outer_iter() {
                        let row = row.to_vec();
                        let keep = largest(&row, k);
                        for (j, &v) in row.iter().enumerate() {
                            let b = if keep.binary_search(&j).is_ok() {
                                (v.clamp(0.0, 1.0) * 255.0).round() as u8
                            } else {
                                0
                            };
                            bytes.push(b);
                        }
                    }
                }
                base64(&bytes)
            })
            .collect::<Vec<_>>()
            .join(",")
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
