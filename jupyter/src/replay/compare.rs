//! nbval-style comparison of stored and replayed outputs, and nbval's
//! sanitize files.

use super::notebook::join_text;
use attention_lab_io::error::{io_text, Result};
use attention_lab_io::problem;
use regex::Regex;
use serde_json::Value;
use std::path::Path;

/// One regex/replace pair from a sanitize file.
#[derive(Debug, Clone)]
pub struct Sanitizer {
    /// Pattern searched in every compared text.
    pub regex: Regex,
    /// Replacement, already translated to the regex crate's `$1` syntax.
    pub replace: String,
}

/// Reads an nbval sanitize file: INI sections, each with `regex:` and
/// `replace:` lines (`=` also accepted, `#`/`;` comment lines ignored).
///
/// # Errors
/// The file cannot be read, a section lacks `regex:`, or a regex is invalid.
pub fn load_sanitize_file(path: &Path) -> Result<Vec<Sanitizer>> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        problem!(
            "cannot read sanitize file {}: {}",
            path.display(),
            io_text(&error)
        )
    })?;
    parse_sanitize(&text).map_err(|message| problem!("sanitize file {}: {message}", path.display()))
}

/// Parses sanitize-file text; errors are relative to the file.
pub fn parse_sanitize(text: &str) -> Result<Vec<Sanitizer>> {
    struct Section {
        name: String,
        line: usize,
        regex: Option<String>,
        replace: Option<String>,
    }
    let mut sections: Vec<Section> = Vec::new();
    for (number, raw) in text.lines().enumerate() {
        let number = number + 1;
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            sections.push(Section {
                name: name.trim().to_owned(),
                line: number,
                regex: None,
                replace: None,
            });
            continue;
        }
        let Some(split) = line.find([':', '=']) else {
            return Err(problem!(
                "line {number}: expected `key: value`, found {line:?}"
            ));
        };
        let key = line[..split].trim().to_ascii_lowercase();
        let value = line[split + 1..].trim().to_owned();
        let Some(section) = sections.last_mut() else {
            return Err(problem!("line {number}: `{key}` outside a [section]"));
        };
        match key.as_str() {
            "regex" => section.regex = Some(value),
            "replace" => section.replace = Some(value),
            other => return Err(problem!("line {number}: unknown key `{other}`")),
        }
    }
    sections
        .into_iter()
        .map(|section| {
            let name = &section.name;
            let pattern = section
                .regex
                .ok_or_else(|| problem!("section [{name}] (line {}) has no regex", section.line))?;
            let regex = Regex::new(&pattern).map_err(|error| {
                format!(
                    "section [{name}]: bad regex {pattern:?}: {}",
                    one_line_regex_error(&error)
                )
            })?;
            Ok(Sanitizer {
                regex,
                replace: python_replacement(section.replace.as_deref().unwrap_or("")),
            })
        })
        .collect()
}

/// regex's syntax errors span several lines (pattern, caret, message); keep
/// only the message so that every error stays on one line.
fn one_line_regex_error(error: &regex::Error) -> String {
    let text = error.to_string();
    text.lines()
        .rev()
        .find_map(|line| line.strip_prefix("error: "))
        .map(str::to_owned)
        .unwrap_or_else(|| text.lines().collect::<Vec<_>>().join(" "))
}

/// nbval uses Python's `re.sub`, whose replacement syntax is `\1` and
/// `\g<name>`; translate to the regex crate's `${1}` and escape `$`.
fn python_replacement(python: &str) -> String {
    let mut out = String::new();
    let mut chars = python.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.peek().copied() {
                Some(d) if d.is_ascii_digit() => {
                    let mut group = String::new();
                    while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                        group.push(d);
                        chars.next();
                    }
                    out.push_str(&format!("${{{group}}}"));
                }
                Some('g') => {
                    chars.next();
                    if chars.peek() == Some(&'<') {
                        chars.next();
                        let name: String = chars.by_ref().take_while(|&c| c != '>').collect();
                        out.push_str(&format!("${{{name}}}"));
                    } else {
                        out.push_str("\\g");
                    }
                }
                Some('n') => {
                    chars.next();
                    out.push('\n');
                }
                Some('t') => {
                    chars.next();
                    out.push('\t');
                }
                Some('\\') => {
                    chars.next();
                    out.push('\\');
                }
                _ => out.push('\\'),
            },
            other => out.push(other),
        }
    }
    out
}

/// What is compared and how.
#[derive(Debug, Clone, Default)]
pub struct CompareOptions {
    /// Also compare text/html, images and every other MIME type.
    pub compare_html: bool,
    /// Applied to both sides before comparison.
    pub sanitizers: Vec<Sanitizer>,
}

/// The comparable view of one cell's outputs: labelled texts in a canonical
/// order (streams coalesced by name like nbval, then results, then errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized(pub Vec<(String, String)>);

impl CompareOptions {
    fn sanitize(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for sanitizer in &self.sanitizers {
            text = sanitizer
                .regex
                .replace_all(&text, sanitizer.replace.as_str())
                .into_owned();
        }
        text
    }

    /// Builds the comparable view of an nbformat output list.
    pub fn normalize(&self, outputs: &[Value]) -> Normalized {
        let mut stdout: Option<String> = None;
        let mut stderr: Option<String> = None;
        let mut results = Vec::new();
        let mut errors = Vec::new();
        for output in outputs {
            let kind = output
                .get("output_type")
                .and_then(Value::as_str)
                .unwrap_or("");
            match kind {
                "stream" => {
                    let text = output.get("text").and_then(join_text).unwrap_or_default();
                    let slot = if output.get("name").and_then(Value::as_str) == Some("stderr") {
                        &mut stderr
                    } else {
                        &mut stdout
                    };
                    slot.get_or_insert_with(String::new).push_str(&text);
                }
                "execute_result" | "display_data" => {
                    let Some(data) = output.get("data").and_then(Value::as_object) else {
                        continue;
                    };
                    let mut mimes: Vec<&String> = data.keys().collect();
                    mimes.sort();
                    for mime in mimes {
                        if mime != "text/plain" && !self.compare_html {
                            continue;
                        }
                        let value = &data[mime];
                        let text = join_text(value).unwrap_or_else(|| value.to_string());
                        results.push((format!("{kind} {mime}"), self.sanitize(&text)));
                    }
                }
                "error" => {
                    let field = |name: &str| {
                        output
                            .get(name)
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned()
                    };
                    let text = format!("{}: {}", field("ename"), field("evalue"));
                    errors.push(("error".to_owned(), self.sanitize(&text)));
                }
                _ => {}
            }
        }
        let mut items = Vec::new();
        if let Some(text) = stdout {
            items.push(("stdout".to_owned(), self.sanitize(&text)));
        }
        if let Some(text) = stderr {
            items.push(("stderr".to_owned(), self.sanitize(&text)));
        }
        items.extend(results);
        items.extend(errors);
        Normalized(items)
    }
}

impl Normalized {
    /// A line-oriented rendering for unified diffs.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (label, text) in &self.0 {
            out.push_str(&format!("[{label}]\n"));
            out.push_str(text);
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
        out
    }
}

/// A unified diff from stored to replayed outputs (empty when equal).
pub fn diff(stored: &Normalized, replayed: &Normalized) -> String {
    if stored == replayed {
        return String::new();
    }
    let old = stored.render();
    let new = replayed.render();
    if old == new {
        return "outputs differ only in a trailing newline\n".to_owned();
    }
    similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header("stored", "replayed")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn streams_are_coalesced_and_lists_joined() {
        let options = CompareOptions::default();
        let a = options.normalize(&[
            json!({"output_type": "stream", "name": "stdout", "text": ["a\n", "b\n"]}),
            json!({"output_type": "stream", "name": "stderr", "text": "e\n"}),
            json!({"output_type": "stream", "name": "stdout", "text": "c\n"}),
        ]);
        let b = options.normalize(&[
            json!({"output_type": "stream", "name": "stderr", "text": "e\n"}),
            json!({"output_type": "stream", "name": "stdout", "text": "a\nb\nc\n"}),
        ]);
        assert_eq!(a, b);
    }

    #[test]
    fn html_only_compared_on_request() {
        let stored = [
            json!({"output_type": "execute_result", "data": {"text/plain": "5", "text/html": "<b>5</b>"}}),
        ];
        let replayed = [
            json!({"output_type": "execute_result", "data": {"text/plain": ["5"], "text/html": "<i>5</i>"}}),
        ];
        let plain = CompareOptions::default();
        assert_eq!(plain.normalize(&stored), plain.normalize(&replayed));
        let html = CompareOptions {
            compare_html: true,
            ..Default::default()
        };
        let d = diff(&html.normalize(&stored), &html.normalize(&replayed));
        assert!(d.contains("-<b>5</b>") && d.contains("+<i>5</i>"), "{d}");
    }

    #[test]
    fn sanitize_file_parsing() {
        let sanitizers = parse_sanitize(
            "# comment\n[time]\nregex: \\d+ms\nreplace: Nms\n\n[path]\nregex: /tmp/(\\w+)\nreplace: TMP-\\1\n",
        )
        .unwrap();
        let options = CompareOptions {
            compare_html: false,
            sanitizers,
        };
        assert_eq!(
            options.sanitize("took 12ms in /tmp/abc"),
            "took Nms in TMP-abc"
        );
        let error = parse_sanitize("[bad]\nregex: (\nreplace: x\n")
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("section [bad]: bad regex"), "{error}");
        assert!(!error.contains('\n'), "{error}");
        assert!(parse_sanitize("regex: x\n").is_err());
    }
}
