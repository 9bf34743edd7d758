//! The GGUF tokenizer and chat template (model/src/chat.rs).
//!
//! Unit tests on hand-made byte-level vocabularies, and a golden test against transformers
//! 5.23's tokenizer for SmolLM2-135M-Instruct built from the same GGUF file: the file is not in
//! the repository, so that test reads it from $ATTENTION_LAB_SMOLLM (the path of the .gguf)
//! and says it skipped without it. Its golden, tests/data/smollm/tokenizer.json, is read from
//! $ATTENTION_LAB_SMOLLM_GOLDEN instead when that is set.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::path::{Path, PathBuf};

use attention_lab_model::chat::{
    byte_to_char, char_to_byte, ChatTokenizer, GgufVocab, Message, TOKEN_TYPE_CONTROL,
    TOKEN_TYPE_USER_DEFINED,
};
use attention_lab_model::gguf::Gguf;
use attention_lab_model::ModelError;
use serde_json::Value;

/// SmolLM2-135M-Instruct's chat template, as its GGUF file stores it.
const SMOLLM_TEMPLATE: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

fn path() -> &'static Path {
    Path::new("tiny.gguf")
}

/// A small vocabulary: the bytes, merges that make " the", "he", "ab"/"bc" and "aĠ" (a merge
/// the GPT-2 split never lets happen), and SmolLM2's first three control tokens.
fn small_vocab() -> GgufVocab {
    GgufVocab::tiny(
        &[
            "Ġ t", "h e", "Ġt he", "a b", "b c", "a Ġ", "Ġ Ġ", "' s", "Ċ Ċ",
        ],
        &["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    )
}

fn small() -> ChatTokenizer {
    let mut vocab = small_vocab();
    // As SmolLM2: BOS <|im_start|>, EOS and padding <|im_end|>, unknown <|endoftext|>.
    let first = vocab.tokens.len() as u32 - 3;
    vocab.unk = Some(first);
    vocab.bos = Some(first + 1);
    vocab.eos = Some(first + 2);
    vocab.pad = Some(first + 2);
    vocab.chat_template = Some(SMOLLM_TEMPLATE.to_owned());
    ChatTokenizer::from_vocab(vocab, path()).unwrap()
}

fn problem(result: Result<ChatTokenizer, ModelError>) -> String {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(ModelError::Content { path, problem }) => {
            assert_eq!(path, Path::new("tiny.gguf"));
            problem
        }
        Err(other) => panic!("not a content error: {other}"),
    }
}

// --- the byte alphabet --------------------------------------------------------------------

#[test]
fn byte_alphabet_is_a_bijection_of_printable_characters() {
    let chars: Vec<char> = (0..=255u8).map(byte_to_char).collect();
    let mut sorted = chars.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 256);
    for (b, &c) in (0..=255u8).zip(&chars) {
        assert_eq!(char_to_byte(c), Some(b));
        assert!(!c.is_whitespace() && !c.is_control(), "{b:#x} -> {c:?}");
    }
    // The 68 unprintable bytes are U+0100.. in byte order: NUL, ..., space (the 33rd).
    assert_eq!(byte_to_char(0), '\u{100}');
    assert_eq!(byte_to_char(b' '), 'Ġ');
    assert_eq!(byte_to_char(0x7F), '\u{121}');
    assert_eq!(byte_to_char(0xAD), '\u{143}');
    assert_eq!(char_to_byte('\u{144}'), None);
    assert_eq!(char_to_byte('中'), None);
}

// --- encoding -----------------------------------------------------------------------------

#[test]
fn merges_apply_within_the_gpt2_split_in_rank_order() {
    let t = small();
    let ids = t.encode("the cat's the", false).unwrap();
    assert_eq!(
        t.tokens(&ids),
        ["t", "he", "Ġ", "c", "a", "t", "'s", "Ġthe"],
        "'s is its own piece; ' the' merges through Ġt + he"
    );
    // "a b" (rank 3) before "b c" (rank 4): abc -> ab c.
    let ids = t.encode("abc", false).unwrap();
    assert_eq!(t.tokens(&ids), ["ab", "c"]);
    // "aĠ" is a token, but "a" and " a" are two pieces of the split, so it never forms.
    let ids = t.encode("a a", false).unwrap();
    assert_eq!(t.tokens(&ids), ["a", "Ġ", "a"]);
    // Spaces: a run keeps its last space for the next word (\s+(?!\S)).
    let ids = t.encode("a   the", false).unwrap();
    assert_eq!(t.tokens(&ids), ["a", "ĠĠ", "Ġthe"]);
    let ids = t.encode("\n\n\n", false).unwrap();
    assert_eq!(t.tokens(&ids), ["ĊĊ", "Ċ"]);
}

#[test]
fn the_rank_of_a_merge_decides() {
    let t = ChatTokenizer::from_vocab(GgufVocab::tiny(&["b c", "a b"], &[]), path()).unwrap();
    let ids = t.encode("abc", false).unwrap();
    assert_eq!(t.tokens(&ids), ["a", "bc"]);
}

#[test]
fn special_tokens_are_recognised_whole_in_text() {
    let t = small();
    let ids = t
        .encode("<|im_start|>user\nthe<|im_end|>\n", false)
        .unwrap();
    assert_eq!(
        t.tokens(&ids),
        [
            "<|im_start|>",
            "u",
            "s",
            "e",
            "r",
            "Ċ",
            "t",
            "he",
            "<|im_end|>",
            "Ċ"
        ]
    );
    assert_eq!(ids[0], t.bos().unwrap());
    assert_eq!(ids[8], t.eos().unwrap());
    assert!(t.is_special(ids[0]) && t.is_special(ids[8]));
    // A space before a special token stays a token of its own.
    let ids = t.encode("a <|endoftext|>b", false).unwrap();
    assert_eq!(t.tokens(&ids), ["a", "Ġ", "<|endoftext|>", "b"]);
    // Not whole, not special: bytes.
    for text in ["<|im_start", "im_start|>", "<|IM_START|>", "< |im_start| >"] {
        let ids = t.encode(text, false).unwrap();
        assert!(ids.iter().all(|&i| !t.is_special(i)), "{text}");
        assert_eq!(t.decode(&ids, false), text);
    }
}

#[test]
fn smollm_adds_no_bos_or_eos_but_a_file_may_ask() {
    let t = small();
    assert_eq!(
        t.encode("the", true).unwrap(),
        t.encode("the", false).unwrap()
    );

    let mut vocab = small_vocab();
    let first = vocab.tokens.len() as u32 - 3;
    vocab.bos = Some(first + 1);
    vocab.eos = Some(first + 2);
    vocab.add_bos = true;
    vocab.add_eos = true;
    let t = ChatTokenizer::from_vocab(vocab.clone(), path()).unwrap();
    let ids = t.encode("ab", true).unwrap();
    assert_eq!(t.tokens(&ids), ["<|im_start|>", "ab", "<|im_end|>"]);
    assert_eq!(t.tokens(&t.encode("ab", false).unwrap()), ["ab"]);

    // Asked for, but the file names no BOS: nothing added (transformers drops add_bos).
    vocab.bos = None;
    let t = ChatTokenizer::from_vocab(vocab, path()).unwrap();
    assert_eq!(
        t.tokens(&t.encode("ab", true).unwrap()),
        ["ab", "<|im_end|>"]
    );
}

#[test]
fn a_token_outside_the_byte_alphabet_is_respelled_and_a_control_one_is_not_added() {
    // "€" (E2 82 AC) as the file might spell it, raw, with merges over its byte characters.
    let euro: String = "€".bytes().map(byte_to_char).collect();
    let (e2, e282) = (
        byte_to_char(0xE2).to_string(),
        format!("{}{}", byte_to_char(0xE2), byte_to_char(0x82)),
    );
    let mut vocab = GgufVocab::tiny(&[], &[]);
    vocab.tokens.push(e282.clone());
    vocab.tokens.push("€".to_owned());
    vocab.token_types.extend([1, 1]);
    vocab.merges = vec![
        format!("{e2} {}", byte_to_char(0x82)),
        format!("{e282} {}", byte_to_char(0xAC)),
    ];
    // A control token spelled outside the alphabet: llama.cpp's mislabel, not added.
    vocab.tokens.push("<…>".to_owned());
    vocab.token_types.push(TOKEN_TYPE_CONTROL);
    // A user-defined token: added, not special.
    vocab.tokens.push("<think>".to_owned());
    vocab.token_types.push(TOKEN_TYPE_USER_DEFINED);
    let t = ChatTokenizer::from_vocab(vocab, path()).unwrap();

    let ids = t.encode("€5", false).unwrap();
    assert_eq!(ids, [257, b'5' as usize]);
    assert_eq!(t.tokens(&ids[..1]), [euro]);
    assert_eq!(t.decode(&ids, false), "€5");

    let ids = t.encode("<…>", false).unwrap();
    assert!(ids.len() > 1 && !ids.iter().any(|&i| t.is_special(i)));

    let ids = t.encode("a<think>b", false).unwrap();
    assert_eq!(ids, [b'a' as usize, 259, b'b' as usize]);
    assert!(!t.is_special(259));
    assert_eq!(t.decode(&ids, true), "a<think>b");
}

#[test]
fn endoftext_and_the_named_tokens_are_special_whatever_their_type() {
    // As transformers builds it from a GGUF file of these tokens, all of type 1 (normal):
    // <|endoftext|> is GPT2Tokenizer's default special token, </s> is EOS.
    let mut vocab = GgufVocab::tiny(&["a b"], &[]);
    vocab
        .tokens
        .extend(["<|endoftext|>".to_owned(), "</s>".to_owned()]);
    vocab.token_types.extend([1, 1]);
    vocab.eos = Some(258);
    vocab.add_bos = true;
    vocab.add_eos = true;
    let t = ChatTokenizer::from_vocab(vocab, path()).unwrap();
    let ids = t.encode("a<|endoftext|>b", true).unwrap();
    assert_eq!(ids, [b'a' as usize, 257, b'b' as usize, 258]);
    assert_eq!(t.decode(&ids, true), "ab");
    assert_eq!(t.vocab_size(), 259);
}

// --- decoding and streaming ---------------------------------------------------------------

#[test]
fn decode_skips_special_tokens_when_asked() {
    let t = small();
    let ids = t.encode("<|im_start|>the<|im_end|>", false).unwrap();
    assert_eq!(t.decode(&ids, false), "<|im_start|>the<|im_end|>");
    assert_eq!(t.decode(&ids, true), "the");
    // An id no token has is left out.
    assert_eq!(
        t.decode(&[b'a' as usize, 1_000_000, b'b' as usize], false),
        "ab"
    );
    assert_eq!(t.tokens(&[b'a' as usize, 1_000_000]), ["a"]);
}

#[test]
fn a_stream_holds_back_an_unfinished_character() {
    let t = small();
    let ids = t.encode("a😀é", false).unwrap();
    assert_eq!(ids.len(), 1 + 4 + 2);
    let mut stream = t.stream(false);
    let pieces: Vec<String> = ids.iter().map(|&i| stream.push(i)).collect();
    assert_eq!(pieces, ["a", "", "", "", "😀", "", "é"]);
    assert_eq!(stream.finish(), "");

    // A byte that cannot continue the character: one U+FFFD for what came before, as decode.
    let ids = [0xF0, 0x9F, b'x' as usize, 0xFF, 0xE2];
    let mut stream = t.stream(false);
    let pieces: Vec<String> = ids.iter().map(|&i| stream.push(i)).collect();
    assert_eq!(pieces, ["", "", "\u{FFFD}x", "\u{FFFD}", ""]);
    assert_eq!(stream.finish(), "\u{FFFD}");
    assert_eq!(t.decode(&ids, false), "\u{FFFD}x\u{FFFD}\u{FFFD}");
}

/// xorshift64*: the same cases on every run, without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Any Unicode scalar value, weighted towards ASCII, whitespace and multi-byte scripts,
    /// and now and then a special token or a piece of one.
    fn text(&mut self) -> String {
        const PIECES: [&str; 10] = [
            "<|im_start|>",
            "<|im_end|>",
            "<|endoftext|>",
            "<|im_",
            "|>",
            "'s",
            " the",
            "\n\n",
            "  ",
            "\r\n",
        ];
        let len = self.below(30);
        let mut text = String::new();
        for _ in 0..len {
            let c = match self.below(10) {
                0..=2 => char::from_u32(0x20 + self.below(0x5F) as u32),
                3 => [' ', '\n', '\t', '\u{a0}', '\u{3000}', '\u{2028}', '\u{85}']
                    .get(self.below(7) as usize)
                    .copied(),
                4 => char::from_u32(self.below(0x80) as u32),
                5 => char::from_u32(0x80 + self.below(0x780) as u32),
                6 => char::from_u32(0x800 + self.below(0xF800) as u32),
                7 => char::from_u32(0x10000 + self.below(0x100000) as u32),
                _ => {
                    text.push_str(PIECES[self.below(PIECES.len() as u64) as usize]);
                    None
                }
            };
            // Surrogates are not scalar values: from_u32 refuses them.
            text.extend(c);
        }
        text
    }
}

#[test]
fn decode_of_encode_is_the_text_for_arbitrary_unicode() {
    let t = small();
    let mut rng = Rng(0x5EED_CAFE_F00D_0001);
    for case in 0..3000 {
        let text = rng.text();
        let ids = t.encode(&text, true).unwrap();
        assert_eq!(
            t.decode(&ids, false),
            text,
            "case {case}: {text:?} -> {ids:?}"
        );
        // Streaming gives the same text, and every piece is whole characters.
        let mut stream = t.stream(false);
        let mut streamed: String = ids.iter().map(|&i| stream.push(i)).collect();
        streamed.push_str(&stream.finish());
        assert_eq!(streamed, text, "case {case}");
    }
}

#[test]
fn a_stream_adds_up_to_decode_for_arbitrary_ids() {
    let t = small();
    let mut rng = Rng(0x0DD_1D5);
    for case in 0..3000 {
        let ids: Vec<usize> = (0..rng.below(12))
            .map(|_| match rng.below(4) {
                // Mostly continuation and lead bytes, to cut characters anywhere.
                0 => 0x80 + rng.below(0x40) as usize,
                1 => 0xC0 + rng.below(0x40) as usize,
                _ => rng.below(t.vocab_size() as u64 + 2) as usize,
            })
            .collect();
        for skip in [false, true] {
            let mut stream = t.stream(skip);
            let mut streamed = String::new();
            for &i in &ids {
                streamed.push_str(&stream.push(i));
            }
            streamed.push_str(&stream.finish());
            let bytes: Vec<u8> = ids
                .iter()
                .filter(|&&i| !(skip && t.is_special(i)))
                .flat_map(|&i| t.token_bytes(i).to_vec())
                .collect();
            assert_eq!(
                streamed,
                String::from_utf8_lossy(&bytes),
                "case {case}: {ids:?}"
            );
            assert_eq!(t.decode(&ids, skip), streamed, "case {case}");
        }
    }
}

// --- errors -------------------------------------------------------------------------------

#[test]
fn a_vocabulary_this_tokenizer_cannot_build_is_named() {
    let with = |change: fn(&mut GgufVocab)| {
        let mut vocab = small_vocab();
        change(&mut vocab);
        problem(ChatTokenizer::from_vocab(vocab, path()))
    };
    assert_eq!(
        with(|v| v.model = "llama".into()),
        "tokenizer.ggml.model is \"llama\": only \"gpt2\" (byte-level BPE) is supported"
    );
    assert_eq!(
        with(|v| v.pre = "qwen2".into()),
        "tokenizer.ggml.pre is \"qwen2\": not a pre-tokenizer this tokenizer knows (smollm, gpt-2, default)"
    );
    assert_eq!(
        with(|v| v.merges.push("a b c".into())),
        "tokenizer.ggml.merges[9] is \"a b c\", not two tokens separated by a space"
    );
    assert!(with(|v| v.merges.push("x y".into())).contains("xy"));
    assert_eq!(
        with(|v| v.eos = Some(9999)),
        "tokenizer.ggml.eos_token_id is 9999, not a token (there are 268)"
    );
    assert_eq!(
        with(|v| v.token_types.pop().map(drop).unwrap_or(())),
        "tokenizer.ggml.token_type has 267 entries for 268 tokens"
    );
    assert_eq!(with(|v| v.tokens.clear()), "tokenizer.ggml.tokens is empty");
    // Display starts with the file.
    let err = ChatTokenizer::from_vocab(
        GgufVocab {
            model: "t5".into(),
            ..small_vocab()
        },
        path(),
    )
    .unwrap_err();
    assert!(err
        .to_string()
        .starts_with("tiny.gguf: tokenizer.ggml.model is \"t5\""));
}

// --- the chat template --------------------------------------------------------------------

#[test]
fn smollm_template_adds_its_system_message_and_the_generation_prompt() {
    let t = small();
    let system = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";
    assert_eq!(
        t.apply_chat_template(&[Message::user("Hi")], true).unwrap(),
        format!("{system}<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    );
    assert_eq!(
        t.apply_chat_template(&[Message::system("Be brief."), Message::user("Hi")], false)
            .unwrap(),
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    );
    let ids = t.chat_ids("the").unwrap();
    assert_eq!(
        ids,
        t.encode(
            &format!("{system}<|im_start|>user\nthe<|im_end|>\n<|im_start|>assistant\n"),
            false
        )
        .unwrap()
    );
    assert_eq!(ids[0], t.bos().unwrap());
    assert_eq!(t.encode_chat(&[Message::user("the")], true).unwrap(), ids);
}

fn with_template(template: &str) -> ChatTokenizer {
    let mut vocab = small_vocab();
    let first = vocab.tokens.len() as u32 - 3;
    vocab.bos = Some(first + 1);
    vocab.eos = Some(first + 2);
    vocab.pad = None;
    vocab.chat_template = Some(template.to_owned());
    ChatTokenizer::from_vocab(vocab, path()).unwrap()
}

fn render(template: &str, messages: &[Message]) -> Result<String, String> {
    with_template(template)
        .apply_chat_template(messages, false)
        .map_err(|e| e.to_string())
}

#[test]
fn blocks_trim_their_newline_and_indentation_and_the_last_newline_goes() {
    let template = "{% for m in messages %}\n    {% if m.role == 'user' %}\n[{{ m.content }}]\n    {% endif %}\n{% endfor %}\n";
    assert_eq!(
        render(template, &[Message::user("a"), Message::user("b")]).unwrap(),
        "[a]\n[b]\n"
    );
    // keep_trailing_newline is off: the template's last newline is not output.
    assert_eq!(render("x\n", &[Message::user("a")]).unwrap(), "x");
    assert_eq!(render("x\n\n", &[Message::user("a")]).unwrap(), "x\n");
}

#[test]
fn the_template_sees_what_transformers_passes() {
    let template = "{{ bos_token }}|{{ eos_token }}|{{ pad_token is defined }}|{{ unk_token is defined }}|{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}";
    assert_eq!(
        render(template, &[Message::user("a")]).unwrap(),
        "<|im_start|>|<|im_end|>|False|False|True|True|False"
    );
    // strftime_now is there, and writes a date as Python does ("27 Nov 2025").
    let date = render("{{ strftime_now('%d %b %Y') }}", &[Message::user("a")]).unwrap();
    let parts: Vec<&str> = date.split(' ').collect();
    assert!(
        parts.len() == 3
            && parts[0].len() == 2
            && parts[1].len() == 3
            && parts[2].parse::<u32>().is_ok_and(|y| y >= 2025),
        "{date}"
    );
    let t = small();
    let mut vocab = small_vocab();
    vocab.chat_template = Some("{{ pad_token }} {{ unk_token }}".into());
    vocab.pad = t.eos().map(|i| i as u32);
    vocab.unk = t.token_id("<|endoftext|>").map(|i| i as u32);
    let t = ChatTokenizer::from_vocab(vocab, path()).unwrap();
    assert_eq!(
        t.apply_chat_template(&[Message::user("a")], true).unwrap(),
        "<|im_end|> <|endoftext|>"
    );
}

#[test]
fn raise_exception_and_other_failures_are_errors() {
    let template = "{% if messages[0]['role'] != 'system' %}{{ raise_exception('a system message first, please') }}{% endif %}ok";
    let err = render(template, &[Message::user("a")]).unwrap_err();
    assert!(
        err.starts_with("tiny.gguf: tokenizer.chat_template: "),
        "{err}"
    );
    assert!(err.contains("a system message first, please"), "{err}");
    assert_eq!(render(template, &[Message::system("s")]).unwrap(), "ok");

    // jinja2 refuses an unknown filter when it compiles the template, minijinja when it
    // renders it: an error of apply_chat_template either way.
    let err = render("{{ messages | nosuchfilter }}", &[Message::user("a")]).unwrap_err();
    assert!(err.contains("nosuchfilter"), "{err}");
    let err = render("{% if %}", &[Message::user("a")]).unwrap_err();
    assert!(
        err.contains("tokenizer.chat_template does not compile"),
        "{err}"
    );

    let err = render("{{ 'a'.nosuchmethod() }}", &[Message::user("a")]).unwrap_err();
    assert!(err.contains("nosuchmethod"), "{err}");

    let err = with_template("x")
        .apply_chat_template(&[], true)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tiny.gguf: cannot apply the chat template to an empty conversation"
    );

    let err = ChatTokenizer::from_vocab(small_vocab(), path())
        .unwrap()
        .apply_chat_template(&[Message::user("a")], true)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "tiny.gguf: the file has no tokenizer.chat_template"
    );
}

#[test]
fn python_methods_and_tojson_behave_as_in_transformers() {
    // Each expected text is what transformers 5.23 (jinja2 3.1.6) renders.
    let m = [Message::user("  Hello, World  \n")];
    let cases = [
        ("{{ messages[0].content.strip() }}", "Hello, World"),
        ("{{ messages[0].content.lstrip() }}|", "Hello, World  \n|"),
        ("{{ messages[0].content.rstrip() }}|", "  Hello, World|"),
        ("{{ 'xxaxx'.strip('x') }}", "a"),
        ("{{ messages[0].content.split() }}", "['Hello,', 'World']"),
        ("{{ 'a,b,,c'.split(',') }}", "['a', 'b', '', 'c']"),
        ("{{ 'a b  c '.split(none, 1) }}", "['a', 'b  c ']"),
        ("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }}", "True True"),
        ("{{ 'aXa'.replace('a', 'b') }} {{ 'aXa'.lower() }} {{ 'aXa'.upper() }}", "bXb axa AXA"),
        ("{{ '-'.join(['a', 'b']) }}", "a-b"),
        ("{% for k, v in messages[0].items() %}{{ k }};{% endfor %}", "role;content;"),
        ("{% for k in messages[0] %}{{ k }};{% endfor %}", "role;content;"),
        ("{{ messages[0].get('role') }} {{ messages[0].get('name', 'x') }}", "user x"),
        ("{{ messages[0] | tojson }}", "{\"role\": \"user\", \"content\": \"  Hello, World  \\n\"}"),
        ("{{ messages[0] | tojson(sort_keys=true) }}", "{\"content\": \"  Hello, World  \\n\", \"role\": \"user\"}"),
        ("{{ {'a': [1, 2.5, none, true], 'é': '<&>'} | tojson }}", "{\"a\": [1, 2.5, null, true], \"é\": \"<&>\"}"),
        ("{{ [1, {'b': []}] | tojson(indent=2) }}", "[\n  1,\n  {\n    \"b\": []\n  }\n]"),
        ("{{ [1.0, 1e16, 1.5e-7, 0.0001, 123.456] | tojson }}", "[1.0, 1e+16, 1.5e-07, 0.0001, 123.456]"),
        ("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", "1"),
        ("{{ [1, 'a', none, true] }} {{ {'a': 1} }}", "[1, 'a', None, True] {'a': 1}"),
        ("{{ 1.0 }} {{ 2.50 }} {{ 10 / 4 }} {{ 7 // 2 }}", "1.0 2.5 2.5 3"),
        ("{{ 'abc'[1:] }} {{ messages | length }} {{ 'a' ~ 1 }} {{ messages[0].content | trim }}|", "bc 1 a1 Hello, World|"),
    ];
    for (template, expected) in cases {
        assert_eq!(render(template, &m).unwrap(), expected, "{template}");
    }
}

// --- SmolLM2 against transformers ---------------------------------------------------------

fn smollm() -> Option<ChatTokenizer> {
    let Some(file) = std::env::var_os("ATTENTION_LAB_SMOLLM") else {
        eprintln!("skipped: no SmolLM2 file (set ATTENTION_LAB_SMOLLM)");
        return None;
    };
    let file = PathBuf::from(file);
    let tokenizer = Gguf::open(&file)
        .and_then(|gguf| gguf.vocab())
        .and_then(|vocab| ChatTokenizer::from_vocab(vocab, &file))
        .unwrap_or_else(|e| panic!("{e}"));
    Some(tokenizer)
}

fn golden() -> Value {
    let path = std::env::var_os("ATTENTION_LAB_SMOLLM_GOLDEN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/smollm/tokenizer.json")
        });
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every object of the golden with `messages` (a chat entry) or with `text` and `ids` (a
/// text entry), wherever it is.
fn entries<'a>(value: &'a Value, texts: &mut Vec<&'a Value>, chats: &mut Vec<&'a Value>) {
    match value {
        Value::Object(map) if map.contains_key("messages") => chats.push(value),
        Value::Object(map) if map.contains_key("text") && map.contains_key("ids") => {
            texts.push(value)
        }
        Value::Object(map) => map.values().for_each(|v| entries(v, texts, chats)),
        Value::Array(items) => items.iter().for_each(|v| entries(v, texts, chats)),
        _ => {}
    }
}

fn ids_of(value: &Value) -> Vec<usize> {
    serde_json::from_value(value.clone()).expect("a list of ids")
}

#[test]
fn smollm_matches_transformers() {
    let Some(t) = smollm() else { return };
    assert_eq!(t.vocab_size(), 49152);
    assert_eq!((t.bos(), t.eos()), (Some(1), Some(2)));
    assert_eq!(t.token(0), Some("<|endoftext|>"));
    assert_eq!(t.chat_template().as_deref(), Some(SMOLLM_TEMPLATE));
    assert!((0..17).all(|i| t.is_special(i)) && !t.is_special(17));

    let golden = golden();
    // The special tokens, when the golden lists them: {"bos": {"token", "id"}, ...}.
    if let Some(special) = golden.get("special").and_then(Value::as_object) {
        for (name, entry) in special {
            let id = entry["id"].as_u64().expect("an id") as usize;
            assert_eq!(t.token(id), entry["token"].as_str(), "{name}");
            assert!(t.is_special(id), "{name}");
            match name.as_str() {
                "bos" => assert_eq!(t.bos(), Some(id)),
                "eos" => assert_eq!(t.eos(), Some(id)),
                _ => {}
            }
        }
    }
    let (mut texts, mut chats) = (Vec::new(), Vec::new());
    entries(&golden, &mut texts, &mut chats);
    assert!(!texts.is_empty() && !chats.is_empty(), "an empty golden");
    let mut wrong = Vec::new();
    for entry in &texts {
        let text = entry["text"].as_str().expect("text");
        let ids = ids_of(&entry["ids"]);
        let plain = entry.get("ids_plain").map_or_else(|| ids.clone(), ids_of);
        let mut check = |what: &str, ok: bool, got: String| {
            if !ok {
                wrong.push(format!("{text:?}: {what}: got {got}"));
            }
        };
        let got = t.encode(text, true).unwrap();
        check("ids", got == ids, format!("{got:?}, transformers {ids:?}"));
        let got_plain = t.encode(text, false).unwrap();
        check("ids_plain", got_plain == plain, format!("{got_plain:?}"));
        if let Some(tokens) = entry.get("tokens") {
            let tokens: Vec<String> = serde_json::from_value(tokens.clone()).unwrap();
            let got = t.tokens(&ids);
            check(
                "tokens",
                got == tokens,
                format!("{got:?}, transformers {tokens:?}"),
            );
        }
        for (key, skip) in [("decoded", false), ("decoded_skip", true)] {
            if let Some(decoded) = entry.get(key).and_then(Value::as_str) {
                let got = t.decode(&ids, skip);
                check(key, got == decoded, format!("{got:?}"));
                let mut stream = t.stream(skip);
                let mut streamed: String = ids.iter().map(|&i| stream.push(i)).collect();
                streamed.push_str(&stream.finish());
                check("stream", streamed == decoded, format!("{streamed:?}"));
            }
        }
    }
    for entry in &chats {
        let messages: Vec<Message> = serde_json::from_value(entry["messages"].clone()).unwrap();
        let generation = entry["add_generation_prompt"].as_bool().unwrap_or(false);
        let text = entry["text"].as_str().expect("text");
        let got = t.apply_chat_template(&messages, generation).unwrap();
        if got != text {
            wrong.push(format!(
                "chat {messages:?}: text {got:?}, transformers {text:?}"
            ));
        }
        let ids = ids_of(&entry["ids"]);
        let got = t.encode_chat(&messages, generation).unwrap();
        if got != ids {
            wrong.push(format!(
                "chat {messages:?}: ids {got:?}, transformers {ids:?}"
            ));
        }
    }
    eprintln!(
        "SmolLM2 golden: {} texts and {} chats compared, {} differences",
        texts.len(),
        chats.len(),
        wrong.len()
    );
    assert!(
        wrong.is_empty(),
        "{} differences:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}
