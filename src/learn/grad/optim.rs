//! Optimisers as PyTorch defines them: `torch.optim.SGD` (momentum, weight decay; no
//! dampening, no Nesterov) and `torch.optim.AdamW`, with torch's order of arithmetic.

use ndarray::{Array2, Zip};

use crate::error::{AttentionError, Operand};
use crate::learn::grad::require;

/// Stochastic gradient descent with momentum and (L2) weight decay, as `torch.optim.SGD`
/// with `dampening=0, nesterov=False`: `g = grad + weight_decay * p`, then
/// `buf = g` on the first step and `buf = momentum * buf + g` after, then `p -= lr * buf`.
/// It keeps one momentum buffer per parameter, by position in the slices given to
/// [`Optimizer::step`].
///
/// ```
/// use attention_lab::prelude::*;
///
/// // one step down the gradient of L = w^2 / 2, which is w itself
/// let mut sgd = Sgd::new(0.25, 0.9, 0.0)?;
/// let mut w = array![[4.0]];
/// let g = w.clone();
/// sgd.step(&mut [&mut w], &[&g])?;
/// assert_eq!(w, array![[3.0]]);
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Sgd {
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    buffers: Vec<Array2<f64>>,
}

/// AdamW as `torch.optim.AdamW`: decoupled weight decay `p *= 1 - lr * weight_decay`
/// first, then the moments `m`, `v`, their bias corrections, and
/// `p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)`. It keeps `m`, `v`
/// and the step count per parameter, by position in the slices given to
/// [`Optimizer::step`].
///
/// ```
/// use attention_lab::prelude::*;
///
/// let mut adamw = AdamW::new(1e-3, (0.9, 0.999), 1e-8, 0.01)?;
/// let mut w = array![[1.0, -1.0]];
/// for _ in 0..3 {
///     let g = w.clone();
///     adamw.step(&mut [&mut w], &[&g])?;
/// }
/// assert!(w[[0, 0]] < 1.0 && w[[0, 1]] > -1.0); // both moved towards 0
/// # Ok::<(), AttentionError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct AdamW {
    lr: f64,
    betas: (f64, f64),
    eps: f64,
    weight_decay: f64,
    steps: u32,
    m: Vec<Array2<f64>>,
    v: Vec<Array2<f64>>,
}

/// [`AttentionError::Setting`] unless `ok` holds and `value` is finite, as torch's own
/// checks.
fn setting(
    name: &'static str,
    value: f64,
    ok: bool,
    rule: &'static str,
) -> Result<(), AttentionError> {
    if ok && value.is_finite() {
        return Ok(());
    }
    Err(AttentionError::Setting {
        name,
        value: value.to_string(),
        rule,
    })
}

/// Each named setting must be finite and at least 0.
fn non_negative(settings: &[(&'static str, f64)]) -> Result<(), AttentionError> {
    for &(name, value) in settings {
        setting(name, value, value >= 0.0, "must be finite and at least 0")?;
    }
    Ok(())
}

/// One gradient per parameter, of its shape, and as many parameters as the state was
/// made for (`state`, empty before the first step).
fn check_step(
    params: &[&mut Array2<f64>],
    grads: &[&Array2<f64>],
    state: &[Array2<f64>],
) -> Result<(), AttentionError> {
    require(
        params.len() == grads.len(),
        ("the parameters", &[params.len()]),
        ("the gradients", &[grads.len()]),
        "there must be one gradient per parameter",
    )?;
    for (i, (p, g)) in params.iter().zip(grads).enumerate() {
        if p.dim() != g.dim() {
            return Err(AttentionError::mismatch(
                Operand::new(format!("parameter {i}"), p.shape()),
                Operand::new(format!("gradient {i}"), g.shape()),
                "a gradient must have the shape of its parameter",
            ));
        }
        if let Some(s) = state.get(i).filter(|s| s.dim() != p.dim()) {
            return Err(AttentionError::mismatch(
                Operand::new(format!("parameter {i}"), p.shape()),
                Operand::new(
                    format!("the optimiser's state for parameter {i}"),
                    s.shape(),
                ),
                "each step must pass the same parameters, in the same order",
            ));
        }
    }
    require(
        state.is_empty() || state.len() == params.len(),
        ("the parameters", &[params.len()]),
        ("the optimiser's state", &[state.len()]),
        "each step must pass the same parameters, in the same order",
    )
}

/// What [`Sgd`] and [`AdamW`] share: a step that moves each parameter against its
/// gradient, keeping the optimiser's state per parameter by position. In the prelude, so
/// `opt.step(...)` needs no import of its own.
///
/// ```
/// use attention_lab::prelude::*;
///
/// // either optimiser behind one type
/// let mut opt: Box<dyn Optimizer> = Box::new(Sgd::new(0.5, 0.0, 0.0)?);
/// let mut w = array![[1.0]];
/// opt.step(&mut [&mut w], &[&array![[1.0]]])?;
/// assert_eq!(w, array![[0.5]]);
/// # Ok::<(), AttentionError>(())
/// ```
pub trait Optimizer: sealed::Update {
    /// One step: each `params[i]` moves against `grads[i]`. Pass the same parameters in
    /// the same order every step; the state (momentum buffers, moments) follows the
    /// positions.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let mut sgd = Sgd::new(0.1, 0.0, 0.0)?;
    /// let (mut w, mut b) = (array![[1.0, 2.0]], array![[0.0]]);
    /// sgd.step(&mut [&mut w, &mut b], &[&array![[10.0, 0.0]], &array![[-1.0]]])?;
    /// assert_eq!((w, b), (array![[0.0, 2.0]], array![[0.1]]));
    /// let mut adamw = AdamW::new(0.01, (0.9, 0.999), 1e-8, 0.5)?;
    /// let mut w = array![[2.0, -2.0]];
    /// adamw.step(&mut [&mut w], &[&array![[0.0, 0.0]]])?;
    /// assert_eq!(w, array![[2.0 * 0.995, -2.0 * 0.995]]); // decay alone
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Mismatch`] when there is not one gradient per parameter, a
    /// gradient is not its parameter's shape, or the parameters differ from the last step's.
    fn step(
        &mut self,
        params: &mut [&mut Array2<f64>],
        grads: &[&Array2<f64>],
    ) -> Result<(), AttentionError> {
        check_step(params, grads, self.state())?;
        self.begin();
        for (i, (p, g)) in params.iter_mut().zip(grads).enumerate() {
            self.update(i, p, g);
        }
        Ok(())
    }
}

/// The per-optimiser half of [`Optimizer::step`], out of reach outside the crate.
mod sealed {
    use ndarray::Array2;

    pub trait Update {
        /// One array per parameter seen so far (empty before the first step, and for SGD
        /// without momentum).
        fn state(&self) -> &[Array2<f64>];
        /// Called once a step, before the updates.
        fn begin(&mut self);
        /// Moves parameter `i`; makes its state on the first step.
        fn update(&mut self, i: usize, p: &mut Array2<f64>, g: &Array2<f64>);
    }
}

impl Sgd {
    /// SGD with learning rate `lr`, `momentum` (0 for none) and `weight_decay` (0 for none).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let mut sgd = Sgd::new(0.5, 0.9, 0.0)?;
    /// let mut w = array![[1.0]];
    /// sgd.step(&mut [&mut w], &[&array![[1.0]]])?;
    /// assert_eq!(w, array![[0.5]]);
    /// sgd.step(&mut [&mut w], &[&array![[1.0]]])?; // buf = 0.9 * 1 + 1
    /// assert_eq!(w, array![[0.5 - 0.5 * 1.9]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Setting`] when a setting is negative or not finite.
    pub fn new(lr: f64, momentum: f64, weight_decay: f64) -> Result<Sgd, AttentionError> {
        non_negative(&[
            ("lr", lr),
            ("momentum", momentum),
            ("weight_decay", weight_decay),
        ])?;
        Ok(Sgd {
            lr,
            momentum,
            weight_decay,
            buffers: Vec::new(),
        })
    }
}

impl sealed::Update for Sgd {
    fn state(&self) -> &[Array2<f64>] {
        &self.buffers
    }

    fn begin(&mut self) {}

    fn update(&mut self, i: usize, p: &mut Array2<f64>, g: &Array2<f64>) {
        // torch: grad.add(param, alpha=weight_decay)
        let mut d = Zip::from(g)
            .and(&*p)
            .map_collect(|&g, &p| g + self.weight_decay * p);
        if self.momentum != 0.0 {
            match self.buffers.get_mut(i) {
                // torch: buf.mul_(momentum).add_(grad, alpha=1 - dampening)
                Some(buf) => Zip::from(&mut *buf)
                    .and(&d)
                    .for_each(|b, &d| *b = *b * self.momentum + d),
                // torch: the first step's buffer is the gradient itself
                None => self.buffers.push(d.clone()),
            }
            d.assign(&self.buffers[i]);
        }
        // torch: param.add_(grad, alpha=-lr)
        Zip::from(p).and(&d).for_each(|p, &d| *p += -self.lr * d);
    }
}

impl Optimizer for Sgd {}

/// `torch.lerp(start, end, weight)` as its CPU kernel computes it: from the nearer end.
fn lerp(start: f64, end: f64, weight: f64) -> f64 {
    if weight.abs() < 0.5 {
        start + weight * (end - start)
    } else {
        end - (end - start) * (1.0 - weight)
    }
}

impl AdamW {
    /// AdamW with learning rate `lr`, `betas` (torch's default `(0.9, 0.999)`), `eps`
    /// (default 1e-8) and decoupled `weight_decay` (default 0.01).
    ///
    /// ```
    /// use attention_lab::prelude::*;
    ///
    /// let mut adamw = AdamW::new(0.1, (0.9, 0.999), 1e-8, 0.0)?;
    /// let mut w = array![[1.0]];
    /// adamw.step(&mut [&mut w], &[&array![[3.0]]])?;
    /// // the first step moves each entry by lr, whatever the gradient's size
    /// assert!((w[[0, 0]] - 0.9).abs() < 1e-8);
    /// # Ok::<(), AttentionError>(())
    /// ```
    ///
    /// # Errors
    /// [`AttentionError::Setting`] when `lr`, `eps` or `weight_decay` is negative or not
    /// finite, or a beta is outside `0 <= beta < 1`.
    pub fn new(
        lr: f64,
        betas: (f64, f64),
        eps: f64,
        weight_decay: f64,
    ) -> Result<AdamW, AttentionError> {
        non_negative(&[("lr", lr), ("eps", eps), ("weight_decay", weight_decay)])?;
        let beta = |b: f64| (0.0..1.0).contains(&b);
        let rule = "a beta must be at least 0 and less than 1";
        setting("beta1", betas.0, beta(betas.0), rule)?;
        setting("beta2", betas.1, beta(betas.1), rule)?;
        Ok(AdamW {
            lr,
            betas,
            eps,
            weight_decay,
            steps: 0,
            m: Vec::new(),
            v: Vec::new(),
        })
    }
}

impl sealed::Update for AdamW {
    fn state(&self) -> &[Array2<f64>] {
        &self.m
    }

    fn begin(&mut self) {
        self.steps += 1;
    }

    fn update(&mut self, i: usize, p: &mut Array2<f64>, g: &Array2<f64>) {
        if self.m.len() == i {
            self.m.push(Array2::zeros(p.dim()));
            self.v.push(Array2::zeros(p.dim()));
        }
        let (lr, (beta1, beta2), eps) = (self.lr, self.betas, self.eps);
        let t = f64::from(self.steps);
        // As torch's _single_tensor_adam: Python floats, `beta ** step` and `** 0.5`.
        let step_size = lr / (1.0 - beta1.powf(t));
        let bias_correction2_sqrt = (1.0 - beta2.powf(t)).powf(0.5);
        let decay = 1.0 - lr * self.weight_decay;
        Zip::from(p)
            .and(g)
            .and(&mut self.m[i])
            .and(&mut self.v[i])
            .for_each(|p, &g, m, v| {
                *p *= decay;
                *m = lerp(*m, g, 1.0 - beta1);
                *v = *v * beta2 + (1.0 - beta2) * g * g;
                let denom = v.sqrt() / bias_correction2_sqrt + eps;
                *p += -step_size * (*m / denom);
            });
    }
}

impl Optimizer for AdamW {}
