//! The backward pass of a worked problem: `solve --backward`'s steps, its gradients for the
//! answers JSON (`crate::answers::BackwardAnswers`), and the backward parts of
//! `exercise --backward`'s key. The gradients are the library's
//! ([`MultiHead::backward`], feature `learn`); this module names, orders and prints them.
//!
//! From `G = dL/d(result)` (the output `Z W_O`'s gradient, or the concatenation's without
//! W_O): `dL/dZ = G W_O^T`, `dL/dW_O = Z^T G`; then per head `dL/dA = dL/dZ_i V^T`,
//! `dL/dS = A * (dL/dA - rowsum(A * dL/dA))` (softmax's Jacobian), `dL/dQ = dL/dS K /
//! sqrt(d_k)`, `dL/dK = dL/dS^T Q / sqrt(d_k)`, `dL/dV = A^T dL/dZ_i`, `dL/dW_Q = X^T dL/dQ`
//! (W_K, W_V likewise); and `dL/dX`, the sum over the heads of `dL/dQ W_Q^T + dL/dK W_K^T +
//! dL/dV W_V^T`. A blocked score has weight 0, so its gradient is 0.

use crate::answers::{BackwardAnswers, HeadGradients};
use crate::matrices::matrix;
use attention_lab::np::{array_str, PrintOptions};
use attention_lab::prelude::{MultiHead, MultiHeadGrad, MultiHeadOutput};
use attention_lab_io::error::{Error, Result};
use ndarray::{s, Array2, ArrayViewD};

/// Every gradient of a problem, from the given `G` back to X.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_classroom::backward::Gradients;
///
/// let w = Array2::<f64>::eye(2);
/// let layer = MultiHead::new(vec![Head::new(w.clone(), w.clone(), w.clone())?], Some(w))?;
/// let x = array![[1.0, 0.0], [0.0, 1.0]];
/// let out = layer.forward(&x, &Attend::new())?;
/// let g = Gradients::new(&layer, &x, &out, Array2::ones((2, 2)))?;
/// assert_eq!(g.dz[0], Array2::<f64>::ones((2, 2))); // G W_O^T with W_O = I
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Gradients {
    /// `G`, the gradient given: of the output `Z W_O (+ b_O)`, or of `Z` without W_O.
    pub dresult: Array2<f64>,
    /// Each head's `dL/dZ_i`: its block of columns of `dL/dZ`.
    pub dz: Vec<Array2<f64>>,
    /// The library's gradients.
    pub grad: MultiHeadGrad,
    /// Whether the layer has W_O (G is then the output's gradient, else Z's).
    pub has_wo: bool,
}

impl Gradients {
    /// The backward pass of `layer`'s forward pass `out` on `x` (self-attention) from
    /// `dresult = G`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_classroom::backward::Gradients;
    ///
    /// let w = Array2::<f64>::eye(2);
    /// let layer = MultiHead::new(vec![Head::new(w.clone(), w.clone(), w)?], None)?;
    /// let x = array![[1.0, 0.0], [0.0, 1.0]];
    /// let out = layer.forward(&x, &Attend::new().causal())?;
    /// let g = Gradients::new(&layer, &x, &out, Array2::ones((2, 2)))?;
    /// assert_eq!(g.grad.heads[0].dscores[[0, 1]], 0.0); // blocked: no gradient
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// An [`Error`] naming `--dz` when `dresult` is not the shape of the layer's result.
    pub fn new(
        layer: &MultiHead,
        x: &Array2<f64>,
        out: &MultiHeadOutput,
        dresult: Array2<f64>,
    ) -> Result<Gradients> {
        let result = out.result();
        if dresult.dim() != result.dim() {
            let what = if out.output.is_some() {
                "the output Z W_O"
            } else {
                "the concatenation Z (no --wo)"
            };
            return Err(Error::at(
                "--dz",
                format!(
                    "G is {}x{} but {what} is {}x{} (G is dL/d(output): one row per token, one \
                     column per output)",
                    dresult.nrows(),
                    dresult.ncols(),
                    result.nrows(),
                    result.ncols()
                ),
            ));
        }
        let grad = layer
            .backward(x, out, &dresult)
            .map_err(|e| Error::at("--backward", e))?;
        let mut dz = Vec::new();
        let mut start = 0;
        for head in &out.heads {
            let width = head.z.ncols();
            dz.push(grad.dconcat.slice(s![.., start..start + width]).to_owned());
            start += width;
        }
        Ok(Gradients {
            dresult,
            dz,
            grad,
            has_wo: out.output.is_some(),
        })
    }
}

/// `G` for `solve --backward`: the `--dz` matrix, or ones of the result's shape (the
/// gradient of `L = sum of every output`) when it is not given.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_classroom::backward::upstream;
///
/// let w = Array2::<f64>::eye(2);
/// let layer = MultiHead::new(vec![Head::new(w.clone(), w.clone(), w)?], None)?;
/// let out = layer.forward(&array![[1.0, 0.0]], &Attend::new())?;
/// assert_eq!(upstream(None, &out)?, Array2::<f64>::ones((1, 2)));
/// assert_eq!(upstream(Some("[[1,2]]"), &out)?, array![[1.0, 2.0]]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// An [`Error`] naming `--dz` when it is not a readable matrix.
pub fn upstream(dz: Option<&str>, out: &MultiHeadOutput) -> Result<Array2<f64>> {
    match dz {
        Some(dz) => matrix("--dz", dz),
        None => Ok(Array2::ones(out.result().dim())),
    }
}

/// Where a backward step belongs: the layer's output projection, a head, or the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// G and the output projection's gradients.
    Output,
    /// Head i's (from 1).
    Head(usize),
    /// `dL/dX`.
    Input,
}

/// What a backward step is the gradient of, for an exercise's parts and for grading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Of {
    /// G itself, given.
    Given,
    /// The concatenation Z.
    Concat,
    /// W_O.
    Wo,
    /// b_O.
    Bo,
    /// A head's Z_i.
    Z,
    /// A head's weights A_i.
    Weights,
    /// A head's scores S_i.
    Scores,
    /// Q_i.
    Q,
    /// K_i.
    K,
    /// V_i.
    V,
    /// W_Q of a head.
    Wq,
    /// W_K of a head.
    Wk,
    /// W_V of a head.
    Wv,
    /// A head's bias b_Q, b_K or b_V (0, 1, 2).
    Bias(usize),
    /// X.
    X,
}

/// One gradient of the worked backward pass, with its names.
#[derive(Debug, Clone)]
pub struct GradStep<'a> {
    /// Its group, for blank lines and an exercise's parts.
    pub group: Group,
    /// What it is the gradient of.
    pub of: Of,
    /// The label `solve --backward` prints, e.g. `Head 1 - dL/dQ_1 = ...`.
    pub label: String,
    /// The LaTeX name, e.g. `\partial L / \partial Q_1`.
    pub tex: String,
    /// The gradient (a matrix, or a vector for a bias).
    pub value: ArrayViewD<'a, f64>,
}

/// `\partial L / \partial name`, LaTeX.
fn d(name: &str) -> String {
    format!("\\partial L / \\partial {name}")
}

/// Every step of the backward pass in the order `solve --backward` prints them. `masked`
/// says whether the forward scores had a mask; `has_bo` whether the output has a bias.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_classroom::backward::{steps, Gradients, Of};
///
/// let w = Array2::<f64>::eye(2);
/// let layer = MultiHead::new(vec![Head::new(w.clone(), w.clone(), w.clone())?], Some(w))?;
/// let x = array![[1.0, 0.0], [0.0, 1.0]];
/// let out = layer.forward(&x, &Attend::new())?;
/// let g = Gradients::new(&layer, &x, &out, Array2::ones((2, 2)))?;
/// let all = steps(&g, false);
/// assert_eq!(all[0].label, "G = dL/d(Z W_O)");
/// assert!(all.iter().any(|s| s.of == Of::Wq && s.tex.contains("W_Q^{(1)}")));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[allow(
    clippy::too_many_lines,
    reason = "one step per line of the backward pass, in the derivation's order: the list is the table"
)]
pub fn steps(g: &Gradients, has_bo: bool) -> Vec<GradStep<'_>> {
    let grad = &g.grad;
    let mut raw: Vec<(Group, Of, String, String, ArrayViewD<'_, f64>)> = Vec::new();
    let output = if has_bo { "Z W_O + b_O" } else { "Z W_O" };
    if g.has_wo {
        raw.push((
            Group::Output,
            Of::Given,
            format!("G = dL/d({output})"),
            format!("G = {}", d(&format!("({output})"))),
            g.dresult.view().into_dyn(),
        ));
        raw.push((
            Group::Output,
            Of::Concat,
            "dL/dZ = G W_O^T".into(),
            format!("{} = G W_O^\\top", d("Z")),
            grad.dconcat.view().into_dyn(),
        ));
        if let Some(dwo) = &grad.dwo {
            raw.push((
                Group::Output,
                Of::Wo,
                "dL/dW_O = Z^T G".into(),
                format!("{} = Z^\\top G", d("W_O")),
                dwo.view().into_dyn(),
            ));
        }
        if let Some(dbo) = &grad.dbo {
            raw.push((
                Group::Output,
                Of::Bo,
                "dL/db_O = G summed over the tokens".into(),
                format!("{} = \\mathbf{{1}}^\\top G", d("b_O")),
                dbo.view().into_dyn(),
            ));
        }
    } else {
        raw.push((
            Group::Output,
            Of::Given,
            "G = dL/dZ".into(),
            format!("G = {}", d("Z")),
            g.dresult.view().into_dyn(),
        ));
    }
    let mut start = 0;
    for (n, (h, dz)) in grad.heads.iter().zip(&g.dz).enumerate() {
        let i = n + 1;
        let group = Group::Head(i);
        let dk = h.dk.ncols();
        let end = start + dz.ncols();
        let mut head = vec![
            (
                Of::Z,
                format!("dL/dZ_{i} = dL/dZ[:, {start}:{end}]"),
                d(&format!("Z_{i}")),
                dz.view().into_dyn(),
            ),
            (
                Of::Weights,
                format!("dL/dweights = dL/dZ_{i} V_{i}^T"),
                format!(
                    "{} = {} V_{i}^\\top",
                    d(&format!("A_{i}")),
                    d(&format!("Z_{i}"))
                ),
                h.dweights.view().into_dyn(),
            ),
            (
                Of::Scores,
                "dL/dscores = weights * (dL/dweights - rowsum(weights * dL/dweights))".into(),
                d(&format!("S_{i}")),
                h.dscores.view().into_dyn(),
            ),
            (
                Of::Q,
                format!("dL/dQ_{i} = dL/dscores K_{i} / sqrt({dk})"),
                d(&format!("Q_{i}")),
                h.dq.view().into_dyn(),
            ),
            (
                Of::K,
                format!("dL/dK_{i} = dL/dscores^T Q_{i} / sqrt({dk})"),
                d(&format!("K_{i}")),
                h.dk.view().into_dyn(),
            ),
            (
                Of::V,
                format!("dL/dV_{i} = weights^T dL/dZ_{i}"),
                d(&format!("V_{i}")),
                h.dv.view().into_dyn(),
            ),
        ];
        for (of, m, dw) in [
            (Of::Wq, "Q", &h.dwq),
            (Of::Wk, "K", &h.dwk),
            (Of::Wv, "V", &h.dwv),
        ] {
            head.push((
                of,
                format!("dL/dW_{m} = X^T dL/d{m}_{i}"),
                format!(
                    "{} = X^\\top {}",
                    d(&format!("W_{m}^{{({i})}}")),
                    d(&format!("{m}_{i}"))
                ),
                dw.view().into_dyn(),
            ));
        }
        for (b, (m, db)) in [("Q", &h.dbq), ("K", &h.dbk), ("V", &h.dbv)]
            .into_iter()
            .enumerate()
        {
            if let Some(db) = db {
                head.push((
                    Of::Bias(b),
                    format!("dL/db_{m} = dL/d{m}_{i} summed over the tokens"),
                    d(&format!("b_{m}^{{({i})}}")),
                    db.view().into_dyn(),
                ));
            }
        }
        for (of, label, tex, value) in head {
            raw.push((group, of, format!("Head {i} - {label}"), tex, value));
        }
        start = end;
    }
    raw.push((
        Group::Input,
        Of::X,
        "dL/dX = sum over the heads of dL/dQ_i W_Q^T + dL/dK_i W_K^T + dL/dV_i W_V^T".into(),
        d("X"),
        grad.dx.view().into_dyn(),
    ));
    raw.into_iter()
        .map(|(group, of, label, tex, value)| GradStep {
            group,
            of,
            label,
            tex,
            value,
        })
        .collect()
}

/// The backward steps as `print("label:\n", M)` prints each, a blank line before each group
/// (so after the forward steps too).
///
/// ```
/// use attention_lab::np::PrintOptions;
/// use attention_lab::prelude::*;
/// use attention_lab_classroom::backward::{print_steps, Gradients};
///
/// let w = Array2::<f64>::eye(1);
/// let layer = MultiHead::new(vec![Head::new(w.clone(), w.clone(), w)?], None)?;
/// let x = array![[1.0]];
/// let out = layer.forward(&x, &Attend::new())?;
/// let g = Gradients::new(&layer, &x, &out, Array2::ones((1, 1)))?;
/// assert!(print_steps(&g, false, &PrintOptions::NUMPY).starts_with("\nG = dL/dZ:\n [[1.]]\n"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn print_steps(g: &Gradients, has_bo: bool, opts: &PrintOptions) -> String {
    let mut text = String::new();
    let mut last = None;
    for step in steps(g, has_bo) {
        if last != Some(step.group) {
            text.push('\n');
        }
        text.push_str(&format!(
            "{}:\n {}\n",
            step.label,
            array_str(&step.value, opts)
        ));
        last = Some(step.group);
    }
    text
}

impl From<&Gradients> for BackwardAnswers {
    /// Every gradient, for `solve --backward --json` and a backward sheet's key.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_classroom::answers::BackwardAnswers;
    /// use attention_lab_classroom::backward::Gradients;
    ///
    /// let w = Array2::<f64>::eye(1);
    /// let layer = MultiHead::new(vec![Head::new(w.clone(), w.clone(), w)?], None)?;
    /// let x = array![[1.0]];
    /// let out = layer.forward(&x, &Attend::new())?;
    /// let g = Gradients::new(&layer, &x, &out, Array2::ones((1, 1)))?;
    /// assert_eq!(BackwardAnswers::from(&g).dwo, None); // no W_O
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn from(g: &Gradients) -> BackwardAnswers {
        let grad = &g.grad;
        BackwardAnswers {
            dresult: Some(g.dresult.clone()),
            dconcat: Some(grad.dconcat.clone()),
            dwo: grad.dwo.clone(),
            dbo: grad.dbo.clone(),
            heads: grad
                .heads
                .iter()
                .zip(&g.dz)
                .map(|(h, dz)| HeadGradients {
                    dz: dz.clone(),
                    dweights: h.dweights.clone(),
                    dscores: h.dscores.clone(),
                    dq: h.dq.clone(),
                    dk: h.dk.clone(),
                    dv: h.dv.clone(),
                    dwq: h.dwq.clone(),
                    dwk: h.dwk.clone(),
                    dwv: h.dwv.clone(),
                    dbq: h.dbq.clone(),
                    dbk: h.dbk.clone(),
                    dbv: h.dbv.clone(),
                })
                .collect(),
            dx: Some(grad.dx.clone()),
        }
    }
}

/// The exercise part a backward step answers: (e) `dL/dW_O`, `dL/dZ` and each `dL/dZ_i`;
/// (f) each head's `dL/dA_i` and `dL/dS_i`; (g) each head's `dL/dQ_i`, `dL/dK_i`,
/// `dL/dV_i` and the weights' gradients. G (given) and `dL/dX` (X is data) are no part.
///
/// ```
/// use attention_lab_classroom::backward::{part_of, Of};
/// assert_eq!(part_of(Of::Wo), Some('e'));
/// assert_eq!(part_of(Of::Scores), Some('f'));
/// assert_eq!(part_of(Of::X), None);
/// ```
pub fn part_of(of: Of) -> Option<char> {
    match of {
        Of::Wo | Of::Concat | Of::Z => Some('e'),
        Of::Weights | Of::Scores => Some('f'),
        Of::Q | Of::K | Of::V | Of::Wq | Of::Wk | Of::Wv => Some('g'),
        Of::Given | Of::Bo | Of::Bias(_) | Of::X => None,
    }
}

/// The wording of a backward sheet's parts (e) to (g); `masked` for a masked sheet.
///
/// ```
/// use attention_lab_classroom::backward::part_texts;
/// assert_eq!(part_texts(false).map(|(letter, _)| letter), ['e', 'f', 'g']);
/// ```
pub fn part_texts(masked: bool) -> [(char, String); 3] {
    let blocked = if masked {
        " (a blocked score, of weight $0$, gets gradient $0$)"
    } else {
        ""
    };
    [
        (
            'e',
            "Backpropagate $G$ through the output projection: compute \
             $\\partial L / \\partial W_O = Z^\\top G$ and \
             $\\partial L / \\partial Z = G W_O^\\top$, and split the latter into each \
             head's $\\partial L / \\partial Z_i$ (its $d_v$ columns)."
                .into(),
        ),
        (
            'f',
            format!(
                "For every head, compute $\\partial L / \\partial A_i = \\partial L / \\partial Z_i \\, V_i^\\top$ \
                 and, through the softmax's Jacobian row by row, the scores' gradient \
                 $\\partial L / \\partial S_i = A_i \\odot (\\partial L / \\partial A_i - \\operatorname{{rowsum}}(A_i \\odot \\partial L / \\partial A_i))${blocked}."
            ),
        ),
        (
            'g',
            "For every head, compute $\\partial L / \\partial Q_i = \\partial L / \\partial S_i \\, K_i / \\sqrt{d_k}$, \
             $\\partial L / \\partial K_i = (\\partial L / \\partial S_i)^\\top Q_i / \\sqrt{d_k}$ and \
             $\\partial L / \\partial V_i = A_i^\\top \\partial L / \\partial Z_i$, then the projections' \
             gradients $\\partial L / \\partial W_Q^{(i)} = X^\\top \\partial L / \\partial Q_i$, \
             $\\partial L / \\partial W_K^{(i)}$ and $\\partial L / \\partial W_V^{(i)}$."
                .into(),
        ),
    ]
}
