//! `attention-lab generate`: a real language model (SmolLM2-135M-Instruct) continues a prompt,
//! its text streamed to stdout as it is written; as JSON, every token with the ten likeliest
//! next tokens at each step; as SVG, where each layer's heads looked from the last token.

use std::io::Write;
use std::path::{Path, PathBuf};

use attention_lab::decoder::{DecoderOutput, Sampling, Step};
use attention_lab_io::error::{print, Error, Result};
use attention_lab_plot::heatmap;
use ndarray::{Array2, ArrayView1};
use serde::Serialize;

use crate::llama::Llama;

/// What `generate` does, from its flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The prompt to continue.
    pub prompt: String,
    /// Wrap the prompt as one user message in the model's chat template.
    pub chat: bool,
    /// The most tokens to generate (fewer when the model ends its answer).
    pub max_tokens: usize,
    /// Sampling's temperature; with `top_k` or `seed`, sampling instead of greedy.
    pub temperature: Option<f64>,
    /// Keep only the k likeliest tokens when sampling.
    pub top_k: Option<usize>,
    /// The seed of NumPy's RandomState that draws.
    pub seed: Option<u32>,
    /// Write the record here.
    pub json: Option<PathBuf>,
    /// Draw each layer's attention of the last token into this folder.
    pub svg: Option<PathBuf>,
    /// The GGUF file, instead of the installed one.
    pub model: Option<PathBuf>,
}

/// One of the likeliest next tokens.
#[derive(Serialize)]
struct Candidate {
    id: usize,
    token: String,
    p: f64,
}

/// A generated token and the distribution it was picked from.
#[derive(Serialize)]
struct StepRecord {
    id: usize,
    token: String,
    /// The ten likeliest tokens of that distribution, most likely first.
    top: Vec<Candidate>,
}

#[derive(Serialize)]
struct Record<'a> {
    prompt: &'a str,
    chat: bool,
    prompt_ids: &'a [usize],
    ids: Vec<usize>,
    tokens: Vec<String>,
    text: String,
    steps: Vec<StepRecord>,
}

/// The sampling the flags ask for: greedy unless a temperature, a top-k or a seed is given.
fn sampling(args: &Options) -> Sampling {
    if args.temperature.is_none() && args.top_k.is_none() && args.seed.is_none() {
        return Sampling::Greedy;
    }
    Sampling::Sample {
        temperature: args.temperature.unwrap_or(1.0),
        top_k: args.top_k,
        seed: args.seed.unwrap_or(0),
    }
}

/// Checks the flags against each other and the model, before anything is generated or written.
fn check(args: &Options, model: &Llama, prompt: &[usize]) -> Result<()> {
    if let Some(t) = args.temperature {
        if !(t > 0.0 && t.is_finite()) {
            return Err(Error::at(
                format!("--temperature {t}"),
                "it must be a finite number above 0",
            ));
        }
    }
    if args.top_k == Some(0) {
        return Err(Error::at("--top-k 0", "sampling keeps at least one token"));
    }
    let context = model.config().context;
    if prompt.len().saturating_add(args.max_tokens) > context {
        return Err(Error::at(
            format!("--max-tokens {}", args.max_tokens),
            format!(
                "the prompt's {} tokens and {} more pass the model's context of {context} tokens",
                prompt.len(),
                args.max_tokens
            ),
        ));
    }
    Ok(())
}

/// Runs `generate`; returns the exit status.
///
/// ```no_run
/// use attention_lab_model::generate::{run, Options};
/// let status = run(Options {
///     prompt: "What is attention?".into(), chat: true, max_tokens: 32,
///     temperature: None, top_k: None, seed: None, json: None, svg: None, model: None,
/// })?;
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
///
/// # Errors
/// [`Error::Input`] for an empty prompt, a model that cannot be read, or flags that do not
/// fit (`--max-tokens` past the context, a temperature not above 0, a top-k of 0); I/O errors
/// naming the file for `--json` and `--svg`; a closed stdout ends the text quietly.
pub fn run(args: Options) -> Result<u8> {
    if args.prompt.is_empty() {
        return Err(Error::at("the prompt", "empty: give some text to continue"));
    }
    let model = match &args.model {
        Some(path) => Llama::load(path),
        None => Llama::installed(),
    }
    .map_err(|e| Error::Input(e.to_string()))?;
    let tokenizer = model.tokenizer();
    let prompt = if args.chat {
        tokenizer.chat_ids(&args.prompt)
    } else {
        tokenizer.encode(&args.prompt, true)
    }
    .map_err(|e| Error::Input(e.to_string()))?;
    if prompt.is_empty() {
        return Err(Error::at(
            "the prompt",
            "no tokens: give some text to continue",
        ));
    }
    check(&args, &model, &prompt)?;
    if let Some(dir) = &args.svg {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display(), "create", e))?;
    }
    let (_, steps) = model
        .decoder()
        .generation(&prompt, sampling(&args))
        .map_err(|e| Error::Input(e.to_string()))?;
    let mut text = tokenizer.stream(true);
    let mut records = Vec::new();
    let mut last: Option<Step> = None;
    for step in steps.take(args.max_tokens) {
        let step = step.map_err(|e| Error::Input(e.to_string()))?;
        let shown = text.push(step.id);
        records.push(StepRecord {
            id: step.id,
            token: token(&model, step.id),
            top: top(&model, step.probabilities.view(), 10),
        });
        let end = Some(step.id) == tokenizer.eos();
        last = Some(step);
        print(&shown)?;
        if end {
            break;
        }
    }
    print(&format!("{}\n", text.finish()))?;
    let ids: Vec<usize> = records.iter().map(|r| r.id).collect();
    if let (Some(dir), Some(step)) = (&args.svg, &last) {
        let mut all = prompt.clone();
        all.extend(&ids);
        draw(dir, &model, &all, &step.output)?;
    }
    if let Some(path) = &args.json {
        let record = Record {
            prompt: &args.prompt,
            chat: args.chat,
            prompt_ids: &prompt,
            tokens: ids.iter().map(|&id| token(&model, id)).collect(),
            text: tokenizer.decode(&ids, true),
            ids,
            steps: records,
        };
        let json = serde_json::to_string(&record).expect("numbers, strings and lists serialise");
        attention_lab_io::write_with(path, |file| file.write_all(format!("{json}\n").as_bytes()))
            .map_err(|e| Error::io(path.display(), "write", e))?;
    }
    Ok(0)
}

/// A token's own spelling (`Ġthe`, `<|im_end|>`).
fn token(model: &Llama, id: usize) -> String {
    model.tokenizer().token(id).unwrap_or_default().to_owned()
}

/// The `n` likeliest tokens, most likely first (the lower id first on a tie).
fn top(model: &Llama, p: ArrayView1<'_, f64>, n: usize) -> Vec<Candidate> {
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&a, &b| p[b].total_cmp(&p[a]).then(a.cmp(&b)));
    order
        .into_iter()
        .take(n)
        .map(|id| Candidate {
            id,
            token: token(model, id),
            p: p[id],
        })
        .collect()
}

/// Each layer's heads from the last token: a heads x tokens heatmap, `layerL.svg`.
fn draw(dir: &Path, model: &Llama, ids: &[usize], last: &DecoderOutput) -> Result<()> {
    let labels: Vec<String> = model
        .tokenizer()
        .tokens(ids)
        .iter()
        .map(|t| attention_lab_plot::pretty_token(t))
        .collect();
    for (l, block) in last.blocks.iter().enumerate() {
        let weights = &block.attention.weights;
        let keys = weights.first().map_or(0, |w| w.ncols());
        let rows = Array2::from_shape_fn((weights.len(), keys), |(h, k)| weights[h][(0, k)]);
        let heads: Vec<String> = (0..weights.len()).map(|h| format!("head {h}")).collect();
        let path = dir.join(format!("layer{l}.svg"));
        heatmap(&rows)
            .row_labels(&heads)
            .col_labels(&labels[..keys.min(labels.len())])
            .title(&format!("layer {l}: where the last token looks"))
            .save_svg(&path)
            .map_err(|e| Error::Input(e.to_string()))?;
    }
    Ok(())
}
