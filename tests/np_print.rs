//! NumPy parity of `attention_lab::np` printing, against golden files written by
//! `scripts/numpy_print_goldens.py` from real NumPy (no Python needed here).

use attention_lab::prelude::*;
use ndarray::{ArrayD, IxDyn};
use serde::Deserialize;
use serde_json::Value;
use std::fmt::Write as _;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/np_print/");

#[derive(Deserialize)]
struct ArrayCase {
    name: Option<String>,
    d: String,
    s: Vec<usize>,
    v: Vec<Value>,
    o: (usize, bool, usize, usize, usize),
    str: String,
    repr: String,
}

#[derive(Deserialize)]
struct RoundCase {
    x: String,
    d: i32,
    y: String,
}

#[derive(Deserialize)]
struct FloatStrCase {
    x: String,
    s: String,
}

/// Cases of one golden file; the first line is a header naming the NumPy version.
fn load<T: for<'de> Deserialize<'de>>(file: &str) -> Vec<T> {
    let text = std::fs::read_to_string(format!("{DIR}{file}")).expect("golden file missing");
    let mut lines = text.lines();
    let header = lines.next().expect("empty golden file");
    assert!(
        header.contains("\"numpy\""),
        "golden header must record NumPy's version"
    );
    lines
        .map(|l| serde_json::from_str(l).expect("bad golden line"))
        .collect()
}

fn f64_of(hex: &str) -> f64 {
    f64::from_bits(u64::from_str_radix(hex, 16).expect("bad f64 hex"))
}

fn f32_of(hex: &Value) -> f32 {
    f32::from_bits(u32::from_str_radix(hex.as_str().expect("f32 hex"), 16).expect("bad f32 hex"))
}

/// The array NumPy printed: stored values cycled to the full shape (np.resize).
fn build<T: Clone>(c: &ArrayCase, conv: impl Fn(&Value) -> T) -> ArrayD<T> {
    let size: usize = c.s.iter().product();
    let pool: Vec<T> = c.v.iter().map(conv).collect();
    let data: Vec<T> = (0..size).map(|i| pool[i % pool.len()].clone()).collect();
    ArrayD::from_shape_vec(IxDyn(&c.s), data).expect("shape")
}

/// (str, repr) as this crate prints the case.
fn render(c: &ArrayCase) -> (String, String) {
    let (precision, suppress, linewidth, threshold, edgeitems) = c.o;
    let opts = PrintOptions {
        precision,
        suppress,
        linewidth,
        threshold,
        edgeitems,
    };
    match c.d.as_str() {
        "f64" => {
            let a = build(c, |v| f64_of(v.as_str().expect("f64 hex")));
            (array_str(&a, &opts), array_repr(&a, &opts))
        }
        "f32" => {
            let a = build(c, f32_of);
            (array_str(&a, &opts), array_repr(&a, &opts))
        }
        "i64" => {
            let a = build(c, |v| v.as_i64().expect("i64"));
            (array_str(&a, &opts), array_repr(&a, &opts))
        }
        "i32" => {
            let a = build(c, |v| v.as_i64().expect("i32") as i32);
            (array_str(&a, &opts), array_repr(&a, &opts))
        }
        "bool" => {
            let a = build(c, |v| v.as_i64().expect("bool") != 0);
            (array_str(&a, &opts), array_repr(&a, &opts))
        }
        other => panic!("unknown dtype {other}"),
    }
}

fn describe(c: &ArrayCase, what: &str, want: &str, got: &str) -> String {
    let vals: Vec<String> = c.v.iter().take(40).map(|v| v.to_string()).collect();
    format!(
        "--- {what} of {} shape {:?} opts (precision, suppress, linewidth, threshold, edgeitems) = {:?}\n\
         values (first 40, cycled to shape): [{}]\nnumpy:\n{want}\nours:\n{got}\n",
        c.d,
        c.s,
        c.o,
        vals.join(", ")
    )
}

/// Compares every case; panics listing the first few mismatches.
fn check_arrays(cases: &[ArrayCase]) -> usize {
    let mut failures = 0;
    let mut report = String::new();
    for c in cases {
        let (s, r) = render(c);
        for (what, want, got) in [("str", &c.str, &s), ("repr", &c.repr, &r)] {
            if want != got {
                failures += 1;
                if failures <= 5 {
                    report.push_str(&describe(c, what, want, got));
                }
            }
        }
    }
    assert!(
        failures == 0,
        "{failures} of {} array outputs differ from NumPy:\n{report}",
        cases.len() * 2
    );
    cases.len()
}

#[test]
fn golden_arrays_match_numpy() {
    let n = check_arrays(&load::<ArrayCase>("arrays.jsonl"));
    println!("{n} cases");
}

/// Runs `check` (None when equal, else a description) over all cases of a golden file.
fn check_scalars<T>(file: &str, cases: &[T], check: impl Fn(&T) -> Option<String>) -> usize {
    let mut report = String::new();
    let mut failures = 0;
    for c in cases {
        if let Some(msg) = check(c) {
            failures += 1;
            if failures <= 5 {
                let _ = writeln!(report, "{msg}");
            }
        }
    }
    assert!(
        failures == 0,
        "{failures} of {} cases in {file} differ:\n{report}",
        cases.len()
    );
    cases.len()
}

#[test]
fn golden_round_matches_numpy() {
    let cases: Vec<RoundCase> = load("round.jsonl");
    let n = check_scalars("round.jsonl", &cases, |c| {
        let x = f64_of(&c.x);
        let got = np::round(&ndarray::array![x], c.d)[0];
        let want = f64_of(&c.y);
        let same = got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
        (!same).then(|| {
            format!(
                "np.round({x:e} [{}], {}): numpy {want:e} [{}], ours {got:e}",
                c.x, c.d, c.y
            )
        })
    });
    println!("{n} cases");
}

#[test]
fn golden_float_str_matches_python() {
    let cases: Vec<FloatStrCase> = load("float_str.jsonl");
    let n = check_scalars("float_str.jsonl", &cases, |c| {
        let got = float_str(f64_of(&c.x));
        (got != c.s).then(|| format!("repr(f64 bits {}): python {:?}, ours {got:?}", c.x, c.s))
    });
    println!("{n} cases");
}

/// One named case from traps.jsonl, checked for both str and repr.
fn trap(name: &str) -> ArrayCase {
    let cases: Vec<ArrayCase> = load("traps.jsonl");
    let c = cases
        .into_iter()
        .find(|c| c.name.as_deref() == Some(name))
        .expect("trap case missing");
    check_arrays(std::slice::from_ref(&c));
    c
}

#[test]
fn trap_exact_tie_rounds_to_even_like_dragon4() {
    let c = trap("tie_shortest");
    assert!(
        c.str.contains("454.2"),
        "NumPy keeps the even digit: {}",
        c.str
    );
}

#[test]
fn trap_ratio_1000_stays_positional_1001_goes_scientific() {
    assert!(!trap("thousand_positional").str.contains('e'));
    assert!(trap("thousand_one_scientific").str.contains("e+03"));
}

#[test]
fn trap_large_value_keeps_all_digits() {
    trap("keeps_all_digits");
}

#[test]
fn trap_seed_outputs() {
    for name in [
        "seed_rows",
        "seed_scores",
        "seed_pad_fraction",
        "seed_precision1_sci",
        "seed_column",
        "seed_signs",
    ] {
        trap(name);
    }
}

#[test]
fn trap_specials_f32_and_empty() {
    for name in [
        "specials",
        "f32_shortest",
        "f32_scalar_cutoff",
        "f32_small_cutoff_in_f32",
        "f64_small_cutoff",
        "empty",
    ] {
        trap(name);
    }
}

#[test]
fn views_and_fixed_dimensions_print_like_dynamic_arrays() {
    let c = trap("seed_rows");
    let a = build(&c, |v| f64_of(v.as_str().expect("hex")));
    let fixed = a
        .clone()
        .into_dimensionality::<ndarray::Ix2>()
        .expect("2-D");
    let opts = PrintOptions::default();
    assert_eq!(array_str(&fixed, &opts), c.str);
    assert_eq!(array_str(&fixed.view(), &opts), c.str);
    assert_eq!(array_repr(&fixed.view(), &opts), c.repr);
    // Global options and the Display adapters (only this test touches them).
    set_printoptions(opts);
    assert_eq!(fixed.np().to_string(), c.str);
    assert_eq!(fixed.np_repr().to_string(), c.repr);
    assert_eq!(get_printoptions(), opts);
    // evcxr gives every notebook cell its own copy of the crate's statics, so the options
    // live in the process environment, where the next cell finds them.
    let one = PrintOptions {
        precision: 1,
        suppress: true,
        ..opts
    };
    set_printoptions(one);
    let stored = std::env::var("ATTENTION_LAB_PRINTOPTIONS").expect("options in the environment");
    std::env::set_var("ATTENTION_LAB_PRINTOPTIONS", &stored);
    assert_eq!(get_printoptions(), one);
    std::env::set_var("ATTENTION_LAB_PRINTOPTIONS", "precision=1");
    assert_eq!(
        get_printoptions(),
        PrintOptions::default(),
        "unreadable options fall back to NumPy's"
    );
    set_printoptions(opts);
    let evcxr = fixed.evcxr_text();
    let plain = format!(
        "EVCXR_BEGIN_CONTENT text/plain\n{}\nEVCXR_END_CONTENT\n",
        c.repr
    );
    assert!(evcxr.starts_with(&plain), "{evcxr}");
    assert!(
        evcxr.contains("EVCXR_BEGIN_CONTENT text/html\n<table><tr><td>0.1</td>"),
        "{evcxr}"
    );
    assert!(evcxr.ends_with("</table>\nEVCXR_END_CONTENT\n"), "{evcxr}");
}
