//! The nbformat 4 notebook model: just enough structure to read sources, tags
//! and outputs, while every field we do not understand survives a rewrite.

use attention_lab_io::error::{Error, Result};
use attention_lab_io::problem;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A notebook file as nbformat 4 stores it. Unknown top-level fields are kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Notebook {
    /// The cells, in order.
    pub cells: Vec<Cell>,
    /// Notebook metadata (kernelspec, language_info, ...), kept verbatim.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Major format version; only 4 is supported.
    pub nbformat: u64,
    /// Minor format version.
    #[serde(default)]
    pub nbformat_minor: u64,
    /// Fields this tool does not know; written back unchanged.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One cell. `outputs` and `execution_count` stay in `extra` so that a code
/// cell's `"execution_count": null` is written back as null rather than lost.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    /// "code", "markdown" or "raw".
    pub cell_type: String,
    /// nbformat 4.5 cell id; absent in older files, so optional.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Cell metadata (tags, collapsed, ...), kept verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    /// The source, as one string or a list of lines.
    pub source: MultilineText,
    /// Everything else (outputs, execution_count, attachments, ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// nbformat's "multiline string": either a string or a list of strings that
/// are concatenated (each but the last normally ends in "\n").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MultilineText {
    /// The whole text as one string.
    Joined(String),
    /// The text split into lines.
    Lines(Vec<String>),
}

impl MultilineText {
    /// The text with list parts concatenated.
    pub fn text(&self) -> String {
        match self {
            MultilineText::Joined(text) => text.clone(),
            MultilineText::Lines(lines) => lines.concat(),
        }
    }
}

/// Splits text into lines that keep their ends, as nbformat writes them: Python's
/// `str.splitlines(True)`, whose line ends are "\n", "\r\n", "\r", and "\x0b", "\x0c",
/// "\x1c", "\x1d", "\x1e", "\u{85}", "\u{2028}", "\u{2029}".
///
/// ```
/// use attention_lab_jupyter::replay::notebook::split_lines;
/// assert_eq!(split_lines("a\r\nb\rc"), serde_json::json!(["a\r\n", "b\r", "c"]));
/// ```
pub fn split_lines(text: &str) -> Value {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let end = match c {
            '\r' if chars.peek().is_some_and(|&(_, next)| next == '\n') => {
                chars.next();
                at + 2
            }
            '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => at + c.len_utf8(),
            _ => continue,
        };
        lines.push(Value::String(text[start..end].to_owned()));
        start = end;
    }
    if start < text.len() {
        lines.push(Value::String(text[start..].to_owned()));
    }
    Value::Array(lines)
}

/// Joins a stored multiline value (string or list of strings) into one string.
pub fn join_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => parts
            .iter()
            .map(|part| part.as_str())
            .collect::<Option<Vec<_>>>()
            .map(|parts| parts.concat()),
        _ => None,
    }
}

impl Cell {
    /// Whether this cell is executed by the kernel.
    pub fn is_code(&self) -> bool {
        self.cell_type == "code"
    }

    /// The cell's nbval tags (`metadata.tags`).
    pub fn tags(&self) -> Vec<String> {
        self.metadata
            .as_ref()
            .and_then(|metadata| metadata.get("tags"))
            .and_then(Value::as_array)
            .map(|tags| {
                tags.iter()
                    .filter_map(|tag| tag.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether the cell carries the given tag.
    pub fn has_tag(&self, tag: &str) -> bool {
        self.tags().iter().any(|t| t == tag)
    }

    /// The stored outputs (empty when absent).
    pub fn outputs(&self) -> &[Value] {
        self.extra
            .get("outputs")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The stored execution count, if it is a number.
    pub fn execution_count(&self) -> Option<u64> {
        self.extra.get("execution_count").and_then(Value::as_u64)
    }
}

impl Notebook {
    /// Parses notebook JSON, checking the parts replay relies on.
    pub fn parse(text: &str) -> Result<Notebook> {
        // Parse to a Value first so that a JSON syntax error and a structural
        // error get different, precise messages.
        let value: Value = serde_json::from_str(text)
            .map_err(|error| Error::Input(format!("invalid JSON: {error}")))?;
        let object = value
            .as_object()
            .ok_or_else(|| Error::from("top level is not a JSON object"))?;
        if !object.contains_key("cells") {
            return Err(Error::from("no \"cells\" field"));
        }
        match object.get("nbformat") {
            Some(version) if version.as_u64() == Some(4) => {}
            Some(version) if version.as_u64().is_some() => {
                return Err(Error::Input(format!(
                    "nbformat {version} is not supported (only 4)"
                )))
            }
            Some(version) => {
                return Err(Error::Input(format!(
                    "\"nbformat\" must be the integer 4, not {version}"
                )))
            }
            None => return Err(Error::from("no \"nbformat\" field")),
        }
        check_language(object)?;
        if let Some(cells) = object.get("cells").and_then(Value::as_array) {
            for (index, cell) in cells.iter().enumerate() {
                check_cell(cell).map_err(|problem| problem!("cell {}: {problem}", index + 1))?;
                Cell::deserialize(cell)
                    .map_err(|error| Error::Input(format!("cell {}: {error}", index + 1)))?;
                if let Some(outputs) = cell.get("outputs") {
                    let outputs = outputs.as_array().ok_or_else(|| {
                        Error::Input(format!("cell {}: \"outputs\" is not a list", index + 1))
                    })?;
                    for output in outputs {
                        if output.get("output_type").and_then(Value::as_str).is_none() {
                            return Err(Error::Input(format!(
                                "cell {}: an output has no \"output_type\"",
                                index + 1
                            )));
                        }
                    }
                }
            }
        }
        Notebook::deserialize(&value).map_err(|error| Error::Input(error.to_string()))
    }

    /// Serialises as Jupyter saves a notebook (nbformat.write, which jupyter_server calls):
    /// transient fields dropped, texts split into lines, keys sorted, one-space indent,
    /// non-ASCII kept, trailing newline. A notebook written so is saved byte for byte by
    /// JupyterLab (`jupyter/tests/nbformat.rs` checks it against nbformat's own output).
    pub fn to_jupyter_json(&self) -> String {
        let mut value = serde_json::to_value(self).expect("notebook is valid JSON");
        nbformat_form(&mut value);
        to_pretty(&sort_keys(value))
    }
}

/// What a notebook goes through from JupyterLab's page to its file, done to `notebook`:
/// nbformat reads (`rejoin_lines`: each text held as a list of strings joined into one) and
/// writes (`split_lines`: each such text split again, at Python's line ends), and drops the
/// transient fields (`strip_transient`: the metadata's `orig_nbformat`, `orig_nbformat_minor`
/// and `signature`, each cell's `trusted`). The texts: a cell's source, a code cell's stream
/// text, and the text/*, image/svg+xml and application/javascript data of its outputs and of
/// any cell's attachments (other data held as a list of strings is joined and left whole;
/// JSON data is left as it is).
fn nbformat_form(notebook: &mut Value) {
    if let Some(metadata) = notebook.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in ["orig_nbformat", "orig_nbformat_minor", "signature"] {
            metadata.remove(key);
        }
    }
    let Some(cells) = notebook.get_mut("cells").and_then(Value::as_array_mut) else {
        return;
    };
    for cell in cells.iter_mut().filter_map(Value::as_object_mut) {
        if let Some(source) = cell.get_mut("source") {
            resplit(source, true);
        }
        if let Some(metadata) = cell.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("trusted");
        }
        if let Some(attachments) = cell.get_mut("attachments").and_then(Value::as_object_mut) {
            attachments.values_mut().for_each(resplit_bundle);
        }
        if cell.get("cell_type").and_then(Value::as_str) != Some("code") {
            continue;
        }
        let outputs = cell.get_mut("outputs").and_then(Value::as_array_mut);
        for output in outputs
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            let kind = output.get("output_type").and_then(Value::as_str);
            match kind {
                Some("execute_result" | "display_data") => {
                    if let Some(data) = output.get_mut("data") {
                        resplit_bundle(data);
                    }
                }
                Some(kind) => {
                    let stream = kind == "stream";
                    if let Some(text) = output.get_mut("text") {
                        resplit(text, stream);
                    }
                }
                None => {}
            }
        }
    }
}

/// A list of strings joined into one string; then, if `split`, a string split into lines.
fn resplit(text: &mut Value, split: bool) {
    if let Some(joined) = text.is_array().then(|| join_text(text)).flatten() {
        *text = Value::String(joined);
    }
    if let (true, Value::String(whole)) = (split, &*text) {
        *text = split_lines(whole);
    }
}

/// nbformat's `_rejoin_mimebundle` then `_split_mimebundle`, on one bundle.
fn resplit_bundle(bundle: &mut Value) {
    let Some(bundle) = bundle.as_object_mut() else {
        return;
    };
    for (mime, value) in bundle.iter_mut() {
        let json = mime == "application/json"
            || (mime.starts_with("application/") && mime.ends_with("+json"));
        if json {
            continue;
        }
        let text = mime.starts_with("text/")
            || mime == "image/svg+xml"
            || mime == "application/javascript";
        resplit(value, text);
    }
}

/// A notebook for another language would fail at its first cell: say so before running it.
/// The language comes from `metadata.kernelspec.language`, else `metadata.language_info.name`;
/// a notebook naming neither is taken as Rust.
fn check_language(notebook: &Map<String, Value>) -> Result<()> {
    let metadata = notebook.get("metadata");
    let kernelspec = metadata.and_then(|m| m.get("kernelspec"));
    let language = kernelspec
        .and_then(|k| k.get("language"))
        .or_else(|| metadata.and_then(|m| m.get("language_info")?.get("name")));
    match language.map(|l| l.as_str().ok_or(l)) {
        None => Ok(()),
        Some(Ok(name)) if name.eq_ignore_ascii_case("rust") => Ok(()),
        Some(Ok(name)) => {
            let kernel = kernelspec
                .and_then(|k| k.get("name"))
                .and_then(Value::as_str)
                .map(|k| format!(" (kernel {k:?})"))
                .unwrap_or_default();
            Err(problem!(
                "a {name} notebook{kernel}, not Rust: replay runs Rust notebooks only"
            ))
        }
        Some(Err(other)) => Err(problem!(
            "the notebook's language is {other}, not a name such as \"rust\""
        )),
    }
}

/// The fields serde would reject with an unreadable message, named.
fn check_cell(cell: &Value) -> std::result::Result<(), String> {
    let Some(cell) = cell.as_object() else {
        return Err(format!("a cell must be a JSON object, not {cell}"));
    };
    match cell.get("source") {
        None => return Err("no \"source\" field".into()),
        Some(Value::String(_)) => {}
        Some(Value::Array(parts)) if parts.iter().all(Value::is_string) => {}
        Some(other) => {
            return Err(format!(
                "\"source\" must be a string or a list of strings, not {other}"
            ))
        }
    }
    if let Some(tags) = cell.get("metadata").and_then(|m| m.get("tags")) {
        let strings = tags
            .as_array()
            .is_some_and(|t| t.iter().all(Value::is_string));
        if !strings {
            return Err(format!(
                "\"tags\" must be a list of strings (e.g. [\"nbval-skip\"]), not {tags}"
            ));
        }
    }
    Ok(())
}

/// Pretty-prints with Jupyter's one-space indent and a trailing newline, floats as Python
/// writes them.
pub fn to_pretty(value: &Value) -> String {
    let mut out = Vec::new();
    let formatter = PythonFloats(serde_json::ser::PrettyFormatter::with_indent(b" "));
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    value
        .serialize(&mut serializer)
        .expect("writing JSON to memory cannot fail");
    let mut text = String::from_utf8(out).expect("serde_json writes UTF-8");
    text.push('\n');
    text
}

/// Python's `repr` of a float, which `json.dumps` writes: the shortest digits that read back
/// to it, in positional notation from 1e-4 up to 1e16 (with ".0" when whole), else as
/// `1e-05`, `1.5e+16` (an exponent of two digits at least, signed).
///
/// ```
/// use attention_lab_jupyter::replay::notebook::python_float;
/// let written: Vec<String> = [1e-5, 1e-4, 1e15, 1e16, 100.0, -0.0, 5e-324].map(python_float).into();
/// assert_eq!(written, ["1e-05", "0.0001", "1000000000000000.0", "1e+16", "100.0", "-0.0", "5e-324"]);
/// ```
pub fn python_float(value: f64) -> String {
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("LowerExp writes an exponent");
    let exponent: i32 = exponent
        .parse()
        .expect("LowerExp writes an integer exponent");
    if (-4..16).contains(&exponent) {
        let positional = format!("{value}");
        if positional.contains('.') {
            positional
        } else {
            positional + ".0"
        }
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}

/// serde_json's pretty printer with floats written by [`python_float`].
struct PythonFloats<'a>(serde_json::ser::PrettyFormatter<'a>);

impl serde_json::ser::Formatter for PythonFloats<'_> {
    fn write_f64<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        value: f64,
    ) -> std::io::Result<()> {
        w.write_all(python_float(value).as_bytes())
    }
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// Recursively sorts object keys; serde_json may preserve insertion order
/// (feature unification), but nbformat writes with sort_keys=True.
fn sort_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(key, value)| (key, sort_keys(value)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        other => other,
    }
}

#[cfg(test)]
// The path spelled out: without evcxr, lib.rs loads this file by #[path], and a plain
// `mod tests` would then be looked for beside it, as replay/tests.rs.
#[path = "notebook/tests.rs"]
mod tests;
