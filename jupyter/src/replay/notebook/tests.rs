//! Unit tests of the notebook model: reading, rewriting as nbformat does, Python's floats.

use super::*;

const SAMPLE: &str = r##"{
 "cells": [
  {
   "cell_type": "code",
   "execution_count": null,
   "id": "a1",
   "metadata": {
    "tags": [
     "nbval-skip"
    ]
   },
   "outputs": [],
   "source": [
    "let x = 1;\n",
    "x"
   ]
  },
  {
   "cell_type": "markdown",
   "id": "m1",
   "metadata": {},
   "source": [
    "# Title é"
   ]
  }
 ],
 "metadata": {
  "kernelspec": {
   "display_name": "Rust",
   "language": "rust",
   "name": "rust"
  },
  "zzz_unknown": 1
 },
 "nbformat": 4,
 "nbformat_minor": 5,
 "zz_top_level_unknown": {
  "kept": true
 }
}
"##;

#[test]
fn round_trip_is_byte_identical() {
    let notebook = Notebook::parse(SAMPLE).unwrap();
    assert_eq!(notebook.to_jupyter_json(), SAMPLE);
    assert!(notebook.cells[0].has_tag("nbval-skip"));
    assert_eq!(notebook.cells[0].source.text(), "let x = 1;\nx");
}

proptest::proptest! {
    /// A number in the metadata reads back as the same f64, so writing is stable. Without
    /// serde_json's float_roundtrip, 5.2222222222222225e122 read back one bit off (fuzz).
    #[test]
    fn metadata_numbers_survive_rewriting(x in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO) {
        let text = SAMPLE.replace("\"zzz_unknown\": 1", &format!("\"zzz_unknown\": {x:e}"));
        let written = Notebook::parse(&text).unwrap().to_jupyter_json();
        let again = Notebook::parse(&written).unwrap();
        let read = again.metadata["zzz_unknown"].as_f64().unwrap();
        proptest::prop_assert_eq!(read.to_bits(), x.to_bits(), "{} in {}", x, written);
        proptest::prop_assert_eq!(again.to_jupyter_json(), written);
    }
}

#[test]
fn malformed_notebooks_have_precise_errors() {
    let error = Notebook::parse("{\"cells\": [").unwrap_err();
    assert!(error.to_string().starts_with("invalid JSON"), "{error}");
    let error = Notebook::parse("{\"cells\": [], \"nbformat\": 3}").unwrap_err();
    assert!(error.to_string().contains("nbformat 3"), "{error}");
    let error =
        Notebook::parse("{\"cells\": [{\"cell_type\": \"code\"}], \"nbformat\": 4}").unwrap_err();
    assert!(error.to_string().starts_with("cell 1:"), "{error}");
}

/// `text` with `from`, which must occur exactly once, replaced by `to`.
fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "{from:?} in {text}");
    text.replace(from, to)
}

/// What `replay --update` does to a cell (mod.rs `write_back`): its outputs and execution
/// count replaced, the notebook written with `to_jupyter_json`.
fn update(notebook: &mut Notebook, position: usize, outputs: Value, count: u64) -> String {
    let cell = &mut notebook.cells[position];
    cell.extra.insert("outputs".into(), outputs);
    cell.extra
        .insert("execution_count".into(), Value::from(count));
    notebook.to_jupyter_json()
}

/// Unknown keys at every level: top, cell, cell metadata, output, notebook metadata.
const UNKNOWN_KEYS: &str = r##"{
 "cells": [
  {
   "cell_type": "code",
   "execution_count": 2,
   "id": "c1",
   "metadata": {
    "x_cell_meta": [
     1,
     null
    ]
   },
   "outputs": [
    {
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "1\n"
     ],
     "x_output": {
      "kept": true
     }
    }
   ],
   "source": [
    "println!(\"1\");"
   ],
   "x_cell": "kept"
  },
  {
   "cell_type": "code",
   "execution_count": null,
   "id": "c2",
   "metadata": {},
   "outputs": [],
   "source": [
    "2"
   ],
   "x_cell": 2.5
  }
 ],
 "metadata": {
  "x_meta": {
   "a": "b"
  }
 },
 "nbformat": 4,
 "nbformat_minor": 5,
 "x_top": [
  "kept"
 ]
}
"##;

#[test]
fn unknown_keys_survive_round_trip_and_update() {
    let mut notebook = Notebook::parse(UNKNOWN_KEYS).unwrap();
    assert_eq!(notebook.to_jupyter_json(), UNKNOWN_KEYS);

    // --update of the second cell: everything else, unknown keys included, stays.
    let result = serde_json::json!([{
        "data": {"text/plain": ["2"]},
        "execution_count": 3,
        "metadata": {},
        "output_type": "execute_result",
    }]);
    let written = update(&mut notebook, 1, result, 3);
    let expected = replace_once(
        UNKNOWN_KEYS,
        "   \"execution_count\": null,\n   \"id\": \"c2\",\n   \"metadata\": {},\n   \"outputs\": [],\n",
        "   \"execution_count\": 3,\n   \"id\": \"c2\",\n   \"metadata\": {},\n   \"outputs\": [\n    {\n     \"data\": {\n      \"text/plain\": [\n       \"2\"\n      ]\n     },\n     \"execution_count\": 3,\n     \"metadata\": {},\n     \"output_type\": \"execute_result\"\n    }\n   ],\n",
    );
    assert_eq!(written, expected);

    // --update of the first cell itself: its keys and metadata stay; the output it
    // replaces goes with its keys, as when Jupyter re-runs a cell.
    let stream = serde_json::json!([{"name": "stdout", "output_type": "stream", "text": ["1\n"]}]);
    let written = update(&mut notebook, 0, stream, 2);
    let expected = replace_once(
        &expected,
        "     ],\n     \"x_output\": {\n      \"kept\": true\n     }\n",
        "     ]\n",
    );
    assert_eq!(written, expected);
}

#[test]
fn minor_4_notebook_without_ids_gets_no_ids() {
    const MINOR_4: &str = r##"{
 "cells": [
  {
   "cell_type": "code",
   "execution_count": null,
   "metadata": {},
   "outputs": [],
   "source": [
    "1"
   ]
  }
 ],
 "metadata": {},
 "nbformat": 4,
 "nbformat_minor": 4
}
"##;
    let mut notebook = Notebook::parse(MINOR_4).unwrap();
    assert_eq!(notebook.cells[0].id, None);
    assert_eq!(notebook.to_jupyter_json(), MINOR_4);
    let result = serde_json::json!([{
        "data": {"text/plain": ["1"]},
        "execution_count": 2,
        "metadata": {},
        "output_type": "execute_result",
    }]);
    let written = update(&mut notebook, 0, result, 2);
    let expected = replace_once(
        MINOR_4,
        "   \"execution_count\": null,\n   \"metadata\": {},\n   \"outputs\": [],\n",
        "   \"execution_count\": 2,\n   \"metadata\": {},\n   \"outputs\": [\n    {\n     \"data\": {\n      \"text/plain\": [\n       \"1\"\n      ]\n     },\n     \"execution_count\": 2,\n     \"metadata\": {},\n     \"output_type\": \"execute_result\"\n    }\n   ],\n",
    );
    assert_eq!(written, expected);
}

#[test]
fn execute_result_with_null_count_is_kept() {
    const NULL_COUNT: &str = r##"{
 "cells": [
  {
   "cell_type": "code",
   "execution_count": null,
   "id": "c1",
   "metadata": {},
   "outputs": [
    {
     "data": {
      "text/plain": [
       "3"
      ]
     },
     "execution_count": null,
     "metadata": {},
     "output_type": "execute_result"
    }
   ],
   "source": [
    "3"
   ]
  }
 ],
 "metadata": {},
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;
    let notebook = Notebook::parse(NULL_COUNT).unwrap();
    assert_eq!(notebook.cells[0].execution_count(), None);
    assert_eq!(
        notebook.cells[0].outputs()[0]["execution_count"],
        Value::Null
    );
    assert_eq!(notebook.to_jupyter_json(), NULL_COUNT);
}

/// nbformat splits a source held as one string into lines (an empty one into none), as
/// JupyterLab's save does: written once, such a notebook is then stable.
#[test]
fn string_source_is_split_as_nbformat_splits_it() {
    const STRING_SOURCE: &str = r##"{
 "cells": [
  {
   "cell_type": "code",
   "execution_count": null,
   "id": "c1",
   "metadata": {},
   "outputs": [],
   "source": "let a = 1;\na"
  },
  {
   "cell_type": "markdown",
   "id": "m1",
   "metadata": {},
   "source": ""
  }
 ],
 "metadata": {},
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;
    let mut notebook = Notebook::parse(STRING_SOURCE).unwrap();
    assert_eq!(
        notebook.cells[0].source,
        MultilineText::Joined("let a = 1;\na".into())
    );
    let split = replace_once(
        &replace_once(
            STRING_SOURCE,
            "\"source\": \"let a = 1;\\na\"",
            "\"source\": [\n    \"let a = 1;\\n\",\n    \"a\"\n   ]",
        ),
        "\"source\": \"\"",
        "\"source\": []",
    );
    assert_eq!(notebook.to_jupyter_json(), split);
    assert_eq!(Notebook::parse(&split).unwrap().to_jupyter_json(), split);
    let written = update(&mut notebook, 0, serde_json::json!([]), 2);
    let expected = replace_once(
        &split,
        "\"execution_count\": null,",
        "\"execution_count\": 2,",
    );
    assert_eq!(written, expected);
}

#[test]
fn escapes_are_written_as_jupyter_writes_them() {
    let notebook = Notebook::parse(
        r#"{"cells": [{"cell_type": "markdown", "metadata": {}, "source": "caf\u00e9 \/ \ud83d\ude00"}], "nbformat": 4}"#,
    )
    .unwrap();
    let written = notebook.to_jupyter_json();
    assert!(written.contains("\n    \"café / 😀\"\n"), "{written}");
    assert_eq!(
        Notebook::parse(&written).unwrap().to_jupyter_json(),
        written
    );
}

/// A documented limit: integers beyond 64 bits become f64 (no `arbitrary_precision`).
#[test]
fn big_integer_is_written_as_an_f64() {
    let notebook = Notebook::parse(
        r#"{"cells": [], "metadata": {"big": 123456789012345678901234567890, "max": 18446744073709551615, "neg": -12345678901234567890123}, "nbformat": 4, "nbformat_minor": 5}"#,
    )
    .unwrap();
    assert_eq!(
        notebook.to_jupyter_json(),
        r#"{
 "cells": [],
 "metadata": {
  "big": 1.2345678901234568e+29,
  "max": 18446744073709551615,
  "neg": -1.2345678901234568e+22
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"#
    );
}

/// A documented limit: a number beyond f64's range is a parse error, named in one line.
#[test]
fn number_out_of_f64_range_is_a_parse_error() {
    let error =
        Notebook::parse("{\"cells\": [],\n \"metadata\": {\"huge\": 1e400},\n \"nbformat\": 4}")
            .unwrap_err()
            .to_string();
    assert!(
        error.starts_with("invalid JSON: number out of range at line 2 column "),
        "{error}"
    );
    assert!(!error.contains('\n'), "{error}");
}

#[test]
fn split_lines_keeps_newlines() {
    assert_eq!(split_lines("a\nb\n"), serde_json::json!(["a\n", "b\n"]));
    assert_eq!(split_lines("a\nb"), serde_json::json!(["a\n", "b"]));
    assert_eq!(split_lines(""), serde_json::json!([]));
    // Python's line ends, each kept with its line.
    assert_eq!(
        split_lines("a\r\n\rb\x0bc\x0cd\x1ce\x1df\x1eg\u{85}h\u{2028}i\u{2029}j\tk"),
        serde_json::json!([
            "a\r\n",
            "\r",
            "b\x0b",
            "c\x0c",
            "d\x1c",
            "e\x1d",
            "f\x1e",
            "g\u{85}",
            "h\u{2028}",
            "i\u{2029}",
            "j\tk"
        ])
    );
}

/// nbformat's strip_transient: fields Jupyter never stores are not written.
#[test]
fn transient_fields_are_not_written() {
    let notebook = Notebook::parse(
        r#"{"cells": [{"cell_type": "markdown", "metadata": {"trusted": true, "k": 1}, "source": []}], "metadata": {"orig_nbformat": 3, "orig_nbformat_minor": 0, "signature": "sha256:0", "k": 2}, "nbformat": 4, "nbformat_minor": 5}"#,
    )
    .unwrap();
    let written: Value = serde_json::from_str(&notebook.to_jupyter_json()).unwrap();
    assert_eq!(written["metadata"], serde_json::json!({"k": 2}));
    assert_eq!(written["cells"][0]["metadata"], serde_json::json!({"k": 1}));
}
