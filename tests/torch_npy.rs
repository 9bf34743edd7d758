//! A PyTorch layer saved as .npy files, one per `state_dict` entry (scripts/torch_goldens.py,
//! `tests/data/torch/npy/`), loaded with `MultiHead::from_torch_weights` and run on the batch
//! saved beside it: torch's output and weights to 1e-12.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

mod common;

use std::path::{Path, PathBuf};

use attention_lab::prelude::*;
use common::assert_close;
use ndarray::{Dimension, Ix1};
use ndarray_npy::{read_npy, ReadableElement};

fn folder(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/torch/npy")
        .join(name)
}

/// `dir/NAME.npy`, or `None` when torch did not save that entry.
fn load<A: ReadableElement, D: Dimension>(dir: &Path, name: &str) -> Option<Array<A, D>> {
    let path = dir.join(format!("{name}.npy"));
    path.exists()
        .then(|| read_npy(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

fn must<A: ReadableElement, D: Dimension>(dir: &Path, name: &str) -> Array<A, D> {
    load(dir, name).unwrap_or_else(|| panic!("{}: no {name}.npy", dir.display()))
}

/// The layer, from the arrays its state_dict holds under their own names.
fn layer(dir: &Path, h: usize) -> MultiHead {
    let in_proj = match load(dir, "in_proj_weight") {
        Some(packed) => InProj::Packed(packed),
        None => InProj::Separate {
            q_proj_weight: must(dir, "q_proj_weight"),
            k_proj_weight: must(dir, "k_proj_weight"),
            v_proj_weight: must(dir, "v_proj_weight"),
        },
    };
    let weights = TorchWeights {
        in_proj,
        in_proj_bias: load::<f64, Ix1>(dir, "in_proj_bias"),
        out_proj_weight: must(dir, "out_proj.weight"),
        out_proj_bias: load::<f64, Ix1>(dir, "out_proj.bias"),
    };
    MultiHead::from_torch_weights(&weights, h).unwrap()
}

/// Runs the saved layer on its saved batch and compares with torch's saved results.
fn check(name: &str, h: usize) -> MultiHead {
    let dir = folder(name);
    let version = std::fs::read_to_string(dir.join("torch_version.txt")).unwrap();
    assert!(version.starts_with("2."), "{name}: torch {version}");
    let layer = layer(&dir, h);
    let (x, key, value): (Array3<f64>, Array3<f64>, Array3<f64>) =
        (must(&dir, "query"), must(&dir, "key"), must(&dir, "value"));
    let padding: Array2<bool> = must(&dir, "key_padding_mask");
    let mask = load::<bool, _>(&dir, "attn_mask").map(|m| Mask::from_blocked(&m));
    let out = layer
        .forward_cross_batch(
            &x,
            &key,
            &value,
            &Attend::new().key_padding(&padding).mask(mask.as_ref()),
        )
        .unwrap();
    assert_close(name, &out.result(), &must(&dir, "attn_output"));
    assert_close(
        &format!("{name} weights per head"),
        &out.weights(),
        &must(&dir, "attn_output_weights"),
    );
    assert_close(
        &format!("{name} averaged weights"),
        &out.averaged_weights(),
        &must(&dir, "attn_output_weights_averaged"),
    );
    layer
}

#[test]
fn a_packed_layer_saved_by_torch_runs_as_torch_runs_it() {
    let layer = check("self", 2);
    // in_proj_weight (3E x E) gives square projections: self-attention.
    assert!(layer
        .heads()
        .iter()
        .all(|h| h.wk().nrows() == h.wq().nrows()));
}

#[test]
fn a_cross_layer_saved_by_torch_runs_as_torch_runs_it() {
    let layer = check("cross", 2);
    // q_proj_weight, k_proj_weight (E x kdim = 3) and v_proj_weight (E x vdim = 5).
    let head = &layer.heads()[0];
    assert_eq!(
        (head.wq().dim(), head.wk().dim(), head.wv().dim()),
        ((4, 2), (3, 2), (5, 2))
    );
}
