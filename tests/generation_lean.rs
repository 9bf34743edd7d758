//! Generation's lean steps (issue 44, point 6) against the teaching path, bit for bit
//! (`to_bits()`): over random small decoders (RMSNorm or LayerNorm, SwiGLU or GELU, tied or
//! untied heads, MHA, GQA or MQA, blocks with RoPEs of different bases, sliding windows) and
//! random prompts, greedy and sampled, `Decoder::generate`'s ids and
//! `Decoder::generation_with`'s ids, logits, hidden rows and weights equal
//! `Decoder::generation`'s (every intermediate kept, the RoPE tables and masks made per layer);
//! and each step's logits equal the full recomputation's last row to 1e-12 (a step on the
//! cache and the full pass multiply differently shaped matrices, today as before).
#![cfg(feature = "decoder")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab::prelude::*;
use proptest::prelude::*;

/// The shape of a random decoder.
#[derive(Debug, Clone)]
struct Shape {
    vocab: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    blocks: usize,
    layer_norm: bool,
    gelu: bool,
    tied: bool,
    window: Option<usize>,
    seed: u32,
}

fn shapes() -> impl Strategy<Value = Shape> {
    (
        (
            2usize..12,
            prop_oneof![
                Just((1, 1)),
                Just((2, 1)),
                Just((2, 2)),
                Just((4, 2)),
                Just((4, 1))
            ],
        ),
        (prop_oneof![Just(2usize), Just(4)], 0usize..4),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        (proptest::option::of(1usize..5), any::<u32>()),
    )
        .prop_map(
            |(
                (vocab, (heads, kv_heads)),
                (head_dim, blocks),
                (layer_norm, gelu, tied),
                (window, seed),
            )| Shape {
                vocab,
                heads,
                kv_heads,
                head_dim,
                blocks,
                layer_norm,
                gelu,
                tied,
                window,
                seed,
            },
        )
}

fn samplings() -> impl Strategy<Value = Sampling> {
    prop_oneof![
        Just(Sampling::Greedy),
        (0.3..2.0f64, proptest::option::of(1usize..6), any::<u32>()).prop_map(
            |(temperature, top_k, seed)| Sampling::Sample {
                temperature,
                top_k,
                seed
            }
        ),
    ]
}

/// A decoder of `shape`, its weights normal draws of NumPy's RandomState(seed); E is the
/// query heads' width, the feed-forward twice that. Block `l`'s RoPE base is 10000 / (l + 1),
/// so that blocks do not share one table; every other block has the window, if any.
fn decoder(shape: &Shape) -> Decoder {
    let (e, d) = (shape.heads * shape.head_dim, shape.head_dim);
    let mut rs = RandomState::new(shape.seed);
    let mut w = |rows: usize, cols: usize| -> Array2<f64> {
        rs.randn((rows, cols)).unwrap() / (rows as f64).sqrt()
    };
    let norm = |w: &mut dyn FnMut(usize, usize) -> Array2<f64>| match shape.layer_norm {
        true => Norm::Layer(
            LayerNorm::new(
                w(1, e).row(0).to_owned() + 1.0,
                w(1, e).row(0).to_owned(),
                1e-5,
            )
            .unwrap(),
        ),
        false => Norm::Rms(RmsNorm::new(w(1, e).row(0).to_owned() + 1.0, 1e-6).unwrap()),
    };
    let blocks = (0..shape.blocks)
        .map(|l| {
            let rope = Rope::new(d, 10000.0 / (l + 1) as f64).unwrap();
            let (kv, h) = (shape.kv_heads * d, shape.heads * d);
            let mut attention = GroupedAttention::new(
                w(e, h),
                w(e, kv),
                w(e, kv),
                w(h, e),
                shape.heads,
                shape.kv_heads,
                rope,
            )
            .unwrap();
            if let (Some(window), 0) = (shape.window, l % 2) {
                attention = attention.with_window(window).unwrap();
            }
            let mlp = match shape.gelu {
                true => Mlp::Gelu(
                    FeedForward::new(
                        w(e, 2 * e),
                        w(1, 2 * e).row(0).to_owned(),
                        w(2 * e, e),
                        w(1, e).row(0).to_owned(),
                    )
                    .unwrap(),
                ),
                false => Mlp::SwiGlu(SwiGlu::new(w(e, 2 * e), w(e, 2 * e), w(2 * e, e)).unwrap()),
            };
            DecoderBlock::new(norm(&mut w), attention, norm(&mut w), mlp).unwrap()
        })
        .collect();
    let embed = w(shape.vocab, e) * (e as f64).sqrt();
    let head = match shape.tied {
        true => LmHead::Tied,
        false => LmHead::Untied(w(e, shape.vocab)),
    };
    let final_norm = norm(&mut w);
    Decoder::new(embed, blocks, final_norm, head).unwrap()
}

fn bits<'a>(values: impl IntoIterator<Item = &'a f64>) -> Vec<u64> {
    values.into_iter().map(|v| v.to_bits()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn lean_generation_is_the_teaching_paths_bit_for_bit(
        shape in shapes(),
        prompt_seed in proptest::collection::vec(any::<usize>(), 1..7),
        new_tokens in 0usize..9,
        sampling in samplings(),
    ) {
        let decoder = decoder(&shape);
        let prompt: Vec<usize> = prompt_seed.iter().map(|id| id % shape.vocab).collect();

        // The teaching path: every intermediate, the tables and masks made per layer.
        let (prefill, steps) = decoder.generation(&prompt, sampling).unwrap();
        let mut logits = vec![bits(prefill.logits.row(0))];
        let mut ids = Vec::new();
        let mut weights = Vec::new();
        let mut hidden = vec![bits(prefill.hidden.row(prompt.len() - 1))];
        for step in steps.take(new_tokens) {
            let step = step.unwrap();
            ids.push(step.id);
            logits.push(bits(step.output.logits.row(0)));
            hidden.push(bits(step.output.hidden.row(0)));
            let layers = step.output.blocks.iter();
            weights.push(layers.map(|b| b.attention.weights.iter().map(bits).collect()).collect::<Vec<Vec<_>>>());
        }

        // Decoder::generate: lean steps, ids alone.
        prop_assert_eq!(&decoder.generate(&prompt, new_tokens, sampling).unwrap(), &ids);

        // The lean iterator, keeping the last position, then every head's weights too.
        for keep in [Keep::LastHiddenState, Keep::Weights] {
            let (prefill, steps) = decoder.generation_with(&prompt, sampling, keep).unwrap();
            prop_assert_eq!(&bits(prefill.logits().unwrap()), &logits[0]);
            prop_assert_eq!(&bits(prefill.hidden().unwrap()), &hidden[0]);
            for (i, step) in steps.take(new_tokens).enumerate() {
                let step = step.unwrap();
                prop_assert_eq!(step.id, ids[i]);
                prop_assert_eq!(&bits(step.output.logits().unwrap()), &logits[i + 1], "{:?} step {}", keep, i);
                prop_assert_eq!(&bits(step.output.hidden().unwrap()), &hidden[i + 1]);
                for (l, layer) in weights[i].iter().enumerate() {
                    for (h, w) in layer.iter().enumerate() {
                        let lean = step.output.weights(l, h).map(bits);
                        match keep {
                            Keep::Weights => prop_assert_eq!(lean.as_ref(), Some(w)),
                            _ => prop_assert_eq!(lean, None),
                        }
                    }
                }
            }
        }

        // Each step's logits are the full recomputation's last row, to 1e-12 relative: a step
        // on the cache multiplies one row where the full pass multiplies them all, so the two
        // (the teaching step's as much as the lean one's) may differ in the last bits.
        let mut sequence = prompt.clone();
        for (i, &id) in ids.iter().enumerate() {
            sequence.push(id);
            let full = decoder.forward(&sequence).unwrap();
            for (a, &b) in full.logits.row(sequence.len() - 1).iter().zip(&logits[i + 1]) {
                let b = f64::from_bits(b);
                prop_assert!((a - b).abs() <= 1e-12 * a.abs().max(1.0), "full pass at {}: {} {}", sequence.len(), a, b);
            }
        }
    }
}

#[test]
fn a_lean_pass_refuses_what_the_teaching_pass_refuses() {
    let shape = Shape {
        vocab: 5,
        heads: 2,
        kv_heads: 1,
        head_dim: 2,
        blocks: 2,
        layer_norm: false,
        gelu: false,
        tied: true,
        window: None,
        seed: 0,
    };
    let decoder = decoder(&shape);
    let mut cache = decoder.cache();
    for keep in [Keep::LastHiddenState, Keep::Weights, Keep::Everything] {
        let err = decoder.forward_with(&[1, 5], &mut cache, keep).unwrap_err();
        assert!(
            matches!(err, AttentionError::OutOfRange { index: 5, .. }),
            "{err}"
        );
        assert!(cache.is_empty(), "an error caches nothing");
        let foreign = &mut KvCache::new(&[4]);
        assert!(matches!(
            decoder.forward_with(&[1], foreign, keep),
            Err(AttentionError::Mismatch { .. })
        ));
    }
    let err = decoder
        .forward_with(&[], &mut cache, Keep::LastHiddenState)
        .unwrap_err();
    assert!(
        matches!(err, AttentionError::Setting { name: "ids", .. }),
        "{err}"
    );
    assert!(decoder.generate(&[], 3, Sampling::Greedy).is_err());
    assert!(decoder
        .generation_with(&[9], Sampling::Greedy, Keep::LastHiddenState)
        .is_err());
    // No token with Keep::Everything is the teaching pass's: no rows.
    let none = decoder
        .forward_with(&[], &mut cache, Keep::Everything)
        .unwrap();
    assert_eq!((none.logits(), none.hidden()), (None, None));
}
