//! The flags of `generate`.

use attention_lab_model::generate::Options;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `attention-lab generate`.
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    attention-lab generate --chat \"What is attention in a transformer? Answer in one sentence.\"\n  \
    attention-lab generate --max-tokens 20 --temperature 0.8 --top-k 40 --seed 7 \"Once upon a time\"\n  \
    attention-lab generate --json out.json --svg heads/ \"The cat sat on the mat. The cat\"\n\n\
    Without --model, the model that `attention-lab lab` installs (or $ATTENTION_LAB_SMOLLM):\n\
    SmolLM2-135M-Instruct. Greedy unless --temperature, --top-k or --seed is given (then a\n\
    temperature of 1 and a seed of 0 unless given). The text is printed as it is written; it\n\
    stops at --max-tokens or when the model ends its answer.")]
pub struct GenerateArgs {
    /// The GGUF file of a Llama model.
    #[arg(long, value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// Put the prompt in the model's chat template, as a user's message.
    #[arg(long)]
    pub chat: bool,
    /// The most tokens to generate.
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_tokens: usize,
    /// Sample, dividing the logits by T (above 0: below 1 sharper, above 1 flatter).
    #[arg(long, value_name = "T")]
    pub temperature: Option<f64>,
    /// Sample among the K likeliest tokens only.
    #[arg(long, value_name = "K")]
    pub top_k: Option<usize>,
    /// The seed of the draws (NumPy's RandomState).
    #[arg(long, value_name = "S")]
    pub seed: Option<u32>,
    /// Write the prompt's and the new tokens' ids, the text, and each step's ten likeliest
    /// tokens as JSON here.
    #[arg(long, value_name = "OUT")]
    pub json: Option<PathBuf>,
    /// Draw each layer's attention of the last token into this folder, as layerL.svg (made if
    /// missing).
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// The text to continue.
    #[arg(value_name = "PROMPT")]
    pub prompt: String,
}

impl From<GenerateArgs> for Options {
    fn from(args: GenerateArgs) -> Options {
        let GenerateArgs {
            model,
            chat,
            max_tokens,
            temperature,
            top_k,
            seed,
            json,
            svg,
            prompt,
        } = args;
        Options {
            prompt,
            chat,
            max_tokens,
            temperature,
            top_k,
            seed,
            json,
            svg,
            model,
        }
    }
}
