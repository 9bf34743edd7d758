//! The flags of `solve`.

use attention_lab::prelude::Softmax;
use attention_lab_classroom::solve::Options;
use clap::{Args, ValueEnum};

/// Arguments of `attention-lab solve`.
#[derive(Debug, Args)]
#[command(
    after_help = "Example (two heads of one column each, inline JSON and .npy files mixed):\n  \
    attention-lab solve --x '[[1,0],[0,1]]' \\\n      \
    --wq '[[1],[0]],[[0],[1]]' --wk '[[1],[1]],[[1],[0]]' --wv wv1.npy,wv2.npy --wo wo.npy\n\n\
    A value that starts with '[' is a JSON matrix, anything else a .npy path; several heads'\n\
    matrices are separated by commas (or the flag is repeated). With --json every\n\
    intermediate is written at full precision; NaN and infinities, which JSON cannot hold,\n\
    are written as the strings \"NaN\", \"Infinity\" and \"-Infinity\".\n\n\
    Masked, cross-attention and biases (a blocked score is -inf, a fully masked row gets zero\n\
    weights; --mask booleans mean blocked where true, as nn.MultiheadAttention):\n  \
    attention-lab solve --x dec.npy --kv enc.npy --wq q.npy --wk k.npy --wv v.npy \\\n      \
    --padding '[false,false,true]' --bq '[0.1,0.2]' --wo wo.npy --bo '[0,1]'\n\n\
    The backward pass (masks and biases as forward; not with --kv), G = dL/d(output):\n  \
    attention-lab solve --x x.npy --wq q.npy --wk k.npy --wv v.npy --wo wo.npy --causal \\\n      \
    --backward --dz '[[1,0,0,0],[0,0,0,1]]'"
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
    #[arg(long, value_name = "P", default_value_t = Options::default().precision)]
    pub precision: usize,
    /// Never use scientific notation for small numbers, as np.set_printoptions(suppress=True).
    #[arg(long)]
    pub suppress: bool,
    /// Write every intermediate as JSON at full precision instead of the printed steps.
    #[arg(long)]
    pub json: bool,
    /// Mask the future: query token i attends only to keys 0..=i (a decoder's mask).
    #[arg(long)]
    pub causal: bool,
    /// A mask over the scores, queries x keys: booleans with true = blocked (as
    /// nn.MultiheadAttention's attn_mask, a bool .npy or [[false,true],...]), or floats added
    /// to the scores (a float .npy or [[0,"-Infinity"],...]).
    #[arg(long, value_name = "M")]
    pub mask: Option<String>,
    /// Key padding: one boolean per key token, true = padding (a row of PyTorch's
    /// key_padding_mask), as [false,false,true] or a 1-D bool .npy.
    #[arg(long, value_name = "[false,true,...]")]
    pub padding: Option<String>,
    /// Cross-attention: keys and values from this other sequence (one row per token), or
    /// KEY,VALUE to take them from two (kdim and vdim columns, the rows of W_K and W_V).
    #[arg(long, value_name = "MEMORY|KEY,VALUE")]
    pub kv: Option<String>,
    /// The bias b_Q of each head (comma-separated or repeated, [0.1,0.2] or .npy), or one to
    /// split with --split. A missing --bq, --bk or --bv is zero when another is given.
    #[arg(long, value_name = "B[,B...]")]
    pub bq: Vec<String>,
    /// The bias b_K of each head, as --bq.
    #[arg(long, value_name = "B[,B...]")]
    pub bk: Vec<String>,
    /// The bias b_V of each head, as --bq.
    #[arg(long, value_name = "B[,B...]")]
    pub bv: Vec<String>,
    /// The output bias b_O: output = Z W_O + b_O (needs --wo).
    #[arg(long, value_name = "B", requires = "wo")]
    pub bo: Option<String>,
    /// After the forward steps, the backward pass: every gradient from G = dL/d(output)
    /// back to W_O, each head's scores, weights, Q, K, V, W_Q, W_K, W_V and X.
    #[arg(long)]
    pub backward: bool,
    /// G = dL/d(output) for --backward: tokens x the output's width (W_O's columns, or the
    /// concatenation's without --wo). Ones (L = the sum of the outputs) when not given.
    #[arg(long, value_name = "G", requires = "backward")]
    pub dz: Option<String>,
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

impl From<SolveArgs> for Options {
    fn from(args: SolveArgs) -> Options {
        let SolveArgs {
            x,
            wq,
            wk,
            wv,
            wo,
            split,
            softmax,
            precision,
            suppress,
            json,
            causal,
            mask,
            padding,
            kv,
            bq,
            bk,
            bv,
            bo,
            backward,
            dz,
        } = args;
        let softmax = softmax.into();
        Options {
            x,
            wq,
            wk,
            wv,
            wo,
            split,
            softmax,
            precision,
            suppress,
            json,
            causal,
            mask,
            padding,
            kv,
            bq,
            bk,
            bv,
            bo,
            backward,
            dz,
        }
    }
}
