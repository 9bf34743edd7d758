//! The next-token view: the probabilities of the most likely next tokens as horizontal bars,
//! with a temperature slider and a top-k slider that recompute the softmax as the library's
//! sampling does (`Decoder::generate`'s draw).

use attention_lab::softmax::sampling_softmax;
use ndarray::ArrayView1;

use crate::colormap::{head_rgb, GRID, INK};
use crate::font::{register_font, TICK_SIZE};
use crate::generation::{decoding_view, exact, svg_width, token_label, Drawn, GenerationError};
use crate::scene::{base64, num, text, title_item, Anchor, Item, Scene, MARGIN};

/// The top-k slider's end: the view carries this many of the largest logits (more when
/// [`NextTokenView::top_k`] asks for more).
pub(crate) const CARRIED: usize = 100;
/// How many of the largest logits' tokens the view names (the rows are among them).
const NAMED: usize = 128;
/// Rows shown by default.
const ROWS: usize = 20;
/// Pixels from one row to the next.
const ROW: f64 = 16.0;
/// A bar's length at probability 1.
const BAR: f64 = 300.0;
/// The widest token label; longer ones end in "…".
const LABEL_MAX: f64 = 150.0;

/// The temperatures the slider offers: 0.10 to 2.00 in steps of 0.05, each the `f64` its
/// two-decimal text names (as the script makes them).
pub(crate) fn slider_temperatures() -> Vec<f64> {
    (2..=40)
        .map(|i| format!("{:.2}", i as f64 * 0.05).parse().unwrap_or(1.0))
        .collect()
}

/// The probabilities of the next token, drawn as bars, the most probable first: made by
/// [`next_token_view`] or [`next_token_view_with`], shown inline by evcxr as HTML, written by
/// [`NextTokenView::save_svg`].
///
/// The maths is the library's sampling (`Decoder::generate` with `Sampling::Sample`): the
/// largest logit taken out, the logits divided by the temperature, only the `top_k` largest
/// kept when given (on a tie, the first in id order), then the softmax. The picture shows the
/// 20 most probable tokens ([`NextTokenView::rows`]) at the view's temperature and top-k (1
/// and none unless set), each with its probability to 3 decimals (its tooltip gives its id,
/// the token as the tokenizer writes it, the logit and 6 decimals), and what the other tokens
/// have left in all. Tokens are shown as [`pretty_token`](crate::pretty_token) writes them, a
/// token of spaces as `␣`.
///
/// In a notebook two sliders change the temperature (0.10 to 2.00 in steps of 0.05) and the
/// top-k (1 to 100, or all), and the script recomputes the bars. It does not carry every
/// logit (49,152 for SmolLM2): it carries the 100 largest exactly (the top-k slider's end; all
/// of them for a smaller vocabulary), and for each temperature the slider offers, the sum of
/// exp((logit − max) / T) over every other logit, computed here in `f64`. The softmax is then
/// exact at every setting the sliders can reach (the same sums as over the whole vocabulary),
/// in a few KB: no histogram or quantile estimate of the rest is needed, because the slider's
/// temperatures are known in advance.
///
/// ```
/// use attention_lab_plot::*;
///
/// let logits = [2.0, 1.0, 0.0, -1.0];
/// let view = next_token_view(&logits[..], &["Ġthe", "Ġa", "Ċ", "Ġcat"]);
/// let p = view.probabilities()?;
/// assert_eq!(p[0].0, 0); // "the" first
/// assert!((p[0].1 - 0.6439).abs() < 1e-4); // e^2 / (e^2 + e + 1 + 1/e)
/// let svg = view.to_svg()?;
/// assert!(svg.contains(">the</text>") && svg.contains(">↵</text>") && svg.contains(">0.644</text>"));
/// # Ok::<(), GenerationError>(())
/// ```
#[derive(Debug, Clone)]
pub struct NextTokenView {
    pub(crate) logits: Vec<f64>,
    /// The largest logits' ids, largest first (the lower id first on a tie), and their tokens.
    pub(crate) names: Vec<(usize, String)>,
    /// The token table's length, when it is shorter than the logits.
    pub(crate) short_table: Option<usize>,
    pub(crate) temperature: f64,
    pub(crate) top_k: Option<usize>,
    pub(crate) rows: usize,
    pub(crate) title: Option<String>,
    pub(crate) scale: f64,
}

/// The next-token view of a row of logits (one a token id, over the vocabulary: the last row
/// of a decoder's logits), `tokens` the tokenizer's table (the token of id `i` is
/// `tokens[i]`; it may be longer than the logits, not shorter).
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let logits = array![0.0, 3.0, 1.0];
/// let view = next_token_view(&logits, &["a", "b", "c"]);
/// assert_eq!(view.probabilities()?.iter().map(|r| r.0).collect::<Vec<_>>(), [1, 2, 0]);
/// let err = next_token_view(&logits, &["a", "b"]).to_svg().unwrap_err();
/// assert_eq!(err.to_string(), "the token table has 2 tokens for 3 logits (one a token id)");
/// # Ok::<(), GenerationError>(())
/// ```
pub fn next_token_view<'a, S: AsRef<str>>(
    logits: impl Into<ArrayView1<'a, f64>>,
    tokens: &[S],
) -> NextTokenView {
    let logits = logits.into();
    let mut view = next_token_view_with(logits, |id| {
        tokens
            .get(id)
            .map_or_else(String::new, |t| t.as_ref().to_string())
    });
    if tokens.len() < logits.len() {
        view.short_table = Some(tokens.len());
    }
    view
}

/// The next-token view of a row of logits, `token` giving each id's token (a tokenizer's
/// `id_to_token`, say); it is asked only for the 128 most probable ids.
///
/// ```
/// use attention_lab_plot::*;
///
/// let logits = vec![0.5; 50_000];
/// let view = next_token_view_with(&logits, |id| format!("Ġw{id}"));
/// let p = view.probabilities()?;
/// assert_eq!(p.len(), 20);
/// assert!(p.iter().all(|&(_, p)| (p - 1.0 / 50_000.0).abs() < 1e-15));
/// assert_eq!(p[0].0, 0); // a tie: the lower id first
/// assert!(view.to_svg()?.contains(">w0</text>"));
/// # Ok::<(), GenerationError>(())
/// ```
pub fn next_token_view_with<'a>(
    logits: impl Into<ArrayView1<'a, f64>>,
    token: impl Fn(usize) -> String,
) -> NextTokenView {
    let logits = logits.into().to_vec();
    let names = ranked(&logits, |&l| l, NAMED)
        .into_iter()
        .map(|id| (id, token(id)))
        .collect();
    NextTokenView {
        logits,
        names,
        short_table: None,
        temperature: 1.0,
        top_k: None,
        rows: ROWS,
        title: None,
        scale: 1.0,
    }
}

/// The `n` largest of `values` by `key` (largest first; the lower index first on a tie).
fn ranked<T>(values: &[T], key: impl Fn(&T) -> f64, n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    let by = |a: &usize, b: &usize| key(&values[*b]).total_cmp(&key(&values[*a])).then(a.cmp(b));
    if n < order.len() {
        order.select_nth_unstable_by(n, by);
        order.truncate(n);
    }
    order.sort_unstable_by(by);
    order
}

/// A token as a row's label.
fn label(raw: &str) -> Result<String, GenerationError> {
    token_label(raw, TICK_SIZE, LABEL_MAX)
}

/// A whole number with commas between thousands.
fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

impl NextTokenView {
    /// The temperature the picture shows (and the slider starts from): 1 by default; any
    /// finite value above 0 (the slider offers 0.10 to 2.00 in steps of 0.05).
    ///
    /// ```
    /// use attention_lab_plot::*;
    ///
    /// let logits = [1.0, 0.0];
    /// let cold = next_token_view(&logits[..], &["a", "b"]).temperature(0.1).probabilities()?;
    /// assert!(cold[0].1 > 0.9999); // e^10 : 1
    /// let err = next_token_view(&logits[..], &["a", "b"]).temperature(0.0).to_svg().unwrap_err();
    /// assert!(matches!(err, GenerationError::Temperature(_)));
    /// # Ok::<(), GenerationError>(())
    /// ```
    pub fn temperature(mut self, temperature: f64) -> NextTokenView {
        self.temperature = temperature;
        self
    }

    /// Keeps only the `k` largest logits (at least 1), as sampling with `top_k` does: the
    /// picture shows it, and the slider starts from it (its end is 100, or `k` when larger).
    ///
    /// ```
    /// use attention_lab_plot::*;
    ///
    /// let logits = [1.0, 3.0, 2.0];
    /// let p = next_token_view(&logits[..], &["a", "b", "c"]).top_k(1).probabilities()?;
    /// assert_eq!(p, [(1, 1.0)]);
    /// # Ok::<(), GenerationError>(())
    /// ```
    pub fn top_k(mut self, k: usize) -> NextTokenView {
        self.top_k = Some(k);
        self
    }

    /// How many of the most probable tokens are drawn (20 by default; held to 1 to 100).
    ///
    /// ```
    /// use attention_lab_plot::*;
    ///
    /// let logits: Vec<f64> = (0..200).map(|i| i as f64 / 10.0).collect();
    /// let view = next_token_view_with(&logits, |id| format!("t{id}")).rows(5);
    /// assert_eq!(view.probabilities()?.len(), 5);
    /// # Ok::<(), GenerationError>(())
    /// ```
    pub fn rows(mut self, rows: usize) -> NextTokenView {
        self.rows = rows.clamp(1, CARRIED);
        self
    }

    /// The rows the picture shows: each token id with its probability, the most probable
    /// first (the lower id first on a tie), at the view's temperature and top-k, computed over
    /// every logit as the library's sampling does.
    ///
    /// # Errors
    /// [`GenerationError`] for empty logits, a logit that is NaN or +inf (or every logit
    /// -inf), a temperature that is not finite and above 0, or a top-k of 0.
    ///
    /// ```
    /// use attention_lab_plot::*;
    ///
    /// let logits = [0.0, 0.0];
    /// assert_eq!(next_token_view(&logits[..], &["a", "b"]).probabilities()?, [(0, 0.5), (1, 0.5)]);
    /// let err = next_token_view(&[] as &[f64], &[] as &[&str]).probabilities().unwrap_err();
    /// assert_eq!(err.to_string(), "there are no logits to draw");
    /// # Ok::<(), GenerationError>(())
    /// ```
    pub fn probabilities(&self) -> Result<Vec<(usize, f64)>, GenerationError> {
        self.check()?;
        let logits = ArrayView1::from(&self.logits);
        let p = sampling_softmax(logits, self.temperature, self.top_k);
        // Ranked as the sampling sees them: two logits that scale to one value tie.
        let top = logits.fold(f64::NEG_INFINITY, |m, &v| m.max(v));
        let scaled: Vec<f64> = logits
            .iter()
            .map(|l| (l - top) / self.temperature)
            .collect();
        let shown = self
            .rows
            .min(self.top_k.unwrap_or(usize::MAX))
            .min(self.logits.len());
        Ok(ranked(&scaled, |&s| s, shown)
            .into_iter()
            .map(|i| (i, p[i]))
            .collect())
    }

    fn check(&self) -> Result<(), GenerationError> {
        if self.logits.is_empty() {
            return Err(GenerationError::EmptyLogits);
        }
        if let Some(index) = self
            .logits
            .iter()
            .position(|&l| l.is_nan() || l == f64::INFINITY)
        {
            return Err(GenerationError::Logit {
                index,
                value: self.logits[index],
            });
        }
        if self.logits.iter().all(|&l| l == f64::NEG_INFINITY) {
            return Err(GenerationError::NoFiniteLogit);
        }
        if let Some(tokens) = self.short_table {
            return Err(GenerationError::TokenTable {
                tokens,
                logits: self.logits.len(),
            });
        }
        let t = self.temperature;
        if !(t > 0.0 && t.is_finite()) {
            return Err(GenerationError::Temperature(t));
        }
        if self.top_k == Some(0) {
            return Err(GenerationError::ZeroTopK);
        }
        Ok(())
    }

    /// How many of the largest logits the notebook's view carries.
    fn carried(&self) -> usize {
        CARRIED.max(self.top_k.unwrap_or(0)).min(self.logits.len())
    }

    /// The picture, and in the notebook the numbers the script needs.
    #[allow(
        clippy::too_many_lines,
        reason = "one picture drawn top to bottom (bars, labels, slider), each part placed by the running y of the last"
    )]
    pub(crate) fn drawn(&self, interactive: bool) -> Result<Drawn, GenerationError> {
        register_font()?;
        let rows = self.probabilities()?;
        let raw = |id: usize| -> &str {
            self.names
                .iter()
                .find(|n| n.0 == id)
                .map_or("", |n| n.1.as_str())
        };
        let labels = rows
            .iter()
            .map(|&(id, _)| label(raw(id)))
            .collect::<Result<Vec<_>, _>>()?;
        let label_w = labels.iter().try_fold(24.0_f64, |m, l| {
            Ok::<_, GenerationError>(m.max(svg_width(l, TICK_SIZE)?))
        })?;
        let top = self.logits.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
        let x0 = MARGIN;
        let mut items = Vec::new();
        let (mut y, title_w) = title_item(&mut items, &self.title, (x0, MARGIN))?;
        let vocab = self.logits.len();
        let k_text = match self.top_k {
            Some(k) if k < vocab => k.to_string(),
            _ => format!("all ({} tokens)", grouped(vocab)),
        };
        let caption = format!("temperature {:.2} · top-k: {k_text}", self.temperature);
        items.push(
            text((x0, y + 9.0), &caption, TICK_SIZE, Anchor::Start).tagged("alab-caption", vec![]),
        );
        y += 22.0;
        let bar_x = x0 + label_w.min(LABEL_MAX) + 8.0;
        for (p, at) in [("0", 0.0), ("0.5", 0.5), ("1", 1.0)] {
            items.push(text(
                (bar_x + at * BAR, y + 6.0),
                p,
                TICK_SIZE,
                Anchor::Middle,
            ));
        }
        y += 14.0;
        let slots = if interactive {
            self.rows.min(self.carried())
        } else {
            rows.len()
        };
        for at in [0.0, 0.5, 1.0] {
            items.push(Item::Line {
                from: (bar_x + at * BAR, y),
                to: (bar_x + at * BAR, y + slots.max(rows.len()) as f64 * ROW),
                colour: if at == 0.0 { INK } else { GRID },
                opacity: 1.0,
                width: 1.0,
                data: vec![],
                values: vec![],
                hidden: false,
            });
        }
        let mut sum = 0.0;
        for r in 0..slots {
            let cy = y + r as f64 * ROW + ROW / 2.0;
            let (id, p) = rows.get(r).copied().unwrap_or((0, 0.0));
            sum += if r < rows.len() { p } else { 0.0 };
            let tip = format!(
                "id {id} · {} · logit {:.4} · p {p:.6}",
                raw(id),
                self.logits[id]
            );
            let mut label_item = text(
                (bar_x - 8.0, cy),
                labels.get(r).map_or("", String::as_str),
                TICK_SIZE,
                Anchor::End,
            )
            .tagged("alab-tok", vec![]);
            let mut p_item = text(
                (bar_x + p * BAR + 4.0, cy),
                &format!("{p:.3}"),
                TICK_SIZE,
                Anchor::Start,
            )
            .tagged("alab-p", vec![]);
            for item in [&mut label_item, &mut p_item] {
                if let Item::Text { tip: t, .. } = item {
                    *t = Some(tip.clone());
                }
            }
            items.push(Item::Group {
                class: "alab-row",
                data: vec![("r", r)],
                hidden: r >= rows.len(),
                items: vec![
                    label_item,
                    Item::Rect {
                        at: (bar_x, cy - 5.5),
                        size: (p * BAR, 11.0),
                        fill: Some(head_rgb(0)),
                        stroke: None,
                        data: vec![("bar", r)],
                        tip: None,
                    },
                    p_item,
                ],
            });
        }
        y += slots.max(rows.len()) as f64 * ROW + 4.0;
        let rest = format!(
            "the other {} tokens: {:.3} in all",
            grouped(vocab - rows.len()),
            (1.0 - sum).max(0.0)
        );
        items
            .push(text((x0, y + 9.0), &rest, TICK_SIZE, Anchor::Start).tagged("alab-rest", vec![]));
        y += 18.0;
        let right = bar_x + BAR + 48.0 + MARGIN;
        let scene = Scene {
            width: right.max(title_w).ceil(),
            height: (y + MARGIN).ceil(),
            scale: self.scale,
            data: vec![("bar-x", num(bar_x)), ("bar-w", num(BAR))],
            items,
        };
        let data = if interactive {
            self.carried_data(top)?
        } else {
            vec![]
        };
        Ok(Drawn { scene, data })
    }

    /// What the script computes the softmax from: the largest logits exactly, with their ids,
    /// labels and tokens, and for each temperature it can reach, the sum of
    /// exp((logit − max) / T) over every other logit.
    fn carried_data(&self, top: f64) -> Result<Vec<(&'static str, String)>, GenerationError> {
        let n = self.carried();
        let ids = ranked(&self.logits, |&l| l, n);
        let mut rest = vec![true; self.logits.len()];
        for &i in &ids {
            rest[i] = false;
        }
        let mut temps = slider_temperatures();
        if !temps.contains(&self.temperature) {
            temps.push(self.temperature);
        }
        let tails: Vec<String> = temps
            .iter()
            .map(|&t| {
                let tail: f64 = self
                    .logits
                    .iter()
                    .zip(&rest)
                    .filter(|(_, &r)| r)
                    .map(|(l, _)| ((l - top) / t).exp())
                    .fold(0.0, |a, b| a + b);
                exact(tail)
            })
            .collect();
        let named: Vec<&(usize, String)> = ids
            .iter()
            .map_while(|id| self.names.iter().find(|n| n.0 == *id))
            .collect();
        let join = |v: Vec<String>| v.join(",");
        Ok(vec![
            ("vocab", self.logits.len().to_string()),
            ("top", exact(top)),
            (
                "logits",
                join(ids.iter().map(|&i| exact(self.logits[i])).collect()),
            ),
            ("ids", join(ids.iter().map(|i| i.to_string()).collect())),
            (
                "labels",
                join(
                    named
                        .iter()
                        .map(|n| Ok(base64(label(&n.1)?.as_bytes())))
                        .collect::<Result<_, GenerationError>>()?,
                ),
            ),
            (
                "names",
                join(named.iter().map(|n| base64(n.1.as_bytes())).collect()),
            ),
            ("temps", join(temps.iter().map(|&t| exact(t)).collect())),
            ("tails", join(tails)),
            ("temperature", exact(self.temperature)),
            ("k", self.top_k.map_or(String::new(), |k| k.to_string())),
        ])
    }
}

decoding_view!(
    NextTokenView,
    "next-token-view",
    "next-token view",
    "next_token_view(&[2.0, 1.0, 0.5][..], &[\"Ġthe\", \"Ġa\", \"Ċ\"])"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(grouped(49_152), "49,152");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000_000), "1,000,000");
    }

    #[test]
    fn the_slider_temperatures_are_their_two_decimal_texts() {
        let t = slider_temperatures();
        assert_eq!(t.len(), 39);
        assert_eq!((t[0], t[18], t[38]), (0.1, 1.0, 2.0));
        assert!(t.contains(&0.35) && t.contains(&0.7));
    }

    #[test]
    fn ranking_breaks_ties_by_id() {
        assert_eq!(ranked(&[1.0, 3.0, 3.0, 2.0], |&v| v, 3), [1, 2, 3]);
        assert_eq!(ranked(&[1.0, 3.0], |&v| v, 5), [1, 0]);
    }
}
