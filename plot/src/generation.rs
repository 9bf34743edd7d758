//! What the two views of a model writing ([`next_token_view`](crate::next_token_view) and
//! [`generation_view`](crate::generation_view)) share: their error, [`GenerationError`], and
//! their HTML: the picture drawn in Rust as an `<img>` of its SVG (which untrusted output
//! keeps), the numbers the script needs in `data-` attributes of the view's `<div>` (never
//! inside the picture, which travels in base64 and would grow by a third), the style the other
//! views use and a few KB of inline script of their own (`generation.js`). No network.

use std::fmt;
use std::path::Path;

use attention_lab::html;

use crate::error::PlotError;
use crate::font::text_size;
use crate::head_view::pretty_token;
use crate::interactive::page;
use crate::scene::Scene;

/// The sliders and the play button in the bar above a view.
const MORE_STYLE: &str = ".alab-view .alab-bar label { white-space: nowrap; }\n\
.alab-view .alab-bar input[type=range] { vertical-align: middle; width: 130px; }\n\
.alab-view .alab-bar output { display: inline-block; min-width: 3.2em; font-variant-numeric: tabular-nums; }";
const SCRIPT: &str = include_str!("generation.js");

/// Why a [`NextTokenView`](crate::NextTokenView) or a
/// [`GenerationView`](crate::GenerationView) cannot be drawn or written: what in the input or
/// the selection is wrong, or the drawing's own [`PlotError`].
///
/// ```
/// use attention_lab_plot::*;
///
/// let err = next_token_view(&[1.0, f64::NAN, 0.5][..], &["a", "b", "c"]).to_svg().unwrap_err();
/// assert_eq!(err.to_string(), "logit 1 is NaN: logits must be numbers, finite or -inf (a masked token)");
/// assert!(matches!(err, GenerationError::Logit { index: 1, .. }));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum GenerationError {
    /// The next-token view was given no logits.
    EmptyLogits,
    /// A logit is NaN or +inf (the softmax of the library's sampling is not defined then).
    Logit {
        /// Its token id.
        index: usize,
        /// The logit.
        value: f64,
    },
    /// Every logit is -inf: no token can be drawn.
    NoFiniteLogit,
    /// The token table has fewer tokens than there are logits.
    TokenTable {
        /// How many tokens the table has.
        tokens: usize,
        /// How many logits there are.
        logits: usize,
    },
    /// A temperature that is not finite and above 0.
    Temperature(f64),
    /// A top-k of 0 (sampling keeps at least the largest logit).
    ZeroTopK,
    /// The prompt is empty or longer than the tokens.
    PromptLength {
        /// The prompt's length given.
        prompt_len: usize,
        /// How many tokens there are, prompt and generated.
        tokens: usize,
    },
    /// No token follows the prompt.
    NothingGenerated,
    /// Not one step of weights a generated token.
    StepCount {
        /// How many steps of weights were given.
        steps: usize,
        /// How many tokens follow the prompt.
        generated: usize,
    },
    /// A step has no layers, or not as many as the first step.
    LayerCount {
        /// The step, from 0 (the first generated token).
        step: usize,
        /// How many layers it has.
        layers: usize,
        /// How many the first step has (at least 1).
        expected: usize,
    },
    /// A layer has no heads, or not as many as the first step's first layer.
    HeadCount {
        /// The step, from 0.
        step: usize,
        /// The layer, from 0.
        layer: usize,
        /// How many heads it has.
        heads: usize,
        /// How many the first layer of the first step has (at least 1).
        expected: usize,
    },
    /// A head's weights are not one a token up to the step's own (what the KV cache held).
    KeyCount {
        /// The step, from 0.
        step: usize,
        /// The layer, from 0.
        layer: usize,
        /// The head, from 0.
        head: usize,
        /// How many weights it has.
        keys: usize,
        /// The prompt's length plus the step plus 1.
        expected: usize,
    },
    /// A weight that is not a number in [0, 1].
    Weight {
        /// The step, from 0.
        step: usize,
        /// The layer, from 0.
        layer: usize,
        /// The head, from 0.
        head: usize,
        /// The key token, from 0.
        key: usize,
        /// The weight.
        value: f64,
    },
    /// A step, layer or head picked by index does not exist.
    OutOfRange {
        /// What was picked: `"step"`, `"layer"`, `"head"`.
        what: &'static str,
        /// The index asked for.
        index: usize,
        /// How many there are.
        len: usize,
    },
    /// The picture could not be drawn or written.
    Plot(PlotError),
}

impl fmt::Display for GenerationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use GenerationError::*;
        match self {
            EmptyLogits => write!(f, "there are no logits to draw"),
            Logit { index, value } => write!(
                f,
                "logit {index} is {value}: logits must be numbers, finite or -inf (a masked token)"
            ),
            NoFiniteLogit => write!(f, "every logit is -inf: no token can be drawn"),
            TokenTable { tokens, logits } => write!(
                f,
                "the token table has {tokens} tokens for {logits} logits (one a token id)"
            ),
            Temperature(t) => write!(
                f,
                "temperature {t}: the logits are divided by it, it must be finite and above 0"
            ),
            ZeroTopK => write!(f, "top_k must be at least 1"),
            PromptLength { prompt_len, tokens } => write!(
                f,
                "prompt_len is {prompt_len} but there are {tokens} tokens: the prompt is at least \
                 one token and at most all of them"
            ),
            NothingGenerated => write!(f, "no token follows the prompt: nothing was generated"),
            StepCount { steps, generated } => write!(
                f,
                "{steps} steps of weights for {generated} generated tokens (one a generated token)"
            ),
            LayerCount {
                step,
                layers,
                expected,
            } => write!(f, "step {step} has {layers} layers, expected {expected}"),
            HeadCount {
                step,
                layer,
                heads,
                expected,
            } => write!(
                f,
                "step {step}, layer {layer} has {heads} heads, expected {expected}"
            ),
            KeyCount {
                step,
                layer,
                head,
                keys,
                expected,
            } => write!(
                f,
                "step {step}, layer {layer}, head {head} has {keys} weights, expected {expected} \
                 (the prompt's tokens, the generated ones before it and itself)"
            ),
            Weight {
                step,
                layer,
                head,
                key,
                value,
            } => write!(
                f,
                "step {step}, layer {layer}, head {head}: the weight of token {key} is {value}, \
                 not a number in [0, 1]"
            ),
            OutOfRange { what, index, len } => match len {
                0 => write!(f, "there is no {what} {index}: there are none"),
                _ => write!(f, "there is no {what} {index}: they are 0 to {}", len - 1),
            },
            Plot(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for GenerationError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GenerationError::Plot(e) => Some(e),
            _ => None,
        }
    }
}

impl From<PlotError> for GenerationError {
    fn from(e: PlotError) -> GenerationError {
        GenerationError::Plot(e)
    }
}

/// `Err(OutOfRange)` unless `index < len`.
pub(crate) fn in_range(
    what: &'static str,
    index: usize,
    len: usize,
) -> Result<(), GenerationError> {
    if index < len {
        Ok(())
    } else {
        Err(GenerationError::OutOfRange { what, index, len })
    }
}

/// A picture and the numbers its script reads: `data-` attributes of the view's `<div>`,
/// names and ASCII values (numbers, base64) only.
pub(crate) struct Drawn {
    pub(crate) scene: Scene,
    pub(crate) data: Vec<(&'static str, String)>,
}

/// The view's HTML, or a small picture of the error's message.
pub(crate) fn html(kind: &str, drawn: Result<Drawn, GenerationError>) -> String {
    let mut attributes = String::new();
    let scene = drawn
        .map(|Drawn { scene, data }| {
            for (name, value) in data {
                attributes.push_str(&format!(" data-{name}=\"{}\"", html::escape(&value)));
            }
            scene
        })
        .map_err(|e| e.to_string());
    page(kind, scene, &attributes, MORE_STYLE, SCRIPT)
}

/// Writes a file through the workspace's one writer (a temporary name, then a rename).
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), GenerationError> {
    attention_lab_io::write(path, bytes).map_err(|source| {
        GenerationError::Plot(PlotError::Write {
            path: path.to_path_buf(),
            source,
        })
    })
}

/// The width in pixels of `text` drawn in the SVG at plotters `size`: the SVG writes the font
/// size as size / 1.24 (what [`text_size`] measures is at `size`).
pub(crate) fn svg_width(text: &str, size: f64) -> Result<f64, GenerationError> {
    Ok(text_size(text, size)?.0 as f64 / 1.24)
}

/// A token as the views write it: [`pretty_token`], a token of nothing but spaces (or space
/// marks) as `␣` a space, an empty one as `""`, cut with "…" to `max` pixels.
pub(crate) fn token_label(raw: &str, size: f64, max: f64) -> Result<String, GenerationError> {
    let blank = |c: char| c.is_whitespace() || c == 'Ġ' || c == '▁';
    let shown = if raw.is_empty() {
        "\"\"".to_string()
    } else if raw.chars().all(blank) {
        raw.chars()
            .map(|c| if c == '\n' || c == '\r' { '↵' } else { '␣' })
            .collect()
    } else {
        pretty_token(raw)
    };
    if svg_width(&shown, size)? <= max {
        return Ok(shown);
    }
    let mut chars: Vec<char> = shown.chars().collect();
    while chars.len() > 1 {
        chars.pop();
        let cut = chars.iter().collect::<String>() + "…";
        if svg_width(&cut, size)? <= max {
            return Ok(cut);
        }
    }
    Ok("…".into())
}

/// A number for the script, as `Number()` reads it back to the same `f64`: the shortest
/// exponent form that round-trips, `-Infinity` for a masked logit.
pub(crate) fn exact(x: f64) -> String {
    if x == f64::NEG_INFINITY {
        "-Infinity".into()
    } else {
        format!("{x:e}")
    }
}

/// What both views have: a title, a size, the static picture, the notebook's HTML and the SVG
/// file.
macro_rules! decoding_view {
    ($view:ident, $kind:literal, $what:literal, $example:literal) => {
        impl $view {
            #[doc = concat!("A title above the ", $what, ".")]
            ///
            /// ```
            /// use attention_lab_plot::*;
            ///
            #[doc = concat!("let view = ", $example, ";")]
            /// assert!(view.title("what comes next").to_svg()?.contains(">what comes next</text>"));
            /// # Ok::<(), GenerationError>(())
            /// ```
            pub fn title(mut self, title: &str) -> $view {
                self.title = Some(title.to_string());
                self
            }

            #[doc = concat!("How large the ", $what, " is shown in the notebook and in its SVG file, 1 the default; 1.5 is a projector's size. Held to 0.5 to 4 (1 when not a number); in the notebook the view's size menu changes it again.")]
            ///
            /// ```
            /// use attention_lab_plot::*;
            ///
            #[doc = concat!("let view = ", $example, ";")]
            /// let width = |svg: &str| svg.split("width=\"").nth(1).unwrap().split('"').next().unwrap().parse::<f64>().unwrap();
            /// assert_eq!(width(&view.clone().scale(1.5).to_svg()?), 1.5 * width(&view.to_svg()?));
            /// # Ok::<(), GenerationError>(())
            /// ```
            pub fn scale(mut self, scale: f64) -> $view {
                self.scale = if scale.is_nan() { 1.0 } else { scale.clamp(0.5, 4.0) };
                self
            }

            #[doc = concat!("The ", $what, " as an SVG document: the static picture of the current settings, what [`", stringify!($view), "::save_svg`] writes.")]
            ///
            /// # Errors
            /// [`GenerationError`] naming what in the input or the settings is wrong.
            ///
            /// ```
            /// use attention_lab_plot::*;
            ///
            #[doc = concat!("let svg = ", $example, ".to_svg()?;")]
            /// assert!(svg.starts_with("<svg"));
            /// # Ok::<(), GenerationError>(())
            /// ```
            pub fn to_svg(&self) -> Result<String, GenerationError> {
                Ok(self.drawn(false)?.scene.to_svg(None))
            }

            #[doc = concat!("The ", $what, " as one self-contained HTML fragment for a notebook: the SVG drawn in Rust as an image of itself (which untrusted output keeps), the numbers the script needs, then a few KB of inline style and script that add the sliders and menus. Nothing is fetched from the network. A view that cannot be drawn gives a small picture stating why.")]
            ///
            /// ```
            /// use attention_lab_plot::*;
            ///
            #[doc = concat!("let html = ", $example, ".to_html();")]
            #[doc = concat!("assert!(html.starts_with(\"<div class=\\\"alab-view\\\" data-view=\\\"", $kind, "\\\"\"));")]
            /// assert!(html.contains("<script>") && !html.contains("http:"));
            /// ```
            pub fn to_html(&self) -> String {
                $crate::generation::html($kind, self.drawn(true))
            }

            #[doc = concat!("Shows the ", $what, " in an evcxr Jupyter notebook as `text/html` (evcxr calls this for a cell's value).")]
            ///
            /// ```
            /// use attention_lab_plot::*;
            ///
            #[doc = concat!($example, ".evcxr_display(); // prints EVCXR_BEGIN_CONTENT text/html …")]
            /// ```
            pub fn evcxr_display(&self) {
                $crate::interactive::display(&self.to_html());
            }

            #[doc = concat!("Writes the static picture of the ", $what, "'s current settings as an SVG file, through a temporary name in the same folder and a rename.")]
            ///
            /// # Errors
            /// As [`to_svg`](Self::to_svg), and [`GenerationError::Plot`] holding
            /// [`PlotError::Write`](crate::PlotError::Write) (naming `path`) when the file
            /// cannot be written.
            ///
            /// ```
            /// use attention_lab_plot::*;
            ///
            #[doc = concat!("let path = std::env::temp_dir().join(format!(\"doc-", $kind, "-{}.svg\", std::process::id()));")]
            #[doc = concat!($example, ".save_svg(&path)?;")]
            /// assert!(std::fs::read_to_string(&path).unwrap().starts_with("<svg"));
            /// # std::fs::remove_file(&path).unwrap();
            #[doc = concat!("let err = ", $example, ".save_svg(\"/no/such/folder/v.svg\").unwrap_err();")]
            /// assert!(err.to_string().starts_with("cannot write /no/such/folder/v.svg: "));
            /// # Ok::<(), GenerationError>(())
            /// ```
            pub fn save_svg(&self, path: impl AsRef<std::path::Path>) -> Result<(), GenerationError> {
                $crate::generation::write_file(path.as_ref(), self.to_svg()?.as_bytes())
            }
        }
    };
}

pub(crate) use decoding_view;
