//! SmolLM2's tokenizer and chat template, built from a GGUF file's metadata as transformers
//! 5.23 builds them (`AutoTokenizer.from_pretrained(dir, gguf_file=...)`).
//!
//! A GGUF file has no `tokenizer.json`: it stores the vocabulary (`tokenizer.ggml.tokens`),
//! the merges, each token's type and the special token ids as metadata, which the GGUF reader
//! copies into a [`GgufVocab`]. [`ChatTokenizer::from_vocab`] turns that into a byte-level BPE
//! tokenizer of the `tokenizers` crate, set up as transformers sets up its `GPT2Tokenizer` for
//! a file whose `tokenizer.ggml.model` is `gpt2`:
//!
//! - **Vocabulary**: the tokens in file order, id = position. A token that uses a character
//!   outside the byte alphabet (below) is respelled as the byte characters of its UTF-8.
//! - **Model**: BPE with the file's merges, in file order (rank = position), no unknown token,
//!   no dropout, no continuing-subword prefix or end-of-word suffix, no byte fallback.
//! - **Normalizer**: none.
//! - **Pre-tokenizer**: `ByteLevel` with `add_prefix_space = false` and GPT-2's own split
//!   regex, `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`:
//!   transformers has no regex of its own for `tokenizer.ggml.pre = "smollm"` and keeps
//!   GPT-2's. (llama.cpp first cuts every digit off on its own for `smollm`; SmolLM2 has no
//!   token that joins a digit to anything, so the two splits give the same tokens.) Every
//!   byte of each piece then becomes one printable character ([`byte_to_char`]: a space is
//!   `Ġ`, a newline `Ċ`).
//! - **Added tokens**: every token the file marks as control (`token_type` 3, such as
//!   `<|im_start|>`) is a *special* added token (matched whole in the text before any
//!   splitting, and dropped by `decode(.., skip_special = true)`); a user-defined one (type 4)
//!   is a plain added token; the BOS, EOS, unknown and padding tokens are special too, and
//!   so is `<|endoftext|>` when the vocabulary has it (`GPT2Tokenizer`'s default for all
//!   three).
//! - **Post-processor**: BOS before the text only when `tokenizer.ggml.add_bos_token` is true,
//!   EOS after it only when `add_eos_token` is; SmolLM2 sets neither, so
//!   `encode(text, true)` and `encode(text, false)` give the same ids.
//! - **Decoder**: `ByteLevel`: the characters of the tokens back to bytes, then UTF-8, an
//!   invalid sequence becoming U+FFFD. transformers does not "clean up tokenization spaces"
//!   for a BPE tokenizer, so the text comes back exactly.
//!
//! The chat template (`tokenizer.chat_template`, Jinja) is rendered with minijinja as
//! transformers renders it with jinja2: see [`ChatTokenizer::apply_chat_template`].
//!
//! ```
//! use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
//!
//! // The 256 byte tokens, "hi" from the merge "h i", and two control tokens.
//! let vocab = GgufVocab::tiny(&["h i"], &["<|im_start|>", "<|im_end|>"]);
//! let tokenizer = ChatTokenizer::from_vocab(vocab, "tiny.gguf".as_ref())?;
//! let ids = tokenizer.encode("<|im_start|>hi there", false)?;
//! assert_eq!(tokenizer.tokens(&ids), ["<|im_start|>", "hi", "Ġ", "t", "h", "e", "r", "e"]);
//! assert_eq!(tokenizer.decode(&ids, true), "hi there");
//! # Ok::<(), attention_lab_model::ModelError>(())
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use minijinja::value::Value;
use minijinja::Environment;
use serde::{Deserialize, Serialize};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::{AddedToken, Tokenizer};

use crate::error::ModelError;

mod jinja;
mod stream;
mod vocab;

use jinja::{chat_environment, jinja_problem, OrderedMap};
pub use stream::TextStream;
pub use vocab::{byte_to_char, char_to_byte, GgufVocab};
use vocab::{post_processor, token_bytes};

/// The `tokenizer.ggml.model` this module builds: byte-level BPE.
pub(super) const BYTE_LEVEL_MODEL: &str = "gpt2";

/// The `tokenizer.ggml.pre` values for which transformers 5.23 uses GPT-2's own split regex
/// (the `ByteLevel` pre-tokenizer's), and which this module therefore accepts. transformers
/// falls back to that regex for every name it does not know; this module refuses them
/// instead, since for most (llama-bpe, qwen2, ...) the model was trained with another split.
pub const KNOWN_PRE_TOKENIZERS: [&str; 3] = ["smollm", "gpt-2", "default"];

/// The token transformers' `GPT2Tokenizer` makes special whatever the file says.
const GPT2_DEFAULT_SPECIAL: &str = "<|endoftext|>";

/// `tokenizer.ggml.token_type` of a control token (`<|im_start|>`): a special added token.
pub const TOKEN_TYPE_CONTROL: i32 = 3;
/// `tokenizer.ggml.token_type` of a user-defined token: a plain (not special) added token.
pub const TOKEN_TYPE_USER_DEFINED: i32 = 4;

/// One message of a conversation, as a chat template reads it (`message['role']`,
/// `message['content']`).
///
/// ```
/// use attention_lab_model::chat::Message;
///
/// let message = Message::user("What is attention?");
/// assert_eq!(message, Message::new("user", "What is attention?"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text of the message.
    pub content: String,
}

impl Message {
    /// A message of any role.
    ///
    /// ```
    /// # use attention_lab_model::chat::Message;
    /// assert_eq!(Message::new("tool", "42").role, "tool");
    /// ```
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
        }
    }

    /// A `system` message.
    ///
    /// ```
    /// # use attention_lab_model::chat::Message;
    /// assert_eq!(Message::system("Be brief.").role, "system");
    /// ```
    pub fn system(content: impl Into<String>) -> Message {
        Message::new("system", content)
    }

    /// A `user` message.
    ///
    /// ```
    /// # use attention_lab_model::chat::Message;
    /// assert_eq!(Message::user("Hi").role, "user");
    /// ```
    pub fn user(content: impl Into<String>) -> Message {
        Message::new("user", content)
    }

    /// An `assistant` message.
    ///
    /// ```
    /// # use attention_lab_model::chat::Message;
    /// assert_eq!(Message::assistant("Hello!").role, "assistant");
    /// ```
    pub fn assistant(content: impl Into<String>) -> Message {
        Message::new("assistant", content)
    }
}

/// SmolLM2's tokenizer and chat template, from a GGUF file's metadata: text to ids and back,
/// and a conversation to the prompt the model was trained on. Built by
/// [`ChatTokenizer::from_vocab`]; the module documentation lists how.
///
/// ```
/// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
///
/// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&[], &[]), "t.gguf".as_ref())?;
/// let ids = tokenizer.encode("Hé", false)?;
/// assert_eq!(ids, [b'H' as usize, 0xC3, 0xA9]); // é is two bytes, two tokens
/// assert_eq!(tokenizer.decode(&ids, false), "Hé");
/// # Ok::<(), attention_lab_model::ModelError>(())
/// ```
#[derive(Clone)]
pub struct ChatTokenizer {
    inner: Tokenizer,
    /// The GGUF file, named by every error.
    path: PathBuf,
    /// Each id's token as the tokenizer writes it, `None` for an id no token has.
    tokens: Vec<Option<String>>,
    /// Each id's bytes (the decoder's reading of its token).
    bytes: Vec<Vec<u8>>,
    /// Whether each id is a special added token (dropped when decoding with `skip_special`).
    special: Vec<bool>,
    bos: Option<(u32, String)>,
    eos: Option<(u32, String)>,
    unk: Option<(u32, String)>,
    pad: Option<(u32, String)>,
    template: Template,
}

/// The chat template, compiled once.
#[derive(Clone)]
enum Template {
    /// The file has none.
    Missing,
    /// It does not compile; the message.
    Broken(String),
    /// The environment holding it as [`TEMPLATE_NAME`].
    Ready(Box<Environment<'static>>),
}

pub(super) const TEMPLATE_NAME: &str = "chat_template";

impl fmt::Debug for ChatTokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatTokenizer")
            .field("path", &self.path)
            .field("vocab_size", &self.vocab_size())
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .finish_non_exhaustive()
    }
}

impl ChatTokenizer {
    /// Builds the tokenizer transformers 5.23 builds from a GGUF file whose
    /// `tokenizer.ggml.model` is `gpt2` (byte-level BPE) and whose `tokenizer.ggml.pre` is one
    /// of [`KNOWN_PRE_TOKENIZERS`]; `path` is the file, for the errors. The chat template is
    /// compiled here, but an error in it only shows when
    /// [`apply_chat_template`](ChatTokenizer::apply_chat_template) is called, as in
    /// transformers.
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&["h i"], &[]), "t.gguf".as_ref())?;
    /// assert_eq!(tokenizer.vocab_size(), 257);
    ///
    /// let mut vocab = GgufVocab::tiny(&[], &[]);
    /// vocab.pre = "llama-bpe".into();
    /// let err = ChatTokenizer::from_vocab(vocab, "t.gguf".as_ref()).unwrap_err();
    /// assert!(err.to_string().starts_with("t.gguf: tokenizer.ggml.pre is \"llama-bpe\""));
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Content`] naming `path` and the GGUF key when the model is not `gpt2`,
    /// the pre-tokenizer is not a known one, there are no tokens, `token_type` is not one per
    /// token, a merge is not two tokens of the vocabulary whose join is one too, or a special
    /// token id is not a token.
    #[allow(
        clippy::too_many_lines,
        reason = "builds the tokenizer in the order transformers builds it (vocabulary, merges, special tokens); each step depends on the last"
    )]
    pub fn from_vocab(vocab: GgufVocab, path: &Path) -> Result<ChatTokenizer, ModelError> {
        let fail = |problem: String| ModelError::content(path, problem);
        if vocab.model != BYTE_LEVEL_MODEL {
            return Err(fail(format!(
                "tokenizer.ggml.model is {:?}: only {BYTE_LEVEL_MODEL:?} (byte-level BPE) is supported",
                vocab.model
            )));
        }
        if !KNOWN_PRE_TOKENIZERS.contains(&vocab.pre.as_str()) {
            return Err(fail(format!(
                "tokenizer.ggml.pre is {:?}: not a pre-tokenizer this tokenizer knows ({})",
                vocab.pre,
                KNOWN_PRE_TOKENIZERS.join(", ")
            )));
        }
        if vocab.tokens.is_empty() {
            return Err(fail("tokenizer.ggml.tokens is empty".to_owned()));
        }
        let count = vocab.tokens.len();
        if !vocab.token_types.is_empty() && vocab.token_types.len() != count {
            return Err(fail(format!(
                "tokenizer.ggml.token_type has {} entries for {count} tokens",
                vocab.token_types.len()
            )));
        }
        let Ok(last_id) = u32::try_from(count - 1) else {
            return Err(fail(format!("tokenizer.ggml.tokens has {count} tokens")));
        };
        let special_token =
            |key: &str, id: Option<u32>| -> Result<Option<(u32, String)>, ModelError> {
                match id {
                    None => Ok(None),
                    Some(id) if id <= last_id => Ok(Some((id, vocab.tokens[id as usize].clone()))),
                    Some(id) => Err(fail(format!(
                        "tokenizer.ggml.{key} is {id}, not a token (there are {count})"
                    ))),
                }
            };
        let bos = special_token("bos_token_id", vocab.bos)?;
        let eos = special_token("eos_token_id", vocab.eos)?;
        let unk = special_token("unknown_token_id", vocab.unk)?;
        let pad = special_token("padding_token_id", vocab.pad)?;

        // The vocabulary, a token outside the byte alphabet respelled as its UTF-8's byte
        // characters; a later token of the same spelling takes it (a Python dict).
        let mut ids = Vocab::default();
        for (id, token) in (0u32..).zip(&vocab.tokens) {
            let spelled = if token.chars().all(|c| char_to_byte(c).is_some()) {
                token.clone()
            } else {
                token.bytes().map(byte_to_char).collect()
            };
            ids.insert(spelled, id);
        }
        let mut merges = Vec::with_capacity(vocab.merges.len());
        for (rank, merge) in vocab.merges.iter().enumerate() {
            let mut sides = merge.split(' ');
            match (sides.next(), sides.next(), sides.next()) {
                (Some(left), Some(right), None) => merges.push((left.to_owned(), right.to_owned())),
                _ => {
                    return Err(fail(format!(
                        "tokenizer.ggml.merges[{rank}] is {merge:?}, not two tokens separated by a space"
                    )))
                }
            }
        }
        let bpe = BPE::builder()
            .vocab_and_merges(ids, merges)
            .continuing_subword_prefix(String::new())
            .end_of_word_suffix(String::new())
            .fuse_unk(false)
            .byte_fallback(false)
            .ignore_merges(false)
            .build()
            .map_err(|e| fail(format!("tokenizer.ggml.merges: {e}")))?;

        let mut inner = Tokenizer::new(bpe);
        inner.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
        inner.with_decoder(Some(ByteLevelDecoder::default()));

        // Control tokens whose spelling is in the byte alphabet (one that is not is a
        // mislabel that transformers skips), as special tokens; then user-defined ones that
        // are in the vocabulary as plain added tokens; then BOS, EOS, UNK and PAD, special,
        // when not added yet.
        let typed = |wanted: i32| {
            vocab
                .tokens
                .iter()
                .zip(&vocab.token_types)
                .filter(move |(_, &t)| t == wanted)
                .map(|(token, _)| token)
        };
        let control: Vec<AddedToken> = typed(TOKEN_TYPE_CONTROL)
            .filter(|token| token.chars().all(|c| char_to_byte(c).is_some()))
            .map(|token| AddedToken::from(token.clone(), true).normalized(false))
            .collect();
        inner.add_special_tokens(&control);
        let known = inner.get_vocab(true);
        let user: Vec<AddedToken> = typed(TOKEN_TYPE_USER_DEFINED)
            .filter(|token| known.contains_key(token.as_str()))
            .map(|token| AddedToken::from(token.clone(), false).normalized(false))
            .collect();
        inner.add_tokens(&user);
        let added: Vec<String> = inner
            .get_added_tokens_decoder()
            .values()
            .map(|t| t.content.clone())
            .collect();
        // `<|endoftext|>` is GPT2Tokenizer's default BOS, EOS and UNK, which it adds before
        // the file's are set: special too, when the vocabulary has it (transformers gives it a
        // new id past the vocabulary otherwise, one the model has no row for: not here).
        let endoftext = known
            .contains_key(GPT2_DEFAULT_SPECIAL)
            .then_some(GPT2_DEFAULT_SPECIAL);
        let mut named: Vec<AddedToken> = Vec::new();
        let names = [&bos, &eos, &unk, &pad]
            .into_iter()
            .flatten()
            .map(|(_, token)| token.as_str())
            .chain(endoftext);
        for token in names {
            if !added.iter().any(|a| a == token) && !named.iter().any(|t| t.content == token) {
                named.push(AddedToken::from(token.to_owned(), true).normalized(false));
            }
        }
        inner.add_tokens(&named);

        let post = post_processor(
            vocab.add_bos.then_some(bos.as_ref()).flatten(),
            vocab.add_eos.then_some(eos.as_ref()).flatten(),
        )
        .map_err(|e| fail(format!("cannot add BOS/EOS: {e}")))?;
        inner.with_post_processor(Some(post));

        let size = inner
            .get_vocab(true)
            .values()
            .max()
            .map_or(0, |&max| max as usize + 1);
        let mut tokens = vec![None; size];
        let mut bytes = vec![Vec::new(); size];
        let mut special = vec![false; size];
        for id in 0..size {
            if let Some(token) = inner.id_to_token(id as u32) {
                bytes[id] = token_bytes(&token);
                special[id] = inner.get_added_vocabulary().is_special_token(&token);
                tokens[id] = Some(token);
            }
        }

        let template = match vocab.chat_template {
            None => Template::Missing,
            Some(source) => match chat_environment(source) {
                Ok(env) => Template::Ready(Box::new(env)),
                Err(e) => Template::Broken(jinja_problem(&e)),
            },
        };
        Ok(ChatTokenizer {
            inner,
            path: path.to_owned(),
            tokens,
            bytes,
            special,
            bos,
            eos,
            unk,
            pad,
            template,
        })
    }

    /// The ids of `text`. With `add_special_tokens`, BOS and EOS are added as the file asks
    /// (`tokenizer.ggml.add_bos_token`, `add_eos_token`): SmolLM2 asks for neither. Special
    /// tokens written in the text (`<|im_start|>`) are always recognised, as in transformers.
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let mut vocab = GgufVocab::tiny(&[], &["<s>", "</s>"]);
    /// vocab.add_bos = true;
    /// let tokenizer = ChatTokenizer::from_vocab(vocab, "t.gguf".as_ref())?;
    /// assert_eq!(tokenizer.encode("a", true)?, [256, b'a' as usize]);
    /// assert_eq!(tokenizer.encode("a</s>", false)?, [b'a' as usize, 257]);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Content`] naming the GGUF file when the `tokenizers` crate fails on the
    /// text (it does not for a vocabulary with all 256 byte tokens).
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<usize>, ModelError> {
        let encoding = self.inner.encode(text, add_special_tokens).map_err(|e| {
            let shown: String = text.chars().take(40).collect();
            ModelError::content(&self.path, format!("cannot tokenise {shown:?}: {e}"))
        })?;
        Ok(encoding.get_ids().iter().map(|&id| id as usize).collect())
    }

    /// The tokens of `ids` as the vocabulary spells them (`"Ġthe"`, `"<|im_start|>"`); an id
    /// no token has is left out, as [`decode`](ChatTokenizer::decode) leaves it out.
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&["Ġ a"], &[]), "t.gguf".as_ref())?;
    /// let ids = tokenizer.encode("a a\n", false)?;
    /// assert_eq!(tokenizer.tokens(&ids), ["a", "Ġa", "Ċ"]);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn tokens(&self, ids: &[usize]) -> Vec<String> {
        ids.iter()
            .filter_map(|&id| self.token(id).map(str::to_owned))
            .collect()
    }

    /// The token of one id, `None` when no token has it.
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&[], &[]), "t.gguf".as_ref())?;
    /// assert_eq!(tokenizer.token(b' ' as usize), Some("Ġ"));
    /// assert_eq!(tokenizer.token(256), None);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn token(&self, id: usize) -> Option<&str> {
        self.tokens.get(id).and_then(Option::as_deref)
    }

    /// The id of a token spelled as the vocabulary spells it (`"Ġthe"`, `"<|im_end|>"`).
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&[], &["<|im_end|>"]), "t.gguf".as_ref())?;
    /// assert_eq!(tokenizer.token_id("<|im_end|>"), Some(256));
    /// assert_eq!(tokenizer.token_id("Ġ"), Some(32));
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn token_id(&self, token: &str) -> Option<usize> {
        self.inner.token_to_id(token).map(|id| id as usize)
    }

    /// The bytes one id stands for: a token's characters read through [`char_to_byte`]
    /// (`"Ġthe"` is ` the`); a piece of a character for the tokens inside an emoji. Empty for
    /// an id no token has.
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&["Ġ a"], &[]), "t.gguf".as_ref())?;
    /// assert_eq!(tokenizer.token_bytes(256), b" a");
    /// assert_eq!(tokenizer.token_bytes(0xF0), [0xF0]); // the first byte of an emoji
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn token_bytes(&self, id: usize) -> &[u8] {
        self.bytes.get(id).map_or(&[], Vec::as_slice)
    }

    /// Whether an id is a special token (`<|im_start|>`, `<|im_end|>`, ...): one the file
    /// marks as control, BOS, EOS, unknown or padding, or `<|endoftext|>`.
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&[], &["<|im_end|>"]), "t.gguf".as_ref())?;
    /// assert!(tokenizer.is_special(256));
    /// assert!(!tokenizer.is_special(b'a' as usize));
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn is_special(&self, id: usize) -> bool {
        self.special.get(id).copied().unwrap_or(false)
    }

    /// The text of `ids`, as transformers' `decode`: their bytes one after the other, read as
    /// UTF-8, each invalid or cut-off sequence one U+FFFD; special tokens left out with
    /// `skip_special`, and ids no token has always. `decode(encode(text)) == text`.
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&[], &["<|im_end|>"]), "t.gguf".as_ref())?;
    /// let ids = tokenizer.encode("Hi 😀<|im_end|>", false)?;
    /// assert_eq!(tokenizer.decode(&ids, false), "Hi 😀<|im_end|>");
    /// assert_eq!(tokenizer.decode(&ids, true), "Hi 😀");
    /// assert_eq!(tokenizer.decode(&ids[..5], true), "Hi \u{FFFD}"); // half the emoji's bytes
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn decode(&self, ids: &[usize], skip_special: bool) -> String {
        let mut stream = self.stream(skip_special);
        let mut text = String::new();
        for &id in ids {
            text.push_str(&stream.push(id));
        }
        text.push_str(&stream.finish());
        text
    }

    /// A [`TextStream`]: ids in one at a time as a model generates them, text out as soon as
    /// its characters are complete. The pieces add up to [`decode`](ChatTokenizer::decode) of
    /// all the ids.
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&[], &[]), "t.gguf".as_ref())?;
    /// let ids = tokenizer.encode("a😀", false)?; // 'a' and the emoji's four bytes
    /// let mut stream = tokenizer.stream(true);
    /// let pieces: Vec<String> = ids.iter().map(|&id| stream.push(id)).collect();
    /// assert_eq!(pieces, ["a", "", "", "", "😀"]);
    /// assert_eq!(stream.finish(), "");
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn stream(&self, skip_special: bool) -> TextStream<'_> {
        TextStream {
            tokenizer: self,
            skip_special,
            pending: Vec::new(),
        }
    }

    /// The BOS token's id (`<|im_start|>`, 1, in SmolLM2).
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&[], &["<s>", "</s>"]), "t.gguf".as_ref())?;
    /// assert_eq!((tokenizer.bos(), tokenizer.eos()), (Some(256), Some(257)));
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn bos(&self) -> Option<usize> {
        self.bos.as_ref().map(|(id, _)| *id as usize)
    }

    /// The EOS token's id (`<|im_end|>`, 2, in SmolLM2): generation stops there.
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&[], &["<s>", "</s>"]), "t.gguf".as_ref())?;
    /// assert_eq!(tokenizer.token(tokenizer.eos().unwrap()), Some("</s>"));
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn eos(&self) -> Option<usize> {
        self.eos.as_ref().map(|(id, _)| *id as usize)
    }

    /// One more than the largest id (49152 in SmolLM2): the rows of the model's embedding
    /// table.
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&["a b"], &["<s>"]), "t.gguf".as_ref())?;
    /// assert_eq!(tokenizer.vocab_size(), 256 + 1 + 1);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn vocab_size(&self) -> usize {
        self.tokens.len()
    }

    /// The chat template's source (`tokenizer.chat_template`), `None` when the file has none.
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// let tokenizer = ChatTokenizer::from_vocab(GgufVocab::tiny(&[], &[]), "t.gguf".as_ref())?;
    /// assert_eq!(tokenizer.chat_template(), None);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn chat_template(&self) -> Option<String> {
        match &self.template {
            Template::Ready(env) => env
                .get_template(TEMPLATE_NAME)
                .ok()
                .map(|t| t.source().to_owned()),
            _ => None,
        }
    }

    /// The conversation as the prompt text the model was trained on, rendered as
    /// transformers' `apply_chat_template(messages, tokenize=False, add_generation_prompt=..)`
    /// renders it with jinja2: `trim_blocks` and `lstrip_blocks` on, `keep_trailing_newline`
    /// off (jinja2's default, which transformers keeps: one newline at the very end of the
    /// template is dropped), undefined values empty; the template sees `messages` (each with
    /// `role` and `content`), `add_generation_prompt`, `tools` and `documents` (none), and
    /// `bos_token`, `eos_token`, `unk_token` and `pad_token` (the ones the file has). It may
    /// call `raise_exception(message)`, `strftime_now(format)` (in UTC, where transformers uses
    /// the machine's time zone), `namespace(..)`, `dict(..)`, the `tojson` filter (as Python's
    /// `json.dumps`, non-ASCII kept) and the common Python methods of strings (`strip`,
    /// `split`, `startswith`, ...) and dicts (`items`, `get`, ...). Lists, `None` and booleans
    /// print as Python prints them (`['a', 'b']`, `None`, `True`).
    ///
    /// `{% break %}` and `{% continue %}` (jinja2's `loopcontrols` extension, which
    /// transformers turns on) need minijinja's `loop_controls` feature, and a dict written in
    /// a template keeps its order only with its `preserve_order` feature (without it,
    /// `{'b': 1, 'a': 2}` iterates `a` first). SmolLM2's template uses neither.
    ///
    /// With `add_generation_prompt`, SmolLM2's template ends with `<|im_start|>assistant\n`, the
    /// header of the answer the model is to write.
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab, Message};
    ///
    /// let mut vocab = GgufVocab::tiny(&[], &["<|im_start|>", "<|im_end|>"]);
    /// vocab.chat_template = Some(
    ///     "{% for m in messages %}{{ bos_token + m.role + '\n' + m.content + eos_token + '\n' }}\
    ///      {% endfor %}{% if add_generation_prompt %}{{ bos_token + 'assistant\n' }}{% endif %}".into(),
    /// );
    /// let tokenizer = ChatTokenizer::from_vocab(vocab, "t.gguf".as_ref())?;
    /// let text = tokenizer.apply_chat_template(&[Message::user("Hi")], true)?;
    /// assert_eq!(text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Content`] naming the GGUF file when it has no chat template, the template
    /// does not compile or fails (`raise_exception`, an unknown filter or method), or
    /// `messages` is empty (transformers refuses an empty conversation too).
    pub fn apply_chat_template(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, ModelError> {
        let fail = |problem: String| ModelError::content(&self.path, problem);
        let env = match &self.template {
            Template::Ready(env) => env,
            Template::Missing => {
                return Err(fail("the file has no tokenizer.chat_template".to_owned()))
            }
            Template::Broken(problem) => {
                return Err(fail(format!(
                    "tokenizer.chat_template does not compile: {problem}"
                )))
            }
        };
        if messages.is_empty() {
            return Err(fail(
                "cannot apply the chat template to an empty conversation".to_owned(),
            ));
        }
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| {
                OrderedMap::value(vec![
                    ("role".to_owned(), Value::from(m.role.as_str())),
                    ("content".to_owned(), Value::from(m.content.as_str())),
                ])
            })
            .collect();
        let mut context: Vec<(String, Value)> = Vec::new();
        for (name, token) in [
            ("bos_token", &self.bos),
            ("eos_token", &self.eos),
            ("unk_token", &self.unk),
            ("pad_token", &self.pad),
        ] {
            if let Some((_, token)) = token {
                context.push((name.to_owned(), Value::from(token.as_str())));
            }
        }
        context.push(("messages".to_owned(), Value::from(messages)));
        context.push(("tools".to_owned(), Value::from(())));
        context.push(("documents".to_owned(), Value::from(())));
        context.push((
            "add_generation_prompt".to_owned(),
            Value::from(add_generation_prompt),
        ));
        let template = env
            .get_template(TEMPLATE_NAME)
            .map_err(|e| fail(format!("tokenizer.chat_template: {}", jinja_problem(&e))))?;
        template
            .render(OrderedMap::value(context))
            .map_err(|e| fail(format!("tokenizer.chat_template: {}", jinja_problem(&e))))
    }

    /// The ids of a conversation's prompt, as transformers'
    /// `apply_chat_template(messages, add_generation_prompt=.., tokenize=True)`: the rendered
    /// text encoded without adding BOS or EOS (the template writes its own special tokens).
    ///
    /// ```
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab, Message};
    ///
    /// let mut vocab = GgufVocab::tiny(&[], &["<|im_start|>", "<|im_end|>"]);
    /// vocab.chat_template = Some("{{ bos_token }}{{ messages[0].content }}{{ eos_token }}".into());
    /// let tokenizer = ChatTokenizer::from_vocab(vocab, "t.gguf".as_ref())?;
    /// assert_eq!(tokenizer.encode_chat(&[Message::user("a")], false)?, [256, b'a' as usize, 257]);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// As [`apply_chat_template`](ChatTokenizer::apply_chat_template) and
    /// [`encode`](ChatTokenizer::encode).
    pub fn encode_chat(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<Vec<usize>, ModelError> {
        let text = self.apply_chat_template(messages, add_generation_prompt)?;
        self.encode(&text, false)
    }

    /// The ids of a one-question prompt: one user message and the header of the assistant's
    /// answer (`add_generation_prompt`), as
    /// [`encode_chat`](ChatTokenizer::encode_chat)`(&[Message::user(prompt)], true)`. SmolLM2's
    /// template adds its default system message before it.
    ///
    /// ```no_run
    /// use attention_lab_model::chat::{ChatTokenizer, GgufVocab};
    ///
    /// # fn vocab_of(_: &str) -> GgufVocab { unimplemented!() }
    /// let path = "SmolLM2-135M-Instruct.Q4_1.gguf";
    /// let tokenizer = ChatTokenizer::from_vocab(vocab_of(path), path.as_ref())?;
    /// let ids = tokenizer.chat_ids("What is attention?")?;
    /// assert!(tokenizer.decode(&ids, false).ends_with(
    ///     "<|im_start|>user\nWhat is attention?<|im_end|>\n<|im_start|>assistant\n"
    /// ));
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// As [`encode_chat`](ChatTokenizer::encode_chat).
    pub fn chat_ids(&self, prompt: &str) -> Result<Vec<usize>, ModelError> {
        self.encode_chat(&[Message::user(prompt)], true)
    }
}
