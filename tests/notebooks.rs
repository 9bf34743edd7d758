//! The seed notebooks' stored outputs are NumPy's text: for each notebook, the stdout of its
//! code cells (those not tagged `beyond-numpy`, which go past what the document prints) joined
//! in order equals NumPy's transcript in tests/data/transcripts/ byte for byte. The replay
//! checker (`attention-lab replay`) then proves the Rust cells still print what is stored.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::path::{Path, PathBuf};

use serde_json::Value;

fn notebooks() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("notebooks");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ipynb"))
        .collect();
    found.sort();
    found
}

/// A notebook field that nbformat stores as a string or a list of strings.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}

fn tags(cell: &Value) -> Vec<String> {
    serde_json::from_value(cell["metadata"]["tags"].clone()).unwrap_or_default()
}

fn load(path: &Path) -> Value {
    let raw = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&raw).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The seed documents' notebooks; later notebooks (007, ...) go beyond the seeds and have no
/// NumPy transcript.
const SEEDS: [&str; 5] = ["000", "001", "002", "003", "004"];

fn number(path: &Path) -> String {
    path.file_name().unwrap().to_string_lossy()[..3].to_string()
}

#[test]
fn every_seed_has_a_notebook() {
    let names: Vec<String> = notebooks().iter().map(|p| number(p)).collect();
    for seed in SEEDS {
        assert!(
            names.iter().any(|n| n == seed),
            "no notebook {seed}: {names:?}"
        );
    }
}

#[test]
fn stored_outputs_are_numpys_text() {
    for path in notebooks() {
        let seed = &number(&path);
        if !SEEDS.contains(&seed.as_str()) {
            continue;
        }
        let transcript = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("tests/data/transcripts/{seed}.txt"));
        let numpy = std::fs::read_to_string(&transcript)
            .unwrap_or_else(|e| panic!("{}: {e}", transcript.display()));
        let nb = load(&path);
        let mut stored = String::new();
        for cell in nb["cells"].as_array().unwrap() {
            if cell["cell_type"] != "code" || tags(cell).iter().any(|t| t == "beyond-numpy") {
                continue;
            }
            for out in cell["outputs"].as_array().unwrap() {
                if out["output_type"] == "stream" && out["name"] == "stdout" {
                    stored.push_str(&text(&out["text"]));
                }
            }
        }
        assert!(
            stored == numpy,
            "{}: stored outputs differ from NumPy's {}\n--- stored\n{stored}\n--- NumPy\n{numpy}",
            path.display(),
            transcript.display()
        );
    }
}

#[test]
fn notebooks_are_evcxr_notebooks_that_load_the_crate_first() {
    for path in notebooks() {
        let nb = load(&path);
        // The project's kernel, as JupyterLab writes it once that kernel runs the notebook (in
        // `lab`, the hub, nbval): opening one changes nothing. evcxr_jupyter's "rust" kernel
        // runs them too, picked in JupyterLab's kernel dialog.
        let spec = &nb["metadata"]["kernelspec"];
        assert_eq!(
            spec,
            &serde_json::json!({"display_name": "Rust (attention-lab)", "language": "Rust", "name": "attention-lab-rust"}),
            "{}",
            path.display()
        );
        let cells = nb["cells"].as_array().unwrap();
        let first_code = cells.iter().find(|c| c["cell_type"] == "code").unwrap();
        // Notebooks that draw, or open the real model, also load those companion crates there,
        // before any variable exists: evcxr forgets the variables when a dependency is added
        // later.
        let first = text(&first_code["source"]);
        let mut deps = first.lines();
        // The library with its default features (what every student's kernel preloads), or
        // with `learn` (the decoder and the backward passes, lessons 009 and 010): one more
        // build of it, shared by both lessons.
        let library = deps.next();
        assert!(
            [
                Some(":dep attention-lab = { path = \"..\" }"),
                Some(":dep attention-lab = { path = \"..\", features = [\"learn\"] }"),
            ]
            .contains(&library),
            "{}: {library:?}",
            path.display()
        );
        assert!(
            deps.all(|line| [
                ":dep attention-lab-model = { path = \"../model\" }",
                ":dep attention-lab-plot = { path = \"../plot\" }"
            ]
            .contains(&line)),
            "{}: {first}",
            path.display()
        );
        for cell in cells.iter().filter(|c| c["cell_type"] == "code") {
            let errors = cell["outputs"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|o| o["output_type"] == "error")
                .count();
            assert_eq!(
                errors,
                0,
                "{}: a stored error in cell {}",
                path.display(),
                cell["id"]
            );
        }
    }
}

/// Every code cell that stores outputs has an execution count, numbered 1, 2, ... as a Run
/// All in Jupyter leaves them: nbval treats a null count with outputs as an unrun cell and
/// fails it.
#[test]
fn code_cells_are_numbered_as_after_run_all() {
    for path in notebooks() {
        let nb = load(&path);
        let code = nb["cells"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["cell_type"] == "code");
        for (i, cell) in code.enumerate() {
            assert_eq!(
                cell["execution_count"].as_u64(),
                Some(i as u64 + 1),
                "{}: code cell {} of {}",
                path.display(),
                i + 1,
                text(&cell["source"]).lines().next().unwrap_or("")
            );
        }
    }
}
