//! The head view: query tokens on the left, key tokens on the right, a line for each pair
//! and head, one colour a head, each head's lines a little apart from the others', their
//! opacity rising with the weight from a floor. Hovering a token in a notebook keeps only its
//! lines and shows every shown head's weight as a strip of boxes beside the other side's
//! tokens; clicking a head's colour hides or shows the head.

use ndarray::{s, Array2, Array4, ArrayView3, ArrayView4, Axis};
use plotters::style::RGBColor;

use attention_lab::heads::MultiHeadOutput;

use crate::colormap::{drawn, fade, head_rgb, line_opacity, strength, FLOOR};
use crate::error::PlotError;
use crate::font::{register_font, text_size, LABEL_SIZE, TICK_SIZE};
use crate::scene::{base64, num, text, title_item, Anchor, Item, Scene, MARGIN};

/// Above this many lines (pairs times heads) a view draws only each query's largest weights.
pub(crate) const MAX_LINES: usize = 12_000;
/// Pixels from one token to the next.
pub(crate) const ROW: f64 = 22.0;
/// Pixels between the query and the key columns.
const SPAN: f64 = 180.0;
/// Space between a token and its lines' ends.
const PAD: f64 = 8.0;
const SWATCH: f64 = 12.0;
/// The width of one head's box in the strips beside the tokens (the script draws them).
const BOX: f64 = 6.0;
/// The most pixels between two heads' lines of one pair (lines are at most 2 wide).
const STEP: f64 = 3.0;
/// The most weights a view carries for the script to draw other layers from (3 bytes each).
pub(crate) const MAX_DATA: usize = 1 << 20;
/// The colour of a fully masked query's token.
const MASKED: RGBColor = RGBColor(150, 150, 150);

/// Where every head looks, as lines from query tokens to key tokens: made by [`head_view`],
/// [`head_view_weights`] or [`head_view_layers`], shown inline by evcxr as HTML, written by
/// [`HeadView::save_svg`] and [`HeadView::save_png`].
///
/// The lines are drawn in Rust as SVG (carried in the HTML as an image of itself, which
/// untrusted output keeps), so the picture shows without scripts (an
/// untrusted notebook, nbconvert's HTML, GitHub); a few KB of inline script add the
/// interaction: hover a token to keep only its lines and see each shown head's weight as a
/// box beside the other side's tokens (its tooltip gives the weight), click a token to keep
/// them until the next click, click a head's colour in the legend to hide or show it,
/// double-click it to show that head alone, pick one head or all in a menu, a layer (of
/// [`head_view_layers`]) or the pairs of two sentences ([`HeadView::sentence_b`]), change
/// the size, darken the view, and download what is shown as SVG. Heads are named from 1
/// ("head 1" is `heads[0]`), as [`heads_grid`](crate::heads_grid)'s panels are; methods take
/// indices from 0.
///
/// Each head has its own colour ([`head_colour`](crate::head_colour): twelve told apart with
/// colour blindness too) and its lines are drawn a little apart from the other heads' lines
/// of the same pair, so no head hides another. A line's opacity is
/// [`line_opacity`](crate::line_opacity): at least 0.08 for any weight drawn with one head
/// shown, rising with its square root, fainter the more heads are shown; each line carries
/// its weight (`data-w`). Weights under [`HeadView::min_weight`] (0.001 by default, said in
/// the legend) draw no line but keep their box and tooltip on hover. A weight of 0 (a masked
/// pair) draws no line, and a query whose every key is
/// masked is greyed and struck through. Tokens are shown as
/// [`pretty_token`](crate::pretty_token) writes them.
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
    /// The shown layer's heads.
    pub(crate) weights: Vec<Array2<f64>>,
    /// Every layer, layers x heads x queries x keys, when the view can show each of them.
    pub(crate) layers: Option<Array4<f64>>,
    pub(crate) layer: usize,
    pub(crate) queries: Vec<String>,
    pub(crate) keys: Option<Vec<String>>,
    pub(crate) shown: Option<Vec<usize>>,
    pub(crate) query: Option<usize>,
    pub(crate) top_k: Option<usize>,
    pub(crate) sentence_b: Option<usize>,
    pub(crate) title: Option<String>,
    pub(crate) png_scale: u32,
    pub(crate) scale: f64,
    pub(crate) min_weight: f64,
}

/// The least weight a line is drawn for by default ([`HeadView::min_weight`]).
pub(crate) const MIN_WEIGHT: f64 = 1e-3;

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
    new_view(weights, None, strings(tokens))
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
    new_view(heads_of(weights.into()), None, strings(tokens))
}

/// The head view of every layer of an encoder, layers x heads x queries x keys (its
/// `attentions()`): layer 0 at first ([`HeadView::layer`] picks another), a menu in the
/// notebook for the others (while the weights take at most 1 MiB as 3 bytes each).
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let attentions = Array4::from_shape_fn((2, 1, 2, 2), |(l, _, q, k)| if (q + l) % 2 == k { 1.0 } else { 0.0 });
/// let svg = head_view_layers(&attentions, &["a", "b"]).layer(1).to_svg()?;
/// assert!(svg.contains("data-q=\"0\" data-k=\"1\"")); // layer 1 looks at the other token
/// let html = head_view_layers(&attentions, &["a", "b"]).to_html();
/// assert!(html.contains("data-view=\"head-view\""));
/// # Ok::<(), PlotError>(())
/// ```
pub fn head_view_layers<'a, S: AsRef<str>>(
    attentions: impl Into<ArrayView4<'a, f64>>,
    tokens: &[S],
) -> HeadView {
    new_view(vec![], Some(attentions.into().to_owned()), strings(tokens)).layer(0)
}

fn heads_of(weights: ArrayView3<f64>) -> Vec<Array2<f64>> {
    weights.axis_iter(Axis(0)).map(|w| w.to_owned()).collect()
}

/// A head view of `weights`, or of every layer's (the weights then come from `layer`), the
/// tokens as shown.
pub(crate) fn new_view(
    weights: Vec<Array2<f64>>,
    layers: Option<Array4<f64>>,
    tokens: Vec<String>,
) -> HeadView {
    HeadView {
        weights,
        layers,
        layer: 0,
        queries: tokens,
        keys: None,
        shown: None,
        query: None,
        top_k: None,
        sentence_b: None,
        title: None,
        png_scale: 2,
        scale: 1.0,
        min_weight: MIN_WEIGHT,
    }
}

/// The tokens as the views show them ([`pretty_token`]).
pub(crate) fn strings<S: AsRef<str>>(tokens: &[S]) -> Vec<String> {
    tokens.iter().map(|t| pretty_token(t.as_ref())).collect()
}

/// A tokenizer's token as a reader expects it: the word-start marks of byte-level BPE (`Ġ`,
/// GPT-2, RoBERTa) and SentencePiece (`▁`, T5, Llama) dropped, WordPiece's continuation mark
/// (`##`, BERT) shown as a middle dot before the piece, BPE's word-end mark `</w>` dropped and
/// a newline byte `Ċ` shown as `↵`; a token that is nothing but a mark, and any other token,
/// is kept as it is. The views show every token this way.
///
/// ```
/// use attention_lab_plot::*;
///
/// assert_eq!(pretty_token("Ġcat"), "cat");
/// assert_eq!(pretty_token("▁the"), "the");
/// assert_eq!(pretty_token("##ing"), "·ing");
/// assert_eq!(pretty_token("low</w>"), "low");
/// assert_eq!(pretty_token("Ċ"), "↵");
/// assert_eq!(pretty_token("[CLS]"), "[CLS]");
/// assert_eq!(pretty_token("##"), "##");
/// ```
pub fn pretty_token(token: &str) -> String {
    let nonempty = |t: &str| (!t.is_empty()).then(|| t.to_string());
    if let Some(piece) = token.strip_prefix("##").and_then(nonempty) {
        return format!("·{piece}");
    }
    let word = token
        .strip_prefix('Ġ')
        .or_else(|| token.strip_prefix('▁'))
        .unwrap_or(token);
    let word = word.strip_suffix("</w>").unwrap_or(word);
    match word {
        "Ċ" => "↵".into(),
        "" => token.into(),
        w => w.replace('Ċ', "↵"),
    }
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

    /// Shows layer `l` (from 0) of a view made by [`head_view_layers`]; the others are a menu
    /// away in the notebook. Other views have one layer, 0.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let attentions = Array4::from_elem((3, 2, 2, 2), 0.5);
    /// let err = head_view_layers(&attentions, &["a", "b"]).layer(3).to_svg().unwrap_err();
    /// assert_eq!(err.to_string(), "there is no layer 3: they are 0 to 2");
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn layer(mut self, l: usize) -> HeadView {
        if let Some(layers) = &self.layers {
            if l < layers.dim().0 {
                self.weights = heads_of(layers.slice(s![l, .., .., ..]));
            }
        }
        self.layer = l;
        self
    }

    /// The tokens from `first` on are a second sentence, B (a pair of texts, as BERT reads
    /// them): a menu in the notebook then keeps the lines from A to A, A to B, B to A or B to B.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let weights = Array3::from_elem((1, 4, 4), 0.25);
    /// let html = head_view_weights(&weights, &["a1", "a2", "b1", "b2"]).sentence_b(2).to_html();
    /// assert!(html.contains("<script>"));
    /// let err = head_view_weights(&weights, &["a1", "a2", "b1", "b2"]).sentence_b(4).to_svg().unwrap_err();
    /// assert_eq!(err.to_string(), "there is no token 4: they are 0 to 3");
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn sentence_b(mut self, first: usize) -> HeadView {
        self.sentence_b = Some(first);
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
    /// assert!(svg.contains("data-w=\"0.5000\""));
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn top_k(mut self, k: usize) -> HeadView {
        self.top_k = Some(k);
        self
    }

    /// Draws lines for weights of at least `w` only (0.001 by default; 0 draws every weight
    /// above 0); the legend says so. A line's opacity has a floor, so that a diffuse head
    /// shows: without this cut a weight of 1e-62, which NumPy prints as `0.`, would be drawn
    /// as visibly as 0.01. Below 0.001 a weight moves its query's output by less than a
    /// thousandth of a value vector, and `np.round(w, 3)` prints it as 0. The weights below
    /// keep their boxes beside the tokens when a token is hovered, drawn empty, with their
    /// value in the tooltip. Held to 0 to 1 (the default when not a number).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let weights = Array3::from_shape_vec((1, 1, 2), vec![1.0 - 1e-62, 1e-62]).unwrap();
    /// let view = head_view_weights(&weights, &["q"]).keys(&["a", "b"]);
    /// let svg = view.clone().to_svg()?;
    /// assert_eq!(svg.matches("<line").count(), 1);
    /// assert!(svg.contains(">lines for weights ≥ 0.001<"));
    /// assert_eq!(view.min_weight(0.0).to_svg()?.matches("<line").count(), 2);
    /// # Ok::<(), PlotError>(())
    /// ```
    pub fn min_weight(mut self, w: f64) -> HeadView {
        self.min_weight = if w.is_nan() {
            MIN_WEIGHT
        } else {
            w.clamp(0.0, 1.0)
        };
        self
    }

    /// Checks the view: heads of one shape, one token per query and key, selections in range.
    pub(crate) fn check(&self) -> Result<(), PlotError> {
        out_of_range(
            "layer",
            self.layer,
            self.layers.as_ref().map_or(1, |a| a.dim().0),
        )?;
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
        if let Some(b) = self.sentence_b {
            out_of_range("token", b, rows.min(cols))?;
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

    /// How many heads are shown at first.
    fn shown_count(&self) -> usize {
        (0..self.weights.len())
            .filter(|&h| self.head_shown(h))
            .count()
    }

    /// Whether the notebook's view carries every layer's weights for the script (a view of
    /// several layers, small enough), which then draws the lines of the heads not shown.
    fn carries_layers(&self, interactive: bool) -> bool {
        interactive
            && self
                .layers
                .as_ref()
                .is_some_and(|a| a.len() * 3 <= MAX_DATA)
    }

    /// The view's picture: with every line when `interactive` (those not selected hidden),
    /// else only the selected ones (what a file shows).
    pub(crate) fn scene(&self, interactive: bool) -> Result<Scene, PlotError> {
        self.scene_at(interactive, (MARGIN, MARGIN))
    }

    /// The picture drawn from `(x0, y0)`: the model view puts it beside its grid.
    #[allow(
        clippy::too_many_lines,
        reason = "the two token columns, every head's lines and the legend share one geometry; split, each part would take it all as arguments"
    )]
    pub(crate) fn scene_at(
        &self,
        interactive: bool,
        (x0, y0): (f64, f64),
    ) -> Result<Scene, PlotError> {
        register_font()?;
        self.check()?;
        let keys = self.keys.as_ref().unwrap_or(&self.queries);
        let widest = |tokens: &[String]| -> Result<f64, PlotError> {
            tokens.iter().try_fold(
                0.0_f64,
                |m, t| Ok(m.max(text_size(t, LABEL_SIZE)?.0 as f64)),
            )
        };
        let heads = self.weights.len();
        let strip = heads as f64 * BOX + 4.0;
        let strip_q = x0;
        let left = x0 + strip + widest(&self.queries)?;
        let (x1, x2) = (left + PAD, left + PAD + SPAN);
        let strip_k = x2 + PAD + widest(keys)? + 4.0;
        let right = strip_k + strip;
        let mut items = Vec::new();
        let (mut y, title_w) = title_item(&mut items, &self.title, (x0, y0))?;
        let (legend, legend_w, legend_h) = self.legend((x0, y), right - x0, interactive)?;
        items.extend(legend);
        y += legend_h;
        let (k, thinned) = self.kept();
        if thinned {
            let note = format!("each query's {k} largest weights a head");
            items.push(text((x0, y + 8.0), &note, TICK_SIZE, Anchor::Start));
            y += 22.0;
        }
        let top = y;
        let row_y = |i: usize| top + i as f64 * ROW + ROW / 2.0;
        // Each head's lines of a pair `step` apart, centred on the tokens.
        let step = STEP.min((ROW - 8.0) / heads as f64);
        let dy = |h: usize| (h as f64 - (heads as f64 - 1.0) / 2.0) * step;
        let carried = self.carries_layers(interactive);
        let shown = self.shown_count();
        for (h, w) in self.weights.iter().enumerate() {
            // A file draws the selected heads; the notebook every head, but a view of every
            // layer leaves the others to the script (which draws them from the weights it
            // carries, when they are small enough to carry).
            if !self.head_shown(h) && (!interactive || self.layers.is_some()) {
                continue;
            }
            for (i, row) in w.outer_iter().enumerate() {
                let selected = self.head_shown(h) && self.query.is_none_or(|q| q == i);
                if !interactive && !selected {
                    continue;
                }
                for j in largest(&row.to_vec(), k) {
                    let under = row[j] < self.min_weight;
                    if under && !interactive {
                        continue;
                    }
                    let mut values = vec![
                        ("w", weight_text(row[j])),
                        ("s", format!("{:.3}", strength(row[j]))),
                    ];
                    if under {
                        values.push(("u", "1".into()));
                    }
                    items.push(Item::Line {
                        from: (x1, row_y(i) + dy(h)),
                        to: (x2, row_y(j) + dy(h)),
                        colour: head_rgb(h),
                        opacity: line_opacity(row[j], shown),
                        width: step.clamp(1.0, 2.0),
                        data: vec![("h", h), ("q", i), ("k", j)],
                        values,
                        hidden: !selected || under,
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
                    values: vec![],
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
        let list = |v: Vec<f64>| {
            v.into_iter()
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut data = vec![
            ("x1", num(x1)),
            ("x2", num(x2)),
            ("top", num(top)),
            ("row", num(ROW)),
            ("query", self.query.map_or(String::new(), |q| q.to_string())),
            ("dy", list((0..heads).map(dy).collect())),
            ("lw", num(step.clamp(1.0, 2.0))),
            ("floor", format!("{FLOOR:.3}")),
            ("min", self.min_weight.to_string()),
            ("fade", list((1..=heads).map(fade).collect())),
            ("strip-q", num(strip_q)),
            ("strip-k", num(strip_k)),
            ("box", num(BOX)),
        ];
        if let Some(b) = self.sentence_b {
            data.push(("b", b.to_string()));
        }
        if carried {
            data.push(("weights", self.carried(k)));
            data.push(("layer", self.layer.to_string()));
        }
        Ok(Scene {
            width: (right + MARGIN).max(x0 + legend_w).max(title_w).ceil(),
            height: (top + rows as f64 * ROW + MARGIN).ceil(),
            scale: self.scale,
            data,
            items,
        })
    }

    /// The legend: a swatch and a name a head, wrapped to `width`; its items, width and
    /// height. In a file, only the heads drawn.
    fn legend(
        &self,
        (x0, y): (f64, f64),
        width: f64,
        interactive: bool,
    ) -> Result<(Vec<Item>, f64, f64), PlotError> {
        let mut items = Vec::new();
        let (mut x, mut row, mut widest) = (x0, 0, 0.0_f64);
        let heads: Vec<usize> = (0..self.weights.len())
            .filter(|&h| interactive || self.head_shown(h))
            .collect();
        for &h in &heads {
            let name = format!("head {}", h + 1);
            let w = SWATCH + 4.0 + text_size(&name, TICK_SIZE)?.0 as f64 + 14.0;
            if x > x0 && x + w - 14.0 > x0 + width {
                (x, row) = (x0, row + 1);
            }
            let cy = y + row as f64 * ROW + ROW / 2.0;
            let colour = head_rgb(h);
            items.push(Item::Rect {
                at: (x, cy - SWATCH / 2.0),
                size: (SWATCH, SWATCH),
                fill: self.head_shown(h).then_some(colour),
                stroke: Some(colour),
                data: vec![("h", h)],
                tip: Some(format!(
                    "head {} (heads[{h}]): click to hide or show, double-click to show it alone",
                    h + 1
                )),
            });
            let label = text((x + SWATCH + 4.0, cy), &name, TICK_SIZE, Anchor::Start);
            items.push(label.tagged("alab-head", vec![("h", h)]));
            x += w;
            widest = widest.max(x - x0);
        }
        let rows = if heads.is_empty() { 0 } else { row + 1 };
        let cut = self.cut_text();
        let cy = y + rows as f64 * ROW + ROW / 2.0;
        items.push(text((x0, cy), &cut, TICK_SIZE, Anchor::Start).tagged("alab-min", vec![]));
        widest = widest.max(text_size(&cut, TICK_SIZE)?.0 as f64);
        Ok((items, widest, (rows + 1) as f64 * ROW + 6.0))
    }

    /// The legend's words for [`HeadView::min_weight`].
    fn cut_text(&self) -> String {
        match self.min_weight {
            w if w <= 0.0 => "lines for every weight above 0".into(),
            w if w < 1e-3 => format!("lines for weights ≥ {w:e}"),
            w => format!("lines for weights ≥ {w}"),
        }
    }

    /// Every layer's weights for the script, in base64, one layer after another separated by
    /// commas: 3 bytes a weight, heads x queries x keys. The first byte is the weight's
    /// [`strength`] (x 255, at least 1 for any weight drawn; 0 draws no line), the next two
    /// the weight itself, 65535 + 256 log2(w) rounded (w = 2^((b - 65535) / 256), 0.3% off at
    /// most, down to 1e-77), for the tooltips. Long inputs keep each query's `k` largest
    /// weights, as the lines do.
    fn carried(&self, k: usize) -> String {
        let Some(layers) = &self.layers else {
            return String::new();
        };
        layers
            .outer_iter()
            .map(|layer| {
                let mut bytes = Vec::with_capacity(layer.len() * 3);
                for w in layer.outer_iter() {
                    for row in w.outer_iter() {
                        let row = row.to_vec();
                        let keep = largest(&row, k);
                        for (j, &v) in row.iter().enumerate() {
                            let kept = drawn(v) && keep.binary_search(&j).is_ok();
                            let (s, code) = if kept {
                                let s = (strength(v) * 255.0).round().max(1.0) as u8;
                                let code = (65535.0 + 256.0 * v.min(1.0).log2()).round();
                                (s, code.clamp(1.0, 65535.0) as u16)
                            } else {
                                (0, 0)
                            };
                            bytes.push(s);
                            bytes.extend(code.to_be_bytes());
                        }
                    }
                }
                base64(&bytes)
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// A weight as its tooltip writes it: four decimals, or three significant digits below 0.001.
pub(crate) fn weight_text(w: f64) -> String {
    if w == 0.0 || w.abs() >= 1e-3 || !w.is_finite() {
        format!("{w:.4}")
    } else {
        format!("{w:.2e}")
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
