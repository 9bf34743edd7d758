//! Everything a notebook cell needs: `use attention_lab::prelude::*;`.
//!
//! ```
//! use attention_lab::prelude::*;
//!
//! let x = array![[1.0, 2.0], [3.0, 4.0]];
//! let head = Head::new(Array2::eye(2), Array2::eye(2), Array2::eye(2))?;
//! assert_eq!(head.forward(&x, &Attend::new())?.q, x);
//! # Ok::<(), AttentionError>(())
//! ```

pub use crate::answers::answers_json;
pub use crate::attend::{scaled_dot_product_attention, Attend, Full, Streamed};
pub use crate::attention::Attention;
pub use crate::batch::BatchOutput;
pub use crate::check;
#[cfg(feature = "decoder")]
pub use crate::decoder::Attribution;
#[cfg(feature = "decoder")]
pub use crate::decoder::{
    grouped_query_attention, BlockOutput, Decoder, DecoderBlock, DecoderKept, DecoderOutput,
    Generation, GroupedAttention, GroupedOutput, KvCache, LayerCache, LmHead, Mlp, Norm, Sampler,
    Sampling, Step,
};
#[cfg(feature = "encoder")]
pub use crate::encoder::{
    Embeddings, Encode, Encoder, EncoderBuffers, EncoderLayer, EncoderLayerOutput, EncoderOutput,
    Keep, Kept,
};
pub use crate::error::{AttentionError, Operand};
#[cfg(feature = "encoder")]
pub use crate::feed_forward::{gelu, silu, FeedForward, FeedForwardOutput, SwiGlu, SwiGluOutput};
#[cfg(feature = "learn")]
pub use crate::grad::{
    attention_backward, cross_entropy, embedding_backward, softmax_backward, AdamW, AttentionGrad,
    CrossEntropy, FeedForwardGrad, HeadGrad, LayerNormGrad, MultiHeadGrad, Optimizer, RmsNormGrad,
    Sgd, SwiGluGrad,
};
pub use crate::heads::{Head, HeadOutput, MultiHead, MultiHeadOutput};
pub use crate::html;
pub use crate::init::{random_embeddings, random_projection};
#[cfg(feature = "encoder")]
pub use crate::intervention::{Edit, HeadEdit, Intervention, Source};
#[cfg(feature = "encoder")]
pub use crate::linear::Linear;
pub use crate::mask::Mask;
#[cfg(feature = "encoder")]
pub use crate::norm::{LayerNorm, RmsNorm};
pub use crate::np;
pub use crate::np::*;
#[cfg(feature = "encoder")]
pub use crate::pooling::{cosine_similarity, l2_normalize, mean_pool};
pub use crate::position::positional_encoding;
#[cfg(feature = "decoder")]
pub use crate::rope::Rope;
pub use crate::simd::Simd;
pub use crate::softmax::{sampling_softmax, softmax, softmax_naive, Softmax};
pub use crate::stream::Streaming;
pub use crate::torch::{InProj, TorchWeights};
#[cfg(feature = "learn")]
pub use crate::train::{
    repeated_tokens, train_step, AttentionOnly, AttentionOnlyGrad, AttentionOnlyOutput, Example,
};
pub use ndarray::{
    array, concatenate, s, Array, Array1, Array2, Array3, Array4, ArrayD, ArrayView2, ArrayView3,
    Axis,
};
pub use ndarray_rand::rand::rngs::StdRng;
pub use ndarray_rand::rand::SeedableRng;
