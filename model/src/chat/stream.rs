//! Decoding a stream of token ids into whole characters as they arrive.

use super::ChatTokenizer;

/// Text out of ids that arrive one at a time (a model generating): each
/// [`push`](TextStream::push) returns the characters the new id completes, keeping back the
/// first bytes of a character whose last bytes are still to come (an emoji is up to four
/// byte tokens). Made by [`ChatTokenizer::stream`].
///
/// ```
/// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
///
/// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&[], &[]), "t.gguf".as_ref())?;
/// let mut stream = tokenizer.stream(false);
/// assert_eq!(stream.push(0xC3), ""); // the first byte of é
/// assert_eq!(stream.push(0xA9), "é");
/// assert_eq!(stream.push(0xC3), "");
/// assert_eq!(stream.finish(), "\u{FFFD}"); // the stream ended inside a character
/// # Ok::<(), attention_lab_model::ModelError>(())
/// ```
#[derive(Debug, Clone)]
pub struct TextStream<'a> {
    pub(super) tokenizer: &'a ChatTokenizer,
    pub(super) skip_special: bool,
    /// The bytes of a character begun but not finished.
    pub(super) pending: Vec<u8>,
}

impl TextStream<'_> {
    /// The text `id` completes: its bytes after the ones kept back, up to the last complete
    /// character (an invalid byte sequence is one U+FFFD, as in
    /// [`ChatTokenizer::decode`]). A special token gives nothing when the stream skips them;
    /// an id no token has, nothing.
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&[], &["<|im_end|>"]), "t.gguf".as_ref())?;
    /// let mut stream = tokenizer.stream(true);
    /// assert_eq!(stream.push(b'a' as usize), "a");
    /// assert_eq!(stream.push(256), ""); // <|im_end|>, skipped
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn push(&mut self, id: usize) -> String {
        if self.skip_special && self.tokenizer.is_special(id) {
            return String::new();
        }
        self.pending
            .extend_from_slice(self.tokenizer.token_bytes(id));
        let mut text = String::new();
        let mut start = 0;
        loop {
            match std::str::from_utf8(&self.pending[start..]) {
                Ok(valid) => {
                    text.push_str(valid);
                    start = self.pending.len();
                    break;
                }
                Err(e) => {
                    let valid = start + e.valid_up_to();
                    text.push_str(
                        std::str::from_utf8(&self.pending[start..valid]).expect("checked valid"),
                    );
                    match e.error_len() {
                        Some(bad) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            start = valid + bad;
                        }
                        None => {
                            // A character begun at the end: keep its bytes for the next id.
                            start = valid;
                            break;
                        }
                    }
                }
            }
        }
        self.pending.drain(..start);
        text
    }

    /// The end of the stream: U+FFFD when it stopped inside a character, else nothing.
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&[], &[]), "t.gguf".as_ref())?;
    /// let mut stream = tokenizer.stream(false);
    /// stream.push(b'a' as usize);
    /// assert_eq!(stream.finish(), "");
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn finish(self) -> String {
        String::from_utf8_lossy(&self.pending).into_owned()
    }
}
