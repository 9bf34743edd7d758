//! Decoding: the prompt once (the prefill), then one token at a time from the KV cache,
//! picked greedily or drawn from the softmax of the logits.

use ndarray::{Array1, ArrayView1};

use super::{Decoder, DecoderOutput, KvCache};
use crate::error::AttentionError;
use crate::np::RandomState;
use crate::softmax::sampling_softmax;

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

impl Sampling {
    /// The distribution a token is picked from: `softmax((logits - max) / temperature)` over
    /// the `top_k` largest logits (the others 0) when sampling; the plain softmax when greedy
    /// (which picks its largest). A probability is never NaN for finite logits.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let p = Sampling::Sample { temperature: 1.0, top_k: Some(1), seed: 0 }
    ///     .probabilities(array![1.0, 3.0, 2.0].view())?;
    /// assert_eq!(p, array![0.0, 1.0, 0.0]);
    /// let greedy = Sampling::Greedy.probabilities(array![0.0, 0.0].view())?;
    /// assert_eq!(greedy, array![0.5, 0.5]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Setting`] for a temperature that is not finite and above 0, or a
    /// top-k of 0.
    pub fn probabilities(
        &self,
        logits: ArrayView1<'_, f64>,
    ) -> Result<Array1<f64>, AttentionError> {
        let (temperature, top_k) = self.settings()?;
        Ok(sampling_softmax(logits, temperature, top_k))
    }

    fn settings(&self) -> Result<(f64, Option<usize>), AttentionError> {
        match *self {
            Sampling::Greedy => Ok((1.0, None)),
            Sampling::Sample {
                temperature, top_k, ..
            } => {
                check_sampling(temperature, top_k)?;
                Ok((temperature, top_k))
            }
        }
    }
}

/// Picks tokens from rows of logits as a [`Sampling`] says, drawing from its own
/// `RandomState` when it samples: the same ids, draw for draw, as [`Decoder::generate`].
///
/// ```
/// use attention_lab::prelude::*;
/// let mut sampler = Sampler::new(Sampling::Greedy)?;
/// assert_eq!(sampler.pick(array![0.5, 2.0, 2.0].view()), 1);
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Sampler {
    sampling: Sampling,
    draws: Option<RandomState>,
}

impl Sampler {
    /// A sampler whose draws start from the seed.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let sampling = Sampling::Sample { temperature: 0.7, top_k: Some(2), seed: 3 };
    /// let (mut a, mut b) = (Sampler::new(sampling)?, Sampler::new(sampling)?);
    /// let logits = array![1.0, 1.5, 0.2];
    /// assert_eq!(a.pick(logits.view()), b.pick(logits.view()));
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Setting`] for a temperature that is not finite and above 0, or a
    /// top-k of 0.
    pub fn new(sampling: Sampling) -> Result<Sampler, AttentionError> {
        sampling.settings()?;
        let draws = match sampling {
            Sampling::Greedy => None,
            Sampling::Sample { seed, .. } => Some(RandomState::new(seed)),
        };
        Ok(Sampler { sampling, draws })
    }

    /// How it picks.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// assert_eq!(Sampler::new(Sampling::Greedy)?.sampling(), Sampling::Greedy);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn sampling(&self) -> Sampling {
        self.sampling
    }

    /// The next token's id: the largest logit, or one draw (one uniform number of the
    /// `RandomState`) from [`Sampling::probabilities`].
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let mut sampler = Sampler::new(Sampling::Sample { temperature: 1.0, top_k: Some(1), seed: 0 })?;
    /// assert_eq!(sampler.pick(array![0.1, 0.3, 0.2].view()), 1);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn pick(&mut self, logits: ArrayView1<'_, f64>) -> usize {
        match (&mut self.draws, self.sampling) {
            (
                Some(rs),
                Sampling::Sample {
                    temperature, top_k, ..
                },
            ) => {
                let u = rs.random_sample(()).expect("a 0-D draw")[()];
                draw(logits, temperature, top_k, u)
            }
            _ => argmax(logits),
        }
    }
}

/// One generated token: its id, the distribution it was picked from, and its own pass
/// through the decoder on the KV cache (its attention over every token before it and itself,
/// and the logits of the token after it).
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The token's id.
    pub id: usize,
    /// The probabilities it was picked from ([`Sampling::probabilities`]).
    pub probabilities: Array1<f64>,
    /// The token's own pass: one row per layer's intermediates, its keys and values appended
    /// to the cache.
    pub output: DecoderOutput,
}

/// Generation one token at a time, an iterator of [`Step`]s: made by [`Decoder::generation`]
/// after the prefill. It never ends by itself; take as many as wanted, or stop at an
/// end-of-text token.
///
/// ```
/// use attention_lab::prelude::*;
/// let w = Array2::<f64>::eye(2);
/// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w.clone(), 1, 1, Rope::new(2, 10.0)?)?;
/// let norm = Norm::Rms(RmsNorm::new(array![1.0, 1.0], 1e-6)?);
/// let mlp = Mlp::SwiGlu(SwiGlu::new(w.clone(), w.clone(), w)?);
/// let block = DecoderBlock::new(norm.clone(), attention, norm.clone(), mlp)?;
/// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![block], norm, LmHead::Tied)?;
/// let (prefill, mut steps) = decoder.generation(&[0, 1], Sampling::Greedy)?;
/// assert_eq!(prefill.logits.nrows(), 1); // the last token's: the next is picked from them
/// let step = steps.next().unwrap()?;
/// // the new token attends to the two before it and to itself
/// assert_eq!(step.output.blocks[0].attention.weights[0].dim(), (1, 3));
/// assert_eq!(steps.cache().len(), 3);
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug)]
pub struct Generation<'a> {
    decoder: &'a Decoder,
    cache: KvCache,
    sampler: Sampler,
    logits: Array1<f64>,
}

impl Generation<'_> {
    /// The KV cache: the prompt's and every generated token's keys and values, per layer.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let w = Array2::<f64>::eye(2);
    /// let attention = GroupedAttention::new(w.clone(), w.clone(), w.clone(), w.clone(), 1, 1, Rope::new(2, 10.0)?)?;
    /// let norm = Norm::Rms(RmsNorm::new(array![1.0, 1.0], 1e-6)?);
    /// let mlp = Mlp::SwiGlu(SwiGlu::new(w.clone(), w.clone(), w)?);
    /// let block = DecoderBlock::new(norm.clone(), attention, norm.clone(), mlp)?;
    /// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![block], norm, LmHead::Tied)?;
    /// let (_, steps) = decoder.generation(&[0, 1, 1], Sampling::Greedy)?;
    /// assert_eq!(steps.cache().len(), 3);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn cache(&self) -> &KvCache {
        &self.cache
    }

    /// The logits the next token will be picked from.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// let (prefill, steps) = decoder.generation(&[0, 1], Sampling::Greedy)?;
    /// assert_eq!(steps.logits(), prefill.logits.row(0));
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn logits(&self) -> ArrayView1<'_, f64> {
        self.logits.view()
    }
}

impl Iterator for Generation<'_> {
    type Item = Result<Step, AttentionError>;

    fn next(&mut self) -> Option<Self::Item> {
        let probabilities = self
            .sampler
            .sampling()
            .probabilities(self.logits.view())
            .expect("checked by Sampler::new");
        let id = self.sampler.pick(self.logits.view());
        Some(
            self.decoder
                .forward_cached(&[id], &mut self.cache)
                .map(|output| {
                    self.logits = last_row(&output.logits);
                    Step {
                        id,
                        probabilities,
                        output,
                    }
                }),
        )
    }
}

impl Decoder {
    /// The prompt's pass (the prefill: every intermediate, and the logits of its last token
    /// only, which the first new token is picked from), and an iterator that generates from it
    /// one token at a time, each fed back in on the KV cache.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// let (_, steps) = decoder.generation(&[1], Sampling::Greedy)?;
    /// let ids: Vec<usize> = steps.take(3).map(|s| s.map(|s| s.id)).collect::<Result<_, _>>()?;
    /// assert_eq!(ids, vec![1, 1, 1]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Setting`] for an empty prompt, a temperature that is not finite and
    /// above 0, or a top-k of 0; [`AttentionError::OutOfRange`] for a token id past the
    /// vocabulary.
    pub fn generation(
        &self,
        prompt: &[usize],
        sampling: Sampling,
    ) -> Result<(DecoderOutput, Generation<'_>), AttentionError> {
        if prompt.is_empty() {
            return Err(AttentionError::Setting {
                name: "prompt",
                value: "empty".into(),
                rule: "generation continues a prompt of at least one token",
            });
        }
        let sampler = Sampler::new(sampling)?;
        let mut cache = self.cache();
        let prefill = self.pass(prompt, &mut cache, true)?;
        let logits = last_row(&prefill.logits);
        let steps = Generation {
            decoder: self,
            cache,
            sampler,
            logits,
        };
        Ok((prefill, steps))
    }

    /// The prompt, then `new_tokens` tokens, each fed back in: returns the new tokens' ids.
    /// The prompt runs once (the prefill); each further token is one step on the KV cache
    /// ([`Decoder::generation`]).
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
        let (_, steps) = self.generation(prompt, sampling)?;
        steps.take(new_tokens).map(|s| s.map(|s| s.id)).collect()
    }
}

fn last_row(logits: &ndarray::Array2<f64>) -> Array1<f64> {
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
    let p = sampling_softmax(logits, temperature, top_k);
    let mut cumulative = 0.0;
    let cdf: Vec<f64> = p
        .iter()
        .map(|p| {
            cumulative += p;
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
