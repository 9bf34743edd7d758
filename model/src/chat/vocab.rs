//! What a GGUF file stores of its tokenizer ([`GgufVocab`]), the byte alphabet of byte-level
//! BPE, and the post-processor transformers sets.

use super::{BYTE_LEVEL_MODEL, TOKEN_TYPE_CONTROL};
use tokenizers::processors::template::TemplateProcessing;

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
pub(super) fn token_bytes(token: &str) -> Vec<u8> {
    token
        .chars()
        .map(char_to_byte)
        .collect::<Option<Vec<u8>>>()
        .unwrap_or_else(|| token.as_bytes().to_vec())
}

/// The TemplateProcessing transformers sets: `[bos:0] $A:0 [eos:0]` for one text, the pair
/// likewise with type 1.
pub(super) fn post_processor(
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
