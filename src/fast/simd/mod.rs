//! The vector paths of the fast kernels (the streaming kernel and its products): which one a
//! call runs on ([`Simd`]), and the few vector operations those kernels need, with `exp`.
//!
//! The kernels are written once, generic over `Lanes`, and compiled once per path, each path
//! in a file of its own: inside a function built for AVX-512F (`Avx512`, eight `f64` a vector,
//! `avx512.rs`), for AVX2 and FMA (`Avx2`, four, `avx2.rs`), and for the target's baseline
//! (`Portable`, arrays of four that the compiler vectorises as it can, `portable.rs`).
//! `dispatch` picks one at run time.

use crate::error::AttentionError;

/// The vector instructions the streaming path runs on, given to
/// [`Streaming::simd`](crate::fast::stream::Streaming::simd).
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
    /// `a / b`, each lane.
    #[cfg(feature = "encoder")]
    fn div(self, a: Self::V, b: Self::V) -> Self::V;
    /// `|a|`, each lane.
    #[cfg(feature = "encoder")]
    fn abs(self, a: Self::V) -> Self::V;
    /// `if_less` where `x < bound`, else `otherwise` (NaN is not less), each lane.
    #[cfg(feature = "encoder")]
    fn select_less(self, x: Self::V, bound: f64, if_less: Self::V, otherwise: Self::V) -> Self::V;
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

/// The path the encoder's products and element-wise steps run on: [`Simd::Auto`] resolved
/// once (a name in `ATTENTION_LAB_SIMD` this CPU cannot run gives the portable path).
#[cfg(feature = "encoder")]
pub(crate) fn encoder_path() -> Simd {
    static PATH: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
    *PATH.get_or_init(|| Simd::Auto.resolve().unwrap_or(Simd::Portable))
}

/// An element-wise step on a run of values, in place.
#[cfg(feature = "encoder")]
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step {
    /// `exp(v - shift)`, by [`exp`].
    ExpMinus(f64),
    /// GELU, `v/2 (1 + erf(v/sqrt(2)))`, by [`erf::erf`].
    Gelu,
    /// `erf(v)` (for the tests: GELU's erf against libm's).
    #[cfg(test)]
    Erf,
}

/// `step` on every value of `values`, on the path `simd` (resolved): whole vectors, and the
/// last few values in a vector padded with zeros, so that every value goes through the same
/// arithmetic.
#[cfg(feature = "encoder")]
pub(crate) fn map_in_place(simd: Simd, step: Step, values: &mut [f64]) {
    dispatch(simd, MapInPlace { step, values });
}

#[cfg(feature = "encoder")]
struct MapInPlace<'a> {
    step: Step,
    values: &'a mut [f64],
}

#[cfg(feature = "encoder")]
impl Kernel for MapInPlace<'_> {
    type Out = ();

    #[inline(always)]
    fn run<S: Lanes>(self, s: S) {
        let step = self.step;
        let mut chunks = self.values.chunks_exact_mut(S::WIDTH);
        for chunk in &mut chunks {
            // SAFETY: a chunk holds exactly one vector's values.
            unsafe { s.store(chunk.as_mut_ptr(), apply(s, step, s.load(chunk.as_ptr()))) };
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let mut lanes = [0.0; 16];
            lanes[..rest.len()].copy_from_slice(rest);
            // SAFETY: 16 values hold any vector.
            unsafe { s.store(lanes.as_mut_ptr(), apply(s, step, s.load(lanes.as_ptr()))) };
            rest.copy_from_slice(&lanes[..rest.len()]);
        }
    }
}

/// `step` on one vector. A function, not a closure: a closure is not compiled with its
/// caller's target features, and the path's instructions would not be inlined into it.
#[cfg(feature = "encoder")]
#[inline(always)]
fn apply<S: Lanes>(s: S, step: Step, v: S::V) -> S::V {
    match step {
        Step::ExpMinus(shift) => exp(s, s.add(v, s.splat(-shift))),
        Step::Gelu => erf::gelu(s, v),
        #[cfg(test)]
        Step::Erf => erf::erf(s, v),
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

#[cfg(feature = "encoder")]
mod erf;
mod portable;
pub(crate) use portable::Portable;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
pub(crate) use avx2::Avx2;
#[cfg(target_arch = "x86_64")]
pub(crate) use avx512::Avx512;

#[cfg(test)]
pub(crate) mod tests;
