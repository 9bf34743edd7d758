//! The weight matrix of a projection `x W`: dense `f64`, or packed, as a model file keeps it
//! (4-bit or 8-bit blocks with a scale each), and turned into `f64` only a block at a time as
//! it multiplies. A real model of 135M weights is 1 GB in `f64` and 84 MB packed; every layer
//! computes the same maths either way.
//!
//! The library computes in `f64` whatever the storage: a packed matrix's [`Packed::project`]
//! gives the product with the `f64` values its blocks stand for, and [`Packed::to_dense`] is
//! that matrix itself.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use ndarray::{Array2, ArrayView2, Axis};

use crate::fast::parallel;

/// A matrix kept in a compact form that it expands to `f64` as it multiplies: the packed
/// storage of a [`Linear`]. The model crate implements it for GGUF's quantised blocks.
///
/// A matrix `W` of `dim()` rows and columns, seen as the library sees weights: a projection is
/// `x W`, an embedding table's rows are tokens.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab::linear::Packed;
///
/// // A matrix stored as f32, expanded to f64 as it is used.
/// #[derive(Debug)]
/// struct F32(Array2<f32>);
/// impl Packed for F32 {
///     fn dim(&self) -> (usize, usize) { self.0.dim() }
///     fn to_dense(&self) -> Array2<f64> { self.0.mapv(f64::from) }
///     fn bytes(&self) -> usize { self.0.len() * 4 }
/// }
/// let w = Linear::packed(F32(array![[1.0, 2.0], [3.0, 4.0]]));
/// assert_eq!(w.project(array![[1.0, 1.0]].view()), array![[4.0, 6.0]]);
/// ```
pub trait Packed: fmt::Debug + Send + Sync {
    /// The rows and columns of `W`.
    fn dim(&self) -> (usize, usize);

    /// `W` in `f64`, whole.
    fn to_dense(&self) -> Array2<f64>;

    /// The bytes the packed form holds (for a lesson's memory count).
    fn bytes(&self) -> usize;

    /// `x W`. The default expands `W` whole; an implementation expands a block at a time.
    fn project(&self, x: ArrayView2<'_, f64>) -> Array2<f64> {
        x.dot(&self.to_dense())
    }

    /// `x Wᵀ`: a tied LM head's logits, when `W` is the embedding table.
    fn project_t(&self, x: ArrayView2<'_, f64>) -> Array2<f64> {
        x.dot(&self.to_dense().t())
    }

    /// The rows `ids` of `W`, in order: an embedding table's lookup. Every id is below the
    /// rows of `W` (the caller checks).
    fn rows(&self, ids: &[usize]) -> Array2<f64> {
        self.to_dense().select(Axis(0), ids)
    }
}

/// A projection's weights, `W` in `x W`: dense, or [`Packed`].
///
/// ```
/// use attention_lab::prelude::*;
///
/// let w = Linear::from(array![[1.0, 0.0, 2.0], [0.0, 1.0, 3.0]]);
/// assert_eq!(w.dim(), (2, 3));
/// assert_eq!(w.project(array![[1.0, 1.0]].view()), array![[1.0, 1.0, 5.0]]);
/// ```
#[derive(Debug, Clone)]
pub enum Linear {
    /// `W` in `f64`.
    Dense(Array2<f64>),
    /// `W` packed; shared, not copied, when a layer is cloned.
    Packed(Arc<dyn Packed>),
}

impl Linear {
    /// Packed weights.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// # use attention_lab::linear::Packed;
    /// # #[derive(Debug)] struct Ones;
    /// # impl Packed for Ones {
    /// #     fn dim(&self) -> (usize, usize) { (2, 2) }
    /// #     fn to_dense(&self) -> Array2<f64> { Array2::ones((2, 2)) }
    /// #     fn bytes(&self) -> usize { 0 }
    /// # }
    /// let w = Linear::packed(Ones);
    /// assert_eq!(w.dense().into_owned(), Array2::<f64>::ones((2, 2)));
    /// ```
    pub fn packed(w: impl Packed + 'static) -> Linear {
        Linear::Packed(Arc::new(w))
    }

    /// The rows and columns of `W`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Linear::from(Array2::zeros((4, 6))).dim(), (4, 6));
    /// ```
    pub fn dim(&self) -> (usize, usize) {
        match self {
            Linear::Dense(w) => w.dim(),
            Linear::Packed(w) => w.dim(),
        }
    }

    /// The rows of `W` (the width of the rows it projects).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Linear::from(Array2::zeros((4, 6))).nrows(), 4);
    /// ```
    pub fn nrows(&self) -> usize {
        self.dim().0
    }

    /// The columns of `W` (the width of what it projects to).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Linear::from(Array2::zeros((4, 6))).ncols(), 6);
    /// ```
    pub fn ncols(&self) -> usize {
        self.dim().1
    }

    /// `[rows, columns]`, for an error's operand.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Linear::from(Array2::zeros((4, 6))).shape(), [4, 6]);
    /// ```
    pub fn shape(&self) -> [usize; 2] {
        let (r, c) = self.dim();
        [r, c]
    }

    /// The bytes its storage holds: 8 a value when dense.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Linear::from(Array2::zeros((4, 6))).bytes(), 192);
    /// ```
    pub fn bytes(&self) -> usize {
        match self {
            Linear::Dense(w) => w.len() * std::mem::size_of::<f64>(),
            Linear::Packed(w) => w.bytes(),
        }
    }

    /// `W` in `f64`: borrowed when dense, expanded when packed.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Linear::from(array![[1.0, 2.0]]);
    /// assert_eq!(*w.dense(), array![[1.0, 2.0]]);
    /// ```
    pub fn dense(&self) -> Cow<'_, Array2<f64>> {
        match self {
            Linear::Dense(w) => Cow::Borrowed(w),
            Linear::Packed(w) => Cow::Owned(w.to_dense()),
        }
    }

    /// `x W`; the columns of `x` must equal the rows of `W` (the caller checks).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Linear::from(array![[2.0], [3.0]]);
    /// assert_eq!(w.project(array![[1.0, 1.0]].view()), array![[5.0]]);
    /// ```
    pub fn project(&self, x: ArrayView2<'_, f64>) -> Array2<f64> {
        match self {
            Linear::Dense(w) => parallel::project(x, w, None),
            Linear::Packed(w) => w.project(x),
        }
    }

    /// `x Wᵀ`; the columns of `x` must equal the columns of `W` (the caller checks).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Linear::from(array![[2.0, 3.0]]);
    /// assert_eq!(w.project_t(array![[1.0, 1.0]].view()), array![[5.0]]);
    /// ```
    pub fn project_t(&self, x: ArrayView2<'_, f64>) -> Array2<f64> {
        match self {
            Linear::Dense(w) => x.dot(&w.t()),
            Linear::Packed(w) => w.project_t(x),
        }
    }

    /// The rows `ids` of `W`, in order; each id must be below the rows (the caller checks).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let table = Linear::from(array![[1.0, 2.0], [3.0, 4.0]]);
    /// assert_eq!(table.rows(&[1, 1, 0]), array![[3.0, 4.0], [3.0, 4.0], [1.0, 2.0]]);
    /// ```
    pub fn rows(&self, ids: &[usize]) -> Array2<f64> {
        match self {
            Linear::Dense(w) => w.select(Axis(0), ids),
            Linear::Packed(w) => w.rows(ids),
        }
    }
}

impl From<Array2<f64>> for Linear {
    fn from(w: Array2<f64>) -> Linear {
        Linear::Dense(w)
    }
}

/// Dense weights are equal by value; packed ones when they are the same storage.
impl PartialEq for Linear {
    fn eq(&self, other: &Linear) -> bool {
        match (self, other) {
            (Linear::Dense(a), Linear::Dense(b)) => a == b,
            (Linear::Packed(a), Linear::Packed(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// A dense matrix equals the same values; a packed one never compares as dense.
impl PartialEq<Array2<f64>> for Linear {
    fn eq(&self, other: &Array2<f64>) -> bool {
        matches!(self, Linear::Dense(w) if w == other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[derive(Debug)]
    struct Halves(Array2<f64>);
    impl Packed for Halves {
        fn dim(&self) -> (usize, usize) {
            self.0.dim()
        }
        fn to_dense(&self) -> Array2<f64> {
            self.0.mapv(|v| v / 2.0)
        }
        fn bytes(&self) -> usize {
            1
        }
    }

    #[test]
    fn packed_defaults_equal_the_dense_matrix_they_stand_for() {
        let stored = array![[2.0, 4.0, -6.0], [8.0, 0.5, 1.0]];
        let packed = Linear::packed(Halves(stored.clone()));
        let dense = Linear::from(stored.mapv(|v| v / 2.0));
        let x = array![[1.0, -2.0], [0.25, 3.0]];
        assert_eq!(packed.project(x.view()), dense.project(x.view()));
        let h = array![[1.0, 2.0, 3.0]];
        assert_eq!(packed.project_t(h.view()), dense.project_t(h.view()));
        assert_eq!(packed.rows(&[1, 0]), dense.rows(&[1, 0]));
        assert_eq!(packed.dense().into_owned(), *dense.dense());
        assert_ne!(packed, dense);
        assert_eq!(packed.clone(), packed);
        assert_eq!((packed.bytes(), dense.bytes()), (1, 48));
    }
}
