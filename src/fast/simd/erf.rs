//! `erf` on whole vectors, for the encoder's GELU: FreeBSD's `s_erf.c` (libm's `erf`), its
//! rational approximations computed for every lane and the one each lane's range needs
//! kept, with one division for all three ranges.

use super::{exp, Lanes};

/// `erf` of each lane, within a few ulp of `libm::erf`. By `a = |x|`: below 0.84375,
/// `a + a P(a^2)/Q(a^2)`; below 1.25, `erx + P(a - 1)/Q(a - 1)`; below 6, `1 - erfc(a)`, with
/// `erfc(a) = exp(-a^2 - 0.5625 + R(1/a^2)/S(1/a^2)) / a` (two sets of R, S, split at
/// 1/0.35); from 6 on, 1. The sign of `x` last (erf is odd); NaN stays NaN.
#[inline(always)]
pub(crate) fn erf<S: Lanes>(s: S, x: S::V) -> S::V {
    let e = erf_of_abs(s, s.abs(x));
    let minus_e = s.mul(e, s.splat(-1.0));
    s.select_less(x, 0.0, minus_e, e)
}

/// GELU with the exact Gaussian CDF, `x/2 (1 + erf(x/sqrt(2)))`, as `gelu` computes it.
#[inline(always)]
pub(crate) fn gelu<S: Lanes>(s: S, x: S::V) -> S::V {
    let t = s.mul(x, s.splat(std::f64::consts::FRAC_1_SQRT_2));
    let half_x = s.mul(s.splat(0.5), x);
    s.mul(half_x, s.add(s.splat(1.0), erf(s, t)))
}

/// `erf(a)` for `a >= 0` (or NaN).
#[inline(always)]
fn erf_of_abs<S: Lanes>(s: S, a: S::V) -> S::V {
    // Past 6 erf is 1 to the last bit; clamping keeps a^2 and 1/a^2 finite.
    let a = s.clamp(a, 0.0, 6.0);
    let one = s.splat(1.0);
    // Below 0.84375: z = a^2.
    let z = s.mul(a, a);
    let num_small = poly(s, z, &PP);
    let den_small = s.fma(z, poly(s, z, &QQ), one);
    // Below 1.25: t = a - 1.
    let t = s.add(a, s.splat(-1.0));
    let num_mid = poly(s, t, &PA);
    let den_mid = s.fma(t, poly(s, t, &QA), one);
    // Above: w = 1/a^2 (a >= 1.25 there; below, a harmless value).
    let big = s.select_less(a, 1.25, s.splat(1.25), a);
    let inv = s.div(one, big);
    let w = s.mul(inv, inv);
    let num_big = s.select_less(big, ERFC_SPLIT, poly(s, w, &RA), poly(s, w, &RB));
    let den_big = s.select_less(big, ERFC_SPLIT, poly(s, w, &SA), poly(s, w, &SB));
    let den_big = s.fma(w, den_big, one);
    // One division for the three ranges.
    let q = s.div(
        pick(s, a, [num_small, num_mid, num_big]),
        pick(s, a, [den_small, den_mid, den_big]),
    );
    let small = s.fma(a, q, a);
    let mid = s.add(s.splat(ERX), q);
    // exp(-a^2 - 0.5625 + q) as exp(h) exp(l): h = -a^2 - 0.5625 rounded, l all the
    // rounding errors (a^2's by a fused multiply-add, the sum's exactly, |a^2| > 0.5625).
    let square = s.mul(big, big);
    let square_error = s.fma(big, big, s.mul(square, s.splat(-1.0)));
    let minus_square = s.mul(square, s.splat(-1.0));
    let h = s.add(minus_square, s.splat(-0.5625));
    let sum_error = s.add(
        s.add(minus_square, s.mul(h, s.splat(-1.0))),
        s.splat(-0.5625),
    );
    let l = s.add(s.add(sum_error, s.mul(square_error, s.splat(-1.0))), q);
    let erfc = s.mul(s.mul(exp(s, h), exp(s, l)), inv);
    let large = s.add(one, s.mul(erfc, s.splat(-1.0)));
    pick(s, a, [small, mid, large])
}

/// Of three values, the one for `a`'s range: below 0.84375, below 1.25, or above. (A
/// function, not a closure, so that it is compiled with the path's instructions.)
#[inline(always)]
fn pick<S: Lanes>(s: S, a: S::V, [small, mid, large]: [S::V; 3]) -> S::V {
    s.select_less(a, 0.84375, small, s.select_less(a, 1.25, mid, large))
}

/// `c[0] + x (c[1] + x (..))`, by Horner's rule with fused multiply-adds.
#[inline(always)]
fn poly<S: Lanes>(s: S, x: S::V, c: &[f64]) -> S::V {
    let mut p = s.splat(c[c.len() - 1]);
    for &k in c[..c.len() - 1].iter().rev() {
        p = s.fma(p, x, s.splat(k));
    }
    p
}

/// Where the second set of R and S starts (1/0.35, as libm's high word compares it).
const ERFC_SPLIT: f64 = 2.857_141_494_750_976_6;
const ERX: f64 = 0.8450629115104675;
// erf on [0, 0.84375]: a + a P(z)/(1 + z Q(z)).
const PP: [f64; 5] = [
    0.12837916709551256,
    -0.3250421072470015,
    -0.02848174957559851,
    -0.005770270296489442,
    -2.3763016656650163e-05,
];
const QQ: [f64; 5] = [
    0.39791722395915535,
    0.0650222499887673,
    0.005081306281875766,
    0.00013249473800432164,
    -3.960228278775368e-06,
];
// erf on [0.84375, 1.25]: erx + P(t)/(1 + t Q(t)).
const PA: [f64; 7] = [
    -0.0023621185607526594,
    0.41485611868374833,
    -0.3722078760357013,
    0.31834661990116175,
    -0.11089469428239668,
    0.035478304325618236,
    -0.002166375594868791,
];
const QA: [f64; 6] = [
    0.10642088040084423,
    0.540397917702171,
    0.07182865441419627,
    0.12617121980876164,
    0.01363708391202905,
    0.011984499846799107,
];
// erfc on [1.25, 1/0.35]: R(w), 1 + w S(w).
const RA: [f64; 8] = [
    -0.009864944034847148,
    -0.6938585727071818,
    -10.558626225323291,
    -62.375332450326006,
    -162.39666946257347,
    -184.60509290671104,
    -81.2874355063066,
    -9.814329344169145,
];
const SA: [f64; 8] = [
    19.651271667439257,
    137.65775414351904,
    434.56587747522923,
    645.3872717332679,
    429.00814002756783,
    108.63500554177944,
    6.570249770319282,
    -0.0604244152148581,
];
// erfc on [1/0.35, 28]: R(w), 1 + w S(w) (padded to RA's and SA's length with zeros).
const RB: [f64; 8] = [
    -0.0098649429247001,
    -0.799283237680523,
    -17.757954917754752,
    -160.63638485582192,
    -637.5664433683896,
    -1025.0951316110772,
    -483.5191916086514,
    0.0,
];
const SB: [f64; 8] = [
    30.33806074348246,
    325.7925129965739,
    1536.729586084437,
    3199.8582195085955,
    2553.0504064331644,
    474.52854120695537,
    -22.44095244658582,
    0.0,
];
