//! `model.safetensors`: a BERT encoder's tensors, read into the library's [`Encoder`].
//!
//! transformers keeps each linear layer as `out x in` and computes `x @ W.T + b`; the
//! library computes `X W + b`, so every weight matrix is transposed (as in
//! `attention_lab::torch`). With d = `hidden_size`, h = `num_attention_heads`, d_ff =
//! `intermediate_size` and head `i` taking columns `i*d/h .. (i+1)*d/h` of each projection:
//!
//! | tensor (`{l}` = layer) | shape | here |
//! |---|---|---|
//! | `embeddings.word_embeddings.weight` | vocab x d | [`Embeddings`] word table |
//! | `embeddings.position_embeddings.weight` | positions x d | position table |
//! | `embeddings.token_type_embeddings.weight` | types x d | token-type table |
//! | `embeddings.LayerNorm.weight`, `.bias` | d | the embeddings' gamma, beta |
//! | `encoder.layer.{l}.attention.self.query.weight`, `.bias` | d x d, d | W_Q (transposed) and b_Q, split into h heads |
//! | `encoder.layer.{l}.attention.self.key.weight`, `.bias` | d x d, d | W_K and b_K, split likewise |
//! | `encoder.layer.{l}.attention.self.value.weight`, `.bias` | d x d, d | W_V and b_V, split likewise |
//! | `encoder.layer.{l}.attention.output.dense.weight`, `.bias` | d x d, d | W_O (transposed), b_O |
//! | `encoder.layer.{l}.attention.output.LayerNorm.weight`, `.bias` | d | the layer norm after attention |
//! | `encoder.layer.{l}.intermediate.dense.weight`, `.bias` | d_ff x d, d_ff | W_1 (transposed), b_1 |
//! | `encoder.layer.{l}.output.dense.weight`, `.bias` | d x d_ff, d | W_2 (transposed), b_2 |
//! | `encoder.layer.{l}.output.LayerNorm.weight`, `.bias` | d | the layer norm after the feed-forward block |
//!
//! A checkpoint of `BertForMaskedLM` and its kin prefixes every name with `bert.`; both are
//! read. Other tensors (`embeddings.position_ids`, a pooler) are not used. F32 tensors are
//! widened to f64 exactly; F64 tensors are read as they are.

use std::path::Path;

use attention_lab::prelude::*;
use safetensors::{Dtype, SafeTensors};

use crate::config::BertConfig;
use crate::error::ModelError;

/// The tensors of one safetensors file, with the name prefix its model uses.
struct Tensors<'a> {
    path: &'a Path,
    file: SafeTensors<'a>,
    prefix: &'static str,
}

impl Tensors<'_> {
    fn error(&self, name: &str, problem: impl Into<String>) -> ModelError {
        ModelError::Tensor {
            path: self.path.to_owned(),
            name: name.to_owned(),
            problem: problem.into(),
        }
    }

    /// The tensor `name` as f64 values, checked to have `shape`; `why` says where the shape
    /// comes from.
    fn values(&self, name: &str, shape: &[usize], why: &str) -> Result<Vec<f64>, ModelError> {
        let full = format!("{}{name}", self.prefix);
        let view = self
            .file
            .tensor(&full)
            .map_err(|_| self.error(&full, "missing"))?;
        if view.shape() != shape {
            let dims = |s: &[usize]| s.iter().map(usize::to_string).collect::<Vec<_>>().join("x");
            return Err(self.error(
                &full,
                format!(
                    "is {} but must be {} ({why})",
                    dims(view.shape()),
                    dims(shape)
                ),
            ));
        }
        let bytes = view.data();
        Ok(match view.dtype() {
            Dtype::F32 => bytes
                .chunks_exact(4)
                .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                .collect(),
            Dtype::F64 => bytes
                .chunks_exact(8)
                .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect(),
            other => {
                return Err(self.error(&full, format!("is {other:?}; only F32 and F64 are read")))
            }
        })
    }

    fn vector(&self, name: &str, len: usize, why: &str) -> Result<Array1<f64>, ModelError> {
        Ok(Array1::from(self.values(name, &[len], why)?))
    }

    /// A matrix as the file holds it (rows x cols).
    fn matrix(
        &self,
        name: &str,
        rows: usize,
        cols: usize,
        why: &str,
    ) -> Result<Array2<f64>, ModelError> {
        let values = self.values(name, &[rows, cols], why)?;
        Ok(Array2::from_shape_vec((rows, cols), values).expect("shape was checked"))
    }

    /// A linear layer `out x in` as the file holds it, and its bias; `out` and `inp` pair a
    /// size with the config.json key it comes from.
    fn torch_linear(
        &self,
        name: &str,
        (out, out_key): (usize, &str),
        (inp, inp_key): (usize, &str),
    ) -> Result<(Array2<f64>, Array1<f64>), ModelError> {
        let why = format!("{out_key} x {inp_key} in config.json");
        let w = self.matrix(&format!("{name}.weight"), out, inp, &why)?;
        let b = self.vector(
            &format!("{name}.bias"),
            out,
            &format!("{out_key} in config.json"),
        )?;
        Ok((w, b))
    }

    /// [`Tensors::torch_linear`] as the library's `in x out` matrix and bias.
    fn linear(
        &self,
        name: &str,
        out: (usize, &str),
        inp: (usize, &str),
    ) -> Result<(Array2<f64>, Array1<f64>), ModelError> {
        let (w, b) = self.torch_linear(name, out, inp)?;
        Ok((w.reversed_axes().as_standard_layout().into_owned(), b))
    }

    fn norm(&self, name: &str, d: usize, eps: f64) -> Result<LayerNorm, ModelError> {
        let why = "hidden_size in config.json";
        let gamma = self.vector(&format!("{name}.weight"), d, why)?;
        let beta = self.vector(&format!("{name}.bias"), d, why)?;
        LayerNorm::new(gamma, beta, eps).map_err(|e| self.attention(name, e))
    }

    fn attention(&self, name: &str, error: AttentionError) -> ModelError {
        ModelError::Attention {
            context: format!("{}: {}{name}", self.path.display(), self.prefix),
            error: Box::new(error),
        }
    }
}

/// Reads the encoder that `config` describes from a safetensors file (the table in the
/// [module documentation](self)).
///
/// ```no_run
/// use attention_lab_model::{read_encoder, BertConfig};
/// use std::path::Path;
///
/// let dir = Path::new("all-MiniLM-L6-v2");
/// let config = BertConfig::read(&dir.join("config.json"))?;
/// let encoder = read_encoder(&dir.join("model.safetensors"), &config)?;
/// assert_eq!(encoder.layers().len(), 6);
/// # Ok::<(), attention_lab_model::ModelError>(())
/// ```
///
/// # Errors
/// [`ModelError::Read`] when the file cannot be read; [`ModelError::Content`] when it is not
/// a safetensors file; [`ModelError::Tensor`] naming a tensor that is missing, not F32 or
/// F64, or not of the shape config.json gives.
pub fn read_encoder(path: &Path, config: &BertConfig) -> Result<Encoder, ModelError> {
    let bytes = std::fs::read(path).map_err(|e| ModelError::read(path, e))?;
    let file = SafeTensors::deserialize(&bytes)
        .map_err(|e| ModelError::content(path, format!("not a safetensors file: {e}")))?;
    let prefix = if file.tensor("embeddings.word_embeddings.weight").is_err()
        && file
            .tensor("bert.embeddings.word_embeddings.weight")
            .is_ok()
    {
        "bert."
    } else {
        ""
    };
    let t = Tensors { path, file, prefix };
    let c = config;
    let (d, ff, eps) = (c.hidden_size, c.intermediate_size, c.layer_norm_eps);
    let embeddings = Embeddings::new(
        t.matrix(
            "embeddings.word_embeddings.weight",
            c.vocab_size,
            d,
            "vocab_size x hidden_size in config.json",
        )?,
        t.matrix(
            "embeddings.position_embeddings.weight",
            c.max_position_embeddings,
            d,
            "max_position_embeddings x hidden_size in config.json",
        )?,
        t.matrix(
            "embeddings.token_type_embeddings.weight",
            c.type_vocab_size,
            d,
            "type_vocab_size x hidden_size in config.json",
        )?,
        t.norm("embeddings.LayerNorm", d, eps)?,
    )
    .map_err(|e| t.attention("embeddings", e))?;
    let (hidden, inner) = ((d, "hidden_size"), (ff, "intermediate_size"));
    let layers = (0..c.num_hidden_layers)
        .map(|l| {
            let name = |part: &str| format!("encoder.layer.{l}.{part}");
            // The attention's four linear layers are PyTorch's nn.MultiheadAttention's, so
            // the library's PyTorch mapping splits them into heads.
            let torch = |part: &str| t.torch_linear(&name(part), hidden, hidden);
            let (q, bq) = torch("attention.self.query")?;
            let (k, bk) = torch("attention.self.key")?;
            let (v, bv) = torch("attention.self.value")?;
            let (out_proj_weight, bo) = torch("attention.output.dense")?;
            let weights = TorchWeights {
                in_proj: InProj::Separate {
                    q_proj_weight: q,
                    k_proj_weight: k,
                    v_proj_weight: v,
                },
                // Three vectors of d entries each: the concatenation cannot fail.
                in_proj_bias: concatenate(Axis(0), &[bq.view(), bk.view(), bv.view()]).ok(),
                out_proj_weight,
                out_proj_bias: Some(bo),
            };
            let (w1, b1) = t.linear(&name("intermediate.dense"), inner, hidden)?;
            let (w2, b2) = t.linear(&name("output.dense"), hidden, inner)?;
            let fail = |e| t.attention(&name(""), e);
            let attention =
                MultiHead::from_torch_weights(&weights, c.num_attention_heads).map_err(fail)?;
            let feed_forward = FeedForward::new(w1, b1, w2, b2).map_err(fail)?;
            EncoderLayer::new(
                attention,
                t.norm(&name("attention.output.LayerNorm"), d, eps)?,
                feed_forward,
                t.norm(&name("output.LayerNorm"), d, eps)?,
            )
            .map_err(fail)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Encoder::new(embeddings, layers).map_err(|e| t.attention("encoder", e))
}
