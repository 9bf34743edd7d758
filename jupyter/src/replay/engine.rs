//! The one seam between the loops that drive cells and the engines that run them: a
//! [`Session`] runs one code cell at a time and answers with typed outputs ([`CellRun`]), so
//! the replay loop never knows whether evcxr compiled that cell alone or the batch engine
//! compiled the whole notebook as one program, and the Jupyter kernel's protocol side
//! ([`crate::kernel::server`]) never knows evcxr at all: it also asks a session to complete,
//! inspect and interrupt, as ipykernel asks `do_complete`, `do_inspect`. Outputs stay typed
//! until a notebook is compared or written, or a kernel publishes them;
//! [`Output::to_nbformat`] and [`Output::to_message`] are the places that make JSON of them.

use super::notebook::split_lines;
use regex::Regex;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Which engine runs a notebook's cells.
///
/// ```
/// use attention_lab_jupyter::replay::engine::EngineKind;
/// assert_eq!(EngineKind::Batch.to_string(), "batch");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineKind {
    /// The whole notebook as one compiled program; falls back to evcxr when it cannot.
    Batch,
    /// One evcxr context, each cell compiled on its own (as the Jupyter kernel does).
    Evcxr,
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EngineKind::Batch => "batch",
            EngineKind::Evcxr => "evcxr",
        })
    }
}

/// One output of a cell, as evcxr_jupyter 0.22 would send it.
///
/// ```
/// use attention_lab_jupyter::replay::engine::Output;
/// let text = Output::Stream { stderr: false, text: "hi\n".into() };
/// assert_eq!(text.to_nbformat(None)["text"][0], "hi\n");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Stream text (each line of the child's output plus "\n"), stdout or stderr.
    Stream {
        /// Whether this is stderr (else stdout).
        stderr: bool,
        /// The text, lines ending in "\n".
        text: String,
    },
    /// An `execute_result`: MIME type to content (JSON types are parsed when written).
    Result(BTreeMap<String, String>),
    /// An `error` output.
    Error {
        /// The error's message.
        evalue: String,
        /// Its traceback lines.
        traceback: Vec<String>,
    },
}

impl Output {
    /// An error output whose traceback is its message.
    ///
    /// ```
    /// use attention_lab_jupyter::replay::engine::Output;
    /// assert_eq!(Output::error("boom").to_nbformat(None)["evalue"], "boom");
    /// ```
    pub fn error(message: &str) -> Output {
        Output::Error {
            evalue: message.to_owned(),
            traceback: vec![message.to_owned()],
        }
    }

    /// The nbformat JSON of this output; `count` is the cell's execution count.
    ///
    /// ```
    /// use attention_lab_jupyter::replay::engine::Output;
    /// use std::collections::BTreeMap;
    /// let shown = Output::Result(BTreeMap::from([("text/plain".into(), "6".into())]));
    /// assert_eq!(shown.to_nbformat(Some(4))["execution_count"], 4);
    /// ```
    pub fn to_nbformat(&self, count: Option<u64>) -> Value {
        match self {
            Output::Stream { stderr, text } => serde_json::json!({
                "name": if *stderr { "stderr" } else { "stdout" },
                "output_type": "stream",
                "text": split_lines(text),
            }),
            Output::Result(data) => {
                let data: Map<String, Value> = data
                    .iter()
                    .map(|(mime, content)| (mime.clone(), mime_value(mime, content)))
                    .collect();
                serde_json::json!({
                    "data": data,
                    "execution_count": count.map(Value::from).unwrap_or(Value::Null),
                    "metadata": {},
                    "output_type": "execute_result",
                })
            }
            Output::Error { evalue, traceback } => serde_json::json!({
                "ename": "Error",
                "evalue": evalue,
                "output_type": "error",
                "traceback": traceback,
            }),
        }
    }

    /// The message that carries this output on Jupyter's wire (the kernel's): its type and
    /// content; `count` is the cell's execution count.
    ///
    /// ```
    /// use attention_lab_jupyter::replay::engine::Output;
    /// use std::collections::BTreeMap;
    /// let shown = Output::Result(BTreeMap::from([("text/plain".into(), "6\n7".into())]));
    /// let (kind, content) = shown.to_message(4);
    /// assert_eq!((kind, &content["data"]["text/plain"]), ("execute_result", &"6\n7".into()));
    /// ```
    pub fn to_message(&self, count: u64) -> (&'static str, Value) {
        match self {
            Output::Stream { stderr, text } => (
                "stream",
                serde_json::json!({"name": if *stderr { "stderr" } else { "stdout" }, "text": text}),
            ),
            Output::Result(data) => {
                let data: Map<String, Value> = data
                    .iter()
                    .map(|(mime, content)| {
                        let whole = || Value::String(content.clone());
                        (
                            mime.clone(),
                            parsed_json(mime, content).unwrap_or_else(whole),
                        )
                    })
                    .collect();
                let content =
                    serde_json::json!({"execution_count": count, "data": data, "metadata": {}});
                ("execute_result", content)
            }
            Output::Error { evalue, traceback } => (
                "error",
                serde_json::json!({"ename": "Error", "evalue": evalue, "traceback": traceback}),
            ),
        }
    }
}

/// The content of a JSON MIME type, parsed (as nbformat and Jupyter's messages keep it), or
/// None for another type or text that is not JSON.
fn parsed_json(mime: &str, content: &str) -> Option<Value> {
    mime.contains("json")
        .then(|| serde_json::from_str(content).ok())
        .flatten()
}

/// nbformat keeps JSON MIME types parsed, splits text ones into lines and leaves binary
/// (base64) ones whole.
fn mime_value(mime: &str, content: &str) -> Value {
    if mime.contains("json") {
        parsed_json(mime, content).unwrap_or_else(|| Value::String(content.to_owned()))
    } else if mime.starts_with("text/")
        || mime == "image/svg+xml"
        || mime == "application/javascript"
    {
        split_lines(content)
    } else {
        Value::String(content.to_owned())
    }
}

/// Adds stream lines as Jupyter does: consecutive lines of one stream form one output.
///
/// ```
/// use attention_lab_jupyter::replay::engine::{push_line, Output};
/// let mut outputs = Vec::new();
/// push_line(&mut outputs, false, "a");
/// push_line(&mut outputs, false, "b");
/// assert_eq!(outputs, [Output::Stream { stderr: false, text: "a\nb\n".into() }]);
/// ```
pub fn push_line(outputs: &mut Vec<Output>, stderr: bool, line: &str) {
    if let Some(Output::Stream { stderr: last, text }) = outputs.last_mut() {
        if *last == stderr {
            text.push_str(line);
            text.push('\n');
            return;
        }
    }
    outputs.push(Output::Stream {
        stderr,
        text: format!("{line}\n"),
    });
}

/// Why a cell counts as having raised (nbval's sense).
///
/// ```
/// use attention_lab_jupyter::replay::engine::Raised;
/// let late = Raised::TimedOut("cell timed out after 2 s and was killed".into());
/// assert!(late.aborts() && !Raised::Compilation("mismatched types".into()).aborts());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Raised {
    /// Rust's panic line on stderr (evcxr catches the panic; the cell "succeeds").
    Panic(String),
    /// The first line of the first compile error.
    Compilation(String),
    /// Another evcxr error (first line).
    Error(String),
    /// The child process died (last line of evcxr's message).
    ChildDied(String),
    /// The cell ran past the timeout and was killed; the notebook stops here.
    TimedOut(String),
    /// The kernel cannot run this or any further cell of the notebook.
    Lost(String),
}

impl Raised {
    /// Whether the rest of the notebook cannot run (and so must not be written).
    pub fn aborts(&self) -> bool {
        matches!(self, Raised::TimedOut(_) | Raised::Lost(_))
    }
}

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Raised::Panic(line) => f.write_str(line),
            Raised::Compilation(first) => write!(f, "compilation failed: {first}"),
            Raised::Error(first) => write!(f, "error: {first}"),
            Raised::ChildDied(last) => write!(f, "kernel child process died: {last}"),
            Raised::TimedOut(message) | Raised::Lost(message) => f.write_str(message),
        }
    }
}

/// What running one cell gave.
///
/// ```
/// use attention_lab_jupyter::replay::engine::{CellRun, Output};
/// let run = CellRun { outputs: vec![Output::error("boom")], raised: None, seconds: 0.5 };
/// assert_eq!(run.outputs.len(), 1);
/// ```
#[derive(Debug, Clone)]
pub struct CellRun {
    /// The outputs, in order.
    pub outputs: Vec<Output>,
    /// Why the cell counts as having raised, if it does.
    pub raised: Option<Raised>,
    /// Seconds the cell took (evcxr: compile and run; batch: run only).
    pub seconds: f64,
}

/// One notebook's (or one kernel's) running engine.
///
/// ```
/// use attention_lab_jupyter::replay::engine::{CellRun, Output, Session};
/// /// Echoes each cell's code on stdout.
/// struct Echo;
/// impl Session for Echo {
///     fn run(&mut self, _position: usize, code: &str) -> CellRun {
///         let outputs = vec![Output::Stream { stderr: false, text: format!("{code}\n") }];
///         CellRun { outputs, raised: None, seconds: 0.0 }
///     }
///     fn lost(&self) -> Option<&str> {
///         None
///     }
///     fn shutdown(self: Box<Self>) {}
/// }
/// let mut session: Box<dyn Session> = Box::new(Echo);
/// assert_eq!(session.run(1, "1 + 1").outputs.len(), 1);
/// session.shutdown();
/// ```
pub trait Session {
    /// Runs (executes) the code cell at `position` (its index among all the notebook's cells;
    /// the kernel, which sees no notebook, passes the execution count), whose source is `code`.
    /// Cells come in order; nbval-skip cells never come.
    fn run(&mut self, position: usize, code: &str) -> CellRun;
    /// Why no further cell can run, if so.
    fn lost(&self) -> Option<&str>;
    /// Ends the session.
    fn shutdown(self: Box<Self>);
    /// The cells' libraries so far: how many were loaded from the compiled-cell cache and how
    /// many rustc compiled (`None`: the engine does not compile cell by cell).
    fn libraries(&self) -> Option<Libraries> {
        None
    }
    /// The completions of `code` at its `cursor`-th character (Jupyter counts code points);
    /// by default none.
    ///
    /// # Errors
    /// The engine's reason, which the kernel's reply names.
    fn complete(&mut self, _code: &str, cursor: usize) -> Result<Completions, String> {
        Ok(Completions {
            start: cursor,
            end: cursor,
            items: Vec::new(),
        })
    }
    /// What is known of the name at the `cursor`-th character of `code`, by MIME type (as
    /// [`Output::Result`]); `None` (the default) when nothing is.
    fn inspect(&mut self, _code: &str, _cursor: usize) -> Option<BTreeMap<String, String>> {
        None
    }
    /// Stops the running cell when called, from any thread: Jupyter's interrupt comes on the
    /// control channel while the shell's thread is in [`Session::run`]. The kernel calls it
    /// before it exits too, so that no process of the engine outlives it. By default it does
    /// nothing.
    fn interrupter(&self) -> Interrupt {
        Arc::new(|| {})
    }
}

/// Stops a session's running cell from another thread ([`Session::interrupter`]).
pub type Interrupt = Arc<dyn Fn() + Send + Sync>;

/// Where an engine passes a cell's outputs while it runs, for a kernel that publishes each at
/// once (a cell's lines of stdout while it trains); an engine given one leaves what it
/// passed out of its [`CellRun`].
///
/// ```
/// use attention_lab_jupyter::replay::engine::{Live, Output};
/// use std::sync::{Arc, Mutex};
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let keep = seen.clone();
/// let live: Live = Arc::new(move |output| keep.lock().unwrap().push(output));
/// live(Output::Stream { stderr: false, text: "epoch 1\n".into() });
/// assert_eq!(seen.lock().unwrap().len(), 1);
/// ```
pub type Live = Arc<dyn Fn(Output) + Send + Sync>;

/// What completing a cell's code finds: candidates for its characters `start..end`
/// (counted in code points, as Jupyter counts them).
///
/// ```
/// use attention_lab_jupyter::replay::engine::{Completion, Completions};
/// let item = Completion { code: "len()".into(), label: "len".into(), kind: "method".into() };
/// let found = Completions { start: 2, end: 4, items: vec![item] };
/// assert_eq!(found.items[0].code, "len()");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completions {
    /// The first character that a candidate replaces.
    pub start: usize,
    /// The character after the last one it replaces.
    pub end: usize,
    /// The candidates, best first.
    pub items: Vec<Completion>,
}

/// One completion candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The text that goes into the cell.
    pub code: String,
    /// What the menu shows.
    pub label: String,
    /// Its kind (function, module, ...), as the engine names it.
    pub kind: String,
}

/// How many of a cell's (or a session's) compiled libraries came from the compiled-cell cache
/// and how many rustc made; evcxr may compile a cell more than once (fixing types, retrying).
///
/// ```
/// use attention_lab_jupyter::replay::engine::Libraries;
/// let before = Libraries { loaded: 2, compiled: 1 };
/// let after = Libraries { loaded: 3, compiled: 1 };
/// assert_eq!(after - before, Libraries { loaded: 1, compiled: 0 });
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Libraries {
    /// Loaded from the cache.
    pub loaded: usize,
    /// Compiled by rustc.
    pub compiled: usize,
}

impl std::ops::Sub for Libraries {
    type Output = Libraries;
    fn sub(self, earlier: Libraries) -> Libraries {
        Libraries {
            loaded: self.loaded.saturating_sub(earlier.loaded),
            compiled: self.compiled.saturating_sub(earlier.compiled),
        }
    }
}

impl std::ops::AddAssign for Libraries {
    fn add_assign(&mut self, more: Libraries) {
        self.loaded += more.loaded;
        self.compiled += more.compiled;
    }
}

/// Kernel settings that apply to every notebook.
///
/// ```
/// use attention_lab_jupyter::replay::engine::KernelOptions;
/// let kernel = KernelOptions { timeout: std::time::Duration::from_secs(60), cache_mib: 500 };
/// assert_eq!(kernel.cache_mib, 500);
/// ```
#[derive(Debug, Clone)]
pub struct KernelOptions {
    /// A cell (and kernel start-up) running longer than this is killed.
    pub timeout: Duration,
    /// evcxr `:cache` size in MiB; 0 leaves caching off.
    pub cache_mib: u64,
}

/// The first non-empty line of `text`, trimmed: an error's headline.
// Used by the engines, which come with evcxr.
#[cfg_attr(not(feature = "evcxr"), allow(dead_code))]
pub(crate) fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("")
        .to_owned()
}

/// Rust's panic message: "thread 'main' panicked at ..." (newer toolchains
/// add the thread id: "thread '<unnamed>' (1234) panicked at ...").
// Used by the engines, which come with evcxr.
#[cfg_attr(not(feature = "evcxr"), allow(dead_code))]
pub(crate) fn panic_line() -> &'static Regex {
    static PANIC: OnceLock<Regex> = OnceLock::new();
    PANIC.get_or_init(|| {
        Regex::new(r"(?m)^thread '[^']*'(?: \(\d+\))? panicked at .*$")
            .expect("a constant, valid pattern")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_one_stream_merge_and_a_switch_starts_a_new_output() {
        let mut outputs = Vec::new();
        push_line(&mut outputs, false, "a");
        push_line(&mut outputs, false, "b");
        push_line(&mut outputs, true, "c");
        push_line(&mut outputs, false, "d");
        let json: Vec<Value> = outputs.iter().map(|o| o.to_nbformat(None)).collect();
        assert_eq!(json[0]["text"], serde_json::json!(["a\n", "b\n"]));
        assert_eq!(json[1]["name"], "stderr");
        assert_eq!(json[2]["text"], serde_json::json!(["d\n"]));
    }

    #[test]
    fn results_parse_json_split_text_and_keep_base64_whole() {
        let data = BTreeMap::from([
            ("application/json".to_owned(), "{\"a\": 1}".to_owned()),
            ("text/html".to_owned(), "<b>\nx</b>".to_owned()),
            ("image/png".to_owned(), "iVBO\nRw0".to_owned()),
        ]);
        let json = Output::Result(data).to_nbformat(Some(3));
        assert_eq!(json["data"]["application/json"]["a"], 1);
        assert_eq!(
            json["data"]["text/html"],
            serde_json::json!(["<b>\n", "x</b>"])
        );
        assert_eq!(json["data"]["image/png"], "iVBO\nRw0");
        assert_eq!(json["execution_count"], 3);
    }
}
