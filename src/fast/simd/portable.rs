//! The baseline path: arrays of four `f64`, vectorised by the compiler as the target allows.

use super::Lanes;

/// Arrays of four, for CPUs without AVX2 and FMA (and other architectures).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Portable;

impl Lanes for Portable {
    const WIDTH: usize = 4;
    type V = [f64; 4];

    #[inline(always)]
    unsafe fn load(self, p: *const f64) -> [f64; 4] {
        // SAFETY: the caller's promise.
        unsafe { p.cast::<[f64; 4]>().read_unaligned() }
    }

    #[inline(always)]
    unsafe fn store(self, p: *mut f64, v: [f64; 4]) {
        // SAFETY: the caller's promise.
        unsafe { p.cast::<[f64; 4]>().write_unaligned(v) }
    }

    #[inline(always)]
    fn splat(self, x: f64) -> [f64; 4] {
        [x; 4]
    }

    #[inline(always)]
    fn add(self, a: [f64; 4], b: [f64; 4]) -> [f64; 4] {
        std::array::from_fn(|i| a[i] + b[i])
    }

    #[inline(always)]
    fn mul(self, a: [f64; 4], b: [f64; 4]) -> [f64; 4] {
        std::array::from_fn(|i| a[i] * b[i])
    }

    #[inline(always)]
    fn fma(self, a: [f64; 4], b: [f64; 4], c: [f64; 4]) -> [f64; 4] {
        std::array::from_fn(|i| fma_portable(a[i], b[i], c[i]))
    }

    #[cfg(feature = "encoder")]
    #[inline(always)]
    fn div(self, a: [f64; 4], b: [f64; 4]) -> [f64; 4] {
        std::array::from_fn(|i| a[i] / b[i])
    }

    #[cfg(feature = "encoder")]
    #[inline(always)]
    fn abs(self, a: [f64; 4]) -> [f64; 4] {
        a.map(f64::abs)
    }

    #[cfg(feature = "encoder")]
    #[inline(always)]
    fn select_less(self, x: [f64; 4], bound: f64, a: [f64; 4], b: [f64; 4]) -> [f64; 4] {
        std::array::from_fn(|i| if x[i] < bound { a[i] } else { b[i] })
    }

    #[inline(always)]
    fn max(self, a: [f64; 4], b: [f64; 4]) -> [f64; 4] {
        std::array::from_fn(|i| nan_max(a[i], b[i]))
    }

    #[inline(always)]
    fn zero_neg_infinity(self, a: [f64; 4]) -> [f64; 4] {
        a.map(|x| if x == f64::NEG_INFINITY { 0.0 } else { x })
    }

    #[inline(always)]
    fn clamp(self, x: [f64; 4], lo: f64, hi: f64) -> [f64; 4] {
        x.map(|x| x.clamp(lo, hi))
    }

    #[inline(always)]
    fn floor(self, x: [f64; 4]) -> [f64; 4] {
        x.map(f64::floor)
    }

    #[inline(always)]
    fn all_within(self, x: [f64; 4], bound: f64) -> bool {
        x.iter().all(|x| x.abs() <= bound)
    }

    #[inline(always)]
    fn scale_by(self, e: [f64; 4], shifted: [f64; 4]) -> [f64; 4] {
        std::array::from_fn(|i| {
            f64::from_bits(e[i].to_bits().wrapping_add(shifted[i].to_bits() << 52))
        })
    }
}

/// `a b + c`: one instruction where the target has fused multiply-adds (every aarch64, x86
/// built for FMA); elsewhere a multiply and an add, as a software fused multiply-add is slow.
#[inline(always)]
fn fma_portable(a: f64, b: f64, c: f64) -> f64 {
    if cfg!(any(target_arch = "aarch64", target_feature = "fma")) {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// The larger of `a` and `b`, NaN if either is NaN.
#[inline(always)]
fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a > b {
        a
    } else {
        b
    }
}
