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

pub use crate::error::{AttentionError, Operand};
pub use crate::fast::simd::Simd;
pub use crate::fast::stream::Streaming;
pub use crate::html;
pub use crate::layers::attend::{scaled_dot_product_attention, Attend, Full, Streamed};
pub use crate::layers::attention::Attention;
pub use crate::layers::batch::BatchOutput;
#[cfg(feature = "encoder")]
pub use crate::layers::feed_forward::{
    gelu, silu, FeedForward, FeedForwardOutput, SwiGlu, SwiGluOutput,
};
pub use crate::layers::heads::{Head, HeadOutput, MultiHead, MultiHeadOutput};
pub use crate::layers::init::{random_embeddings, random_projection};
#[cfg(feature = "encoder")]
pub use crate::layers::linear::Linear;
pub use crate::layers::mask::Mask;
#[cfg(feature = "encoder")]
pub use crate::layers::norm::{LayerNorm, RmsNorm};
#[cfg(feature = "encoder")]
pub use crate::layers::pooling::{cosine_similarity, l2_normalize, mean_pool};
pub use crate::layers::position::positional_encoding;
#[cfg(feature = "decoder")]
pub use crate::layers::rope::Rope;
pub use crate::layers::softmax::{sampling_softmax, softmax, softmax_naive, Softmax};
pub use crate::layers::torch::{InProj, TorchWeights};
pub use crate::learn::answers::answers_json;
pub use crate::learn::check;
#[cfg(feature = "learn")]
pub use crate::learn::grad::{
    attention_backward, cross_entropy, embedding_backward, softmax_backward, AdamW, AttentionGrad,
    CrossEntropy, FeedForwardGrad, HeadGrad, LayerNormGrad, MultiHeadGrad, Optimizer, RmsNormGrad,
    Sgd, SwiGluGrad,
};
#[cfg(feature = "learn")]
pub use crate::learn::train::{
    repeated_tokens, train_step, AttentionOnly, AttentionOnlyGrad, AttentionOnlyOutput, Example,
};
#[cfg(feature = "decoder")]
pub use crate::models::decoder::Attribution;
#[cfg(feature = "decoder")]
pub use crate::models::decoder::{
    grouped_query_attention, BlockOutput, Decoder, DecoderBlock, DecoderKept, DecoderOutput,
    Generation, GroupedAttention, GroupedOutput, KvCache, LayerCache, LmHead, Mlp, Norm, Sampler,
    Sampling, Step,
};
#[cfg(feature = "encoder")]
pub use crate::models::encoder::{
    Embeddings, Encode, Encoder, EncoderBuffers, EncoderLayer, EncoderLayerOutput, EncoderOutput,
    Keep, Kept,
};
#[cfg(feature = "encoder")]
pub use crate::models::intervention::{Edit, HeadEdit, Intervention, Source};
pub use crate::np;
pub use crate::np::*;
pub use ndarray::{
    array, concatenate, s, Array, Array1, Array2, Array3, Array4, ArrayD, ArrayView2, ArrayView3,
    Axis,
};
pub use ndarray_rand::rand::rngs::StdRng;
pub use ndarray_rand::rand::SeedableRng;
