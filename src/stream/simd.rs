//! Four `f64` lanes at a time: the few vector operations the fused kernel needs, and `exp`.
//!
//! [`Avx2`] runs them as AVX2 and FMA instructions, [`Portable`] as arrays of four that the
//! compiler vectorises as the target allows. The kernel is written once, generic over
//! [`Lanes`], and compiled twice: inside a function built for AVX2 and FMA (chosen at run
//! time, when the CPU has them), and for the target's baseline.

/// A vector of four `f64` and its operations. The token (a zero-sized value) proves the CPU
/// can run them, so the operations themselves are safe; loads and stores are not, as they
/// take raw pointers.
pub(super) trait Lanes: Copy {
    /// Four `f64`.
    type V: Copy;
    /// Four values from `p` (no alignment needed).
    ///
    /// # Safety
    /// `p..p + 4` must be readable.
    unsafe fn load(self, p: *const f64) -> Self::V;
    /// Writes four values at `p`.
    ///
    /// # Safety
    /// `p..p + 4` must be writable.
    unsafe fn store(self, p: *mut f64, v: Self::V);
    fn splat(self, x: f64) -> Self::V;
    fn add(self, a: Self::V, b: Self::V) -> Self::V;
    fn mul(self, a: Self::V, b: Self::V) -> Self::V;
    /// `a b + c`, fused where the CPU can.
    fn fma(self, a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    /// The larger of each pair; NaN where either is NaN (as `np.maximum`).
    fn max(self, a: Self::V, b: Self::V) -> Self::V;
    /// `-inf` lanes become 0 (the shift of a row that has seen only blocked keys).
    fn zero_neg_infinity(self, a: Self::V) -> Self::V;
    /// Each lane clamped to `[lo, hi]`; NaN stays NaN.
    fn clamp(self, x: Self::V, lo: f64, hi: f64) -> Self::V;
    /// Each lane rounded down to an integer.
    fn floor(self, x: Self::V) -> Self::V;
    /// Whether every lane is within `[-bound, bound]` (NaN is not).
    fn all_within(self, x: Self::V, bound: f64) -> bool;
    /// `e 2^n`, where `n` is the integer in the low bits of `shifted` (`n + 1.5 2^52`), by
    /// adding `n` to `e`'s exponent: right while the result is normal.
    fn scale_by(self, e: Self::V, shifted: Self::V) -> Self::V;
}

/// `exp` of each lane, within 2 ulp of `f64::exp` (3 where multiply-adds are not fused): `x = n ln 2 + r` with `|r| <= ln 2 / 2`,
/// `exp(r)` by its Taylor polynomial, times `2^n`. The one branch is on the whole vector:
/// `2^n` by an add to the exponent unless a lane is near the ends of the range (subnormal or
/// inf), where it takes two factors.
#[inline(always)]
pub(super) fn exp<S: Lanes>(s: S, x: S::V) -> S::V {
    // Outside [-746, 710] exp is 0 or inf; clamping keeps 2^n representable.
    let c = s.clamp(x, -746.0, 710.0);
    let round = s.splat(ROUND);
    let shifted = s.fma(c, s.splat(LOG2_E), round);
    let n = s.add(shifted, s.splat(-ROUND));
    // c - n ln 2, ln 2 in two parts, each product exact or fused.
    let r = s.fma(n, s.splat(-LN2_LO), s.fma(n, s.splat(-LN2_HI), c));
    let mut e = s.splat(INV_FACTORIAL[12]);
    for k in (0..12).rev() {
        e = s.fma(e, r, s.splat(INV_FACTORIAL[k]));
    }
    if s.all_within(c, 707.0) {
        return s.scale_by(e, shifted);
    }
    // 2^n as two factors, so that results below the smallest normal come out subnormal and
    // those above the largest finite come out inf.
    let n1 = s.floor(s.mul(n, s.splat(0.5)));
    let n2 = s.add(n, s.mul(n1, s.splat(-1.0)));
    let one = s.splat(1.0);
    let two_to_n1 = s.scale_by(one, s.add(n1, round));
    let two_to_n2 = s.scale_by(one, s.add(n2, round));
    s.mul(s.mul(e, two_to_n1), two_to_n2)
}

/// Arrays of four, for CPUs without AVX2 and FMA (and other architectures).
#[derive(Debug, Clone, Copy)]
pub(super) struct Portable;

impl Lanes for Portable {
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

const LOG2_E: f64 = std::f64::consts::LOG2_E;
// ln 2 in two parts: n * LN2_HI is exact for |n| < 2^11.
const LN2_HI: f64 = 0.693_147_180_369_123_8;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
// Adding 1.5 * 2^52 rounds to an integer, which then sits in the low mantissa bits.
const ROUND: f64 = 6_755_399_441_055_744.0;

/// `1 / k!` for k = 0..=12.
const INV_FACTORIAL: [f64; 13] = [
    1.0,
    1.0,
    1.0 / 2.0,
    1.0 / 6.0,
    1.0 / 24.0,
    1.0 / 120.0,
    1.0 / 720.0,
    1.0 / 5_040.0,
    1.0 / 40_320.0,
    1.0 / 362_880.0,
    1.0 / 3_628_800.0,
    1.0 / 39_916_800.0,
    1.0 / 479_001_600.0,
];

#[cfg(target_arch = "x86_64")]
pub(super) use avx2::Avx2;

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::Lanes;
    use std::arch::x86_64::*;

    /// AVX2 and FMA: made only by [`Avx2::detect`], on a CPU that has both.
    #[derive(Debug, Clone, Copy)]
    pub(in crate::stream) struct Avx2(());

    impl Avx2 {
        /// The token, when this CPU has AVX2 and FMA.
        pub(in crate::stream) fn detect() -> Option<Avx2> {
            (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
                .then_some(Avx2(()))
        }
    }

    // Every operation is inlined into a function compiled with `avx2,fma` (the kernel's
    // entry), where the intrinsics become single instructions.
    // SAFETY (each block below): an `Avx2` exists only on a CPU with AVX2 and FMA.
    impl Lanes for Avx2 {
        type V = __m256d;

        #[inline(always)]
        unsafe fn load(self, p: *const f64) -> __m256d {
            unsafe { _mm256_loadu_pd(p) }
        }

        #[inline(always)]
        unsafe fn store(self, p: *mut f64, v: __m256d) {
            unsafe { _mm256_storeu_pd(p, v) }
        }

        #[inline(always)]
        fn splat(self, x: f64) -> __m256d {
            unsafe { _mm256_set1_pd(x) }
        }

        #[inline(always)]
        fn add(self, a: __m256d, b: __m256d) -> __m256d {
            unsafe { _mm256_add_pd(a, b) }
        }

        #[inline(always)]
        fn mul(self, a: __m256d, b: __m256d) -> __m256d {
            unsafe { _mm256_mul_pd(a, b) }
        }

        #[inline(always)]
        fn fma(self, a: __m256d, b: __m256d, c: __m256d) -> __m256d {
            unsafe { _mm256_fmadd_pd(a, b, c) }
        }

        #[inline(always)]
        fn max(self, a: __m256d, b: __m256d) -> __m256d {
            unsafe {
                // maxpd gives its second operand when either is NaN: put NaN back.
                let nan = _mm256_cmp_pd::<_CMP_UNORD_Q>(a, b);
                _mm256_or_pd(_mm256_max_pd(a, b), nan)
            }
        }

        #[inline(always)]
        fn zero_neg_infinity(self, a: __m256d) -> __m256d {
            unsafe {
                let blocked = _mm256_cmp_pd::<_CMP_EQ_OQ>(a, _mm256_set1_pd(f64::NEG_INFINITY));
                _mm256_andnot_pd(blocked, a)
            }
        }

        #[inline(always)]
        fn clamp(self, x: __m256d, lo: f64, hi: f64) -> __m256d {
            // The bound first: maxpd and minpd give their second operand when one is NaN.
            unsafe { _mm256_min_pd(_mm256_set1_pd(hi), _mm256_max_pd(_mm256_set1_pd(lo), x)) }
        }

        #[inline(always)]
        fn floor(self, x: __m256d) -> __m256d {
            unsafe { _mm256_floor_pd(x) }
        }

        #[inline(always)]
        fn all_within(self, x: __m256d, bound: f64) -> bool {
            unsafe {
                let abs = _mm256_andnot_pd(_mm256_set1_pd(-0.0), x);
                _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_NLE_UQ>(abs, _mm256_set1_pd(bound))) == 0
            }
        }

        #[inline(always)]
        fn scale_by(self, e: __m256d, shifted: __m256d) -> __m256d {
            unsafe {
                let n = _mm256_slli_epi64::<52>(_mm256_castpd_si256(shifted));
                _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(e), n))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    /// `exp` of four values by every implementation this CPU runs, each with the error it
    /// promises: 2 ulp with fused multiply-adds, 3 with separate ones (two roundings each).
    fn exps(x: [f64; 4]) -> Vec<([f64; 4], u64)> {
        let portable_ulps = if cfg!(any(target_arch = "aarch64", target_feature = "fma")) {
            2
        } else {
            3
        };
        let mut all = vec![(exp(Portable, x), portable_ulps)];
        #[cfg(target_arch = "x86_64")]
        if let Some(avx2) = Avx2::detect() {
            let mut out = [0.0; 4];
            // SAFETY: x and out hold four values each.
            unsafe { avx2.store(out.as_mut_ptr(), exp(avx2, avx2.load(x.as_ptr()))) };
            all.push((out, 2));
        }
        all
    }

    #[test]
    fn exp_is_within_two_ulp_of_std_where_multiply_adds_fuse() {
        let mut x = -745.5;
        while x < 709.9 {
            let four = [x, x + 0.000_1, x + 0.000_2, x + 0.000_3];
            for (got, promised) in exps(four) {
                for (got, x) in got.iter().zip(four) {
                    let error = ulps(*got, x.exp());
                    assert!(
                        error <= promised,
                        "exp({x}) = {got}: {error} ulp from {}",
                        x.exp()
                    );
                }
            }
            x += 0.000_731_9 * 4.0;
        }
    }

    #[test]
    fn exp_edges_as_std() {
        let edges = [
            0.0,
            -0.0,
            -1e-300,
            709.78,
            709.79,
            710.0,
            1e300,
            f64::INFINITY,
            -708.4,
            -740.0,
            -745.1,
            -745.2,
            -800.0,
            f64::NEG_INFINITY,
        ];
        for four in edges.chunks(2).map(|c| [c[0], c[1], c[0], c[1]]) {
            for (got, _) in exps(four) {
                for (ours, x) in got.iter().zip(four) {
                    let std = x.exp();
                    assert!(
                        *ours == std || ulps(*ours, std) <= 2,
                        "exp({x}) = {ours}, std {std}"
                    );
                }
            }
        }
        // A NaN with a payload in its low bits too (the fast scaling adds to the bits).
        let payload = f64::from_bits(f64::NAN.to_bits() | 0xfff);
        for (got, _) in exps([f64::NAN, 0.0, payload, 1.0]) {
            assert!(got[0].is_nan() && got[2].is_nan(), "{got:?}");
            assert_eq!(got[1], 1.0);
        }
    }

    #[test]
    fn max_spreads_nan_and_zero_neg_infinity_keeps_the_rest() {
        let (a, b) = (
            [1.0, f64::NAN, -3.0, f64::NEG_INFINITY],
            [2.0, 0.0, f64::NAN, f64::NEG_INFINITY],
        );
        let check = |max: [f64; 4], zeroed: [f64; 4]| {
            assert_eq!(max[0], 2.0);
            assert!(max[1].is_nan() && max[2].is_nan());
            assert_eq!(max[3], f64::NEG_INFINITY);
            assert_eq!(zeroed[..1], [1.0]);
            assert!(zeroed[1].is_nan());
            assert_eq!(zeroed[2..], [-3.0, 0.0]);
        };
        check(Portable.max(a, b), Portable.zero_neg_infinity(a));
        #[cfg(target_arch = "x86_64")]
        if let Some(s) = Avx2::detect() {
            let (mut max, mut zeroed) = ([0.0; 4], [0.0; 4]);
            // SAFETY: four values each.
            unsafe {
                s.store(
                    max.as_mut_ptr(),
                    s.max(s.load(a.as_ptr()), s.load(b.as_ptr())),
                );
                s.store(zeroed.as_mut_ptr(), s.zero_neg_infinity(s.load(a.as_ptr())));
            }
            check(max, zeroed);
        }
    }
}
