//! The vector paths of the fast kernels (the streaming kernel and its products): which one a
//! call runs on ([`Simd`]), and the few vector operations those kernels need, with `exp`.
//!
//! The kernels are written once, generic over [`Lanes`], and compiled once per path: inside a
//! function built for AVX-512F ([`Avx512`], eight `f64` a vector), for AVX2 and FMA
//! ([`Avx2`], four), and for the target's baseline ([`Portable`], arrays of four that the
//! compiler vectorises as it can). [`dispatch`] picks one at run time.

use crate::error::AttentionError;

/// The vector instructions the streaming path runs on, given to
/// [`Streaming::simd`](crate::stream::Streaming::simd).
///
/// [`Simd::Auto`] takes the widest this CPU has, unless the environment variable
/// `ATTENTION_LAB_SIMD` names one (`avx512`, `avx2` or `portable`), as `ATEN_CPU_CAPABILITY`
/// does for PyTorch. Every path gives the same numbers up to rounding; naming one lets a test
/// or a benchmark run each in turn on the same machine.
///
/// ```
/// use attention_lab::prelude::*;
///
/// // Portable runs on every CPU; the others only where the CPU has them.
/// assert_eq!(Simd::Portable.missing(), None);
/// let paths: Vec<Simd> = Simd::ALL.into_iter().filter(|p| p.missing().is_none()).collect();
/// assert!(paths.contains(&Simd::Auto.resolve()?));
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Simd {
    /// The widest path this CPU runs, or the one `ATTENTION_LAB_SIMD` names.
    #[default]
    Auto,
    /// AVX-512F: eight `f64` a vector (x86-64).
    Avx512,
    /// AVX2 with FMA: four `f64` a vector (x86-64).
    Avx2,
    /// The target's baseline: any CPU.
    Portable,
}

/// The environment variable that [`Simd::Auto`] reads.
pub const SIMD_VAR: &str = "ATTENTION_LAB_SIMD";

impl Simd {
    /// Every path a call can name, widest first.
    pub const ALL: [Simd; 3] = [Simd::Avx512, Simd::Avx2, Simd::Portable];

    /// The name `ATTENTION_LAB_SIMD` takes (`auto`, `avx512`, `avx2`, `portable`).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// assert_eq!(Simd::Avx2.name(), "avx2");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Simd::Auto => "auto",
            Simd::Avx512 => "avx512",
            Simd::Avx2 => "avx2",
            Simd::Portable => "portable",
        }
    }

    /// Why this CPU cannot run the path, or `None` when it can.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// if let Some(why) = Simd::Avx512.missing() {
    ///     println!("AVX-512 not run: {why}");
    /// }
    /// ```
    pub fn missing(self) -> Option<&'static str> {
        match self {
            Simd::Auto | Simd::Portable => None,
            #[cfg(target_arch = "x86_64")]
            Simd::Avx512 => Avx512::detect()
                .is_none()
                .then_some("this CPU has no AVX-512F"),
            #[cfg(target_arch = "x86_64")]
            Simd::Avx2 => Avx2::detect()
                .is_none()
                .then_some("this CPU lacks AVX2 or FMA"),
            #[cfg(not(target_arch = "x86_64"))]
            Simd::Avx512 | Simd::Avx2 => Some("not an x86-64 CPU"),
        }
    }

    /// The path a call runs on: the one named, if this CPU has it; for [`Simd::Auto`], the
    /// one `ATTENTION_LAB_SIMD` names, or else the widest this CPU has.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// assert_eq!(Simd::Portable.resolve()?, Simd::Portable);
    /// assert_ne!(Simd::Auto.resolve()?, Simd::Auto);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Setting`] naming the path and why this CPU cannot run it, or naming
    /// `ATTENTION_LAB_SIMD` when it holds something else than a path's name.
    pub fn resolve(self) -> Result<Simd, AttentionError> {
        let simd = match self {
            Simd::Auto => match std::env::var(SIMD_VAR) {
                Ok(name) if !name.is_empty() => {
                    let named = name.parse().map_err(|_| AttentionError::Setting {
                        name: SIMD_VAR,
                        value: format!("{name:?}"),
                        rule: "it must be auto, avx512, avx2 or portable",
                    })?;
                    if named == Simd::Auto {
                        Simd::widest()
                    } else {
                        named
                    }
                }
                _ => Simd::widest(),
            },
            named => named,
        };
        match simd.missing() {
            None => Ok(simd),
            Some(rule) => Err(AttentionError::Setting {
                name: "Streaming::simd",
                value: simd.name().to_string(),
                rule,
            }),
        }
    }

    /// The widest path this CPU runs.
    fn widest() -> Simd {
        Simd::ALL
            .into_iter()
            .find(|simd| simd.missing().is_none())
            .unwrap_or(Simd::Portable)
    }
}

impl std::str::FromStr for Simd {
    type Err = String;

    /// A path by its [`name`](Simd::name), in any case.
    fn from_str(name: &str) -> Result<Simd, String> {
        [Simd::Auto, Simd::Avx512, Simd::Avx2, Simd::Portable]
            .into_iter()
            .find(|simd| simd.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| format!("{name:?} is not auto, avx512, avx2 or portable"))
    }
}

/// Work to run on a vector path: written once, generic over the lanes, and inlined into a
/// function compiled for each path's instructions.
pub(crate) trait Kernel {
    /// What the work gives back.
    type Out;
    /// The work, on lanes `s`. Implementations are `#[inline(always)]`, and so is what they
    /// call, so that all of it is compiled with the path's instructions.
    fn run<S: Lanes>(self, s: S) -> Self::Out;
}

/// `kernel` on the path `simd` (resolved: the CPU has it; a path it lacks falls back to the
/// next narrower one).
pub(crate) fn dispatch<K: Kernel>(simd: Simd, kernel: K) -> K::Out {
    #[cfg(target_arch = "x86_64")]
    {
        if simd == Simd::Avx512 {
            if let Some(s) = Avx512::detect() {
                // SAFETY: the CPU has AVX-512F (the token says so), and with it AVX2 and FMA.
                return unsafe { on_avx512(s, kernel) };
            }
        }
        if matches!(simd, Simd::Avx512 | Simd::Avx2) {
            if let Some(s) = Avx2::detect() {
                // SAFETY: the CPU has AVX2 and FMA (the token says so).
                return unsafe { on_avx2(s, kernel) };
            }
        }
    }
    let _ = simd;
    kernel.run(Portable)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn on_avx512<K: Kernel>(s: Avx512, kernel: K) -> K::Out {
    kernel.run(s)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn on_avx2<K: Kernel>(s: Avx2, kernel: K) -> K::Out {
    kernel.run(s)
}

/// A vector of [`WIDTH`](Lanes::WIDTH) `f64` and its operations. The token (a zero-sized
/// value) proves the CPU can run them, so the operations themselves are safe; loads and
/// stores are not, as they take raw pointers.
pub(crate) trait Lanes: Copy {
    /// `f64` a vector.
    const WIDTH: usize;
    /// [`WIDTH`](Lanes::WIDTH) `f64`.
    type V: Copy;
    /// A vector from `p` (no alignment needed).
    ///
    /// # Safety
    /// `p..p + WIDTH` must be readable.
    unsafe fn load(self, p: *const f64) -> Self::V;
    /// Writes a vector at `p`.
    ///
    /// # Safety
    /// `p..p + WIDTH` must be writable.
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
pub(crate) fn exp<S: Lanes>(s: S, x: S::V) -> S::V {
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
pub(crate) use avx2::Avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) use avx512::Avx512;

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::Lanes;
    use std::arch::x86_64::*;

    /// AVX2 and FMA: made only by [`Avx2::detect`], on a CPU that has both.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Avx2(());

    impl Avx2 {
        /// The token, when this CPU has AVX2 and FMA.
        pub(crate) fn detect() -> Option<Avx2> {
            (is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
                .then_some(Avx2(()))
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
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
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
                let blocked =
                    _mm512_cmp_pd_mask::<_CMP_EQ_OQ>(a, _mm512_set1_pd(f64::NEG_INFINITY));
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
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    /// One lane operation, run over whole vectors of eight values.
    #[derive(Clone, Copy)]
    enum Op {
        Exp,
        Max,
        ZeroNegInfinity,
    }

    struct Apply<'a> {
        op: Op,
        a: &'a [f64; 8],
        b: &'a [f64; 8],
    }

    impl Kernel for Apply<'_> {
        type Out = [f64; 8];

        #[inline(always)]
        fn run<S: Lanes>(self, s: S) -> [f64; 8] {
            let mut out = [0.0; 8];
            for at in (0..8).step_by(S::WIDTH) {
                // SAFETY: 8 is a multiple of every WIDTH; each vector is in bounds.
                unsafe {
                    let (a, b) = (s.load(self.a[at..].as_ptr()), s.load(self.b[at..].as_ptr()));
                    let y = match self.op {
                        Op::Exp => exp(s, a),
                        Op::Max => s.max(a, b),
                        Op::ZeroNegInfinity => s.zero_neg_infinity(a),
                    };
                    s.store(out[at..].as_mut_ptr(), y);
                }
            }
            out
        }
    }

    /// Every path this CPU runs; the ones it lacks are printed as not run, with the reason.
    pub(crate) fn paths() -> Vec<Simd> {
        Simd::ALL
            .into_iter()
            .filter(|simd| match simd.missing() {
                None => true,
                Some(why) => {
                    eprintln!("not run: the {} path ({why})", simd.name());
                    false
                }
            })
            .collect()
    }

    /// `op` on every path this CPU runs, each with its name.
    fn on_each_path(op: Op, a: [f64; 8], b: [f64; 8]) -> Vec<(Simd, [f64; 8])> {
        paths()
            .into_iter()
            .map(|simd| (simd, dispatch(simd, Apply { op, a: &a, b: &b })))
            .collect()
    }

    /// The error `exp` promises: 2 ulp with fused multiply-adds, 3 with separate ones (two
    /// roundings each), which only the portable path without FMA has.
    fn promised(simd: Simd) -> u64 {
        let fused = cfg!(any(target_arch = "aarch64", target_feature = "fma"));
        if simd == Simd::Portable && !fused {
            3
        } else {
            2
        }
    }

    #[test]
    fn dispatch_runs_the_path_named() {
        struct Width;
        impl Kernel for Width {
            type Out = usize;
            fn run<S: Lanes>(self, _: S) -> usize {
                S::WIDTH
            }
        }
        for simd in paths() {
            let width = dispatch(simd, Width);
            assert_eq!(width, if simd == Simd::Avx512 { 8 } else { 4 }, "{simd:?}");
        }
    }

    #[test]
    fn exp_is_within_two_ulp_of_std_where_multiply_adds_fuse() {
        let mut x = -745.5;
        while x < 709.9 {
            let eight = std::array::from_fn(|i| x + 0.000_1 * i as f64);
            for (simd, got) in on_each_path(Op::Exp, eight, eight) {
                for (got, x) in got.iter().zip(eight) {
                    let error = ulps(*got, x.exp());
                    assert!(
                        error <= promised(simd),
                        "{simd:?}: exp({x}) = {got}: {error} ulp from {}",
                        x.exp()
                    );
                }
            }
            x += 0.000_731_9 * 8.0;
        }
    }

    #[test]
    fn exp_edges_as_std_and_every_path_alike() {
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
            1.5,
            -2.25,
        ];
        for eight in edges.chunks(8).map(|c| <[f64; 8]>::try_from(c).unwrap()) {
            let got = on_each_path(Op::Exp, eight, eight);
            for (simd, got) in &got {
                for (ours, x) in got.iter().zip(eight) {
                    let std = x.exp();
                    assert!(
                        *ours == std || ulps(*ours, std) <= 2,
                        "{simd:?}: exp({x}) = {ours}, std {std}"
                    );
                }
            }
            // The vector paths fuse the same multiply-adds in the same order: the same bits.
            let fused: Vec<_> = got
                .iter()
                .filter(|(simd, _)| *simd != Simd::Portable)
                .collect();
            for pair in fused.windows(2) {
                let bits = |v: &[f64; 8]| v.map(f64::to_bits);
                assert_eq!(
                    bits(&pair[0].1),
                    bits(&pair[1].1),
                    "{:?} against {:?}",
                    pair[0].0,
                    pair[1].0
                );
            }
        }
        // A NaN with a payload in its low bits too (the fast scaling adds to the bits).
        let payload = f64::from_bits(f64::NAN.to_bits() | 0xfff);
        let odd = [f64::NAN, 0.0, payload, 1.0, 2.0, f64::NAN, -1.0, payload];
        for (simd, got) in on_each_path(Op::Exp, odd, odd) {
            for (got, x) in got.iter().zip(odd) {
                assert!(
                    got.is_nan() == x.is_nan() && (x.is_nan() || ulps(*got, x.exp()) <= 2),
                    "{simd:?}: exp({x}) = {got}"
                );
            }
        }
    }

    #[test]
    fn max_spreads_nan_and_zero_neg_infinity_keeps_the_rest() {
        let a = [
            1.0,
            f64::NAN,
            -3.0,
            f64::NEG_INFINITY,
            0.5,
            -0.0,
            f64::INFINITY,
            7.0,
        ];
        let b = [
            2.0,
            0.0,
            f64::NAN,
            f64::NEG_INFINITY,
            0.25,
            1.0,
            3.0,
            f64::NAN,
        ];
        for ((simd, max), (_, zeroed)) in
            on_each_path(Op::Max, a, b)
                .into_iter()
                .zip(on_each_path(Op::ZeroNegInfinity, a, b))
        {
            for i in 0..8 {
                if a[i].is_nan() || b[i].is_nan() {
                    assert!(max[i].is_nan(), "{simd:?}: max lane {i} = {}", max[i]);
                } else {
                    assert_eq!(max[i], a[i].max(b[i]), "{simd:?}: max lane {i}");
                }
                let want = if a[i] == f64::NEG_INFINITY { 0.0 } else { a[i] };
                assert!(
                    zeroed[i] == want || (want.is_nan() && zeroed[i].is_nan()),
                    "{simd:?}: zeroed lane {i} = {}",
                    zeroed[i]
                );
            }
        }
    }
}
