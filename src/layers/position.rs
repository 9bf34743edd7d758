//! Sinusoidal positional encoding, as in "Attention Is All You Need" (section 3.5).

use ndarray::Array2;

/// The `tokens x d_model` sinusoidal encoding: `PE[pos, 2i] = sin(pos / 10000^(2i/d_model))`
/// and `PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model))`. Add it to the embeddings `X` so that
/// attention can tell positions apart (without it a layer is permutation-equivariant).
///
/// With an odd `d_model` the last column is a sine.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let pe = positional_encoding(3, 4);
/// assert_eq!(pe.row(0), array![0.0, 1.0, 0.0, 1.0]); // sin 0, cos 0, ...
/// assert_eq!(pe[[1, 0]], 1f64.sin());
/// assert_eq!(pe[[2, 3]], (2.0 / 100.0f64).cos()); // 10000^(2/4) = 100
/// ```
pub fn positional_encoding(tokens: usize, d_model: usize) -> Array2<f64> {
    Array2::from_shape_fn((tokens, d_model), |(pos, j)| {
        // The pair (2i, 2i+1) shares one frequency.
        let two_i = (j - j % 2) as f64;
        let angle = pos as f64 / 10000f64.powf(two_i / d_model as f64);
        if j % 2 == 0 {
            angle.sin()
        } else {
            angle.cos()
        }
    })
}
