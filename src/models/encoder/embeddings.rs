//! The input embeddings of a BERT encoder: each token's word, position and token type rows,
//! summed, then a layer norm.

use ndarray::{Array2, ArrayView1, Axis};

use super::width_error;
use crate::error::{AttentionError, Operand};
use crate::into::fit;
use crate::layers::norm::LayerNorm;

/// The input embeddings: each token's row of the word table, plus its position's row and its
/// token type's row, then a layer norm (BERT's `embeddings`).
#[derive(Debug, Clone, PartialEq)]
pub struct Embeddings {
    word: Array2<f64>,
    position: Array2<f64>,
    token_type: Array2<f64>,
    norm: LayerNorm,
}

/// Row `index` of `table`, or [`AttentionError::OutOfRange`] naming the table.
fn row<'t>(
    table: &'t Array2<f64>,
    name: &'static str,
    what: &'static str,
    index: usize,
) -> Result<ArrayView1<'t, f64>, AttentionError> {
    if index < table.nrows() {
        Ok(table.row(index))
    } else {
        Err(AttentionError::OutOfRange {
            what,
            index,
            table: Operand::new(name, table.shape()),
        })
    }
}

impl Embeddings {
    /// Embeddings from the word table (vocabulary x d), the position table (positions x d),
    /// the token-type table (types x d) and their layer norm.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 1e-12)?;
    /// let embeddings = Embeddings::new(Array2::eye(2), Array2::zeros((4, 2)), Array2::zeros((1, 2)), norm)?;
    /// assert_eq!(embeddings.width(), 2);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when a table or the layer norm is not d wide, d being the
    /// word table's columns.
    pub fn new(
        word: Array2<f64>,
        position: Array2<f64>,
        token_type: Array2<f64>,
        norm: LayerNorm,
    ) -> Result<Embeddings, AttentionError> {
        let d = norm.gamma().len();
        let rule = "every embedding table must have as many columns as the layer norm's gamma";
        for (name, table) in [
            ("the word embeddings", &word),
            ("the position embeddings", &position),
            ("the token type embeddings", &token_type),
        ] {
            if table.ncols() != d {
                return Err(width_error(name, table.shape(), d, rule));
            }
        }
        Ok(Embeddings {
            word,
            position,
            token_type,
            norm,
        })
    }

    /// The width d of every embedding.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let norm = LayerNorm::new(Array1::ones(3), Array1::zeros(3), 0.0)?;
    /// let e = Embeddings::new(Array2::zeros((5, 3)), Array2::zeros((2, 3)), Array2::zeros((1, 3)), norm)?;
    /// assert_eq!(e.width(), 3);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn width(&self) -> usize {
        self.word.ncols()
    }

    /// The word table, one row per token id.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 0.0)?;
    /// let e = Embeddings::new(Array2::eye(2), Array2::zeros((2, 2)), Array2::zeros((1, 2)), norm)?;
    /// assert_eq!(e.word(), &Array2::eye(2));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn word(&self) -> &Array2<f64> {
        &self.word
    }

    /// The position table, one row per position: its rows bound the tokens of an input.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 0.0)?;
    /// let e = Embeddings::new(Array2::eye(2), Array2::zeros((7, 2)), Array2::zeros((1, 2)), norm)?;
    /// assert_eq!(e.position().nrows(), 7);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn position(&self) -> &Array2<f64> {
        &self.position
    }

    /// The embeddings of `ids`: `LN(word[id] + position[i] + token_type[type])` for the token
    /// at position `i`, one row per token.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let norm = LayerNorm::new(Array1::ones(2), Array1::zeros(2), 0.0)?;
    /// let e = Embeddings::new(array![[1.0, 0.0], [0.0, 1.0]], Array2::zeros((4, 2)), Array2::zeros((1, 2)), norm)?;
    /// assert_eq!(e.forward(&[1, 0], &[0, 0])?, array![[-1.0, 1.0], [1.0, -1.0]]);
    /// assert!(e.forward(&[2], &[0]).is_err()); // no row for id 2
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::OutOfRange`] for a token id, a position (more tokens than the position
    /// table has rows) or a token type without a row; [`AttentionError::Mismatch`] when `ids`
    /// and `token_types` differ in length.
    pub fn forward(
        &self,
        ids: &[usize],
        token_types: &[usize],
    ) -> Result<Array2<f64>, AttentionError> {
        let mut x = Array2::zeros((0, 0));
        self.forward_into(ids, token_types, &mut x)?;
        Ok(x)
    }

    /// [`Embeddings::forward`] written into `x`, reshaped to tokens x d (its memory kept
    /// when it has room).
    pub(super) fn forward_into(
        &self,
        ids: &[usize],
        token_types: &[usize],
        x: &mut Array2<f64>,
    ) -> Result<(), AttentionError> {
        if ids.len() != token_types.len() {
            return Err(AttentionError::mismatch(
                Operand::row("the token ids", ids.len()),
                Operand::row("the token types", token_types.len()),
                "every token needs one token type",
            ));
        }
        fit(x, (ids.len(), self.width()));
        x.fill(0.0);
        for (i, (mut out, (&id, &kind))) in x
            .axis_iter_mut(Axis(0))
            .zip(ids.iter().zip(token_types))
            .enumerate()
        {
            out += &row(&self.word, "word embeddings", "token id", id)?;
            out += &row(&self.position, "position embeddings", "position", i)?;
            out += &row(
                &self.token_type,
                "token type embeddings",
                "token type",
                kind,
            )?;
        }
        self.norm.normalize_in_place(x.view_mut())
    }
}
