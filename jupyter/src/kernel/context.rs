//! evcxr's `CommandContext` as the kernel's engine: a [`Session`] whose cells' lines of
//! stdout and stderr go out as they come ([`Live`]), and which completes and inspects through
//! evcxr's rust-analyzer.

use crate::replay::engine::{CellRun, Completion, Completions, Interrupt, Live, Output, Session};
use attention_lab_io::error::{warn, Result};
use attention_lab_io::problem;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Asks the output thread to pass on every line evcxr has passed on so far.
type Flush = crossbeam_channel::Sender<crossbeam_channel::Sender<()>>;

/// One evcxr context, serving a kernel ([`start`]).
struct Context {
    context: evcxr::CommandContext,
    flush: Flush,
}

/// Starts evcxr (and its `:load_config`) as the kernel's engine; the cells' lines go to
/// `live` as they come.
///
/// ```no_run
/// use attention_lab_jupyter::kernel::{context, server};
/// server::serve(std::path::Path::new("kernel-1.json"), context::start)?;
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
///
/// # Errors
/// evcxr cannot start.
pub fn start(live: Live) -> Result<Box<dyn Session>> {
    let (mut context, outputs) =
        evcxr::CommandContext::new().map_err(|e| problem!("evcxr: {e}"))?;
    let flush = spawn_outputs(live, outputs);
    if let Err(error) = context.execute(":load_config") {
        warn(&format!("attention-lab kernel: :load_config: {error}"));
    }
    Ok(Box::new(Context { context, flush }))
}

impl Session for Context {
    fn run(&mut self, _count: usize, code: &str) -> CellRun {
        let started = Instant::now();
        let result = self.context.execute(code);
        let seconds = started.elapsed().as_secs_f64();
        // Every line the cell printed goes out before its result and reply.
        let (done, wait) = crossbeam_channel::bounded(1);
        if self.flush.send(done).is_ok() {
            let _ = wait.recv_timeout(Duration::from_secs(5));
        }
        // The outputs of the cell's result as replay's evcxr engine records them (its lines
        // went out live): one piece of code for both.
        let (outputs, raised) = crate::cell::outcome(Vec::new(), result);
        CellRun {
            outputs,
            raised,
            seconds,
        }
    }

    /// evcxr starts a new child when the last one died: a kernel is never lost.
    fn lost(&self) -> Option<&str> {
        None
    }

    fn shutdown(self: Box<Self>) {}

    fn complete(&mut self, code: &str, cursor: usize) -> std::result::Result<Completions, String> {
        let found = self
            .context
            .completions(code, byte_offset(code, cursor))
            .map_err(|error| error.to_string())?;
        let items = found
            .completions
            .into_iter()
            .map(|c| Completion {
                code: c.code,
                label: c.label,
                kind: c.kind.to_owned(),
            })
            .collect();
        Ok(Completions {
            start: char_offset(code, found.start_offset),
            end: char_offset(code, found.end_offset),
            items,
        })
    }

    fn inspect(&mut self, code: &str, cursor: usize) -> Option<BTreeMap<String, String>> {
        let (plain, html) = self
            .context
            .hover_at(code, byte_offset(code, cursor))
            .ok()
            .filter(|(plain, _)| plain != "No documentation found")?;
        Some(BTreeMap::from([
            ("text/plain".to_owned(), plain),
            ("text/html".to_owned(), html),
        ]))
    }

    /// Ends evcxr's child, which runs the cells: the cell ends (and, as in evcxr's own
    /// kernel, the variables; the next cell starts a new child).
    fn interrupter(&self) -> Interrupt {
        crate::cell::interrupter(self.context.process_handle())
    }
}

/// Passes the cells' stdout and stderr lines to `live` as they come, as stream outputs.
fn spawn_outputs(live: Live, outputs: evcxr::EvalContextOutputs) -> Flush {
    let (flush, flushes) = crossbeam_channel::unbounded::<crossbeam_channel::Sender<()>>();
    let _ = std::thread::Builder::new()
        .name("outputs".into())
        .spawn(move || {
            let streams = [(false, outputs.stdout), (true, outputs.stderr)];
            let pass = |stderr: bool, line: String| {
                live(Output::Stream {
                    stderr,
                    text: format!("{line}\n"),
                })
            };
            loop {
                let mut select = crossbeam_channel::Select::new();
                for (_, receiver) in &streams {
                    select.recv(receiver);
                }
                let flush_at = select.recv(&flushes);
                let op = select.select();
                let index = op.index();
                if index == flush_at {
                    let Ok(done) = op.recv(&flushes) else { return };
                    for (stderr, receiver) in &streams {
                        while let Ok(line) = receiver.try_recv() {
                            pass(*stderr, line);
                        }
                    }
                    let _ = done.send(());
                    continue;
                }
                let (stderr, receiver) = &streams[index];
                match op.recv(receiver) {
                    Ok(line) => pass(*stderr, line),
                    Err(_) => return,
                }
            }
        });
    flush
}

/// The byte offset of the `cursor`-th character (Jupyter counts cursors in code points),
/// clamped to the end.
fn byte_offset(code: &str, cursor: usize) -> usize {
    code.char_indices()
        .nth(cursor)
        .map_or(code.len(), |(i, _)| i)
}

fn char_offset(code: &str, byte: usize) -> usize {
    code.get(..byte)
        .map_or(code.chars().count(), |head| head.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_count_code_points() {
        let code = "é = 1; x";
        assert_eq!(byte_offset(code, 0), 0);
        assert_eq!(byte_offset(code, 1), 2);
        assert_eq!(byte_offset(code, 100), code.len());
        assert_eq!(char_offset(code, 2), 1);
    }
}
