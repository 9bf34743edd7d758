//! replay's depth check on any cell text: an answer (a depth, or a notebook refused in one
//! line) in bounded time, never a stack overflow; and code it lets through (no deeper than
//! MAX_DEPTH) parses on the fuzzer's own thread, as the engines then parse it.
#![no_main]

use attention_lab_jupyter::replay::depth::{check, nesting, MAX_DEPTH};
use attention_lab_jupyter::replay::notebook::Notebook;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|code: &str| {
    let Ok(depth) = nesting(code) else {
        return;
    };
    let cell = serde_json::json!({"cell_type": "code", "execution_count": null, "metadata": {},
        "outputs": [], "source": code});
    let text = serde_json::json!({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
    let notebook = Notebook::parse(&text.to_string()).expect("a one-cell notebook");
    assert_eq!(check(&notebook).is_ok(), depth <= MAX_DEPTH, "depth {depth}");
});
