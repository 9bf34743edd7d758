//! The flags of `exercise`.

use attention_lab_classroom::exercise::{self, Format, Options};
use clap::builder::RangedU64ValueParser;
use clap::{Args, ValueEnum};

/// Arguments of `attention-lab exercise`.
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  \
    attention-lab exercise --seed 7 --answers --format tex --output sheet.tex && pdflatex sheet.tex\n\n\
    Draw order from np.random.RandomState(SEED): X = randint(0, 3, (TOKENS, DIM)); then per\n\
    head W_Q, W_K, W_V = round(uniform(-1, 1, (DIM, DK)), DECIMALS); then\n\
    W_O = round(uniform(-1, 1, (HEADS * DK, DIM)), DECIMALS); with --backward last\n\
    G = round(uniform(-1, 1, (TOKENS, DIM)), DECIMALS). The same seed and options always\n\
    give the same sheet, byte for byte.\n\n\
    A decoder's sheet (a causal mask, the last token padding; the key has the masked steps):\n  \
    attention-lab exercise --seed 7 --tokens 3 --causal --padding 1 --answers\n\n\
    A class (a sheet and a key per student; the seeds come from each id and the secret):\n  \
    attention-lab exercise --roster class.csv --out class --secret-file secret.txt")]
pub struct ExerciseArgs {
    /// Seed of NumPy's RandomState that draws the matrices.
    #[arg(
        long,
        value_name = "S",
        required_unless_present = "roster",
        conflicts_with = "roster"
    )]
    pub seed: Option<u32>,
    /// Tokens, i.e. rows of X.
    #[arg(long, default_value_t = Options::default().tokens, value_parser = RangedU64ValueParser::<usize>::new().range(exercise::TOKENS))]
    pub tokens: usize,
    /// Model width d_model, i.e. columns of X.
    #[arg(long, default_value_t = Options::default().dim, value_parser = RangedU64ValueParser::<usize>::new().range(exercise::DIM))]
    pub dim: usize,
    /// Number of heads.
    #[arg(long, default_value_t = Options::default().heads, value_parser = RangedU64ValueParser::<usize>::new().range(exercise::HEADS))]
    pub heads: usize,
    /// Width d_k (= d_v) of each head.
    #[arg(long, default_value_t = Options::default().dk, value_parser = RangedU64ValueParser::<usize>::new().range(exercise::DK))]
    pub dk: usize,
    /// Decimals of the weight matrices.
    #[arg(long, default_value_t = Options::default().decimals, value_parser = RangedU64ValueParser::<i32>::new().range(exercise::DECIMALS))]
    pub decimals: i32,
    /// A decoder's sheet: a causal mask, each token attends only to itself and the tokens
    /// before it (as `solve --causal`).
    #[arg(long)]
    pub causal: bool,
    /// The last N tokens of X are padding: no token attends to them (a key padding mask, as
    /// `solve --padding`). At most TOKENS - 1.
    #[arg(long, value_name = "N", default_value_t = Options::default().padding, value_parser = RangedU64ValueParser::<usize>::new().range(exercise::PADDING))]
    pub padding: usize,
    /// Digits after the decimal point in the answer key, as `solve --precision P --suppress`.
    #[arg(long, value_name = "P", default_value_t = Options::default().precision, value_parser = RangedU64ValueParser::<usize>::new().range(exercise::PRECISION))]
    pub precision: usize,
    /// Markdown (LaTeX math, as GitHub and Jupyter render it) or a complete LaTeX document.
    #[arg(long, value_enum, default_value_t = FormatArg::Md)]
    pub format: FormatArg,
    /// Append the worked answer key.
    #[arg(long)]
    pub answers: bool,
    /// Add the backward pass: G = dL/d(Z W_O) is drawn last, and parts (e) to (g) ask for
    /// dL/dW_O, dL/dZ_i, dL/dA_i, dL/dS_i, dL/dQ_i, dL/dK_i, dL/dV_i and the projections'.
    #[arg(long)]
    pub backward: bool,
    /// Write the sheet to FILE (whole or not at all, through a symlink, keeping its mode) instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<String>,
    /// A class list (CSV with a column `id`, optionally `name`): a sheet and a key per student.
    #[arg(long, value_name = "FILE.csv", requires = "out", conflicts_with_all = ["output", "answers", "format"])]
    pub roster: Option<std::path::PathBuf>,
    /// With --roster: write DIR/sheets/ID.{md,tex,pdf} and DIR/keys/ID.{md,tex,pdf,json}.
    #[arg(long, value_name = "DIR", requires = "roster")]
    pub out: Option<std::path::PathBuf>,
    /// With --roster: the course secret that, with each id, makes the student's seed.
    #[arg(
        long,
        value_name = "SECRET",
        requires = "roster",
        conflicts_with = "secret_file"
    )]
    pub secret: Option<String>,
    /// With --roster: read the course secret from FILE (its trailing newline is dropped).
    #[arg(long, value_name = "FILE", requires = "roster")]
    pub secret_file: Option<std::path::PathBuf>,
}

/// The `--format` choices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Markdown with `$...$` and `$$...$$` math.
    Md,
    /// A complete LaTeX document for pdflatex (geometry and amsmath, both in texlive-latex-base).
    Tex,
}

impl From<FormatArg> for Format {
    fn from(format: FormatArg) -> Format {
        match format {
            FormatArg::Md => Format::Md,
            FormatArg::Tex => Format::Tex,
        }
    }
}

impl From<ExerciseArgs> for Options {
    fn from(args: ExerciseArgs) -> Options {
        let ExerciseArgs {
            seed,
            tokens,
            dim,
            heads,
            dk,
            decimals,
            causal,
            padding,
            precision,
            format,
            answers,
            backward,
            output,
            roster,
            out,
            secret,
            secret_file,
        } = args;
        let format = format.into();
        Options {
            seed,
            tokens,
            dim,
            heads,
            dk,
            decimals,
            causal,
            padding,
            precision,
            format,
            answers,
            backward,
            output,
            roster,
            out,
            secret,
            secret_file,
        }
    }
}
