//! `tokenizer.json`: the model's own WordPiece tokenizer, read by the `tokenizers` crate.

use std::path::{Path, PathBuf};

use tokenizers::{TruncationParams, TruncationStrategy};

use crate::error::ModelError;

/// The tokenizer, set to tokenise one text at a time: no padding (the file may fix it at 128),
/// and truncation at `max_length` tokens, [CLS] and [SEP] included.
#[derive(Clone)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    path: PathBuf,
    pad: (u32, String),
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("path", &self.path)
            .finish()
    }
}

/// One text as tokens: their strings, their ids, their token types, and which are padding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tokens {
    /// The tokens as the tokenizer writes them (`[CLS]`, `attention`, `##al`, ...).
    pub tokens: Vec<String>,
    /// Their rows in the word table.
    pub ids: Vec<usize>,
    /// Their token types (all 0 for one sentence).
    pub type_ids: Vec<usize>,
    /// `true` for a [PAD] token added to make a batch rectangular.
    pub padded: Vec<bool>,
}

impl Tokenizer {
    /// Reads `tokenizer.json` and sets it to truncate at `max_length` tokens, without padding.
    ///
    /// ```no_run
    /// use attention_lab_model::Tokenizer;
    ///
    /// let tokenizer = Tokenizer::read("all-MiniLM-L6-v2/tokenizer.json".as_ref(), 256)?;
    /// let tokens = tokenizer.encode("Hello, world!")?;
    /// assert_eq!(tokens.tokens, ["[CLS]", "hello", ",", "world", "!", "[SEP]"]);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Read`] when the file cannot be read; [`ModelError::Content`] when it is not
    /// a tokenizer the `tokenizers` crate reads, or `max_length` is too short for its special
    /// tokens.
    pub fn read(path: &Path, max_length: usize) -> Result<Tokenizer, ModelError> {
        let text = std::fs::read(path).map_err(|e| ModelError::read(path, e))?;
        let mut inner = tokenizers::Tokenizer::from_bytes(&text)
            .map_err(|e| ModelError::content(path, format!("not a tokenizer: {e}")))?;
        let pad = match inner.get_padding() {
            Some(p) => (p.pad_id, p.pad_token.clone()),
            None => (0, "[PAD]".to_owned()),
        };
        inner.with_padding(None);
        inner
            .with_truncation(Some(TruncationParams {
                max_length,
                strategy: TruncationStrategy::LongestFirst,
                ..TruncationParams::default()
            }))
            .map_err(|e| {
                ModelError::content(path, format!("cannot truncate at {max_length} tokens: {e}"))
            })?;
        Ok(Tokenizer {
            inner,
            path: path.to_owned(),
            pad,
        })
    }

    /// The tokens of one text, with [CLS] first and [SEP] last.
    ///
    /// # Errors
    /// [`ModelError::Content`] naming tokenizer.json when the tokenizer fails on the text.
    ///
    /// ```no_run
    /// # use attention_lab_model::Tokenizer;
    /// # let tokenizer = Tokenizer::read("all-MiniLM-L6-v2/tokenizer.json".as_ref(), 256)?;
    /// assert_eq!(tokenizer.encode("Attention")?.ids, [101, 3086, 102]);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn encode(&self, text: &str) -> Result<Tokens, ModelError> {
        let encoding = self.inner.encode(text, true).map_err(|e| {
            ModelError::content(&self.path, format!("cannot tokenise {text:?}: {e}"))
        })?;
        let widen = |v: &[u32]| v.iter().map(|&i| i as usize).collect::<Vec<_>>();
        Ok(Tokens {
            tokens: encoding.get_tokens().to_vec(),
            ids: widen(encoding.get_ids()),
            type_ids: widen(encoding.get_type_ids()),
            padded: vec![false; encoding.len()],
        })
    }

    /// The tokens of several texts, each padded with [PAD] to the longest, as a batch is.
    ///
    /// # Errors
    /// As [`Tokenizer::encode`].
    ///
    /// ```no_run
    /// # use attention_lab_model::Tokenizer;
    /// # let tokenizer = Tokenizer::read("all-MiniLM-L6-v2/tokenizer.json".as_ref(), 256)?;
    /// let batch = tokenizer.encode_batch(&["a cat", "a"])?;
    /// assert_eq!(batch[1].tokens, ["[CLS]", "a", "[SEP]", "[PAD]"]);
    /// assert_eq!(batch[1].padded, [false, false, false, true]);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn encode_batch<S: AsRef<str>>(&self, texts: &[S]) -> Result<Vec<Tokens>, ModelError> {
        let mut batch = texts
            .iter()
            .map(|t| self.encode(t.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let longest = batch.iter().map(|t| t.ids.len()).max().unwrap_or(0);
        for tokens in &mut batch {
            let missing = longest - tokens.ids.len();
            tokens
                .tokens
                .extend(std::iter::repeat_n(self.pad.1.clone(), missing));
            tokens
                .ids
                .extend(std::iter::repeat_n(self.pad.0 as usize, missing));
            tokens.type_ids.extend(std::iter::repeat_n(0, missing));
            tokens.padded.extend(std::iter::repeat_n(true, missing));
        }
        Ok(batch)
    }
}
