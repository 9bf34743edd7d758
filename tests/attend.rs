//! The options value `Attend`: its causal flag is the causal mask to the bit, its softmax
//! replaces the heads' own, and an option a call cannot use is an error naming it.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab::prelude::*;

fn layer(seed: u64) -> (Array2<f64>, MultiHead) {
    let mut rng = StdRng::seed_from_u64(seed);
    let x = random_embeddings(7, 8, &mut rng).unwrap();
    let mut w = || random_projection(8, 8, &mut rng).unwrap();
    let (wq, wk, wv, wo) = (w(), w(), w(), w());
    (x, MultiHead::split(&wq, &wk, &wv, 2, Some(wo)).unwrap())
}

fn tiny() -> Streaming {
    Streaming {
        query_block: 2,
        key_block: 3,
        threads: 1,
        ..Streaming::default()
    }
}

#[test]
fn causal_is_the_causal_mask_to_the_bit() {
    let (x, layer) = layer(1);
    let causal = Mask::causal(7);
    let by_mask = Attend::new().mask(&causal);
    assert_eq!(
        layer.forward(&x, &Attend::new().causal()).unwrap(),
        layer.forward(&x, &by_mask).unwrap()
    );
    assert_eq!(
        layer
            .forward(&x, &Attend::new().causal().streaming(tiny()))
            .unwrap(),
        layer.forward(&x, &by_mask.streaming(tiny())).unwrap()
    );
    let head = &layer.heads()[0];
    assert_eq!(
        head.forward(&x, &Attend::new().causal()).unwrap(),
        head.forward(&x, &by_mask).unwrap()
    );
    // Cross-attention: the last queries of the keys' sequence (a KV cache).
    let new = x.slice(s![4.., ..]);
    let over = Mask::causal_over(3, 7).unwrap();
    assert_eq!(
        layer
            .forward_cross(new, &x, &x, &Attend::new().causal())
            .unwrap(),
        layer
            .forward_cross(new, &x, &x, &Attend::new().mask(&over))
            .unwrap()
    );
    let (q, k) = (x.slice(s![.., ..4]), x.slice(s![.., 4..]));
    assert_eq!(
        scaled_dot_product_attention(q, k, &x, &Attend::new().causal()).unwrap(),
        scaled_dot_product_attention(q, k, &x, &by_mask).unwrap()
    );
}

#[test]
fn causal_with_a_mask_blocks_where_either_blocks() {
    let (x, layer) = layer(2);
    let padding = Mask::key_padding(7, &[true, false, false, true, false, false, false]);
    let both = Mask::causal(7).and(&padding).unwrap();
    assert_eq!(
        layer
            .forward(&x, &Attend::new().mask(&padding).causal())
            .unwrap(),
        layer.forward(&x, &Attend::new().mask(&both)).unwrap()
    );
}

#[test]
fn batch_causal_and_key_padding_are_the_masks_of_each_item() {
    let (x, layer) = layer(3);
    let batch = ndarray::stack(Axis(0), &[x.view(), (&x * 0.5).view()]).unwrap();
    let padding = array![
        [false, false, false, false, false, false, false],
        [false, false, false, false, true, true, true]
    ];
    let attend = Attend::new().causal().key_padding(&padding);
    let out = layer.forward_batch(&batch, &attend).unwrap();
    for (b, item) in out.items().iter().enumerate() {
        let mask = Mask::causal(7)
            .and(&Mask::key_padding(7, padding.row(b)))
            .unwrap();
        let one = layer.forward(batch.index_axis(Axis(0), b), &Attend::new().mask(&mask));
        assert_eq!(item, &one.unwrap());
    }
    let streamed: Array3<f64> = layer
        .forward_batch(&batch, &attend.streaming(tiny()))
        .unwrap();
    let causal = Mask::causal(7);
    let by_item = Attend::new().mask(&causal).key_padding(&padding);
    assert_eq!(
        streamed,
        layer
            .forward_batch(&batch, &by_item.streaming(tiny()))
            .unwrap()
    );
}

#[test]
fn the_call_softmax_replaces_the_heads_own() {
    let (x, layer) = layer(4);
    let naive = layer.clone().with_softmax(Softmax::Naive);
    let attend = Attend::new().softmax(Softmax::Naive);
    assert_eq!(
        layer.forward(&x, &attend).unwrap(),
        naive.forward(&x, &Attend::new()).unwrap()
    );
    assert_eq!(
        layer.forward(&x, &attend.streaming(tiny())).unwrap(),
        naive.forward(&x, &Attend::new().streaming(tiny())).unwrap()
    );
    // And back: a naive layer called with the stable softmax.
    let stable = Attend::new().softmax(Softmax::Stable);
    assert_eq!(
        naive.forward(&x, &stable).unwrap(),
        layer.forward(&x, &Attend::new()).unwrap()
    );
}

#[test]
fn streamed_attention_takes_a_mask() {
    let (x, _) = layer(5);
    let (q, k) = (x.slice(s![.., ..4]), x.slice(s![.., 4..]));
    let blocked = Mask::causal(7)
        .and(&Mask::key_padding(7, &[true; 7]))
        .unwrap();
    let full = scaled_dot_product_attention(q, k, &x, &Attend::new().mask(&blocked)).unwrap();
    let z: Array2<f64> =
        scaled_dot_product_attention(q, k, &x, &Attend::new().mask(&blocked).streaming(tiny()))
            .unwrap();
    assert_eq!(z, full.output); // every key blocked: zeros on both paths
    let wrong = Mask::causal(6);
    let message = |streaming: bool| {
        let attend = Attend::new().mask(&wrong);
        let err = if streaming {
            scaled_dot_product_attention(q, k, &x, &attend.streaming(tiny())).unwrap_err()
        } else {
            scaled_dot_product_attention(q, k, &x, &attend).unwrap_err()
        };
        err.to_string()
    };
    assert_eq!(message(true), message(false));
    assert_eq!(
        message(false),
        "the mask is 6x6 but the scores (queries x keys) is 7x7: the mask must have one row per \
         query and one column per key"
    );
}

#[test]
fn key_padding_on_one_sequence_is_an_error_naming_it() {
    let (x, layer) = layer(6);
    let padding = Array2::from_elem((1, 7), false);
    let attend = Attend::new().key_padding(&padding);
    let want = "Attend::key_padding does not apply to this call: key padding has one row per \
                batch item, so it goes with forward_batch and forward_cross_batch; for one \
                sequence, give Mask::key_padding to Attend::mask";
    assert_eq!(layer.forward(&x, &attend).unwrap_err().to_string(), want);
    let streamed = attend.streaming(tiny());
    assert_eq!(layer.forward(&x, &streamed).unwrap_err().to_string(), want);
    let head = &layer.heads()[0];
    assert_eq!(
        head.forward_cross(&x, &x, &x, &attend)
            .unwrap_err()
            .to_string(),
        want
    );
    let err = scaled_dot_product_attention(&x, &x, &x, &streamed).unwrap_err();
    assert_eq!(err.to_string(), want);
}

#[test]
fn causal_with_more_queries_than_keys_or_a_mask_of_another_shape() {
    let (x, layer) = layer(7);
    let err = layer
        .forward_cross(
            &x,
            x.slice(s![..3, ..]),
            x.slice(s![..3, ..]),
            &Attend::new().causal(),
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        Mask::causal_over(7, 3).unwrap_err().to_string()
    );
    let wrong = Mask::causal(3);
    let err = layer
        .forward(&x, &Attend::new().mask(&wrong).causal())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        layer
            .forward(&x, &Attend::new().mask(&wrong))
            .unwrap_err()
            .to_string()
    );
}
