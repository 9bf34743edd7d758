//! Random starting values the Rust way: ndarray-rand with any `rand` generator.
//!
//! These draw from `[0, 1)` like `np.random.rand`, but with rand's own stream. For NumPy's
//! exact numbers use [`RandomState`](crate::np::RandomState) instead.

use ndarray::Array2;
use ndarray_rand::rand::RngCore;
use ndarray_rand::rand_distr::StandardUniform;
use ndarray_rand::RandomExt;

/// `n` token embeddings of width `d`, uniform on `[0, 1)`, one row per token.
///
/// ```
/// use attention_lab::prelude::*;
///
/// // W = np.random.rand(3, 5)
/// let mut rng = StdRng::seed_from_u64(0);
/// let x = random_embeddings(3, 5, &mut rng);
/// assert_eq!(x.dim(), (3, 5));
/// assert!(x.iter().all(|&v| (0.0..1.0).contains(&v)));
/// assert_eq!(x, random_embeddings(3, 5, &mut StdRng::seed_from_u64(0)));
/// ```
pub fn random_embeddings(n: usize, d: usize, rng: &mut dyn RngCore) -> Array2<f64> {
    Array2::random_using((n, d), StandardUniform, rng)
}

/// A `d_in x d_out` projection matrix (W_Q, W_K, W_V or W_O), uniform on `[0, 1)`.
///
/// ```
/// use attention_lab::prelude::*;
///
/// // WQ = np.random.rand(5, 3)
/// let mut rng = StdRng::seed_from_u64(42);
/// let wq = random_projection(5, 3, &mut rng);
/// assert_eq!(wq.dim(), (5, 3));
/// assert!(wq.iter().all(|&v| (0.0..1.0).contains(&v)));
/// ```
pub fn random_projection(d_in: usize, d_out: usize, rng: &mut dyn RngCore) -> Array2<f64> {
    Array2::random_using((d_in, d_out), StandardUniform, rng)
}
