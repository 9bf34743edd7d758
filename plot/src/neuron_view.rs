//! The neuron view: for one head and one query token, every step from q and the keys to the
//! head's output row, as the lessons compute it: q, each key k, q·k, q·k / √d_k, the mask
//! added, the softmax, and each value weighted, summed into z.

use ndarray::ArrayView1;

use attention_lab::heads::{HeadOutput, MultiHeadOutput};

use crate::colormap::drawn;
use crate::colormap::{diverging, head_rgb, INK};
use crate::error::PlotError;
use crate::font::{register_font, text_size, LABEL_SIZE, TICK_SIZE};
use crate::head_view::{check_tokens, out_of_range, strings, weight_text, ROW};
use crate::scene::{text, title_item, Anchor, Item, Scene, MARGIN};

/// The width of the softmax column's bar at weight 1.
const BAR: f64 = 60.0;
/// Where the softmax column's bar starts, after its number.
const BAR_GAP: f64 = 60.0;
/// Width of a number column.
const NUMBER: f64 = 70.0;
/// Above this many vector cells, a notebook's view holds only the picked query.
const MAX_CELLS: usize = 40_000;

/// One head's computation for one query token, step by step: made by [`neuron_view`], shown
/// inline by evcxr as HTML, written by [`NeuronView::save_svg`] and [`NeuronView::save_png`].
///
/// Vectors are rows of coloured cells (blue below 0, orange above; hover a cell for its value),
/// numbers are written (weights under 0.001 with three significant digits), and each weight
/// has a bar as long as it is (none below half a pixel). In the notebook a menu picks the
/// query token, as do a click on a key's token (self-attention) and on "q of …" (the next
/// query).
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let x = array![[1.0, 0.0], [0.0, 1.0]];
/// let w = Array2::<f64>::eye(2);
/// let out = MultiHead::split(&w, &w, &w, 1, None)?.forward(&x, &Attend::new())?;
/// let svg = neuron_view(&out, 0, &["a", "b"]).query(1).to_svg()?;
/// assert!(svg.contains(">q·k<") && svg.contains(">softmax<"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct NeuronView {
    /// One output a layer.
    pub(crate) layers: Vec<MultiHeadOutput>,
    pub(crate) layer: usize,
    pub(crate) head: usize,
    pub(crate) queries: Vec<String>,
    pub(crate) keys: Option<Vec<String>>,
    pub(crate) query: usize,
    pub(crate) title: Option<String>,
    pub(crate) png_scale: u32,
    pub(crate) scale: f64,
}

/// The neuron view of head `head` (from 0) of a multi-head layer's output, `tokens` on both
/// sides (use [`NeuronView::keys`] for cross-attention); it shows query token 0 until
/// [`NeuronView::query`] picks another. In the notebook a menu picks another head (while the
/// view stays under 40,000 vector cells).
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let w = Array2::<f64>::eye(2);
/// let out = MultiHead::split(&w, &w, &w, 1, None)?.forward(&array![[1.0, 2.0]], &Attend::new())?;
/// let err = neuron_view(&out, 3, &["a"]).to_svg().unwrap_err();
/// assert_eq!(err.to_string(), "there is no head 3: they are 0 to 0");
/// # Ok::<(), AttentionError>(())
/// ```
pub fn neuron_view<S: AsRef<str>>(out: &MultiHeadOutput, head: usize, tokens: &[S]) -> NeuronView {
    neuron_view_layers([out], tokens).select(0, head)
}

/// The neuron view of every layer of an encoder (each layer's attention output, in order):
/// layer 0, head 0 and query token 0 at first ([`NeuronView::select`] and
/// [`NeuronView::query`] pick others); in the notebook menus pick the layer, the head and the
/// query, while the view stays under 40,000 vector cells (past that, the picked head only).
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let w = Array2::<f64>::eye(2);
/// let layer = MultiHead::split(&w, &w, &w, 2, None)?;
/// let first = layer.forward(&array![[1.0, 2.0], [0.5, 0.0]], &Attend::new())?;
/// let second = layer.forward(first.result(), &Attend::new())?;
/// let svg = neuron_view_layers([&first, &second], &["a", "b"]).select(1, 1).to_svg()?;
/// assert!(svg.contains("data-l=\"1\" data-h=\"1\""));
/// assert_eq!(svg.matches("class=\"alab-neuron-q\"").count(), 1); // a file: the picked head
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn neuron_view_layers<'a, S: AsRef<str>>(
    outputs: impl IntoIterator<Item = &'a MultiHeadOutput>,
    tokens: &[S],
) -> NeuronView {
    NeuronView {
        layers: outputs.into_iter().cloned().collect(),
        layer: 0,
        head: 0,
        queries: strings(tokens),
        keys: None,
        query: 0,
        title: None,
        png_scale: 2,
        scale: 1.0,
    }
}

impl NeuronView {
    /// Shows query token `i` (from 0).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let out = MultiHead::split(&w, &w, &w, 1, None)?.forward(&array![[1.0, 2.0]], &Attend::new())?;
    /// let err = neuron_view(&out, 0, &["a"]).query(1).to_svg().unwrap_err();
    /// assert_eq!(err.to_string(), "there is no query token 1: they are 0 to 0");
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn query(mut self, i: usize) -> NeuronView {
        self.query = i;
        self
    }

    /// Shows head `head` of layer `layer` (both from 0).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let out = MultiHead::split(&w, &w, &w, 2, None)?.forward(&array![[1.0, 2.0]], &Attend::new())?;
    /// let err = neuron_view_layers([&out], &["a"]).select(1, 0).to_svg().unwrap_err();
    /// assert_eq!(err.to_string(), "there is no layer 1: they are 0 to 0");
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn select(mut self, layer: usize, head: usize) -> NeuronView {
        (self.layer, self.head) = (layer, head);
        self
    }

    /// The key tokens, when they are not the query tokens (cross-attention).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let wq = Array2::<f64>::eye(2);
    /// let layer = MultiHead::split(&wq, &wq, &wq, 1, None)?;
    /// let enc = array![[0.0, 1.0], [1.0, 1.0]];
    /// let out = layer.forward_cross(&array![[1.0, 0.0]], &enc, &enc, &Attend::new())?;
    /// let svg = neuron_view(&out, 0, &["dec"]).keys(&["e1", "e2"]).to_svg()?;
    /// assert!(svg.contains(">e2<"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keys<S: AsRef<str>>(mut self, tokens: &[S]) -> NeuronView {
        self.keys = Some(strings(tokens));
        self
    }

    /// The view's picture: every layer's, head's and query's steps when `interactive` and
    /// small enough (the others hidden), else every query of the picked head, else the
    /// picked query's.
    pub(crate) fn scene(&self, interactive: bool) -> Result<Scene, PlotError> {
        register_font()?;
        out_of_range("layer", self.layer, self.layers.len())?;
        let heads = &self.layers[self.layer].heads;
        out_of_range("head", self.head, heads.len())?;
        let head = &heads[self.head];
        let (rows, cols) = head.weights.dim();
        check_tokens(&self.queries, self.keys.as_ref(), (rows, cols))?;
        let keys = self.keys.as_ref().unwrap_or(&self.queries);
        if rows == 0 || cols == 0 {
            return Err(PlotError::EmptyWeights { rows, cols });
        }
        out_of_range("query token", self.query, rows)?;
        // Every head of every layer is drawn the picked head's size (an encoder's are alike).
        let same = |h: &HeadOutput| {
            h.weights.dim() == (rows, cols)
                && h.k.ncols() == head.k.ncols()
                && h.v.ncols() == head.v.ncols()
        };
        let (dk, dv) = (head.k.ncols(), head.v.ncols());
        let cell = |d: usize| (384.0 / d.max(1) as f64).clamp(3.0, 14.0);

        let widest = keys.iter().chain(&self.queries).try_fold(0.0_f64, |m, t| {
            Ok::<_, PlotError>(m.max(text_size(t, LABEL_SIZE)?.0 as f64))
        })?;
        let label = MARGIN + widest.max(text_size("q of", LABEL_SIZE)?.0 as f64) + 24.0;
        let cols_x = Columns::new(label + 8.0, dk as f64 * cell(dk), dv as f64 * cell(dv));
        let mut items = Vec::new();
        let (mut y, title_w) = title_item(&mut items, &self.title, (MARGIN, MARGIN))?;
        for (name, x) in cols_x.headers() {
            items.push(text((x, y + ROW / 2.0), name, TICK_SIZE, Anchor::Start));
        }
        y += ROW;
        let per_head = rows * cols * (dk + dv);
        let every_head = self.layers.iter().map(|l| l.heads.len()).sum::<usize>() * per_head;
        let (all_heads, all_queries) = match interactive {
            false => (false, false),
            true => (every_head <= MAX_CELLS, per_head <= MAX_CELLS),
        };
        for (l, layer) in self.layers.iter().enumerate() {
            for (h, other) in layer.heads.iter().enumerate() {
                let picked = (l, h) == (self.layer, self.head);
                if !(picked || all_heads && same(other)) {
                    continue;
                }
                let cells = Cells::of(other, (cell(dk), cell(dv)));
                for i in 0..rows {
                    if !(all_queries || i == self.query) {
                        continue;
                    }
                    let group = self.steps(other, h, i, keys, &cols_x, cells, y);
                    items.push(Item::Group {
                        class: "alab-neuron-q",
                        data: vec![("l", l), ("h", h), ("q", i)],
                        hidden: !(picked && i == self.query),
                        items: group,
                    });
                }
            }
        }
        let height = y + (cols + 2) as f64 * ROW + MARGIN;
        Ok(Scene {
            width: (cols_x.end + MARGIN).max(title_w).ceil(),
            height: height.ceil(),
            scale: self.scale,
            data: vec![
                ("layer", self.layer.to_string()),
                ("head", self.head.to_string()),
                ("query", self.query.to_string()),
            ],
            items,
        })
    }

    /// Query `i`'s rows: q, then one row a key, then z.
    #[allow(clippy::too_many_arguments)]
    fn steps(
        &self,
        head: &HeadOutput,
        index: usize,
        i: usize,
        keys: &[String],
        x: &Columns,
        (qk, v): (Cells, Cells),
        top: f64,
    ) -> Vec<Item> {
        let mut items = Vec::new();
        let dk = head.k.ncols() as f64;
        let q = head.q.row(i);
        let label_x = x.k - 8.0;
        let mut row_y = top + ROW / 2.0;
        let label = text(
            (label_x, row_y),
            &format!("q of {}", self.queries[i]),
            LABEL_SIZE,
            Anchor::End,
        );
        items.push(label.tagged("alab-q", vec![("q", i)]));
        vector(&mut items, q, "q", (x.k, row_y), qk);
        for (j, t) in keys.iter().enumerate() {
            row_y += ROW;
            let label = text((label_x, row_y), t, LABEL_SIZE, Anchor::End);
            // In self-attention a click on a key's token follows it as the query.
            items.push(match self.keys {
                None => label.tagged("alab-k", vec![("k", j)]),
                Some(_) => label,
            });
            let k = head.k.row(j);
            vector(&mut items, k, &format!("k of {t}"), (x.k, row_y), qk);
            let dot = q.dot(&k);
            let scaled = dot / dk.sqrt();
            let score = head.scores[[i, j]];
            // The layer's matrix product and this dot product may round differently.
            let mask = if score == f64::NEG_INFINITY {
                "−∞".to_string()
            } else if (score - scaled).abs() <= 1e-9 * scaled.abs().max(1.0) {
                "0".to_string()
            } else {
                number(score - scaled)
            };
            let w = head.weights[[i, j]];
            for (value, at) in [
                (number(dot), x.dot),
                (number(scaled), x.scaled),
                (mask, x.mask),
                (weight_text(w), x.softmax),
            ] {
                items.push(text((at, row_y), &value, TICK_SIZE, Anchor::Start));
            }
            // As long as the weight: a weight that rounds to no pixel draws none.
            if drawn(w) && w * BAR >= 0.5 {
                items.push(Item::Rect {
                    at: (x.softmax + BAR_GAP, row_y - 5.0),
                    size: (w.min(1.0) * BAR, 10.0),
                    fill: Some(head_rgb(index)),
                    stroke: None,
                    data: vec![],
                    tip: None,
                });
            }
            let wv = head.v.row(j).mapv(|v| w * v);
            let name = format!("{} × v of {t}", weight_text(w));
            vector(&mut items, wv.view(), &name, (x.v, row_y), v);
        }
        row_y += ROW;
        items.push(text((x.v - 8.0, row_y), "z =", LABEL_SIZE, Anchor::End));
        vector(&mut items, head.z.row(i), "z", (x.v, row_y), v);
        items
    }
}

/// How one kind of vector is drawn: its cells' width, and the value at full colour.
#[derive(Debug, Clone, Copy)]
struct Cells {
    width: f64,
    scale: f64,
}

impl Cells {
    /// A head's q and k, and its weighted values and z, each on one colour scale, so rows and
    /// queries compare: the weights times |V| bound each |weight x v| and z.
    fn of(head: &HeadOutput, (qk, v): (f64, f64)) -> (Cells, Cells) {
        let bound = head.weights.dot(&head.v.mapv(f64::abs));
        (
            Cells {
                width: qk,
                scale: max_abs(head.q.iter().chain(head.k.iter())),
            },
            Cells {
                width: v,
                scale: max_abs(head.z.iter().chain(bound.iter())),
            },
        )
    }
}

/// Where each column starts.
struct Columns {
    k: f64,
    dot: f64,
    scaled: f64,
    mask: f64,
    softmax: f64,
    v: f64,
    end: f64,
}

impl Columns {
    fn new(k: f64, k_width: f64, v_width: f64) -> Columns {
        let dot = k + k_width.max(24.0) + 12.0;
        let scaled = dot + NUMBER;
        let mask = scaled + NUMBER;
        let softmax = mask + NUMBER;
        let v = softmax + BAR_GAP + BAR + 16.0;
        Columns {
            k,
            dot,
            scaled,
            mask,
            softmax,
            v,
            end: v + v_width.max(90.0),
        }
    }

    fn headers(&self) -> [(&'static str, f64); 6] {
        [
            ("q, k", self.k),
            ("q·k", self.dot),
            ("÷ √d_k", self.scaled),
            ("+ mask", self.mask),
            ("softmax", self.softmax),
            ("weight × v", self.v),
        ]
    }
}

/// A vector as a row of cells from `(x, y)`, coloured by value over the scale, each with its
/// value as a tip.
fn vector(items: &mut Vec<Item>, v: ArrayView1<f64>, name: &str, (x, y): (f64, f64), cells: Cells) {
    let cell = cells.width;
    for (d, &value) in v.iter().enumerate() {
        items.push(Item::Rect {
            at: (x + d as f64 * cell, y - 6.0),
            size: (cell, 12.0),
            fill: Some(diverging(value / cells.scale)),
            stroke: None,
            data: vec![],
            tip: Some(format!("{name}[{d}] = {}", number(value))),
        });
    }
    items.push(Item::Rect {
        at: (x, y - 6.0),
        size: (v.len() as f64 * cell, 12.0),
        fill: None,
        stroke: Some(INK),
        data: vec![],
        tip: None,
    });
}

/// The largest absolute finite value (1 when there is none, so colours stay defined).
fn max_abs<'a>(values: impl Iterator<Item = &'a f64>) -> f64 {
    let m = values
        .filter(|v| v.is_finite())
        .fold(0.0_f64, |m, v| m.max(v.abs()));
    if m > 0.0 {
        m
    } else {
        1.0
    }
}

/// A number with four decimals, `−∞` and `∞` for the infinities.
fn number(v: f64) -> String {
    if v == f64::NEG_INFINITY {
        "−∞".into()
    } else if v == f64::INFINITY {
        "∞".into()
    } else {
        format!("{v:.4}")
    }
}
