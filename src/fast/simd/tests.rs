use super::*;

fn ulps(a: f64, b: f64) -> u64 {
    (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
}

/// One lane operation, run over whole vectors of eight values.
#[derive(Clone, Copy)]
enum Op {
    Exp,
    Max,
    ZeroNegInfinity,
}

struct Apply<'a> {
    op: Op,
    a: &'a [f64; 8],
    b: &'a [f64; 8],
}

impl Kernel for Apply<'_> {
    type Out = [f64; 8];

    #[inline(always)]
    fn run<S: Lanes>(self, s: S) -> [f64; 8] {
        let mut out = [0.0; 8];
        for at in (0..8).step_by(S::WIDTH) {
            // SAFETY: 8 is a multiple of every WIDTH; each vector is in bounds.
            unsafe {
                let (a, b) = (s.load(self.a[at..].as_ptr()), s.load(self.b[at..].as_ptr()));
                let y = match self.op {
                    Op::Exp => exp(s, a),
                    Op::Max => s.max(a, b),
                    Op::ZeroNegInfinity => s.zero_neg_infinity(a),
                };
                s.store(out[at..].as_mut_ptr(), y);
            }
        }
        out
    }
}

/// Every path this CPU runs; the ones it lacks are printed as not run, with the reason.
pub(crate) fn paths() -> Vec<Simd> {
    Simd::ALL
        .into_iter()
        .filter(|simd| match simd.missing() {
            None => true,
            Some(why) => {
                eprintln!("not run: the {} path ({why})", simd.name());
                false
            }
        })
        .collect()
}

/// `op` on every path this CPU runs, each with its name.
fn on_each_path(op: Op, a: [f64; 8], b: [f64; 8]) -> Vec<(Simd, [f64; 8])> {
    paths()
        .into_iter()
        .map(|simd| (simd, dispatch(simd, Apply { op, a: &a, b: &b })))
        .collect()
}

/// The error `exp` promises: 2 ulp with fused multiply-adds, 3 with separate ones (two
/// roundings each), which only the portable path without FMA has.
fn promised(simd: Simd) -> u64 {
    let fused = cfg!(any(target_arch = "aarch64", target_feature = "fma"));
    if simd == Simd::Portable && !fused {
        3
    } else {
        2
    }
}

#[test]
fn dispatch_runs_the_path_named() {
    struct Width;
    impl Kernel for Width {
        type Out = usize;
        fn run<S: Lanes>(self, _: S) -> usize {
            S::WIDTH
        }
    }
    for simd in paths() {
        let width = dispatch(simd, Width);
        assert_eq!(width, if simd == Simd::Avx512 { 8 } else { 4 }, "{simd:?}");
    }
}

#[test]
fn exp_is_within_two_ulp_of_std_where_multiply_adds_fuse() {
    let mut x = -745.5;
    while x < 709.9 {
        let eight = std::array::from_fn(|i| x + 0.000_1 * i as f64);
        for (simd, got) in on_each_path(Op::Exp, eight, eight) {
            for (got, x) in got.iter().zip(eight) {
                let error = ulps(*got, x.exp());
                assert!(
                    error <= promised(simd),
                    "{simd:?}: exp({x}) = {got}: {error} ulp from {}",
                    x.exp()
                );
            }
        }
        x += 0.000_731_9 * 8.0;
    }
}

#[test]
fn exp_edges_as_std_and_every_path_alike() {
    let edges = [
        0.0,
        -0.0,
        -1e-300,
        709.78,
        709.79,
        710.0,
        1e300,
        f64::INFINITY,
        -708.4,
        -740.0,
        -745.1,
        -745.2,
        -800.0,
        f64::NEG_INFINITY,
        1.5,
        -2.25,
    ];
    for eight in edges.chunks(8).map(|c| <[f64; 8]>::try_from(c).unwrap()) {
        let got = on_each_path(Op::Exp, eight, eight);
        for (simd, got) in &got {
            for (ours, x) in got.iter().zip(eight) {
                let std = x.exp();
                assert!(
                    *ours == std || ulps(*ours, std) <= 2,
                    "{simd:?}: exp({x}) = {ours}, std {std}"
                );
            }
        }
        // The vector paths fuse the same multiply-adds in the same order: the same bits.
        let fused: Vec<_> = got
            .iter()
            .filter(|(simd, _)| *simd != Simd::Portable)
            .collect();
        for pair in fused.windows(2) {
            let bits = |v: &[f64; 8]| v.map(f64::to_bits);
            assert_eq!(
                bits(&pair[0].1),
                bits(&pair[1].1),
                "{:?} against {:?}",
                pair[0].0,
                pair[1].0
            );
        }
    }
    // A NaN with a payload in its low bits too (the fast scaling adds to the bits).
    let payload = f64::from_bits(f64::NAN.to_bits() | 0xfff);
    let odd = [f64::NAN, 0.0, payload, 1.0, 2.0, f64::NAN, -1.0, payload];
    for (simd, got) in on_each_path(Op::Exp, odd, odd) {
        for (got, x) in got.iter().zip(odd) {
            assert!(
                got.is_nan() == x.is_nan() && (x.is_nan() || ulps(*got, x.exp()) <= 2),
                "{simd:?}: exp({x}) = {got}"
            );
        }
    }
}

#[test]
fn max_spreads_nan_and_zero_neg_infinity_keeps_the_rest() {
    let a = [
        1.0,
        f64::NAN,
        -3.0,
        f64::NEG_INFINITY,
        0.5,
        -0.0,
        f64::INFINITY,
        7.0,
    ];
    let b = [
        2.0,
        0.0,
        f64::NAN,
        f64::NEG_INFINITY,
        0.25,
        1.0,
        3.0,
        f64::NAN,
    ];
    for ((simd, max), (_, zeroed)) in
        on_each_path(Op::Max, a, b)
            .into_iter()
            .zip(on_each_path(Op::ZeroNegInfinity, a, b))
    {
        for i in 0..8 {
            if a[i].is_nan() || b[i].is_nan() {
                assert!(max[i].is_nan(), "{simd:?}: max lane {i} = {}", max[i]);
            } else {
                assert_eq!(max[i], a[i].max(b[i]), "{simd:?}: max lane {i}");
            }
            let want = if a[i] == f64::NEG_INFINITY { 0.0 } else { a[i] };
            assert!(
                zeroed[i] == want || (want.is_nan() && zeroed[i].is_nan()),
                "{simd:?}: zeroed lane {i} = {}",
                zeroed[i]
            );
        }
    }
}

/// `step` on `values` on every path this CPU runs, each with its name.
#[cfg(feature = "encoder")]
fn mapped(step: Step, values: &[f64]) -> Vec<(Simd, Vec<f64>)> {
    paths()
        .into_iter()
        .map(|simd| {
            let mut out = values.to_vec();
            map_in_place(simd, step, &mut out);
            (simd, out)
        })
        .collect()
}

/// Values from -8 to 8 in uneven steps, the ranges' ends, and the odd ones; 8003 of them, so
/// that the last few go through the padded vector.
#[cfg(feature = "encoder")]
fn erf_inputs() -> Vec<f64> {
    let mut values: Vec<f64> = (0..7_980).map(|i| -8.0 + 0.002_005_3 * i as f64).collect();
    for edge in [
        0.84375_f64,
        1.25,
        2.857_141_494_750_976_6,
        6.0,
        28.0,
        1e-300,
        1e-20,
        5e-324,
    ] {
        values.extend([edge, -edge, f64::from_bits(edge.to_bits() - 1)]);
    }
    values.extend([0.0, -0.0]);
    values
}

#[cfg(feature = "encoder")]
#[test]
fn erf_is_within_four_ulp_of_libm_on_every_path() {
    let values = erf_inputs();
    for (simd, got) in mapped(Step::Erf, &values) {
        for (got, &x) in got.iter().zip(&values) {
            let want = libm::erf(x);
            // -0 may come out 0: GELU multiplies it by x/2.
            assert!(
                *got == want || ulps(*got, want) <= 4,
                "{simd:?}: erf({x}) = {got}, libm {want}: {} ulp",
                ulps(*got, want)
            );
        }
    }
    for (simd, got) in mapped(
        Step::Erf,
        &[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e308],
    ) {
        assert!(got[0].is_nan(), "{simd:?}");
        assert_eq!(got[1..], [1.0, -1.0, 1.0], "{simd:?}");
    }
}

/// GELU on whole vectors against the scalar `gelu`: within 4 ulp of `x/2` (its error where
/// `1 + erf` cancels, for negative x, is erf's, as in the scalar one).
#[cfg(feature = "encoder")]
#[test]
fn gelu_is_the_scalar_gelu_within_four_ulp_of_half_x_on_every_path() {
    let values = erf_inputs();
    for (simd, got) in mapped(Step::Gelu, &values) {
        for (got, &x) in got.iter().zip(&values) {
            let want = crate::layers::feed_forward::gelu(x);
            let ulp = f64::EPSILON * (0.5 * x.abs()).max(f64::MIN_POSITIVE);
            assert!(
                (got - want).abs() <= 4.0 * ulp,
                "{simd:?}: gelu({x}) = {got}, scalar {want}"
            );
        }
    }
    for (simd, got) in mapped(Step::Gelu, &[f64::NAN, f64::INFINITY, f64::NEG_INFINITY]) {
        assert!(
            got[0].is_nan() && got[1] == f64::INFINITY,
            "{simd:?}: {got:?}"
        );
        // -inf/2 (1 + erf(-inf)) = -inf 0, NaN, as the scalar one gives.
        assert!(got[2].is_nan() && crate::layers::feed_forward::gelu(f64::NEG_INFINITY).is_nan());
    }
}

#[cfg(feature = "encoder")]
#[test]
fn exp_minus_a_shift_is_within_two_ulp_of_std_on_every_path() {
    let values: Vec<f64> = (0..1_003).map(|i| -40.0 + 0.047_1 * i as f64).collect();
    for (simd, got) in mapped(Step::ExpMinus(3.25), &values) {
        for (got, &x) in got.iter().zip(&values) {
            let want = (x - 3.25).exp();
            assert!(
                ulps(*got, want) <= promised(simd),
                "{simd:?}: exp({x} - 3.25) = {got}, std {want}"
            );
        }
    }
}
