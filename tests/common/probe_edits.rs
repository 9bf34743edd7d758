//! The edits of the probe goldens (scripts/probe_goldens.py) as `Edit`s: one reader for the
//! tests that check them (tests/probe.rs, model/tests/probe.rs).
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab::prelude::*;
use serde_json::Value;

/// A JSON count.
pub fn count(v: &Value) -> usize {
    v.as_u64().expect("a count") as usize
}

/// One edit as the goldens write it: `{"kind": "zero" | "mean" | "scale" | "patch", "layer",
/// "head", "factor"?, "position"?}` or `{"kind": "residual", "layer", "position"}`.
pub fn edit(e: &Value) -> Edit {
    let at = |key: &str| count(&e[key]);
    let edit = match e["kind"].as_str().unwrap() {
        "residual" => {
            return Edit::Residual {
                layer: at("layer"),
                position: at("position"),
            }
        }
        "zero" => HeadEdit::Zero,
        "mean" => HeadEdit::Mean,
        "scale" => HeadEdit::Scale(e["factor"].as_f64().expect("a factor")),
        "patch" => HeadEdit::Patch,
        kind => panic!("an edit of kind {kind}"),
    };
    Edit::Head {
        layer: at("layer"),
        head: at("head"),
        edit,
        position: e.get("position").map(count),
    }
}
