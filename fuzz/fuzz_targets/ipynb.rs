//! The .ipynb reader on any text: a notebook parses or is one error; one that parses is
//! written back as JSON that parses again to the same notebook.
#![no_main]

use attention_lab_jupyter::replay::notebook::Notebook;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let Ok(notebook) = Notebook::parse(text) else {
        return;
    };
    let written = notebook.to_jupyter_json();
    let again = Notebook::parse(&written).expect("what we write parses");
    assert_eq!(again.to_jupyter_json(), written, "writing is stable");
});
