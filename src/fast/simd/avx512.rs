//! The AVX-512F path: eight `f64` a vector.

use super::Lanes;
use std::arch::x86_64::*;

/// AVX-512F: made only by [`Avx512::detect`], on a CPU that has it (and so AVX2 and FMA).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Avx512(());

impl Avx512 {
    /// The token, when this CPU has AVX-512F, AVX2 and FMA.
    pub(crate) fn detect() -> Option<Avx512> {
        (is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma"))
        .then_some(Avx512(()))
    }
}

/// Every bit set: the NaN that AVX2's compare-and-or leaves, so both paths give the same.
#[inline(always)]
fn all_ones() -> __m512d {
    // SAFETY: called only from `Avx512`'s methods, which hold the token of AVX-512F.
    unsafe { _mm512_castsi512_pd(_mm512_set1_epi64(-1)) }
}

// As for AVX2: inlined into a function compiled with `avx512f`.
impl Lanes for Avx512 {
    const WIDTH: usize = 8;
    type V = __m512d;

    #[inline(always)]
    unsafe fn load(self, p: *const f64) -> __m512d {
        // SAFETY: the caller promises `p` has a vector's f64s; `self` (Avx512) proves AVX-512F.
        unsafe { _mm512_loadu_pd(p) }
    }

    #[inline(always)]
    unsafe fn store(self, p: *mut f64, v: __m512d) {
        // SAFETY: the caller promises `p` has a vector's f64s; `self` (Avx512) proves AVX-512F.
        unsafe { _mm512_storeu_pd(p, v) }
    }

    #[inline(always)]
    fn splat(self, x: f64) -> __m512d {
        // SAFETY: `self` is the Avx512 token, made only on a CPU with AVX-512F.
        unsafe { _mm512_set1_pd(x) }
    }

    #[inline(always)]
    fn add(self, a: __m512d, b: __m512d) -> __m512d {
        // SAFETY: `self` is the Avx512 token, made only on a CPU with AVX-512F.
        unsafe { _mm512_add_pd(a, b) }
    }

    #[inline(always)]
    fn mul(self, a: __m512d, b: __m512d) -> __m512d {
        // SAFETY: `self` is the Avx512 token, made only on a CPU with AVX-512F.
        unsafe { _mm512_mul_pd(a, b) }
    }

    #[inline(always)]
    fn fma(self, a: __m512d, b: __m512d, c: __m512d) -> __m512d {
        // SAFETY: `self` is the Avx512 token, made only on a CPU with AVX-512F.
        unsafe { _mm512_fmadd_pd(a, b, c) }
    }

    #[cfg(feature = "encoder")]
    #[inline(always)]
    fn div(self, a: __m512d, b: __m512d) -> __m512d {
        // SAFETY: `self` is the Avx512 token, made only on a CPU with AVX-512F.
        unsafe { _mm512_div_pd(a, b) }
    }

    #[cfg(feature = "encoder")]
    #[inline(always)]
    fn abs(self, a: __m512d) -> __m512d {
        // SAFETY: `self` is the Avx512 token, made only on a CPU with AVX-512F.
        unsafe { _mm512_abs_pd(a) }
    }

    #[cfg(feature = "encoder")]
    #[inline(always)]
    fn select_less(self, x: __m512d, bound: f64, a: __m512d, b: __m512d) -> __m512d {
        // SAFETY: `self` is the Avx512 token, made only on a CPU with AVX-512F.
        unsafe {
            let less = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(x, _mm512_set1_pd(bound));
            _mm512_mask_blend_pd(less, b, a)
        }
    }

    #[inline(always)]
    fn max(self, a: __m512d, b: __m512d) -> __m512d {
        // SAFETY: `self` is the Avx512 token, made only on a CPU with AVX-512F.
        unsafe {
            let nan = _mm512_cmp_pd_mask::<_CMP_UNORD_Q>(a, b);
            _mm512_mask_blend_pd(nan, _mm512_max_pd(a, b), all_ones())
        }
    }

    #[inline(always)]
    fn zero_neg_infinity(self, a: __m512d) -> __m512d {
        // SAFETY: `self` is the Avx512 token, made only on a CPU with AVX-512F.
        unsafe {
            let blocked = _mm512_cmp_pd_mask::<_CMP_EQ_OQ>(a, _mm512_set1_pd(f64::NEG_INFINITY));
            _mm512_maskz_mov_pd(!blocked, a)
        }
    }

    #[inline(always)]
    fn clamp(self, x: __m512d, lo: f64, hi: f64) -> __m512d {
        // The bound first, as for AVX2: NaN stays NaN.
        // SAFETY: `self` is the Avx512 token, made only on a CPU with AVX-512F.
        unsafe { _mm512_min_pd(_mm512_set1_pd(hi), _mm512_max_pd(_mm512_set1_pd(lo), x)) }
    }

    #[inline(always)]
    fn floor(self, x: __m512d) -> __m512d {
        // SAFETY: `self` is the Avx512 token, made only on a CPU with AVX-512F.
        unsafe { _mm512_roundscale_pd::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(x) }
    }

    #[inline(always)]
    fn all_within(self, x: __m512d, bound: f64) -> bool {
        // SAFETY: `self` is the Avx512 token, made only on a CPU with AVX-512F.
        unsafe {
            let abs = _mm512_abs_pd(x);
            _mm512_cmp_pd_mask::<_CMP_NLE_UQ>(abs, _mm512_set1_pd(bound)) == 0
        }
    }

    #[inline(always)]
    fn scale_by(self, e: __m512d, shifted: __m512d) -> __m512d {
        // SAFETY: `self` is the Avx512 token, made only on a CPU with AVX-512F.
        unsafe {
            let n = _mm512_slli_epi64::<52>(_mm512_castpd_si512(shifted));
            _mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(e), n))
        }
    }
}
