//! A forward pass of all-MiniLM-L6-v2 on one 128-token sentence (6 layers, 12 heads, every
//! intermediate kept), and the tokenizer on the same text.
//!
//! `cargo bench -p attention-lab-model --bench encode`; `scripts/bench_model.py` runs it beside
//! PyTorch in float64 on the same ids. Needs the installed model ($ATTENTION_LAB_MODEL or
//! the lab's venv); without it the bench says so and measures nothing.

use std::time::Duration;

use attention_lab_model::Model;
use criterion::{criterion_group, criterion_main, Criterion};

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

fn encode(c: &mut Criterion) {
    let Ok(model) = Model::installed() else {
        eprintln!(
            "encode bench: the model is not installed (set ATTENTION_LAB_MODEL); nothing measured"
        );
        return;
    };
    let ids = sentence_ids(&model, 128);
    let mut group = c.benchmark_group("minilm");
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("forward/128", |b| {
        b.iter(|| model.encoder().forward(&ids).expect("ids fit the model"))
    });
    let text = "Each head of every layer looks at the other tokens of the sentence in its own way.";
    group.bench_function("tokenize", |b| {
        b.iter(|| model.tokenizer().encode(text).expect("tokenises"))
    });
    group.finish();
}

criterion_group!(benches, encode);
criterion_main!(benches);
