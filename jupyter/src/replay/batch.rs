//! The batch engine: a notebook compiled once, as one program, instead of one crate per cell.
//!
//! The cells go in order into one function, with a marker printed on stdout and stderr
//! before each, so the program's output splits back into cells. A cell's last expression is
//! shown as evcxr 0.22 shows it: `(expr).evcxr_display();`, and where that does not compile,
//! the `{:?}` text of the value as `text/plain`. Cells are split into statements by the parser
//! evcxr uses (`ra_ap_syntax`, in the same way), so both engines agree on which expression a
//! cell shows.
//!
//! Items (`fn`, `struct`, `impl`, `use`, `extern` blocks) stay where the cell has them: Rust
//! lets items stand in a function body, and there they are visible in the whole body, so a
//! function one cell defines is callable in the next, as in evcxr (which moves them to the
//! crate's top level). Only inner attributes (`#![...]`) move to the top of the program. What
//! evcxr does differently is left to evcxr: an item defined twice (evcxr keeps the newer, one
//! body cannot hold both: a compile error) and statics (evcxr compiles every cell into a new
//! library with its own copy of each static; one program keeps one), which send the notebook
//! back.
//!
//! The program is a cargo project in a build folder of its own under the cache
//! (`$ATTENTION_LAB_CACHE/replay-batch/NAME-HASH`), with one target folder for all notebooks,
//! so the dependencies compile once and an unchanged notebook is not compiled again. Its
//! dependencies are the `:dep` lines, with paths made absolute from the notebook's folder as
//! evcxr does; the lock file starts as a copy of the one beside a path dependency, so no index
//! is asked when the repository's is complete.
//!
//! Whatever this engine cannot reproduce exactly sends the notebook to evcxr, with the reason:
//! a compile error, a panic or a crash, an error returned through `?` (evcxr goes on with the
//! next cell), an evcxr command other than `:dep`, a cell tagged `raises-exception`.

use super::engine::{first_line, panic_line, push_line, CellRun, Output, Raised, Session};
use super::notebook::Notebook;
use ra_ap_syntax::{ast, AstNode, Edition, SourceFile};
use regex::Regex;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Starts every marker line; a control character, so no notebook prints it by chance.
const MARK: &str = "\u{1e}attention-lab batch ";

/// The longest a build may take: the first one compiles every dependency.
const BUILD_TIMEOUT: Duration = Duration::from_secs(1800);

/// The cells' outcomes, computed when the session starts, handed out one by one.
pub struct BatchSession {
    runs: HashMap<usize, CellRun>,
}

impl Session for BatchSession {
    fn run(&mut self, position: usize, _code: &str) -> CellRun {
        self.runs.remove(&position).unwrap_or_else(|| CellRun {
            outputs: Vec::new(),
            raised: Some(Raised::Lost(
                "not run: the batch program did not run this cell".into(),
            )),
            seconds: 0.0,
        })
    }

    fn lost(&self) -> Option<&str> {
        None
    }

    fn shutdown(self: Box<Self>) {}
}

/// Builds and runs `notebook` (the file `path`) as one program, in its folder. Returns the
/// session and the seconds it took, or why evcxr must run the notebook instead.
///
/// # Errors
/// The reason to fall back to evcxr, one line.
pub fn start(
    notebook: &Notebook,
    path: &Path,
    timeout: Duration,
) -> Result<(BatchSession, f64), String> {
    let started = Instant::now();
    let folder = path.parent().unwrap_or(Path::new("/"));
    let mut program = Program::new(notebook, folder)?;
    let project = project_folder(path)?;
    let executable = build(&mut program, &project)?;
    let per_cell = timeout.saturating_mul(program.cells.len().max(1) as u32);
    let mut command = Command::new(&executable);
    command.current_dir(folder).stdin(Stdio::null());
    let run = run_until(command, per_cell).map_err(|error| match error {
        RunError::TimedOut => format!(
            "the program ran past {} s ({} s a cell)",
            per_cell.as_secs_f64(),
            timeout.as_secs_f64()
        ),
        RunError::Start(error) => format!("cannot run {}: {error}", executable.display()),
    })?;
    let runs = program.split(&run)?;
    Ok((BatchSession { runs }, started.elapsed().as_secs_f64()))
}

/// One code cell as it goes into the program.
struct BatchCell {
    /// Index among all the notebook's cells.
    position: usize,
    /// The cell's Rust code before its shown expression (all of it when there is none).
    before: String,
    /// The expression whose value the cell shows, if any.
    shown: Option<String>,
    /// Code after the shown expression (comments, blank lines).
    after: String,
    /// Whether the value is shown by `{:?}` (its type has no `evcxr_display`).
    debug: bool,
}

/// The notebook as one program.
struct Program {
    cells: Vec<BatchCell>,
    /// `:dep` lines: crate name to its TOML (paths absolute); a later line replaces.
    dependencies: BTreeMap<String, String>,
    /// Inner attributes (`#![...]`), for the top of the program.
    attributes: Vec<String>,
}

/// A line of `main.rs` that belongs to a cell: its position, and whether it is the line
/// that calls `evcxr_display` on the cell's value.
type LineOwner = (usize, bool);

impl Program {
    fn empty() -> Program {
        Program {
            cells: Vec::new(),
            dependencies: BTreeMap::new(),
            attributes: Vec::new(),
        }
    }

    /// Reads the cells to run (all code cells but nbval-skip ones).
    fn new(notebook: &Notebook, folder: &Path) -> Result<Program, String> {
        let mut program = Program::empty();
        for (position, cell) in notebook.cells.iter().enumerate() {
            if !cell.is_code() || cell.has_tag("nbval-skip") {
                continue;
            }
            let number = position + 1;
            if cell.has_tag("raises-exception") {
                return Err(format!(
                    "cell {number} is tagged raises-exception (a program that stops there runs no further)"
                ));
            }
            let source = cell.source.text();
            let code = program
                .commands(&source, folder)
                .map_err(|problem| format!("cell {number} {problem}"))?;
            let cell = program
                .statements(position, code)
                .map_err(|problem| format!("cell {number} {problem}"))?;
            program.cells.push(cell);
        }
        Ok(program)
    }

    /// Takes the cell's leading evcxr commands (only `:dep` is compiled) and returns the Rust
    /// code after them, found as evcxr finds it: blank lines and `//` lines may come between
    /// commands, the first other line starts the code.
    fn commands<'a>(&mut self, source: &'a str, folder: &Path) -> Result<&'a str, String> {
        static COMMAND: OnceLock<Regex> = OnceLock::new();
        static DEP: OnceLock<Regex> = OnceLock::new();
        let command = COMMAND.get_or_init(|| Regex::new("^ *(:[^ ]*)( +(.*))?$").unwrap());
        let dep = DEP.get_or_init(|| Regex::new("^([^= ]+) *(?:= *(.+))?$").unwrap());
        let mut offset = 0;
        for line in source.split_inclusive('\n') {
            let text = line.trim_end_matches('\n');
            if text.starts_with('!') {
                return Err(format!(
                    "runs the shell command {text:?} (evcxr runs those)"
                ));
            } else if let Some(found) = command.captures(text) {
                let args = found.get(3).map_or("", |m| m.as_str());
                match (&found[1], dep.captures(args)) {
                    (":dep", Some(spec)) if !spec[1].starts_with(['.', '/']) => {
                        let toml = spec.get(2).map_or("\"*\"", |m| m.as_str());
                        self.dependencies
                            .insert(spec[1].to_owned(), absolute_paths(toml, folder)?);
                    }
                    (":dep", _) => return Err(format!("has `{text}`, which only evcxr reads")),
                    (other, _) => {
                        return Err(format!(
                            "uses the evcxr command {other} (the batch engine compiles only :dep)"
                        ))
                    }
                }
            } else if !(text.starts_with("//") || text.trim().is_empty()) {
                return Ok(&source[offset..]);
            }
            offset += line.len();
        }
        Ok("")
    }

    /// Splits `code` into statements as evcxr does (the body of `fn f(){...}`) and finds the
    /// expression the cell shows: the last statement, when it is an expression.
    fn statements(&mut self, position: usize, code: &str) -> Result<BatchCell, String> {
        const PRELUDE: &str = "fn f(){";
        let parsed = SourceFile::parse(&format!("{PRELUDE}{code}\n}}"), Edition::Edition2024);
        let nodes: Vec<_> = parsed
            .syntax_node()
            .children()
            .next()
            .and_then(ast::Fn::cast)
            .and_then(|f| f.body())
            .and_then(|body| body.stmt_list())
            .map(|list| list.syntax().children().collect())
            .unwrap_or_default();
        let range = |node: &ra_ap_syntax::SyntaxNode| {
            let range = node.text_range();
            let start = usize::from(range.start()).saturating_sub(PRELUDE.len());
            let end = usize::from(range.end()).saturating_sub(PRELUDE.len());
            (start.min(code.len()), end.min(code.len()))
        };
        let mut removed = Vec::new();
        for node in &nodes {
            let text = node.text().to_string();
            if ast::Static::can_cast(node.kind()) || text.trim_start().starts_with("thread_local!")
            {
                return Err(
                    "defines a static (evcxr gives every cell its own copy, one program has one)"
                        .into(),
                );
            }
            if ast::Attr::can_cast(node.kind()) && text.starts_with("#!") {
                self.attributes.push(text);
                removed.push(range(node));
            }
        }
        let shown = nodes
            .last()
            .filter(|node| ast::Expr::can_cast(node.kind()))
            .map(range);
        let mut before = String::new();
        let mut at = 0;
        let end = shown.map_or(code.len(), |(start, _)| start);
        for (start, stop) in removed.into_iter().filter(|(start, _)| *start < end) {
            before.push_str(&code[at..start]);
            at = stop;
        }
        before.push_str(&code[at..end]);
        Ok(BatchCell {
            position,
            before,
            shown: shown.map(|(start, stop)| code[start..stop].to_owned()),
            after: shown.map_or(String::new(), |(_, stop)| code[stop..].to_owned()),
            debug: false,
        })
    }

    /// `main.rs`, and the cell (and display line or not) each of its lines belongs to.
    fn source(&self) -> (String, Vec<Option<LineOwner>>) {
        let mut text = String::from("#![allow(warnings)]\n");
        for attribute in &self.attributes {
            text.push_str(attribute);
            text.push('\n');
        }
        text.push_str(&format!(
            r#"
/// What `?` in a cell turns an error into; evcxr prints the error's Display on stderr too.
struct EvcxrUserCodeError {{}}
impl<T: std::fmt::Display> From<T> for EvcxrUserCodeError {{
    fn from(error: T) -> Self {{
        eprintln!("{{}}", error);
        println!("{MARK}error");
        EvcxrUserCodeError {{}}
    }}
}}

fn attention_lab_batch_mark(what: &str, start: std::time::Instant) {{
    let nanos = start.elapsed().as_nanos();
    println!("{MARK}{{what}} {{nanos}}");
    eprintln!("{MARK}{{what}} {{nanos}}");
}}

fn attention_lab_batch_text_plain(text: &str) {{
    print!("EVCXR_BEGIN_CONTENT text/plain\n{{text}}\nEVCXR_END_CONTENT\n");
}}

fn main() {{
    let attention_lab_batch_start = std::time::Instant::now();
    let _ = (|| -> std::result::Result<(), EvcxrUserCodeError> {{
"#
        ));
        let mut owners: Vec<Option<LineOwner>> = vec![None; text.lines().count()];
        let mut push = |text: &mut String, code: &str, owner: Option<LineOwner>| {
            text.push_str(code);
            owners.resize(text.lines().count(), owner);
        };
        for cell in &self.cells {
            let owner = Some((cell.position, false));
            push(
                &mut text,
                &format!(
                    "attention_lab_batch_mark(\"cell {}\", attention_lab_batch_start);\n",
                    cell.position
                ),
                None,
            );
            push(&mut text, &cell.before, owner);
            if let Some(shown) = &cell.shown {
                if cell.debug {
                    push(
                        &mut text,
                        "\nattention_lab_batch_text_plain(&format!(\"{:?}\", &(\n",
                        owner,
                    );
                    push(&mut text, shown, owner);
                    push(&mut text, "\n)));\n", owner);
                } else {
                    push(&mut text, "\n(\n", owner);
                    push(&mut text, shown, owner);
                    push(
                        &mut text,
                        "\n).evcxr_display();\n",
                        Some((cell.position, true)),
                    );
                }
                push(&mut text, &cell.after, owner);
            }
            push(&mut text, "\n", owner);
        }
        text.push_str(
            "attention_lab_batch_mark(\"end\", attention_lab_batch_start);\n\
             // Like a kernel that is shut down: no value is dropped at the end.\n\
             std::process::exit(0);\n    })();\n    std::process::exit(3);\n}\n",
        );
        (text, owners)
    }

    /// The program's output, cut back into cells.
    fn split(&self, run: &Finished) -> Result<HashMap<usize, CellRun>, String> {
        let stdout = pieces(&run.stdout);
        let stderr = pieces(&run.stderr);
        let cell_name = |position: Option<usize>| {
            position.map_or("before the first cell".to_owned(), |p| {
                format!("cell {}", p + 1)
            })
        };
        let last = stdout.iter().rev().find_map(|piece| piece.cell);
        if stdout.iter().any(|piece| piece.error) {
            return Err(format!(
                "{} returned an error through `?` (evcxr goes on with the next cell)",
                cell_name(last)
            ));
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
            return Err(format!("{} {why}", cell_name(last)));
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
            return Err("the program's output does not split into its cells (a cell printed the marker, or the program ended early)".into());
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

/// Makes `path = "..."` in a `:dep` line's TOML absolute from the notebook's folder, as evcxr
/// does from its current folder.
fn absolute_paths(toml: &str, folder: &Path) -> Result<String, String> {
    static PATH: OnceLock<Regex> = OnceLock::new();
    let path = PATH.get_or_init(|| Regex::new("^(.*)path *= *\"([^\"]+)\"(.*)$").unwrap());
    let Some(found) = path.captures(toml) else {
        return Ok(toml.to_owned());
    };
    let given = Path::new(&found[2]);
    let absolute = folder
        .join(given)
        .canonicalize()
        .map_err(|error| format!("names the `:dep` path {}: {error}", given.display()))?;
    Ok(format!(
        "{}path = {}{}",
        &found[1],
        toml_string(&absolute.to_string_lossy()),
        &found[3]
    ))
}

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

/// A stretch of the program's stdout or stderr: the text after one marker.
struct Piece {
    /// The cell it belongs to (`None`: before the first marker, or after the end marker).
    cell: Option<usize>,
    /// Nanoseconds since the program started, when the marker was printed.
    nanos: u128,
    /// The end marker.
    end: bool,
    /// The error marker (an error through `?`).
    error: bool,
    text: String,
}

/// Cuts output at the markers.
fn pieces(bytes: &[u8]) -> Vec<Piece> {
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
fn outputs(stdout: &str, stderr: &str) -> Vec<Output> {
    static CONTENT: OnceLock<Regex> = OnceLock::new();
    let content = CONTENT.get_or_init(|| Regex::new("EVCXR_BEGIN_CONTENT ([^ ]+)").unwrap());
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

/// The notebook's build folder: `replay-batch/STEM-HASH` under the cache, the hash of its
/// canonical path keeping two notebooks of one name apart.
fn project_folder(path: &Path) -> Result<PathBuf, String> {
    let cache = crate::kernel::cache_dir().map_err(|error| error.to_string())?;
    let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let hash = Sha256::digest(canonical.to_string_lossy().as_bytes());
    let hex: String = hash[..6].iter().map(|b| format!("{b:02x}")).collect();
    let stem: String = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(40)
        .collect();
    Ok(cache.join("replay-batch").join(format!("{stem}-{hex}")))
}

/// Writes `text` to `path` unless it already holds it: cargo rebuilds what changed, and an
/// unchanged notebook then costs no compile.
fn write_if_changed(path: &Path, text: &str) -> Result<(), String> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    }
    std::fs::write(path, text).map_err(|error| format!("cannot write {}: {error}", path.display()))
}

/// The project's Cargo.toml: the `:dep` lines, evcxr's edition, dependencies optimised as
/// evcxr builds everything (`:opt 2`), the notebook's own code not (it only calls them).
fn cargo_toml(program: &Program, name: &str) -> String {
    let mut text = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         # Its own workspace, wherever the cache lies.\n[workspace]\n\n[dependencies]\n"
    );
    for (name, toml) in &program.dependencies {
        text.push_str(&format!("{name} = {toml}\n"));
    }
    text.push_str("\n[profile.dev]\ndebug = false\n\n[profile.dev.package.\"*\"]\nopt-level = 2\n");
    text
}

/// Seeds the project's lock file from the first `Cargo.lock` at or above a path dependency
/// (the repository's), so that cargo picks the versions the repository tested.
fn seed_lock(program: &Program, project: &Path) {
    let lock = project.join("Cargo.lock");
    if lock.exists() {
        return;
    }
    static PATH: OnceLock<Regex> = OnceLock::new();
    let path = PATH.get_or_init(|| Regex::new("path *= *\"([^\"]+)\"").unwrap());
    for toml in program.dependencies.values() {
        let Some(found) = path.captures(toml) else {
            continue;
        };
        let Ok(Value::String(folder)) = serde_json::from_str(&format!("\"{}\"", &found[1])) else {
            continue;
        };
        if let Some(source) = Path::new(&folder)
            .ancestors()
            .map(|dir| dir.join("Cargo.lock"))
            .find(|candidate| candidate.is_file())
        {
            let _ = std::fs::copy(source, &lock);
            return;
        }
    }
}

/// Compiles the program; a value whose type has no `evcxr_display` is shown by `{:?}` after
/// a second build, as evcxr falls back. Returns the executable.
fn build(program: &mut Program, project: &Path) -> Result<PathBuf, String> {
    let name = project
        .file_name()
        .map(|n| n.to_string_lossy().replace('-', "_"))
        .unwrap_or_else(|| "notebook".into());
    let name = format!("nb_{name}");
    write_if_changed(&project.join("Cargo.toml"), &cargo_toml(program, &name))?;
    seed_lock(program, project);
    let target = project.parent().unwrap_or(project).join("target");
    for attempt in 0..2 {
        let (source, owners) = program.source();
        write_if_changed(&project.join("src/main.rs"), &source)?;
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut command = Command::new(cargo);
        command
            .args(["build", "--quiet", "--message-format=json"])
            .current_dir(project)
            .env("CARGO_TARGET_DIR", &target)
            .stdin(Stdio::null());
        let finished = run_until(command, BUILD_TIMEOUT).map_err(|error| match error {
            RunError::TimedOut => format!("the build ran past {} s", BUILD_TIMEOUT.as_secs()),
            RunError::Start(error) => format!("cannot run cargo: {error}"),
        })?;
        let messages: Vec<Value> = String::from_utf8_lossy(&finished.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        if finished.status.success() {
            return messages
                .iter()
                .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
                .find_map(|m| m["executable"].as_str())
                .map(PathBuf::from)
                .ok_or_else(|| "cargo named no executable".into());
        }
        let errors = compile_errors(&messages);
        let Some(first) = errors.first() else {
            let text = String::from_utf8_lossy(&finished.stderr);
            return Err(format!(
                "the build failed: {}",
                text.lines()
                    .find(|l| l.starts_with("error"))
                    .unwrap_or(text.trim())
            ));
        };
        let owner = |line: usize| owners.get(line.wrapping_sub(1)).copied().flatten();
        let displays: Vec<usize> = errors
            .iter()
            .filter_map(|(line, _)| owner(*line).filter(|o| o.1).map(|o| o.0))
            .collect();
        if attempt == 0 && displays.len() == errors.len() {
            for cell in &mut program.cells {
                cell.debug |= displays.contains(&cell.position);
            }
            continue;
        }
        let (line, message) = first;
        let place = owner(*line).map_or("the program".to_owned(), |o| format!("cell {}", o.0 + 1));
        return Err(format!(
            "{place} does not compile as part of one program: {message}"
        ));
    }
    Err("the build failed twice".into())
}

/// Errors in `main.rs` from cargo's JSON messages: the primary span's line and the message.
fn compile_errors(messages: &[Value]) -> Vec<(usize, String)> {
    messages
        .iter()
        .filter(|m| m["reason"] == "compiler-message" && m["message"]["level"] == "error")
        .filter_map(|m| {
            let spans = m["message"]["spans"].as_array()?;
            let span = spans.iter().find(|s| s["is_primary"] == true)?;
            let line = span["line_start"].as_u64()? as usize;
            let message = first_line(m["message"]["message"].as_str().unwrap_or(""));
            Some((line, message))
        })
        .collect()
}

/// A finished child process.
struct Finished {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

enum RunError {
    TimedOut,
    Start(std::io::Error),
}

/// Runs `command` to its end, or kills it (and what it started) after `limit`.
fn run_until(mut command: Command, limit: Duration) -> Result<Finished, RunError> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(RunError::Start)?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                let _ = child.kill();
                super::runner::kill_descendants(None);
                let _ = child.wait();
                return Err(RunError::TimedOut);
            }
        }
    };
    Ok(Finished {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(code: &str) -> BatchCell {
        let mut program = Program::empty();
        program.statements(0, code).unwrap()
    }

    #[test]
    fn the_last_expression_is_shown_and_a_statement_is_not() {
        let shown = cell("let a = 1;\nheads(&a) // the grid\n");
        assert_eq!(shown.before, "let a = 1;\n");
        assert_eq!(shown.shown.as_deref(), Some("heads(&a)"));
        assert_eq!(shown.after, " // the grid\n");
        assert_eq!(cell("let a = 1;\nf(a);\n").shown, None);
        assert_eq!(cell("{\n    f();\n};").shown, None);
        // A loop that ends the cell is an expression too (evcxr shows its `()`).
        assert_eq!(
            cell("for i in 0..2 {}").shown.as_deref(),
            Some("for i in 0..2 {}")
        );
    }

    #[test]
    fn commands_before_the_code_are_taken_and_only_dep_is_compiled() {
        let mut program = Program::empty();
        let folder = Path::new(env!("CARGO_MANIFEST_DIR"));
        let code = program
            .commands(
                ":dep regex = \"1\"\n// note\n\n:dep serde\nlet x = 1;\n",
                folder,
            )
            .unwrap();
        assert_eq!(code, "let x = 1;\n");
        assert_eq!(program.dependencies["regex"], "\"1\"");
        assert_eq!(program.dependencies["serde"], "\"*\"");
        program
            .commands(":dep io = { path = \"../io\" }", folder)
            .unwrap();
        let io = folder.parent().unwrap().join("io").canonicalize().unwrap();
        assert_eq!(
            program.dependencies["io"],
            format!("{{ path = {} }}", toml_string(&io.to_string_lossy()))
        );
        let error = program.commands(":timing\n1", folder).unwrap_err();
        assert!(error.contains(":timing"), "{error}");
        assert!(program.commands("!ls", folder).is_err());
    }

    #[test]
    fn statics_and_inner_attributes() {
        let mut program = Program::empty();
        let error = program.statements(0, "static N: u8 = 0;").err().unwrap();
        assert!(error.contains("static"), "{error}");
        let moved = program
            .statements(0, "#![allow(unused)]\nlet a = 1;")
            .unwrap();
        assert_eq!(program.attributes, ["#![allow(unused)]"]);
        assert_eq!(moved.before, "\nlet a = 1;");
    }

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
