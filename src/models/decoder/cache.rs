//! The KV cache: every layer's keys (already turned by RoPE) and values of the tokens so far,
//! so that a new token's step computes only its own row.

use ndarray::{Array2, ArrayView2, Axis};

/// One layer's cached keys and values: tokens x (kv_heads head_dim) each.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerCache {
    k: Array2<f64>,
    v: Array2<f64>,
}

impl LayerCache {
    /// An empty cache for keys and values `width` wide (`kv_heads * head_dim`).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let cache = LayerCache::new(8);
    /// assert_eq!((cache.len(), cache.width()), (0, 8));
    /// ```
    pub fn new(width: usize) -> LayerCache {
        LayerCache {
            k: Array2::zeros((0, width)),
            v: Array2::zeros((0, width)),
        }
    }

    /// The tokens cached.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert!(LayerCache::new(2).is_empty());
    /// ```
    pub fn len(&self) -> usize {
        self.k.nrows()
    }

    /// Whether no token is cached yet.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(LayerCache::new(2).len(), 0);
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The width of a cached row.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(LayerCache::new(6).width(), 6);
    /// ```
    pub fn width(&self) -> usize {
        self.k.ncols()
    }

    /// The cached keys, rotated: tokens x width.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(LayerCache::new(3).k().dim(), (0, 3));
    /// ```
    pub fn k(&self) -> &Array2<f64> {
        &self.k
    }

    /// The cached values: tokens x width.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(LayerCache::new(3).v().dim(), (0, 3));
    /// ```
    pub fn v(&self) -> &Array2<f64> {
        &self.v
    }

    /// Appends new tokens' keys and values (the caller checked their width).
    pub(crate) fn append(&mut self, k: ArrayView2<'_, f64>, v: ArrayView2<'_, f64>) {
        // Same width by construction; `append` grows the buffer geometrically.
        self.k
            .append(Axis(0), k)
            .expect("keys as wide as the cache");
        self.v
            .append(Axis(0), v)
            .expect("values as wide as the cache");
    }
}

/// A decoder's KV cache: one [`LayerCache`] per layer.
#[derive(Debug, Clone, PartialEq)]
pub struct KvCache {
    layers: Vec<LayerCache>,
}

impl KvCache {
    /// An empty cache of one layer per width given (each layer's `kv_heads * head_dim`);
    /// [`Decoder::cache`](super::Decoder::cache) makes the one a decoder needs.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let cache = KvCache::new(&[4, 4]);
    /// assert_eq!((cache.layers().len(), cache.len()), (2, 0));
    /// ```
    pub fn new(widths: &[usize]) -> KvCache {
        KvCache {
            layers: widths.iter().map(|&w| LayerCache::new(w)).collect(),
        }
    }

    /// The tokens cached (every layer holds the same).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(KvCache::new(&[2]).len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.layers.first().map_or(0, LayerCache::len)
    }

    /// Whether no token is cached yet.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert!(KvCache::new(&[2]).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes the cached keys and values take: `2 x layers x tokens x kv_heads x head_dim
    /// x 8`. Fewer key/value heads (GQA, MQA) divide it.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(KvCache::new(&[4, 4]).bytes(), 0);
    /// ```
    pub fn bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| 2 * l.len() * l.width() * std::mem::size_of::<f64>())
            .sum()
    }

    /// Each layer's cache.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(KvCache::new(&[2, 6]).layers()[1].width(), 6);
    /// ```
    pub fn layers(&self) -> &[LayerCache] {
        &self.layers
    }

    pub(crate) fn layers_mut(&mut self) -> &mut [LayerCache] {
        &mut self.layers
    }
}
