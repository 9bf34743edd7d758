//! `attention-lab exercise`: a new two-head self-attention problem sheet (Markdown or a LaTeX
//! document) drawn from NumPy's `RandomState`, optionally with its worked answer key.
//!
//! Draw order, from `rs = np.random.RandomState(seed)`:
//! 1. `X = rs.randint(0, 3, (tokens, dim))`: small integers 0, 1, 2, easy by hand;
//! 2. for each head in turn: `W_Q`, `W_K`, `W_V`, each `np.round(rs.uniform(-1, 1, (dim, dk)),
//!    decimals)`;
//! 3. `W_O = np.round(rs.uniform(-1, 1, (heads * dk, dim)), decimals)`;
//! 4. with `--backward` only, `G = np.round(rs.uniform(-1, 1, (tokens, dim)), decimals)`, the
//!    gradient `dL/d(Z W_O)` the backward parts start from (drawn last, so the other matrices
//!    are the same with or without it).
//!
//! A rounded `-0.0` (in G too) is written as `0.0` (and used as `+0.0`), as a teacher would write it.

use crate::backward;
use crate::problem::Problem;
use crate::solve::{combined_mask, labels, steps, Part};
use attention_lab::np::{array_str, round, PrintOptions, RandomState};
use attention_lab::prelude::Mask;
use attention_lab_io::error::{print, write_file, Error, Result};
use ndarray::Array2;
use std::ops::RangeInclusive;

/// The largest and smallest sheets: a sheet is worked by hand. The flags of `exercise` take
/// these ranges, and [`draw`] refuses a value outside them.
pub const TOKENS: RangeInclusive<u64> = 1..=16;
/// The range of [`Options::dim`].
pub const DIM: RangeInclusive<u64> = 1..=16;
/// The range of [`Options::heads`].
pub const HEADS: RangeInclusive<u64> = 1..=8;
/// The range of [`Options::dk`].
pub const DK: RangeInclusive<u64> = 1..=16;
/// The range of [`Options::decimals`].
pub const DECIMALS: RangeInclusive<u64> = 0..=4;
/// The range of [`Options::padding`] (and at most `tokens - 1`).
pub const PADDING: RangeInclusive<u64> = 0..=15;
/// The range of [`Options::precision`].
pub const PRECISION: RangeInclusive<u64> = 0..=8;

/// A sheet to make, as `exercise`'s flags give it: one (`seed`) or a class's (`roster`).
///
/// ```
/// use attention_lab_classroom::exercise::{draw, Options};
/// let sheet = Options { seed: Some(7), tokens: 3, ..Options::default() };
/// assert_eq!(draw(&sheet, 7)?.x.dim(), (3, 4));
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Seed of NumPy's RandomState that draws the matrices.
    pub seed: Option<u32>,
    /// Tokens, i.e. rows of X.
    pub tokens: usize,
    /// Model width d_model, i.e. columns of X.
    pub dim: usize,
    /// Number of heads.
    pub heads: usize,
    /// Width d_k (= d_v) of each head.
    pub dk: usize,
    /// Decimals of the weight matrices.
    pub decimals: i32,
    /// A decoder's sheet: a causal mask, each token attends only to itself and the tokens
    /// before it (as `solve --causal`).
    pub causal: bool,
    /// The last N tokens of X are padding: no token attends to them (a key padding mask, as
    /// `solve --padding`). At most TOKENS - 1.
    pub padding: usize,
    /// Digits after the decimal point in the answer key, as `solve --precision P --suppress`.
    pub precision: usize,
    /// Markdown (LaTeX math, as GitHub and Jupyter render it) or a complete LaTeX document.
    pub format: Format,
    /// Append the worked answer key.
    pub answers: bool,
    /// Add the backward pass: G = dL/d(Z W_O) is drawn last, and parts (e) to (g) ask for
    /// dL/dW_O, dL/dZ_i, dL/dA_i, dL/dS_i, dL/dQ_i, dL/dK_i, dL/dV_i and the projections'.
    pub backward: bool,
    /// Write the sheet to FILE (whole or not at all, through a symlink, keeping its mode) instead of stdout.
    pub output: Option<String>,
    /// A class list (CSV with a column `id`, optionally `name`): a sheet and a key per student.
    pub roster: Option<std::path::PathBuf>,
    /// With --roster: write DIR/sheets/ID.{md,tex,pdf} and DIR/keys/ID.{md,tex,pdf,json}.
    pub out: Option<std::path::PathBuf>,
    /// With --roster: the course secret that, with each id, makes the student's seed.
    pub secret: Option<String>,
    /// With --roster: read the course secret from FILE (its trailing newline is dropped).
    pub secret_file: Option<std::path::PathBuf>,
}

impl Default for Options {
    /// The defaults of `exercise`'s flags: 2 tokens, width 4, 2 heads of 3, one decimal.
    fn default() -> Options {
        Options {
            seed: None,
            tokens: 2,
            dim: 4,
            heads: 2,
            dk: 3,
            decimals: 1,
            causal: false,
            padding: 0,
            precision: 4,
            format: Format::Md,
            answers: false,
            backward: false,
            output: None,
            roster: None,
            out: None,
            secret: None,
            secret_file: None,
        }
    }
}

/// The sheet's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Markdown with `$...$` and `$$...$$` math.
    Md,
    /// A complete LaTeX document for pdflatex (geometry and amsmath, both in texlive-latex-base).
    Tex,
}

/// Writes one sheet (`exercise --seed S`) to stdout or `--output`; a class's sheets
/// (`--roster`) are [`crate::roster::run`]'s.
///
/// # Errors
/// Bad options, a file that cannot be written, a failing stdout.
pub fn run(args: &Options) -> Result<()> {
    let seed = args.seed.unwrap_or_default();
    let layout = Layout {
        seed,
        title: format!("Multi-head self-attention by hand (seed {seed})"),
        answers: args.answers,
        format: args.format,
        handout: false,
    };
    let sheet = sheet(args, &layout)?;
    match &args.output {
        None => print(&sheet),
        Some(path) => write_file(path, sheet.as_bytes()),
    }
}

/// How a sheet is laid out: a single one on stdout, or a student's handout of a class.
pub struct Layout {
    /// The seed of the draws.
    pub seed: u32,
    /// The first heading.
    pub title: String,
    /// With the answer key.
    pub answers: bool,
    /// Markdown or LaTeX.
    pub format: Format,
    /// A handout: room to write after each part, the key on a page of its own, and every
    /// number of a key's matrix with the same count of decimals.
    pub handout: bool,
}

/// The mask `--causal` and `--padding N` ask for over `tokens` tokens, if any.
///
/// # Errors
/// `--padding` that leaves no token to attend to.
fn sheet_mask(args: &Options) -> Result<Option<Mask>> {
    let tokens = args.tokens;
    if args.padding >= tokens {
        return Err(Error::at(
            "--padding",
            format!(
                "{} padded tokens leave none of the {tokens} tokens to attend to (at most {})",
                args.padding,
                tokens - 1
            ),
        ));
    }
    let padded: Vec<bool> = (0..tokens).map(|t| t >= tokens - args.padding).collect();
    let x = format!("X has {tokens} tokens");
    combined_mask(
        args.causal,
        (args.padding > 0).then_some(&padded[..]),
        None,
        (&x, tokens),
        (&x, tokens),
    )
}

/// Draws the problem as documented in the module docs.
///
/// # Errors
/// A size outside its range (naming its flag), or padding that leaves no token.
pub fn draw(args: &Options, seed: u32) -> Result<Problem> {
    check(args)?;
    let mut rs = RandomState::new(seed);
    let random = |e: attention_lab::np::RandomError| Error::at("--seed", e);
    let x = rs
        .randint(0, 3, (args.tokens, args.dim))
        .map_err(random)?
        .mapv(|v| v as f64);
    let mut weights = |rows: usize, cols: usize| -> Result<Array2<f64>> {
        let w = rs.uniform(-1.0, 1.0, (rows, cols)).map_err(random)?;
        // `+ 0.0` turns the -0.0 that rounding leaves into 0.0.
        Ok(round(&w, args.decimals).mapv(|v| v + 0.0))
    };
    let (mut wq, mut wk, mut wv) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.heads {
        wq.push(weights(args.dim, args.dk)?);
        wk.push(weights(args.dim, args.dk)?);
        wv.push(weights(args.dim, args.dk)?);
    }
    let wo = weights(args.heads * args.dk, args.dim)?;
    let g = if args.backward {
        Some(weights(args.tokens, args.dim)?)
    } else {
        None
    };
    Ok(Problem {
        x,
        wq,
        wk,
        wv,
        wo,
        mask: sheet_mask(args)?,
        g,
    })
}

/// Each size within its range, as the flags check it for the command line.
fn check(args: &Options) -> Result<()> {
    let sizes = [
        ("--tokens", args.tokens as u64, TOKENS),
        ("--dim", args.dim as u64, DIM),
        ("--heads", args.heads as u64, HEADS),
        ("--dk", args.dk as u64, DK),
        (
            "--decimals",
            u64::try_from(args.decimals).unwrap_or(u64::MAX),
            DECIMALS,
        ),
        ("--padding", args.padding as u64, PADDING),
        ("--precision", args.precision as u64, PRECISION),
    ];
    for (flag, value, range) in sizes {
        if !range.contains(&value) {
            let shown = if flag == "--decimals" {
                args.decimals.to_string()
            } else {
                value.to_string()
            };
            return Err(Error::at(
                flag,
                format!("{shown} is not in {}..={}", range.start(), range.end()),
            ));
        }
    }
    Ok(())
}

/// One piece of the sheet; [`render`] writes it in the chosen format.
enum Block {
    /// A section heading.
    Heading(String),
    /// A paragraph; may hold `$...$` math.
    Text(String),
    /// A lettered part of the exercise: `(a)` and its paragraph.
    Part(char, String),
    /// Displayed equations, each its own line.
    Math(Vec<String>),
    /// Room to write, in centimetres (LaTeX only).
    Space(u32),
    /// A new page (LaTeX only).
    NewPage,
}

/// The whole sheet as text.
pub fn sheet(args: &Options, layout: &Layout) -> Result<String> {
    let problem = draw(args, layout.seed)?;
    let (tokens, dim, h, dk) = (args.tokens, args.dim, args.heads, args.dk);
    let mut blocks = vec![
        Block::Heading(layout.title.clone()),
        Block::Text(format!(
            "A sentence of {tokens} token{s} has been embedded: row $t$ of $X$ is the \
             embedding of token $t$, so $d_{{\\mathrm{{model}}}} = {dim}$. A self-attention layer with \
             {h} head{hs} reads it. Head $i$ has its own projections $W_Q^{{(i)}}$, \
             $W_K^{{(i)}}$ and $W_V^{{(i)}}$, each ${dim} \\times {dk}$ \
             ($d_k = d_v = {dk}$), and $W_O$ (${hdk} \\times {dim}$) maps the heads' joined \
             outputs back to width {dim}.",
            s = plural(tokens),
            hs = plural(h),
            hdk = h * dk,
        )),
        Block::Math(vec![format!("X = {}", bmatrix_fixed(&problem.x, 0))]),
    ];
    if let Some(mask) = &problem.mask {
        blocks.push(Block::Text(mask_text(args)));
        blocks.push(Block::Math(vec![format!("M = {}", bmatrix_mask(mask))]));
    }
    for n in 0..h {
        let i = n + 1;
        blocks.push(Block::Text(format!("Head {i}:")));
        let names = ["W_Q", "W_K", "W_V"].map(|m| format!("{m}^{{({i})}}"));
        let w = [&problem.wq[n], &problem.wk[n], &problem.wv[n]];
        let equations: Vec<String> = names
            .iter()
            .zip(w)
            .map(|(name, w)| format!("{name} = {}", bmatrix_fixed(w, args.decimals)))
            .collect();
        // Side by side only while three of them fit across a page.
        let side_by_side = dk <= 3 && args.decimals <= 2;
        blocks.push(Block::Math(if side_by_side {
            vec![equations.join(",\\quad ")]
        } else {
            equations
        }));
    }
    blocks.push(Block::Text("Output projection:".into()));
    blocks.push(Block::Math(vec![format!(
        "W_O = {}",
        bmatrix_fixed(&problem.wo, args.decimals)
    )]));
    if let Some(g) = &problem.g {
        blocks.push(Block::Text(
            "Backward pass: a loss $L$ computed from the layer's output has the gradient \
             $G = \\partial L / \\partial (Z W_O)$:"
                .into(),
        ));
        blocks.push(Block::Math(vec![format!(
            "G = {}",
            bmatrix_fixed(g, args.decimals)
        )]));
    }
    if layout.handout {
        // The tasks and the room to answer them start on a fresh page.
        blocks.push(Block::NewPage);
    }
    blocks.push(Block::Heading("Tasks".into()));
    let then = if args.backward {
        " Then work out its backward pass from $G$."
    } else {
        ""
    };
    blocks.push(Block::Text(format!(
        "Work out the layer's forward pass.{then} Apply the softmax to each row separately, \
         and give your results to {} decimal places.",
        args.precision
    )));
    let mut parts = part_texts(args).to_vec();
    if args.backward {
        parts.extend(backward::part_texts(problem.mask.is_some()));
    }
    for (letter, text) in &parts {
        blocks.push(Block::Part(*letter, text.clone()));
        if layout.handout {
            blocks.push(Block::Space(room_to_write(args, *letter)));
        }
    }
    if layout.answers {
        if layout.handout {
            blocks.push(Block::NewPage);
        }
        blocks.extend(answer_key(args, &problem, layout.handout)?);
    }
    Ok(render(&blocks, layout.format, max_cols(args)))
}

/// Centimetres to leave after a part: about a line and a half per row of its answers.
fn room_to_write(args: &Options, part: char) -> u32 {
    let rows = args.tokens as u32;
    let heads = args.heads as u32;
    let cm = match part {
        // Q, K, V of each head; then S, A, Z of each head; dA, dS; dQ ... dW_V.
        'a' | 'b' => 3 * heads * (rows + 1),
        'f' => 2 * heads * (rows + 1),
        'g' => 6 * heads * (rows + 1),
        _ => 2 * (rows + 1),
    };
    cm.clamp(3, 20)
}

/// What a masked sheet says about its mask.
fn mask_text(args: &Options) -> String {
    let mut text = String::new();
    if args.causal {
        text.push_str(
            "The layer is a decoder's: each token may attend only to itself and the tokens \
             before it (a causal mask). ",
        );
    }
    if args.padding > 0 {
        let n = args.padding;
        text.push_str(&if n == 1 {
            "The last row of $X$ is padding: no token may attend to it (a key padding mask). "
                .to_string()
        } else {
            format!(
                "The last {n} rows of $X$ are padding: no token may attend to them (a key \
                 padding mask). "
            )
        });
    }
    text + "The mask $M$ is added to the scores: $0$ where a query (row) may attend to a key \
            (column), $-\\infty$ where it may not, so a blocked key gets weight $0$."
}

/// A mask as LaTeX: `0` where a key may be attended to, `-\infty` where it is blocked.
fn bmatrix_mask(mask: &Mask) -> String {
    let m = mask.additive();
    bmatrix(
        m.nrows(),
        m.iter()
            .map(|&a| {
                if a == f64::NEG_INFINITY {
                    "-\\infty".to_string()
                } else {
                    tex_number(&format!("{a}"))
                }
            })
            .collect(),
    )
}

/// The wording of parts (a) to (d), the letter first.
fn part_texts(args: &Options) -> [(char, String); 4] {
    let names: Vec<String> = (1..=args.heads).map(|i| format!("Z_{i}")).collect();
    [
        (
            'a',
            "For every head $i$, compute the queries $Q_i = X W_Q^{(i)}$, the keys \
             $K_i = X W_K^{(i)}$ and the values $V_i = X W_V^{(i)}$."
                .into(),
        ),
        (
            'b',
            if args.causal || args.padding > 0 {
                "For every head, scale the dot products of queries and keys and add the mask, \
                 $S_i = Q_i K_i^\\top / \\sqrt{d_k} + M$, turn each row of $S_i$ into weights \
                 $A_i = \\operatorname{softmax}(S_i)$ (a score of $-\\infty$ gets weight $0$), \
                 and compute the head's output $Z_i = A_i V_i$."
            } else {
                "For every head, scale the dot products of queries and keys, \
                 $S_i = Q_i K_i^\\top / \\sqrt{d_k}$, turn each row of $S_i$ into weights \
                 $A_i = \\operatorname{softmax}(S_i)$, and compute the head's output \
                 $Z_i = \\operatorname{softmax}(Q_i K_i^\\top / \\sqrt{d_k})\\, V_i = A_i V_i$."
            }
            .into(),
        ),
        (
            'c',
            format!(
                "Join the heads' outputs side by side, $Z = [\\,{}\\,]$, a ${} \\times {}$ \
                 matrix.",
                names.join("\\;"),
                args.tokens,
                args.heads * args.dk
            ),
        ),
        (
            'd',
            format!(
                "Multiply by the output projection: compute $Z W_O$, a ${} \\times {}$ matrix.",
                args.tokens, args.dim
            ),
        ),
    ]
}

/// The worked answers: the matrices `solve --precision P --suppress` prints, grouped by part.
fn answer_key(args: &Options, problem: &Problem, fixed: bool) -> Result<Vec<Block>> {
    let out = problem.solution()?;
    let labels = labels(&out, problem.mask.is_some());
    let steps = steps(&out, &labels);
    let opts = PrintOptions {
        precision: args.precision,
        suppress: true,
        ..PrintOptions::NUMPY
    };
    let mut blocks = vec![Block::Heading("Answer key".into())];
    let letters = [
        (Part::Projections, 'a'),
        (Part::Attention, 'b'),
        (Part::Concat, 'c'),
        (Part::Output, 'd'),
    ];
    let shown = |m: &Array2<f64>| {
        if fixed {
            bmatrix_decimals(m, args.precision)
        } else {
            bmatrix_printed(m, &opts)
        }
    };
    for (part, letter) in letters {
        blocks.push(Block::Part(letter, String::new()));
        blocks.push(Block::Math(
            steps
                .iter()
                .filter(|s| s.part == part)
                .map(|s| format!("{} = {}", s.tex, shown(s.matrix)))
                .collect(),
        ));
    }
    if let Some(grads) = problem.gradients(&out)? {
        let steps = backward::steps(&grads, false);
        for letter in ['e', 'f', 'g'] {
            blocks.push(Block::Part(letter, String::new()));
            blocks.push(Block::Math(
                steps
                    .iter()
                    .filter(|s| backward::part_of(s.of) == Some(letter))
                    .filter_map(|s| {
                        let m = s.value.view().into_dimensionality::<ndarray::Ix2>().ok()?;
                        Some(format!("{} = {}", s.tex, shown(&m.to_owned())))
                    })
                    .collect(),
            ));
        }
    }
    Ok(blocks)
}

/// `s` when `n` calls for a plural.
fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The widest matrix on the sheet, for LaTeX's `MaxMatrixCols` (10 by default).
fn max_cols(args: &Options) -> usize {
    [args.dim, args.dk, args.tokens, args.heads * args.dk]
        .into_iter()
        .max()
        .unwrap_or(1)
}

/// A given matrix with exactly `decimals` digits, as it was rounded.
fn bmatrix_fixed(m: &Array2<f64>, decimals: i32) -> String {
    let d = decimals.max(0) as usize;
    bmatrix(m.nrows(), m.iter().map(|x| format!("{x:.d$}")).collect())
}

/// An answer with every number rounded to `decimals` digits, all shown (`0.5000`), and no
/// negative zero (`-0.0000` is `0.0000`).
fn bmatrix_decimals(m: &Array2<f64>, decimals: usize) -> String {
    let number = |x: &f64| {
        let text = format!("{x:.decimals$}");
        match text.strip_prefix('-') {
            Some(rest) if rest.bytes().all(|b| b == b'0' || b == b'.') => rest.to_string(),
            _ => tex_number(&text),
        }
    };
    bmatrix(m.nrows(), m.iter().map(number).collect())
}

/// An answer with the numbers NumPy prints at `opts` (the ones `solve` prints), written for
/// LaTeX: `1.` as `1`, `1.5e+20` as `1.5 \times 10^{20}`.
fn bmatrix_printed(m: &Array2<f64>, opts: &PrintOptions) -> String {
    // One line, no summary: every element, in order, separated by spaces and brackets.
    let opts = PrintOptions {
        linewidth: usize::MAX,
        threshold: usize::MAX,
        ..*opts
    };
    let text = array_str(m, &opts);
    let numbers = text
        .split(|c: char| c.is_whitespace() || c == '[' || c == ']')
        .filter(|t| !t.is_empty())
        .map(tex_number)
        .collect();
    bmatrix(m.nrows(), numbers)
}

/// One number NumPy printed, as LaTeX.
pub fn tex_number(token: &str) -> String {
    match token {
        "nan" => return "\\mathrm{nan}".into(),
        "inf" => return "\\infty".into(),
        "-inf" => return "-\\infty".into(),
        _ => {}
    }
    match token.split_once('e') {
        Some((mantissa, exponent)) => {
            let exponent: i64 = exponent.parse().unwrap_or(0);
            let mantissa = mantissa.strip_suffix('.').unwrap_or(mantissa);
            format!("{mantissa} \\times 10^{{{exponent}}}")
        }
        None => token.strip_suffix('.').unwrap_or(token).to_string(),
    }
}

/// `\begin{bmatrix} a & b \\ c & d \end{bmatrix}` from the elements in row-major order.
fn bmatrix(rows: usize, elements: Vec<String>) -> String {
    let cols = elements.len() / rows.max(1);
    let lines: Vec<String> = elements
        .chunks(cols.max(1))
        .map(|row| row.join(" & "))
        .collect();
    format!(
        "\\begin{{bmatrix}} {} \\end{{bmatrix}}",
        lines.join(" \\\\ ")
    )
}

/// The sheet in `format`; `max_cols` sizes LaTeX's matrix environment.
fn render(blocks: &[Block], format: Format, max_cols: usize) -> String {
    let mut out = String::new();
    if format == Format::Tex {
        // Both packages come with Debian's texlive-latex-base.
        out.push_str("\\documentclass[11pt]{article}\n\\usepackage[margin=2cm]{geometry}\n");
        out.push_str("\\usepackage{amsmath}\n");
        out.push_str(&format!(
            "\\setcounter{{MaxMatrixCols}}{{{}}}\n",
            max_cols.max(10)
        ));
        out.push_str("\\begin{document}\n\n");
    }
    let mut first_heading = true;
    for block in blocks {
        let text = match (block, format) {
            (Block::Heading(t), Format::Md) => {
                let level = if first_heading { "#" } else { "##" };
                first_heading = false;
                format!("{level} {t}\n")
            }
            (Block::Heading(t), Format::Tex) => {
                let command = if first_heading {
                    "section"
                } else {
                    "subsection"
                };
                first_heading = false;
                format!("\\{command}*{{{t}}}\n")
            }
            (Block::Text(t), _) => format!("{t}\n"),
            (Block::Part(letter, t), Format::Md) => {
                format!("**({letter})** {t}").trim_end().to_string() + "\n"
            }
            (Block::Part(letter, t), Format::Tex) => {
                format!("\\noindent\\textbf{{({letter})}} {t}")
                    .trim_end()
                    .to_string()
                    + "\n"
            }
            // One $$ block per equation: Markdown renderers differ on `\\` between them.
            (Block::Math(lines), Format::Md) => lines
                .iter()
                .map(|l| format!("$$\n{l}\n$$\n"))
                .collect::<Vec<_>>()
                .join("\n"),
            (Block::Space(cm), Format::Tex) => format!("\\vspace{{{cm}cm}}\n"),
            (Block::NewPage, Format::Tex) => "\\newpage\n".to_string(),
            (Block::Space(_) | Block::NewPage, Format::Md) => continue,
            (Block::Math(lines), Format::Tex) => {
                // gather* puts each equation on its own centred line.
                format!(
                    "\\begin{{gather*}}\n{}\n\\end{{gather*}}\n",
                    lines.join(" \\\\\n")
                )
            }
        };
        out.push_str(&text);
        out.push('\n');
    }
    match format {
        // The blank line after the last block would end the file with an empty line.
        Format::Md => format!("{}\n", out.trim_end()),
        Format::Tex => out + "\\end{document}\n",
    }
}
