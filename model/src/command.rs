//! `attention-lab encode`: texts through the real model, as JSON a teacher can load anywhere
//! (tokens, ids, every head's weights, the sentence embedding), and each layer's heads drawn.

use std::path::PathBuf;

use attention_lab_io::error::{print, write_file, Error, Result};
use attention_lab_plot::heads_grid;
use clap::Args;
use serde::Serialize;

use crate::model::{Encoded, Model};

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

/// One text's result, as the JSON names it.
#[derive(Serialize)]
struct Record<'a> {
    text: &'a str,
    tokens: &'a [String],
    ids: &'a [usize],
    /// layers x heads x tokens x tokens: the softmax weights.
    attentions: Vec<Vec<Vec<Vec<f64>>>>,
    embedding: Vec<f64>,
}

impl<'a> Record<'a> {
    fn new(text: &'a str, encoded: &'a Encoded) -> Record<'a> {
        let attentions = encoded
            .output
            .layers
            .iter()
            .map(|layer| {
                layer
                    .attention
                    .heads
                    .iter()
                    .map(|head| {
                        head.weights
                            .rows()
                            .into_iter()
                            .map(|r| r.to_vec())
                            .collect()
                    })
                    .collect()
            })
            .collect();
        Record {
            text,
            tokens: &encoded.tokens.tokens,
            ids: &encoded.tokens.ids,
            attentions,
            embedding: encoded.embedding.to_vec(),
        }
    }
}

/// Runs `encode`; returns the exit status.
///
/// # Errors
/// A model folder that is missing or corrupt (one line naming the file and the tensor or
/// setting); an SVG folder or JSON file that cannot be written; a failing stdout.
pub fn run(args: EncodeArgs) -> Result<u8> {
    let model = match &args.model {
        Some(dir) => Model::load(dir),
        None => Model::installed(),
    }
    .map_err(|e| Error::Input(e.to_string()))?;
    let encoded = args
        .texts
        .iter()
        .map(|text| model.encode(text).map_err(|e| Error::Input(e.to_string())))
        .collect::<Result<Vec<_>>>()?;
    // Everything is computed before anything is written, so a bad text writes nothing.
    if let Some(dir) = &args.svg {
        draw(dir, &encoded)?;
    }
    let records: Vec<Record<'_>> = args
        .texts
        .iter()
        .zip(&encoded)
        .map(|(t, e)| Record::new(t, e))
        .collect();
    let json = if records.len() == 1 {
        serde_json::to_string(&records[0])
    } else {
        serde_json::to_string(&records)
    }
    .expect("numbers, strings and lists always serialise")
        + "\n";
    match &args.json {
        Some(path) => write_file(path, json.as_bytes())?,
        None => print(&json)?,
    }
    Ok(0)
}

/// Each layer's heads, one SVG per text and layer.
fn draw(dir: &std::path::Path, encoded: &[Encoded]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), "create", e))?;
    for (t, text) in encoded.iter().enumerate() {
        for (l, layer) in text.output.layers.iter().enumerate() {
            let path = dir.join(format!("text{}-layer{l}.svg", t + 1));
            let labels: Vec<&str> = text.tokens.tokens.iter().map(String::as_str).collect();
            heads_grid(&layer.attention, &labels)
                .title(&format!("text {}, layer {l}", t + 1))
                .save_svg(&path)
                .map_err(|e| Error::Input(e.to_string()))?;
        }
    }
    Ok(())
}
