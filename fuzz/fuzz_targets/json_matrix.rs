//! The inline-JSON matrix parser (`--x '[[1, 2], [3, 4]]'`) on any text: a matrix or one
//! error, and a matrix it accepts has the rows and values of the JSON it came from (numbers,
//! or the strings "NaN", "Infinity" and "-Infinity" that `solve --json` writes).
#![no_main]

use attention_lab_classroom::matrices::json_matrix;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let Ok(m) = json_matrix(text) else {
        return;
    };
    let json: serde_json::Value = serde_json::from_str(text).expect("accepted text is JSON");
    let rows = json.as_array().expect("a matrix is a list of rows");
    assert_eq!(rows.len(), m.nrows());
    for (i, row) in rows.iter().enumerate() {
        let row = row.as_array().expect("each row is a list");
        assert_eq!(row.len(), m.ncols());
        for (j, v) in row.iter().enumerate() {
            let want = v.as_f64().unwrap_or_else(|| match v.as_str() {
                Some("NaN") => f64::NAN,
                Some("Infinity") => f64::INFINITY,
                Some("-Infinity") => f64::NEG_INFINITY,
                _ => panic!("element [{i}][{j}] accepted but not a number: {v}"),
            });
            assert!(want == m[[i, j]] || (want.is_nan() && m[[i, j]].is_nan()));
        }
    }
});
