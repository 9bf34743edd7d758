//! The synthetic task that only an induction head solves: random tokens in which a random
//! stretch is repeated at once. Predicting the repeat's tokens means finding the earlier
//! copy of the current token and reading the token after it; the offset changes from one
//! example to the next, so position alone cannot do it.

use crate::error::AttentionError;
use crate::np::RandomState;

/// One training sequence: its token ids, and the token each position must predict where
/// there is one (inside the second copy), `None` elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Example {
    /// The token ids, `context` of them.
    pub ids: Vec<usize>,
    /// `targets[i]` is `Some(ids[i + 1])` for positions inside the second copy, from its
    /// first token to its next-to-last.
    pub targets: Vec<Option<usize>>,
    /// Where the first copy starts.
    pub start: usize,
    /// The length of the repeated stretch.
    pub len: usize,
}

/// A sequence of `context` random tokens below `vocab` in which a stretch of `min_len` to
/// `max_len` tokens, at a random place, is followed at once by a copy of itself. Every draw
/// comes from `rs` (NumPy's `RandomState`): tokens `rs.randint(0, vocab, context)`, then the
/// length `rs.randint(min_len, max_len + 1)`, then the start `rs.randint(0, context - 2 len
/// + 1)`.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let mut rs = RandomState::new(0);
/// let example = repeated_tokens(&mut rs, 10, 12, 3, 4)?;
/// let (a, l) = (example.start, example.len);
/// assert_eq!(example.ids[a..a + l], example.ids[a + l..a + 2 * l]);
/// assert_eq!(example.targets[a + l], Some(example.ids[a + l + 1]));
/// assert_eq!(example.targets.iter().flatten().count(), l - 1);
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// [`AttentionError::Setting`] when `vocab` is 0, `min_len` is below 2 (a repeat of one
/// token has no token to predict) or above `max_len`, or two copies of `max_len` tokens do
/// not fit in `context`.
pub fn repeated_tokens(
    rs: &mut RandomState,
    vocab: usize,
    context: usize,
    min_len: usize,
    max_len: usize,
) -> Result<Example, AttentionError> {
    if vocab == 0 || min_len < 2 || min_len > max_len || max_len.saturating_mul(2) > context {
        return Err(AttentionError::Setting {
            name: "the task's sizes",
            value: format!("vocab {vocab}, context {context}, lengths {min_len} to {max_len}"),
            rule: "a repeat needs 2 <= min_len <= max_len (a repeat of one token has nothing \
                   to predict), two copies of max_len tokens within the context, and a \
                   vocabulary",
        });
    }
    let draw = |rs: &mut RandomState, low: usize, high: usize| -> i64 {
        rs.randint(low as i64, high as i64, ())
            .expect("a 0-D draw within i64")[()]
    };
    let mut ids: Vec<usize> = rs
        .randint(0, vocab as i64, context)
        .expect("a vector of tokens")
        .iter()
        .map(|&t| t as usize)
        .collect();
    let len = draw(rs, min_len, max_len + 1) as usize;
    let start = draw(rs, 0, context - 2 * len + 1) as usize;
    ids.copy_within(start..start + len, start + len);
    let mut targets = vec![None; context];
    for i in start + len..start + 2 * len - 1 {
        targets[i] = Some(ids[i + 1]);
    }
    Ok(Example {
        ids,
        targets,
        start,
        len,
    })
}
