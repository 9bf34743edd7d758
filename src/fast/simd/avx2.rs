//! The AVX2 and FMA path: four `f64` a vector.

use super::Lanes;
use std::arch::x86_64::*;

/// AVX2 and FMA: made only by [`Avx2::detect`], on a CPU that has both.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx2(());

impl Avx2 {
    /// The token, when this CPU has AVX2 and FMA.
    pub(crate) fn detect() -> Option<Avx2> {
        (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")).then_some(Avx2(()))
    }
}

// Every operation is inlined into a function compiled with `avx2,fma` (the kernel's
// entry), where the intrinsics become single instructions.
impl Lanes for Avx2 {
    const WIDTH: usize = 4;
    type V = __m256d;

    #[inline(always)]
    unsafe fn load(self, p: *const f64) -> __m256d {
        // SAFETY: the caller promises `p` has a vector's f64s; `self` (Avx2) proves AVX2 and FMA.
        unsafe { _mm256_loadu_pd(p) }
    }

    #[inline(always)]
    unsafe fn store(self, p: *mut f64, v: __m256d) {
        // SAFETY: the caller promises `p` has a vector's f64s; `self` (Avx2) proves AVX2 and FMA.
        unsafe { _mm256_storeu_pd(p, v) }
    }

    #[inline(always)]
    fn splat(self, x: f64) -> __m256d {
        // SAFETY: `self` is the Avx2 token, made only on a CPU with AVX2 and FMA.
        unsafe { _mm256_set1_pd(x) }
    }

    #[inline(always)]
    fn add(self, a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: `self` is the Avx2 token, made only on a CPU with AVX2 and FMA.
        unsafe { _mm256_add_pd(a, b) }
    }

    #[inline(always)]
    fn mul(self, a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: `self` is the Avx2 token, made only on a CPU with AVX2 and FMA.
        unsafe { _mm256_mul_pd(a, b) }
    }

    #[inline(always)]
    fn fma(self, a: __m256d, b: __m256d, c: __m256d) -> __m256d {
        // SAFETY: `self` is the Avx2 token, made only on a CPU with AVX2 and FMA.
        unsafe { _mm256_fmadd_pd(a, b, c) }
    }

    #[cfg(feature = "encoder")]
    #[inline(always)]
    fn div(self, a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: `self` is the Avx2 token, made only on a CPU with AVX2 and FMA.
        unsafe { _mm256_div_pd(a, b) }
    }

    #[cfg(feature = "encoder")]
    #[inline(always)]
    fn abs(self, a: __m256d) -> __m256d {
        // SAFETY: `self` is the Avx2 token, made only on a CPU with AVX2 and FMA.
        unsafe { _mm256_andnot_pd(_mm256_set1_pd(-0.0), a) }
    }

    #[cfg(feature = "encoder")]
    #[inline(always)]
    fn select_less(self, x: __m256d, bound: f64, a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: `self` is the Avx2 token, made only on a CPU with AVX2 and FMA.
        unsafe {
            let less = _mm256_cmp_pd::<_CMP_LT_OQ>(x, _mm256_set1_pd(bound));
            _mm256_blendv_pd(b, a, less)
        }
    }

    #[inline(always)]
    fn max(self, a: __m256d, b: __m256d) -> __m256d {
        // SAFETY: `self` is the Avx2 token, made only on a CPU with AVX2 and FMA.
        unsafe {
            // maxpd gives its second operand when either is NaN: put NaN back.
            let nan = _mm256_cmp_pd::<_CMP_UNORD_Q>(a, b);
            _mm256_or_pd(_mm256_max_pd(a, b), nan)
        }
    }

    #[inline(always)]
    fn zero_neg_infinity(self, a: __m256d) -> __m256d {
        // SAFETY: `self` is the Avx2 token, made only on a CPU with AVX2 and FMA.
        unsafe {
            let blocked = _mm256_cmp_pd::<_CMP_EQ_OQ>(a, _mm256_set1_pd(f64::NEG_INFINITY));
            _mm256_andnot_pd(blocked, a)
        }
    }

    #[inline(always)]
    fn clamp(self, x: __m256d, lo: f64, hi: f64) -> __m256d {
        // The bound first: maxpd and minpd give their second operand when one is NaN.
        // SAFETY: `self` is the Avx2 token, made only on a CPU with AVX2 and FMA.
        unsafe { _mm256_min_pd(_mm256_set1_pd(hi), _mm256_max_pd(_mm256_set1_pd(lo), x)) }
    }

    #[inline(always)]
    fn floor(self, x: __m256d) -> __m256d {
        // SAFETY: `self` is the Avx2 token, made only on a CPU with AVX2 and FMA.
        unsafe { _mm256_floor_pd(x) }
    }

    #[inline(always)]
    fn all_within(self, x: __m256d, bound: f64) -> bool {
        // SAFETY: `self` is the Avx2 token, made only on a CPU with AVX2 and FMA.
        unsafe {
            let abs = _mm256_andnot_pd(_mm256_set1_pd(-0.0), x);
            _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_NLE_UQ>(abs, _mm256_set1_pd(bound))) == 0
        }
    }

    #[inline(always)]
    fn scale_by(self, e: __m256d, shifted: __m256d) -> __m256d {
        // SAFETY: `self` is the Avx2 token, made only on a CPU with AVX2 and FMA.
        unsafe {
            let n = _mm256_slli_epi64::<52>(_mm256_castpd_si256(shifted));
            _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(e), n))
        }
    }
}
