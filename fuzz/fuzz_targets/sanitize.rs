//! The nbval sanitize-file parser on any text, then its rules applied to an output: rules or
//! one error, and applying them never panics.
#![no_main]

use attention_lab_jupyter::replay::compare::{parse_sanitize, CompareOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (&str, &str)| {
    let (file, output) = input;
    let Ok(sanitizers) = parse_sanitize(file) else {
        return;
    };
    let options = CompareOptions {
        compare_html: false,
        sanitizers,
    };
    let stream = serde_json::json!({"output_type": "stream", "name": "stdout", "text": output});
    options.normalize(&[stream]);
});
