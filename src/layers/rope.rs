//! Rotary position embeddings (RoPE), as transformers' Llama applies them ("rotate half"):
//! each query and key row of a head is turned, pair by pair, by angles that grow with its
//! position, so that `q_m . k_n` depends on the positions only through `m - n`.
//!
//! Dimension `i` of the first half pairs with dimension `i + d/2`; the pair turns by
//! `p * theta^(-2i/d)` at position `p`: `x * cos + rotate_half(x) * sin`, where
//! `rotate_half([x1, x2]) = [-x2, x1]`.

use std::ops::Range;

use ndarray::{Array1, Array2, ArrayView2, Axis};

use crate::error::{AttentionError, Operand};

/// The rotation of one head's rows: its width `d` (even) and the inverse frequencies
/// `theta^(-2i/d)`, `i < d/2`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rope {
    theta: f64,
    inv_freq: Array1<f64>,
}

impl Rope {
    /// RoPE for heads `head_dim` wide with base `theta` (Llama's `rope_theta`, 10000 in the
    /// original).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let rope = Rope::new(4, 10000.0)?;
    /// assert_eq!(rope.inv_freq(), &array![1.0, 0.01]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Setting`] when `head_dim` is zero or odd (the dimensions turn in
    /// pairs), or `theta` is not a finite number above 0.
    pub fn new(head_dim: usize, theta: f64) -> Result<Rope, AttentionError> {
        if head_dim == 0 || head_dim % 2 == 1 {
            return Err(AttentionError::Setting {
                name: "head_dim",
                value: head_dim.to_string(),
                rule: "RoPE turns a head's dimensions in pairs: it must be even and above 0",
            });
        }
        if !(theta > 0.0 && theta.is_finite()) {
            return Err(AttentionError::Setting {
                name: "theta",
                value: theta.to_string(),
                rule: "RoPE's base must be a finite number above 0",
            });
        }
        let d = head_dim as f64;
        let inv_freq =
            Array1::from_shape_fn(head_dim / 2, |i| 1.0 / theta.powf((2 * i) as f64 / d));
        Ok(Rope { theta, inv_freq })
    }

    /// The base theta.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Rope::new(2, 500.0)?.theta(), 500.0);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// The width of a head's rows.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Rope::new(6, 10000.0)?.head_dim(), 6);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn head_dim(&self) -> usize {
        2 * self.inv_freq.len()
    }

    /// The inverse frequencies `theta^(-2i/d)`, one per pair of dimensions.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Rope::new(2, 10000.0)?.inv_freq(), &array![1.0]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn inv_freq(&self) -> &Array1<f64> {
        &self.inv_freq
    }

    /// The cosines and sines for `positions`, one row per position, `head_dim` wide (each
    /// pair's angle twice, as Llama's `cat((freqs, freqs))`).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let (cos, sin) = Rope::new(2, 10000.0)?.angles(0..2);
    /// assert_eq!(cos.row(0), array![1.0, 1.0]);
    /// assert_eq!(sin.row(1), array![1f64.sin(), 1f64.sin()]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn angles(&self, positions: Range<usize>) -> (Array2<f64>, Array2<f64>) {
        let half = self.inv_freq.len();
        let angle = |(p, i): (usize, usize)| (positions.start + p) as f64 * self.inv_freq[i % half];
        let shape = (positions.len(), 2 * half);
        (
            Array2::from_shape_fn(shape, |at| angle(at).cos()),
            Array2::from_shape_fn(shape, |at| angle(at).sin()),
        )
    }

    /// Rotates `x`, whose rows are tokens at positions `start, start + 1, ...` and whose
    /// columns are `heads` heads of `head_dim` side by side (`X W_Q` of a layer); each head
    /// turns on its own.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let rope = Rope::new(2, 10000.0)?;
    /// // position 1 turns the pair (1, 0) by 1 radian
    /// let turned = rope.rotate(&array![[1.0, 0.0]], 1)?;
    /// assert_eq!(turned, array![[1f64.cos(), 1f64.sin()]]);
    /// // the same rotation at position 0 is the identity
    /// assert_eq!(rope.rotate(&array![[3.0, 4.0]], 0)?, array![[3.0, 4.0]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of `x` are not a whole number of heads.
    pub fn rotate<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        start: usize,
    ) -> Result<Array2<f64>, AttentionError> {
        let x = x.into();
        let (cos, sin) = self.angles(start..start + x.nrows());
        self.rotate_with(x, &cos, &sin)
    }

    /// [`Rope::rotate`] with its tables of angles given (from [`Rope::angles`] of `x`'s
    /// positions): a pass that turns several matrices at the same positions makes them once.
    pub(crate) fn rotate_with(
        &self,
        x: ArrayView2<'_, f64>,
        cos: &Array2<f64>,
        sin: &Array2<f64>,
    ) -> Result<Array2<f64>, AttentionError> {
        let d = self.head_dim();
        if !x.ncols().is_multiple_of(d) {
            return Err(AttentionError::mismatch(
                Operand::new("X", x.shape()),
                Operand::new("head_dim", &[d]),
                "RoPE turns whole heads: the columns of X must be a multiple of head_dim",
            ));
        }
        let half = d / 2;
        let mut out = Array2::zeros(x.raw_dim());
        for (h, head) in x.axis_chunks_iter(Axis(1), d).enumerate() {
            let mut turned = out.slice_mut(ndarray::s![.., h * d..(h + 1) * d]);
            for ((t, i), value) in turned.indexed_iter_mut() {
                let partner = if i < half {
                    -head[[t, i + half]]
                } else {
                    head[[t, i - half]]
                };
                *value = head[[t, i]] * cos[[t, i]] + partner * sin[[t, i]];
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    /// The property RoPE is made for: turned at positions m and n, a query and a key score
    /// the same for every pair of positions with the same offset m - n.
    #[test]
    fn a_score_depends_on_the_offset_only() {
        let rope = Rope::new(6, 100.0).unwrap();
        let q = array![[0.3, -1.2, 0.7, 2.0, 0.1, -0.4]];
        let k = array![[1.1, 0.5, -0.9, 0.2, 1.7, -0.3]];
        let score = |m: usize, n: usize| {
            let qm = rope.rotate(&q, m).unwrap();
            let kn = rope.rotate(&k, n).unwrap();
            qm.row(0).dot(&kn.row(0))
        };
        for offset in 0..4 {
            let first = score(offset, 0);
            for n in 1..20 {
                assert!(
                    (score(n + offset, n) - first).abs() < 1e-12,
                    "offset {offset} at {n}"
                );
            }
        }
        assert!(
            (score(3, 0) - score(0, 0)).abs() > 1e-3,
            "a different offset scores differently"
        );
    }

    #[test]
    fn rotations_keep_lengths_and_refuse_odd_widths() {
        let rope = Rope::new(4, 10000.0).unwrap();
        let x = array![[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]];
        let turned = rope.rotate(&x, 9).unwrap();
        for h in 0..2 {
            let norm = |a: &Array2<f64>| -> f64 {
                a.slice(ndarray::s![0, h * 4..h * 4 + 4])
                    .iter()
                    .map(|v| v * v)
                    .sum()
            };
            assert!((norm(&turned) - norm(&x)).abs() < 1e-12);
        }
        assert!(Rope::new(3, 10000.0).is_err());
        assert!(Rope::new(4, 0.0).is_err());
        assert!(rope.rotate(&array![[1.0, 2.0]], 0).is_err());
    }
}
