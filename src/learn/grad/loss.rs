//! Cross-entropy over logits, with its gradient: PyTorch's `F.cross_entropy` (mean over
//! tokens).

use ndarray::Array2;

use crate::error::AttentionError;
use crate::layers::softmax::softmax;
use crate::learn::grad::require;

/// The cross-entropy of some logits against target classes, and its gradient.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let ce: CrossEntropy = cross_entropy(&array![[2.0, 0.0, -1.0]], &[0])?;
/// assert!((ce.dlogits.sum()).abs() < 1e-15); // (probs - onehot) sums to 0
/// assert!(ce.loss > 0.0);
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct CrossEntropy {
    /// The mean over tokens of `-log softmax(logits)[target]`.
    pub loss: f64,
    /// `softmax(logits)`, one row per token.
    pub probs: Array2<f64>,
    /// `dL/dlogits = (probs - onehot(targets)) / N`, N the number of tokens.
    pub dlogits: Array2<f64>,
}

/// `F.cross_entropy(logits, targets)`: one row of logits per token, one column per class,
/// and one target class per token; the loss is averaged over the tokens.
///
/// Each token's loss is `logsumexp(row) - row[target]`, with the row maximum taken out
/// first so large logits do not overflow. The gradient is the closed form
/// `(probs - onehot) / N`, not the softmax's Jacobian times `-1 / (N p)`: a target whose
/// probability underflows to 0 would make that NaN.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let ce = cross_entropy(&array![[0.0, 0.0], [0.0, 0.0]], &[0, 1])?;
/// assert!((ce.loss - 2f64.ln()).abs() < 1e-15);
/// assert_eq!(ce.dlogits, array![[-0.25, 0.25], [0.25, -0.25]]);
/// # Ok::<(), AttentionError>(())
/// ```
///
/// # Errors
/// [`AttentionError::Mismatch`] when there is not one target per row of logits, or a
/// target is not a column of the logits.
pub fn cross_entropy(
    logits: &Array2<f64>,
    targets: &[usize],
) -> Result<CrossEntropy, AttentionError> {
    require(
        targets.len() == logits.nrows(),
        ("the targets", &[targets.len()]),
        ("logits", logits.shape()),
        "there must be one target per row of logits",
    )?;
    if let Some(&target) = targets.iter().find(|&&t| t >= logits.ncols()) {
        require(
            false,
            ("a target", &[target]),
            ("logits", logits.shape()),
            "each target must be a class: less than the number of columns of the logits",
        )?;
    }
    let n = logits.nrows() as f64;
    let probs = softmax(logits);
    let mut total = 0.0;
    for (row, &target) in logits.rows().into_iter().zip(targets) {
        let max = row.fold(f64::NEG_INFINITY, |m, &v| m.max(v));
        let log_sum_exp = max + row.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
        total += log_sum_exp - row[target];
    }
    let mut dlogits = probs.clone();
    for (mut row, &target) in dlogits.rows_mut().into_iter().zip(targets) {
        row[target] -= 1.0;
    }
    dlogits /= n;
    Ok(CrossEntropy {
        loss: total / n,
        probs,
        dlogits,
    })
}
