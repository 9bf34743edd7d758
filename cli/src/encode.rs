//! The flags of `encode`.

use attention_lab_model::command::Options;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `attention-lab encode`.
#[derive(Debug, Args)]
#[command(after_help = "Example:\n  \
    attention-lab encode --json cat.json --svg heads/ \"The cat sat on the mat.\"\n\n\
    Without --model, the model that `attention-lab lab` installs (or $ATTENTION_LAB_MODEL).\n\
    Without --json, the JSON goes to stdout. Each text is encoded on its own (no padding).")]
pub struct EncodeArgs {
    /// The model folder: config.json, model.safetensors, tokenizer.json.
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// Write the JSON here instead of stdout: one object per text, a list for several.
    #[arg(long, value_name = "OUT")]
    pub json: Option<PathBuf>,
    /// Draw each layer's heads into this folder, as textN-layerL.svg (made if missing).
    #[arg(long, value_name = "DIR")]
    pub svg: Option<PathBuf>,
    /// The texts to encode.
    #[arg(required = true, value_name = "TEXT")]
    pub texts: Vec<String>,
}

impl From<EncodeArgs> for Options {
    fn from(args: EncodeArgs) -> Options {
        let EncodeArgs {
            model,
            json,
            svg,
            texts,
        } = args;
        Options {
            model,
            json,
            svg,
            texts,
        }
    }
}
