//! The random inputs of a check: a seed per student (from `JUPYTERHUB_USER`), and matrices
//! drawn from it with NumPy's `default_rng`, so one student gets the same inputs on every run.

use ndarray::Array2;

use crate::np::{default_rng, Generator};

/// The seed when no student is named (`JUPYTERHUB_USER` unset or empty).
///
/// ```
/// use attention_lab::check::{seed_for, DEFAULT_SEED};
/// assert_eq!(seed_for(None), DEFAULT_SEED);
/// ```
pub const DEFAULT_SEED: u64 = 43;

/// The seed of a student's inputs: a stable hash (64-bit FNV-1a) of the user name, or
/// [`DEFAULT_SEED`] for `None` or an empty name. The same name gives the same seed on every
/// machine and every run.
///
/// ```
/// use attention_lab::check::seed_for;
/// assert_eq!(seed_for(Some("ada")), seed_for(Some("ada")));
/// assert_ne!(seed_for(Some("ada")), seed_for(Some("alan")));
/// assert_eq!(seed_for(Some("")), seed_for(None));
/// ```
pub fn seed_for(user: Option<&str>) -> u64 {
    match user {
        Some(name) if !name.is_empty() => name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        }),
        _ => DEFAULT_SEED,
    }
}

/// The seed of this notebook's student: [`seed_for`] the hub's `JUPYTERHUB_USER`.
///
/// ```
/// use attention_lab::check::{seed_for, student_seed};
/// let user = std::env::var("JUPYTERHUB_USER").ok();
/// assert_eq!(student_seed(), seed_for(user.as_deref()));
/// ```
pub fn student_seed() -> u64 {
    seed_for(std::env::var("JUPYTERHUB_USER").ok().as_deref())
}

/// Matrices drawn from one seed.
pub(super) struct Draw(Generator);

impl Draw {
    pub(super) fn new(seed: u64) -> Draw {
        Draw(default_rng(seed))
    }

    fn uniform(&mut self, rows: usize, cols: usize) -> Array2<f64> {
        self.0
            .random((rows, cols))
            .expect("a check's matrices are small")
    }

    /// Uniform on `[-1, 1)`.
    pub(super) fn matrix(&mut self, rows: usize, cols: usize) -> Array2<f64> {
        self.uniform(rows, cols) * 2.0 - 1.0
    }

    /// Uniform on `[0.5, 1) * scale`: products of these are large and never cancel, so that
    /// their scores overflow a naive softmax's `exp`.
    pub(super) fn positive(&mut self, rows: usize, cols: usize, scale: f64) -> Array2<f64> {
        (self.uniform(rows, cols) * 0.5 + 0.5) * scale
    }

    /// A random `d x d` orthogonal matrix (Gram-Schmidt on a random one): its inverse is its
    /// transpose, so the concatenation behind `Z W_O` can be read back as `(Z W_O) W_O^T`.
    pub(super) fn orthogonal(&mut self, d: usize) -> Array2<f64> {
        let mut w = self.matrix(d, d);
        for i in 0..d {
            for j in 0..i {
                let dot = w.row(i).dot(&w.row(j));
                let done = w.row(j).to_owned();
                w.row_mut(i).scaled_add(-dot, &done);
            }
            let norm = w.row(i).dot(&w.row(i)).sqrt();
            w.row_mut(i).mapv_inplace(|x| x / norm);
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_orthogonal_matrix_times_its_transpose_is_the_identity() {
        let w = Draw::new(7).orthogonal(5);
        let eye = w.dot(&w.t());
        assert!(eye
            .indexed_iter()
            .all(|((i, j), &x)| (x - f64::from(u8::from(i == j))).abs() < 1e-12));
    }
}
