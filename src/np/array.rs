//! An array of any dtype NumPy prints, chosen at run time (for example from a .npy file's
//! header), printed as NumPy prints it.

use super::format::{self, NpData};
use super::options::PrintOptions;
use super::print::np_data;
use ndarray::ArrayD;

/// An owned array of one of the dtypes NumPy prints and this crate formats: `float64`,
/// `float32`, `int64`, `int32` or `bool`.
///
/// Use it where the element type is known only at run time; with a known type, the generic
/// [`array_str`](super::array_str) and [`array_repr`](super::array_repr) do the same.
///
/// ```
/// use attention_lab::prelude::*;
/// // a = np.array([[1, 2]], dtype=np.int32); repr(a), a.dtype
/// let a = NpArray::from(array![[1i32, 2]].into_dyn());
/// assert_eq!(a.dtype(), "int32");
/// assert_eq!(a.shape(), &[1, 2]);
/// assert_eq!(a.array_repr(&PrintOptions::default()), "array([[1, 2]], dtype=int32)");
/// assert_eq!(a.array_str(&PrintOptions::default()), "[[1 2]]");
/// assert_eq!(a.to_f64(), array![[1.0, 2.0]].into_dyn());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum NpArray {
    /// `float64`.
    F64(ArrayD<f64>),
    /// `float32`.
    F32(ArrayD<f32>),
    /// `int64`.
    I64(ArrayD<i64>),
    /// `int32`.
    I32(ArrayD<i32>),
    /// `bool`.
    Bool(ArrayD<bool>),
}

macro_rules! from_array {
    ($t:ty, $variant:ident) => {
        impl From<ArrayD<$t>> for NpArray {
            fn from(a: ArrayD<$t>) -> Self {
                NpArray::$variant(a)
            }
        }
    };
}
from_array!(f64, F64);
from_array!(f32, F32);
from_array!(i64, I64);
from_array!(i32, I32);
from_array!(bool, Bool);

impl NpArray {
    /// NumPy's name of the dtype, as `str(a.dtype)` shows it.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// // np.array([True]).dtype
    /// assert_eq!(NpArray::from(array![true].into_dyn()).dtype(), "bool");
    /// ```
    pub fn dtype(&self) -> &'static str {
        match self {
            NpArray::F64(_) => "float64",
            NpArray::F32(_) => "float32",
            NpArray::I64(_) => "int64",
            NpArray::I32(_) => "int32",
            NpArray::Bool(_) => "bool",
        }
    }

    /// The shape, as `a.shape`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// // np.zeros((2, 3)).shape
    /// assert_eq!(NpArray::from(Array2::<f64>::zeros((2, 3)).into_dyn()).shape(), &[2, 3]);
    /// ```
    pub fn shape(&self) -> &[usize] {
        match self {
            NpArray::F64(a) => a.shape(),
            NpArray::F32(a) => a.shape(),
            NpArray::I64(a) => a.shape(),
            NpArray::I32(a) => a.shape(),
            NpArray::Bool(a) => a.shape(),
        }
    }

    /// The values as f64, as NumPy promotes them in `x @ w` with a float operand (integers
    /// are exact up to 2^53).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// // np.array([True, False]).astype(np.float64)
    /// let a = NpArray::from(array![true, false].into_dyn());
    /// assert_eq!(a.to_f64(), array![1.0, 0.0].into_dyn());
    /// ```
    pub fn to_f64(&self) -> ArrayD<f64> {
        match self {
            NpArray::F64(a) => a.clone(),
            NpArray::F32(a) => a.mapv(f64::from),
            NpArray::I64(a) => a.mapv(|v| v as f64),
            NpArray::I32(a) => a.mapv(f64::from),
            NpArray::Bool(a) => a.mapv(|b| if b { 1.0 } else { 0.0 }),
        }
    }

    /// What `print(a)` / `str(a)` shows in NumPy.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// // print(np.array([0.5, 1.0], dtype=np.float32))
    /// let a = NpArray::from(array![0.5f32, 1.0].into_dyn());
    /// assert_eq!(a.array_str(&PrintOptions::default()), "[0.5 1. ]");
    /// ```
    pub fn array_str(&self, opts: &PrintOptions) -> String {
        format::array_str(&self.np_data(), opts)
    }

    /// What `repr(a)` shows in NumPy.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// // repr(np.array([0.5, 1.0], dtype=np.float32))
    /// let a = NpArray::from(array![0.5f32, 1.0].into_dyn());
    /// assert_eq!(a.array_repr(&PrintOptions::default()), "array([0.5, 1. ], dtype=float32)");
    /// ```
    pub fn array_repr(&self, opts: &PrintOptions) -> String {
        format::array_repr(&self.np_data(), opts)
    }

    fn np_data(&self) -> NpData {
        match self {
            NpArray::F64(a) => np_data(a),
            NpArray::F32(a) => np_data(a),
            NpArray::I64(a) => np_data(a),
            NpArray::I32(a) => np_data(a),
            NpArray::Bool(a) => np_data(a),
        }
    }
}
