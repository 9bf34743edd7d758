//! The program's output split back into cells at the markers, each cell's streams, results and
//! time.

use super::Fallback;
use crate::replay::engine::{panic_line, push_line, CellRun, Output};
use regex::Regex;
use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use super::program::Program;
use super::run::Finished;
use super::MARK;

/// A stretch of the program's stdout or stderr: the text after one marker.
pub(super) struct Piece {
    /// The cell it belongs to (`None`: before the first marker, or after the end marker).
    pub(super) cell: Option<usize>,
    /// Nanoseconds since the program started, when the marker was printed.
    pub(super) nanos: u128,
    /// The end marker.
    pub(super) end: bool,
    /// The error marker (an error through `?`).
    pub(super) error: bool,
    pub(super) text: String,
}

/// Cuts output at the markers.
pub(super) fn pieces(bytes: &[u8]) -> Vec<Piece> {
    let text = String::from_utf8_lossy(bytes);
    let mut parts = text.split(MARK);
    let mut pieces = vec![Piece {
        cell: None,
        nanos: 0,
        end: false,
        error: false,
        text: parts.next().unwrap_or("").to_owned(),
    }];
    for part in parts {
        let (head, rest) = part.split_once('\n').unwrap_or((part, ""));
        let mut words = head.split(' ');
        let (kind, first, second) = (words.next(), words.next(), words.next());
        let nanos = |word: Option<&str>| word.and_then(|w| w.parse().ok()).unwrap_or(0);
        let piece = match kind {
            Some("cell") => Piece {
                cell: first.and_then(|p| p.parse().ok()),
                nanos: nanos(second),
                end: false,
                error: false,
                text: rest.to_owned(),
            },
            Some("end") => Piece {
                cell: None,
                nanos: nanos(first),
                end: true,
                error: false,
                text: rest.to_owned(),
            },
            _ => Piece {
                cell: None,
                nanos: 0,
                end: false,
                error: true,
                text: rest.to_owned(),
            },
        };
        // Text after an error marker is still the same cell's.
        if piece.error {
            if let Some(last) = pieces.last_mut() {
                last.error = true;
                last.text.push_str(&piece.text);
                continue;
            }
        }
        pieces.push(piece);
    }
    pieces.remove(0);
    pieces
}

/// One cell's outputs as evcxr reports them: stdout lines, except `EVCXR_BEGIN_CONTENT
/// mime` ... `EVCXR_END_CONTENT` blocks, which become the cell's result (a later block of one
/// MIME type replaces an earlier one); then stderr lines. (evcxr keeps the order in which
/// stdout and stderr lines arrive, which two pipes do not fix; replay compares each stream
/// on its own.)
pub(super) fn outputs(stdout: &str, stderr: &str) -> Vec<Output> {
    static CONTENT: OnceLock<Regex> = OnceLock::new();
    let content = CONTENT.get_or_init(|| {
        Regex::new("EVCXR_BEGIN_CONTENT ([^ ]+)").expect("a constant, valid pattern")
    });
    let mut outputs = Vec::new();
    let mut result = BTreeMap::new();
    let mut lines = stdout.lines();
    while let Some(line) = lines.next() {
        if let Some(found) = content.captures(line) {
            let body: Vec<&str> = lines
                .by_ref()
                .take_while(|line| *line != "EVCXR_END_CONTENT")
                .collect();
            result.insert(found[1].to_owned(), body.join("\n"));
        } else {
            push_line(&mut outputs, false, line);
        }
    }
    for line in stderr.lines() {
        push_line(&mut outputs, true, line);
    }
    if !result.is_empty() {
        outputs.push(Output::Result(result));
    }
    outputs
}

impl Program {
    /// The program's output, cut back into cells.
    pub(super) fn split(&self, run: &Finished) -> Result<HashMap<usize, CellRun>, Fallback> {
        let stdout = pieces(&run.stdout);
        let stderr = pieces(&run.stderr);
        let cell_name = |position: Option<usize>| {
            position.map_or("before the first cell".to_owned(), |p| {
                format!("cell {}", p + 1)
            })
        };
        let last = stdout.iter().rev().find_map(|piece| piece.cell);
        if stdout.iter().any(|piece| piece.error) {
            return Err(Fallback::Raised {
                place: cell_name(last),
                why: "returned an error through `?` (evcxr goes on with the next cell)".into(),
            });
        }
        if !run.status.success() {
            let text = String::from_utf8_lossy(&run.stderr);
            // The panic's message is the line after "thread 'main' panicked at FILE:LINE:",
            // whose place in the generated program would mean nothing to the reader.
            let why = panic_line()
                .find(&text)
                .map(|line| {
                    let message = text[line.end()..].lines().nth(1).unwrap_or(line.as_str());
                    format!("panicked: {message}")
                })
                .unwrap_or_else(|| format!("ended with {}", run.status));
            return Err(Fallback::Raised {
                place: cell_name(last),
                why,
            });
        }
        let expected: Vec<Option<usize>> = self.cells.iter().map(|c| Some(c.position)).collect();
        let order = |all: &[Piece]| -> Vec<Option<usize>> {
            all.iter().filter(|p| !p.end).map(|p| p.cell).collect()
        };
        let complete = |all: &[Piece]| all.last().is_some_and(|p| p.end);
        if order(&stdout) != expected
            || order(&stderr) != expected
            || !complete(&stdout)
            || !complete(&stderr)
        {
            return Err(Fallback::Split);
        }
        let mut runs = HashMap::new();
        for (index, (out, err)) in stdout.iter().zip(&stderr).enumerate() {
            let Some(position) = out.cell else { continue };
            let seconds = stdout.get(index + 1).map_or(0.0, |next| {
                next.nanos.saturating_sub(out.nanos) as f64 * 1e-9
            });
            runs.insert(
                position,
                CellRun {
                    outputs: outputs(&out.text, &err.text),
                    raised: None,
                    seconds,
                },
            );
        }
        Ok(runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_splits_at_the_markers_into_streams_and_results() {
        let stdout = format!(
            "{MARK}cell 1 100\nhi\nEVCXR_BEGIN_CONTENT text/html\n<b>\nx</b>\nEVCXR_END_CONTENT\n\
             {MARK}cell 3 400\npartial{MARK}end 1000\n"
        );
        let pieces = pieces(stdout.as_bytes());
        assert_eq!(pieces.len(), 3);
        assert_eq!((pieces[0].cell, pieces[0].nanos), (Some(1), 100));
        assert_eq!(pieces[1].text, "partial");
        assert!(pieces[2].end);
        let outputs = outputs(&pieces[0].text, "warn\n");
        assert_eq!(
            outputs,
            [
                Output::Stream {
                    stderr: false,
                    text: "hi\n".into()
                },
                Output::Stream {
                    stderr: true,
                    text: "warn\n".into()
                },
                Output::Result(BTreeMap::from([(
                    "text/html".to_owned(),
                    "<b>\nx</b>".to_owned()
                )])),
            ]
        );
    }
}
