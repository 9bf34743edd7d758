//! A forward pass of all-MiniLM-L6-v2 on one 128-token sentence (6 layers, 12 heads): every
//! intermediate kept in new arrays (`forward/128`), and with `Encoder::forward_with` into
//! buffers kept from pass to pass, keeping everything, the weights or the last hidden state
//! (`forward_with/everything`, `/weights`, `/last_hidden_state`); and the tokenizer on the
//! same text.
//!
//! `cargo bench -p attention-lab-model --bench encode`; `scripts/bench_model.py` times the
//! same passes (examples/encode_forward.rs) beside PyTorch in float64 on the same ids. Needs the installed model ($ATTENTION_LAB_MODEL or
//! the lab's venv); without it the bench says so and measures nothing.
#![allow(missing_docs, reason = "criterion_group! writes a pub fn without docs")]

use std::time::Duration;

use attention_lab::prelude::{Encode, EncoderBuffers, Keep};
use attention_lab_model::Model;
use criterion::{criterion_group, criterion_main, Criterion};

mod common;
use common::sentence_ids;

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
    let mut buffers = EncoderBuffers::default();
    for (name, keep) in [
        ("everything", Keep::Everything),
        ("weights", Keep::Weights),
        ("last_hidden_state", Keep::LastHiddenState),
    ] {
        let options = Encode::new().keep(keep);
        group.bench_function(format!("forward_with/{name}"), |b| {
            b.iter(|| {
                let kept = model.encoder().forward_with(&ids, &options, &mut buffers);
                kept.expect("ids fit the model").last_hidden_state()[[0, 0]]
            })
        });
    }
    let text = "Each head of every layer looks at the other tokens of the sentence in its own way.";
    group.bench_function("tokenize", |b| {
        b.iter(|| model.tokenizer().encode(text).expect("tokenises"))
    });
    group.finish();
}

criterion_group!(benches, encode);
criterion_main!(benches);
