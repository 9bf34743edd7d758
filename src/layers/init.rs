//! Random starting values the Rust way: ndarray-rand with any `rand` generator.
//!
//! These draw from `[0, 1)` like `np.random.rand`, but with rand's own stream. For NumPy's
//! exact numbers use [`RandomState`](crate::np::RandomState) instead.

use crate::error::{reserve_matrix, AttentionError, Operand};
use ndarray::Array2;
use ndarray_rand::rand::{Rng, RngCore};
use ndarray_rand::rand_distr::StandardUniform;

/// `n` token embeddings of width `d`, uniform on `[0, 1)`, one row per token.
///
/// ```
/// use attention_lab::prelude::*;
///
/// // W = np.random.rand(3, 5)
/// let mut rng = StdRng::seed_from_u64(0);
/// let x = random_embeddings(3, 5, &mut rng)?;
/// assert_eq!(x.dim(), (3, 5));
/// assert!(x.iter().all(|&v| (0.0..1.0).contains(&v)));
/// assert_eq!(x, random_embeddings(3, 5, &mut StdRng::seed_from_u64(0))?);
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// [`AttentionError::TooLarge`] naming X and its shape when `n x d` values do not fit in
/// memory, e.g. `random_embeddings(usize::MAX, 2, ..)`.
pub fn random_embeddings(
    n: usize,
    d: usize,
    rng: &mut dyn RngCore,
) -> Result<Array2<f64>, AttentionError> {
    uniform("X (random_embeddings)", n, d, rng)
}

/// A `d_in x d_out` projection matrix (W_Q, W_K, W_V or W_O), uniform on `[0, 1)`.
///
/// ```
/// use attention_lab::prelude::*;
///
/// // WQ = np.random.rand(5, 3)
/// let mut rng = StdRng::seed_from_u64(42);
/// let wq = random_projection(5, 3, &mut rng)?;
/// assert_eq!(wq.dim(), (5, 3));
/// assert!(wq.iter().all(|&v| (0.0..1.0).contains(&v)));
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// [`AttentionError::TooLarge`] naming the projection and its shape when `d_in x d_out`
/// values do not fit in memory, e.g. `random_projection(1 << 62, 4, ..)`.
pub fn random_projection(
    d_in: usize,
    d_out: usize,
    rng: &mut dyn RngCore,
) -> Result<Array2<f64>, AttentionError> {
    uniform("W (random_projection)", d_in, d_out, rng)
}

/// `rows x cols` uniform draws in row-major order (the order ndarray-rand's `random_using`
/// draws them), after checking that the memory can be had instead of aborting.
fn uniform(
    name: &str,
    rows: usize,
    cols: usize,
    rng: &mut dyn RngCore,
) -> Result<Array2<f64>, AttentionError> {
    let mut values = reserve_matrix(name, rows, cols)?;
    values.extend((0..rows * cols).map(|_| rng.sample::<f64, _>(StandardUniform)));
    Array2::from_shape_vec((rows, cols), values).map_err(|_| AttentionError::TooLarge {
        matrix: Operand::new(name, &[rows, cols]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray_rand::rand::rngs::StdRng;
    use ndarray_rand::rand::SeedableRng;
    use ndarray_rand::RandomExt;

    #[test]
    fn draws_the_stream_ndarray_rand_draws() {
        for (rows, cols, seed) in [(3, 5, 7), (1, 1, 0), (4, 0, 1), (0, 3, 2), (17, 9, 42)] {
            let ours = random_projection(rows, cols, &mut StdRng::seed_from_u64(seed)).unwrap();
            let theirs = Array2::<f64>::random_using(
                (rows, cols),
                StandardUniform,
                &mut StdRng::seed_from_u64(seed),
            );
            assert_eq!(ours, theirs);
        }
    }

    #[test]
    fn huge_shapes_are_errors_naming_the_matrix_and_shape() {
        let mut rng = StdRng::seed_from_u64(0);
        let err = random_embeddings(usize::MAX, 2, &mut rng).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "X (random_embeddings) would be {}x2, {} bytes: more than memory can hold",
                usize::MAX,
                usize::MAX as u128 * 16
            )
        );
        let err = random_projection(1 << 62, 4, &mut rng).unwrap_err();
        assert!(err
            .to_string()
            .starts_with("W (random_projection) would be 4611686018427387904x4, "));
        // Fits the address space, but not any machine's memory: the allocator says no.
        let err = random_projection(1 << 40, 1 << 10, &mut rng).unwrap_err();
        assert!(matches!(err, AttentionError::TooLarge { .. }), "{err}");
    }
}
