//! What a cell's run gives: its outputs as Jupyter shows them, and how it failed. One piece of
//! code for the kernel ([`crate::kernel`], which publishes them) and replay (which compares
//! them), below both.

use crate::replay::engine::{first_line, panic_line, push_line, Interrupt, Output, Raised};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The typed outcome of a cell, mirroring evcxr_jupyter 0.22: each line becomes a stream
/// message `line + "\n"` (Jupyter merges consecutive messages of one stream), then an
/// `execute_result` holding `content_by_mime_type`, then a "Took Nms" HTML result when
/// `:timing` is on, or one `error` output per compilation error.
pub(crate) fn outcome(
    lines: Vec<(&'static str, String)>,
    result: Result<evcxr::EvalOutputs, evcxr::Error>,
) -> (Vec<Output>, Option<Raised>) {
    let mut outputs = Vec::new();
    // evcxr catches panics (the cell "succeeds" with the panic on stderr);
    // nbval-style checking must still treat them as raised.
    let mut raised = None;
    for (name, line) in &lines {
        let stderr = *name == "stderr";
        if stderr && raised.is_none() && panic_line().is_match(line) {
            raised = Some(Raised::Panic(line.clone()));
        }
        push_line(&mut outputs, stderr, line);
    }
    match result {
        Ok(eval) => {
            if !eval.is_empty() {
                outputs.push(Output::Result(
                    eval.content_by_mime_type.into_iter().collect(),
                ));
            }
            if let Some(duration) = eval.timing {
                outputs.push(Output::Result(BTreeMap::from([(
                    "text/html".to_owned(),
                    format!(
                        "<span style=\"color: rgba(0,0,0,0.4);\">Took {}ms</span>",
                        duration.as_millis()
                    ),
                )])));
            }
        }
        Err(evcxr::Error::CompilationErrors(errors)) => {
            for error in &errors {
                let mut traceback = Vec::new();
                if error.is_from_user_code() {
                    // The kernel shows this traceback too (kernel::server); replay never
                    // compares tracebacks.
                    for spanned in error.spanned_messages() {
                        traceback.extend(spanned.lines.iter().cloned());
                        match &spanned.span {
                            Some(span) => traceback.push(format!(
                                "{}{} {}",
                                " ".repeat(span.start_column.saturating_sub(1)),
                                "^".repeat(span.end_column.saturating_sub(span.start_column)),
                                spanned.label
                            )),
                            None => traceback.push(spanned.label.clone()),
                        }
                    }
                    for help in error.help() {
                        traceback.push(format!("help: {help}"));
                    }
                }
                traceback.push(error.message());
                outputs.push(Output::Error {
                    evalue: error.message(),
                    traceback,
                });
            }
            raised = Some(Raised::Compilation(
                errors
                    .first()
                    .map(|error| first_line(&error.message()))
                    .unwrap_or_default(),
            ));
        }
        Err(error) => {
            let text = error.to_string();
            outputs.push(Output::error(&text));
            raised = Some(match error {
                evcxr::Error::SubprocessTerminated(_) => Raised::ChildDied(last_line(&text)),
                _ => Raised::Error(first_line(&text)),
            });
        }
    }
    (outputs, raised)
}

fn last_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .rfind(|line| !line.is_empty())
        .unwrap_or("")
        .to_owned()
}

/// Interrupts a cell of evcxr by ending its child `process`, which runs the cells (as evcxr's
/// own kernel does; the next cell starts a new child). For the kernel and replay alike.
pub(crate) fn interrupter(process: Arc<Mutex<std::process::Child>>) -> Interrupt {
    Arc::new(move || {
        let _ = process.lock().unwrap_or_else(|e| e.into_inner()).kill();
    })
}
