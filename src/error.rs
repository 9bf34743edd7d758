//! The one error type of the library: bad shapes and bad head layouts.

use std::fmt;

/// A matrix named as the documents name it, with its shape: `W_Q of head 1 is 4x3`, or a
/// batch of matrices: `X is 3x4x6`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operand {
    /// The matrix, as a reader would name it (`X`, `W_Q of head 2`, `concat of the heads`).
    pub name: String,
    /// Its shape: rows and columns, after the number of items for a batch.
    pub shape: Vec<usize>,
}

impl Operand {
    pub(crate) fn new(name: impl Into<String>, shape: &[usize]) -> Operand {
        Operand {
            name: name.into(),
            shape: shape.to_vec(),
        }
    }

    /// A vector of `len` entries, written as one row: `b_Q is 1x3`.
    pub(crate) fn row(name: impl Into<String>, len: usize) -> Operand {
        Operand::new(name, &[1, len])
    }
}

impl Operand {
    /// The shape as the messages write it: `4x3`, `3x4x6`.
    fn dims(&self) -> String {
        let dims: Vec<String> = self.shape.iter().map(usize::to_string).collect();
        dims.join("x")
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is {}", self.name, self.dims())
    }
}

/// Why an attention computation could not run.
///
/// Every message names the matrices involved and their shapes, so a student can find the
/// mistake without reading the library:
///
/// ```
/// use attention_lab::prelude::*;
///
/// let x = Array2::<f64>::zeros((2, 5));
/// let head = Head::new(Array2::zeros((4, 3)), Array2::zeros((4, 3)), Array2::zeros((4, 3)))?;
/// let err = head.forward(&x, &Attend::new()).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "X is 2x5 but W_Q is 4x3: the columns of X must equal the rows of W_Q"
/// );
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AttentionError {
    /// Two matrices whose shapes must agree do not; `rule` says how they must agree.
    Mismatch {
        /// The first matrix.
        left: Operand,
        /// The second matrix.
        right: Operand,
        /// The rule that was broken, in words.
        rule: &'static str,
    },
    /// `MultiHead::split` was asked for `h` heads but `h` does not divide the columns of `matrix`.
    Split {
        /// The matrix being split.
        matrix: Operand,
        /// The number of heads asked for.
        h: usize,
    },
    /// The rows of W_O differ from the total width of the heads' values.
    OutputProjection {
        /// The value width (columns of W_V) of each head, in order.
        widths: Vec<usize>,
        /// The output projection.
        wo: Operand,
    },
    /// A multi-head layer was given no heads.
    NoHeads,
    /// An index (a token id, a position, a token type) past the last row of the table it
    /// picks a row from.
    OutOfRange {
        /// What the index is, as a reader would name it (`token id`, `position`).
        what: &'static str,
        /// The index asked for.
        index: usize,
        /// The table, with its shape.
        table: Operand,
    },
    /// An option of [`Attend`](crate::layers::attend::Attend) that the call it was given to cannot
    /// use (key padding, which has one row per batch item, on one sequence).
    NotApplicable {
        /// The option, as it is called (`Attend::key_padding`).
        option: &'static str,
        /// Why it does not apply, and what to use instead.
        reason: &'static str,
    },
    /// A matrix to be made is larger than memory can hold (more than `isize::MAX` bytes, or
    /// more than the allocator could give).
    TooLarge {
        /// The matrix that was to be made, with the shape asked for.
        matrix: Operand,
    },
    /// A setting (a size, a count, a base) outside what it may be.
    Setting {
        /// The setting, as the math names it (`head_dim`, `theta`, `n_kv_heads`).
        name: &'static str,
        /// The value given.
        value: String,
        /// What it must be, in words.
        rule: &'static str,
    },
}

impl AttentionError {
    pub(crate) fn mismatch(left: Operand, right: Operand, rule: &'static str) -> AttentionError {
        AttentionError::Mismatch { left, right, rule }
    }
}

impl fmt::Display for AttentionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttentionError::Mismatch { left, right, rule } => {
                write!(f, "{left} but {right}: {rule}")
            }
            AttentionError::Split { matrix, h } => {
                let (name, dims) = (&matrix.name, matrix.dims());
                let cols = matrix.shape.last().copied().unwrap_or(0);
                write!(f, "cannot split {name} ({dims}) into {h} heads: ")?;
                if *h == 0 {
                    write!(f, "h must be at least 1")
                } else {
                    write!(f, "{h} does not divide its {cols} columns")
                }
            }
            AttentionError::OutputProjection { widths, wo } => {
                let parts: Vec<String> = widths.iter().map(usize::to_string).collect();
                write!(
                    f,
                    "the heads' values are {} = {} columns wide together but {wo}: \
                     the rows of W_O must equal the total width of the heads' values",
                    parts.join(" + "),
                    widths.iter().sum::<usize>()
                )
            }
            AttentionError::TooLarge { matrix } => {
                let (name, dims) = (&matrix.name, matrix.dims());
                let elements = matrix.shape.iter().map(|&d| d as u128).product::<u128>();
                let bytes = elements * std::mem::size_of::<f64>() as u128;
                write!(
                    f,
                    "{name} would be {dims}, {bytes} bytes: more than memory can hold"
                )
            }
            AttentionError::OutOfRange { what, index, table } => {
                let (name, dims) = (&table.name, table.dims());
                match table.shape.first().copied().unwrap_or(0) {
                    0 => write!(
                        f,
                        "{what} {index} is out of range: the {name} have no rows ({dims})"
                    ),
                    rows => write!(
                        f,
                        "{what} {index} is out of range: the {name} have rows 0 to {} ({dims})",
                        rows - 1
                    ),
                }
            }
            AttentionError::NotApplicable { option, reason } => {
                write!(f, "{option} does not apply to this call: {reason}")
            }
            AttentionError::NoHeads => {
                write!(
                    f,
                    "a multi-head layer needs at least one head, but none was given"
                )
            }
            AttentionError::Setting { name, value, rule } => {
                write!(f, "{name} is {value}: {rule}")
            }
        }
    }
}

impl std::error::Error for AttentionError {}

/// An empty `Vec` with room for a `rows x cols` matrix, or [`AttentionError::TooLarge`]
/// naming it: the memory is asked for first, so a matrix that cannot be had is an error
/// instead of an abort.
pub(crate) fn reserve_matrix(
    name: &str,
    rows: usize,
    cols: usize,
) -> Result<Vec<f64>, AttentionError> {
    let too_large = || AttentionError::TooLarge {
        matrix: Operand::new(name, &[rows, cols]),
    };
    let len = rows
        .checked_mul(cols)
        .filter(|&len| len <= isize::MAX as usize / std::mem::size_of::<f64>())
        .ok_or_else(too_large)?;
    let mut values = Vec::new();
    values.try_reserve_exact(len).map_err(|_| too_large())?;
    Ok(values)
}
