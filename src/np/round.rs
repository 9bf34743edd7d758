//! `np.round` for f64 arrays, with NumPy's exact arithmetic order.

use ndarray::{Array, ArrayBase, Data, Dimension};

/// `10^n` computed the way NumPy's C code does (a table, then repeated multiplication).
fn power_of_ten(n: u64) -> f64 {
    const P10: [f64; 9] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8];
    if n < 9 {
        return P10[n as usize];
    }
    let mut r: f64 = 1e9;
    for _ in 9..n {
        r *= 10.0;
        if r.is_infinite() {
            break;
        }
    }
    r
}

/// Rounds one value like `np.round(x, decimals)`: `rint(x * 10^d) / 10^d`, or for negative `d`
/// `rint(x / 10^-d) * 10^-d`, with ties to even.
pub(crate) fn round_scalar(x: f64, decimals: i64) -> f64 {
    if decimals >= 0 {
        let f = power_of_ten(decimals as u64);
        (x * f).round_ties_even() / f
    } else {
        let f = power_of_ten(decimals.unsigned_abs());
        (x / f).round_ties_even() * f
    }
}

/// `np.round(a, decimals)` for f64 arrays: the same bits NumPy returns, ties to even, `-0.` kept.
///
/// ```
/// use attention_lab::prelude::*;
/// let w = array![[0.12345, 2.5], [-0.0004, 0.98765]];
/// // print(np.round(w, 3))
/// assert_eq!(np::round(&w, 3).np().to_string(), "[[ 0.123  2.5  ]\n [-0.     0.988]]");
/// // np.round(2.5) == 2.0 (ties to even); np.round(1234.5, -1) == 1230.0
/// assert_eq!(np::round(&w, 0)[[0, 1]], 2.0);
/// assert_eq!(np::round(&array![1234.5], -1)[0], 1230.0);
/// ```
pub fn round<S: Data<Elem = f64>, D: Dimension>(
    a: &ArrayBase<S, D>,
    decimals: i32,
) -> Array<f64, D> {
    let d = decimals as i64;
    a.mapv(|x| round_scalar(x, d))
}
