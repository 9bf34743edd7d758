//! `attention-lab solve` prints NumPy's worked example byte for byte, writes every
//! intermediate as JSON equal to NumPy's to 1e-12 (goldens from scripts/cli_goldens.py), and
//! reports bad input in one line.

mod tools_common;

use serde_json::Value;
use tools_common::{assert_help_has_example, cases, data, fails, npy_declaring, run, usage_error};

#[test]
fn solve_text_matches_numpy_goldens() {
    let dir = data("solve");
    let cases = cases(&dir, "solve", "txt");
    assert!(cases.len() >= 5);
    for (args, golden) in &cases {
        let expected = std::fs::read_to_string(dir.join(golden)).unwrap();
        let r = run(&dir, args);
        assert_eq!(r.stderr, "", "{golden}");
        assert_eq!(r.status, 0, "{golden}");
        assert_eq!(r.stdout, expected, "{golden}: {}", args.join(" "));
    }
}

/// Equal structure; numbers within 1e-12 (relative above 1); strings and nulls equal.
fn assert_close(ours: &Value, numpy: &Value, at: &str) {
    match (ours, numpy) {
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            assert!(
                (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                "{at}: {a} vs NumPy's {b}"
            );
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{at}: length");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_close(x, y, &format!("{at}[{i}]"));
            }
        }
        (Value::Object(a), Value::Object(b)) => {
            let keys = |m: &serde_json::Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
            assert_eq!(keys(a), keys(b), "{at}: keys");
            for (k, x) in a {
                assert_close(x, &b[k], &format!("{at}.{k}"));
            }
        }
        _ => assert_eq!(ours, numpy, "{at}"),
    }
}

#[test]
fn solve_json_matches_numpy_to_1e_12() {
    let dir = data("solve");
    let cases = cases(&dir, "solve", "json");
    assert!(cases.len() >= 3);
    for (args, golden) in &cases {
        let numpy: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(golden)).unwrap()).unwrap();
        let r = run(&dir, args);
        assert_eq!(r.status, 0, "{golden}: {}", r.stderr);
        assert!(r.stdout.ends_with("}\n") && r.stdout.lines().count() == 1);
        let ours: Value = serde_json::from_str(&r.stdout).expect("solve --json is JSON");
        assert_close(&ours, &numpy, golden);
    }
}

#[test]
fn solve_json_keeps_the_documented_key_order() {
    let r = run(
        &data("solve"),
        &[
            "solve",
            "--x",
            "[[1,0]]",
            "--wq",
            "[[1],[0]]",
            "--wk",
            "[[1],[0]]",
            "--wv",
            "[[2],[3]]",
            "--json",
        ],
    );
    assert_eq!(
        r.stdout,
        "{\"heads\": [{\"q\": [[1.0]], \"k\": [[1.0]], \"v\": [[2.0]], \"scores\": [[1.0]], \
         \"weights\": [[1.0]], \"z\": [[2.0]]}], \"concat\": [[2.0]], \"output\": null}\n"
    );
}

/// `solve` of the two-head problem with `extra` flags.
fn two<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "solve",
        "--x",
        "x.npy",
        "--wq",
        "wq1.npy,wq2.npy",
        "--wk",
        "wk1.npy,wk2.npy",
        "--wv",
        "wv1.npy,wv2.npy",
    ];
    args.extend_from_slice(extra);
    args
}

/// `solve` of input `x` with identity projections of width 2.
fn eye(x: &str) -> Vec<&str> {
    vec![
        "solve", "--x", x, "--wq", "eye2.npy", "--wk", "eye2.npy", "--wv", "eye2.npy",
    ]
}

#[test]
fn solve_reports_bad_input_in_one_line() {
    let dir = data("solve");
    let expected: Vec<(Vec<&str>, &str)> = vec![
        (eye("x3d.npy"), "error: --x: x3d.npy: expected a 2-D matrix, got shape (2, 2, 2)"),
        (
            eye("x.npy"),
            "error: X is 2x4 but W_Q of head 1 is 2x2: the columns of X must equal the rows of W_Q",
        ),
        (eye("[[1, \"a\"]]"), "error: --x: element [0][1] is not a number: \"a\""),
        (eye("[[1, 2], [3]]"), "error: --x: row 1 has 1 numbers but row 0 has 2"),
        (eye("[1, 2]"), "error: --x: expected a 2-D matrix, but row 0 is not a list: 1"),
        (eye("[[1, 2"), "error: --x: invalid JSON: EOF while parsing a list at line 1 column 6"),
        (eye("nope.npy"), "error: --x: nope.npy: cannot read: no such file"),
        (
            eye("../show/u16.npy"),
            "error: --x: ../show/u16.npy: unsupported dtype '<u2' (supported: float64, float32, int64, int32, bool)",
        ),
        (
            vec!["solve", "--x", "x.npy", "--wq", "wq1.npy,wq2.npy", "--wk", "wk1.npy", "--wv", "wv1.npy,wv2.npy"],
            "error: --wk: 1 matrices given but --wq has 2 (one per head)",
        ),
        (
            two(&["--wo", "eye2.npy"]),
            "error: the heads' values are 3 + 3 = 6 columns wide together but W_O is 2x2: \
             the rows of W_O must equal the total width of the heads' values",
        ),
        (
            vec!["solve", "--x", "x32.npy", "--wq", "wq6.npy", "--wk", "wk6.npy", "--wv", "wv6.npy", "--split", "4"],
            "error: cannot split W_Q (6x6) into 4 heads: 4 does not divide its 6 columns",
        ),
        (
            two(&["--split", "2"]),
            "error: --wq: --split takes one matrix to split, but 2 were given",
        ),
        (
            vec!["solve", "--x", "x.npy", "--wq", "wq1.npy", "--wk", "eye2.npy", "--wv", "wv1.npy"],
            "error: head 1: W_Q is 4x3 but W_K is 2x2: W_Q and W_K must have the same number of rows (the input width)",
        ),
    ];
    for (args, message) in expected {
        assert_eq!(fails(&dir, &args), message, "{args:?}");
    }
}

#[test]
fn solve_rejects_a_count_that_is_not_a_number() {
    let args = [
        "solve", "--x", "x.npy", "--wq", "a", "--wk", "a", "--wv", "a", "--split", "two",
    ];
    assert_eq!(
        usage_error(&data("solve"), &args),
        "error: invalid value 'two' for '--split <H>': invalid digit found in string"
    );
}

#[test]
fn solve_help_has_an_example() {
    assert_help_has_example("solve");
}

/// A million tokens of width 2 (a 16 MB .npy file): the 10^6 x 10^6 scores would need 8 TB,
/// and solve says so in one line instead of aborting.
#[test]
fn solve_refuses_scores_that_cannot_fit_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1_000_000usize;
    let bytes = npy_declaring(&format!("({n}, 2)"), n * 2 * 8);
    std::fs::write(dir.path().join("x.npy"), bytes).unwrap();
    let eye = "[[1, 0], [0, 1]]";
    let args = [
        "solve", "--x", "x.npy", "--wq", eye, "--wk", eye, "--wv", eye,
    ];
    assert_eq!(
        fails(dir.path(), &args),
        "error: scores (Q K^T) would be 1000000x1000000, 8000000000000 bytes: more than memory can hold"
    );
}
