//! One vector for a whole sentence: the mean of its tokens' rows (padding left out), scaled
//! to length 1, as sentence-transformers' `Pooling` (mean) and `Normalize` modules compute it.

use ndarray::{Array1, ArrayView1, ArrayView2};

use crate::error::{AttentionError, Operand};

/// The mean of the rows of `hidden` whose `padded` entry is false; zeros when every row is
/// padded (sentence-transformers divides by at least 1e-9).
///
/// ```
/// use attention_lab::prelude::*;
///
/// let hidden = array![[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]];
/// assert_eq!(mean_pool(&hidden, &[false, false, true])?, array![2.0, 3.0]);
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// [`AttentionError::Mismatch`] when `padded` does not have one entry per row.
pub fn mean_pool<'a>(
    hidden: impl Into<ArrayView2<'a, f64>>,
    padded: &[bool],
) -> Result<Array1<f64>, AttentionError> {
    let hidden = hidden.into();
    if padded.len() != hidden.nrows() {
        return Err(AttentionError::mismatch(
            Operand::new("the hidden states", hidden.shape()),
            Operand::row("the padding", padded.len()),
            "the padding must have one entry per row of the hidden states",
        ));
    }
    let mut sum = Array1::zeros(hidden.ncols());
    for (row, _) in hidden.rows().into_iter().zip(padded).filter(|(_, &p)| !p) {
        sum += &row;
    }
    let count = padded.iter().filter(|&&p| !p).count() as f64;
    Ok(sum / count.max(1e-9))
}

/// `v / max(|v|, 1e-12)`: length 1 (PyTorch's `F.normalize`), a zero vector stays zero.
///
/// ```
/// use attention_lab::prelude::*;
///
/// assert_eq!(l2_normalize(&array![3.0, 4.0]), array![0.6, 0.8]);
/// assert_eq!(l2_normalize(&array![0.0, 0.0]), array![0.0, 0.0]);
/// ```
pub fn l2_normalize<'a>(v: impl Into<ArrayView1<'a, f64>>) -> Array1<f64> {
    let v = v.into();
    let norm = v.dot(&v).sqrt();
    v.to_owned() / norm.max(1e-12)
}

/// The cosine of the angle between `a` and `b`: `a . b / (|a| |b|)`; 1 for the same
/// direction. For two sentence embeddings (already length 1) it is their dot product.
///
/// ```
/// use attention_lab::prelude::*;
///
/// assert!((cosine_similarity(&array![1.0, 0.0], &array![2.0, 0.0])? - 1.0).abs() < 1e-15);
/// assert_eq!(cosine_similarity(&array![1.0, 0.0], &array![0.0, 3.0])?, 0.0);
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// [`AttentionError::Mismatch`] when `a` and `b` differ in length.
pub fn cosine_similarity<'a>(
    a: impl Into<ArrayView1<'a, f64>>,
    b: impl Into<ArrayView1<'a, f64>>,
) -> Result<f64, AttentionError> {
    let (a, b) = (a.into(), b.into());
    if a.len() != b.len() {
        return Err(AttentionError::mismatch(
            Operand::row("a", a.len()),
            Operand::row("b", b.len()),
            "the two vectors must have the same length",
        ));
    }
    Ok(l2_normalize(a).dot(&l2_normalize(b)))
}
