//! NumPy's random streams replayed bit for bit against golden files written by real NumPy
//! (scripts/numpy_random_goldens.py), plus properties and ndarray-rand interop.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab::np::{default_rng, Generator, RandomError, RandomState};
use ndarray::{Array, Array1, Array2, IxDyn};
use ndarray_rand::rand::RngCore;
use ndarray_rand::rand_distr::{StandardNormal, Uniform};
use ndarray_rand::RandomExt;
use proptest::prelude::*;
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Goldens {
    numpy_version: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    seed: Option<u64>,
    key: Option<Vec<u32>>,
    calls: Vec<Call>,
}

#[derive(Deserialize, Debug)]
struct Call {
    method: String,
    #[serde(default)]
    args: Vec<Value>,
    #[serde(default)]
    shape: Vec<usize>,
    f64_bits: Option<Vec<String>>,
    values: Option<Vec<Value>>,
    hex: Option<String>,
    error: Option<String>,
}

/// What a call gave, in a form compared exactly: f64 as bits, ints widened losslessly.
#[derive(Debug, PartialEq)]
enum Outcome {
    F64Bits(Vec<u64>),
    Ints(Vec<i128>),
    Bytes(Vec<u8>),
    Error(&'static str),
}

fn load(name: &str) -> Goldens {
    let path = format!("{}/tests/data/np_random/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let goldens: Goldens = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(
        goldens.numpy_version.starts_with("2."),
        "goldens from NumPy {}",
        goldens.numpy_version
    );
    goldens
}

fn expected(call: &Call) -> Outcome {
    if let Some(error) = &call.error {
        return Outcome::Error(match error.as_str() {
            "ValueError: low >= high" => "LowNotBelowHigh",
            "OverflowError: Range exceeds valid bounds" => "RangeNotFinite",
            "ValueError: scale < 0" => "NegativeScale",
            other => panic!("unexpected NumPy error {other:?}"),
        });
    }
    if let Some(bits) = &call.f64_bits {
        return Outcome::F64Bits(bits.iter().map(|h| hex_u64(h)).collect());
    }
    if let Some(values) = &call.values {
        return Outcome::Ints(values.iter().map(int).collect());
    }
    if let Some(hex) = &call.hex {
        let bytes =
            (0..hex.len() / 2).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap());
        return Outcome::Bytes(bytes.collect());
    }
    panic!("golden call without a result: {call:?}")
}

fn hex_u64(h: &str) -> u64 {
    u64::from_str_radix(h, 16).unwrap_or_else(|e| panic!("{h}: {e}"))
}

fn int(v: &Value) -> i128 {
    v.as_i64()
        .map(i128::from)
        .or_else(|| v.as_u64().map(i128::from))
        .unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn f64_arg(call: &Call, i: usize) -> f64 {
    f64::from_bits(hex_u64(
        call.args[i]
            .as_str()
            .expect("float args are stored as hex bits"),
    ))
}

fn i64_arg(call: &Call, i: usize) -> i64 {
    call.args[i].as_i64().expect("randint args are i64")
}

fn error_name(e: &RandomError) -> &'static str {
    match e {
        RandomError::LowNotBelowHigh { .. } => "LowNotBelowHigh",
        RandomError::RangeNotFinite { .. } => "RangeNotFinite",
        RandomError::NegativeScale { .. } => "NegativeScale",
        RandomError::EmptyKey => "EmptyKey",
        RandomError::TooBig { .. } => "TooBig",
        _ => "unknown",
    }
}

/// Turns a sampler's result into an `Outcome`, checking the shape on the way.
fn floats(call: &Call, got: Result<Array<f64, IxDyn>, RandomError>) -> Outcome {
    match got {
        Ok(a) => {
            assert_eq!(a.shape(), &call.shape[..], "shape of {call:?}");
            Outcome::F64Bits(a.iter().map(|x| x.to_bits()).collect())
        }
        Err(e) => Outcome::Error(error_name(&e)),
    }
}

fn bytes_of(len: usize, fill: impl FnOnce(&mut [u8])) -> Outcome {
    let mut buf = vec![0_u8; len];
    fill(&mut buf);
    Outcome::Bytes(buf)
}

fn raw(call: &Call, rng: &mut impl RngCore) -> Outcome {
    let draws = call.args.iter().map(|kind| match kind.as_str() {
        Some("u32") => i128::from(rng.next_u32()),
        Some("u64") => i128::from(rng.next_u64()),
        other => panic!("raw draw kind {other:?}"),
    });
    Outcome::Ints(draws.collect())
}

fn replay_random_state(rs: &mut RandomState, call: &Call) -> Outcome {
    let shape = &call.shape[..];
    match call.method.as_str() {
        "rand" => floats(call, rs.rand(shape)),
        "random_sample" => floats(call, rs.random_sample(shape)),
        "randn" => floats(call, rs.randn(shape)),
        "standard_normal" => floats(call, rs.standard_normal(shape)),
        "uniform" => floats(call, rs.uniform(f64_arg(call, 0), f64_arg(call, 1), shape)),
        "normal" => floats(call, rs.normal(f64_arg(call, 0), f64_arg(call, 1), shape)),
        "randint" => match rs.randint(i64_arg(call, 0), i64_arg(call, 1), shape) {
            Ok(a) => {
                assert_eq!(a.shape(), shape, "shape of {call:?}");
                Outcome::Ints(a.iter().map(|&x| i128::from(x)).collect())
            }
            Err(e) => Outcome::Error(error_name(&e)),
        },
        "raw" => raw(call, rs),
        "bytes" => bytes_of(call.args[0].as_u64().unwrap() as usize, |b| {
            rs.fill_bytes(b)
        }),
        other => panic!("unknown RandomState method {other}"),
    }
}

fn replay_generator(rng: &mut Generator, call: &Call) -> Outcome {
    match call.method.as_str() {
        "random" => floats(call, rng.random(&call.shape[..])),
        "raw" => raw(call, rng),
        "bytes" => bytes_of(call.args[0].as_u64().unwrap() as usize, |b| {
            rng.fill_bytes(b)
        }),
        other => panic!("unknown Generator method {other}"),
    }
}

fn count(outcome: &Outcome) -> usize {
    match outcome {
        Outcome::F64Bits(v) => v.len(),
        Outcome::Ints(v) => v.len(),
        Outcome::Bytes(_) | Outcome::Error(_) => 0,
    }
}

/// Replays every call of every case in order, failing at the first difference in any bit.
fn check_cases<R>(
    cases: &[Case],
    seed: impl Fn(&Case) -> R,
    replay: impl Fn(&mut R, &Call) -> Outcome,
) -> usize {
    let mut compared = 0;
    for case in cases {
        let mut rng = seed(case);
        for (i, call) in case.calls.iter().enumerate() {
            let want = expected(call);
            let got = replay(&mut rng, call);
            if got != want {
                let first = first_difference(&got, &want);
                panic!(
                    "seed {:?} key {:?}, call #{i} {} {:?} shape {:?}: differs from NumPy{first}",
                    case.seed,
                    case.key.as_ref().map(|k| k.len()),
                    call.method,
                    call.args,
                    call.shape,
                );
            }
            compared += count(&want);
        }
    }
    compared
}

fn first_difference(got: &Outcome, want: &Outcome) -> String {
    match (got, want) {
        (Outcome::F64Bits(g), Outcome::F64Bits(w)) if g.len() == w.len() => {
            let i = (0..g.len()).find(|&i| g[i] != w[i]).unwrap_or(0);
            format!(
                " at element {i}: got {:?} ({:016x}), NumPy {:?} ({:016x})",
                f64::from_bits(g[i]),
                g[i],
                f64::from_bits(w[i]),
                w[i]
            )
        }
        _ => format!(": got {got:?}, NumPy {want:?}"),
    }
}

#[test]
fn random_state_streams_match_numpy_bit_for_bit() {
    let goldens = load("random_state.json");
    let seed = |case: &Case| match (&case.seed, &case.key) {
        (Some(seed), None) => RandomState::new(u32::try_from(*seed).unwrap()),
        (None, Some(key)) => RandomState::from_key(key).unwrap(),
        _ => panic!("a case has a seed or a key"),
    };
    let compared = check_cases(&goldens.cases, seed, replay_random_state);
    assert!(compared > 30_000, "only {compared} values compared");
    eprintln!(
        "RandomState: {compared} values equal to NumPy {}",
        goldens.numpy_version
    );
}

#[test]
fn default_rng_streams_match_numpy_bit_for_bit() {
    let goldens = load("generator.json");
    let seed = |case: &Case| default_rng(case.seed.expect("generator cases have a seed"));
    let compared = check_cases(&goldens.cases, seed, replay_generator);
    assert!(compared > 8_000, "only {compared} values compared");
    eprintln!(
        "Generator: {compared} values equal to NumPy {}",
        goldens.numpy_version
    );
}

#[test]
fn static_shapes_give_static_dimensions() -> Result<(), RandomError> {
    let mut rs = RandomState::new(0);
    let w1: Array2<f64> = rs.rand((5, 1))?;
    let again: Array2<f64> = RandomState::new(0).rand([5, 1])?;
    assert_eq!(w1, again);
    assert_eq!(w1[[0, 0]], 0.548_813_503_927_324_8);
    let v: Array1<i64> = rs.randint(0, 10, 7)?;
    assert_eq!(v.len(), 7);
    let g: Array1<f64> = default_rng(0).random(3)?;
    assert_eq!(g[0], 0.636_961_687_321_454_3);
    Ok(())
}

#[test]
fn refusals_name_their_arguments() {
    let mut rs = RandomState::new(0);
    let e = rs.randint(6, -6, 2).unwrap_err();
    assert_eq!(e.to_string(), "randint: low >= high (low = 6, high = -6)");
    let e = rs.uniform(0.0, f64::INFINITY, 2).unwrap_err();
    assert!(e.to_string().contains("low = 0, high = inf"), "{e}");
    let e = rs.normal(1.0, -0.5, 2).unwrap_err();
    assert_eq!(e.to_string(), "normal: scale < 0 (scale = -0.5)");
    assert_eq!(
        RandomState::from_key(&[]).unwrap_err(),
        RandomError::EmptyKey
    );
}

#[test]
fn huge_shapes_are_errors_not_panics() {
    let mut rs = RandomState::new(0);
    let fresh = rs.clone();
    let too_big = |e: RandomError| matches!(e, RandomError::TooBig { .. });
    assert!(too_big(rs.rand((usize::MAX, 2)).unwrap_err()));
    assert!(too_big(rs.randn((1_usize << 62, 4)).unwrap_err()));
    // fits in usize, but not in isize::MAX bytes: refused before any allocation
    assert!(too_big(rs.normal(0.0, 1.0, 1_usize << 61).unwrap_err()));
    assert!(too_big(rs.randint(0, 5, (0, usize::MAX)).unwrap_err()));
    assert!(too_big(
        default_rng(1).random((usize::MAX, usize::MAX)).unwrap_err()
    ));
    assert_eq!(rs, fresh, "nothing drawn");
}

#[test]
fn empty_shapes_draw_nothing() -> Result<(), RandomError> {
    let mut rs = RandomState::new(3);
    assert_eq!(rs.randn((0, 4))?.len(), 0);
    assert_eq!(rs, RandomState::new(3));
    Ok(())
}

#[test]
fn ndarray_rand_draws_from_random_state_and_generator() {
    let uniform = Uniform::new(-1.0, 1.0).unwrap();
    let mut rs = RandomState::new(7);
    let a = Array::random_using((4, 3), uniform, &mut rs);
    let b = Array::random_using((4, 3), uniform, &mut RandomState::new(7));
    assert_eq!(a.shape(), &[4, 3]);
    assert_eq!(a, b, "same seed, same draws");
    assert!(a.iter().all(|x| (-1.0..1.0).contains(x)));
    let n = Array::random_using(5, StandardNormal, &mut rs);
    assert!(n.iter().all(|x: &f64| x.is_finite()));
    let mut rng = default_rng(7);
    let c = Array::random_using((2, 2), uniform, &mut rng);
    assert_eq!(c, Array::random_using((2, 2), uniform, &mut default_rng(7)));
}

#[test]
fn generator_next_u32_hands_out_both_halves_low_first() {
    let mut rng = default_rng(5);
    let whole = default_rng(5).next_u64();
    assert_eq!(rng.next_u32(), whole as u32);
    assert_eq!(rng.next_u32(), (whole >> 32) as u32);
}

proptest! {
    #[test]
    fn rand_is_in_unit_interval(seed in any::<u32>(), n in 0_usize..300) {
        let x = RandomState::new(seed).rand(n).unwrap();
        prop_assert!(x.iter().all(|v| (0.0..1.0).contains(v)));
        let y = default_rng(u64::from(seed) << 17).random(n).unwrap();
        prop_assert!(y.iter().all(|v| (0.0..1.0).contains(v)));
    }

    // With integer bounds `high - low` is exact, so the result lies in the closed interval
    // (NumPy's documentation warns that `high` itself may come out through rounding).
    #[test]
    fn uniform_is_between_low_and_high(seed in any::<u32>(), low in any::<i32>(), high in any::<i32>()) {
        let (low, high) = (f64::from(low), f64::from(high));
        let x = RandomState::new(seed).uniform(low, high, 50).unwrap();
        let (lo, hi) = (low.min(high), low.max(high));
        prop_assert!(x.iter().all(|v| (lo..=hi).contains(v)));
    }

    #[test]
    fn randint_is_in_half_open_range(seed in any::<u32>(), a in any::<i64>(), b in any::<i64>(), small in any::<bool>()) {
        let (low, high) = if small { (a, a.saturating_add(b & 0xff)) } else { (a.min(b), a.max(b)) };
        let got = RandomState::new(seed).randint(low, high, 40);
        if low >= high {
            prop_assert_eq!(got.unwrap_err(), RandomError::LowNotBelowHigh { low, high });
        } else {
            prop_assert!(got.unwrap().iter().all(|v| (low..high).contains(v)));
        }
    }

    // One call or two, the stream is the same: the gauss cache carries across calls.
    #[test]
    fn splitting_a_call_keeps_the_stream(seed in any::<u32>(), n in 0_usize..20, m in 0_usize..20) {
        let whole = RandomState::new(seed).randn(n + m).unwrap();
        let mut rs = RandomState::new(seed);
        let first = rs.randn(n).unwrap();
        let second = rs.normal(0.0, 1.0, m).unwrap();
        let joined: Vec<u64> = first.iter().chain(second.iter()).map(|x| x.to_bits()).collect();
        prop_assert_eq!(joined, whole.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    }
}
