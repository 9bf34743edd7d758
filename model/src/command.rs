//! `attention-lab encode`: texts through the real model, as JSON a teacher can load anywhere
//! (tokens, ids, every head's weights, the sentence embedding), and each layer's heads drawn.

use std::io::Write;
use std::path::PathBuf;

use attention_lab_io::error::{print, Error, Result};
use attention_lab_plot::heads_grid;
use serde::Serialize;

use crate::model::{Encoded, Model};

/// What `encode` reads and writes.
///
/// ```no_run
/// use attention_lab_model::command::{run, Options};
/// let options = Options { model: None, json: None, svg: None, texts: vec!["The cat sat.".into()] };
/// assert_eq!(run(options)?, 0);
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The model folder: config.json, model.safetensors, tokenizer.json.
    pub model: Option<PathBuf>,
    /// Write the JSON here instead of stdout: one object per text, a list for several.
    pub json: Option<PathBuf>,
    /// Draw each layer's heads into this folder, as textN-layerL.svg (made if missing).
    pub svg: Option<PathBuf>,
    /// The texts to encode.
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

/// Runs `encode`; returns the exit status. Each text is encoded, drawn and written before the
/// next is encoded, so memory holds one text's model state however many texts there are.
///
/// # Errors
/// A model folder that is missing or corrupt (one line naming the file and the tensor or
/// setting); a text the tokenizer refuses (found before anything is written); an SVG folder or
/// JSON file that cannot be written (the JSON file is replaced whole or not at all); a failing
/// stdout.
pub fn run(args: Options) -> Result<u8> {
    let model = match &args.model {
        Some(dir) => Model::load(dir),
        None => Model::installed(),
    }
    .map_err(|e| Error::Input(e.to_string()))?;
    // Every text is tokenised (cheap, and kept: a few ids a text) before one is encoded, so a
    // text the tokenizer refuses writes nothing.
    let tokens = args
        .texts
        .iter()
        .map(|text| model.tokenizer().encode(text))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Input(e.to_string()))?;
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), "create", e))?;
    }
    let stream = |write: &mut dyn FnMut(&str) -> Result<()>| -> Result<()> {
        let several = args.texts.len() > 1;
        if several {
            write("[")?;
        }
        for (t, (text, tokens)) in args.texts.iter().zip(&tokens).enumerate() {
            let encoded = model
                .encode_tokens(tokens.clone(), text)
                .map_err(|e| Error::Input(e.to_string()))?;
            if let Some(dir) = &args.svg {
                draw(dir, t + 1, &encoded)?;
            }
            let json = serde_json::to_string(&Record::new(text, &encoded))
                .expect("numbers, strings and lists always serialise");
            write(&if t > 0 { format!(",{json}") } else { json })?;
        }
        write(if several { "]\n" } else { "\n" })
    };
    match &args.json {
        None => stream(&mut |text| print(text))?,
        Some(path) => {
            // write_with keeps the old file when filling fails; the failure's own error is kept
            // here, to be reported as it is.
            let mut failure = None;
            let written = attention_lab_io::write_with(path, |file| {
                stream(&mut |text| {
                    file.write_all(text.as_bytes())
                        .map_err(|e| Error::io(path.display(), "write", e))
                })
                .map_err(|error| {
                    let io = std::io::Error::other(error.to_string());
                    failure = Some(error);
                    io
                })
            });
            match (failure, written) {
                (Some(error), _) => return Err(error),
                (None, Err(e)) => return Err(Error::io(path.display(), "write", e)),
                (None, Ok(())) => {}
            }
        }
    }
    Ok(0)
}

/// Text number `number`'s layers, one SVG each.
fn draw(dir: &std::path::Path, number: usize, encoded: &Encoded) -> Result<()> {
    let labels: Vec<&str> = encoded.tokens.tokens.iter().map(String::as_str).collect();
    for (l, layer) in encoded.output.layers.iter().enumerate() {
        let path = dir.join(format!("text{number}-layer{l}.svg"));
        heads_grid(&layer.attention, &labels)
            .title(&format!("text {number}, layer {l}"))
            .save_svg(&path)
            .map_err(|e| Error::Input(e.to_string()))?;
    }
    Ok(())
}
