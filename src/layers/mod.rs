//! The maths of attention and of a transformer's blocks: softmax, masks, one head and many,
//! batches, positions, and (feature `encoder`) norms, feed-forward blocks, projections and
//! pooling. Each room is re-exported at the crate's root.

pub mod attend;
pub mod attention;
pub mod batch;
#[cfg(feature = "encoder")]
pub mod feed_forward;
pub mod heads;
pub mod init;
#[cfg(feature = "encoder")]
pub mod linear;
pub mod mask;
#[cfg(feature = "encoder")]
pub mod norm;
#[cfg(feature = "encoder")]
pub mod pooling;
pub mod position;
#[cfg(feature = "decoder")]
pub mod rope;
pub mod softmax;
pub mod torch;
