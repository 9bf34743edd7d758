//! Everything a notebook cell that opens the model needs, the library's prelude included:
//! `use attention_lab_model::prelude::*;`.
//!
//! ```no_run
//! use attention_lab_model::prelude::*;
//!
//! let model: Model = Model::installed()?;
//! let out: Encoded = model.encode("Attention is all you need.")?;
//! let weights: Array4<f64> = out.output.attentions();
//! # Ok::<(), ModelError>(())
//! ```

pub use crate::chat::{ChatTokenizer, Message};
pub use crate::{BertConfig, Encoded, Llama, LlamaConfig, Model, ModelError, Tokenizer, Tokens};
pub use attention_lab::prelude::*;
