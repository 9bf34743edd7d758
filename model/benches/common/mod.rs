//! What the encoder's bench and examples/encode_forward.rs share.

use attention_lab_model::Model;

/// The benchmark's sentence: cut to exactly `n` tokens, [CLS] and [SEP] included.
pub fn sentence_ids(model: &Model, n: usize) -> Vec<usize> {
    let text =
        "Each head of every layer looks at the other tokens of the sentence in its own way. "
            .repeat(n);
    let mut ids = model
        .tokenizer()
        .encode(&text)
        .expect("the text tokenises")
        .ids;
    let sep = *ids.last().expect("[SEP]");
    ids.truncate(n - 1);
    ids.push(sep);
    ids
}
