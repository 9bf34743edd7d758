//! The cells as the code of one program: statements, the shown expression, the markers.

use super::Fallback;
use crate::replay::notebook::Notebook;
use ra_ap_syntax::{ast, AstNode, Edition, SourceFile};
use regex::Regex;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use super::MARK;

/// One code cell as it goes into the program.
pub(super) struct BatchCell {
    /// Index among all the notebook's cells.
    pub(super) position: usize,
    /// The cell's Rust code before its shown expression (all of it when there is none).
    pub(super) before: String,
    /// The expression whose value the cell shows, if any.
    pub(super) shown: Option<String>,
    /// Code after the shown expression (comments, blank lines).
    pub(super) after: String,
    /// Whether the value is shown by `{:?}` (its type has no `evcxr_display`).
    pub(super) debug: bool,
}

/// The notebook as one program.
pub(super) struct Program {
    pub(super) cells: Vec<BatchCell>,
    /// `:dep` lines: crate name to its TOML (paths absolute); a later line replaces.
    pub(super) dependencies: BTreeMap<String, String>,
    /// Inner attributes (`#![...]`), for the top of the program.
    pub(super) attributes: Vec<String>,
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
    pub(super) fn new(notebook: &Notebook, folder: &Path) -> Result<Program, Fallback> {
        let mut program = Program::empty();
        for (position, cell) in notebook.cells.iter().enumerate() {
            if !cell.is_code() || cell.has_tag("nbval-skip") {
                continue;
            }
            let number = position + 1;
            if cell.has_tag("raises-exception") {
                return Err(Fallback::Cell {
                    cell: number,
                    why: "is tagged raises-exception (a program that stops there runs no further)"
                        .into(),
                });
            }
            let source = cell.source.text();
            let code = program
                .commands(&source, folder)
                .map_err(|why| Fallback::Cell { cell: number, why })?;
            let cell = program
                .statements(position, code)
                .map_err(|why| Fallback::Cell { cell: number, why })?;
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
        let command = COMMAND.get_or_init(|| {
            Regex::new("^ *(:[^ ]*)( +(.*))?$").expect("a constant, valid pattern")
        });
        let dep = DEP.get_or_init(|| {
            Regex::new("^([^= ]+) *(?:= *(.+))?$").expect("a constant, valid pattern")
        });
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
    pub(super) fn source(&self) -> (String, Vec<Option<LineOwner>>) {
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
}

/// Makes `path = "..."` in a `:dep` line's TOML absolute from the notebook's folder, as evcxr
/// does from its current folder.
fn absolute_paths(toml: &str, folder: &Path) -> Result<String, String> {
    static PATH: OnceLock<Regex> = OnceLock::new();
    let path = PATH.get_or_init(|| {
        Regex::new("^(.*)path *= *\"([^\"]+)\"(.*)$").expect("a constant, valid pattern")
    });
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
}
