//! `attention-lab solve`: the worked solution of a multi-head self-attention problem, step by
//! step as a NumPy worked example prints it, or every intermediate as JSON.

use crate::error::{print, Error, Result};
use crate::matrices::{matrix, split_list};
use attention_lab::np::{array_str, PrintOptions};
use attention_lab::prelude::{Head, MultiHead, MultiHeadOutput, Softmax};
use clap::{Args, ValueEnum};
use ndarray::Array2;

/// Arguments of `attention-lab solve`.
#[derive(Debug, Args)]
#[command(
    after_help = "Example (two heads of one column each, inline JSON and .npy files mixed):\n  \
    attention-lab solve --x '[[1,0],[0,1]]' \\\n      \
    --wq '[[1],[0]],[[0],[1]]' --wk '[[1],[1]],[[1],[0]]' --wv wv1.npy,wv2.npy --wo wo.npy\n\n\
    A value that starts with '[' is a JSON matrix, anything else a .npy path; several heads'\n\
    matrices are separated by commas (or the flag is repeated). With --json every\n\
    intermediate is written at full precision; NaN and infinities, which JSON cannot hold,\n\
    are written as the strings \"NaN\", \"Infinity\" and \"-Infinity\"."
)]
pub struct SolveArgs {
    /// The input X, one row per token.
    #[arg(long, value_name = "X")]
    pub x: String,
    /// W_Q of each head (comma-separated or repeated), or the one W_Q to split with --split.
    #[arg(long, value_name = "A.npy[,B.npy...]", required = true)]
    pub wq: Vec<String>,
    /// W_K of each head, as --wq.
    #[arg(long, value_name = "A.npy[,B.npy...]", required = true)]
    pub wk: Vec<String>,
    /// W_V of each head, as --wq.
    #[arg(long, value_name = "A.npy[,B.npy...]", required = true)]
    pub wv: Vec<String>,
    /// The output projection W_O applied to the concatenated heads.
    #[arg(long, value_name = "W.npy")]
    pub wo: Option<String>,
    /// Split the columns of a single W_Q, W_K and W_V into H heads.
    #[arg(long, value_name = "H")]
    pub split: Option<usize>,
    /// The softmax: stable (max subtracted first) or naive (exp(s) / sum exp(s)).
    #[arg(long, value_enum, default_value_t = SoftmaxArg::Stable)]
    pub softmax: SoftmaxArg,
    /// Digits after the decimal point, as np.set_printoptions(precision=P).
    #[arg(long, value_name = "P", default_value_t = PrintOptions::NUMPY.precision)]
    pub precision: usize,
    /// Never use scientific notation for small numbers, as np.set_printoptions(suppress=True).
    #[arg(long)]
    pub suppress: bool,
    /// Write every intermediate as JSON at full precision instead of the printed steps.
    #[arg(long)]
    pub json: bool,
}

/// The `--softmax` choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SoftmaxArg {
    /// `exp(s - max(s)) / sum(...)`, which never overflows.
    Stable,
    /// `exp(s) / sum(exp(s))`, which overflows above 709.78.
    Naive,
}

impl From<SoftmaxArg> for Softmax {
    fn from(s: SoftmaxArg) -> Softmax {
        match s {
            SoftmaxArg::Stable => Softmax::Stable,
            SoftmaxArg::Naive => Softmax::Naive,
        }
    }
}

/// Runs `solve`; returns the exit status.
///
/// # Errors
/// A matrix that cannot be read, shapes that do not fit together; a failing stdout.
pub fn run(args: SolveArgs) -> Result<u8> {
    print(&solve(&args)?)?;
    Ok(0)
}

fn solve(args: &SolveArgs) -> Result<String> {
    let x = matrix("--x", &args.x)?;
    let wq = matrices("--wq", &args.wq)?;
    let wk = matrices("--wk", &args.wk)?;
    let wv = matrices("--wv", &args.wv)?;
    let wo = args.wo.as_deref().map(|w| matrix("--wo", w)).transpose()?;
    let layer = layer(&wq, &wk, &wv, wo, args.split)?.with_softmax(args.softmax.into());
    let out = layer.forward(&x).map_err(|e| Error::Input(e.to_string()))?;
    if args.json {
        return Ok(format!("{}\n", to_json(&out)));
    }
    let opts = PrintOptions {
        precision: args.precision,
        suppress: args.suppress,
        ..PrintOptions::NUMPY
    };
    Ok(print_steps(&out, &opts))
}

/// Every matrix given to a repeatable, comma-separated flag, in order.
fn matrices(flag: &str, values: &[String]) -> Result<Vec<Array2<f64>>, Error> {
    values
        .iter()
        .flat_map(|v| split_list(v))
        .map(|v| matrix(flag, v))
        .collect()
}

/// The layer from one W_Q/W_K/W_V per head, or from one of each split into `split` heads.
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
) -> Result<MultiHead> {
    let attention = |e: attention_lab::prelude::AttentionError| Error::Input(e.to_string());
    if let Some(h) = split {
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
            Head::new(wq[i].clone(), wk[i].clone(), wv[i].clone())
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
pub fn labels(out: &MultiHeadOutput) -> Vec<Labels> {
    let mut labels = Vec::new();
    for (n, head) in out.heads.iter().enumerate() {
        let i = n + 1;
        let dk = head.k.ncols();
        for (text, tex) in [
            (format!("Q_{i}"), format!("Q_{i}")),
            (format!("K_{i}"), format!("K_{i}")),
            (format!("V_{i}"), format!("V_{i}")),
            (
                format!("scores = Q_{i} K_{i}^T / sqrt({dk})"),
                format!("S_{i} = Q_{i} K_{i}^\\top / \\sqrt{{{dk}}}"),
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

/// The worked solution as `print("label:\n", M)` prints each step, a blank line after each
/// head and before the concatenation.
fn print_steps(out: &MultiHeadOutput, opts: &PrintOptions) -> String {
    let labels = labels(out);
    let mut text = String::new();
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

/// Every intermediate at full precision: `{"heads": [{"q", "k", "v", "scores", "weights",
/// "z"}], "concat", "output"}`, `output` being null without W_O. Written by hand to keep
/// this key order (serde_json's maps sort their keys).
pub fn to_json(out: &MultiHeadOutput) -> String {
    let heads: Vec<String> = out
        .heads
        .iter()
        .map(|h| {
            let fields = [
                ("q", &h.q),
                ("k", &h.k),
                ("v", &h.v),
                ("scores", &h.scores),
                ("weights", &h.weights),
                ("z", &h.z),
            ];
            let fields: Vec<String> = fields
                .iter()
                .map(|(name, m)| format!("\"{name}\": {}", matrix_json(m)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        })
        .collect();
    let output = out
        .output
        .as_ref()
        .map_or_else(|| "null".to_string(), matrix_json);
    format!(
        "{{\"heads\": [{}], \"concat\": {}, \"output\": {output}}}",
        heads.join(", "),
        matrix_json(&out.concat)
    )
}

/// Rows of numbers, `[[1.0, 2.5], [3.0, 4.0]]`; serde_json writes the shortest digits that
/// round-trip. JSON has no NaN or infinity, so those become the strings "NaN", "Infinity"
/// and "-Infinity" (the names Python's json module prints bare).
pub fn matrix_json(m: &Array2<f64>) -> String {
    let number = |x: f64| match serde_json::Number::from_f64(x) {
        Some(n) => n.to_string(),
        None if x.is_nan() => "\"NaN\"".into(),
        None if x > 0.0 => "\"Infinity\"".into(),
        None => "\"-Infinity\"".into(),
    };
    let rows: Vec<String> = m
        .rows()
        .into_iter()
        .map(|row| {
            let numbers: Vec<String> = row.iter().map(|&x| number(x)).collect();
            format!("[{}]", numbers.join(", "))
        })
        .collect();
    format!("[{}]", rows.join(", "))
}
