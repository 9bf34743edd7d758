//! The head view: query tokens on the left, key tokens on the right, a line for each pair
//! and head whose opacity is the attention weight, one colour a head. Hovering a token in a
//! notebook keeps only its lines, clicking a head's colour hides or shows the head.

use ndarray::{Array2, ArrayView3, Axis};
use plotters::style::RGBColor;

use attention_lab::heads::MultiHeadOutput;

use crate::colormap::head_colour;
use crate::error::PlotError;
use crate::font::{register_font, text_size, LABEL_SIZE, TICK_SIZE};
use crate::scene::{num, text, title_item, Anchor, Item, Scene, MARGIN};

/// Above this many lines (pairs times heads) a view draws only each query's largest weights.
pub(crate) const MAX_LINES: usize = 12_000;
/// Pixels from one token to the next.
pub(crate) const ROW: f64 = 22.0;
/// Pixels between the query and the key columns.
const SPAN: f64 = 240.0;
/// Space between a token and its lines' ends.
const PAD: f64 = 8.0;
const SWATCH: f64 = 12.0;
/// The colour of a fully masked query's token.
const MASKED: RGBColor = RGBColor(150, 150, 150);

/// Where every head looks, as lines from query tokens to key tokens: made by [`head_view`]
/// or [`head_view_weights`], shown inline by evcxr as HTML, written by
/// [`HeadView::save_svg`] and [`HeadView::save_png`].
///
/// The lines are drawn in Rust as SVG (carried in the HTML as an image of itself, which
/// untrusted output keeps), so the picture shows without scripts (an
/// untrusted notebook, nbconvert's HTML, GitHub); a few KB of inline script add the
/// interaction: hover a token to keep only its lines, click a token to keep them until the
/// next click, click a head's colour in the legend to hide or show it, pick one head or all
/// in a menu, and download what is shown as SVG. Heads are named from 1 ("head 1" is
/// `heads[0]`), as [`heads_grid`](crate::heads_grid)'s panels are; methods take indices from 0. A weight of 0 (a masked pair) draws no line,
/// and a query whose every key is masked is greyed and struck through.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let w = array![[1.0, 0.0], [0.0, 1.0]];
/// let out = MultiHead::split(&w, &w, &w, 1, None)?.forward(&array![[1.0, 0.0], [0.0, 1.0]], &Attend::new())?;
/// let view = head_view(&out, &["Thinking", "Machines"]);
/// let svg = view.to_svg()?;
/// assert_eq!(svg.matches("<line").count(), 4); // 2 queries x 2 keys x 1 head
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct HeadView {
    pub(crate) weights: Vec<Array2<f64>>,
    pub(crate) queries: Vec<String>,
    pub(crate) keys: Option<Vec<String>>,
    pub(crate) shown: Option<Vec<usize>>,
    pub(crate) query: Option<usize>,
    pub(crate) top_k: Option<usize>,
    pub(crate) title: Option<String>,
    pub(crate) png_scale: u32,
}

/// The head view of a multi-head layer's output: one colour per head, `tokens` on both sides
/// (use [`HeadView::keys`] for cross-attention, whose keys are other tokens).
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let x = array![[1.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 2.0]];
/// let w = Array2::<f64>::eye(4);
/// let out = MultiHead::split(&w, &w, &w, 2, None)?.forward(&x, &Attend::new())?;
/// let view = head_view(&out, &["Thinking", "Machines"]);
/// assert!(view.to_svg()?.contains(">Thinking</text>"));
/// assert!(view.to_html().contains("<script>")); // the picture, then the script
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn head_view<S: AsRef<str>>(out: &MultiHeadOutput, tokens: &[S]) -> HeadView {
    let weights = out.heads.iter().map(|h| h.weights.clone()).collect();
    new_view(weights, tokens)
}

/// The head view of attention weights given as an array, heads x queries x keys (one layer of
/// an encoder's `attentions()`, for instance).
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let weights = Array3::from_shape_vec((1, 2, 2), vec![0.5, 0.5, 0.0, 1.0]).unwrap();
/// let svg = head_view_weights(&weights, &["a", "b"]).to_svg()?;
/// assert_eq!(svg.matches("<line").count(), 3); // the weight 0 draws no line
/// # Ok::<(), PlotError>(())
/// ```
pub fn head_view_weights<'a, S: AsRef<str>>(
    weights: impl Into<ArrayView3<'a, f64>>,
    tokens: &[S],
) -> HeadView {
    let weights = weights
        .into()
        .axis_iter(Axis(0))
        .map(|w| w.to_owned())
        .collect();
    new_view(weights, tokens)
}

fn new_view<S: AsRef<str>>(weights: Vec<Array2<f64>>, tokens: &[S]) -> HeadView {
    HeadView {
        weights,
        queries: strings(tokens),
        keys: None,
        shown: None,
        query: None,
        top_k: None,
        title: None,
        png_scale: 2,
    }
}

pub(crate) fn strings<S: AsRef<str>>(tokens: &[S]) -> Vec<String> {
    tokens.iter().map(|t| t.as_ref().to_string()).collect()
}

impl HeadView {
    /// The key tokens, when they are not the query tokens (cross-attention).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let weights = Array3::from_elem((1, 1, 3), 1.0 / 3.0);
    /// let svg = head_view_weights(&weights, &["dec"]).keys(&["e1", "e2", "e3"]).to_svg()?;
    /// assert!(svg.contains(">e3</text>"));
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn keys<S: AsRef<str>>(mut self, tokens: &[S]) -> HeadView {
        self.keys = Some(strings(tokens));
        self
    }

    /// Shows only these heads (from 0) at first; the others can be shown in the notebook, and
    /// are left out of [`HeadView::save_svg`] and [`HeadView::save_png`].
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let weights = Array3::from_elem((2, 2, 2), 0.5);
    /// let svg = head_view_weights(&weights, &["a", "b"]).heads(&[1]).to_svg()?;
    /// assert_eq!(svg.matches("<line").count(), 4);
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn heads(mut self, heads: &[usize]) -> HeadView {
        self.shown = Some(heads.to_vec());
        self
    }

    /// Shows only query token `i`'s lines (from 0), as hovering it does; in the notebook a
    /// click on another token or on this one changes it.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let weights = Array3::from_elem((1, 3, 3), 1.0 / 3.0);
    /// let svg = head_view_weights(&weights, &["a", "b", "c"]).query(2).to_svg()?;
    /// assert_eq!(svg.matches("<line").count(), 3);
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn query(mut self, i: usize) -> HeadView {
        self.query = Some(i);
        self
    }

    /// Draws only each query's `k` largest weights in each head. Without it, a view of more
    /// than 12,000 lines (queries x keys x heads) keeps each query's 12,000 / (queries x
    /// heads) largest weights a head, at least 1, so long inputs stay fast, and says so.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let weights = Array3::from_shape_vec((1, 1, 3), vec![0.2, 0.5, 0.3]).unwrap();
    /// let svg = head_view_weights(&weights, &["q"]).keys(&["a", "b", "c"]).top_k(1).to_svg()?;
    /// assert_eq!(svg.matches("<line").count(), 1);
    /// assert!(svg.contains("stroke-opacity=\"0.500\""));
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn top_k(mut self, k: usize) -> HeadView {
        self.top_k = Some(k);
        self
    }

    /// Checks the view: heads of one shape, one token per query and key, selections in range.
    pub(crate) fn check(&self) -> Result<(), PlotError> {
        let first = self.weights.first().ok_or(PlotError::NoHeads)?;
        let (rows, cols) = first.dim();
        if rows == 0 || cols == 0 {
            return Err(PlotError::EmptyWeights { rows, cols });
        }
        for (h, w) in self.weights.iter().enumerate() {
            if w.dim() != (rows, cols) {
                return Err(PlotError::HeadShape {
                    head: h,
                    shape: w.dim(),
                    expected: (rows, cols),
                });
            }
        }
        check_tokens(&self.queries, self.keys.as_ref(), (rows, cols))?;
        for &h in self.shown.iter().flatten() {
            out_of_range("head", h, self.weights.len())?;
        }
        if let Some(i) = self.query {
            out_of_range("query token", i, rows)?;
        }
        if self.top_k == Some(0) {
            return Err(PlotError::ZeroTopK);
        }
        Ok(())
    }

    /// How many lines each query keeps a head, and whether that thins the view.
    pub(crate) fn kept(&self) -> (usize, bool) {
        let (rows, cols) = self.weights[0].dim();
        let heads = self.weights.len();
        let k = self.top_k.unwrap_or_else(|| {
            if rows * cols * heads > MAX_LINES {
                (MAX_LINES / (rows * heads)).max(1)
            } else {
                cols
            }
        });
        (k.min(cols), k < cols)
    }

    fn head_shown(&self, h: usize) -> bool {
        self.shown.as_ref().is_none_or(|s| s.contains(&h))
    }

    /// The view's picture: with every line when `interactive` (those not selected hidden),
    /// else only the selected ones (what a file shows).
    pub(crate) fn scene(&self, interactive: bool) -> Result<Scene, PlotError> {
        self.scene_from(interactive, MARGIN)
    }

    /// The picture drawn from `y0` pixels down: the model view puts it below its grid.
    pub(crate) fn scene_from(&self, interactive: bool, y0: f64) -> Result<Scene, PlotError> {
        register_font()?;
        self.check()?;
        let keys = self.keys.as_ref().unwrap_or(&self.queries);
        let widest = |tokens: &[String]| -> Result<f64, PlotError> {
            tokens.iter().try_fold(
                0.0_f64,
                |m, t| Ok(m.max(text_size(t, LABEL_SIZE)?.0 as f64)),
            )
        };
        let left = MARGIN + widest(&self.queries)?;
        let (x1, x2) = (left + PAD, left + PAD + SPAN);
        let right = x2 + PAD + widest(keys)?;
        let mut items = Vec::new();
        let (mut y, title_w) = title_item(&mut items, &self.title, y0)?;
        let (legend, legend_w, legend_h) = self.legend(y, interactive)?;
        items.extend(legend);
        y += legend_h;
        let (k, thinned) = self.kept();
        if thinned {
            let note = format!("each query's {k} largest weights a head");
            items.push(text((MARGIN, y + 8.0), &note, TICK_SIZE, Anchor::Start));
            y += 22.0;
        }
        let top = y;
        let row_y = |i: usize| top + i as f64 * ROW + ROW / 2.0;
        for (h, w) in self.weights.iter().enumerate() {
            if !interactive && !self.head_shown(h) {
                continue;
            }
            for (i, row) in w.outer_iter().enumerate() {
                let selected = self.head_shown(h) && self.query.is_none_or(|q| q == i);
                if !interactive && !selected {
                    continue;
                }
                for j in largest(&row.to_vec(), k) {
                    items.push(Item::Line {
                        from: (x1, row_y(i)),
                        to: (x2, row_y(j)),
                        colour: head_colour(h),
                        opacity: row[j].min(1.0),
                        width: 2.0,
                        data: vec![("h", h), ("q", i), ("k", j)],
                        hidden: !selected,
                    });
                }
            }
        }
        for (i, t) in self.queries.iter().enumerate() {
            let masked = self.weights.iter().all(|w| fully_masked(w.row(i).iter()));
            let at = (left, row_y(i));
            let mut token = text(at, t, LABEL_SIZE, Anchor::End).tagged("alab-q", vec![("q", i)]);
            if let Item::Text { colour, tip, .. } = &mut token {
                if masked {
                    *colour = MASKED;
                    *tip = Some("no key has a weight above 0 (masked, or not a number)".into());
                }
            }
            items.push(token);
            if masked {
                let w = text_size(t, LABEL_SIZE)?.0 as f64;
                items.push(Item::Line {
                    from: (left - w, at.1),
                    to: (left, at.1),
                    colour: MASKED,
                    opacity: 1.0,
                    width: 1.0,
                    data: vec![],
                    hidden: false,
                });
            }
        }
        for (j, t) in keys.iter().enumerate() {
            items.push(
                text((x2 + PAD, row_y(j)), t, LABEL_SIZE, Anchor::Start)
                    .tagged("alab-k", vec![("k", j)]),
            );
        }
        let rows = self.queries.len().max(keys.len());
        Ok(Scene {
            width: (right + MARGIN).max(MARGIN + legend_w).max(title_w).ceil(),
            height: (top + rows as f64 * ROW + MARGIN).ceil(),
            data: vec![
                ("x1", num(x1)),
                ("x2", num(x2)),
                ("top", num(top)),
                ("row", num(ROW)),
                ("query", self.query.map_or(String::new(), |q| q.to_string())),
            ],
            items,
        })
    }

    /// The legend: a swatch and a name a head, wrapped to rows of at most 8; its items, width
    /// and height. In a file, only the heads drawn.
    fn legend(&self, y: f64, interactive: bool) -> Result<(Vec<Item>, f64, f64), PlotError> {
        let mut items = Vec::new();
        let (mut x, mut row, mut width) = (MARGIN, 0, 0.0_f64);
        let heads: Vec<usize> = (0..self.weights.len())
            .filter(|&h| interactive || self.head_shown(h))
            .collect();
        for (n, &h) in heads.iter().enumerate() {
            if n > 0 && n % 8 == 0 {
                (x, row) = (MARGIN, row + 1);
            }
            let cy = y + row as f64 * ROW + ROW / 2.0;
            let colour = head_colour(h);
            items.push(Item::Rect {
                at: (x, cy - SWATCH / 2.0),
                size: (SWATCH, SWATCH),
                fill: self.head_shown(h).then_some(colour),
                stroke: Some(colour),
                data: vec![("h", h)],
                tip: Some(format!(
                    "head {} (heads[{h}]): click to hide or show",
                    h + 1
                )),
            });
            let name = format!("head {}", h + 1);
            let label = text((x + SWATCH + 4.0, cy), &name, TICK_SIZE, Anchor::Start);
            items.push(label.tagged("alab-head", vec![("h", h)]));
            x += SWATCH + 4.0 + text_size(&name, TICK_SIZE)?.0 as f64 + 14.0;
            width = width.max(x);
        }
        let rows = if heads.is_empty() { 0 } else { row + 1 };
        Ok((items, width, rows as f64 * ROW + 6.0))
    }
}

/// `Err(TokenCount)` unless there is a query token a row and a key token (the query tokens
/// when `keys` is `None`) a column.
pub(crate) fn check_tokens(
    queries: &[String],
    keys: Option<&Vec<String>>,
    (rows, cols): (usize, usize),
) -> Result<(), PlotError> {
    let keys = keys.map_or(queries, |k| k.as_slice());
    for (side, tokens, expected) in [("query", queries, rows), ("key", keys, cols)] {
        if tokens.len() != expected {
            return Err(PlotError::TokenCount {
                side,
                tokens: tokens.len(),
                expected,
            });
        }
    }
    Ok(())
}

/// Whether a weight draws anything: above 0 (not masked) and finite.
pub(crate) fn drawn(w: f64) -> bool {
    w > 0.0 && w.is_finite()
}

/// Whether a row of weights draws nothing (every key masked, or NaN).
pub(crate) fn fully_masked<'a>(mut row: impl Iterator<Item = &'a f64>) -> bool {
    !row.any(|&w| drawn(w))
}

/// The keys drawn for one query: the `k` largest drawn weights (the earlier key on a tie), in
/// key order.
pub(crate) fn largest(row: &[f64], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..row.len()).filter(|&j| drawn(row[j])).collect();
    order.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
    order.truncate(k);
    order.sort_unstable();
    order
}

/// `Err(OutOfRange)` unless `index < len`.
pub(crate) fn out_of_range(what: &'static str, index: usize, len: usize) -> Result<(), PlotError> {
    if index < len {
        Ok(())
    } else {
        Err(PlotError::OutOfRange { what, index, len })
    }
}
