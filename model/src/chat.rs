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
use std::sync::Arc;

use minijinja::value::{from_args, Enumerator, Kwargs, Object, ObjectRepr, Value, ValueKind};
use minijinja::{AutoEscape, Environment, Error as JinjaError, ErrorKind};
use serde::{Deserialize, Serialize};
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, Tokenizer};

use crate::error::ModelError;

/// The `tokenizer.ggml.model` this module builds: byte-level BPE.
const BYTE_LEVEL_MODEL: &str = "gpt2";

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

/// The tokenizer's part of a GGUF file's metadata, as plain data: what the GGUF reader fills
/// in and [`ChatTokenizer::from_vocab`] reads. Each field names its GGUF key.
///
/// ```
/// use attention_lab_model::chat::GgufVocab;
///
/// let vocab = GgufVocab::tiny(&["h i"], &["<|im_start|>"]);
/// assert_eq!(vocab.tokens.len(), 256 + 1 + 1);
/// assert_eq!(vocab.tokens[256], "hi");
/// assert_eq!(vocab.bos, Some(257));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GgufVocab {
    /// `tokenizer.ggml.tokens`: every token, id = position (`"Ġt"`, `"<|im_start|>"`).
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.token_type`, one per token: 1 normal, 2 unknown, 3 control,
    /// 4 user-defined, 5 unused, 6 byte. Empty when the file has none.
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.merges`: `"Ġ t"`, best first.
    pub merges: Vec<String>,
    /// `tokenizer.ggml.model`: `"gpt2"` for byte-level BPE, the only one supported.
    pub model: String,
    /// `tokenizer.ggml.pre`: which split of the text the merges were learned on (`"smollm"`).
    pub pre: String,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.unknown_token_id`.
    pub unk: Option<u32>,
    /// `tokenizer.ggml.padding_token_id`.
    pub pad: Option<u32>,
    /// `tokenizer.ggml.add_bos_token` (false when absent).
    pub add_bos: bool,
    /// `tokenizer.ggml.add_eos_token` (false when absent).
    pub add_eos: bool,
    /// `tokenizer.chat_template`.
    pub chat_template: Option<String>,
}

impl GgufVocab {
    /// The smallest vocabulary [`ChatTokenizer`] accepts, for examples and tests: the 256
    /// byte tokens (id = the byte's value, spelled with [`byte_to_char`]), then one token per
    /// merge (the two sides joined; a merge's sides must already be tokens), then
    /// `specials` as control tokens. The first special token is BOS and the second EOS (and
    /// padding); model `gpt2`, pre-tokenizer `smollm`, no chat template.
    ///
    /// ```
    /// use attention_lab_model::chat::{byte_to_char, GgufVocab};
    ///
    /// let vocab = GgufVocab::tiny(&["Ġ t", "Ġt h"], &[]);
    /// assert_eq!(vocab.tokens[b' ' as usize], byte_to_char(b' ').to_string());
    /// assert_eq!(&vocab.tokens[256..], ["Ġt", "Ġth"]);
    /// assert_eq!(vocab.bos, None);
    /// ```
    ///
    /// # Panics
    /// When a merge is not two tokens separated by one space.
    pub fn tiny(merges: &[&str], specials: &[&str]) -> GgufVocab {
        let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_to_char(b).to_string()).collect();
        for merge in merges {
            let (left, right) = merge
                .split_once(' ')
                .filter(|(_, right)| !right.contains(' '))
                .unwrap_or_else(|| panic!("merge {merge:?} is not two tokens"));
            tokens.push(format!("{left}{right}"));
        }
        let first_special = tokens.len() as u32;
        tokens.extend(specials.iter().map(|s| (*s).to_owned()));
        let mut token_types = vec![1; tokens.len()];
        token_types[first_special as usize..].fill(TOKEN_TYPE_CONTROL);
        let special = |i: u32| (i < specials.len() as u32).then_some(first_special + i);
        GgufVocab {
            tokens,
            token_types,
            merges: merges.iter().map(|m| (*m).to_owned()).collect(),
            model: BYTE_LEVEL_MODEL.to_owned(),
            pre: "smollm".to_owned(),
            bos: special(0),
            eos: special(1),
            unk: None,
            pad: special(1),
            add_bos: false,
            add_eos: false,
            chat_template: None,
        }
    }
}

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

/// The byte-level alphabet of GPT-2 (and of every byte-level BPE since): byte `b` is written
/// as one printable character, so that a token is a string. The printable bytes `!`..`~`,
/// `¡`..`¬` and `®`..`ÿ` stand for themselves; the other 68 (controls, space, 0x7F..0xA0,
/// 0xAD) are written U+0100, U+0101, ... in byte order, so a space is `Ġ` (U+0120) and a
/// newline `Ċ` (U+010A).
///
/// ```
/// use attention_lab_model::chat::{byte_to_char, char_to_byte};
///
/// assert_eq!(byte_to_char(b'a'), 'a');
/// assert_eq!(byte_to_char(b' '), 'Ġ');
/// assert_eq!(byte_to_char(b'\n'), 'Ċ');
/// assert_eq!(char_to_byte('Ġ'), Some(b' '));
/// ```
pub fn byte_to_char(byte: u8) -> char {
    BYTE_CHARS.0[byte as usize]
}

/// The byte a character of the byte-level alphabet stands for ([`byte_to_char`] backwards);
/// `None` for a character outside it.
///
/// ```
/// use attention_lab_model::chat::char_to_byte;
///
/// assert_eq!(char_to_byte('Ċ'), Some(b'\n'));
/// assert_eq!(char_to_byte('é'), Some(0xE9));
/// assert_eq!(char_to_byte('€'), None);
/// ```
pub fn char_to_byte(c: char) -> Option<u8> {
    let code = c as u32;
    let index = usize::try_from(code).ok()?;
    // Every character of the alphabet is below U+0144 (256 + 68).
    BYTE_CHARS.1.get(index).copied().flatten()
}

/// Byte -> character, and character code -> byte for the codes below U+0144.
struct ByteChars([char; 256], [Option<u8>; 0x144]);

static BYTE_CHARS: std::sync::LazyLock<ByteChars> = std::sync::LazyLock::new(|| {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut chars = ['\0'; 256];
    let mut bytes = [None; 0x144];
    let mut next = 256u32;
    for b in 0..=255u8 {
        let code = if printable(b) {
            u32::from(b)
        } else {
            next += 1;
            next - 1
        };
        chars[b as usize] = char::from_u32(code).expect("below U+0144");
        bytes[code as usize] = Some(b);
    }
    ByteChars(chars, bytes)
});

/// The bytes a token stands for, as the `ByteLevel` decoder reads it: each character through
/// [`char_to_byte`] when all of them are in the alphabet, else the token's own UTF-8 (an added
/// token such as `<think>` spelled outside it).
fn token_bytes(token: &str) -> Vec<u8> {
    token
        .chars()
        .map(char_to_byte)
        .collect::<Option<Vec<u8>>>()
        .unwrap_or_else(|| token.as_bytes().to_vec())
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

const TEMPLATE_NAME: &str = "chat_template";

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

/// The TemplateProcessing transformers sets: `[bos:0] $A:0 [eos:0]` for one text, the pair
/// likewise with type 1.
fn post_processor(
    bos: Option<&(u32, String)>,
    eos: Option<&(u32, String)>,
) -> Result<TemplateProcessing, String> {
    let mut single = Vec::new();
    if let Some((_, token)) = bos {
        single.push(format!("{token}:0"));
    }
    single.push("$A:0".to_owned());
    if let Some((_, token)) = eos {
        single.push(format!("{token}:0"));
    }
    let mut pair = single.clone();
    if let Some((_, token)) = bos {
        pair.push(format!("{token}:1"));
    }
    pair.push("$B:1".to_owned());
    if let Some((_, token)) = eos {
        pair.push(format!("{token}:1"));
    }
    let specials: Vec<(String, u32)> = [bos, eos]
        .into_iter()
        .flatten()
        .map(|(id, token)| (token.clone(), *id))
        .collect();
    TemplateProcessing::builder()
        .try_single(single)?
        .try_pair(pair)?
        .special_tokens(specials)
        .build()
        .map_err(|e| e.to_string())
}

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
    tokenizer: &'a ChatTokenizer,
    skip_special: bool,
    /// The bytes of a character begun but not finished.
    pending: Vec<u8>,
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

/// A minijinja map that keeps its keys in order, as a Python dict does (minijinja's own maps
/// are sorted), for `message.items()` and `{% for key in message %}`.
#[derive(Debug)]
struct OrderedMap(Vec<(String, Value)>);

impl OrderedMap {
    fn value(entries: Vec<(String, Value)>) -> Value {
        Value::from_object(OrderedMap(entries))
    }
}

impl Object for OrderedMap {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let key = key.as_str()?;
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(
            self.0
                .iter()
                .map(|(k, _)| Value::from(k.as_str()))
                .collect(),
        )
    }
}

/// A minijinja error as one line: its kind and detail, then its causes.
fn jinja_problem(error: &JinjaError) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The environment transformers renders chat templates in (jinja2's
/// `ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`), holding `source`.
fn chat_environment(source: String) -> Result<Environment<'static>, JinjaError> {
    let mut env = Environment::new();
    let syntax = minijinja::syntax::SyntaxConfig::builder()
        .trim_blocks(true)
        .lstrip_blocks(true)
        .keep_trailing_newline(false)
        .build()?;
    env.set_syntax(syntax);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.add_function(
        "raise_exception",
        |message: String| -> Result<Value, JinjaError> {
            Err(JinjaError::new(ErrorKind::InvalidOperation, message))
        },
    );
    env.add_filter("tojson", tojson);
    env.add_function("strftime_now", |format: String| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        strftime(i64::try_from(now).unwrap_or(0), &format)
    });
    env.set_unknown_method_callback(|_state, value, method, args| {
        python_method(value, method, args)
    });
    env.add_template_owned(TEMPLATE_NAME, source)?;
    Ok(env)
}

/// Python's `time.strftime(format)` for a time in seconds since 1970, in UTC: `%Y %m %d %H %M
/// %S %y %j %b %B %a %A %p %I %e %%`, glibc's `%-d` (no zero) for the numbers; any other code
/// is written as it is.
fn strftime(seconds: i64, format: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = [
        "Sunday",
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
    ];
    let days = seconds.div_euclid(86_400);
    let second_of_day = seconds.rem_euclid(86_400);
    let (hour, minute, second) = (
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60,
    );
    // The civil date of a day count, in the proleptic Gregorian calendar, with years
    // starting on 1 March so that the leap day comes last.
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_march_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let march_month = (5 * day_of_march_year + 2) / 153;
    let day = day_of_march_year - (153 * march_month + 2) / 5 + 1;
    let month = if march_month < 10 {
        march_month + 3
    } else {
        march_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let before_month = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334][month as usize - 1];
    let day_of_year = before_month + day + i64::from(leap && month > 2);
    let weekday = (days + 4).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let hour12 = if hour % 12 == 0 { 12 } else { hour % 12 };

    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut code = chars.next();
        let unpadded = code == Some('-');
        if unpadded {
            code = chars.next();
        }
        let number = |value: i64, width: usize| {
            if unpadded {
                value.to_string()
            } else {
                format!("{value:0width$}")
            }
        };
        match code {
            Some('Y') => out.push_str(&year.to_string()),
            Some('y') => out.push_str(&number(year.rem_euclid(100), 2)),
            Some('m') => out.push_str(&number(month, 2)),
            Some('d') => out.push_str(&number(day, 2)),
            Some('e') => out.push_str(&format!("{day:2}")),
            Some('j') => out.push_str(&number(day_of_year, 3)),
            Some('H') => out.push_str(&number(hour, 2)),
            Some('I') => out.push_str(&number(hour12, 2)),
            Some('M') => out.push_str(&number(minute, 2)),
            Some('S') => out.push_str(&number(second, 2)),
            Some('p') => out.push_str(if hour < 12 { "AM" } else { "PM" }),
            Some('B') => out.push_str(MONTHS[month as usize - 1]),
            Some('b') => out.push_str(&MONTHS[month as usize - 1][..3]),
            Some('A') => out.push_str(DAYS[weekday]),
            Some('a') => out.push_str(&DAYS[weekday][..3]),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                if unpadded {
                    out.push('-');
                }
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Python's `json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=sort_keys)`,
/// transformers' `tojson`: `", "` and `": "` between items on one line, `","` and `": "`
/// with an indent.
fn tojson(value: &Value, kwargs: Kwargs) -> Result<Value, JinjaError> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let separators: Option<Value> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => Some(match v.as_str() {
            Some(s) => s.to_owned(),
            None => " ".repeat(v.as_i64().unwrap_or(0).max(0) as usize),
        }),
    };
    let (item, key) = match separators {
        Some(v) if !v.is_none() => {
            let item = v.get_item_by_index(0)?;
            let key = v.get_item_by_index(1)?;
            (item.to_string(), key.to_string())
        }
        _ if indent.is_some() => (",".to_owned(), ": ".to_owned()),
        _ => (", ".to_owned(), ": ".to_owned()),
    };
    let style = JsonStyle {
        indent,
        item,
        key,
        sort_keys: sort_keys.unwrap_or(false),
        ensure_ascii: ensure_ascii.unwrap_or(false),
    };
    let mut out = String::new();
    style.write(value, 0, &mut out)?;
    Ok(Value::from(out))
}

struct JsonStyle {
    indent: Option<String>,
    item: String,
    key: String,
    sort_keys: bool,
    ensure_ascii: bool,
}

impl JsonStyle {
    fn write(&self, value: &Value, depth: usize, out: &mut String) -> Result<(), JinjaError> {
        match value.kind() {
            ValueKind::None => out.push_str("null"),
            ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
            ValueKind::Number => out.push_str(&python_number(value)),
            ValueKind::String => self.string(value.as_str().unwrap_or_default(), out),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = value.try_iter()?.collect();
                self.container('[', ']', items.len(), depth, out, |i, out| {
                    self.write(&items[i], depth + 1, out)
                })?;
            }
            ValueKind::Map => {
                let mut entries = Vec::new();
                for key in value.try_iter()? {
                    let item = value.get_item(&key)?;
                    entries.push((json_key(&key)?, item));
                }
                if self.sort_keys {
                    entries.sort_by(|a, b| a.0.cmp(&b.0));
                }
                self.container('{', '}', entries.len(), depth, out, |i, out| {
                    self.string(&entries[i].0, out);
                    out.push_str(&self.key);
                    self.write(&entries[i].1, depth + 1, out)
                })?;
            }
            kind => {
                return Err(JinjaError::new(
                    ErrorKind::InvalidOperation,
                    format!("Object of type {kind} is not JSON serializable"),
                ))
            }
        }
        Ok(())
    }

    fn container(
        &self,
        open: char,
        close: char,
        len: usize,
        depth: usize,
        out: &mut String,
        mut item: impl FnMut(usize, &mut String) -> Result<(), JinjaError>,
    ) -> Result<(), JinjaError> {
        out.push(open);
        if len == 0 {
            out.push(close);
            return Ok(());
        }
        for i in 0..len {
            if i > 0 {
                out.push_str(&self.item);
            }
            if let Some(indent) = &self.indent {
                out.push('\n');
                out.push_str(&indent.repeat(depth + 1));
            }
            item(i, out)?;
        }
        if let Some(indent) = &self.indent {
            out.push('\n');
            out.push_str(&indent.repeat(depth));
        }
        out.push(close);
        Ok(())
    }

    fn string(&self, s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 || (self.ensure_ascii && (c as u32) > 0x7E) => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

/// A dict key as `json.dumps` writes it: strings as they are, numbers, booleans and None as
/// their JSON.
fn json_key(key: &Value) -> Result<String, JinjaError> {
    match key.kind() {
        ValueKind::String => Ok(key.as_str().unwrap_or_default().to_owned()),
        ValueKind::Number => Ok(python_number(key)),
        ValueKind::Bool => Ok(if key.is_true() { "true" } else { "false" }.to_owned()),
        ValueKind::None => Ok("null".to_owned()),
        kind => Err(JinjaError::new(
            ErrorKind::InvalidOperation,
            format!("keys must be str, int, float, bool or None, not {kind}"),
        )),
    }
}

/// A number as Python's `repr` (which `json.dumps` uses) writes it: integers as they are,
/// floats with their shortest digits, `1.0` not `1`, an exponent from 1e16 and below 1e-4.
fn python_number(value: &Value) -> String {
    if value.is_integer() {
        return value.to_string();
    }
    let Ok(x) = f64::try_from(value.clone()) else {
        return value.to_string();
    };
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest digits that read back: "1.5e-7", "-1e16".
    let scientific = format!("{x:e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} has an e");
    let exponent: i32 = exponent.parse().expect("an integer exponent");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if (-4..16).contains(&exponent) {
        let point = exponent + 1;
        let body = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            format!(
                "{}.{}",
                &digits[..point as usize],
                &digits[point as usize..]
            )
        };
        format!("{sign}{body}")
    } else {
        let mantissa = if digits.len() == 1 {
            digits
        } else {
            format!("{}.{}", &digits[..1], &digits[1..])
        };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        format!("{sign}{mantissa}e{exponent_sign}{:02}", exponent.abs())
    }
}

/// Python's whitespace (`str.isspace`): Unicode's, and the separators U+001C..U+001F.
fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The Python methods chat templates call on strings and dicts, which jinja2 lets through
/// and minijinja does not have.
fn python_method(value: &Value, method: &str, args: &[Value]) -> Result<Value, JinjaError> {
    if let Some(s) = value.as_str().filter(|_| value.kind() == ValueKind::String) {
        return string_method(s, method, args);
    }
    if value.kind() == ValueKind::Map {
        match method {
            "items" => {
                let () = from_args(args)?;
                let mut items = Vec::new();
                for key in value.try_iter()? {
                    let item = value.get_item(&key)?;
                    items.push(Value::from(vec![key, item]));
                }
                return Ok(Value::from(items));
            }
            "keys" => {
                let () = from_args(args)?;
                return Ok(Value::from(value.try_iter()?.collect::<Vec<_>>()));
            }
            "values" => {
                let () = from_args(args)?;
                let mut values = Vec::new();
                for key in value.try_iter()? {
                    values.push(value.get_item(&key)?);
                }
                return Ok(Value::from(values));
            }
            "get" => {
                let (key, default): (Value, Option<Value>) = from_args(args)?;
                let item = value.get_item(&key)?;
                return Ok(if item.is_undefined() {
                    default.unwrap_or(Value::from(()))
                } else {
                    item
                });
            }
            _ => {}
        }
    }
    Err(JinjaError::from(ErrorKind::UnknownMethod))
}

fn string_method(s: &str, method: &str, args: &[Value]) -> Result<Value, JinjaError> {
    let strip_set = |chars: Option<&str>| {
        let chars: Option<Vec<char>> = chars.map(|c| c.chars().collect());
        move |c: char| match &chars {
            Some(set) => set.contains(&c),
            None => python_space(c),
        }
    };
    Ok(match method {
        "strip" | "lstrip" | "rstrip" => {
            let (chars,): (Option<&str>,) = from_args(args)?;
            let strip = strip_set(chars);
            Value::from(match method {
                "strip" => s.trim_matches(strip),
                "lstrip" => s.trim_start_matches(strip),
                _ => s.trim_end_matches(strip),
            })
        }
        "startswith" | "endswith" => {
            let (affix,): (Value,) = from_args(args)?;
            let affixes: Vec<Value> = if affix.kind() == ValueKind::String {
                vec![affix]
            } else {
                affix.try_iter()?.collect()
            };
            Value::from(affixes.iter().any(|a| {
                let a = a.as_str().unwrap_or_default();
                if method == "startswith" {
                    s.starts_with(a)
                } else {
                    s.ends_with(a)
                }
            }))
        }
        "split" => {
            let (sep, maxsplit): (Option<Value>, Option<i64>) = from_args(args)?;
            let limit = maxsplit.filter(|&n| n >= 0).map(|n| n as usize);
            let sep = sep.filter(|v| !v.is_none());
            let parts: Vec<Value> = match sep {
                Some(sep) => {
                    let sep = sep.as_str().unwrap_or_default();
                    if sep.is_empty() {
                        return Err(JinjaError::new(
                            ErrorKind::InvalidOperation,
                            "empty separator",
                        ));
                    }
                    match limit {
                        Some(n) => s.splitn(n + 1, sep).map(Value::from).collect(),
                        None => s.split(sep).map(Value::from).collect(),
                    }
                }
                None => python_split_whitespace(s, limit)
                    .into_iter()
                    .map(Value::from)
                    .collect(),
            };
            Value::from(parts)
        }
        "lower" => {
            let () = from_args(args)?;
            Value::from(s.to_lowercase())
        }
        "upper" => {
            let () = from_args(args)?;
            Value::from(s.to_uppercase())
        }
        "replace" => {
            let (old, new, count): (&str, &str, Option<i64>) = from_args(args)?;
            Value::from(match count.filter(|&n| n >= 0) {
                Some(n) => s.replacen(old, new, n as usize),
                None => s.replace(old, new),
            })
        }
        "join" => {
            let (items,): (Value,) = from_args(args)?;
            let parts: Vec<String> = items.try_iter()?.map(|v| v.to_string()).collect();
            Value::from(parts.join(s))
        }
        _ => return Err(JinjaError::from(ErrorKind::UnknownMethod)),
    })
}

/// Python's `str.split()` without a separator: runs of whitespace split, none kept empty;
/// after `limit` splits the rest is one part, its leading whitespace dropped.
fn python_split_whitespace(s: &str, limit: Option<usize>) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = s.trim_start_matches(python_space);
    while !rest.is_empty() {
        if limit.is_some_and(|n| parts.len() == n) {
            parts.push(rest);
            break;
        }
        let end = rest.find(python_space).unwrap_or(rest.len());
        parts.push(&rest[..end]);
        rest = rest[end..].trim_start_matches(python_space);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::strftime;

    #[test]
    fn strftime_writes_utc_as_python_does() {
        // Each expected text is Python's time.strftime(FORMAT, time.gmtime(seconds)).
        const FORMAT: &str = "%Y-%m-%d %H:%M:%S %y %j %b %B %a %A %p %I %e|%-d %-m %-H %% %Q";
        let cases = [
            (
                0,
                "1970-01-01 00:00:00 70 001 Jan January Thu Thursday AM 12  1|1 1 0 % %Q",
            ),
            (
                951_782_400,
                "2000-02-29 00:00:00 00 060 Feb February Tue Tuesday AM 12 29|29 2 0 % %Q",
            ),
            (
                1_709_251_199,
                "2024-02-29 23:59:59 24 060 Feb February Thu Thursday PM 11 29|29 2 23 % %Q",
            ),
            (
                -86_400,
                "1969-12-31 00:00:00 69 365 Dec December Wed Wednesday AM 12 31|31 12 0 % %Q",
            ),
            (
                4_102_444_800,
                "2100-01-01 00:00:00 00 001 Jan January Fri Friday AM 12  1|1 1 0 % %Q",
            ),
            (
                1_735_779_661,
                "2025-01-02 01:01:01 25 002 Jan January Thu Thursday AM 01  2|2 1 1 % %Q",
            ),
            (
                253_402_300_799,
                "9999-12-31 23:59:59 99 365 Dec December Fri Friday PM 11 31|31 12 23 % %Q",
            ),
        ];
        for (seconds, expected) in cases {
            assert_eq!(strftime(seconds, FORMAT), expected, "{seconds}");
        }
    }
}
