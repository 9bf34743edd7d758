//! Decoding: the prompt once (the prefill), then one token at a time from the KV cache,
//! picked greedily or drawn from the softmax of the logits.

use std::marker::PhantomData;

use ndarray::{Array1, ArrayView1};

use super::{Decoder, DecoderKept, DecoderOutput, KvCache};
use crate::error::AttentionError;
use crate::layers::softmax::sampling_softmax;
use crate::models::keep::Keep;
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
/// and the logits of the token after it): every intermediate ([`DecoderOutput`], from
/// [`Decoder::generation`]) or what a [`Keep`] kept ([`DecoderKept`], from
/// [`Decoder::generation_with`]).
///
/// ```
/// use attention_lab::prelude::*;
/// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
/// let (_, mut steps) = decoder.generation_with(&[1], Sampling::Greedy, Keep::LastHiddenState)?;
/// let step: Step<DecoderKept> = steps.next().unwrap()?;
/// assert_eq!(step.id, 1);
/// assert_eq!(step.output.logits().map(|l| l.len()), Some(2));
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Step<O = DecoderOutput> {
    /// The token's id.
    pub id: usize,
    /// The probabilities it was picked from ([`Sampling::probabilities`]).
    pub probabilities: Array1<f64>,
    /// The token's own pass: one row per layer's intermediates (or what was kept), its keys
    /// and values appended to the cache.
    pub output: O,
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
///
/// Its steps are [`Step`]s of every intermediate; [`Decoder::generation_with`] makes one
/// whose steps keep what a [`Keep`] asks for (`Generation<'_, DecoderKept>`).
#[derive(Debug)]
pub struct Generation<'a, O = DecoderOutput> {
    decoder: &'a Decoder,
    cache: KvCache,
    sampler: Sampler,
    logits: Array1<f64>,
    keep: Keep,
    output: PhantomData<fn() -> O>,
}

impl<O> Generation<'_, O> {
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

    /// Picks the next token, runs its pass with `run` and keeps the logits `logits` reads
    /// from it for the token after.
    fn advance(
        &mut self,
        run: impl FnOnce(&Decoder, usize, &mut KvCache, Keep) -> Result<O, AttentionError>,
        logits: impl FnOnce(&O) -> Array1<f64>,
    ) -> Option<Result<Step<O>, AttentionError>> {
        let probabilities = self
            .sampler
            .sampling()
            .probabilities(self.logits.view())
            .expect("checked by Sampler::new");
        let id = self.sampler.pick(self.logits.view());
        Some(
            run(self.decoder, id, &mut self.cache, self.keep).map(|output| {
                self.logits = logits(&output);
                Step {
                    id,
                    probabilities,
                    output,
                }
            }),
        )
    }
}

impl Iterator for Generation<'_> {
    type Item = Result<Step, AttentionError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.advance(
            |decoder, id, cache, _| decoder.forward_cached(&[id], cache),
            |output| last_row(&output.logits),
        )
    }
}

impl Iterator for Generation<'_, DecoderKept> {
    type Item = Result<Step<DecoderKept>, AttentionError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.advance(
            |decoder, id, cache, keep| decoder.forward_with(&[id], cache, keep),
            kept_logits,
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
        self.begin(
            prompt,
            sampling,
            Keep::Everything,
            |cache| self.pass(prompt, cache, true),
            |prefill| last_row(&prefill.logits),
        )
    }

    /// [`Decoder::generation`] keeping what `keep` asks for, in the prefill and in every step
    /// ([`Decoder::forward_with`]): with [`Keep::LastHiddenState`], the last position's final
    /// hidden row and logits, the lean step. The ids and logits are
    /// [`Decoder::generation`]'s, bit for bit.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// let decoder = Decoder::new(array![[1.0, 0.0], [0.0, 1.0]], vec![], Norm::Rms(RmsNorm::new(array![1.0, 1.0], 0.0)?), LmHead::Tied)?;
    /// let (prefill, steps) = decoder.generation_with(&[0, 1], Sampling::Greedy, Keep::LastHiddenState)?;
    /// assert_eq!(prefill.logits(), Some(steps.logits()));
    /// let ids: Vec<usize> = steps.take(2).map(|s| s.map(|s| s.id)).collect::<Result<_, _>>()?;
    /// assert_eq!(ids, decoder.generate(&[0, 1], 2, Sampling::Greedy)?);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// As [`Decoder::generation`].
    pub fn generation_with(
        &self,
        prompt: &[usize],
        sampling: Sampling,
        keep: Keep,
    ) -> Result<(DecoderKept, Generation<'_, DecoderKept>), AttentionError> {
        self.begin(
            prompt,
            sampling,
            keep,
            |cache| self.kept_pass(prompt, cache, keep, true),
            kept_logits,
        )
    }

    /// A generation after its prefill: `prefill` runs the prompt on an empty cache and
    /// `logits` reads the first token's logits from it.
    fn begin<O>(
        &self,
        prompt: &[usize],
        sampling: Sampling,
        keep: Keep,
        prefill: impl FnOnce(&mut KvCache) -> Result<O, AttentionError>,
        logits: impl FnOnce(&O) -> Array1<f64>,
    ) -> Result<(O, Generation<'_, O>), AttentionError> {
        check_prompt(prompt)?;
        let sampler = Sampler::new(sampling)?;
        let mut cache = self.cache();
        let prefill = prefill(&mut cache)?;
        let logits = logits(&prefill);
        let steps = Generation {
            decoder: self,
            cache,
            sampler,
            logits,
            keep,
            output: PhantomData,
        };
        Ok((prefill, steps))
    }

    /// The prompt, then `new_tokens` tokens, each fed back in: returns the new tokens' ids.
    /// The prompt runs once (the prefill); each further token is one lean step on the KV
    /// cache ([`Keep::LastHiddenState`]: the RoPE tables and the mask made once a step, no
    /// intermediate kept, the LM head on the last position), and the last token needs no
    /// step. The ids are [`Decoder::generation`]'s, bit for bit.
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
        check_prompt(prompt)?;
        let mut sampler = Sampler::new(sampling)?;
        let mut cache = self.cache();
        let mut logits = self.last_position(prompt, &mut cache, false)?.logits;
        let mut ids = Vec::with_capacity(new_tokens);
        while ids.len() < new_tokens {
            let id = sampler.pick(logits.view());
            ids.push(id);
            if ids.len() < new_tokens {
                logits = self.last_position(&[id], &mut cache, false)?.logits;
            }
        }
        Ok(ids)
    }
}

fn last_row(logits: &ndarray::Array2<f64>) -> Array1<f64> {
    logits.row(logits.nrows() - 1).to_owned()
}

/// The last position's logits of a pass over at least one token (a prompt, a step's token).
fn kept_logits(kept: &DecoderKept) -> Array1<f64> {
    kept.logits().map(|l| l.to_owned()).unwrap_or_default()
}

fn check_prompt(prompt: &[usize]) -> Result<(), AttentionError> {
    if prompt.is_empty() {
        return Err(AttentionError::Setting {
            name: "prompt",
            value: "empty".into(),
            rule: "generation continues a prompt of at least one token",
        });
    }
    Ok(())
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
