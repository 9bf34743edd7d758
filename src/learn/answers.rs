//! A student's answers to an exercise sheet, as the JSON file `attention-lab grade` marks.
//!
//! The layout is `solve --json`'s, with the student's id first:
//! `{"student": ID, "heads": [{"q", "k", "v", "scores", "weights", "z"}, ...], "concat",
//! "output"}`. Numbers are written with Rust's shortest round-trip digits; NaN and the
//! infinities, which JSON cannot hold, as the strings `"NaN"`, `"Infinity"`, `"-Infinity"`.
//! The file itself is written by `attention_lab_io::write_answers` (atomically), or by
//! `std::fs::write` from a notebook.
//!
//! The layout's owner is `attention_lab_classroom::answers`: its typed struct, the writer of
//! `solve --json` and the keys, and `grade`'s reader by field names. This writer stays here,
//! by hand, so that a notebook's first cell compiles no JSON library; the classroom's tests
//! read its files back bit for bit and compare its bytes with the owner's. They differ only
//! in numbers from 1e-5 to 1e-4, which `{:?}` writes as `1.5e-5` and serde_json as `0.000015`.

use ndarray::Array2;

use crate::layers::heads::MultiHeadOutput;

/// The answers file for `student`: every intermediate of `out`, in `solve --json`'s layout.
///
/// ```
/// use attention_lab::prelude::*;
///
/// let w = Array2::<f64>::eye(2);
/// let layer = MultiHead::split(&w, &w, &w, 1, Some(w.clone()))?;
/// let out = layer.forward(&array![[1.0, 0.0], [0.0, 1.0]], &Attend::new())?;
/// let json = answers_json("ada", &out);
/// assert!(json.starts_with(r#"{"student": "ada", "heads": [{"q": [[1.0, 0.0], [0.0, 1.0]]"#));
/// # Ok::<(), AttentionError>(())
/// ```
pub fn answers_json(student: &str, out: &MultiHeadOutput) -> String {
    let heads: Vec<String> = out
        .heads
        .iter()
        .map(|h| {
            let fields = [
                ("q", &h.q),
                ("k", &h.k),
                ("v", &h.v),
                ("scores", &h.scores),
                ("weights", &h.weights),
                ("z", &h.z),
            ];
            let fields: Vec<String> = fields
                .iter()
                .map(|(name, m)| format!("\"{name}\": {}", matrix(m)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        })
        .collect();
    format!(
        "{{\"student\": {}, \"heads\": [{}], \"concat\": {}, \"output\": {}}}\n",
        string(student),
        heads.join(", "),
        matrix(&out.concat),
        matrix(out.result())
    )
}

/// `[[1.0, 2.5], [3.0, 4.0]]`.
fn matrix(m: &Array2<f64>) -> String {
    let rows: Vec<String> = m
        .rows()
        .into_iter()
        .map(|row| {
            let numbers: Vec<String> = row.iter().map(|&x| number(x)).collect();
            format!("[{}]", numbers.join(", "))
        })
        .collect();
    format!("[{}]", rows.join(", "))
}

/// Rust's `{:?}` is the shortest text that reads back as the same f64, and valid JSON.
fn number(x: f64) -> String {
    if x.is_nan() {
        "\"NaN\"".into()
    } else if x.is_infinite() {
        if x > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        }
        .into()
    } else {
        format!("{x:?}")
    }
}

/// A JSON string literal.
fn string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_back_exactly() {
        for x in [0.1, 1.0 / 3.0, 1e-300, 1.5e20, -0.0, 123456.789] {
            assert_eq!(number(x).parse::<f64>().unwrap().to_bits(), x.to_bits());
        }
        assert_eq!(number(f64::NAN), "\"NaN\"");
        assert_eq!(number(f64::NEG_INFINITY), "\"-Infinity\"");
        assert_eq!(string("a\"b\\\n"), "\"a\\\"b\\\\\\u000a\"");
    }
}
