//! Causal self-attention with grouped key/value heads (GQA; MQA with one) and RoPE, reading
//! and extending a layer's KV cache: Llama's attention.

use ndarray::{s, Array2, ArrayView2};

use super::cache::LayerCache;
use super::lean::StepTables;
use crate::error::{AttentionError, Operand};
use crate::layers::attention::attend;
use crate::layers::linear::Linear;
use crate::layers::mask::Mask;
use crate::layers::rope::Rope;
use crate::layers::softmax::Softmax;

/// A decoder's attention: `heads` query heads share `kv_heads` key/value heads (each group
/// of `heads / kv_heads` query heads reads one), rows turned by RoPE, a causal mask (or a
/// sliding window), and W_O. W_Q is E x (heads d), W_K and W_V E x (kv_heads d), W_O
/// (heads d) x E, `d` being the rope's head width.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupedAttention {
    wq: Linear,
    wk: Linear,
    wv: Linear,
    wo: Linear,
    heads: usize,
    kv_heads: usize,
    rope: Rope,
    window: Option<usize>,
}

/// Every intermediate of one pass of [`GroupedAttention`] over new tokens; the keys and
/// values (rotated keys, all tokens so far) are in the cache it extended.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupedOutput {
    /// The new tokens' queries `X W_Q`, turned by RoPE at their positions: tokens x heads d.
    pub q: Array2<f64>,
    /// Each query head's weights over every key so far: new tokens x all tokens.
    pub weights: Vec<Array2<f64>>,
    /// The heads' outputs side by side: tokens x heads d.
    pub z: Array2<f64>,
    /// `z W_O`: tokens x E.
    pub output: Array2<f64>,
}

/// A [`GroupedOutput`] before W_O: what [`GroupedAttention::attend_heads`] gives.
pub(crate) struct Heads {
    /// The rotated queries, tokens x heads d.
    pub(crate) q: Array2<f64>,
    /// Each query head's weights.
    pub(crate) weights: Vec<Array2<f64>>,
    /// The heads' outputs side by side, tokens x heads d.
    pub(crate) z: Array2<f64>,
}

impl GroupedAttention {
    /// A grouped-query attention from its projections, its head counts and its RoPE.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// // E = 4, four query heads of 2 sharing two key/value heads
    /// let rope = Rope::new(2, 10000.0)?;
    /// let attention = GroupedAttention::new(
    ///     Array2::ones((4, 8)), Array2::ones((4, 4)), Array2::ones((4, 4)), Array2::ones((8, 4)),
    ///     4, 2, rope,
    /// )?;
    /// assert_eq!(attention.group(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Setting`] when `kv_heads` is 0 or does not divide `heads`;
    /// [`AttentionError::Mismatch`] naming the matrix whose shape does not fit.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        wq: impl Into<Linear>,
        wk: impl Into<Linear>,
        wv: impl Into<Linear>,
        wo: impl Into<Linear>,
        heads: usize,
        kv_heads: usize,
        rope: Rope,
    ) -> Result<GroupedAttention, AttentionError> {
        let (wq, wk, wv, wo) = (wq.into(), wk.into(), wv.into(), wo.into());
        check_groups(heads, kv_heads)?;
        let d = rope.head_dim();
        let e = wq.nrows();
        let fits = [
            (
                "W_Q",
                &wq,
                (e, heads * d),
                "W_Q must be E x (n_heads head_dim)",
            ),
            (
                "W_K",
                &wk,
                (e, kv_heads * d),
                "W_K must be E x (n_kv_heads head_dim)",
            ),
            (
                "W_V",
                &wv,
                (e, kv_heads * d),
                "W_V must be E x (n_kv_heads head_dim)",
            ),
            (
                "W_O",
                &wo,
                (heads * d, e),
                "W_O must be (n_heads head_dim) x E",
            ),
        ];
        for (name, w, want, rule) in fits {
            if w.dim() != want {
                return Err(AttentionError::mismatch(
                    Operand::new(name, &w.shape()),
                    Operand::new("n_heads, n_kv_heads, head_dim", &[heads, kv_heads, d]),
                    rule,
                ));
            }
        }
        Ok(GroupedAttention {
            wq,
            wk,
            wv,
            wo,
            heads,
            kv_heads,
            rope,
            window: None,
        })
    }

    /// The same attention with a sliding window: each query sees only the `window` most
    /// recent tokens up to itself ([`Mask::sliding_window`]).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w, 1, 1, Rope::new(2, 10.0)?)?
    ///     .with_window(3)?;
    /// assert_eq!(attention.window(), Some(3));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Setting`] when `window` is 0.
    pub fn with_window(mut self, window: usize) -> Result<GroupedAttention, AttentionError> {
        Mask::sliding_window(1, 1, window)?;
        self.window = Some(window);
        Ok(self)
    }

    /// The number of query heads.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Array2::<f64>::eye(2);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w, 1, 1, Rope::new(2, 10.0)?)?;
    /// assert_eq!(attention.heads(), 1);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn heads(&self) -> usize {
        self.heads
    }

    /// The number of key/value heads (1: multi-query attention; `heads`: multi-head).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Array2::<f64>::eye(2);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w, 1, 1, Rope::new(2, 10.0)?)?;
    /// assert_eq!(attention.kv_heads(), 1);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn kv_heads(&self) -> usize {
        self.kv_heads
    }

    /// Query heads per key/value head.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Array2::<f64>::eye(2);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w, 1, 1, Rope::new(2, 10.0)?)?;
    /// assert_eq!(attention.group(), 1);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads
    }

    /// The sliding window, if any.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Array2::<f64>::eye(2);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w, 1, 1, Rope::new(2, 10.0)?)?;
    /// assert_eq!(attention.window(), None);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn window(&self) -> Option<usize> {
        self.window
    }

    /// The rotary embedding of the queries and keys.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Array2::<f64>::eye(2);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w, 1, 1, Rope::new(2, 10.0)?)?;
    /// assert_eq!(attention.rope().theta(), 10.0);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn rope(&self) -> &Rope {
        &self.rope
    }

    /// The width E of the rows it reads and writes (the rows of W_Q).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Array2::<f64>::eye(2);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w, 1, 1, Rope::new(2, 10.0)?)?;
    /// assert_eq!(attention.width(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn width(&self) -> usize {
        self.wq.nrows()
    }

    /// The output projection W_O, (heads d) x E.
    pub(crate) fn wo(&self) -> &Linear {
        &self.wo
    }

    /// The width of one key/value head's row in the cache, `kv_heads * head_dim`.
    pub(crate) fn kv_width(&self) -> usize {
        self.wk.ncols()
    }

    /// Attends from the new tokens `x` (at the positions after the cache's) to every token
    /// so far, after appending their rotated keys and values to `cache`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w, 1, 1, Rope::new(2, 10.0)?)?;
    /// let mut cache = LayerCache::new(2);
    /// let out = attention.forward(&array![[1.0, 0.0], [0.0, 1.0]], &mut cache)?;
    /// assert_eq!(out.weights[0][[0, 1]], 0.0); // causal: token 0 never sees token 1
    /// assert_eq!(cache.len(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when the columns of `x` differ from the rows of W_Q, or
    /// the cache is not as wide as this layer's keys.
    pub fn forward<'a>(
        &self,
        x: impl Into<ArrayView2<'a, f64>>,
        cache: &mut LayerCache,
    ) -> Result<GroupedOutput, AttentionError> {
        Ok(self.project_out(self.attend_heads(x.into(), cache, &StepTables::default())?))
    }

    /// [`GroupedAttention::forward`] up to W_O: the rotated queries, each head's weights and
    /// the heads' outputs `z`, which an intervention may change before
    /// [`GroupedAttention::project_out`] ([`crate::models::decoder::Intervention`]).
    /// The RoPE tables and the mask come from `tables` when it has them (made once for every
    /// layer of a lean pass), else are made here (`StepTables::default()`, the teaching path).
    pub(crate) fn attend_heads(
        &self,
        x: ArrayView2<'_, f64>,
        cache: &mut LayerCache,
        tables: &StepTables<'_>,
    ) -> Result<Heads, AttentionError> {
        if x.ncols() != self.wq.nrows() {
            return Err(AttentionError::mismatch(
                Operand::new("X", x.shape()),
                Operand::new("W_Q", &self.wq.shape()),
                "the columns of X must equal the rows of W_Q",
            ));
        }
        if cache.width() != self.kv_width() {
            return Err(AttentionError::mismatch(
                Operand::new("the cache's keys", &[cache.len(), cache.width()]),
                Operand::new("W_K", &self.wk.shape()),
                "the cache must hold this layer's keys: as wide as W_K",
            ));
        }
        let q = tables.rotate(&self.rope, self.wq.project(x).view(), cache.len())?;
        self.append_kv(x, cache, tables)?;
        let mask = tables.mask(self.window, x.nrows(), cache.len())?;
        let (z, weights) = attend_groups(
            q.view(),
            cache.k().view(),
            cache.v().view(),
            [self.heads, self.kv_heads, self.rope.head_dim()],
            Some(&mask),
        )?;
        Ok(Heads { q, weights, z })
    }

    /// Appends the keys (turned by RoPE at their positions, from the cache's length on) and
    /// values of the rows `x` (already normed, as wide as W_K's rows) to `cache`: what a pass
    /// over `x` leaves there, without its queries.
    pub(crate) fn append_kv(
        &self,
        x: ArrayView2<'_, f64>,
        cache: &mut LayerCache,
        tables: &StepTables<'_>,
    ) -> Result<(), AttentionError> {
        let k = tables.rotate(&self.rope, self.wk.project(x).view(), cache.len())?;
        let v = self.wv.project(x);
        cache.append(k.view(), v.view());
        Ok(())
    }

    /// The attention's output `z W_O`, kept with the queries, weights and `z` it came from.
    pub(crate) fn project_out(&self, Heads { q, weights, z }: Heads) -> GroupedOutput {
        let output = self.wo.project(z.view());
        GroupedOutput {
            q,
            weights,
            z,
            output,
        }
    }
}

/// Grouped-query attention on heads already projected: `q` is heads x (tokens x d) side by
/// side (tokens x heads d), `k` and `v` tokens x kv_heads d; query head `h` reads key/value
/// head `h / (heads / kv_heads)`. PyTorch's
/// `F.scaled_dot_product_attention(q, k, v, attn_mask, enable_gqa=True)` with heads laid side
/// by side instead of stacked. Returns the heads' outputs side by side (tokens x heads d).
///
/// ```
/// use attention_lab::prelude::*;
///
/// // two query heads of width 1 share one key/value head
/// let q = array![[1.0, -1.0], [0.0, 2.0]];
/// let k = array![[1.0], [0.0]];
/// let v = array![[10.0], [20.0]];
/// let z = grouped_query_attention(&q, &k, &v, 2, 1, Some(&Mask::causal(2)))?;
/// assert_eq!(z.row(0), array![10.0, 10.0]); // token 0 sees only itself
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// [`AttentionError::Setting`] when `kv_heads` does not divide `heads`;
/// [`AttentionError::Mismatch`] when the widths are not whole heads of one width, K and V
/// differ in shape, or the mask is not queries x keys.
pub fn grouped_query_attention<'a>(
    q: impl Into<ArrayView2<'a, f64>>,
    k: impl Into<ArrayView2<'a, f64>>,
    v: impl Into<ArrayView2<'a, f64>>,
    heads: usize,
    kv_heads: usize,
    mask: Option<&Mask>,
) -> Result<Array2<f64>, AttentionError> {
    let (q, k, v) = (q.into(), k.into(), v.into());
    check_groups(heads, kv_heads)?;
    let d = q.ncols() / heads;
    if q.ncols() % heads != 0 || k.ncols() != kv_heads * d || k.dim() != v.dim() {
        return Err(AttentionError::mismatch(
            Operand::new("Q", q.shape()),
            Operand::new("K", k.shape()),
            "Q must be n_heads heads of one width, and K and V n_kv_heads heads of that width",
        ));
    }
    Ok(attend_groups(q, k, v, [heads, kv_heads, d], mask)?.0)
}

/// Each query head `h` attends over key/value head `h / (heads / kv_heads)`: the heads'
/// outputs side by side, and each head's weights. `sizes` is `[heads, kv_heads, d]`, the
/// caller having checked that the widths are whole heads of `d`.
fn attend_groups(
    q: ArrayView2<'_, f64>,
    k: ArrayView2<'_, f64>,
    v: ArrayView2<'_, f64>,
    [heads, kv_heads, d]: [usize; 3],
    mask: Option<&Mask>,
) -> Result<(Array2<f64>, Vec<Array2<f64>>), AttentionError> {
    let mut z = Array2::zeros((q.nrows(), heads * d));
    let mut weights = Vec::with_capacity(heads);
    for h in 0..heads {
        let g = h / (heads / kv_heads);
        let columns = s![.., h * d..(h + 1) * d];
        let group = s![.., g * d..(g + 1) * d];
        let head = attend(
            q.slice(columns),
            k.slice(group),
            v.slice(group),
            Softmax::Stable,
            mask,
        )?;
        z.slice_mut(columns).assign(&head.output);
        weights.push(head.weights);
    }
    Ok((z, weights))
}

/// Each key/value head serves a whole group of query heads.
fn check_groups(heads: usize, kv_heads: usize) -> Result<(), AttentionError> {
    if heads == 0 {
        return Err(AttentionError::Setting {
            name: "n_heads",
            value: "0".into(),
            rule: "an attention layer needs at least one query head",
        });
    }
    if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
        return Err(AttentionError::Setting {
            name: "n_kv_heads",
            value: format!("{kv_heads} for {heads} query heads"),
            rule: "each key/value head serves a whole group of query heads: it must be at least \
                   1 and divide n_heads",
        });
    }
    Ok(())
}
