//! Decoding: the prompt once (the prefill), then one token at a time from the KV cache,
//! picked greedily or drawn from the softmax of the logits.

use ndarray::{Array1, ArrayView1};

use super::Decoder;
use crate::error::AttentionError;
use crate::np::RandomState;

/// How the next token is picked from a row of logits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    /// The token of the largest logit (the first, on a tie), as transformers'
    /// `generate(do_sample=False)`.
    Greedy,
    /// A draw from `softmax(logits / temperature)`, over the `top_k` largest logits only
    /// when given, each draw as `np.random.RandomState(seed).choice(vocab, p=...)` makes it.
    Sample {
        /// Above 1 flattens the distribution, below 1 sharpens it; finite and above 0.
        temperature: f64,
        /// Keep only this many of the largest logits (at least 1).
        top_k: Option<usize>,
        /// The seed of NumPy's RandomState that draws.
        seed: u32,
    },
}

impl Decoder {
    /// The prompt, then `new_tokens` tokens, each fed back in: returns the new tokens' ids.
    /// The prompt runs once (the prefill); each further token is one step on the KV cache.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// // no blocks: each token's logits favour itself
    /// assert_eq!(decoder.generate(&[1], 3, Sampling::Greedy)?, vec![1, 1, 1]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Setting`] for an empty prompt, a temperature that is not finite and
    /// above 0, or a top-k of 0; [`AttentionError::OutOfRange`] for a token id past the
    /// vocabulary.
    pub fn generate(
        &self,
        prompt: &[usize],
        new_tokens: usize,
        sampling: Sampling,
    ) -> Result<Vec<usize>, AttentionError> {
        if prompt.is_empty() {
            return Err(AttentionError::Setting {
                name: "prompt",
                value: "empty".into(),
                rule: "generation continues a prompt of at least one token",
            });
        }
        let mut draws = match sampling {
            Sampling::Greedy => None,
            Sampling::Sample {
                temperature,
                top_k,
                seed,
            } => {
                check_sampling(temperature, top_k)?;
                Some(RandomState::new(seed))
            }
        };
        let mut cache = self.cache();
        let mut logits = last_row(self.forward_cached(prompt, &mut cache)?.logits);
        let mut ids = Vec::new();
        while ids.len() < new_tokens {
            let id = match (&mut draws, sampling) {
                (
                    Some(rs),
                    Sampling::Sample {
                        temperature, top_k, ..
                    },
                ) => {
                    let u = rs.random_sample(()).expect("a 0-D draw")[()];
                    draw(logits.view(), temperature, top_k, u)
                }
                _ => argmax(logits.view()),
            };
            ids.push(id);
            if ids.len() < new_tokens {
                logits = last_row(self.forward_cached(&[id], &mut cache)?.logits);
            }
        }
        Ok(ids)
    }
}

fn last_row(logits: ndarray::Array2<f64>) -> Array1<f64> {
    logits.row(logits.nrows() - 1).to_owned()
}

fn check_sampling(temperature: f64, top_k: Option<usize>) -> Result<(), AttentionError> {
    if !(temperature > 0.0 && temperature.is_finite()) {
        return Err(AttentionError::Setting {
            name: "temperature",
            value: temperature.to_string(),
            rule: "the logits are divided by it: it must be finite and above 0",
        });
    }
    if top_k == Some(0) {
        return Err(AttentionError::Setting {
            name: "top_k",
            value: "0".into(),
            rule: "sampling keeps at least the largest logit",
        });
    }
    Ok(())
}

/// The first index of the largest value (NaN never wins).
fn argmax(row: ArrayView1<'_, f64>) -> usize {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] || row[best].is_nan() {
            best = i;
        }
    }
    best
}

/// NumPy's legacy `choice(n, p=p)` with the uniform draw `u`: the first index whose
/// cumulative probability (normalised by the last) exceeds `u`.
fn draw(logits: ArrayView1<'_, f64>, temperature: f64, top_k: Option<usize>, u: f64) -> usize {
    // The largest logit taken out before dividing: a tiny temperature cannot overflow.
    let top = logits.fold(f64::NEG_INFINITY, |m, &v| m.max(v));
    let mut scaled = logits.mapv(|l| (l - top) / temperature);
    if let Some(k) = top_k.filter(|&k| k < scaled.len()) {
        let mut sorted: Vec<f64> = scaled.to_vec();
        sorted.sort_by(|a, b| b.total_cmp(a));
        let kth = sorted[k - 1];
        // Every value above the k-th largest, then the first of those equal to it, in index
        // order, until there are k (torch.topk keeps k; a tie never costs a larger value).
        let mut ties = k - scaled.iter().filter(|&&v| v > kth).count();
        for v in scaled.iter_mut() {
            if *v > kth {
                continue;
            }
            if *v == kth && ties > 0 {
                ties -= 1;
            } else {
                *v = f64::NEG_INFINITY;
            }
        }
    }
    let max = scaled.fold(f64::NEG_INFINITY, |m, &v| m.max(v));
    let weights = scaled.mapv(|v| (v - max).exp());
    let total: f64 = weights.sum();
    let mut cumulative = 0.0;
    let cdf: Vec<f64> = weights
        .iter()
        .map(|w| {
            cumulative += w / total;
            cumulative
        })
        .collect();
    let last = *cdf.last().unwrap_or(&1.0);
    cdf.iter()
        .position(|&c| c / last > u)
        .unwrap_or(cdf.len() - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn top_1_is_greedy_and_draws_follow_the_probabilities() {
        let logits = array![0.5, 2.0, -1.0, 2.0, 1.0];
        for u in [0.0, 0.3, 0.99] {
            assert_eq!(draw(logits.view(), 1.0, Some(1), u), argmax(logits.view()));
        }
        assert_eq!(argmax(logits.view()), 1);
        // Uniform draws across [0, 1) land on each token about its probability's share.
        let p = {
            let e = logits.mapv(|l: f64| (l - 2.0).exp());
            &e / e.sum()
        };
        let n = 20_000;
        let mut counts = [0usize; 5];
        for i in 0..n {
            counts[draw(logits.view(), 1.0, None, (i as f64 + 0.5) / n as f64)] += 1;
        }
        for (c, p) in counts.iter().zip(&p) {
            assert!((*c as f64 / n as f64 - p).abs() < 1e-3, "{counts:?} {p}");
        }
        // top-2 keeps the two largest only; a low temperature favours the largest.
        for i in 0..100 {
            let id = draw(logits.view(), 1.0, Some(2), i as f64 / 100.0);
            assert!(id == 1 || id == 3);
        }
        assert_eq!(draw(array![1.0, 1.1].view(), 1e-3, None, 0.5), 1);
        // A tie at the k-th value never costs the largest logit its place.
        for i in 0..100 {
            let id = draw(array![1.0, 1.0, 3.0].view(), 1.0, Some(2), i as f64 / 100.0);
            assert!(id == 0 || id == 2, "{id}");
        }
        assert_eq!(draw(array![1.0, 1.0, 3.0].view(), 1.0, Some(2), 0.99), 2);
        // A temperature near 0 is greedy, not NaN.
        assert_eq!(draw(array![2.0, 1.0].view(), 1e-310, None, 0.99), 0);
    }
}
