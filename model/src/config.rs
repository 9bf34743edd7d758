//! `config.json`: the shape of a BERT encoder, as transformers writes it.

use std::path::Path;

use serde::Deserialize;

use crate::error::ModelError;

/// The settings of a BERT encoder that decide its shapes and its arithmetic; the file's
/// other keys (dropout, initialiser range, ...) do not change a forward pass and are ignored.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BertConfig {
    /// d, the width of every token's row (384 in MiniLM-L6).
    pub hidden_size: usize,
    /// The number of encoder layers (6).
    pub num_hidden_layers: usize,
    /// Heads per layer (12); each is `hidden_size / num_attention_heads` wide.
    pub num_attention_heads: usize,
    /// d_ff, the feed-forward block's inner width (1536).
    pub intermediate_size: usize,
    /// Rows of the word table (30522).
    pub vocab_size: usize,
    /// Rows of the position table: the longest input (512).
    pub max_position_embeddings: usize,
    /// Rows of the token-type table (2).
    pub type_vocab_size: usize,
    /// The epsilon of every layer norm (1e-12).
    pub layer_norm_eps: f64,
    /// The feed-forward activation; only `"gelu"` (exact, with erf) is supported.
    pub hidden_act: String,
    /// Only `"absolute"` (learned position rows) is supported.
    #[serde(default = "absolute")]
    pub position_embedding_type: String,
}

fn absolute() -> String {
    "absolute".to_owned()
}

impl BertConfig {
    /// Reads and checks a `config.json`.
    ///
    /// ```
    /// use attention_lab_model::BertConfig;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("config.json");
    /// std::fs::write(&path, r#"{"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
    ///     "intermediate_size": 16, "vocab_size": 10, "max_position_embeddings": 16,
    ///     "type_vocab_size": 2, "layer_norm_eps": 1e-12, "hidden_act": "gelu"}"#)?;
    /// assert_eq!(BertConfig::read(&path)?.head_width(), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Read`] when the file cannot be read; [`ModelError::Content`] naming the
    /// key when it is not valid JSON, a key is missing or of the wrong type, the activation is
    /// not `gelu`, the position embeddings are not absolute, or the heads do not divide
    /// `hidden_size`.
    pub fn read(path: &Path) -> Result<BertConfig, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::read(path, e))?;
        let config: BertConfig =
            serde_json::from_str(&text).map_err(|e| ModelError::content(path, e))?;
        if config.hidden_act != "gelu" {
            return Err(ModelError::content(
                path,
                format!(
                    "hidden_act is {:?}; only \"gelu\" is supported",
                    config.hidden_act
                ),
            ));
        }
        if config.position_embedding_type != "absolute" {
            return Err(ModelError::content(
                path,
                format!(
                    "position_embedding_type is {:?}; only \"absolute\" is supported",
                    config.position_embedding_type
                ),
            ));
        }
        let (d, h) = (config.hidden_size, config.num_attention_heads);
        if h == 0 || d % h != 0 {
            return Err(ModelError::content(
                path,
                format!("num_attention_heads ({h}) must divide hidden_size ({d})"),
            ));
        }
        Ok(config)
    }

    /// The width of one head: `hidden_size / num_attention_heads` (32 in MiniLM-L6).
    ///
    /// ```
    /// # use attention_lab_model::BertConfig;
    /// # let config: BertConfig = serde_json::from_str(r#"{"hidden_size": 384, "num_hidden_layers": 6,
    /// #     "num_attention_heads": 12, "intermediate_size": 1536, "vocab_size": 30522,
    /// #     "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
    /// #     "hidden_act": "gelu"}"#)?;
    /// assert_eq!(config.head_width(), 32);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn head_width(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}
