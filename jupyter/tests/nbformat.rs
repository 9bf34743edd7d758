//! The replay's writer writes notebooks as JupyterLab saves them (issue 33: opening a notebook
//! must not change it): byte for byte what nbformat writes.

use attention_lab_jupyter::replay::notebook::Notebook;
use std::path::Path;

/// The first line where `got` and `want` differ, both sides, for a short failure message.
fn first_difference(got: &str, want: &str) -> String {
    let (mut g, mut w) = (got.lines(), want.lines());
    for line in 1.. {
        match (g.next(), w.next()) {
            (None, None) => break,
            (a, b) if a == b => continue,
            (a, b) => return format!("line {line}: wrote {a:?}, expected {b:?}"),
        }
    }
    "same lines, different line ends".into()
}

/// `tests/nbformat/input.ipynb` (texts as strings and as lists, Python's line ends, transient
/// fields, floats, escapes, every MIME kind) written by the writer equals `golden.ipynb`,
/// which nbformat wrote from it (`scripts/nbformat_golden.py`).
#[test]
fn the_writer_writes_what_nbformat_writes() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/nbformat");
    let input = std::fs::read_to_string(dir.join("input.ipynb")).unwrap();
    let golden = std::fs::read_to_string(dir.join("golden.ipynb")).unwrap();
    let written = Notebook::parse(&input).unwrap().to_jupyter_json();
    assert!(written == golden, "{}", first_difference(&written, &golden));
    // And what it wrote, read back, is written again unchanged.
    let again = Notebook::parse(&written).unwrap().to_jupyter_json();
    assert!(again == golden, "{}", first_difference(&again, &golden));
}
