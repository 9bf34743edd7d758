//! NumPy-identical printing of ndarray arrays: `print(a)`, `repr(a)`, `np.set_printoptions`.
//!
//! The generic functions here only turn the array into a flat, non-generic copy; the work is done
//! by non-generic code so notebook cells do not recompile it.

use super::format::{self, NpData, Values};
use super::options::{get_printoptions, PrintOptions};
use ndarray::{ArrayBase, ArrayViewD, Data, Dimension};
use std::fmt;

mod sealed {
    use super::NpData;
    use ndarray::ArrayViewD;

    pub trait Sealed: Sized {
        fn np_data(a: ArrayViewD<'_, Self>) -> NpData;
    }
}

/// Element types NumPy prints: f64, f32, i64, i32 and bool.
///
/// ```
/// use attention_lab::prelude::*;
/// // print(np.array([1, 2], dtype=np.int32))
/// assert_eq!(array_str(&array![1i32, 2], &PrintOptions::default()), "[1 2]");
/// ```
pub trait NpElement: sealed::Sealed + Copy {}

macro_rules! np_element {
    ($t:ty, $variant:ident) => {
        impl sealed::Sealed for $t {
            fn np_data(a: ArrayViewD<'_, Self>) -> NpData {
                NpData {
                    shape: a.shape().to_vec(),
                    values: Values::$variant(a.iter().copied().collect()),
                }
            }
        }
        impl NpElement for $t {}
    };
}
np_element!(f64, F64);
np_element!(f32, F32);
np_element!(i64, I64);
np_element!(i32, I32);
np_element!(bool, Bool);

pub(super) fn np_data<A: NpElement, S: Data<Elem = A>, D: Dimension>(
    a: &ArrayBase<S, D>,
) -> NpData {
    A::np_data(a.view().into_dyn())
}

/// What `print(a)` / `str(a)` shows in NumPy.
///
/// ```
/// use attention_lab::prelude::*;
/// let a = array![[0.1, 0.2, 0.3], [1.0, 1.1, 1.2]];
/// // print(a)
/// assert_eq!(array_str(&a, &PrintOptions::default()), "[[0.1 0.2 0.3]\n [1.  1.1 1.2]]");
/// ```
pub fn array_str<A: NpElement, S: Data<Elem = A>, D: Dimension>(
    a: &ArrayBase<S, D>,
    opts: &PrintOptions,
) -> String {
    format::array_str(&np_data(a), opts)
}

/// What `repr(a)` (a Jupyter `Out` cell) shows in NumPy.
///
/// ```
/// use attention_lab::prelude::*;
/// let a = array![[1.0f32, 2.5], [3.0, 4.0]];
/// // repr(a.astype(np.float32))
/// assert_eq!(array_repr(&a, &PrintOptions::default()), "array([[1. , 2.5],\n       [3. , 4. ]], dtype=float32)");
/// ```
pub fn array_repr<A: NpElement, S: Data<Elem = A>, D: Dimension>(
    a: &ArrayBase<S, D>,
    opts: &PrintOptions,
) -> String {
    format::array_repr(&np_data(a), opts)
}

/// Python's `repr(x)` of a float, e.g. for `print(x)` of a scalar.
///
/// ```
/// use attention_lab::prelude::*;
/// // print(79.19999999999999, 1e-05, 1e16, 100.0)
/// assert_eq!(float_str(79.19999999999999), "79.19999999999999");
/// assert_eq!(float_str(1e-5), "1e-05");
/// assert_eq!(float_str(1e16), "1e+16");
/// assert_eq!(float_str(100.0), "100.0");
/// ```
pub fn float_str(x: f64) -> String {
    format::float_str(x)
}

/// Python's repr of a shape tuple, for `print(Z.shape)`.
///
/// ```
/// use attention_lab::prelude::*;
/// // print(Z.shape)
/// assert_eq!(shape_repr(array![[1.0, 2.0]].shape()), "(1, 2)");
/// assert_eq!(shape_repr(&[5]), "(5,)");
/// assert_eq!(shape_repr(&[]), "()");
/// ```
pub fn shape_repr(shape: &[usize]) -> String {
    format::shape_repr(shape)
}

/// An array captured for `Display` as `str(a)` with the process-wide options; see [`NpDisplay::np`].
///
/// ```
/// use attention_lab::prelude::*;
/// // print(np.array([True, False]))
/// let s: NpStr = array![true, false].np();
/// assert_eq!(s.to_string(), "[ True False]");
/// ```
pub struct NpStr(NpData);

/// An array captured for `Display` as `repr(a)` with the process-wide options; see [`NpDisplay::np_repr`].
///
/// ```
/// use attention_lab::prelude::*;
/// // repr(np.array([1, 2], dtype=np.int32))
/// let r: NpRepr = array![1i32, 2].np_repr();
/// assert_eq!(r.to_string(), "array([1, 2], dtype=int32)");
/// ```
pub struct NpRepr(NpData);

impl fmt::Display for NpStr {
    /// ```
    /// use attention_lab::prelude::*;
    /// // print("W:\n", np.array([[1., 2.]]))
    /// assert_eq!(format!("W:\n {}", array![[1.0, 2.0]].np()), "W:\n [[1. 2.]]");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format::array_str(&self.0, &get_printoptions()))
    }
}

impl fmt::Display for NpRepr {
    /// ```
    /// use attention_lab::prelude::*;
    /// // repr(np.array([1, 2]))
    /// assert_eq!(array![1i64, 2].np_repr().to_string(), "array([1, 2])");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format::array_repr(&self.0, &get_printoptions()))
    }
}

/// `.np()` / `.np_repr()` on any ndarray array or view: NumPy's text via `Display`.
///
/// ```
/// use attention_lab::prelude::*;
/// let wq_1 = array![[7.0, 8.0, 9.0], [15.8, 18.4, 21.0]];
/// // print("WQ_1:\n", wq_1)
/// assert_eq!(format!("WQ_1:\n {}", wq_1.np()), "WQ_1:\n [[ 7.   8.   9. ]\n [15.8 18.4 21. ]]");
/// // wq_1[0]  (a notebook Out cell)
/// assert_eq!(wq_1.row(0).np_repr().to_string(), "array([7., 8., 9.])");
/// ```
pub trait NpDisplay {
    /// `str(a)` with the current [`get_printoptions`].
    fn np(&self) -> NpStr;
    /// `repr(a)` with the current [`get_printoptions`].
    fn np_repr(&self) -> NpRepr;
}

impl<A: NpElement, S: Data<Elem = A>, D: Dimension> NpDisplay for ArrayBase<S, D> {
    fn np(&self) -> NpStr {
        NpStr(np_data(self))
    }

    fn np_repr(&self) -> NpRepr {
        NpRepr(np_data(self))
    }
}

fn evcxr_output(data: &NpData) -> String {
    let opts = get_printoptions();
    format!(
        "EVCXR_BEGIN_CONTENT text/plain\n{}\nEVCXR_END_CONTENT\nEVCXR_BEGIN_CONTENT text/html\n{}\nEVCXR_END_CONTENT\n",
        format::array_repr(data, &opts),
        format::html_table(data, &opts)
    )
}

/// evcxr shows a cell's last expression through this method: NumPy's repr as text, plus an
/// HTML table.
///
/// ```
/// use attention_lab::prelude::*;
/// // a  (last line of a Jupyter cell shows array([1., 2.]))
/// array![1.0, 2.0].evcxr_display();
/// assert!(array![1.0, 2.0].evcxr_text().starts_with("EVCXR_BEGIN_CONTENT text/plain\narray([1., 2.])\n"));
/// ```
pub trait EvcxrDisplay {
    /// Prints the evcxr content blocks to stdout.
    fn evcxr_display(&self) {
        print!("{}", self.evcxr_text());
    }
    /// The evcxr content blocks as a string.
    fn evcxr_text(&self) -> String;
}

impl<A: NpElement, S: Data<Elem = A>, D: Dimension> EvcxrDisplay for ArrayBase<S, D> {
    fn evcxr_text(&self) -> String {
        evcxr_output(&np_data(self))
    }
}
