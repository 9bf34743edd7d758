//! A model folder as sentence-transformers lays it out: `config.json`, `model.safetensors`,
//! `tokenizer.json` and (optionally) `sentence_bert_config.json`, turned into text in,
//! attention and a sentence embedding out.

use std::path::{Path, PathBuf};

use attention_lab::prelude::*;

use crate::config::BertConfig;
use crate::error::ModelError;
use crate::tokenizer::{Tokenizer, Tokens};
use crate::weights::read_encoder;

/// A BERT sentence encoder read from its folder: the tokenizer, the encoder and its config.
#[derive(Debug, Clone)]
pub struct Model {
    dir: PathBuf,
    config: BertConfig,
    tokenizer: Tokenizer,
    encoder: Encoder,
    max_length: usize,
}

/// One text through the model: its tokens, every intermediate of every layer, and its
/// sentence embedding.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// The tokens, their ids and types, and which are padding.
    pub tokens: Tokens,
    /// The encoder's intermediates: `output.attentions()` is layers x heads x tokens x tokens.
    pub output: EncoderOutput,
    /// The mean of the last layer's rows over the tokens that are not padding, scaled to
    /// length 1 (sentence-transformers' `Pooling` then `Normalize`).
    pub embedding: Array1<f64>,
}

impl Model {
    /// Reads the model in `dir`.
    ///
    /// ```no_run
    /// use attention_lab_model::Model;
    ///
    /// let model = Model::load("all-MiniLM-L6-v2")?;
    /// assert_eq!(model.config().num_hidden_layers, 6);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError`] naming the file (and the tensor or setting) that is missing or wrong.
    pub fn load(dir: impl AsRef<Path>) -> Result<Model, ModelError> {
        let dir = dir.as_ref();
        let config = BertConfig::read(&dir.join("config.json"))?;
        let max_length = max_seq_length(dir)?.unwrap_or(config.max_position_embeddings);
        if max_length > config.max_position_embeddings {
            return Err(ModelError::content(
                &dir.join("sentence_bert_config.json"),
                format!(
                    "max_seq_length ({max_length}) is more than max_position_embeddings ({}) in config.json",
                    config.max_position_embeddings
                ),
            ));
        }
        let tokenizer = Tokenizer::read(&dir.join("tokenizer.json"), max_length)?;
        let encoder = read_encoder(&dir.join("model.safetensors"), &config)?;
        Ok(Model {
            dir: dir.to_owned(),
            config,
            tokenizer,
            encoder,
            max_length,
        })
    }

    /// Reads the installed model: the folder `$ATTENTION_LAB_MODEL`, else the one that
    /// `attention-lab lab` installs (`attention_lab_io::cache::model_dir`).
    ///
    /// ```no_run
    /// let model = attention_lab_model::Model::installed()?;
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::NotFound`] when neither is there, saying how to install it; otherwise as
    /// [`Model::load`].
    pub fn installed() -> Result<Model, ModelError> {
        match attention_lab_io::cache::model_dir() {
            Some(dir) => Model::load(dir),
            None => Err(ModelError::NotFound {
                looked: format!(
                    "{} is not set and the lab's venv has no {}",
                    attention_lab_io::cache::MODEL_VAR,
                    attention_lab_io::cache::MODEL_PACKAGE
                ),
            }),
        }
    }

    /// The folder the model was read from.
    ///
    /// ```no_run
    /// # let model = attention_lab_model::Model::load("all-MiniLM-L6-v2")?;
    /// assert!(model.dir().join("config.json").is_file());
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The encoder's settings from `config.json`.
    ///
    /// ```no_run
    /// # let model = attention_lab_model::Model::load("all-MiniLM-L6-v2")?;
    /// assert_eq!(model.config().num_attention_heads, 12);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn config(&self) -> &BertConfig {
        &self.config
    }

    /// The longest input in tokens: `max_seq_length` of `sentence_bert_config.json` (256),
    /// else `max_position_embeddings`; longer texts are cut, as sentence-transformers cuts them.
    ///
    /// ```no_run
    /// # let model = attention_lab_model::Model::load("all-MiniLM-L6-v2")?;
    /// assert_eq!(model.max_length(), 256);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn max_length(&self) -> usize {
        self.max_length
    }

    /// The tokenizer.
    ///
    /// ```no_run
    /// # let model = attention_lab_model::Model::load("all-MiniLM-L6-v2")?;
    /// let tokens = model.tokenizer().encode("Attention!")?;
    /// assert_eq!(tokens.tokens.first().map(String::as_str), Some("[CLS]"));
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The encoder: embeddings and layers, each head's W_Q, W_K, W_V open to a lesson.
    ///
    /// ```no_run
    /// # let model = attention_lab_model::Model::load("all-MiniLM-L6-v2")?;
    /// assert_eq!(model.encoder().layers()[0].attention().heads()[0].wq().dim(), (384, 32));
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn encoder(&self) -> &Encoder {
        &self.encoder
    }

    /// Tokenises `text` and runs the encoder on it.
    ///
    /// ```no_run
    /// # let model = attention_lab_model::Model::load("all-MiniLM-L6-v2")?;
    /// let out = model.encode("The cat sat on the mat.")?;
    /// assert_eq!(out.output.attentions().dim(), (6, 12, 9, 9));
    /// assert!((out.embedding.dot(&out.embedding) - 1.0).abs() < 1e-12);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Tokenizer::encode`].
    pub fn encode(&self, text: &str) -> Result<Encoded, ModelError> {
        let tokens = self.tokenizer.encode(text)?;
        self.run(tokens, text)
    }

    /// Several texts as one padded batch (each padded with [PAD] to the longest), as
    /// transformers runs `tokenizer(texts, padding=True)`; padding gets no attention and is
    /// left out of each embedding.
    ///
    /// ```no_run
    /// # let model = attention_lab_model::Model::load("all-MiniLM-L6-v2")?;
    /// let batch = model.encode_batch(&["A cat.", "A cat sat on the mat."])?;
    /// assert_eq!(batch[0].tokens.ids.len(), batch[1].tokens.ids.len());
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Model::encode`].
    pub fn encode_batch<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Encoded>, ModelError> {
        let batch = self.tokenizer.encode_batch(texts)?;
        batch
            .into_iter()
            .zip(texts)
            .map(|(tokens, text)| self.run(tokens, text.as_ref()))
            .collect()
    }

    /// Runs the encoder on `tokens`, the tokens of `text` (as [`Tokenizer::encode`] gives
    /// them): for a caller that tokenises first, to check every text before encoding one.
    ///
    /// ```no_run
    /// # let model = attention_lab_model::Model::load("all-MiniLM-L6-v2")?;
    /// let tokens = model.tokenizer().encode("A cat.")?;
    /// let out = model.encode_tokens(tokens, "A cat.")?;
    /// assert_eq!(out.tokens.tokens.len(), 4);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// An attention step that fails on these tokens (a bug, named with the text).
    pub fn encode_tokens(&self, tokens: Tokens, text: &str) -> Result<Encoded, ModelError> {
        self.run(tokens, text)
    }

    fn run(&self, tokens: Tokens, text: &str) -> Result<Encoded, ModelError> {
        let fail = |error| ModelError::Attention {
            context: format!("{}: encoding {text:?}", self.dir.display()),
            error: Box::new(error),
        };
        let output = self
            .encoder
            .forward_padded(&tokens.ids, &tokens.type_ids, &tokens.padded)
            .map_err(fail)?;
        let pooled = mean_pool(output.last_hidden_state(), &tokens.padded).map_err(fail)?;
        Ok(Encoded {
            tokens,
            output,
            embedding: l2_normalize(&pooled),
        })
    }
}

/// `max_seq_length` of `sentence_bert_config.json`, when the folder has that file.
fn max_seq_length(dir: &Path) -> Result<Option<usize>, ModelError> {
    let path = dir.join("sentence_bert_config.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ModelError::read(&path, e)),
    };
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| ModelError::content(&path, e))?;
    match value.get("max_seq_length") {
        None => Ok(None),
        Some(n) => n
            .as_u64()
            .filter(|&n| n >= 2)
            .map(|n| Some(n as usize))
            .ok_or_else(|| {
                ModelError::content(
                    &path,
                    format!("max_seq_length is {n}, not a whole number of at least 2"),
                )
            }),
    }
}
