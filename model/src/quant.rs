//! ggml's block formats, and a matrix kept in them that multiplies in `f64`.
//!
//! A quantised row is blocks of 32 values, each block a scale (an IEEE half) and small
//! integers: Q8_0 `d q` (q an `i8`), Q4_0 `d (q - 8)` and Q4_1 `d q + m` (q a 4-bit nibble, the
//! 16 low nibbles first, then the 16 high ones). Each value is computed in `f32` exactly as
//! gguf-py's `dequantize` computes it (`d * q`, then `+ m`, each rounded to `f32`), then
//! widened to `f64` without rounding, so the `f64` matrix here is bit for bit the float32 array
//! that transformers loads, cast to float64.

use std::sync::Arc;

use attention_lab::linear::Packed;
use ndarray::linalg::general_mat_mul;
use ndarray::{s, Array2, ArrayView2, ArrayViewMut2, Axis};

/// A file's bytes, mapped (or in memory), shared by the matrices that point into it.
pub(crate) type Bytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// How a tensor's values are stored.
///
/// ```
/// use attention_lab_model::quant::BlockType;
/// assert_eq!((BlockType::Q4_1.block_values(), BlockType::Q4_1.block_bytes()), (32, 20));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum BlockType {
    /// `f32`, one value a block.
    F32,
    /// IEEE half, one value a block.
    F16,
    /// 32 values: a half scale `d`, then 16 bytes of nibbles `q`: `d (q - 8)`.
    Q4_0,
    /// 32 values: half `d` and `m`, then 16 bytes of nibbles `q`: `d q + m`.
    Q4_1,
    /// 32 values: a half scale `d`, then 32 `i8` `q`: `d q`.
    Q8_0,
}

impl BlockType {
    /// The type of ggml's number (`GGML_TYPE_*`), if this reader knows it.
    ///
    /// ```
    /// use attention_lab_model::quant::BlockType;
    /// assert_eq!(BlockType::from_ggml(3), Some(BlockType::Q4_1));
    /// assert_eq!(BlockType::from_ggml(12), None); // Q4_K
    /// ```
    pub fn from_ggml(kind: u32) -> Option<BlockType> {
        Some(match kind {
            0 => BlockType::F32,
            1 => BlockType::F16,
            2 => BlockType::Q4_0,
            3 => BlockType::Q4_1,
            8 => BlockType::Q8_0,
            _ => return None,
        })
    }

    /// Its name as ggml writes it.
    ///
    /// ```
    /// use attention_lab_model::quant::BlockType;
    /// assert_eq!(BlockType::Q8_0.name(), "Q8_0");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            BlockType::F32 => "F32",
            BlockType::F16 => "F16",
            BlockType::Q4_0 => "Q4_0",
            BlockType::Q4_1 => "Q4_1",
            BlockType::Q8_0 => "Q8_0",
        }
    }

    /// Values a block.
    ///
    /// ```
    /// use attention_lab_model::quant::BlockType;
    /// assert_eq!(BlockType::F32.block_values(), 1);
    /// ```
    pub fn block_values(self) -> usize {
        match self {
            BlockType::F32 | BlockType::F16 => 1,
            BlockType::Q4_0 | BlockType::Q4_1 | BlockType::Q8_0 => 32,
        }
    }

    /// Bytes a block.
    ///
    /// ```
    /// use attention_lab_model::quant::BlockType;
    /// assert_eq!(BlockType::Q8_0.block_bytes(), 34);
    /// ```
    pub fn block_bytes(self) -> usize {
        match self {
            BlockType::F32 => 4,
            BlockType::F16 => 2,
            BlockType::Q4_0 => 18,
            BlockType::Q4_1 => 20,
            BlockType::Q8_0 => 34,
        }
    }

    /// Expands whole blocks `bytes` into `out` (as many values as the blocks hold).
    ///
    /// ```
    /// use attention_lab_model::quant::BlockType;
    /// let mut block = vec![0u8; 20];
    /// block[..2].copy_from_slice(&0x3800u16.to_le_bytes()); // d = 0.5
    /// block[2..4].copy_from_slice(&0x3c00u16.to_le_bytes()); // m = 1
    /// block[4] = 0x21; // values 0 and 16: nibbles 1 and 2
    /// let mut out = [0.0; 32];
    /// BlockType::Q4_1.dequantise(&block, &mut out);
    /// assert_eq!((out[0], out[16], out[1]), (1.5, 2.0, 1.0));
    /// ```
    pub fn dequantise(self, bytes: &[u8], out: &mut [f64]) {
        let half = |b: &[u8]| half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
        match self {
            BlockType::F32 => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                    *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]).into();
                }
            }
            BlockType::F16 => {
                for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                    *o = half(b).into();
                }
            }
            BlockType::Q8_0 => {
                for (o, b) in out.chunks_exact_mut(32).zip(bytes.chunks_exact(34)) {
                    let d = half(b);
                    for (o, &q) in o.iter_mut().zip(&b[2..34]) {
                        *o = (d * f32::from(q as i8)).into();
                    }
                }
            }
            BlockType::Q4_0 => {
                for (o, b) in out.chunks_exact_mut(32).zip(bytes.chunks_exact(18)) {
                    let d = half(b);
                    let (lo, hi) = o.split_at_mut(16);
                    for ((lo, hi), &q) in lo.iter_mut().zip(hi).zip(&b[2..18]) {
                        *lo = (d * f32::from((q & 15) as i8 - 8)).into();
                        *hi = (d * f32::from((q >> 4) as i8 - 8)).into();
                    }
                }
            }
            BlockType::Q4_1 => {
                for (o, b) in out.chunks_exact_mut(32).zip(bytes.chunks_exact(20)) {
                    let (d, m) = (half(b), half(&b[2..]));
                    let (lo, hi) = o.split_at_mut(16);
                    for ((lo, hi), &q) in lo.iter_mut().zip(hi).zip(&b[4..20]) {
                        // Two roundings, as NumPy's `d * q + m` on float32 arrays.
                        *lo = (d * f32::from(q & 15) + m).into();
                        *hi = (d * f32::from(q >> 4) + m).into();
                    }
                }
            }
        }
    }
}

/// A matrix `M` of `rows` rows of `cols` values in one of ggml's block formats, its bytes
/// shared with the mapped file. As a [`Packed`] weight it is `W = M` (an embedding table, a
/// row a token) or, [`transposed`](QuantMatrix::transposed), `W = Mᵀ` (a projection: GGUF
/// stores `nn.Linear`'s weight, a row an output).
///
/// ```no_run
/// use attention_lab_model::gguf::Gguf;
/// let file = Gguf::open("model.gguf".as_ref())?;
/// let w = file.matrix("blk.0.attn_v.weight")?;
/// assert_eq!(w.row(0).len(), w.cols());
/// # Ok::<(), attention_lab_model::ModelError>(())
/// ```
#[derive(Clone)]
pub struct QuantMatrix {
    bytes: Bytes,
    start: usize,
    kind: BlockType,
    rows: usize,
    cols: usize,
    /// Row `i` of the matrix is stored row `order[i]` (llama.cpp's Q/K rows undone).
    order: Option<Arc<[usize]>>,
    transposed: bool,
}

impl std::fmt::Debug for QuantMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuantMatrix")
            .field("kind", &self.kind)
            .field("rows", &self.rows)
            .field("cols", &self.cols)
            .field("reordered", &self.order.is_some())
            .field("transposed", &self.transposed)
            .finish()
    }
}

impl QuantMatrix {
    /// `rows` rows of `cols` values of `kind` from `bytes[start..]`; the caller has checked
    /// that they fit (the GGUF reader does).
    pub(crate) fn new(
        bytes: Bytes,
        start: usize,
        kind: BlockType,
        rows: usize,
        cols: usize,
    ) -> QuantMatrix {
        QuantMatrix {
            bytes,
            start,
            kind,
            rows,
            cols,
            order: None,
            transposed: false,
        }
    }

    /// Its rows.
    ///
    /// ```no_run
    /// # let file = attention_lab_model::gguf::Gguf::open("model.gguf".as_ref())?;
    /// assert_eq!(file.matrix("token_embd.weight")?.rows(), 49152);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The values of a row.
    ///
    /// ```no_run
    /// # let file = attention_lab_model::gguf::Gguf::open("model.gguf".as_ref())?;
    /// assert_eq!(file.matrix("token_embd.weight")?.cols(), 576);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// How its values are stored.
    ///
    /// ```no_run
    /// # use attention_lab_model::quant::BlockType;
    /// # let file = attention_lab_model::gguf::Gguf::open("model.gguf".as_ref())?;
    /// assert_eq!(file.matrix("token_embd.weight")?.kind(), BlockType::Q8_0);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn kind(&self) -> BlockType {
        self.kind
    }

    /// The same matrix with its rows in another order: row `i` is stored row `order[i]`.
    /// `order` must be a permutation of the rows (the caller makes it).
    pub(crate) fn reordered(mut self, order: Vec<usize>) -> QuantMatrix {
        debug_assert_eq!(order.len(), self.rows);
        self.order = Some(order.into());
        self
    }

    /// As a projection's weight, `W = Mᵀ`: `x W` is each row of `x` against each row of `M`.
    ///
    /// ```no_run
    /// use attention_lab::linear::Packed;
    /// # let file = attention_lab_model::gguf::Gguf::open("model.gguf".as_ref())?;
    /// let w = file.matrix("blk.0.ffn_up.weight")?.transposed(); // 1536 rows of 576
    /// assert_eq!(w.dim(), (576, 1536));
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn transposed(mut self) -> QuantMatrix {
        self.transposed = !self.transposed;
        self
    }

    fn row_bytes(&self) -> usize {
        self.cols / self.kind.block_values() * self.kind.block_bytes()
    }

    /// Row `i` of `M` into `out` (`cols` values).
    fn row_into(&self, i: usize, out: &mut [f64]) {
        let stored = self.order.as_ref().map_or(i, |o| o[i]);
        let n = self.row_bytes();
        let at = self.start + stored * n;
        self.kind
            .dequantise(&(*self.bytes).as_ref()[at..at + n], out);
    }

    /// Row `i` of `M` in `f64` (stored order undone).
    ///
    /// ```no_run
    /// # let file = attention_lab_model::gguf::Gguf::open("model.gguf".as_ref())?;
    /// let embedding = file.matrix("token_embd.weight")?.row(1);
    /// assert_eq!(embedding.len(), 576);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn row(&self, i: usize) -> Vec<f64> {
        let mut out = vec![0.0; self.cols];
        self.row_into(i, &mut out);
        out
    }

    /// `M` in `f64`, as stored (not transposed).
    ///
    /// ```no_run
    /// # let file = attention_lab_model::gguf::Gguf::open("model.gguf".as_ref())?;
    /// let m = file.matrix("blk.0.attn_k.weight")?.dequantised();
    /// assert_eq!(m.dim(), (192, 576));
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn dequantised(&self) -> Array2<f64> {
        let mut out = Array2::zeros((self.rows, self.cols));
        for (i, mut row) in out.rows_mut().into_iter().enumerate() {
            self.row_into(
                i,
                row.as_slice_mut()
                    .expect("a fresh array's rows are contiguous"),
            );
        }
        out
    }

    /// `x Mᵀ`: each row of `x` against each row of `M`, on every core when the product is
    /// large. A few rows of `x` (a decoding step) are dotted with each weight row as its
    /// blocks are expanded; more (a prefill) take the rows of `M` a panel at a time into
    /// ndarray's product.
    fn times_rows(&self, x: ArrayView2<'_, f64>) -> Array2<f64> {
        let mut out = Array2::zeros((x.nrows(), self.rows));
        let work = x
            .nrows()
            .saturating_mul(self.rows)
            .saturating_mul(self.cols);
        let threads = if work < 1 << 18 {
            1
        } else {
            std::thread::available_parallelism().map_or(1, usize::from)
        };
        let per = self.rows.div_ceil(threads).max(1);
        let x = x.as_standard_layout();
        let x = x.view();
        std::thread::scope(|scope| {
            let mut parts = out.axis_chunks_iter_mut(Axis(1), per).enumerate();
            let first = parts.next();
            for (i, part) in parts {
                scope.spawn(move || self.times_rows_into(x, i * per, part));
            }
            if let Some((i, part)) = first {
                self.times_rows_into(x, i * per, part);
            }
        });
        out
    }

    /// Columns `first..` of `x Mᵀ` into `out`; `x` is in standard layout.
    fn times_rows_into(
        &self,
        x: ArrayView2<'_, f64>,
        first: usize,
        mut out: ArrayViewMut2<'_, f64>,
    ) {
        if x.nrows() <= DOT_ROWS {
            let n = self.row_bytes();
            for (j, mut column) in out.columns_mut().into_iter().enumerate() {
                let i = first + j;
                let stored = self.order.as_ref().map_or(i, |o| o[i]);
                let at = self.start + stored * n;
                let row = &(*self.bytes).as_ref()[at..at + n];
                for (xi, x) in x.rows().into_iter().enumerate() {
                    let x = x.as_slice().expect("standard layout");
                    column[xi] = dot_blocks(self.kind, row, x);
                }
            }
            return;
        }
        const PANEL: usize = 128;
        let mut panel = Array2::zeros((PANEL.min(out.ncols()), self.cols));
        for start in (0..out.ncols()).step_by(PANEL) {
            let n = PANEL.min(out.ncols() - start);
            for (j, mut row) in panel.rows_mut().into_iter().take(n).enumerate() {
                self.row_into(first + start + j, row.as_slice_mut().expect("contiguous"));
            }
            let mut part = out.slice_mut(s![.., start..start + n]);
            general_mat_mul(1.0, &x, &panel.slice(s![..n, ..]).t(), 0.0, &mut part);
        }
    }
}

/// Up to this many rows of `x`, each is dotted with each weight row as it is expanded; past
/// it the rows are expanded once into a panel for ndarray's product.
const DOT_ROWS: usize = 4;

/// `row · x`, the row's blocks expanded as [`BlockType::dequantise`] expands them (each
/// weight the same `f32`), on AVX2 where the CPU has it.
fn dot_blocks(kind: BlockType, row: &[u8], x: &[f64]) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if matches!(kind, BlockType::Q4_1 | BlockType::Q8_0) && avx2::detect() {
            // SAFETY: the CPU has AVX2, FMA and F16C (just detected); the row is whole blocks
            // and `x` one value a weight (the GGUF reader and the caller's shapes).
            return unsafe { avx2::dot(kind, row, x) };
        }
    }
    dot_blocks_portable(kind, row, x)
}

/// The portable kernel: a block of 32 expanded to `f32` (exactly as gguf-py), widened, and
/// multiplied into eight running sums.
fn dot_blocks_portable(kind: BlockType, row: &[u8], x: &[f64]) -> f64 {
    let per = kind.block_values();
    let mut w = vec![0.0; per];
    let mut total = 0.0;
    for (b, x) in row
        .chunks_exact(kind.block_bytes())
        .zip(x.chunks_exact(per))
    {
        kind.dequantise(b, &mut w);
        total += dot(&w, x);
    }
    total
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::BlockType;
    use std::arch::x86_64::*;

    pub(super) fn detect() -> bool {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    }

    /// `row · x` for Q4_1 or Q8_0 rows: eight weights at a time from bytes to `f32` (`d q`,
    /// then `+ m`, two roundings, as gguf-py: no fused multiply-add there), widened to `f64`
    /// and fused into four running sums.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; `row` must be whole blocks of `kind` and `x`
    /// hold at least 32 values a block.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot(kind: BlockType, row: &[u8], x: &[f64]) -> f64 {
        let mut acc = [_mm256_setzero_pd(); 4];
        let bytes = kind.block_bytes();
        let blocks = row.len() / bytes;
        assert!(x.len() >= blocks * 32, "x is shorter than the row");
        for i in 0..blocks {
            // SAFETY: block `i` lies in `row` (`blocks` whole ones) and its 32 values of `x`
            // in `x` (asserted above), so both offsets stay inside their slices.
            let (b, x) = unsafe { (row.as_ptr().add(i * bytes), x.as_ptr().add(i * 32)) };
            // The eight groups of eight weights, as f32.
            let groups: [__m256; 4] = match kind {
                // SAFETY: a Q4_1 block is 20 bytes from `b` (2 + 2 scale bytes, 16 of nibbles),
                // all inside `row`; the intrinsics need AVX2 and F16C, which the caller has.
                BlockType::Q4_1 => unsafe {
                    let dm = _mm_cvtph_ps(_mm_cvtsi32_si128(b.cast::<i32>().read_unaligned()));
                    let d = _mm256_broadcastss_ps(dm);
                    let m = _mm256_broadcastss_ps(_mm_movehdup_ps(dm));
                    let q = _mm_loadu_si128(b.add(4).cast());
                    let nibbles = _mm_set1_epi8(0x0f);
                    let lo = _mm_and_si128(q, nibbles);
                    let hi = _mm_and_si128(_mm_srli_epi16::<4>(q), nibbles);
                    let weights = |q: __m128i| {
                        let q = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
                        _mm256_add_ps(_mm256_mul_ps(d, q), m)
                    };
                    [
                        weights(lo),
                        weights(_mm_srli_si128::<8>(lo)),
                        weights(hi),
                        weights(_mm_srli_si128::<8>(hi)),
                    ]
                },
                // SAFETY: a Q8_0 block is 34 bytes from `b` (a 2-byte scale, then 32 bytes
                // read 8 at a time), all inside `row`; AVX2 and F16C as above.
                BlockType::Q8_0 => unsafe {
                    let half = _mm_cvtsi32_si128(i32::from(b.cast::<u16>().read_unaligned()));
                    let d = _mm256_broadcastss_ps(_mm_cvtph_ps(half));
                    let weights = |at: usize| {
                        let q = _mm_loadl_epi64(b.add(2 + at).cast());
                        _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)))
                    };
                    [weights(0), weights(8), weights(16), weights(24)]
                },
                _ => unreachable!("only Q4_1 and Q8_0 come here"),
            };
            for (g, w) in groups.into_iter().enumerate() {
                // SAFETY: group `g` reads x[8g..8g + 8] of this block's 32 values, inside `x`;
                // AVX2 and FMA as above.
                unsafe {
                    let lo = _mm256_cvtps_pd(_mm256_castps256_ps128(w));
                    let hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(w));
                    let x = x.add(8 * g);
                    acc[g % 2 * 2] = _mm256_fmadd_pd(lo, _mm256_loadu_pd(x), acc[g % 2 * 2]);
                    acc[g % 2 * 2 + 1] =
                        _mm256_fmadd_pd(hi, _mm256_loadu_pd(x.add(4)), acc[g % 2 * 2 + 1]);
                }
            }
        }
        let sum = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
        let mut lanes = [0.0; 4];
        // SAFETY: four f64 lanes into four f64.
        unsafe { _mm256_storeu_pd(lanes.as_mut_ptr(), sum) };
        (lanes[0] + lanes[1]) + (lanes[2] + lanes[3])
    }
}

/// `a · b` with eight running sums, in the order the vector kernels sum.
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

impl Packed for QuantMatrix {
    fn dim(&self) -> (usize, usize) {
        if self.transposed {
            (self.cols, self.rows)
        } else {
            (self.rows, self.cols)
        }
    }

    fn to_dense(&self) -> Array2<f64> {
        let m = self.dequantised();
        if self.transposed {
            m.reversed_axes()
        } else {
            m
        }
    }

    fn bytes(&self) -> usize {
        self.rows * self.row_bytes()
    }

    fn project(&self, x: ArrayView2<'_, f64>) -> Array2<f64> {
        if self.transposed {
            self.times_rows(x)
        } else {
            x.dot(&self.dequantised())
        }
    }

    fn project_t(&self, x: ArrayView2<'_, f64>) -> Array2<f64> {
        if self.transposed {
            x.dot(&self.dequantised())
        } else {
            self.times_rows(x)
        }
    }

    fn rows(&self, ids: &[usize]) -> Array2<f64> {
        if self.transposed {
            return self.to_dense().select(Axis(0), ids);
        }
        let mut out = Array2::zeros((ids.len(), self.cols));
        for (&id, mut row) in ids.iter().zip(out.rows_mut()) {
            self.row_into(id, row.as_slice_mut().expect("contiguous"));
        }
        out
    }
}
