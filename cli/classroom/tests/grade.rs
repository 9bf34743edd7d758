//! `exercise --roster` and `grade`: every planted mistake is named (on a masked sheet too,
//! with forgetting the mask), a correct submission gets full marks, a class of 30 is generated, answered and graded into the gradebook that
//! scripts/grade_goldens.py computes with NumPy, and the key graded as answers always gets
//! full marks.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

mod tools_common;

use attention_lab::prelude::*;
use proptest::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use tools_common::{data, temp_dir, Run};

/// Runs the binary in `dir`; without pdflatex on PATH unless `pdf` (PDFs are slow and
/// optional), so these tests pass on a machine without it.
fn run_in(dir: &Path, args: &[&str], pdf: bool) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_attention-lab-classroom"));
    cmd.args(args).current_dir(dir).env_remove("RUST_BACKTRACE");
    if !pdf {
        cmd.env("PATH", "");
    }
    let out = cmd.output().expect("the attention-lab binary runs");
    Run {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).expect("UTF-8"),
        stderr: String::from_utf8(out.stderr).expect("UTF-8"),
    }
}

/// Makes a class from `roster` (CSV text) in `dir/class`; returns the class folder.
fn make_class(dir: &Path, roster: &str, secret: &str, options: &[&str]) -> PathBuf {
    std::fs::write(dir.join("roster.csv"), roster).unwrap();
    let mut args = vec![
        "exercise",
        "--roster",
        "roster.csv",
        "--out",
        "class",
        "--secret",
        secret,
    ];
    args.extend_from_slice(options);
    let r = run_in(dir, &args, false);
    assert_eq!(r.status, 0, "{args:?}: {}", r.stderr);
    dir.join("class")
}

fn matrix(v: &Value) -> Array2<f64> {
    let rows: Vec<Vec<f64>> = serde_json::from_value(v.clone()).unwrap();
    let cols = rows[0].len();
    Array2::from_shape_vec((rows.len(), cols), rows.concat()).unwrap()
}

/// The given matrices of a key file.
struct Key {
    x: Array2<f64>,
    wq: Vec<Array2<f64>>,
    wk: Vec<Array2<f64>>,
    wv: Vec<Array2<f64>>,
    wo: Array2<f64>,
    /// A masked sheet's mask, added to the scores.
    mask: Option<Array2<f64>>,
}

fn read_key(path: &Path) -> (Key, Value) {
    let json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let list = |name: &str| json[name].as_array().unwrap().iter().map(matrix).collect();
    let key = Key {
        x: matrix(&json["x"]),
        wq: list("wq"),
        wk: list("wk"),
        wv: list("wv"),
        wo: matrix(&json["wo"]),
        mask: json.get("mask").map(|m| {
            let rows: Vec<Vec<Value>> = serde_json::from_value(m.clone()).unwrap();
            let blocked = |v: &Value| v.as_f64().unwrap_or(f64::NEG_INFINITY);
            let flat: Vec<f64> = rows.iter().flatten().map(blocked).collect();
            Array2::from_shape_vec((rows.len(), rows[0].len()), flat).unwrap()
        }),
    };
    (key, json)
}

/// A mistake planted in a student's work, in head `.1` (0-based) where it applies.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Plant {
    None,
    NoSqrtDk(usize),
    DividedByDk(usize),
    KNotTransposed(usize),
    KQTransposed(usize),
    SoftmaxColumns(usize),
    NaiveSoftmax(usize),
    HeadOrder,
    WoWrongSide,
    /// The concatenation handed in as the output.
    NoWo,
    RoundScores(usize),
    OffQ(usize),
    /// Every matrix rounded to this many decimals as soon as it is computed, and used so.
    RoundEachStep(i32),
    /// The scores of a masked sheet without the mask.
    ForgotMask(usize),
}

/// A student's work on `key`, step by step, with `plant` applied where it strikes and every
/// later step done right on the wrong numbers.
fn work(key: &Key, plant: Plant) -> MultiHeadOutput {
    let r = |m: Array2<f64>| match plant {
        Plant::RoundEachStep(d) => round(&m, d),
        _ => m,
    };
    let mut heads = Vec::new();
    for i in 0..key.wq.len() {
        let mut q = r(key.x.dot(&key.wq[i]));
        let k = r(key.x.dot(&key.wk[i]));
        let v = r(key.x.dot(&key.wv[i]));
        if plant == Plant::OffQ(i) {
            q[[0, 0]] += 0.5;
        }
        let root = (k.ncols() as f64).sqrt();
        let scores = match plant {
            Plant::NoSqrtDk(h) if h == i => q.dot(&k.t()),
            Plant::DividedByDk(h) if h == i => q.dot(&k.t()) / k.ncols() as f64,
            Plant::KNotTransposed(h) if h == i => q.dot(&k) / root,
            Plant::KQTransposed(h) if h == i => k.dot(&q.t()) / root,
            Plant::RoundScores(h) if h == i => round(&(q.dot(&k.t()) / root), 1),
            _ => q.dot(&k.t()) / root,
        };
        let scores = match &key.mask {
            Some(mask) if plant != Plant::ForgotMask(i) => scores + mask,
            _ => scores,
        };
        let scores = r(scores);
        // A row (or, taken by columns, a column) of -inf gets zero weights.
        let rows = |s: ArrayView2<f64>, softmax: Softmax| match key.mask {
            Some(_) => softmax.apply_masked(s),
            None => softmax.apply(s),
        };
        let weights = match plant {
            Plant::SoftmaxColumns(h) if h == i => rows(scores.t(), Softmax::Stable).reversed_axes(),
            Plant::NaiveSoftmax(h) if h == i => rows(scores.view(), Softmax::Naive),
            _ => rows(scores.view(), Softmax::Stable),
        };
        let weights = r(weights);
        let z = r(weights.dot(&v));
        heads.push(HeadOutput {
            q,
            k,
            v,
            scores,
            weights,
            z,
        });
    }
    let mut zs: Vec<ArrayView2<f64>> = heads.iter().map(|h| h.z.view()).collect();
    if plant == Plant::HeadOrder {
        zs.reverse();
    }
    let concat = r(concatenate(Axis(1), &zs).unwrap());
    let output = r(match plant {
        Plant::WoWrongSide => key.wo.dot(&concat),
        Plant::NoWo => concat.clone(),
        _ => concat.dot(&key.wo),
    });
    MultiHeadOutput {
        heads,
        concat,
        output: Some(output),
    }
}

/// Grades `answers` in `dir` with `--out marks`; returns the run.
fn grade(dir: &Path, key: &str, answers: &[&str]) -> Run {
    let mut args = vec!["grade", "--key", key, "--out", "marks", "--answers"];
    args.extend_from_slice(answers);
    run_in(dir, &args, false)
}

/// The gradebook's row of `student`, by column name.
fn row(dir: &Path, student: &str) -> std::collections::BTreeMap<String, String> {
    let text = std::fs::read_to_string(dir.join("marks/gradebook.csv")).unwrap();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    for record in reader.records() {
        let record = record.unwrap();
        if &record[0] == student {
            return header
                .iter()
                .cloned()
                .zip(record.iter().map(String::from))
                .collect();
        }
    }
    panic!("{student} not in the gradebook:\n{text}");
}

/// Ann hands in `answers` and they are graded in `dir` with the class's keys: the mistakes
/// column must be `code` and the feedback say `words`. Her gradebook row and feedback.
fn hand_in_one(
    dir: &Path,
    answers: &MultiHeadOutput,
    code: &str,
    words: &str,
) -> (std::collections::BTreeMap<String, String>, String) {
    attention_lab_io::write_answers(dir.join("ann.json"), "ann", answers).unwrap();
    let r = grade(dir, "class/keys", &["ann.json"]);
    assert_eq!(r.status, 0, "{code}: {}", r.stderr);
    let marks = row(dir, "ann");
    assert_eq!(marks["mistakes"], code);
    let feedback = std::fs::read_to_string(dir.join("marks/feedback/ann.txt")).unwrap();
    assert!(feedback.contains(words), "{code}: {feedback}");
    (marks, feedback)
}

#[test]
fn each_planted_mistake_is_named() {
    let default: &[&str] = &[];
    let cases: [(Plant, &str, &[&str], &str); 10] = [
        (
            Plant::NoSqrtDk(0),
            "S_1:no-sqrt-dk",
            default,
            "not divided by sqrt(d_k)",
        ),
        (
            Plant::DividedByDk(1),
            "S_2:divided-by-dk",
            default,
            "divided by d_k instead",
        ),
        (
            Plant::KNotTransposed(0),
            "S_1:k-not-transposed",
            &["--tokens", "3", "--dk", "3"],
            "K was used instead of K^T",
        ),
        (
            Plant::KQTransposed(1),
            "S_2:kq-transposed",
            default,
            "K Q^T was computed",
        ),
        (
            Plant::SoftmaxColumns(0),
            "A_1:softmax-columns",
            default,
            "over the columns",
        ),
        (
            Plant::NaiveSoftmax(1),
            "A_2:naive-softmax",
            default,
            "naive softmax",
        ),
        (
            Plant::HeadOrder,
            "Z:head-order",
            default,
            "concatenated in the wrong order",
        ),
        (
            Plant::WoWrongSide,
            "ZW_O:wo-wrong-side",
            &["--tokens", "4", "--dim", "4", "--dk", "2"],
            "W_O was multiplied on the wrong side",
        ),
        (
            // The sheet's output is (tokens, 4), the concatenation (tokens, 6): the shape alone
            // once refused the whole submission.
            Plant::NoWo,
            "ZW_O:no-wo",
            default,
            "W_O was not applied",
        ),
        (
            Plant::RoundScores(0),
            "S_1:early-rounding",
            default,
            "rounded too early (to 1 decimal)",
        ),
    ];
    for (plant, code, options, words) in cases {
        let dir = temp_dir(&format!("plant-{code}").replace(':', "-"));
        let class = make_class(&dir, "id\nann\n", "plant secret", options);
        let key_path = class.join("keys/ann.json");
        let (mut key, mut json) = read_key(&key_path);
        if let Plant::NaiveSoftmax(_) = plant {
            // Sheet numbers never overflow exp; a teacher's big X does.
            key.x = key.x.mapv(|v| v * 100.0);
            json["x"] =
                serde_json::to_value(key.x.outer_iter().map(|r| r.to_vec()).collect::<Vec<_>>())
                    .unwrap();
            std::fs::write(&key_path, json.to_string()).unwrap();
        }
        let answers = work(&key, plant);
        if let Plant::NaiveSoftmax(h) = plant {
            assert!(
                answers.heads[h].weights.iter().any(|w| w.is_nan()),
                "exp overflowed"
            );
        }
        let (marks, feedback) = hand_in_one(&dir, &answers, code, words);
        // Every step after the mistake was done right on the wrong numbers: half credit.
        if plant != Plant::WoWrongSide && plant != Plant::NoWo {
            assert!(
                feedback.contains("carried forward"),
                "{plant:?}: {feedback}"
            );
        }
        let total: f64 = marks["total"].parse().unwrap();
        let max: f64 = marks["max"].parse().unwrap();
        assert!(total < max && total >= max - 3.0, "{plant:?}: {marks:?}");
    }
}

/// On a decoder's sheet (causal, the last token padding) the same mistakes are named, and
/// forgetting the mask too; every later step done right on the wrong numbers is carried
/// forward.
#[test]
fn each_planted_mistake_is_named_on_a_masked_sheet() {
    let options = ["--tokens", "3", "--causal", "--padding", "1"];
    let cases = [
        (
            Plant::ForgotMask(1),
            "S_2:forgot-mask",
            "the mask was not added",
        ),
        (
            Plant::NoSqrtDk(0),
            "S_1:no-sqrt-dk",
            "not divided by sqrt(d_k)",
        ),
        (
            Plant::DividedByDk(1),
            "S_2:divided-by-dk",
            "divided by d_k instead",
        ),
        (
            Plant::KNotTransposed(0),
            "S_1:k-not-transposed",
            "K was used instead of K^T",
        ),
        (
            Plant::KQTransposed(1),
            "S_2:kq-transposed",
            "K Q^T was computed",
        ),
        (
            Plant::SoftmaxColumns(0),
            "A_1:softmax-columns",
            "over the columns",
        ),
        (
            Plant::HeadOrder,
            "Z:head-order",
            "concatenated in the wrong order",
        ),
        (
            Plant::RoundScores(0),
            "S_1:early-rounding",
            "rounded too early (to 1 decimal)",
        ),
    ];
    let dir = temp_dir("masked-plants");
    let class = make_class(&dir, "id\nann\n", "masked secret", &options);
    let (key, json) = read_key(&class.join("keys/ann.json"));
    assert_eq!(
        (&json["causal"], &json["padding"]),
        (&Value::from(true), &Value::from(1))
    );
    let mask = key.mask.clone().expect("a masked key has its mask");
    assert_eq!(
        mask.mapv(|m| m == f64::NEG_INFINITY),
        array![
            [false, true, true],
            [false, false, true],
            [false, false, true]
        ]
    );
    for (plant, code, words) in cases {
        let (_, feedback) = hand_in_one(&dir, &work(&key, plant), code, words);
        assert!(
            feedback.contains("carried forward"),
            "{plant:?}: {feedback}"
        );
    }
    // Right answers, as .npy files with -inf where the mask blocks, get every point.
    write_npy_dir(&dir.join("ann"), &work(&key, Plant::None), Some(4));
    std::fs::remove_file(dir.join("ann.json")).unwrap();
    let r = grade(&dir, "class/keys", &["ann"]);
    assert_eq!(
        (r.status, r.stdout.as_str()),
        (0, "ann: 14 of 14\n"),
        "{}",
        r.stderr
    );
}

#[test]
fn rounding_every_step_to_2_of_4_decimals_is_named_early_rounding() {
    let dir = temp_dir("round2");
    let class = make_class(&dir, "id\neve\n", "s", &["--decimals", "3"]);
    let (key, _) = read_key(&class.join("keys/eve.json"));
    attention_lab_io::write_answers(
        dir.join("eve.json"),
        "eve",
        &work(&key, Plant::RoundEachStep(2)),
    )
    .unwrap();
    let r = grade(&dir, "class/keys", &["eve.json"]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    let mistakes = row(&dir, "eve")["mistakes"].clone();
    assert!(mistakes.contains("S_1:early-rounding"), "{mistakes}");
    for code in mistakes.split(' ') {
        assert!(code.ends_with(":early-rounding"), "{mistakes}");
    }
    let feedback = std::fs::read_to_string(dir.join("marks/feedback/eve.txt")).unwrap();
    assert!(
        feedback.contains("rounded too early (to 2 decimals)"),
        "{feedback}"
    );
}

#[test]
fn a_wrong_answer_no_mistake_explains_is_said_so() {
    let dir = temp_dir("unknown");
    let class = make_class(&dir, "id\nbo\n", "s", &[]);
    let (key, _) = read_key(&class.join("keys/bo.json"));
    attention_lab_io::write_answers(dir.join("bo.json"), "bo", &work(&key, Plant::OffQ(0)))
        .unwrap();
    let r = grade(&dir, "class/keys/bo.json", &["bo.json"]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(row(&dir, "bo")["mistakes"], "Q_1:unknown");
    let feedback = std::fs::read_to_string(dir.join("marks/feedback/bo.txt")).unwrap();
    assert!(
        feedback.contains("none of the usual mistakes explains it"),
        "{feedback}"
    );
}

/// A submission as one .npy file per matrix, rounded to `decimals` when given.
fn write_npy_dir(folder: &Path, out: &MultiHeadOutput, decimals: Option<i32>) {
    std::fs::create_dir(folder).unwrap();
    let save = |name: String, m: &Array2<f64>| {
        let m = decimals.map_or_else(|| m.clone(), |d| round(m, d));
        ndarray_npy::write_npy(folder.join(format!("{name}.npy")), &m).unwrap();
    };
    for (i, h) in out.heads.iter().enumerate() {
        let i = i + 1;
        save(format!("q_{i}"), &h.q);
        save(format!("k_{i}"), &h.k);
        save(format!("v_{i}"), &h.v);
        save(format!("scores_{i}"), &h.scores);
        save(format!("weights_{i}"), &h.weights);
        save(format!("z_{i}"), &h.z);
    }
    save("concat".into(), &out.concat);
    save("output".into(), out.result());
}

/// Bo hands in Ann's correct answers as his own: graded against his sheet they earn little,
/// and the listing and his feedback say whose sheet they fit.
#[test]
fn answers_that_fit_another_students_sheet_are_said_to() {
    let dir = temp_dir("copied");
    let class = make_class(&dir, "id\nann\nbo\n", "copy secret", &[]);
    let (ann, _) = read_key(&class.join("keys/ann.json"));
    attention_lab_io::write_answers(dir.join("bo.json"), "bo", &work(&ann, Plant::None)).unwrap();
    let r = grade(&dir, "class/keys", &["bo.json"]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stdout.starts_with("bo: ")
            && r.stdout.ends_with("; these answers fit the sheet of ann\n"),
        "{}",
        r.stdout
    );
    let feedback = std::fs::read_to_string(dir.join("marks/feedback/bo.txt")).unwrap();
    assert!(
        feedback.ends_with("These answers fit the sheet of ann, not this one.\n"),
        "{feedback}"
    );
    // Ann's own answers fit her sheet: nothing is said.
    attention_lab_io::write_answers(dir.join("ann.json"), "ann", &work(&ann, Plant::None)).unwrap();
    let r = grade(&dir, "class/keys", &["ann.json"]);
    assert_eq!(r.stdout, "ann: 14 of 14\n");
}

#[test]
fn a_correct_submission_gets_full_marks_as_json_and_as_npy() {
    let dir = temp_dir("correct");
    let class = make_class(
        &dir,
        "id,name\nann,Ann\ncy,Cy\ndee,Dee\n",
        "s",
        &["--heads", "3", "--dk", "2"],
    );
    let (key, _) = read_key(&class.join("keys/ann.json"));
    attention_lab_io::write_answers(dir.join("ann.json"), "ann", &work(&key, Plant::None)).unwrap();
    // Cy hands in one .npy file per matrix, rounded to the 4 decimals the sheet asks for.
    let (key, _) = read_key(&class.join("keys/cy.json"));
    let out = work(&key, Plant::None);
    write_npy_dir(&dir.join("cy"), &out, Some(4));
    // Dee rounds every matrix to 4 decimals as she goes and works on with the rounded ones.
    let (key, _) = read_key(&class.join("keys/dee.json"));
    attention_lab_io::write_answers(
        dir.join("dee.json"),
        "dee",
        &work(&key, Plant::RoundEachStep(4)),
    )
    .unwrap();
    let r = grade(&dir, "class/keys", &["ann.json", "cy", "dee.json"]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "ann: 20 of 20\ncy: 20 of 20\ndee: 20 of 20\n");
    for student in ["ann", "cy", "dee"] {
        let marks = row(&dir, student);
        assert_eq!(
            (marks["total"].as_str(), marks["mistakes"].as_str()),
            ("20", "")
        );
        assert_eq!(marks["b3"], "3");
    }
}

#[test]
fn answers_are_read_by_field_names_in_any_order() {
    let dir = temp_dir("order");
    let class = make_class(&dir, "id\nann\nbo\n", "s", &[]);
    let (key, _) = read_key(&class.join("keys/ann.json"));
    attention_lab_io::write_answers(dir.join("ann.json"), "ann", &work(&key, Plant::OffQ(0)))
        .unwrap();
    // serde_json's map sorts the keys: "concat", "heads", "output", "student"; "k" before "q".
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ann.json")).unwrap()).unwrap();
    std::fs::write(dir.join("sorted.json"), json.to_string()).unwrap();
    assert!(json.to_string().starts_with("{\"concat\":"));
    let r = grade(&dir, "class/keys", &["ann.json"]);
    let (stdout, marks) = (r.stdout, row(&dir, "ann"));
    let r = grade(&dir, "class/keys", &["sorted.json"]);
    assert_eq!((r.stdout, row(&dir, "ann")), (stdout, marks));
    // A missing field is named, with the file and the head.
    let mut json = json;
    json["heads"][1].as_object_mut().unwrap().remove("scores");
    std::fs::write(dir.join("bo.json"), json.to_string()).unwrap();
    let r = grade(&dir, "class/keys", &["bo.json"]);
    assert_eq!(
        r.stderr,
        "error: bo.json: student \"bo\" not graded: head 2: \"scores\" is missing\n"
    );
}

#[test]
fn the_key_holds_the_numbers_solve_json_writes() {
    key_equals_solve(&["--heads", "3", "--decimals", "2"], &[]);
}

/// A decoder's key holds what solve --causal --padding writes, the mask included.
#[test]
fn a_masked_key_holds_the_numbers_solve_json_writes_with_the_mask() {
    key_equals_solve(
        &["--tokens", "4", "--causal", "--padding", "2"],
        &["--causal", "--padding", "[false,false,true,true]"],
    );
}

/// The key of a class made with `options` equals `solve --json` with `flags`.
fn key_equals_solve(options: &[&str], flags: &[&str]) {
    let dir = temp_dir("solve");
    let class = make_class(&dir, "id\nann\n", "s", options);
    let (_, json) = read_key(&class.join("keys/ann.json"));
    let list = |name: &str| {
        let each: Vec<String> = json[name]
            .as_array()
            .unwrap()
            .iter()
            .map(Value::to_string)
            .collect();
        each.join(",")
    };
    let (x, wq, wk, wv, wo) = (
        json["x"].to_string(),
        list("wq"),
        list("wk"),
        list("wv"),
        json["wo"].to_string(),
    );
    let mut args = vec![
        "solve", "--x", &x, "--wq", &wq, "--wk", &wk, "--wv", &wv, "--wo", &wo, "--json",
    ];
    args.extend_from_slice(flags);
    let r = run_in(&dir, &args, false);
    assert_eq!(r.status, 0, "{}", r.stderr);
    let solved: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(json["solution"], solved);
}

/// Every file of a class folder, by relative path, with its bytes.
fn files(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut all = std::collections::BTreeMap::new();
    for sub in ["sheets", "keys"] {
        for entry in std::fs::read_dir(dir.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            all.insert(
                format!("{sub}/{}", path.file_name().unwrap().to_string_lossy()),
                std::fs::read(&path).unwrap(),
            );
        }
    }
    all
}

#[test]
fn the_same_secret_gives_the_same_bytes_and_another_secret_other_sheets() {
    let roster = "id,name\ns1,A\ns2,B\ns3,C\n";
    let (a, b, c) = (
        temp_dir("secret-a"),
        temp_dir("secret-b"),
        temp_dir("secret-c"),
    );
    let first = files(&make_class(&a, roster, "course one", &[]));
    let again = files(&make_class(&b, roster, "course one", &[]));
    assert_eq!(first, again, "byte for byte");
    assert_eq!(
        first.len(),
        3 * 5,
        "md and tex sheets; md, tex and json keys"
    );
    std::fs::write(c.join("secret.txt"), "course two\n").unwrap();
    std::fs::write(c.join("roster.csv"), roster).unwrap();
    let r = run_in(
        &c,
        &[
            "exercise",
            "--roster",
            "roster.csv",
            "--out",
            "class",
            "--secret-file",
            "secret.txt",
        ],
        false,
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    let other = files(&c.join("class"));
    for id in ["s1", "s2", "s3"] {
        let sheet = format!("sheets/{id}.md");
        assert_ne!(first[&sheet], other[&sheet], "{sheet}");
        let text = String::from_utf8(first[&sheet].clone()).unwrap();
        assert!(
            !text.contains("seed") && !text.contains("Answer key"),
            "{text}"
        );
        let key = String::from_utf8(first[&format!("keys/{id}.md")].clone()).unwrap();
        assert!(
            key.starts_with(&text[..text.find("**(a)**").unwrap()]),
            "the key is the sheet and more"
        );
        assert!(key.contains("## Answer key"));
    }
    // The secret file's trailing newline is not part of the secret.
    let d = temp_dir("secret-d");
    assert_eq!(files(&make_class(&d, roster, "course two", &[])), other);
}

/// Writes student `n`'s submission (0-based place in the roster) as the scenario list of
/// scripts/grade_goldens.py says.
fn hand_in(dir: &Path, class: &Path, n: usize, id: &str) {
    let (key, _) = read_key(&class.join(format!("keys/{id}.json")));
    let plant = match n % 11 {
        2 => Plant::NoSqrtDk(0),
        3 => Plant::DividedByDk(1),
        4 => Plant::SoftmaxColumns(0),
        5 => Plant::KQTransposed(1),
        6 => Plant::RoundScores(0),
        7 => Plant::HeadOrder,
        8 => Plant::OffQ(0),
        _ => Plant::None,
    };
    let out = work(&key, plant);
    let path = dir.join(format!("{id}.json"));
    match n % 11 {
        1 => {
            write_npy_dir(&dir.join(id), &out, None);
        }
        9 | 10 => {
            let mut json: Value = serde_json::from_str(&answers_json(id, &out)).unwrap();
            if n % 11 == 9 {
                json.as_object_mut().unwrap().remove("output");
            } else {
                json["heads"][1]["weights"][0][1] = Value::from("0.5x");
            }
            std::fs::write(path, json.to_string()).unwrap();
        }
        _ => attention_lab_io::write_answers(path, id, &out).unwrap(),
    }
}

#[test]
fn a_class_of_30_is_generated_answered_and_graded_as_numpy_grades_it() {
    let dir = temp_dir("class30");
    let roster = std::fs::read_to_string(data("grade").join("roster30.csv")).unwrap();
    let class = make_class(&dir, &roster, "grade-test-secret", &[]);
    // Each key holds the seed and the draws NumPy makes from HMAC-SHA256(secret, id).
    let numpy: Value =
        serde_json::from_str(&std::fs::read_to_string(data("grade").join("keys30.json")).unwrap())
            .unwrap();
    let ids: Vec<String> = (1..=30).map(|n| format!("s{n:02}")).collect();
    for id in &ids {
        let (_, key) = read_key(&class.join(format!("keys/{id}.json")));
        let expected = &numpy[id];
        for field in ["seed", "x", "wq", "wk", "wv", "wo"] {
            assert_eq!(key[field], expected[field], "{id}: {field}");
        }
        let output = matrix(&key["solution"]["output"]);
        let numpy_output = matrix(&expected["output"]);
        let gap = (&output - &numpy_output).fold(0.0f64, |m, d| m.max(d.abs()));
        assert!(gap <= 1e-12, "{id}: output differs from NumPy's by {gap}");
    }
    let subs = dir.join("submissions");
    std::fs::create_dir(&subs).unwrap();
    for (n, id) in ids.iter().enumerate() {
        hand_in(&subs, &class, n, id);
    }
    let r = grade(&dir, "class/keys", &["submissions"]);
    assert_eq!(r.status, 1, "some submissions are malformed: {}", r.stderr);
    // One line for each malformed submission, naming the student and what is wrong.
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 4, "{}", r.stderr);
    assert!(
        lines[0].ends_with("student \"s10\" not graded: \"output\" is missing"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains(
            "\"s11\" not graded: head 2: \"weights\": element [0][1] is not a number: \"0.5x\""
        ),
        "{}",
        lines[1]
    );
    let book = std::fs::read_to_string(dir.join("marks/gradebook.csv")).unwrap();
    let golden = std::fs::read_to_string(data("grade").join("gradebook30.csv")).unwrap();
    assert_eq!(book, golden);
    let feedback =
        |id: &str| std::fs::read_to_string(dir.join(format!("marks/feedback/{id}.txt"))).unwrap();
    assert!(feedback("s03").contains("S_1: wrong: the scores were not divided by sqrt(d_k)."));
    assert!(feedback("s08").contains("Z: wrong: the heads were concatenated in the wrong order."));
    assert!(feedback("s10").contains("not graded: \"output\" is missing"));
    assert!(feedback("s01").starts_with("Ada Lovelace (s01): 14 of 14 points."));
}

#[test]
fn bad_arguments_are_one_line_and_status_2() {
    let dir = temp_dir("bad");
    let fails = |args: &[&str]| {
        let r = run_in(&dir, args, false);
        assert_eq!(
            (r.status, r.stderr.lines().count()),
            (2, 1),
            "{args:?}: {}",
            r.stderr
        );
        r.stderr.trim_end().to_string()
    };
    assert_eq!(
        fails(&["grade", "--key", "missing.json", "--answers", "a.json"]),
        "error: --key: missing.json: cannot read: no such file"
    );
    std::fs::write(dir.join("r.csv"), "id,name\na,A\nb,B\na,C\n").unwrap();
    assert_eq!(
        fails(&["exercise", "--roster", "r.csv", "--out", "o", "--secret", "s"]),
        "error: r.csv: line 4: id \"a\" again (first on line 2)"
    );
    std::fs::write(dir.join("r.csv"), "name\nA\n").unwrap();
    assert_eq!(
        fails(&["exercise", "--roster", "r.csv", "--out", "o", "--secret", "s"]),
        "error: r.csv: no column named id (the header line is: name)"
    );
    std::fs::write(dir.join("r.csv"), "id\n../up\n").unwrap();
    assert!(
        fails(&["exercise", "--roster", "r.csv", "--out", "o", "--secret", "s"])
            .starts_with("error: r.csv: line 2: id \"../up\" may only hold letters")
    );
    assert_eq!(
        fails(&["exercise", "--roster", "r.csv", "--out", "o"]),
        "error: --roster: needs the course secret: --secret SECRET or --secret-file FILE"
    );
    assert!(!dir.join("o").exists(), "nothing written on bad input");
}

#[test]
#[ignore = "needs pdflatex"]
fn roster_pdfs_compile_the_same_bytes_twice() {
    let (a, b) = (temp_dir("pdf-a"), temp_dir("pdf-b"));
    let mut pdfs = Vec::new();
    for dir in [&a, &b] {
        // LaTeX's specials are escaped; a name pdflatex cannot set stays on the Markdown sheet.
        let roster = "id,name\nann,Ann O'Neil & Co_1 50%\nwang,王小明\n";
        std::fs::write(dir.join("roster.csv"), roster).unwrap();
        let r = run_in(
            dir,
            &[
                "exercise",
                "--roster",
                "roster.csv",
                "--out",
                "class",
                "--secret",
                "s",
            ],
            true,
        );
        assert_eq!(r.status, 0, "{}", r.stderr);
        let sheet = std::fs::read(dir.join("class/sheets/ann.pdf")).unwrap();
        let key = std::fs::read(dir.join("class/keys/ann.pdf")).unwrap();
        assert!(sheet.starts_with(b"%PDF") && key.starts_with(b"%PDF"));
        let names: Vec<String> = std::fs::read_dir(dir.join("class/keys"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 8, "no build files left: {names:?}");
        assert!(!dir.join("class/.build").exists());
        assert!(dir.join("class/sheets/wang.pdf").is_file());
        pdfs.push((sheet, key));
    }
    assert!(pdfs[0] == pdfs[1], "the PDFs are reproducible");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Whatever the secret, shape and mask options, the key's own solution, handed in as
    /// answers, gets every point.
    #[test]
    fn grading_the_key_itself_gives_full_marks(
        secret in "[a-z0-9]{1,16}",
        tokens in 1usize..=5,
        dim in 1usize..=6,
        heads in 1usize..=3,
        dk in 1usize..=4,
        decimals in 0i32..=3,
        precision in 0usize..=8,
        causal in any::<bool>(),
        padding in 0usize..=3,
    ) {
        let dir = temp_dir("prop");
        let mut opts: Vec<String> = vec![
            "--tokens".into(), tokens.to_string(), "--dim".into(), dim.to_string(),
            "--heads".into(), heads.to_string(), "--dk".into(), dk.to_string(),
            "--decimals".into(), decimals.to_string(), "--precision".into(), precision.to_string(),
            // At least one token is left to attend to.
            "--padding".into(), padding.min(tokens - 1).to_string(),
        ];
        if causal {
            opts.push("--causal".into());
        }
        let opts: Vec<&str> = opts.iter().map(String::as_str).collect();
        let class = make_class(&dir, "id\nkey\n", &secret, &opts);
        let (_, json) = read_key(&class.join("keys/key.json"));
        std::fs::write(dir.join("key.json"), json["solution"].to_string()).unwrap();
        let r = grade(&dir, "class/keys", &["key.json"]);
        prop_assert_eq!(r.status, 0, "{}", r.stderr);
        let marks = row(&dir, "key");
        let max = 6 * heads + 2;
        prop_assert_eq!(marks["total"].clone(), max.to_string());
        prop_assert_eq!(marks["max"].clone(), max.to_string());
        prop_assert_eq!(marks["mistakes"].clone(), "");
    }
}

#[test]
fn malformed_submissions_are_one_line_each_and_the_rest_are_graded() {
    let dir = temp_dir("malformed");
    let class = make_class(&dir, "id\nann\nbo\ncy\n", "s", &[]);
    let (key, _) = read_key(&class.join("keys/ann.json"));
    let good = work(&key, Plant::None);
    attention_lab_io::write_answers(dir.join("ann.json"), "ann", &good).unwrap();
    // Bo's weights of head 1 have a column too many; Cy hands in twice; Dan has no key.
    let (key, _) = read_key(&class.join("keys/bo.json"));
    let mut bo = work(&key, Plant::None);
    bo.heads[0].weights = Array2::zeros((2, 3));
    attention_lab_io::write_answers(dir.join("bo.json"), "bo", &bo).unwrap();
    let (key, _) = read_key(&class.join("keys/cy.json"));
    attention_lab_io::write_answers(dir.join("cy.json"), "cy", &work(&key, Plant::None)).unwrap();
    attention_lab_io::write_answers(dir.join("cy-again.json"), "cy", &work(&key, Plant::None))
        .unwrap();
    attention_lab_io::write_answers(dir.join("dan.json"), "dan", &good).unwrap();
    std::fs::write(dir.join("eve.json"), "{\"heads\": [").unwrap();
    let r = grade(
        &dir,
        "class/keys",
        &[
            "ann.json",
            "bo.json",
            "cy.json",
            "cy-again.json",
            "dan.json",
            "eve.json",
            "gone.json",
        ],
    );
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert_eq!(r.stdout, "ann: 14 of 14\ncy: 14 of 14\n");
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(
        lines,
        [
            "error: bo.json: student \"bo\" not graded: head 1: \"weights\" has shape (2, 3), the sheet's is (2, 2)",
            "error: cy-again.json: student \"cy\" not graded: a second submission for student \"cy\" (cy-again.json)",
            "error: dan.json: student \"dan\" not graded: no key for student \"dan\" in class/keys",
            "error: eve.json: student \"eve\" not graded: invalid JSON: EOF while parsing a list at line 1 column 11",
            "error: gone.json: student \"gone\" not graded: cannot read: no such file",
        ]
    );
    let book = std::fs::read_to_string(dir.join("marks/gradebook.csv")).unwrap();
    assert_eq!(book.lines().count(), 1 + 7, "{book}");
    // Bad arguments: status 2, nothing graded.
    let r = run_in(
        &dir,
        &["grade", "--key", "class/keys", "--answers", "class/sheets"],
        false,
    );
    assert_eq!(
        (r.status, r.stderr.trim_end()),
        (
            2,
            "error: --answers: no submissions found (ID.json files or ID/ folders of .npy files)"
        )
    );
    std::fs::write(dir.join("file"), "").unwrap();
    let r = run_in(
        &dir,
        &[
            "grade",
            "--key",
            "class/keys",
            "--answers",
            "ann.json",
            "--out",
            "file/marks",
        ],
        false,
    );
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
}

/// The JSON value of a matrix.
fn json_of(m: &Array2<f64>) -> Value {
    serde_json::to_value(m.outer_iter().map(|r| r.to_vec()).collect::<Vec<_>>()).unwrap()
}

/// A backward sheet (issue 31): the key's own solution, handed in, gets full marks; each
/// backward mistake planted in it (softmax's Jacobian without its second term, a transposed
/// product, the 1/sqrt(d_k) forgotten) is named, the later steps carried forward.
#[test]
fn each_planted_backward_mistake_is_named() {
    for options in [&["--backward"][..], &["--backward", "--causal"][..]] {
        let dir = temp_dir(&format!("backward-{}", options.len()));
        let class = make_class(&dir, "id\nann\n", "backward secret", options);
        let (key, json) = read_key(&class.join("keys/ann.json"));
        let mut right = json["solution"].clone();
        right["student"] = Value::from("ann");
        std::fs::write(dir.join("ann.json"), right.to_string()).unwrap();
        let r = grade(&dir, "class/keys", &["ann.json"]);
        assert_eq!(r.status, 0, "{}", r.stderr);
        let marks = row(&dir, "ann");
        // 14 forward matrices; dW_O, 2 dZ_i, 2 x (dA, dS), 2 x (dQ, dK, dV, 3 dW).
        assert_eq!(
            (marks["total"].as_str(), marks["max"].as_str()),
            ("33", "33")
        );
        assert_eq!((marks["e"].as_str(), marks["g2"].as_str()), ("3", "6"));

        let head = |h: usize, name: &str| matrix(&right["backward"]["heads"][h][name]);
        let forward = |h: usize, name: &str| matrix(&right["heads"][h][name]);
        let sqrt_dk = (forward(0, "k").ncols() as f64).sqrt();
        // (matrix to replace, its new value, later matrices redone from it, code, words)
        type Plant = (usize, &'static str, Array2<f64>, &'static str, &'static str);
        let plants: Vec<Plant> = vec![
            (
                0,
                "dscores",
                forward(0, "weights") * head(0, "dweights"),
                "dS_1:jacobian-diagonal",
                "Jacobian lost its second term",
            ),
            (
                1,
                "dweights",
                forward(1, "v").dot(&head(1, "dz").t()),
                "dA_2:transposed",
                "V dZ^T instead of dZ V^T",
            ),
            (
                0,
                "dq",
                head(0, "dscores").dot(&forward(0, "k")),
                "dQ_1:backward-no-sqrt-dk",
                "forgot the 1/sqrt(d_k)",
            ),
            (
                1,
                "dwq",
                head(1, "dq").t().dot(&key.x),
                "dW_Q^(2):transposed",
                "dQ^T X instead of X^T dQ",
            ),
        ];
        for (h, name, value, code, words) in plants {
            let mut planted = right.clone();
            planted["backward"]["heads"][h][name] = json_of(&value);
            if name == "dscores" {
                // Every later step done right on the wrong dS: carried forward.
                let dq = value.dot(&forward(h, "k")) / sqrt_dk;
                let dk = value.t().dot(&forward(h, "q")) / sqrt_dk;
                planted["backward"]["heads"][h]["dq"] = json_of(&dq);
                planted["backward"]["heads"][h]["dk"] = json_of(&dk);
                planted["backward"]["heads"][h]["dwq"] = json_of(&key.x.t().dot(&dq));
                planted["backward"]["heads"][h]["dwk"] = json_of(&key.x.t().dot(&dk));
            }
            std::fs::write(dir.join("ann.json"), planted.to_string()).unwrap();
            let r = grade(&dir, "class/keys", &["ann.json"]);
            assert_eq!(r.status, 0, "{code}: {}", r.stderr);
            let marks = row(&dir, "ann");
            assert_eq!(marks["mistakes"], code, "{options:?}");
            let feedback = std::fs::read_to_string(dir.join("marks/feedback/ann.txt")).unwrap();
            assert!(feedback.contains(words), "{code}: {feedback}");
            if name == "dscores" {
                assert!(feedback.contains("carried forward"), "{feedback}");
                // dS_1 0; dQ_1, dK_1, dW_Q^(1), dW_K^(1) half each.
                assert_eq!(marks["total"], "30", "{marks:?}");
            } else {
                assert_eq!(marks["total"], "32", "{marks:?}");
            }
        }
        // A backward sheet's submission without its backward pass is not graded.
        let mut missing = right.clone();
        missing.as_object_mut().unwrap().remove("backward");
        std::fs::write(dir.join("ann.json"), missing.to_string()).unwrap();
        let r = grade(&dir, "class/keys", &["ann.json"]);
        assert_eq!(r.status, 1, "{}", r.stderr);
        assert!(r.stderr.contains("\"backward\" is missing"), "{}", r.stderr);
    }
}

/// A backward key whose G does not fit its sheet's output is one line naming "g", once, not
/// a misleading `--dz` error for every submission.
#[test]
fn a_backward_key_with_a_misshapen_g_is_named_once() {
    let dir = temp_dir("backward-bad-g");
    let class = make_class(&dir, "id\nann\n", "backward secret", &["--backward"]);
    let path = class.join("keys/ann.json");
    let mut json: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    json["g"] = serde_json::json!([[1.0, 2.0]]);
    std::fs::write(&path, json.to_string()).unwrap();
    let mut answer = json["solution"].clone();
    answer["student"] = Value::from("ann");
    std::fs::write(dir.join("ann.json"), answer.to_string()).unwrap();
    let r = grade(&dir, "class/keys/ann.json", &["ann.json"]);
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("\"g\" is 1x2"), "{}", r.stderr);
    assert!(!r.stderr.contains("--dz"), "{}", r.stderr);
}
