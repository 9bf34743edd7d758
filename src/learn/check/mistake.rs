//! The mistakes learners are known to make in attention's forward and backward passes, by
//! name: what `attention-lab grade` writes in a student's feedback and what [`check`](super)
//! prints under a learner's function.

/// A mistake from the list students are known to make, found by recomputing the step with
/// the mistake applied.
///
/// ```
/// use attention_lab::check::Mistake;
/// assert_eq!(Mistake::NoSqrtDk.code(), "no-sqrt-dk");
/// assert_ne!(Mistake::Transposed("A dZ instead of A^T dZ"), Mistake::Transposed("dS Q instead of dS^T Q"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mistake {
    /// `Q K^T` without the division by `sqrt(d_k)`.
    NoSqrtDk,
    /// `Q K^T / d_k`.
    DividedByDk,
    /// `Q K / sqrt(d_k)` (only possible when K is square).
    KNotTransposed,
    /// `K Q^T / sqrt(d_k)`: the scores transposed.
    KQTransposed,
    /// The softmax of each column instead of each row.
    SoftmaxColumns,
    /// `exp(s) / sum(exp(s))` where the scores overflow `exp`: NaN weights.
    NaiveSoftmax,
    /// The heads' outputs side by side, but not in the order 1, 2, ...
    HeadOrder,
    /// `W_O Z` instead of `Z W_O`.
    WoWrongSide,
    /// The concatenation `Z` handed in as the output: `W_O` not applied.
    NoOutputProjection,
    /// Numbers rounded to fewer decimals than the sheet asks, before or at this step.
    EarlyRounding(usize),
    /// On a masked sheet, the scores without the mask added: a blocked key keeps its score.
    ForgotMask,
    /// Backward: softmax's Jacobian without its second term, `dS = A * dA` instead of
    /// `A * (dA - rowsum(A * dA))`.
    JacobianDiagonalOnly,
    /// Backward: a product transposed, e.g. `V dZ^T` instead of `dZ V^T`; the detail says
    /// which was computed.
    Transposed(&'static str),
    /// Backward: the `1 / sqrt(d_k)` of the forward pass forgotten, `dQ = dS K`.
    BackwardNoSqrtDk,
}

impl Mistake {
    /// A short code for the gradebook.
    ///
    /// ```
    /// use attention_lab::check::Mistake;
    /// assert_eq!(Mistake::HeadOrder.code(), "head-order");
    /// ```
    pub fn code(self) -> &'static str {
        match self {
            Mistake::NoSqrtDk => "no-sqrt-dk",
            Mistake::DividedByDk => "divided-by-dk",
            Mistake::KNotTransposed => "k-not-transposed",
            Mistake::KQTransposed => "kq-transposed",
            Mistake::SoftmaxColumns => "softmax-columns",
            Mistake::NaiveSoftmax => "naive-softmax",
            Mistake::HeadOrder => "head-order",
            Mistake::WoWrongSide => "wo-wrong-side",
            Mistake::NoOutputProjection => "no-wo",
            Mistake::EarlyRounding(_) => "early-rounding",
            Mistake::ForgotMask => "forgot-mask",
            Mistake::JacobianDiagonalOnly => "jacobian-diagonal",
            Mistake::Transposed(_) => "transposed",
            Mistake::BackwardNoSqrtDk => "backward-no-sqrt-dk",
        }
    }

    /// The mistake in words, for the student's feedback.
    ///
    /// ```
    /// use attention_lab::check::Mistake;
    /// assert_eq!(Mistake::NoSqrtDk.describe(), "the scores were not divided by sqrt(d_k)");
    /// ```
    pub fn describe(self) -> String {
        match self {
            Mistake::NoSqrtDk => "the scores were not divided by sqrt(d_k)".into(),
            Mistake::DividedByDk => "the scores were divided by d_k instead of sqrt(d_k)".into(),
            Mistake::KNotTransposed => "K was used instead of K^T (Q K, not Q K^T)".into(),
            Mistake::KQTransposed => "K Q^T was computed instead of Q K^T".into(),
            Mistake::SoftmaxColumns => {
                "the softmax was taken over the columns instead of each row".into()
            }
            Mistake::NaiveSoftmax => {
                "the naive softmax exp(s) / sum(exp(s)) overflowed; subtract each row's \
                 maximum first"
                    .into()
            }
            Mistake::HeadOrder => "the heads were concatenated in the wrong order".into(),
            Mistake::WoWrongSide => {
                "W_O was multiplied on the wrong side (W_O Z, not Z W_O)".into()
            }
            Mistake::NoOutputProjection => {
                "W_O was not applied: the output handed in is the concatenation Z".into()
            }
            Mistake::EarlyRounding(d) => format!(
                "numbers were rounded too early (to {d} decimal{})",
                if d == 1 { "" } else { "s" }
            ),
            Mistake::ForgotMask => {
                "the mask was not added to the scores (a blocked key's score is -inf, and its \
                 weight 0)"
                    .into()
            }
            Mistake::JacobianDiagonalOnly => {
                "softmax's Jacobian lost its second term: dS = A * dA, not \
                 A * (dA - rowsum(A * dA)) (each weight also depends on the row's other scores)"
                    .into()
            }
            Mistake::Transposed(what) => {
                format!("a product was transposed: {what}")
            }
            Mistake::BackwardNoSqrtDk => {
                "the backward pass forgot the 1/sqrt(d_k) of the scores (dQ = dS K / sqrt(d_k), \
                 dK = dS^T Q / sqrt(d_k))"
                    .into()
            }
        }
    }
}
