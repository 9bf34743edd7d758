//! The heads' matrix products equal NumPy's bit for bit (tests/data/matmul.json, written by
//! scripts/matmul_goldens.py with NumPy's OpenBLAS): both sum each dot product in order with
//! fused multiply-adds. Only products whose factors have two or more rows and columns, and
//! an inner dimension of at most 12, are covered; README ("Parity with NumPy") says why the others may differ in the last bit.

use attention_lab::np::RandomState;
use ndarray::Array2;
use serde::Deserialize;

#[derive(Deserialize)]
struct Goldens {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    seed: u32,
    m: usize,
    k: usize,
    n: usize,
    ab: Vec<String>,
    abt: Vec<String>,
}

fn bits(m: &Array2<f64>) -> Vec<String> {
    m.iter().map(|x| format!("{:016x}", x.to_bits())).collect()
}

#[test]
fn products_equal_numpys_bit_for_bit() {
    // Without FMA, matrixmultiply multiplies and adds separately (and NumPy's BLAS would too).
    #[cfg(target_arch = "x86_64")]
    if !std::arch::is_x86_feature_detected!("fma") {
        eprintln!("skipped: this CPU has no fused multiply-add, the goldens' machine had");
        return;
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/matmul.json");
    let goldens: Goldens = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(goldens.cases.len(), 200);
    let mut differ = Vec::new();
    for case in &goldens.cases {
        let mut rs = RandomState::new(case.seed);
        let a: Array2<f64> = rs.randn((case.m, case.k)).unwrap();
        let b: Array2<f64> = rs.randn((case.k, case.n)).unwrap();
        let bt: Array2<f64> = rs.randn((case.n, case.k)).unwrap();
        if bits(&a.dot(&b)) != case.ab {
            differ.push(format!(
                "seed {} a @ b ({}x{} @ {}x{})",
                case.seed, case.m, case.k, case.k, case.n
            ));
        }
        if bits(&a.dot(&bt.t())) != case.abt {
            differ.push(format!("seed {} a @ bt.T", case.seed));
        }
    }
    assert!(
        differ.is_empty(),
        "{} of 400 products differ: {differ:?}",
        differ.len()
    );
}
