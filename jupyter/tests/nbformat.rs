//! The replay's writer writes notebooks as JupyterLab saves them (issue 33: opening a notebook
//! must not change it): byte for byte what nbformat writes, and the project's notebooks stored
//! in that form, with the metadata the project's kernel gives them.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab_jupyter::kernel;
use attention_lab_jupyter::replay::notebook::Notebook;
use std::path::{Path, PathBuf};

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

fn notebooks() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../notebooks");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ipynb"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no notebooks in {}", dir.display());
    paths
}

/// Every notebook is stored as the writer writes it (so as JupyterLab saves it), and names the
/// project's kernel as JupyterLab writes it once that kernel runs (its kernelspec and the
/// language_info of its kernel_info_reply): JupyterLab has nothing to change on opening it.
#[test]
fn notebooks_are_stored_as_jupyterlab_saves_them() {
    for path in notebooks() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let notebook = Notebook::parse(&text).unwrap();
        let written = notebook.to_jupyter_json();
        assert!(
            written == text,
            "{name}: not as JupyterLab saves it: {}",
            first_difference(&written, &text)
        );
        assert_eq!(
            notebook.metadata.get("kernelspec"),
            Some(&kernel::notebook_kernelspec()),
            "{name}: JupyterLab would write the project kernel's kernelspec"
        );
        assert_eq!(
            notebook.metadata.get("language_info"),
            Some(&kernel::language_info()),
            "{name}: JupyterLab would write the kernel's language_info"
        );
    }
}
