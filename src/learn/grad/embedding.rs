//! The backward pass of an embedding lookup: `X = table[ids]`.

use ndarray::Array2;

use crate::error::{AttentionError, Operand};
use crate::learn::grad::require;

/// `dL/dtable` from the token `ids` and `dx = dL/dX` (one row per token): row `i` of `dx`
/// is added to row `ids[i]` of a zero table of `vocab` rows, so a token that appears twice
/// gets both rows' gradients, and a token that does not appear gets zeros.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let dtable = embedding_backward(&[2, 0, 2], &array![[1.0], [2.0], [3.0]], 4)?;
/// assert_eq!(dtable, array![[2.0], [0.0], [4.0], [0.0]]);
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// [`AttentionError::Mismatch`] when `dx` has not one row per id;
/// [`AttentionError::OutOfRange`] when an id is `vocab` or more.
pub fn embedding_backward(
    ids: &[usize],
    dx: &Array2<f64>,
    vocab: usize,
) -> Result<Array2<f64>, AttentionError> {
    require(
        ids.len() == dx.nrows(),
        ("the token ids", &[ids.len()]),
        ("dL/dX", dx.shape()),
        "dL/dX must have one row per token id",
    )?;
    let mut dtable = Array2::zeros((vocab, dx.ncols()));
    for (&id, row) in ids.iter().zip(dx.rows()) {
        if id >= vocab {
            return Err(AttentionError::OutOfRange {
                what: "token id",
                index: id,
                table: Operand::new("embeddings", &[vocab, dx.ncols()]),
            });
        }
        let mut target = dtable.row_mut(id);
        target += &row;
    }
    Ok(dtable)
}
