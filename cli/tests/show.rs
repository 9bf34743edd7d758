//! `attention-lab show` prints .npy files byte for byte as NumPy does (goldens from
//! scripts/cli_goldens.py) and reports bad files in one line.

mod tools_common;

use tools_common::{assert_help_has_example, cases, data, fails, run, usage_error};

#[test]
fn show_matches_numpy_goldens() {
    let dir = data("show");
    let cases = cases(&dir, "show", "stdout");
    assert!(cases.len() > 60, "cases.json lists every file and variant");
    let mut failures = Vec::new();
    for (args, golden) in &cases {
        let expected = std::fs::read_to_string(dir.join("expected").join(golden)).unwrap();
        let r = run(&dir, args);
        if r.status != 0 || r.stdout != expected {
            failures.push(format!(
                "show {}: status {}\n--- numpy\n{expected}--- ours\n{}{}",
                args.join(" "),
                r.status,
                r.stdout,
                r.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn show_reports_bad_files_in_one_line() {
    let dir = data("show");
    let supported = "(supported: float64, float32, int64, int32, bool)";
    let expected = [
        (
            vec!["missing.npy"],
            "error: missing.npy: cannot read: no such file".to_string(),
        ),
        (
            vec!["not_npy.txt"],
            "error: not_npy.txt: not a .npy file (it does not start with the NumPy magic string)"
                .to_string(),
        ),
        (
            vec!["u16.npy"],
            format!("error: u16.npy: unsupported dtype '<u2' {supported}"),
        ),
        (
            vec!["complex.npy"],
            format!("error: complex.npy: unsupported dtype '<c16' {supported}"),
        ),
        (
            vec!["truncated.npy"],
            "error: truncated.npy: not a valid .npy file: reached EOF before reading all data"
                .to_string(),
        ),
        (
            vec!["."],
            "error: .: cannot read: is a directory, not a file".to_string(),
        ),
        // Every file is read before anything is printed.
        (
            vec!["f64_2d.npy", "missing.npy"],
            "error: missing.npy: cannot read: no such file".to_string(),
        ),
    ];
    for (mut args, message) in expected {
        args.insert(0, "show");
        assert_eq!(fails(&dir, &args), message, "{args:?}");
    }
}

#[test]
fn show_rejects_a_precision_that_is_not_a_number() {
    assert_eq!(
        usage_error(&data("show"), &["show", "f64_2d.npy", "--precision", "x"]),
        "error: invalid value 'x' for '--precision <P>': invalid digit found in string"
    );
}

#[test]
fn show_help_has_an_example() {
    assert_help_has_example("show");
}
