//! The speed rooms: the vector paths per instruction set, the products on them, the streaming
//! kernel and work shared among the cores. Every `unsafe` block of the crate is in this folder,
//! each with its own SAFETY line. `simd` and `stream` are re-exported at the crate's root.

pub(crate) mod gemm;
pub(crate) mod parallel;
pub mod simd;
pub mod stream;
