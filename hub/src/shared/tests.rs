//! Unit tests of the shared store and the lessons' dependency lines.

use super::*;

/// Every lesson's `:dep` line of the library or the plot crate is one that kernels run
/// when they start, letter for letter (evcxr compares the text), or [`LEARN_DEP`].
#[test]
fn the_lessons_dep_lines_are_the_preloaded_ones() {
    let notebooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../notebooks");
    let mut seen = 0;
    for entry in fs::read_dir(notebooks).unwrap().flatten() {
        let text = fs::read_to_string(entry.path()).unwrap_or_default();
        let Ok(nb) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        for cell in nb["cells"].as_array().into_iter().flatten() {
            let source: String = match &cell["source"] {
                serde_json::Value::Array(lines) => {
                    lines.iter().filter_map(|l| l.as_str()).collect()
                }
                other => other.as_str().unwrap_or_default().to_owned(),
            };
            for line in source.lines() {
                let library = [":dep attention-lab =", ":dep attention-lab-plot ="];
                if library.iter().any(|start| line.starts_with(start)) {
                    assert!(
                        PRELOADED_DEPS.contains(&line) || line == LEARN_DEP,
                        "{}: {line}",
                        entry.path().display()
                    );
                    seen += 1;
                }
            }
        }
    }
    assert!(seen >= 9, "{seen} lines");
}

#[test]
fn deps_point_at_the_shared_sources() {
    let nb = r#"{"cells": [{"source": [":dep attention-lab = { path = \"..\" }\n", ":dep attention-lab-plot = { path = \"../plot\" }\n", "let x = 1;"]}]}"#;
    let (dir, repo, src) = (
        Path::new("/r/notebooks"),
        Path::new("/r"),
        Path::new("/srv/h/src"),
    );
    let out = point_deps(nb, dir, repo, src).unwrap();
    assert!(out.contains(r#"path = \"/srv/h/src\" }"#), "{out}");
    assert!(out.contains(r#"path = \"/srv/h/src/plot\" }"#), "{out}");
    assert!(out.contains("let x = 1;"));
    let outside = r#"{"cells": [{"source": [":dep x = { path = \"../../etc\" }"]}]}"#;
    assert!(point_deps(outside, dir, repo, src).is_err());
}
