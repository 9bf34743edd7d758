//! `attention-lab solve`: the worked solution of a multi-head self-attention problem, step by
//! step as a NumPy worked example prints it, or every intermediate as JSON.

use crate::answers::{Answers, BackwardAnswers};
use crate::backward::{self, Gradients};
use crate::matrices::{mask, matrix, padding, split_list, vector};
use attention_lab::np::{array_str, PrintOptions};
use attention_lab::prelude::{
    Attend, AttentionError, Head, Mask, MultiHead, MultiHeadOutput, Softmax,
};
use attention_lab_io::error::{print, Error, Result};
use ndarray::{Array1, Array2};

/// A problem for `solve`, as its flags give it: each matrix a `.npy` path or inline JSON (the
/// flag's name is in every message about it), and how to print the steps.
///
/// ```no_run
/// use attention_lab_classroom::solve::{run, Options};
/// let options = Options {
///     x: "[[1,0],[0,1]]".into(),
///     wq: vec!["[[1],[0]],[[0],[1]]".into()],
///     wk: vec!["[[1],[1]],[[1],[0]]".into()],
///     wv: vec!["[[1],[0]],[[0],[1]]".into()],
///     ..Options::default()
/// };
/// assert_eq!(run(options)?, 0);
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The input X, one row per token.
    pub x: String,
    /// W_Q of each head (comma-separated or repeated), or the one W_Q to split with --split.
    pub wq: Vec<String>,
    /// W_K of each head, as --wq.
    pub wk: Vec<String>,
    /// W_V of each head, as --wq.
    pub wv: Vec<String>,
    /// The output projection W_O applied to the concatenated heads.
    pub wo: Option<String>,
    /// Split the columns of a single W_Q, W_K and W_V into H heads.
    pub split: Option<usize>,
    /// The softmax: stable (max subtracted first) or naive (exp(s) / sum exp(s)).
    pub softmax: Softmax,
    /// Digits after the decimal point, as np.set_printoptions(precision=P).
    pub precision: usize,
    /// Never use scientific notation for small numbers, as np.set_printoptions(suppress=True).
    pub suppress: bool,
    /// Write every intermediate as JSON at full precision instead of the printed steps.
    pub json: bool,
    /// Mask the future: query token i attends only to keys 0..=i (a decoder's mask).
    pub causal: bool,
    /// A mask over the scores, queries x keys: booleans with true = blocked (as
    /// nn.MultiheadAttention's attn_mask, a bool .npy or [[false,true],...]), or floats added
    /// to the scores (a float .npy or [[0,"-Infinity"],...]).
    pub mask: Option<String>,
    /// Key padding: one boolean per key token, true = padding (a row of PyTorch's
    /// key_padding_mask), as [false,false,true] or a 1-D bool .npy.
    pub padding: Option<String>,
    /// Cross-attention: keys and values from this other sequence (one row per token), or
    /// KEY,VALUE to take them from two (kdim and vdim columns, the rows of W_K and W_V).
    pub kv: Option<String>,
    /// The bias b_Q of each head (comma-separated or repeated, [0.1,0.2] or .npy), or one to
    /// split with --split. A missing --bq, --bk or --bv is zero when another is given.
    pub bq: Vec<String>,
    /// The bias b_K of each head, as --bq.
    pub bk: Vec<String>,
    /// The bias b_V of each head, as --bq.
    pub bv: Vec<String>,
    /// The output bias b_O: output = Z W_O + b_O (needs --wo).
    pub bo: Option<String>,
    /// After the forward steps, the backward pass: every gradient from G = dL/d(output)
    /// back to W_O, each head's scores, weights, Q, K, V, W_Q, W_K, W_V and X.
    pub backward: bool,
    /// G = dL/d(output) for --backward: tokens x the output's width (W_O's columns, or the
    /// concatenation's without --wo). Ones (L = the sum of the outputs) when not given;
    /// giving it implies --backward.
    pub dz: Option<String>,
}

impl Default for Options {
    /// No matrices, the stable softmax and NumPy's print options.
    fn default() -> Options {
        Options {
            x: String::new(),
            wq: Vec::new(),
            wk: Vec::new(),
            wv: Vec::new(),
            wo: None,
            split: None,
            softmax: Softmax::Stable,
            precision: PrintOptions::NUMPY.precision,
            suppress: false,
            json: false,
            causal: false,
            mask: None,
            padding: None,
            kv: None,
            bq: Vec::new(),
            bk: Vec::new(),
            bv: Vec::new(),
            bo: None,
            backward: false,
            dz: None,
        }
    }
}

/// Runs `solve`; returns the exit status.
///
/// # Errors
/// A matrix that cannot be read, shapes that do not fit together; a failing stdout.
pub fn run(args: Options) -> Result<u8> {
    print(&solve(&args)?)?;
    Ok(0)
}

fn solve(args: &Options) -> Result<String> {
    let x = matrix("--x", &args.x)?;
    let wq = matrices("--wq", &args.wq)?;
    let wk = matrices("--wk", &args.wk)?;
    let wv = matrices("--wv", &args.wv)?;
    let wo = args.wo.as_deref().map(|w| matrix("--wo", w)).transpose()?;
    let (key, value) = match args.kv.as_deref() {
        None => (x.clone(), x.clone()),
        Some(kv) => match split_list(kv)[..] {
            [both] => {
                let m = matrix("--kv", both)?;
                (m.clone(), m)
            }
            [key, value] => (matrix("--kv", key)?, matrix("--kv", value)?),
            ref more => {
                return Err(Error::at(
                    "--kv",
                    format!(
                        "{} matrices given; give one (keys and values) or two (keys, values)",
                        more.len()
                    ),
                ))
            }
        },
    };
    let layer = layer(&wq, &wk, &wv, wo, args.split, args.kv.is_some())?;
    let [bq, bk, bv] = [("--bq", &args.bq), ("--bk", &args.bk), ("--bv", &args.bv)]
        .map(|(flag, values)| vectors(flag, values));
    let bo = args.bo.as_deref().map(|b| vector("--bo", b)).transpose()?;
    let layer =
        with_biases(layer, [bq?, bk?, bv?], bo, args.split.is_some())?.with_softmax(args.softmax);
    let padded = args
        .padding
        .as_deref()
        .map(|p| padding("--padding", p))
        .transpose()?;
    let given = args
        .mask
        .as_deref()
        .map(|m| mask("--mask", m))
        .transpose()?;
    let input = |flag: &str, m: &Array2<f64>| format!("{flag} is {}x{}", m.nrows(), m.ncols());
    let kv_flag = if args.kv.is_some() { "--kv" } else { "--x" };
    let mask = combined_mask(
        args.causal,
        padded.as_deref(),
        given,
        (&input("--x", &x), x.nrows()),
        (&input(kv_flag, &key), key.nrows()),
    )?;
    let out = layer
        .forward_cross(&x, &key, &value, &Attend::new().mask(mask.as_ref()))
        .map_err(|e| Error::Input(e.to_string()))?;
    let grads = if args.backward || args.dz.is_some() {
        if args.kv.is_some() {
            return Err(Error::at(
                "--backward",
                "not with --kv: the backward pass is self-attention's (X feeds Q, K and V)",
            ));
        }
        let dresult = backward::upstream(args.dz.as_deref(), &out)?;
        Some(Gradients::new(&layer, &x, &out, dresult)?)
    } else {
        None
    };
    if args.json {
        let answers = Answers {
            backward: grads.as_ref().map(BackwardAnswers::from),
            ..Answers::new(&out).with_mask(mask.as_ref())
        };
        return Ok(format!("{}\n", answers.to_json()?));
    }
    let opts = PrintOptions {
        precision: args.precision,
        suppress: args.suppress,
        ..PrintOptions::NUMPY
    };
    let mut text = print_steps(&out, mask.as_ref(), &opts);
    if let Some(g) = &grads {
        text.push_str(&backward::print_steps(g, layer.bo().is_some(), &opts));
    }
    Ok(text)
}

/// The mask of a problem from its parts, all of them applied (blocked where any blocks):
/// `causal`, the key padding `padded` (true = padding) and a `given` mask. `queries` and
/// `keys` are the inputs' descriptions for the errors (`--x is 2x4`) and their token counts.
/// `solve` and `exercise` both build their masks here.
///
/// ```
/// use attention_lab_classroom::solve::combined_mask;
///
/// let x = ("--x is 2x4", 2);
/// let mask = combined_mask(true, Some(&[false, true]), None, x, x).unwrap().unwrap();
/// assert!(mask.is_blocked(0, 1) && mask.is_blocked(1, 1) && !mask.is_blocked(1, 0));
/// assert!(combined_mask(false, Some(&[false]), None, x, x).is_err());
/// ```
///
/// # Errors
/// A [`Error`] naming the flag when a part does not fit the queries x keys scores.
pub fn combined_mask(
    causal: bool,
    padded: Option<&[bool]>,
    given: Option<Mask>,
    queries: (&str, usize),
    keys: (&str, usize),
) -> Result<Option<Mask>> {
    let (nq, nk) = (queries.1, keys.1);
    let mut parts = Vec::new();
    if causal {
        if nq != nk {
            return Err(Error::at(
                "--causal",
                format!(
                    "needs as many key tokens as query tokens, but {} and {}",
                    queries.0, keys.0
                ),
            ));
        }
        parts.push(Mask::causal(nq));
    }
    if let Some(padded) = padded {
        if padded.len() != nk {
            return Err(Error::at(
                "--padding",
                format!(
                    "{} entries but there are {nk} key tokens ({})",
                    padded.len(),
                    keys.0
                ),
            ));
        }
        parts.push(Mask::key_padding(nq, padded));
    }
    if let Some(given) = given {
        let (rows, cols) = given.additive().dim();
        if (rows, cols) != (nq, nk) {
            return Err(Error::at(
                "--mask",
                format!(
                    "the mask is {rows}x{cols} but the scores are {nq}x{nk} (one row per query \
                     token, {}; one column per key token, {})",
                    queries.0, keys.0
                ),
            ));
        }
        parts.push(given);
    }
    let mut parts = parts.into_iter();
    let Some(first) = parts.next() else {
        return Ok(None);
    };
    // Every part was checked to be queries x keys, so `and` cannot fail.
    parts
        .try_fold(first, |all, part| all.and(&part))
        .map(Some)
        .map_err(|e| Error::Input(e.to_string()))
}

/// Every bias given to a repeatable, comma-separated flag, in order.
fn vectors(flag: &str, values: &[String]) -> Result<Vec<Array1<f64>>> {
    values
        .iter()
        .flat_map(|v| split_list(v))
        .map(|v| vector(flag, v))
        .collect()
}

/// The layer with the biases given: one per head, or one per flag split like the weights
/// with `split`; a flag not given is zero when another is. `b_O` needs W_O (the flags check;
/// `with_output_bias` refuses it too).
///
/// # Errors
/// A [`Error`] naming the flag when the count of biases is wrong, or the library's shape
/// message naming the head.
fn with_biases(
    layer: MultiHead,
    biases: [Vec<Array1<f64>>; 3],
    bo: Option<Array1<f64>>,
    split: bool,
) -> Result<MultiHead> {
    let attention = |e: AttentionError| Error::Input(e.to_string());
    let flags = ["--bq", "--bk", "--bv"];
    let h = layer.heads().len();
    let mut layer = layer;
    if biases.iter().any(|b| !b.is_empty()) {
        let want = if split { 1 } else { h };
        for (flag, b) in flags.iter().zip(&biases) {
            if !b.is_empty() && b.len() != want {
                let what = if split {
                    "--split takes one bias to split".to_string()
                } else {
                    format!("--wq has {h} (one per head)")
                };
                return Err(Error::at(
                    flag,
                    format!("{} biases given but {what}", b.len()),
                ));
            }
        }
        let heads = layer
            .heads()
            .iter()
            .enumerate()
            .map(|(i, head)| {
                let widths = [head.wq().ncols(), head.wk().ncols(), head.wv().ncols()];
                let mut own = [0, 1, 2].map(|m| Array1::zeros(widths[m]));
                for m in 0..3 {
                    let Some(b) = biases[m].get(if split { 0 } else { i }) else {
                        continue;
                    };
                    own[m] = if split {
                        let total = widths[m] * h;
                        if b.len() != total {
                            return Err(Error::at(
                                flags[m],
                                format!(
                                    "{} entries but the matrix to split has {total} columns \
                                     (one entry per column)",
                                    b.len()
                                ),
                            ));
                        }
                        b.slice(ndarray::s![i * widths[m]..(i + 1) * widths[m]])
                            .to_owned()
                    } else {
                        b.clone()
                    };
                }
                let [bq, bk, bv] = own;
                head.clone().with_biases(bq, bk, bv).map_err(|e| {
                    // The library names the bias (b_Q, b_K, b_V); the user knows its flag.
                    let m = match &e {
                        AttentionError::Mismatch { left, .. } => ["b_Q", "b_K", "b_V"]
                            .iter()
                            .position(|n| *n == left.name)
                            .unwrap_or(0),
                        _ => 0,
                    };
                    Error::at(flags[m], format!("head {}: {e}", i + 1))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        layer = MultiHead::new(heads, layer.wo().cloned()).map_err(attention)?;
    }
    match bo {
        Some(bo) => layer.with_output_bias(bo).map_err(|e| Error::at("--bo", e)),
        None => Ok(layer),
    }
}

/// Every matrix given to a repeatable, comma-separated flag, in order.
fn matrices(flag: &str, values: &[String]) -> Result<Vec<Array2<f64>>, Error> {
    values
        .iter()
        .flat_map(|v| split_list(v))
        .map(|v| matrix(flag, v))
        .collect()
}

/// The layer from one W_Q/W_K/W_V per head, or from one of each split into `split` heads;
/// with `cross`, heads of cross-attention (W_K and W_V with the rows of the other sequence).
///
/// # Errors
/// A [`Error`] naming the flag when the counts of matrices disagree, or the library's
/// shape message.
pub fn layer(
    wq: &[Array2<f64>],
    wk: &[Array2<f64>],
    wv: &[Array2<f64>],
    wo: Option<Array2<f64>>,
    split: Option<usize>,
    cross: bool,
) -> Result<MultiHead> {
    let attention = |e: AttentionError| Error::Input(e.to_string());
    if let Some(h) = split {
        if cross {
            return Err(Error::at(
                "--split",
                "not with --kv: give W_Q, W_K and W_V of each head",
            ));
        }
        for (flag, ws) in [("--wq", wq), ("--wk", wk), ("--wv", wv)] {
            if ws.len() != 1 {
                return Err(Error::at(
                    flag,
                    format!(
                        "--split takes one matrix to split, but {} were given",
                        ws.len()
                    ),
                ));
            }
        }
        return MultiHead::split(&wq[0], &wk[0], &wv[0], h, wo).map_err(attention);
    }
    for (flag, ws) in [("--wk", wk), ("--wv", wv)] {
        if ws.len() != wq.len() {
            return Err(Error::at(
                flag,
                format!(
                    "{} matrices given but --wq has {} (one per head)",
                    ws.len(),
                    wq.len()
                ),
            ));
        }
    }
    // Head::new cannot know which head it builds; say it here.
    let heads = (0..wq.len())
        .map(|i| {
            // Cross-attention's W_K and W_V have the rows of the other sequence.
            let head = if cross { Head::cross } else { Head::new };
            head(wq[i].clone(), wk[i].clone(), wv[i].clone())
                .map_err(|e| Error::Input(format!("head {}: {e}", i + 1)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    MultiHead::new(heads, wo).map_err(attention)
}

/// Which part of a classic exercise a step answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// (a) Q, K and V of each head.
    Projections,
    /// (b) scores, weights and Z of each head.
    Attention,
    /// (c) the concatenation of the heads.
    Concat,
    /// (d) the output projection.
    Output,
}

/// One matrix of the worked solution, with its names for text and for LaTeX.
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    /// The exercise part it answers.
    pub part: Part,
    /// The label `solve` prints, e.g. `Head 1 - Q_1`.
    pub label: &'a str,
    /// The LaTeX name, e.g. `Q_1`.
    pub tex: &'a str,
    /// The matrix.
    pub matrix: &'a Array2<f64>,
}

/// Labels of one step: the printed one and the LaTeX one.
pub type Labels = (String, String);

/// The labels of every step, in order; kept apart from [`steps`] so the steps can borrow them.
/// With `masked`, the scores are labelled with the mask added (`+ mask`, `+ M`).
pub fn labels(out: &MultiHeadOutput, masked: bool) -> Vec<Labels> {
    let (plus, plus_tex) = if masked {
        (" + mask", " + M")
    } else {
        ("", "")
    };
    let mut labels = Vec::new();
    for (n, head) in out.heads.iter().enumerate() {
        let i = n + 1;
        let dk = head.k.ncols();
        for (text, tex) in [
            (format!("Q_{i}"), format!("Q_{i}")),
            (format!("K_{i}"), format!("K_{i}")),
            (format!("V_{i}"), format!("V_{i}")),
            (
                format!("scores = Q_{i} K_{i}^T / sqrt({dk}){plus}"),
                format!("S_{i} = Q_{i} K_{i}^\\top / \\sqrt{{{dk}}}{plus_tex}"),
            ),
            (
                "weights = softmax(scores)".to_string(),
                format!("A_{i} = \\operatorname{{softmax}}(S_{i})"),
            ),
            (
                format!("Z_{i} = weights V_{i}"),
                format!("Z_{i} = A_{i} V_{i}"),
            ),
        ] {
            labels.push((format!("Head {i} - {text}"), tex));
        }
    }
    let names: Vec<String> = (1..=out.heads.len()).map(|i| format!("Z_{i}")).collect();
    labels.push((
        format!("Concatenated Z = [{}]", names.join(" ")),
        format!("Z = [\\,{}\\,]", names.join("\\;")),
    ));
    if out.output.is_some() {
        labels.push(("Output = Z W_O".into(), "Z W_O".into()));
    }
    labels
}

/// Every matrix of the worked solution in the order `solve` prints them: per head Q, K, V,
/// scores, weights, Z; then the concatenation and, with W_O, the output.
pub fn steps<'a>(out: &'a MultiHeadOutput, labels: &'a [Labels]) -> Vec<Step<'a>> {
    let mut matrices: Vec<(Part, &Array2<f64>)> = Vec::new();
    for head in &out.heads {
        matrices.extend([
            (Part::Projections, &head.q),
            (Part::Projections, &head.k),
            (Part::Projections, &head.v),
            (Part::Attention, &head.scores),
            (Part::Attention, &head.weights),
            (Part::Attention, &head.z),
        ]);
    }
    matrices.push((Part::Concat, &out.concat));
    if let Some(output) = &out.output {
        matrices.push((Part::Output, output));
    }
    matrices
        .into_iter()
        .zip(labels)
        .map(|((part, matrix), (label, tex))| Step {
            part,
            label,
            tex,
            matrix,
        })
        .collect()
}

/// Whether `mask` only blocks (0 or -inf everywhere), so it reads as booleans.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_classroom::solve::is_boolean;
///
/// assert!(is_boolean(&Mask::causal(3)));
/// assert!(!is_boolean(&Mask::additive_from(array![[0.0, -1.5]])));
/// ```
pub fn is_boolean(mask: &Mask) -> bool {
    mask.additive()
        .iter()
        .all(|&a| a == 0.0 || a == f64::NEG_INFINITY)
}

/// The worked solution as `print("label:\n", M)` prints each step, a blank line after each
/// head and before the concatenation; a mask first, as booleans (True = blocked) when it
/// only blocks, else as the numbers added to the scores.
fn print_steps(out: &MultiHeadOutput, mask: Option<&Mask>, opts: &PrintOptions) -> String {
    let labels = labels(out, mask.is_some());
    let mut text = String::new();
    if let Some(mask) = mask {
        let (label, shown) = if is_boolean(mask) {
            let blocked = mask.additive().mapv(|a| a == f64::NEG_INFINITY);
            ("Mask (True = blocked)", array_str(&blocked, opts))
        } else {
            (
                "Mask (added to the scores)",
                array_str(mask.additive(), opts),
            )
        };
        text.push_str(&format!("{label}:\n {shown}\n\n"));
    }
    let mut last_part = None;
    for step in steps(out, &labels) {
        // Part (b) ends each head; a new head or the concatenation follows.
        if last_part == Some(Part::Attention) && step.part != Part::Attention {
            text.push('\n');
        }
        text.push_str(&format!(
            "{}:\n {}\n",
            step.label,
            array_str(step.matrix, opts)
        ));
        last_part = Some(step.part);
    }
    text
}
