//! `attention-lab solve` prints NumPy's worked example byte for byte, writes every
//! intermediate as JSON equal to NumPy's to 1e-12 (goldens from scripts/cli_goldens.py, also
//! with masks, cross-attention and biases), and reports bad input in one line.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

mod tools_common;

use serde_json::Value;
use tools_common::{assert_help_has_example, cases, data, fails, npy_declaring, run, usage_error};

#[test]
fn solve_text_matches_numpy_goldens() {
    let dir = data("solve");
    let cases = cases(&dir, "solve", "txt");
    assert!(cases.len() >= 12);
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
    assert!(cases.len() >= 9);
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

/// `solve --json` of one token and one head of one column, then `extra` flags.
fn tiny_json(extra: &[&str]) -> String {
    let mut args = vec![
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
    ];
    args.extend_from_slice(extra);
    run(&data("solve"), &args).stdout
}

#[test]
fn solve_json_keeps_the_documented_key_order() {
    assert_eq!(
        tiny_json(&[]),
        "{\"heads\": [{\"q\": [[1.0]], \"k\": [[1.0]], \"v\": [[2.0]], \"scores\": [[1.0]], \
         \"weights\": [[1.0]], \"z\": [[2.0]]}], \"concat\": [[2.0]], \"output\": null}\n"
    );
}

/// `solve` of X = x.npy with the heads' `wq`, `wk` and `wv`, then `extra` flags.
fn heads<'a>(wq: &'a str, wk: &'a str, wv: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["solve", "--x", "x.npy", "--wq", wq, "--wk", wk, "--wv", wv];
    args.extend_from_slice(extra);
    args
}

/// `solve` of the two-head problem with `extra` flags.
fn two<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    heads(
        "wq1.npy,wq2.npy",
        "wk1.npy,wk2.npy",
        "wv1.npy,wv2.npy",
        extra,
    )
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

/// The two-head problem of 2 tokens with cross-attention's weights (W_K 5 rows, W_V 2).
fn cross<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = heads(
        "cq1.npy,cq2.npy",
        "ck1.npy,ck2.npy",
        "cv1.npy,cv2.npy",
        &["--wo", "cwo.npy"],
    );
    args.extend_from_slice(extra);
    args
}

#[test]
fn solve_reports_bad_masks_biases_and_memories_in_one_line() {
    let dir = data("solve");
    let kv = ["--kv", "memory_k.npy,memory_v.npy"];
    let expected: Vec<(Vec<&str>, &str)> =
        vec![
        (
            two(&["--mask", "[[false,true,true]]"]),
            "error: --mask: the mask is 1x3 but the scores are 2x2 (one row per query token, \
             --x is 2x4; one column per key token, --x is 2x4)",
        ),
        (
            two(&["--mask", "mask_int.npy"]),
            "error: --mask: mask_int.npy: a mask of dtype int64 is ambiguous: give bool \
             (True = blocked) or float (added to the scores)",
        ),
        (
            two(&["--mask", "[[true, 1], [false, false]]"]),
            "error: --mask: element [0][1] is not true or false: 1",
        ),
        (
            two(&["--mask", "x3d.npy"]),
            "error: --mask: x3d.npy: expected a 2-D matrix, got shape (2, 2, 2)",
        ),
        (
            two(&["--padding", "[false]"]),
            "error: --padding: 1 entries but there are 2 key tokens (--x is 2x4)",
        ),
        (
            two(&["--padding", "[0, 1]"]),
            "error: --padding: expected a list of booleans, one per key token (true = padding), \
             but element [0] is 0",
        ),
        (
            two(&["--padding", "mask_full.npy"]),
            "error: --padding: mask_full.npy: expected a list of booleans, one per key token \
             (true = padding); got dtype bool and shape (3, 3)",
        ),
        (
            cross(&["--kv", "memory.npy", "--causal"]),
            "error: --causal: needs as many key tokens as query tokens, but --x is 2x4 and \
             --kv is 3x4",
        ),
        (
            cross(&["--kv", "memory_k.npy,memory_v.npy", "--padding", "[false,true]"]),
            "error: --padding: 2 entries but there are 3 key tokens (--kv is 3x5)",
        ),
        (
            cross(&["--kv", "memory_v.npy,memory_v.npy"]),
            "error: key is 3x2 but W_K of head 1 is 5x3: the columns of the key input must \
             equal the rows of W_K",
        ),
        (
            cross(&["--kv", "memory_k.npy,memory.npy,memory.npy"]),
            "error: --kv: 3 matrices given; give one (keys and values) or two (keys, values)",
        ),
        (
            cross(&["--kv", "memory_k.npy,eye2.npy"]),
            "error: key is 3x5 but value is 2x2: key and value must have the same number of \
             rows (one per token)",
        ),
        (
            cross(&[kv[0], kv[1], "--bq", "bq1.npy"]),
            "error: --bq: 1 biases given but --wq has 2 (one per head)",
        ),
        (
            cross(&[kv[0], kv[1], "--bv", "bq1.npy,bv2.npy"]),
            "error: --bv: head 1: b_V is 1x3 but W_V is 2x2: a bias must have one entry per \
             column of its projection",
        ),
        (
            cross(&[kv[0], kv[1], "--bk", "[[1,2,3],[4,5,6]],bk2.npy"]),
            "error: --bk: a bias is one row of numbers, but this is 2x3",
        ),
        (
            cross(&[kv[0], kv[1], "--bo", "bq1.npy"]),
            "error: --bo: b_O is 1x3 but W_O is 4x4: an output bias needs W_O, with one entry \
             per column of W_O",
        ),
        (
            vec![
                "solve", "--x", "x32.npy", "--wq", "wq6.npy", "--wk", "wk6.npy", "--wv",
                "wv6.npy", "--split", "2", "--bq", "[1, 2]",
            ],
            "error: --bq: 2 entries but the matrix to split has 6 columns (one entry per column)",
        ),
        (
            vec![
                "solve", "--x", "x32.npy", "--wq", "wq6.npy", "--wk", "wk6.npy", "--wv",
                "wv6.npy", "--split", "2", "--kv", "x32.npy",
            ],
            "error: --split: not with --kv: give W_Q, W_K and W_V of each head",
        ),
    ];
    for (args, message) in expected {
        assert_eq!(fails(&dir, &args), message, "{args:?}");
    }
    assert_eq!(
        usage_error(&dir, &two(&["--bo", "bo.npy"])),
        "error: the following required arguments were not provided: --wo <W.npy>"
    );
}

/// A query whose every key is blocked gets zero weights and a zero Z row, and a blocked key
/// exactly zero weight, in every head (the goldens check the numbers; this, the property).
#[test]
fn solve_masked_weights_are_exactly_zero_where_blocked() {
    let dir = data("solve");
    let r = run(
        &dir,
        &[
            "solve",
            "--x",
            "x3.npy",
            "--wq",
            "wq1.npy,wq2.npy",
            "--wk",
            "wk1.npy,wk2.npy",
            "--wv",
            "wv1.npy,wv2.npy",
            "--mask",
            "mask_full.npy",
            "--causal",
            "--json",
        ],
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    let json: Value = serde_json::from_str(&r.stdout).unwrap();
    let mask = json["mask"].as_array().unwrap();
    for head in json["heads"].as_array().unwrap() {
        for (i, row) in head["weights"].as_array().unwrap().iter().enumerate() {
            let blocked: Vec<bool> = mask[i]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m == "-Infinity")
                .collect();
            for (j, w) in row.as_array().unwrap().iter().enumerate() {
                if blocked[j] || j > i {
                    assert_eq!(w.as_f64(), Some(0.0), "weight [{i}][{j}]");
                }
            }
            if blocked.iter().all(|&b| b) {
                let z = &head["z"][i];
                assert!(z
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|v| v.as_f64() == Some(0.0)));
            }
        }
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

#[test]
fn solve_backward_reports_bad_input_in_one_line() {
    let dir = data("solve");
    let expected: Vec<(Vec<&str>, &str)> = vec![
        (
            two(&["--wo", "wo.npy", "--backward", "--dz", "[[1,2],[3,4]]"]),
            "error: --dz: G is 2x2 but the output Z W_O is 2x4 (G is dL/d(output): one row per \
             token, one column per output)",
        ),
        (
            two(&["--backward", "--dz", "g.npy"]),
            "error: --dz: G is 2x4 but the concatenation Z (no --wo) is 2x6 (G is dL/d(output): \
             one row per token, one column per output)",
        ),
        (
            two(&["--backward", "--dz", "x3d.npy"]),
            "error: --dz: x3d.npy: expected a 2-D matrix, got shape (2, 2, 2)",
        ),
        (
            cross(&["--kv", "memory_k.npy,memory_v.npy", "--backward"]),
            "error: --backward: not with --kv: the backward pass is self-attention's (X feeds \
             Q, K and V)",
        ),
    ];
    for (args, message) in expected {
        assert_eq!(fails(&dir, &args), message, "{args:?}");
    }
    // --dz is G of the backward pass: without --backward clap refuses it.
    assert!(usage_error(&dir, &two(&["--dz", "g.npy"])).contains("--backward"));
}

#[test]
fn solve_backward_json_adds_the_gradients_last() {
    assert_eq!(
        tiny_json(&["--backward"]),
        "{\"heads\": [{\"q\": [[1.0]], \"k\": [[1.0]], \"v\": [[2.0]], \"scores\": [[1.0]], \
         \"weights\": [[1.0]], \"z\": [[2.0]]}], \"concat\": [[2.0]], \"output\": null, \
         \"backward\": {\"dresult\": [[1.0]], \"dconcat\": [[1.0]], \"dwo\": null, \"heads\": \
         [{\"dz\": [[1.0]], \"dweights\": [[2.0]], \"dscores\": [[0.0]], \"dq\": [[0.0]], \
         \"dk\": [[0.0]], \"dv\": [[1.0]], \"dwq\": [[0.0], [0.0]], \"dwk\": [[0.0], [0.0]], \
         \"dwv\": [[1.0], [0.0]]}], \"dx\": [[2.0, 3.0]]}}\n"
    );
}
