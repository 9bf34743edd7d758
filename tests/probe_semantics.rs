//! What an intervened run means, on random small models (no goldens: properties that fail
//! when the semantics are wrong):
//! - an intervention whose edits all name a position recomputes only the rows from the first
//!   of them (the rows before being the clean run's, the keys and values of the clean run's
//!   prefix reused), and equals the full recomputation of those layers to 1e-12;
//! - direct logit attribution of a patched or ablated run sums to its logit, and a residual
//!   patch's difference is a part of its own, not the block's before;
//! - an encoder's mean ablation on a padded run averages the real tokens only;
//! - a KV-cached continuation is no clean run or source to intervene on;
//! - the logit lens at one position is the whole lens's rows there;
//! - many interventions shared among the cores give each one's run, in order.
#![cfg(feature = "decoder")]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab::decoder::ResidualPatch;
use attention_lab::prelude::*;

const TOL: f64 = 1e-12;

/// A decoder of `blocks` blocks, 3 query heads of 2 sharing one key/value head (E = 6), a
/// vocabulary of 11; its weights normal draws of NumPy's RandomState(seed). Block 1 has a
/// sliding window of 3, so that a recomputed row's mask is checked against its prefix too.
fn decoder(blocks: usize, seed: u32) -> Decoder {
    let (heads, kv_heads, d) = (3, 1, 2);
    let e = heads * d;
    let mut rs = RandomState::new(seed);
    let mut w = |rows: usize, cols: usize| -> Array2<f64> {
        rs.randn((rows, cols)).unwrap() / (rows as f64).sqrt()
    };
    let rms = |w: &mut dyn FnMut(usize, usize) -> Array2<f64>| {
        Norm::Rms(RmsNorm::new(w(1, e).row(0).to_owned() + 1.0, 1e-6).unwrap())
    };
    let blocks = (0..blocks)
        .map(|l| {
            let rope = Rope::new(d, 10000.0).unwrap();
            let (q, kv) = (w(e, heads * d), (w(e, kv_heads * d), w(e, kv_heads * d)));
            let wo = w(heads * d, e);
            let mut attention =
                GroupedAttention::new(q, kv.0, kv.1, wo, heads, kv_heads, rope).unwrap();
            if l == 1 {
                attention = attention.with_window(3).unwrap();
            }
            let mlp = Mlp::SwiGlu(SwiGlu::new(w(e, 2 * e), w(e, 2 * e), w(2 * e, e)).unwrap());
            DecoderBlock::new(rms(&mut w), attention, rms(&mut w), mlp).unwrap()
        })
        .collect();
    let embed = w(11, e) * (e as f64).sqrt();
    let head = LmHead::Untied(w(e, 11));
    let norm = rms(&mut w);
    Decoder::new(embed, blocks, norm, head).unwrap()
}

/// The largest of `|a - b| / max(|b|, 1)` over two runs' every intermediate.
fn worst(a: &DecoderOutput, b: &DecoderOutput) -> f64 {
    let mut pairs: Vec<(&Array2<f64>, &Array2<f64>)> = vec![
        (&a.embedded, &b.embedded),
        (&a.hidden, &b.hidden),
        (&a.logits, &b.logits),
    ];
    assert_eq!(a.blocks.len(), b.blocks.len());
    for (x, y) in a.blocks.iter().zip(&b.blocks) {
        let (p, q) = (&x.attention, &y.attention);
        pairs.extend([(&p.q, &q.q), (&p.z, &q.z), (&p.output, &q.output)]);
        pairs.extend([(&x.hidden, &y.hidden), (&x.output, &y.output)]);
        pairs.extend(p.weights.iter().zip(&q.weights));
    }
    pairs
        .into_iter()
        .map(|(x, y)| {
            assert_eq!(x.dim(), y.dim());
            let error = |(x, y): (&f64, &f64)| (x - y).abs() / y.abs().max(1.0);
            x.iter().zip(y).map(error).fold(0.0, f64::max)
        })
        .fold(0.0, f64::max)
}

/// Every kind of edit at one position `p` of layer `l` (head `h`), alone and mixed.
fn edits_at<'a>(l: usize, h: usize, p: usize, source: &'a DecoderOutput) -> Vec<Intervention<'a>> {
    let at = |edit| Edit::Head {
        layer: l,
        head: h,
        edit,
        position: Some(p),
    };
    let plain = Intervention::new().source(source);
    vec![
        plain.clone().patch_head_at(l, h, p),
        plain.clone().edit(at(HeadEdit::Zero)),
        plain.clone().edit(at(HeadEdit::Mean)),
        plain.clone().edit(at(HeadEdit::Scale(-2.0))),
        plain.clone().patch_residual(l, p),
        plain.clone().patch_residual(l + 1, p),
        plain
            .patch_residual(l + 1, p + 1)
            .patch_head_at(l, h, p + 2)
            .edit(at(HeadEdit::Scale(0.5))),
    ]
}

#[test]
fn edits_at_a_position_recompute_its_rows_only_and_equal_the_full_recomputation() {
    let tokens = [3, 1, 4, 1, 5, 9, 2, 6, 5];
    let corrupted_tokens = [3, 1, 4, 7, 5, 0, 2, 8, 5];
    let mut worst_seen: f64 = 0.0;
    for seed in 0..3 {
        let decoder = decoder(3, seed);
        let clean = decoder.forward(&tokens).unwrap();
        let corrupted = decoder.forward(&corrupted_tokens).unwrap();
        for (l, h, p) in [(0, 0, 0), (0, 2, 4), (1, 1, 3), (2, 0, 5), (2, 2, 6)] {
            for fast in edits_at(l, h, p, &corrupted) {
                // Scaling a head by 1 at every position changes nothing but makes every row
                // recomputed: the full recomputation from the same layer (the last block's
                // for the stream after it).
                let first = fast.first_layer().unwrap().min(decoder.blocks().len() - 1);
                let full = fast.clone().scale_head(first, 0, 1.0);
                let (ours, theirs) = (
                    decoder.intervene(&clean, &fast).unwrap(),
                    decoder.intervene(&clean, &full).unwrap(),
                );
                let error = worst(&ours, &theirs);
                assert!(error <= TOL, "seed {seed}, {fast:?}: {error:e}");
                worst_seen = worst_seen.max(error);
                assert_eq!(ours.patches.len(), theirs.patches.len(), "{fast:?}");
                // The rows before the first position edited are the clean run's, as they were.
                for (o, c) in ours.blocks.iter().zip(&clean.blocks) {
                    let above = ndarray::s![..p, ..];
                    assert_eq!(o.output.slice(above), c.output.slice(above), "{fast:?}");
                    assert_eq!(o.attention.z.slice(above), c.attention.z.slice(above));
                }
            }
        }
    }
    eprintln!("position-limited edits against the full recomputation: worst {worst_seen:e}");
}

#[test]
fn a_recomputed_row_reads_the_prefix_from_the_clean_run() {
    // With the clean run's rows before the edited position made NaN at every layer from the
    // edit's on (its streams entering those layers too), only the rows from the position on
    // are recomputed: its logits there stay finite, and those above stay NaN as given.
    let decoder = decoder(3, 7);
    let tokens = [2, 7, 1, 8, 2, 8];
    let clean = decoder.forward(&tokens).unwrap();
    let corrupted = decoder.forward(&[2, 7, 1, 8, 3, 8]).unwrap();
    let (l, p) = (1, 4);
    let mut poisoned = clean.clone();
    for block in &mut poisoned.blocks[l..] {
        block
            .attention
            .q
            .slice_mut(ndarray::s![..p, ..])
            .fill(f64::NAN);
        block.hidden.slice_mut(ndarray::s![..p, ..]).fill(f64::NAN);
    }
    poisoned
        .logits
        .slice_mut(ndarray::s![..p, ..])
        .fill(f64::NAN);
    let probe = Intervention::new()
        .patch_head_at(l, 0, p)
        .source(&corrupted);
    let ours = decoder.intervene(&poisoned, &probe).unwrap();
    let theirs = decoder.intervene(&clean, &probe).unwrap();
    assert!(ours.logits.row(p - 1).iter().all(|x| x.is_nan()));
    assert_eq!(
        ours.logits.slice(ndarray::s![p.., ..]),
        theirs.logits.slice(ndarray::s![p.., ..])
    );
}

/// The parts' sum against the logit, relative.
fn unsummed(parts: &Attribution) -> f64 {
    (parts.total() - parts.logit).abs() / parts.logit.abs().max(1.0)
}

#[test]
fn attribution_of_a_patched_or_ablated_run_sums_to_its_logit() {
    let decoder = decoder(3, 11);
    let tokens = [4, 0, 3, 3, 9, 1];
    let clean = decoder.forward(&tokens).unwrap();
    let corrupted = decoder.forward(&[4, 0, 6, 3, 10, 1]).unwrap();
    let layers = decoder.blocks().len();
    let last = tokens.len() - 1;
    let mut probes = vec![
        Intervention::new().zero_head(1, 2),
        Intervention::new().mean_head(0, 1).scale_head(2, 0, 3.0),
        Intervention::new().patch_head(2, 1).source(&corrupted),
    ];
    for l in 0..=layers {
        for p in [2, last] {
            probes.push(Intervention::new().patch_residual(l, p).source(&corrupted));
        }
    }
    for probe in &probes {
        let run = decoder.intervene(&clean, probe).unwrap();
        for (position, token) in [(last, 5), (last, 2), (2, 7)] {
            let parts = decoder.attribute(&run, position, token).unwrap();
            assert!(
                unsummed(&parts) <= TOL,
                "{probe:?} at {position}: {parts:?}"
            );
        }
    }
    let zeroed = decoder
        .intervene(&clean, &Intervention::new().zero_head(1, 2))
        .unwrap();
    assert_eq!(
        decoder.attribute(&zeroed, last, 5).unwrap().heads[1][2],
        0.0
    );
}

#[test]
fn a_residual_patch_is_a_part_of_its_own() {
    // Patching the stream entering layer l changes no part below l but through the final
    // norm's scale, which the patch changes: below l, each part of the patched run is the
    // clean run's times one ratio (the scales'). The patch's difference is its own part.
    let decoder = decoder(3, 5);
    let tokens = [1, 2, 3, 4, 5];
    let clean = decoder.forward(&tokens).unwrap();
    let corrupted = decoder.forward(&[1, 2, 9, 4, 10]).unwrap();
    let (p, token) = (4, 6);
    let before = decoder.attribute(&clean, p, token).unwrap();
    assert_eq!(before.patched, 0.0);
    for l in 0..=decoder.blocks().len() {
        let probe = Intervention::new().patch_residual(l, p).source(&corrupted);
        let run = decoder.intervene(&clean, &probe).unwrap();
        let stream = |run: &DecoderOutput| run.residual(l).unwrap().row(p).to_owned();
        let want = ResidualPatch {
            layer: l,
            position: p,
            delta: stream(&corrupted) - stream(&clean),
        };
        assert_eq!(run.patches, vec![want], "layer {l}");
        let after = decoder.attribute(&run, p, token).unwrap();
        assert!(after.patched.abs() > 1e-6, "layer {l}: {after:?}");
        let ratio = after.embedded / before.embedded;
        let mut below = vec![(after.embedded, before.embedded)];
        for m in 0..l {
            below.push((after.mlps[m], before.mlps[m]));
            let heads = after.heads[m].iter().zip(&before.heads[m]);
            below.extend(heads.map(|(a, b)| (*a, *b)));
        }
        for (a, b) in below {
            let error = (a - b * ratio).abs() / a.abs().max(1.0);
            assert!(
                error <= TOL,
                "layer {l}: {a} against {b} x {ratio} ({error:e})"
            );
        }
        assert!(unsummed(&after) <= TOL, "layer {l}: {after:?}");
    }
    // Patched from itself, the difference is nothing.
    let probe = Intervention::new().patch_residual(1, p).source(&clean);
    let same = decoder.intervene(&clean, &probe).unwrap();
    assert_eq!(decoder.attribute(&same, p, token).unwrap().patched, 0.0);
}

#[test]
fn a_kv_cached_continuation_is_no_run_to_intervene_on() {
    let decoder = decoder(2, 3);
    let mut cache = decoder.cache();
    decoder.forward_cached(&[1, 2, 3], &mut cache).unwrap();
    // As many tokens as the clean run, but after three others.
    let continuation = decoder.forward_cached(&[4, 5], &mut cache).unwrap();
    let clean = decoder.forward(&[4, 5]).unwrap();
    let message = |e: AttentionError| e.to_string();
    let as_clean = decoder.intervene(&continuation, &Intervention::new().zero_head(0, 0));
    let as_source = decoder.intervene(
        &clean,
        &Intervention::new().patch_head(1, 0).source(&continuation),
    );
    for (who, result) in [("the clean run", as_clean), ("the source run", as_source)] {
        let e = message(result.unwrap_err());
        assert!(
            e.starts_with(&format!("{who}'s weights in block 0 is 2x5")),
            "{e}"
        );
        assert!(e.contains("KV-cached continuation"), "{e}");
    }
    let e = message(decoder.attribute(&continuation, 0, 0).unwrap_err());
    assert!(e.contains("KV-cached continuation"), "{e}");
    assert!(decoder.logit_lens(&continuation).is_err());
}

/// An encoder of one layer of 2 heads of 2 (d = 4), a vocabulary of 6; weights from
/// RandomState(seed).
fn encoder(seed: u32) -> Encoder {
    let d = 4;
    let mut rs = RandomState::new(seed);
    let mut w = |rows: usize, cols: usize| -> Array2<f64> {
        rs.randn((rows, cols)).unwrap() / (rows as f64).sqrt()
    };
    let norm = || LayerNorm::new(Array1::ones(d), Array1::zeros(d), 1e-12).unwrap();
    let embeddings = Embeddings::new(w(6, d), w(8, d), w(1, d), norm()).unwrap();
    let (wq, wk, wv, wo) = (w(d, d), w(d, d), w(d, d), w(d, d));
    let attention = MultiHead::split(&wq, &wk, &wv, 2, Some(wo)).unwrap();
    let ff = FeedForward::new(w(d, 8), Array1::zeros(8), w(8, d), Array1::zeros(d)).unwrap();
    let layer = EncoderLayer::new(attention, norm(), ff, norm()).unwrap();
    Encoder::new(embeddings, vec![layer.clone(), layer]).unwrap()
}

#[test]
fn an_encoders_mean_ablation_averages_its_real_tokens_only() {
    let encoder = encoder(2);
    let padded = [false, false, false, true, true];
    let ids = [1, 4, 2, 0, 0];
    let clean = encoder.forward_padded(&ids, &[0; 5], &padded).unwrap();
    let (layer, head) = (1, 1);
    let run = encoder
        .intervene_padded(&clean, &padded, &Intervention::new().mean_head(layer, head))
        .unwrap();
    let z = &clean.layers[layer].attention.heads[head].z;
    let mean = z.slice(ndarray::s![..3, ..]).mean_axis(Axis(0)).unwrap();
    let ablated = &run.layers[layer].attention.heads[head].z;
    for row in ablated.rows() {
        let error = (&row - &mean)
            .mapv(f64::abs)
            .fold(0.0, |a: f64, &b| a.max(b));
        assert!(error <= TOL, "{row} against the real tokens' mean {mean}");
    }
    // The padded tokens' rows would move the mean: the check can fail.
    let every = z.mean_axis(Axis(0)).unwrap();
    assert!((&every - &mean).iter().any(|x| x.abs() > 1e-6));
}

#[test]
fn the_logit_lens_at_a_position_is_the_lens_row_there() {
    let decoder = decoder(3, 13);
    let run = decoder.forward(&[5, 3, 0, 8]).unwrap();
    let lens = decoder.logit_lens(&run).unwrap();
    for position in 0..4 {
        let at = decoder.logit_lens_at(&run, position).unwrap();
        assert_eq!(at.nrows(), lens.len());
        for (row, whole) in at.rows().into_iter().zip(&lens) {
            let error = (&row - &whole.row(position))
                .mapv(f64::abs)
                .fold(0.0, |a: f64, &b| a.max(b));
            assert!(error <= TOL, "position {position}: {error:e}");
        }
    }
    let e = decoder.logit_lens_at(&run, 4).unwrap_err().to_string();
    assert!(e.starts_with("position 4 is out of range"), "{e}");
}

#[test]
fn interventions_shared_among_the_cores_give_each_ones_run_in_order() {
    // Large enough that the runs are shared among the threads.
    let decoder = decoder(3, 17);
    let tokens: Vec<usize> = (0..40).map(|i| (i * 7) % 11).collect();
    let clean = decoder.forward(&tokens).unwrap();
    let corrupted = decoder
        .forward(&tokens.iter().map(|t| (t + 1) % 11).collect::<Vec<_>>())
        .unwrap();
    // 15 x 18 runs of 40 tokens through 3 blocks of width 6: past parallel's least work.
    let mut each = Vec::new();
    for (l, _) in (0..3).flat_map(|l| std::iter::repeat_n(l, 15).map(move |r| (l, r))) {
        for h in 0..3 {
            each.push(
                Intervention::new()
                    .patch_head_at(l, h, 39)
                    .source(&corrupted),
            );
            each.push(Intervention::new().mean_head(l, h));
        }
    }
    let runs = decoder.intervene_each(&clean, &each, Clone::clone).unwrap();
    for (probe, run) in each.iter().zip(&runs) {
        assert_eq!(run, &decoder.intervene(&clean, probe).unwrap(), "{probe:?}");
    }
    let bad = [
        Intervention::new().zero_head(0, 0),
        Intervention::new().zero_head(5, 0),
    ];
    let e = decoder
        .intervene_each(&clean, &bad, |_| ())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("layer 5 is out of range"), "{e}");
}
