//! Whole models built from the layers (feature `encoder`): a BERT encoder, a Llama-style decoder
//! (feature `decoder`), what a pass keeps, and interventions on a run. Each room is re-exported
//! at the crate's root.

#[cfg(feature = "decoder")]
pub mod decoder;
#[cfg(feature = "encoder")]
pub mod encoder;
#[cfg(feature = "encoder")]
pub mod intervention;
#[cfg(feature = "encoder")]
pub mod keep;
