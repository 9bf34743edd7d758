//! NumPy's random streams, bit for bit.
//!
//! [`RandomState`] is `np.random.seed` / `np.random.RandomState`: MT19937 (from `rand_mt`)
//! with NumPy's legacy samplers. [`default_rng`] is `np.random.default_rng`: NumPy's
//! `SeedSequence` feeding PCG64 (from `rand_pcg`). Only what is NumPy's own lives here:
//! seeding glue, the 53-bit doubles, the legacy gauss cache, masked `randint`.
//!
//! Every sampler fills in C order and returns a `Result`: `Err` exactly where NumPy raises
//! (bad arguments), plus shapes too big to allocate, so that no input panics.
//!
//! The shape-generic methods are thin shims over non-generic fillers, because generic code
//! is compiled again in every notebook cell that uses it.

use std::fmt;

use ndarray::{Array, Dimension, IntoDimension};
use ndarray_rand::rand::RngCore;
use rand_mt::Mt;
use rand_pcg::Pcg64;

/// Why a sampler refused: the cases where NumPy raises, and shapes too big to allocate.
///
/// ```
/// use attention_lab::prelude::*;
///
/// // np.random.RandomState(0).randint(5, 5)  ->  ValueError: low >= high
/// let err = np::RandomState::new(0).randint(5, 5, 3).unwrap_err();
/// assert_eq!(err, np::RandomError::LowNotBelowHigh { low: 5, high: 5 });
/// assert_eq!(err.to_string(), "randint: low >= high (low = 5, high = 5)");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RandomError {
    /// `randint(low, high, _)` with `low >= high`; NumPy: `ValueError: low >= high`.
    LowNotBelowHigh {
        /// The `low` given.
        low: i64,
        /// The `high` given.
        high: i64,
    },
    /// `uniform(low, high, _)` where `high - low` is infinite or NaN;
    /// NumPy: `OverflowError: Range exceeds valid bounds`.
    RangeNotFinite {
        /// The `low` given.
        low: f64,
        /// The `high` given.
        high: f64,
    },
    /// `normal(_, scale, _)` with a negative `scale`, `-0.0` included; NumPy: `ValueError: scale < 0`.
    NegativeScale {
        /// The `scale` given.
        scale: f64,
    },
    /// `RandomState::from_key(&[])`; NumPy: `ValueError: Seed must be non-empty`.
    EmptyKey,
    /// A shape with more elements than memory holds; NumPy raises `ValueError` or `MemoryError`.
    TooBig {
        /// The shape asked for.
        shape: Vec<usize>,
    },
}

impl fmt::Display for RandomError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LowNotBelowHigh { low, high } => {
                write!(f, "randint: low >= high (low = {low}, high = {high})")
            }
            Self::RangeNotFinite { low, high } => write!(
                f,
                "uniform: range exceeds valid bounds, high - low is not finite (low = {low}, high = {high})"
            ),
            Self::NegativeScale { scale } => write!(f, "normal: scale < 0 (scale = {scale})"),
            Self::EmptyKey => write!(f, "RandomState::from_key: seed key must be non-empty"),
            Self::TooBig { shape } => write!(f, "shape {shape:?} has too many elements to allocate"),
        }
    }
}

impl std::error::Error for RandomError {}

/// NumPy's legacy random state, `np.random.RandomState` (what `np.random.seed` reseeds).
///
/// Implements rand's `RngCore` with NumPy's raw MT19937 draws, so ndarray-rand's
/// `Array::random_using(shape, dist, &mut rs)` can draw from it.
///
/// ```
/// use attention_lab::prelude::*;
///
/// // np.random.seed(0); w1 = np.random.rand(5, 1)
/// let mut rs = np::RandomState::new(0);
/// let w1 = rs.rand((5, 1))?;
/// assert_eq!(w1[[0, 0]], 0.5488135039273248);
/// assert_eq!(w1[[1, 0]], 0.7151893663724195);
///
/// // ndarray-rand's distributions draw from it too (with rand's algorithms, not NumPy's).
/// use ndarray_rand::{rand_distr::StandardNormal, RandomExt};
/// let z = Array2::<f64>::random_using((2, 2), StandardNormal, &mut rs);
/// assert_eq!(z.shape(), &[2, 2]);
/// # Ok::<(), np::RandomError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RandomState {
    mt: Mt,
    /// The second value of the last polar-method pair, which NumPy's `legacy_gauss` keeps.
    gauss: Option<f64>,
}

impl RandomState {
    /// `np.random.seed(seed)` / `np.random.RandomState(seed)`: MT19937 `init_genrand`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // rs = np.random.RandomState(42); rs.rand()
    /// let mut rs = np::RandomState::new(42);
    /// assert_eq!(rs.rand(())?[()], 0.3745401188473625);
    /// # Ok::<(), np::RandomError>(())
    /// ```
    #[must_use]
    pub fn new(seed: u32) -> Self {
        Self {
            mt: Mt::new(seed),
            gauss: None,
        }
    }

    /// `np.random.seed([1, 2, 3])` / `np.random.RandomState([1, 2, 3])`: MT19937 `init_by_array`.
    ///
    /// # Errors
    ///
    /// [`RandomError::EmptyKey`] for an empty key, as NumPy refuses one.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // rs = np.random.RandomState([1, 2, 3]); rs.randint(0, 100, 3)
    /// let mut rs = np::RandomState::from_key(&[1, 2, 3])?;
    /// assert_eq!(rs.randint(0, 100, 3)?, array![94, 25, 67]);
    /// assert!(np::RandomState::from_key(&[]).is_err());
    /// # Ok::<(), np::RandomError>(())
    /// ```
    pub fn from_key(key: &[u32]) -> Result<Self, RandomError> {
        if key.is_empty() {
            return Err(RandomError::EmptyKey);
        }
        let state = init_by_array(key);
        // `Mt::from` untempers: handing it tempered words installs `state` as is, due to twist.
        let mt = Mt::from(state.map(temper));
        Ok(Self { mt, gauss: None })
    }

    /// `np.random.rand(d0, d1, ...)`: uniform in `[0, 1)`, 53 bits from two MT draws.
    ///
    /// # Errors
    ///
    /// [`RandomError::TooBig`] if the shape cannot be allocated.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // np.random.seed(0); w1 = np.random.rand(5, 1)
    /// let mut rs = np::RandomState::new(0);
    /// let w1 = rs.rand([5, 1])?;
    /// assert_eq!(w1.shape(), &[5, 1]);
    /// assert_eq!(w1[[0, 0]], 0.5488135039273248);
    /// # Ok::<(), np::RandomError>(())
    /// ```
    pub fn rand<Sh: IntoDimension>(
        &mut self,
        shape: Sh,
    ) -> Result<Array<f64, Sh::Dim>, RandomError> {
        shaped(shape.into_dimension(), |dims| self.doubles(dims))
    }

    /// `np.random.random_sample(size)`: the same stream as [`RandomState::rand`], which takes
    /// a shape tuple in NumPy.
    ///
    /// # Errors
    ///
    /// [`RandomError::TooBig`] if the shape cannot be allocated.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // np.random.seed(0); x = np.random.random_sample((2, 3))
    /// let mut rs = np::RandomState::new(0);
    /// let x = rs.random_sample((2, 3))?;
    /// assert_eq!(x[[0, 0]], 0.5488135039273248);
    /// # Ok::<(), np::RandomError>(())
    /// ```
    pub fn random_sample<Sh: IntoDimension>(
        &mut self,
        shape: Sh,
    ) -> Result<Array<f64, Sh::Dim>, RandomError> {
        self.rand(shape)
    }

    /// `np.random.uniform(low, high, size)`: `low + (high - low) * u` with `u` as in `rand`.
    /// As in NumPy, `high < low` is allowed.
    ///
    /// # Errors
    ///
    /// [`RandomError::RangeNotFinite`] if `high - low` is infinite or NaN (NumPy's
    /// `OverflowError`); [`RandomError::TooBig`] if the shape cannot be allocated.
    /// Nothing is drawn on error.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // np.random.seed(0); b = np.random.uniform(-1, 1, 3)
    /// let mut rs = np::RandomState::new(0);
    /// let b = rs.uniform(-1.0, 1.0, 3)?;
    /// assert_eq!(b[0], 2.0 * 0.5488135039273248 - 1.0);
    /// assert!(rs.uniform(0.0, f64::INFINITY, 3).is_err());
    /// # Ok::<(), np::RandomError>(())
    /// ```
    pub fn uniform<Sh: IntoDimension>(
        &mut self,
        low: f64,
        high: f64,
        shape: Sh,
    ) -> Result<Array<f64, Sh::Dim>, RandomError> {
        shaped(shape.into_dimension(), |dims| {
            self.uniforms(low, high, dims)
        })
    }

    /// `np.random.randn(d0, d1, ...)`: standard normal by NumPy's legacy polar method,
    /// which caches the second value of each pair for the next draw (also across methods).
    ///
    /// # Errors
    ///
    /// [`RandomError::TooBig`] if the shape cannot be allocated.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // np.random.seed(0); x = np.random.randn(2, 2)
    /// let mut rs = np::RandomState::new(0);
    /// let x = rs.randn((2, 2))?;
    /// assert_eq!(x[[0, 0]], 1.764052345967664);
    /// # Ok::<(), np::RandomError>(())
    /// ```
    pub fn randn<Sh: IntoDimension>(
        &mut self,
        shape: Sh,
    ) -> Result<Array<f64, Sh::Dim>, RandomError> {
        shaped(shape.into_dimension(), |dims| self.normals(0.0, 1.0, dims))
    }

    /// `np.random.standard_normal(size)`: the same stream as [`RandomState::randn`].
    ///
    /// # Errors
    ///
    /// [`RandomError::TooBig`] if the shape cannot be allocated.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // np.random.seed(0); x = np.random.standard_normal(3)
    /// let mut rs = np::RandomState::new(0);
    /// let x = rs.standard_normal(3)?;
    /// assert_eq!(x[0], 1.764052345967664);
    /// # Ok::<(), np::RandomError>(())
    /// ```
    pub fn standard_normal<Sh: IntoDimension>(
        &mut self,
        shape: Sh,
    ) -> Result<Array<f64, Sh::Dim>, RandomError> {
        self.randn(shape)
    }

    /// `np.random.normal(loc, scale, size)`: `loc + scale * g` with `g` as in `randn`.
    ///
    /// # Errors
    ///
    /// [`RandomError::NegativeScale`] if `scale` is negative, `-0.0` included (NumPy's
    /// `ValueError: scale < 0`; NaN passes, as in NumPy); [`RandomError::TooBig`] if the
    /// shape cannot be allocated. Nothing is drawn on error.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // np.random.seed(0); x = np.random.normal(0.0, 0.02, (3, 4))
    /// let mut rs = np::RandomState::new(0);
    /// let x = rs.normal(0.0, 0.02, (3, 4))?;
    /// assert_eq!(x[[0, 0]], 0.02 * 1.764052345967664);
    /// assert!(rs.normal(0.0, -1.0, 2).is_err());
    /// # Ok::<(), np::RandomError>(())
    /// ```
    pub fn normal<Sh: IntoDimension>(
        &mut self,
        loc: f64,
        scale: f64,
        shape: Sh,
    ) -> Result<Array<f64, Sh::Dim>, RandomError> {
        shaped(shape.into_dimension(), |dims| {
            self.normals(loc, scale, dims)
        })
    }

    /// `np.random.randint(low, high, size)` with NumPy's default `int64` dtype: integers in
    /// `[low, high)` by masked rejection, on 32-bit draws when `high - low - 1` fits in 32
    /// bits and on 64-bit draws otherwise. (NumPy also accepts `high = 2**63`, which `i64`
    /// cannot hold.)
    ///
    /// # Errors
    ///
    /// [`RandomError::LowNotBelowHigh`] if `low >= high` (NumPy's `ValueError: low >= high`);
    /// [`RandomError::TooBig`] if the shape cannot be allocated. Nothing is drawn on error.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // np.random.seed(0); idx = np.random.randint(0, 10, 5)
    /// let mut rs = np::RandomState::new(0);
    /// assert_eq!(rs.randint(0, 10, 5)?, array![5, 0, 3, 3, 7]);
    /// # Ok::<(), np::RandomError>(())
    /// ```
    pub fn randint<Sh: IntoDimension>(
        &mut self,
        low: i64,
        high: i64,
        shape: Sh,
    ) -> Result<Array<i64, Sh::Dim>, RandomError> {
        shaped(shape.into_dimension(), |dims| {
            self.integers(low, high, dims)
        })
    }

    /// NumPy's `legacy_double`: 27 + 26 bits of two draws make a double in `[0, 1)`.
    fn next_double(&mut self) -> f64 {
        let a = self.mt.next_u32() >> 5;
        let b = self.mt.next_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) / 9_007_199_254_740_992.0
    }

    /// NumPy's `legacy_gauss`: Marsaglia's polar method, the second value kept for next time.
    fn next_gauss(&mut self) -> f64 {
        if let Some(cached) = self.gauss.take() {
            return cached;
        }
        loop {
            let x1 = 2.0 * self.next_double() - 1.0;
            let x2 = 2.0 * self.next_double() - 1.0;
            let r2 = x1 * x1 + x2 * x2;
            if r2 < 1.0 && r2 != 0.0 {
                // Same operation order as NumPy, so the rounding is the same.
                let f = (-2.0 * r2.ln() / r2).sqrt();
                self.gauss = Some(f * x1);
                return f * x2;
            }
        }
    }

    fn doubles(&mut self, dims: &[usize]) -> Result<Vec<f64>, RandomError> {
        filled(dims, || self.next_double())
    }

    fn uniforms(&mut self, low: f64, high: f64, dims: &[usize]) -> Result<Vec<f64>, RandomError> {
        let range = high - low;
        if !range.is_finite() {
            return Err(RandomError::RangeNotFinite { low, high });
        }
        filled(dims, || low + range * self.next_double())
    }

    fn normals(&mut self, loc: f64, scale: f64, dims: &[usize]) -> Result<Vec<f64>, RandomError> {
        // NumPy checks the sign bit, so -0.0 is refused and NaN is not.
        if scale.is_sign_negative() && !scale.is_nan() {
            return Err(RandomError::NegativeScale { scale });
        }
        filled(dims, || loc + scale * self.next_gauss())
    }

    fn integers(&mut self, low: i64, high: i64, dims: &[usize]) -> Result<Vec<i64>, RandomError> {
        if low >= high {
            return Err(RandomError::LowNotBelowHigh { low, high });
        }
        // Offsets are drawn from the closed range [0, high - 1 - low], which fits in u64.
        let range = (high.wrapping_sub(low) as u64).wrapping_sub(1);
        // The smallest all-ones mask covering the range; a masked draw is kept if <= range.
        // 32-bit draws while the mask fits in 32 bits. (NumPy's special case for a range of
        // exactly 2^32 - 1 draws plainly, which is the same as masking with all ones.)
        let mask = u64::MAX.checked_shr(range.leading_zeros()).unwrap_or(0);
        let mask32 = u32::try_from(mask).ok();
        let mt = &mut self.mt;
        let mut offset = || -> u64 {
            if range == 0 {
                return 0; // NumPy draws nothing for a single possible value.
            }
            loop {
                let x = match mask32 {
                    Some(mask32) => u64::from(mt.next_u32() & mask32),
                    None => mt.next_u64() & mask,
                };
                if x <= range {
                    return x;
                }
            }
        };
        filled(dims, || low.wrapping_add(offset() as i64))
    }
}

impl RngCore for RandomState {
    /// One raw MT19937 output, as NumPy's `next_uint32`.
    fn next_u32(&mut self) -> u32 {
        self.mt.next_u32()
    }

    /// Two raw outputs, the first in the high half, as NumPy's `mt19937_next64`.
    fn next_u64(&mut self) -> u64 {
        self.mt.next_u64()
    }

    /// The bytes of `RandomState.bytes(len)`: little-endian 32-bit draws, the last cut short.
    /// (For `len == 0` NumPy still draws a word; this draws none.)
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        fill_bytes_from_u32(dst, || self.mt.next_u32());
    }
}

/// A `np.random.Generator` on PCG64, as made by [`default_rng`].
///
/// Implements rand's `RngCore` with NumPy's raw PCG64 draws (32-bit draws hand out each
/// 64-bit output in two halves, low first, as NumPy does).
///
/// ```
/// use attention_lab::prelude::*;
///
/// // rng = np.random.default_rng(0); rng.random(2)
/// let mut rng = np::default_rng(0);
/// assert_eq!(rng.random(2)?, array![0.6369616873214543, 0.2697867137638703]);
/// # Ok::<(), np::RandomError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Generator {
    pcg: Pcg64,
    /// The high half of the last 64-bit draw, owed to the next `next_u32`.
    half: Option<u32>,
}

/// `np.random.default_rng(seed)`: NumPy's `SeedSequence(seed)` seeds PCG64.
///
/// ```
/// use attention_lab::prelude::*;
///
/// // rng = np.random.default_rng(42); x = rng.random((2, 3))
/// let mut rng = np::default_rng(42);
/// let x = rng.random((2, 3))?;
/// assert_eq!(x[[0, 0]], 0.7739560485559633);
/// # Ok::<(), np::RandomError>(())
/// ```
#[must_use]
pub fn default_rng(seed: u64) -> Generator {
    let [s_hi, s_lo, i_hi, i_lo] = seed_sequence_u64x4(seed);
    let state = (u128::from(s_hi) << 64) | u128::from(s_lo);
    let stream = (u128::from(i_hi) << 64) | u128::from(i_lo);
    // `Pcg64::new` seeds as PCG's `srandom_r` (inc = stream << 1 | 1, two steps), as NumPy does,
    // and both step before output, so the streams agree without adjustment.
    Generator {
        pcg: Pcg64::new(state, stream),
        half: None,
    }
}

impl Generator {
    /// `rng.random(size)`: the top 53 bits of a 64-bit draw, scaled into `[0, 1)`.
    ///
    /// # Errors
    ///
    /// [`RandomError::TooBig`] if the shape cannot be allocated.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // rng = np.random.default_rng(0); x = rng.random((2, 1))
    /// let mut rng = np::default_rng(0);
    /// let x = rng.random((2, 1))?;
    /// assert_eq!(x[[0, 0]], 0.6369616873214543);
    /// # Ok::<(), np::RandomError>(())
    /// ```
    pub fn random<Sh: IntoDimension>(
        &mut self,
        shape: Sh,
    ) -> Result<Array<f64, Sh::Dim>, RandomError> {
        shaped(shape.into_dimension(), |dims| self.doubles(dims))
    }

    fn doubles(&mut self, dims: &[usize]) -> Result<Vec<f64>, RandomError> {
        filled(dims, || {
            (self.pcg.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
        })
    }
}

impl RngCore for Generator {
    /// Half of a 64-bit draw: the low half, and the high half on the next call (NumPy's PCG64).
    fn next_u32(&mut self) -> u32 {
        if let Some(high) = self.half.take() {
            return high;
        }
        let x = self.pcg.next_u64();
        self.half = Some((x >> 32) as u32);
        x as u32
    }

    /// One PCG64 output; a pending high half stays pending, as in NumPy.
    fn next_u64(&mut self) -> u64 {
        self.pcg.next_u64()
    }

    /// The bytes of `Generator.bytes(len)`: little-endian 32-bit draws, the last cut short.
    /// (For `len == 0` NumPy still draws a word; this draws none.)
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        fill_bytes_from_u32(dst, || self.next_u32());
    }
}

/// The values `fill` gives for a shape, in C order, as an array of that shape: the only
/// generic step after the shims.
fn shaped<A, D: Dimension>(
    dim: D,
    fill: impl FnOnce(&[usize]) -> Result<Vec<A>, RandomError>,
) -> Result<Array<A, D>, RandomError> {
    let values = fill(dim.slice())?;
    let shape = dim.slice().to_vec();
    Array::from_shape_vec(dim, values).map_err(|_| RandomError::TooBig { shape })
}

/// `draw()` once per element of `dims`, without panicking on huge shapes.
fn filled<T>(dims: &[usize], mut draw: impl FnMut() -> T) -> Result<Vec<T>, RandomError> {
    let too_big = || RandomError::TooBig {
        shape: dims.to_vec(),
    };
    let len = dims
        .iter()
        .try_fold(1_usize, |n, &d| n.checked_mul(d))
        .ok_or_else(too_big)?;
    let mut values = Vec::new();
    values.try_reserve_exact(len).map_err(|_| too_big())?;
    values.extend(std::iter::repeat_with(&mut draw).take(len));
    Ok(values)
}

fn fill_bytes_from_u32(dst: &mut [u8], mut next_u32: impl FnMut() -> u32) {
    for chunk in dst.chunks_mut(4) {
        let word = next_u32().to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

const MT_N: usize = 624;

/// MT19937's `init_by_array`. Written out because `rand_mt` stops mixing after 624 key
/// words, where NumPy (and the reference) mixes in every word of a longer key.
fn init_by_array(key: &[u32]) -> [u32; MT_N] {
    let mut mt = [0_u32; MT_N];
    mt[0] = 19_650_218;
    for i in 1..MT_N {
        mt[i] = 1_812_433_253_u32
            .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
            .wrapping_add(i as u32);
    }
    let mut i = 1;
    for (j, &word) in key.iter().enumerate().cycle().take(MT_N.max(key.len())) {
        let prev = mt[i - 1] ^ (mt[i - 1] >> 30);
        mt[i] = (mt[i] ^ prev.wrapping_mul(1_664_525))
            .wrapping_add(word)
            .wrapping_add(j as u32);
        i = next_index(&mut mt, i);
    }
    for _ in 1..MT_N {
        let prev = mt[i - 1] ^ (mt[i - 1] >> 30);
        mt[i] = (mt[i] ^ prev.wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
        i = next_index(&mut mt, i);
    }
    mt[0] = 0x8000_0000; // the reference's guarantee of a non-zero state
    mt
}

/// Steps `init_by_array`'s index, wrapping to 1 and carrying the last word to the front.
fn next_index(mt: &mut [u32; MT_N], i: usize) -> usize {
    if i + 1 < MT_N {
        return i + 1;
    }
    mt[0] = mt[MT_N - 1];
    1
}

/// MT19937's output tempering (`rand_mt` keeps its own private).
fn temper(mut x: u32) -> u32 {
    x ^= x >> 11;
    x ^= (x << 7) & 0x9d2c_5680;
    x ^= (x << 15) & 0xefc6_0000;
    x ^ (x >> 18)
}

// NumPy SeedSequence's hash constants.
const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;

/// `SeedSequence(seed).generate_state(4, np.uint64)`, the words PCG64 is seeded from.
fn seed_sequence_u64x4(seed: u64) -> [u64; 4] {
    // The seed's 32-bit digits, least significant first; 0 is one digit.
    let (lo, hi) = (seed as u32, (seed >> 32) as u32);
    let entropy: &[u32] = if hi == 0 { &[lo] } else { &[lo, hi] };
    let pool = mix_entropy(entropy);

    let mut hash_const = INIT_B;
    let words: [u32; 8] = std::array::from_fn(|i| {
        let x = pool[i % pool.len()] ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_B);
        let x = x.wrapping_mul(hash_const);
        x ^ (x >> XSHIFT)
    });
    // Pairs of 32-bit words read as little-endian 64-bit words.
    std::array::from_fn(|i| u64::from(words[2 * i]) | (u64::from(words[2 * i + 1]) << 32))
}

/// SeedSequence's 4-word pool after mixing in `entropy` (at most 4 words here, as seeds are u64).
fn mix_entropy(entropy: &[u32]) -> [u32; 4] {
    let mut hash_const = INIT_A;
    let mut hashmix = |value: u32| {
        let x = value ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_A);
        let x = x.wrapping_mul(hash_const);
        x ^ (x >> XSHIFT)
    };
    let mix = |x: u32, y: u32| {
        let r = MIX_MULT_L
            .wrapping_mul(x)
            .wrapping_sub(MIX_MULT_R.wrapping_mul(y));
        r ^ (r >> XSHIFT)
    };
    let mut pool: [u32; 4] = std::array::from_fn(|i| hashmix(entropy.get(i).copied().unwrap_or(0)));
    // Every word into every other, so late entropy reaches early words.
    for src in 0..pool.len() {
        for dst in 0..pool.len() {
            if src != dst {
                pool[dst] = mix(pool[dst], hashmix(pool[src]));
            }
        }
    }
    pool
}
