//! `attention-lab exercise`: the sheet for a fixed seed is stored byte for byte, its matrices
//! are NumPy's draws (scripts/cli_goldens.py), its answer key holds the numbers `solve`
//! prints, and the LaTeX sheet compiles with pdflatex.
//!
//! To refresh the stored sheets after a deliberate change: `UPDATE_GOLDENS=1 cargo test ...`.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

mod tools_common;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use tools_common::{assert_help_has_example, data, fails, run, temp_dir, usage_error};

/// The stored sheets: file name and the options after `exercise`.
const SHEETS: [(&str, &[&str]); 8] = [
    ("seed7.md", &["--seed", "7"]),
    ("seed7_answers.md", &["--seed", "7", "--answers"]),
    (
        "seed7_answers.tex",
        &["--seed", "7", "--answers", "--format", "tex"],
    ),
    (
        "seed2026_wide_answers.md",
        &[
            "--seed",
            "2026",
            "--tokens",
            "3",
            "--dim",
            "5",
            "--heads",
            "3",
            "--dk",
            "2",
            "--decimals",
            "2",
            "--answers",
        ],
    ),
    (
        "seed7_causal_answers.md",
        &["--seed", "7", "--causal", "--answers"],
    ),
    (
        "seed7_backward_answers.md",
        &["--seed", "7", "--backward", "--answers"],
    ),
    (
        "seed7_causal_backward_answers.md",
        &["--seed", "7", "--causal", "--backward", "--answers"],
    ),
    (
        "seed2026_wide_decoder_answers.tex",
        &[
            "--seed",
            "2026",
            "--tokens",
            "3",
            "--dim",
            "5",
            "--heads",
            "3",
            "--dk",
            "2",
            "--decimals",
            "2",
            "--causal",
            "--padding",
            "1",
            "--answers",
            "--format",
            "tex",
        ],
    ),
];

fn exercise(args: &[&str]) -> String {
    let mut full = vec!["exercise"];
    full.extend_from_slice(args);
    let r = run(&data("exercise"), &full);
    assert_eq!(r.status, 0, "{args:?}: {}", r.stderr);
    r.stdout
}

#[test]
fn exercise_sheets_match_the_stored_goldens() {
    let dir = data("exercise");
    for (name, args) in SHEETS {
        let sheet = exercise(args);
        if std::env::var_os("UPDATE_GOLDENS").is_some() {
            std::fs::write(dir.join(name), &sheet).unwrap();
        }
        let golden = std::fs::read_to_string(dir.join(name)).unwrap();
        assert_eq!(sheet, golden, "{name}");
        assert_eq!(
            exercise(args),
            sheet,
            "{name}: the same seed gives the same bytes"
        );
    }
}

/// Matrices by name, each as its rows of printed numbers.
type Named = BTreeMap<String, Vec<Vec<String>>>;

/// Every `NAME = \begin{bmatrix} ... \end{bmatrix}` of `text`, NAME cut at its first ` = `.
fn matrices(text: &str) -> Named {
    let mut found = BTreeMap::new();
    let mut rest = text;
    while let Some(start) = rest.find(" = \\begin{bmatrix} ") {
        let before = &rest[..start];
        let from = [before.rfind('\n'), before.rfind("\\quad ").map(|i| i + 5)]
            .into_iter()
            .flatten()
            .max()
            .map_or(0, |i| i + 1);
        let name = before[from..]
            .split(" = ")
            .next()
            .unwrap()
            .trim()
            .to_string();
        let body_start = start + " = \\begin{bmatrix} ".len();
        let end = rest[body_start..].find(" \\end{bmatrix}").unwrap() + body_start;
        let rows = rest[body_start..end]
            .split(" \\\\ ")
            .map(|row| row.split(" & ").map(str::to_string).collect())
            .collect();
        assert!(found.insert(name.clone(), rows).is_none(), "{name} twice");
        rest = &rest[end..];
    }
    found
}

/// The numbers of a matrix on a sheet; a masked score is `-\infty`.
fn numbers(rows: &[Vec<String>]) -> Vec<Vec<f64>> {
    let number = |t: &String| match t.as_str() {
        "-\\infty" => f64::NEG_INFINITY,
        t => t.parse().unwrap(),
    };
    rows.iter()
        .map(|r| r.iter().map(number).collect())
        .collect()
}

fn json_matrix(v: &Value) -> Vec<Vec<f64>> {
    serde_json::from_value(v.clone()).unwrap()
}

/// The draws NumPy makes for a stored sheet, from scripts/cli_goldens.py.
fn draws(name: &str) -> Value {
    let path = data("exercise").join(name);
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The sheet's given matrices and answer key, split at the answer key's heading.
fn sheet_parts(sheet: &str) -> (Named, Named) {
    let (given, answers) = sheet.split_once("Answer key").expect("an answer key");
    (matrices(given), matrices(answers))
}

#[test]
fn exercise_matrices_are_numpys_draws() {
    for (sheet, draws_file) in [
        ("seed7_answers.md", "seed7.draws.json"),
        ("seed2026_wide_answers.md", "seed2026_wide.draws.json"),
    ] {
        let args = SHEETS.iter().find(|(n, _)| *n == sheet).unwrap().1;
        let (given, _) = sheet_parts(&exercise(args));
        let numpy = draws(draws_file);
        assert_eq!(numbers(&given["X"]), json_matrix(&numpy["x"]), "{sheet}: X");
        for (i, head) in numpy["heads"].as_array().unwrap().iter().enumerate() {
            for (m, name) in ["W_Q", "W_K", "W_V"].iter().enumerate() {
                let key = format!("{name}^{{({})}}", i + 1);
                assert_eq!(
                    numbers(&given[&key]),
                    json_matrix(&head[m]),
                    "{sheet}: {key}"
                );
            }
        }
        assert_eq!(
            numbers(&given["W_O"]),
            json_matrix(&numpy["wo"]),
            "{sheet}: W_O"
        );
    }
}

/// The inline JSON `solve` takes for a list of matrices.
fn inline(ms: &[&Value]) -> String {
    ms.iter()
        .map(|m| m.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// `solve` on a sheet's matrices (from NumPy's draws).
fn solve_args(numpy: &Value, extra: &[&str]) -> Vec<String> {
    let heads = numpy["heads"].as_array().unwrap();
    let of = |m: usize| inline(&heads.iter().map(|h| &h[m]).collect::<Vec<_>>());
    let mut args: Vec<String> = vec![
        "solve".into(),
        "--x".into(),
        numpy["x"].to_string(),
        "--wq".into(),
        of(0),
        "--wk".into(),
        of(1),
        "--wv".into(),
        of(2),
        "--wo".into(),
        numpy["wo"].to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// The answer key's name of each `solve --json` matrix: (head or None, key, name).
fn answer_names(heads: usize) -> Vec<(Option<usize>, &'static str, String)> {
    let mut names = Vec::new();
    for i in 1..=heads {
        for (key, name) in [
            ("q", format!("Q_{i}")),
            ("k", format!("K_{i}")),
            ("v", format!("V_{i}")),
            ("scores", format!("S_{i}")),
            ("weights", format!("A_{i}")),
            ("z", format!("Z_{i}")),
        ] {
            names.push((Some(i - 1), key, name));
        }
    }
    names.push((None, "concat", "Z".into()));
    names.push((None, "output", "Z W_O".into()));
    names
}

/// The answer key of the stored sheet `sheet` (NumPy's draws in `draws_file`) holds the
/// numbers `solve` computes with `flags` (the mask's options), and a masked sheet states the
/// mask solve applies.
fn assert_key_equals_solve(sheet: &str, draws_file: &str, heads: usize, flags: &[&str]) {
    let args = SHEETS.iter().find(|(n, _)| *n == sheet).unwrap().1;
    let (given, key) = sheet_parts(&exercise(args));
    let numpy = draws(draws_file);
    let dir = data("exercise");

    // The numbers agree with solve --json to the printed precision (4 decimals).
    let mut json_flags = flags.to_vec();
    json_flags.push("--json");
    let r = run(&dir, &solve_args(&numpy, &json_flags));
    assert_eq!(r.status, 0, "{}", r.stderr);
    let json: Value = serde_json::from_str(&r.stdout).unwrap();
    let names = answer_names(heads);
    assert_eq!(key.len(), names.len(), "{sheet}: {:?}", key.keys());
    let exact_numbers = |v: &Value| -> Vec<Vec<f64>> {
        let rows: Vec<Vec<Value>> = serde_json::from_value(v.clone()).unwrap();
        rows.iter()
            .map(|r| {
                r.iter()
                    .map(|x| x.as_f64().unwrap_or(f64::NEG_INFINITY))
                    .collect()
            })
            .collect()
    };
    let close = |a: f64, b: f64| a == b || (a - b).abs() <= 0.5e-4 + 1e-12;
    match given.get("M") {
        None => assert!(json.get("mask").is_none(), "{sheet}: no mask stated"),
        Some(m) => {
            let exact = exact_numbers(&json["mask"]);
            assert_eq!(numbers(m), exact, "{sheet}: M is solve's mask");
            assert!(exact.iter().flatten().any(|x| x.is_infinite()), "{sheet}");
        }
    }
    for (head, field, name) in &names {
        let exact = match head {
            Some(h) => exact_numbers(&json["heads"][h][field]),
            None => exact_numbers(&json[field]),
        };
        let shown = numbers(&key[name]);
        assert_eq!(shown.len(), exact.len(), "{sheet}: {name}");
        for (a, b) in shown.iter().flatten().zip(exact.iter().flatten()) {
            assert!(close(*a, *b), "{sheet}: {name}: {a} vs {b}");
        }
    }

    // And they are exactly the numbers `solve --precision 4 --suppress` prints, after the
    // mask it prints first (a block of its own).
    let mut print_flags = flags.to_vec();
    print_flags.extend(["--precision", "4", "--suppress"]);
    let r = run(&dir, &solve_args(&numpy, &print_flags));
    assert_eq!(r.status, 0, "{}", r.stderr);
    let steps = match r.stdout.split_once("\n\n") {
        Some((first, rest)) if first.starts_with("Mask") => rest,
        _ => &r.stdout,
    };
    let printed: Vec<String> = steps
        .lines()
        .filter(|l| !l.ends_with(':'))
        .flat_map(|l| l.split(|c: char| c.is_whitespace() || c == '[' || c == ']'))
        .filter(|t| !t.is_empty())
        .map(|t| match t {
            "-inf" => "-\\infty".to_string(),
            t => t.strip_suffix('.').unwrap_or(t).to_string(),
        })
        .collect();
    let order: Vec<String> = names.iter().map(|n| n.2.clone()).collect();
    // solve prints per head Q K V S A Z; the key groups the same matrices by part.
    let in_solve_order: Vec<String> = order
        .iter()
        .flat_map(|name| key[name].iter().flatten().cloned())
        .collect();
    assert_eq!(in_solve_order, printed, "{sheet}");
}

#[test]
fn exercise_answer_key_equals_solve() {
    assert_key_equals_solve("seed7_answers.md", "seed7.draws.json", 2, &[]);
    assert_key_equals_solve(
        "seed2026_wide_answers.md",
        "seed2026_wide.draws.json",
        3,
        &[],
    );
}

/// A decoder's sheet (the same draws as without the mask) has the key `solve --causal` and
/// `solve --padding` give, with the blocked scores -inf and their weights 0.
#[test]
fn exercise_masked_answer_key_equals_solve_with_the_mask() {
    assert_key_equals_solve(
        "seed7_causal_answers.md",
        "seed7.draws.json",
        2,
        &["--causal"],
    );
    let wide = "seed2026_wide_decoder_answers.tex";
    let args = ["--causal", "--padding", "[false,false,true]"];
    assert_key_equals_solve(wide, "seed2026_wide.draws.json", 3, &args);
    let sheet = exercise(SHEETS.iter().find(|(n, _)| *n == wide).unwrap().1);
    assert!(sheet.contains("a causal mask") && sheet.contains("The last row of $X$ is padding"));
    assert!(
        sheet.contains("S_i = Q_i K_i^\\top / \\sqrt{d_k} + M"),
        "{sheet}"
    );
}

#[test]
#[ignore = "needs pdflatex"]
fn exercise_tex_compiles_with_pdflatex() {
    let dir = temp_dir("pdflatex");
    let r = run(
        &dir,
        &[
            "exercise",
            "--seed",
            "7",
            "--answers",
            "--format",
            "tex",
            "--output",
            "sheet.tex",
        ],
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    let pdflatex = std::process::Command::new("pdflatex")
        .args(["-interaction=nonstopmode", "-halt-on-error", "sheet.tex"])
        .current_dir(&dir)
        .output();
    let out = match pdflatex {
        Ok(out) => out,
        Err(e) => panic!(
            "pdflatex could not be run ({e}): this test needs it; install it with \
             `apt-get update && apt-get install -y texlive-latex-base`"
        ),
    };
    assert!(
        out.status.success(),
        "pdflatex failed on the exercise sheet:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(dir.join("sheet.pdf").is_file());
}

#[test]
fn exercise_output_goes_through_a_rename() {
    let dir = temp_dir("output");
    let r = run(&dir, &["exercise", "--seed", "7", "--output", "sheet.md"]);
    assert_eq!((r.status, r.stdout.as_str()), (0, ""), "{}", r.stderr);
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        files,
        vec!["sheet.md".to_string()],
        "no temporary file left"
    );
    let written = std::fs::read_to_string(dir.join("sheet.md")).unwrap();
    assert_eq!(written, exercise(&["--seed", "7"]));
}

#[test]
fn exercise_reports_bad_input_in_one_line() {
    let dir = data("exercise");
    assert_eq!(
        fails(
            &dir,
            &[
                "exercise",
                "--seed",
                "7",
                "--output",
                "no/such/dir/sheet.md"
            ]
        ),
        "error: no/such/dir/sheet.md: cannot write: no such file"
    );
    assert_eq!(
        usage_error(Path::new("."), &["exercise", "--seed", "minus one"]),
        "error: invalid value 'minus one' for '--seed <S>': invalid digit found in string"
    );
    assert_eq!(
        usage_error(Path::new("."), &["exercise", "--seed", "1", "--heads", "0"]),
        "error: invalid value '0' for '--heads <HEADS>': 0 is not in 1..=8"
    );
    assert_eq!(
        fails(&dir, &["exercise", "--seed", "7", "--padding", "2"]),
        "error: --padding: 2 padded tokens leave none of the 2 tokens to attend to (at most 1)"
    );
}

#[test]
fn exercise_help_has_an_example() {
    assert_help_has_example("exercise");
}

/// A backward sheet: the same draws as without --backward, then NumPy's G; its key's
/// gradients are `solve --backward --dz G`'s, to the printed 4 decimals.
#[test]
fn exercise_backward_sheet_draws_g_last_and_its_key_equals_solve_backward() {
    let numpy = draws("seed7_backward.draws.json");
    let plain = draws("seed7.draws.json");
    for key in ["x", "heads", "wo"] {
        assert_eq!(numpy[key], plain[key], "{key}: G is drawn last");
    }
    for (sheet, mask) in [
        ("seed7_backward_answers.md", None),
        ("seed7_causal_backward_answers.md", Some("--causal")),
    ] {
        let args = SHEETS.iter().find(|(n, _)| *n == sheet).unwrap().1;
        let (given, key) = sheet_parts(&exercise(args));
        assert_eq!(numbers(&given["G"]), json_matrix(&numpy["g"]), "{sheet}: G");
        let g = numpy["g"].to_string();
        let mut extra = vec!["--backward", "--dz", &g, "--json"];
        extra.extend(mask);
        let r = run(&data("exercise"), &solve_args(&numpy, &extra));
        assert_eq!(r.status, 0, "{}", r.stderr);
        let solved: Value = serde_json::from_str(&r.stdout).unwrap();
        let back = &solved["backward"];
        let mut names = vec![
            ("\\partial L / \\partial W_O".to_string(), &back["dwo"]),
            ("\\partial L / \\partial Z".to_string(), &back["dconcat"]),
        ];
        for (n, h) in back["heads"].as_array().unwrap().iter().enumerate() {
            let i = n + 1;
            for (field, name) in [
                ("dz", format!("Z_{i}")),
                ("dweights", format!("A_{i}")),
                ("dscores", format!("S_{i}")),
                ("dq", format!("Q_{i}")),
                ("dk", format!("K_{i}")),
                ("dv", format!("V_{i}")),
                ("dwq", format!("W_Q^{{({i})}}")),
                ("dwk", format!("W_K^{{({i})}}")),
                ("dwv", format!("W_V^{{({i})}}")),
            ] {
                names.push((format!("\\partial L / \\partial {name}"), &h[field]));
            }
        }
        for (name, want) in names {
            let shown = numbers(key.get(&name).unwrap_or_else(|| panic!("{sheet}: {name}")));
            let want = json_matrix(want);
            for (a, b) in shown.iter().flatten().zip(want.iter().flatten()) {
                assert!(
                    (a - b).abs() <= 0.5e-4 + 1e-12,
                    "{sheet}: {name}: {a} vs {b}"
                );
            }
        }
    }
}
