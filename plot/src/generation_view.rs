//! The generation view: the head view growing token by token. The prompt and the tokens a
//! model wrote, wrapped in lines as text; for the step shown, where its new token attends in
//! one layer: each head's weight as a box in the head's colour under every earlier token, or
//! one head's weight as the token's shade.

use ndarray::ArrayView3;
use plotters::style::RGBColor;

use crate::colormap::{head_rgb, INK};
use crate::font::{register_font, LABEL_SIZE, TICK_SIZE};
use crate::generation::{decoding_view, in_range, svg_width, token_label, Drawn, GenerationError};
use crate::scene::{base64, num, text, title_item, Anchor, Item, Scene, MARGIN};

/// The canvas's width by default: at scale 1.5 (a projector) 900 pixels, inside JupyterLab's
/// output area on a 1366-pixel screen with the file browser open (914 pixels for the output).
const WIDTH: f64 = 600.0;
/// Pixels from one line of text to the next.
const LINE: f64 = 27.0;
/// A token's shade: its centre below the line's top, its height.
const BG_Y: f64 = 10.0;
const BG_H: f64 = 17.0;
/// The strip of heads' boxes under a token: its centre below the line's top, its height.
const SEG_Y: f64 = 22.0;
const SEG_H: f64 = 5.0;
/// A shade's opacity at weight 1 (the text stays readable on it).
const BG_MAX: f64 = 0.55;
/// Space before a token that starts a word, and between the pieces of one.
const WORD_GAP: f64 = 6.0;
const PIECE_GAP: f64 = 1.0;
/// The prompt's text colour (the model's own tokens are black).
const PROMPT: RGBColor = RGBColor(112, 112, 112);
/// The most weight bytes a view carries for its script (one a weight): 640 KiB, 853 KB in
/// base64. The lesson's 40 + 24 tokens over 30 layers of 9 heads take 340,200.
pub(crate) const MAX_CARRIED: usize = 640 * 1024;
const SWATCH: f64 = 12.0;
const LEGEND_ROW: f64 = 22.0;

/// What a model wrote and where each of its new tokens attended: the input of
/// [`generation_view`], filled by the model crate (or by hand). Plain data: tokens as the
/// tokenizer writes them (`Ġ` and `▁` marks start words, `Ċ` is a newline), the prompt's
/// length, and for each generated token (a step) the attention weights of its query, layer by
/// layer and head by head (query heads: a grouped-query model's 9 query heads, not its 3 key
/// and value heads), over every token up to it and itself: what the KV cache held when it was
/// fed to the model. Step `s` is token `prompt_len + s` and has `prompt_len + s + 1` weights a
/// head.
///
/// `Decoder::generate` samples its last token without feeding it back; feed it once more
/// (one step of the KV cache) to have its row, or leave it out of `tokens`.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let mut steps = GenerationSteps::new(&["ĠThe", "Ġcat", "Ġsat"], 2);
/// // One step (the token "sat"): 1 layer x 2 heads x 3 keys.
/// steps.push_step(&array![[[0.5, 0.25, 0.25], [0.0, 0.0, 1.0]]]);
/// assert_eq!(steps.weights[0][0][1], vec![0.0, 0.0, 1.0]);
/// steps.check()?;
/// # Ok::<(), GenerationError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GenerationSteps {
    /// Every token, the prompt's then the generated ones, as the tokenizer writes them.
    pub tokens: Vec<String>,
    /// How many of `tokens` are the prompt (at least 1).
    pub prompt_len: usize,
    /// Steps x layers x heads x keys: the weights of generated token `s` (at
    /// `prompt_len + s`) over tokens `0..=prompt_len + s`.
    pub weights: Vec<Vec<Vec<Vec<f64>>>>,
}

impl GenerationSteps {
    /// The tokens and the prompt's length, without weights yet ([`GenerationSteps::push_step`]
    /// adds them).
    ///
    /// ```
    /// use attention_lab_plot::*;
    ///
    /// let steps = GenerationSteps::new(&["Hello", "Ġworld"], 1);
    /// assert_eq!((steps.tokens.len(), steps.prompt_len, steps.weights.len()), (2, 1, 0));
    /// ```
    pub fn new<S: AsRef<str>>(tokens: &[S], prompt_len: usize) -> GenerationSteps {
        GenerationSteps {
            tokens: tokens.iter().map(|t| t.as_ref().to_string()).collect(),
            prompt_len,
            weights: Vec::new(),
        }
    }

    /// Adds the next step's weights, layers x heads x keys (as an array, say one row of each
    /// layer's attention, stacked).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let mut steps = GenerationSteps::new(&["a", "b", "c"], 1);
    /// steps.push_step(&Array3::from_elem((2, 3, 2), 0.5)).push_step(&Array3::from_elem((2, 3, 3), 1.0 / 3.0));
    /// assert_eq!(steps.weights.len(), 2);
    /// steps.check()?;
    /// # Ok::<(), GenerationError>(())
    /// ```
    pub fn push_step<'a>(
        &mut self,
        weights: impl Into<ArrayView3<'a, f64>>,
    ) -> &mut GenerationSteps {
        let weights = weights.into();
        self.weights.push(
            weights
                .outer_iter()
                .map(|layer| layer.outer_iter().map(|head| head.to_vec()).collect())
                .collect(),
        );
        self
    }

    /// How many tokens follow the prompt.
    ///
    /// ```
    /// use attention_lab_plot::*;
    ///
    /// assert_eq!(GenerationSteps::new(&["a", "b", "c"], 1).generated(), 2);
    /// ```
    pub fn generated(&self) -> usize {
        self.tokens.len().saturating_sub(self.prompt_len)
    }

    /// Checks the shapes and the weights: a prompt of 1 token or more that leaves at least one
    /// generated token, a step a generated token, as many layers in each step and heads in
    /// each layer as the first, `prompt_len + s + 1` weights a head at step `s`, each a
    /// number in [0, 1] (1 + 1e-6 allowed for rounding).
    ///
    /// # Errors
    /// The first problem found, as a [`GenerationError`] naming the step, layer, head (and
    /// key) where it is.
    ///
    /// ```
    /// use attention_lab_plot::*;
    ///
    /// let mut steps = GenerationSteps::new(&["a", "b", "c"], 1);
    /// steps.weights = vec![vec![vec![vec![0.5, 0.5]]], vec![vec![vec![0.5, 0.5]]]];
    /// let err = steps.check().unwrap_err();
    /// assert_eq!(err.to_string(), "step 1, layer 0, head 0 has 2 weights, expected 3 (the prompt's tokens, the generated ones before it and itself)");
    /// steps.prompt_len = 4;
    /// assert!(matches!(steps.check(), Err(GenerationError::PromptLength { prompt_len: 4, tokens: 3 })));
    /// ```
    pub fn check(&self) -> Result<(), GenerationError> {
        self.dims().map(|_| ())
    }

    /// The layers and heads, once the steps are checked.
    fn dims(&self) -> Result<(usize, usize), GenerationError> {
        let tokens = self.tokens.len();
        if self.prompt_len == 0 || self.prompt_len > tokens {
            return Err(GenerationError::PromptLength {
                prompt_len: self.prompt_len,
                tokens,
            });
        }
        let generated = self.generated();
        if generated == 0 {
            return Err(GenerationError::NothingGenerated);
        }
        if self.weights.len() != generated {
            return Err(GenerationError::StepCount {
                steps: self.weights.len(),
                generated,
            });
        }
        let layers = self.weights[0].len().max(1);
        let heads = self.weights[0].first().map_or(0, Vec::len).max(1);
        for (step, w) in self.weights.iter().enumerate() {
            if w.len() != layers {
                return Err(GenerationError::LayerCount {
                    step,
                    layers: w.len(),
                    expected: layers,
                });
            }
            let expected = self.prompt_len + step + 1;
            for (layer, l) in w.iter().enumerate() {
                if l.len() != heads {
                    return Err(GenerationError::HeadCount {
                        step,
                        layer,
                        heads: l.len(),
                        expected: heads,
                    });
                }
                for (head, row) in l.iter().enumerate() {
                    if row.len() != expected {
                        return Err(GenerationError::KeyCount {
                            step,
                            layer,
                            head,
                            keys: row.len(),
                            expected,
                        });
                    }
                    if let Some(key) = row.iter().position(|w| !(0.0..=1.0 + 1e-6).contains(w)) {
                        return Err(GenerationError::Weight {
                            step,
                            layer,
                            head,
                            key,
                            value: row[key],
                        });
                    }
                }
            }
        }
        Ok((layers, heads))
    }
}

/// A weight as the view carries it: one byte, `round(255 × √w)`.
fn code(w: f64) -> u8 {
    (255.0 * w.clamp(0.0, 1.0).sqrt()).round() as u8
}

/// A byte back as a weight: `(b / 255)²`.
fn decoded(b: u8) -> f64 {
    (b as f64 / 255.0).powi(2)
}

/// The text growing token by token as a model wrote it, and where each new token attends:
/// made by [`generation_view`], shown inline by evcxr as HTML, written by
/// [`GenerationView::save_svg`].
///
/// The tokens are wrapped in lines as text (a `Ċ` token ends a line), the prompt in grey and
/// the model's tokens in black, a bar between them. For the step shown (the last by default,
/// [`GenerationView::step`]), its token is framed, and each token up to it has, under it, a
/// strip of boxes, one a head in the head's colour
/// ([`head_colour`](crate::head_colour)), as opaque as the square root of the weight the new
/// token gives it in the layer shown ([`GenerationView::layer`]); with one head shown
/// ([`GenerationView::head`]) the strip is that head's, and the token is shaded in its colour
/// too. Hover a token for the weights. Tokens are shown as
/// [`pretty_token`](crate::pretty_token) writes them, a blank one as `␣`.
///
/// In a notebook a slider (and a play button) reveals the generated tokens one at a time, and
/// menus pick the layer and the head (a click on a head's colour shows that head alone). The
/// script draws from the weights the view carries: one byte a weight, `b = round(255 × √w)`,
/// read back as `(b / 255)²` (within `√w / 255 + 1/260100` of the weight: 0.004 at most, at
/// w = 1, 0.0004 at w = 0.01); the opacity drawn is `b / 255`, and a weight under
/// (1/510)² ≈ 3.8e-6 rounds to 0 and draws nothing. The static picture is drawn from the same bytes, so the two agree.
/// The lesson's 40 + 24 tokens over 30 layers of 9 heads are 340,200 bytes, about 0.6 MB of
/// HTML; a view carries at most 640 KiB of them ([`GenerationView::layers`] picks fewer
/// layers; past the budget it carries the layer shown alone, and says so).
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let mut steps = GenerationSteps::new(&["ĠThe", "Ġcat", "Ġsat"], 2);
/// steps.push_step(&array![[[0.5, 0.25, 0.25], [0.0, 0.0, 1.0]]]);
/// let svg = generation_view(&steps).to_svg()?;
/// assert!(svg.contains(">cat</text>") && svg.contains("token 1 of 1: “sat” · layer 0 · all heads"));
/// # Ok::<(), GenerationError>(())
/// ```
#[derive(Debug, Clone)]
pub struct GenerationView {
    pub(crate) steps: GenerationSteps,
    pub(crate) step: Option<usize>,
    pub(crate) layer: usize,
    pub(crate) head: Option<usize>,
    pub(crate) layers: Option<Vec<usize>>,
    pub(crate) width: f64,
    pub(crate) title: Option<String>,
    pub(crate) scale: f64,
}

/// The generation view of what a model wrote ([`GenerationSteps`]): the last step, layer 0
/// and every head at first.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// let mut steps = GenerationSteps::new(&["a", "b"], 1);
/// steps.push_step(&array![[[0.25, 0.75]]]);
/// let html = generation_view(&steps).to_html();
/// assert!(html.contains("data-view=\"generation-view\"") && html.contains("data-weights=\""));
/// # Ok::<(), GenerationError>(())
/// ```
pub fn generation_view(steps: &GenerationSteps) -> GenerationView {
    GenerationView {
        steps: steps.clone(),
        step: None,
        layer: 0,
        head: None,
        layers: None,
        width: WIDTH,
        title: None,
        scale: 1.0,
    }
}

/// A token's place: its box's left, width and line's top.
struct Place {
    x: f64,
    w: f64,
    top: f64,
}

impl GenerationView {
    /// Shows step `s` (from 0: the first generated token) at first; the slider shows the
    /// others in the notebook.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let mut steps = GenerationSteps::new(&["a", "b", "c"], 1);
    /// steps.push_step(&array![[[0.5, 0.5]]]).push_step(&array![[[0.2, 0.3, 0.5]]]);
    /// let svg = generation_view(&steps).step(0).to_svg()?;
    /// assert!(svg.contains(">b</text>") && !svg.contains(">c</text>")); // c is not written yet
    /// let err = generation_view(&steps).step(2).to_svg().unwrap_err();
    /// assert_eq!(err.to_string(), "there is no step 2: they are 0 to 1");
    /// # Ok::<(), GenerationError>(())
    /// ```
    pub fn step(mut self, s: usize) -> GenerationView {
        self.step = Some(s);
        self
    }

    /// Shows layer `l` (from 0); the layer menu picks the others the view carries.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let mut steps = GenerationSteps::new(&["a", "b"], 1);
    /// steps.push_step(&Array3::from_elem((2, 1, 2), 0.5));
    /// assert!(generation_view(&steps).layer(1).to_svg()?.contains("· layer 1 ·"));
    /// let err = generation_view(&steps).layer(2).to_svg().unwrap_err();
    /// assert_eq!(err.to_string(), "there is no layer 2: they are 0 to 1");
    /// # Ok::<(), GenerationError>(())
    /// ```
    pub fn layer(mut self, l: usize) -> GenerationView {
        self.layer = l;
        self
    }

    /// Shows head `h` (from 0; "head 1" is head 0) alone: its strip, and the tokens shaded in
    /// its colour. Every head is shown unless this is called.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let mut steps = GenerationSteps::new(&["a", "b"], 1);
    /// steps.push_step(&Array3::from_elem((1, 3, 2), 0.5));
    /// assert!(generation_view(&steps).head(2).to_svg()?.contains("· head 3<"));
    /// assert!(generation_view(&steps).head(3).to_svg().is_err());
    /// # Ok::<(), GenerationError>(())
    /// ```
    pub fn head(mut self, h: usize) -> GenerationView {
        self.head = Some(h);
        self
    }

    /// The layers the notebook's view carries for its layer menu (the layer shown is always
    /// among them): fewer layers, a smaller notebook. Every layer by default, while they fit
    /// in 640 KiB.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let mut steps = GenerationSteps::new(&["a", "b"], 1);
    /// steps.push_step(&Array3::from_elem((4, 2, 2), 0.5));
    /// let html = generation_view(&steps).layer(3).layers(&[0, 2]).to_html();
    /// assert!(html.contains("data-layers=\"0,2,3\""));
    /// # Ok::<(), GenerationError>(())
    /// ```
    pub fn layers(mut self, layers: &[usize]) -> GenerationView {
        self.layers = Some(layers.to_vec());
        self
    }

    /// The picture's width in pixels at scale 1 (600 by default, 900 at a projector's 1.5:
    /// inside JupyterLab's output area on a 1366-pixel screen with the file browser open, 914
    /// pixels); the text wraps to it. Held to 240 to 4000.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_plot::*;
    ///
    /// let mut steps = GenerationSteps::new(&["a", "b"], 1);
    /// steps.push_step(&array![[[0.5, 0.5]]]);
    /// assert!(generation_view(&steps).width(400.0).to_svg()?.contains("viewBox=\"0 0 400 "));
    /// # Ok::<(), GenerationError>(())
    /// ```
    pub fn width(mut self, px: f64) -> GenerationView {
        self.width = if px.is_nan() {
            WIDTH
        } else {
            px.clamp(240.0, 4000.0)
        };
        self
    }

    /// The layers carried for the script, and whether some were left out for size.
    fn carried(&self, layers: usize, heads: usize) -> (Vec<usize>, bool) {
        let mut chosen = self.layers.clone().unwrap_or_else(|| (0..layers).collect());
        chosen.push(self.layer);
        chosen.sort_unstable();
        chosen.dedup();
        let n = self.steps.generated();
        let per_layer = heads * (n * (self.steps.prompt_len + 1) + n * (n - 1) / 2);
        if chosen.len() * per_layer <= MAX_CARRIED {
            (chosen, false)
        } else if per_layer <= MAX_CARRIED {
            (vec![self.layer], true)
        } else {
            (vec![], true)
        }
    }

    /// Layer `l`'s weights as bytes: steps x heads x keys, a step's keys `prompt_len + s + 1`.
    fn layer_bytes(&self, l: usize) -> Vec<u8> {
        self.steps
            .weights
            .iter()
            .flat_map(|step| step[l].iter().flat_map(|row| row.iter().map(|&w| code(w))))
            .collect()
    }

    /// The picture, and in the notebook the numbers the script needs.
    #[allow(
        clippy::too_many_lines,
        reason = "one picture drawn top to bottom (tokens, strips, legend), each part placed by the running y of the last"
    )]
    pub(crate) fn drawn(&self, interactive: bool) -> Result<Drawn, GenerationError> {
        register_font()?;
        let (layers, heads) = self.steps.dims()?;
        let prompt = self.steps.prompt_len;
        let n = self.steps.generated();
        let step = self.step.unwrap_or(n - 1);
        in_range("step", step, n)?;
        in_range("layer", self.layer, layers)?;
        if let Some(h) = self.head {
            in_range("head", h, heads)?;
        }
        for &l in self.layers.iter().flatten() {
            in_range("layer", l, layers)?;
        }
        let p = prompt + step;
        let (x0, right) = (MARGIN, self.width - MARGIN);
        let mut items = Vec::new();
        let (mut y, _) = title_item(&mut items, &self.title, (x0, MARGIN))?;

        let words = self
            .steps
            .tokens
            .iter()
            .map(|t| token_label(t, LABEL_SIZE, right - x0 - 4.0))
            .collect::<Result<Vec<_>, _>>()?;
        let heads_text =
            |h: Option<usize>| h.map_or("all heads".to_string(), |h| format!("head {}", h + 1));
        let caption = format!(
            "token {} of {n}: “{}” · layer {} · {}",
            step + 1,
            words[p],
            self.layer,
            heads_text(self.head)
        );
        items.push(
            text((x0, y + 9.0), &caption, TICK_SIZE, Anchor::Start).tagged("alab-caption", vec![]),
        );
        y += 24.0;

        // The heads' colours, wrapped.
        let mut x = x0;
        for h in 0..heads {
            let name = format!("head {}", h + 1);
            let w = SWATCH + 4.0 + svg_width(&name, TICK_SIZE)? + 12.0;
            if x > x0 && x + w - 12.0 > right {
                (x, y) = (x0, y + LEGEND_ROW);
            }
            let colour = head_rgb(h);
            let cy = y + LEGEND_ROW / 2.0;
            items.push(Item::Rect {
                at: (x, cy - SWATCH / 2.0),
                size: (SWATCH, SWATCH),
                fill: self.head.is_none_or(|s| s == h).then_some(colour),
                stroke: Some(colour),
                data: vec![("h", h)],
                tip: Some(format!(
                    "head {}: click to show it alone, again for every head",
                    h + 1
                )),
            });
            items.push(
                text((x + SWATCH + 4.0, cy), &name, TICK_SIZE, Anchor::Start)
                    .tagged("alab-head", vec![("h", h)]),
            );
            x += w;
        }
        y += LEGEND_ROW;
        let (carried, left_out) = self.carried(layers, heads);
        let key = format!("the prompt ({prompt} tokens)");
        items.push(Item::Text {
            at: (x0, y + 9.0),
            text: key.clone(),
            size: TICK_SIZE,
            colour: PROMPT,
            anchor: Anchor::Start,
            class: None,
            data: vec![],
            tip: None,
        });
        let mut after = format!("· written by the model ({n})");
        if interactive && left_out {
            after += &if carried.is_empty() {
                " · too large to carry: this step only".to_string()
            } else {
                format!(" · layer {} only (.layers() picks others)", self.layer)
            };
        }
        let kx = x0 + svg_width(&key, TICK_SIZE)? + 5.0;
        items.push(text((kx, y + 9.0), &after, TICK_SIZE, Anchor::Start));
        y += 24.0;

        // The tokens in lines.
        let min_box = (2.0 * heads as f64).clamp(10.0, 36.0);
        let mut places = Vec::with_capacity(words.len());
        let (mut x, mut top) = (x0, y);
        let mut sep = None;
        for (j, (raw, shown)) in self.steps.tokens.iter().zip(&words).enumerate() {
            let w = (svg_width(shown, LABEL_SIZE)? + 6.0).max(min_box);
            let starts_word = raw.starts_with(['Ġ', '▁', ' ']);
            let mut gap = if x == x0 {
                0.0
            } else if starts_word {
                WORD_GAP
            } else {
                PIECE_GAP
            };
            if j == prompt && x > x0 {
                gap += 8.0;
            }
            if x > x0 && x + gap + w > right {
                (x, top, gap) = (x0, top + LINE, 0.0);
            }
            x += gap;
            if j == prompt {
                sep = Some((x - 4.0, top));
            }
            places.push(Place { x, w, top });
            x += w;
            if raw.contains(['Ċ', '\n']) {
                (x, top) = (x0, top + LINE);
            }
        }
        let bottom = places.last().map_or(y, |pl| pl.top + LINE);

        // Where token p attends, in the layer shown.
        let weights = &self.steps.weights[step][self.layer];
        let shown: Vec<usize> = match self.head {
            Some(h) => vec![h],
            None => (0..heads).collect(),
        };
        let mut shade = Vec::new();
        let mut tips = Vec::with_capacity(p + 1);
        for (j, pl) in places.iter().enumerate().take(p + 1) {
            let mut tip = Vec::new();
            for (i, &h) in shown.iter().enumerate() {
                let b = code(weights[h][j]);
                tip.push(format!("head {} {:.3}", h + 1, decoded(b)));
                if b == 0 {
                    continue;
                }
                let line = |from: f64, to: f64, cy: f64, width: f64, opacity: f64| Item::Line {
                    from: (from, pl.top + cy),
                    to: (to, pl.top + cy),
                    colour: head_rgb(h),
                    opacity,
                    width,
                    data: vec![("t", j), ("h", h)],
                    values: vec![],
                    hidden: false,
                };
                let s = b as f64 / 255.0;
                if self.head.is_some() {
                    shade.push(line(pl.x, pl.x + pl.w, BG_Y, BG_H, BG_MAX * s));
                    shade.push(line(pl.x, pl.x + pl.w, SEG_Y, SEG_H, s));
                } else {
                    let from = pl.x + i as f64 * pl.w / heads as f64;
                    shade.push(line(from, from + pl.w / heads as f64, SEG_Y, SEG_H, s));
                }
            }
            tips.push(format!(
                "{}: {} · weights of “{}”, layer {}: {}",
                words[j],
                role(j, prompt),
                words[p],
                self.layer,
                tip.join(" · ")
            ));
        }
        items.push(Item::Group {
            class: "alab-shade",
            data: vec![],
            hidden: false,
            items: shade,
        });
        items.push(Item::Rect {
            at: (places[p].x - 2.0, places[p].top),
            size: (places[p].w + 4.0, SEG_Y + SEG_H / 2.0 + 1.5),
            fill: None,
            stroke: Some(INK),
            data: vec![("cur", 1)],
            tip: None,
        });
        if let Some((sx, stop)) = sep {
            items.push(Item::Line {
                from: (sx, stop + 1.0),
                to: (sx, stop + SEG_Y + SEG_H / 2.0),
                colour: INK,
                opacity: 1.0,
                width: 1.5,
                data: vec![],
                values: vec![],
                hidden: false,
            });
        }
        for (j, pl) in places.iter().enumerate() {
            if j > p && !interactive {
                break;
            }
            let tip = tips
                .get(j)
                .cloned()
                .unwrap_or_else(|| format!("{}: {}", words[j], role(j, prompt)));
            let word = Item::Text {
                at: (pl.x + pl.w / 2.0, pl.top + BG_Y),
                text: words[j].clone(),
                size: LABEL_SIZE,
                colour: if j < prompt { PROMPT } else { INK },
                anchor: Anchor::Middle,
                class: Some("alab-word"),
                data: vec![("t", j)],
                tip: Some(tip),
            };
            items.push(Item::Group {
                class: "alab-tok",
                data: vec![("t", j)],
                hidden: j > p,
                items: vec![word],
            });
        }

        let list = |f: &dyn Fn(&Place) -> f64| {
            places
                .iter()
                .map(|pl| num(f(pl)))
                .collect::<Vec<_>>()
                .join(",")
        };
        let scene = Scene {
            width: self.width.ceil(),
            height: (bottom + MARGIN).ceil(),
            scale: self.scale,
            data: vec![
                ("xs", list(&|pl| pl.x)),
                ("ws", list(&|pl| pl.w)),
                ("ys", list(&|pl| pl.top)),
                ("bg-y", num(BG_Y)),
                ("bg-h", num(BG_H)),
                ("seg-y", num(SEG_Y)),
                ("seg-h", num(SEG_H)),
                ("bg-max", num(BG_MAX)),
                ("step", step.to_string()),
                ("layer", self.layer.to_string()),
                ("head", self.head.map_or(String::new(), |h| h.to_string())),
            ],
            items,
        };
        let data = if interactive {
            vec![
                ("prompt", prompt.to_string()),
                ("steps", n.to_string()),
                ("heads", heads.to_string()),
                (
                    "layers",
                    carried
                        .iter()
                        .map(|l| l.to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                (
                    "weights",
                    carried
                        .iter()
                        .map(|&l| base64(&self.layer_bytes(l)))
                        .collect::<Vec<_>>()
                        .join(","),
                ),
            ]
        } else {
            vec![]
        };
        Ok(Drawn { scene, data })
    }
}

/// Where token `j` is: in the prompt or generated.
fn role(j: usize, prompt: usize) -> String {
    if j < prompt {
        format!("token {} of the prompt", j + 1)
    } else {
        format!("generated token {}", j - prompt + 1)
    }
}

decoding_view!(
    GenerationView,
    "generation-view",
    "generation view",
    "generation_view(&{ let mut s = GenerationSteps::new(&[\"ĠThe\", \"Ġcat\"], 1); s.push_step(&attention_lab::prelude::array![[[0.5, 0.5]]]); s })"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_the_square_root_of_the_weight_and_read_back_close() {
        assert_eq!((code(0.0), code(1.0), code(0.25)), (0, 255, 128));
        for i in 0..=1000 {
            let w = i as f64 / 1000.0;
            let back = decoded(code(w));
            assert!(
                (back - w).abs() <= w.sqrt() / 255.0 + 1.0 / 260_100.0,
                "{w} {back}"
            );
        }
        assert_eq!(code(3.8e-6), 0);
        assert_eq!(code(3.9e-6), 1);
    }
}
