//! How deep a cell's code nests, found before any engine reads the cell: rust-analyzer's parser
//! (the batch engine's and evcxr's), the thread that frees its trees and rustc's wrapper recurse
//! once a level, so a cell nested tens of thousands of levels deep (`((((…`, `1+1+…`, `----1`,
//! `x.f().f()…`) would overflow a stack and abort the whole replay; and the parser takes time
//! that grows with the square of such a chain (26 s for a sum of 100,000 terms), so the tokens
//! are counted first and only code that could be shallow enough is parsed.

use attention_lab_io::error::Result;
use attention_lab_io::problem;
use ra_ap_parser::{LexedStr, SyntaxKind};
use ra_ap_syntax::{AstNode, Edition, SourceFile, WalkEvent};

use super::notebook::Notebook;

/// The deepest syntax tree replay reads: far beyond code a person writes (no cell of the
/// project's notebooks is deeper than 26), and shallow enough for every thread that walks it
/// (the smallest have 2 MiB: rust-analyzer's dropper, the evcxr engine's thread).
pub const MAX_DEPTH: usize = 1000;

/// Code whose tokens could nest deeper than this is not parsed (see [`token_depth`]).
const MAX_TOKEN_DEPTH: usize = 10 * MAX_DEPTH;

/// The parse runs on a thread of its own with this stack: a parser that recurses once a level
/// needs more than the 8 MiB of a main thread for code [`MAX_TOKEN_DEPTH`] deep.
const PARSE_STACK: usize = 512 << 20;

/// How deep `code` nests: the depth of its syntax tree, or its tokens' depth when that is over
/// ten times [`MAX_DEPTH`] (it is then not parsed).
///
/// ```
/// use attention_lab_jupyter::replay::depth::{nesting, MAX_DEPTH};
/// assert!(nesting("let x = (1 + 2) * 3;").unwrap() < 20);
/// let deep = format!("let x = {}1{};", "(".repeat(5000), ")".repeat(5000));
/// assert!(nesting(&deep).unwrap() > MAX_DEPTH);
/// ```
///
/// # Errors
/// No thread for the parse.
pub fn nesting(code: &str) -> std::result::Result<usize, String> {
    let bound = token_depth(code);
    if bound > MAX_TOKEN_DEPTH {
        return Ok(bound);
    }
    // Code whose tokens nest no deeper than the limit parses on any thread's stack (the
    // evcxr engine's thread of 2 MiB included); only deeper code needs the big one.
    if bound <= MAX_DEPTH {
        return Ok(tree_depth(code));
    }
    let owned = code.to_owned();
    std::thread::Builder::new()
        .name("cell-depth".into())
        .stack_size(PARSE_STACK)
        .spawn(move || tree_depth(&owned))
        .map_err(|error| format!("cannot be read: no thread for its parse ({error})"))?
        .join()
        .map_err(|_| "cannot be read: its parse failed".to_string())
}

/// Checks every code cell of `notebook` before an engine sees it.
///
/// ```
/// use attention_lab_jupyter::replay::{depth::check, notebook::Notebook};
/// let notebook = |code: &str| {
///     let cell = serde_json::json!({"cell_type": "code", "metadata": {}, "source": code});
///     let notebook = serde_json::json!({"cells": [cell], "metadata": {}, "nbformat": 4});
///     Notebook::parse(&notebook.to_string()).unwrap()
/// };
/// assert!(check(&notebook("let x = 1;")).is_ok());
/// let deep = format!("let x = {}1;", "-".repeat(20_000));
/// let why = check(&notebook(&deep)).unwrap_err().to_string();
/// assert!(why.starts_with("code cell 1 nests deeper than 1000 levels"), "{why}");
/// ```
///
/// # Errors
/// The first code cell that nests deeper than [`MAX_DEPTH`] or cannot be parsed.
pub fn check(notebook: &Notebook) -> Result<()> {
    let codes = notebook.cells.iter().filter(|cell| cell.is_code());
    for (position, cell) in codes.enumerate() {
        let depth = nesting(&cell.source.text())
            .map_err(|why| problem!("code cell {} {why}", position + 1))?;
        if depth > MAX_DEPTH {
            return Err(problem!(
                "code cell {} nests deeper than {MAX_DEPTH} levels (brackets, operators or calls \
                 in a row); replay reads at most {MAX_DEPTH}",
                position + 1
            ));
        }
    }
    Ok(())
}

/// How deep `code` can nest, from its tokens alone (linear time, no recursion), within a small
/// factor of its tree (a tree adds a few nodes a level, `Vec<Vec<…>>` five):
/// every bracket opens a level, and within a level every token but a name, a literal, `,` and
/// `;` (operators, `.`, keywords such as `return` or `else`) may nest the next one deeper, until
/// a `,` or `;` ends the run. The result is the deepest sum of the open levels' runs.
fn token_depth(code: &str) -> usize {
    use SyntaxKind::*;
    let text = not_a_file_start(code);
    let lexed = LexedStr::new(Edition::Edition2024, &text);
    // One run for each open bracket, and their sum.
    let (mut runs, mut sum, mut deepest) = (vec![0usize], 0usize, 0usize);
    for i in 0..lexed.len() {
        match lexed.kind(i) {
            L_PAREN | L_BRACK | L_CURLY => runs.push(0),
            R_PAREN | R_BRACK | R_CURLY if runs.len() > 1 => sum -= runs.pop().unwrap_or(0),
            COMMA | SEMICOLON => sum -= std::mem::take(runs.last_mut().expect("one run at least")),
            kind if kind.is_trivia()
                || kind.is_literal()
                || kind == IDENT
                || kind == LIFETIME_IDENT => {}
            _ => {
                *runs.last_mut().expect("one run at least") += 1;
                sum += 1;
            }
        }
        deepest = deepest.max(sum + runs.len() - 1);
    }
    deepest
}

/// The depth of `code`'s syntax tree, walked without recursion; a tree deeper than
/// [`MAX_DEPTH`] is leaked, not freed: rust-analyzer frees trees recursively on a small stack.
fn tree_depth(code: &str) -> usize {
    let parse = SourceFile::parse(&not_a_file_start(code), Edition::Edition2024);
    let (mut depth, mut deepest) = (0usize, 0usize);
    for event in parse.tree().syntax().preorder_with_tokens() {
        match event {
            WalkEvent::Enter(_) => {
                depth += 1;
                deepest = deepest.max(depth);
                if deepest > MAX_DEPTH {
                    break;
                }
            }
            WalkEvent::Leave(_) => depth -= 1,
        }
    }
    if deepest > MAX_DEPTH {
        std::mem::forget(parse);
    }
    deepest
}

/// `code` after a `;`: a cell is never the start of a file (evcxr and the batch engine put it
/// in a function), and at a file's start rust-analyzer's lexer reads `---` as a frontmatter
/// fence, and panics on some (`----A@{` ... `--`). The `;` adds no depth.
fn not_a_file_start(code: &str) -> String {
    format!(";{code}")
}

#[cfg(test)]
mod tests {
    use super::*;

    // The hostile cells of issue 30 are replayed in cli/tests/replay_input.rs.
    #[test]
    fn a_cell_that_starts_as_a_frontmatter_fence_is_read() {
        // Found by fuzz/fuzz_targets/cell_depth.rs: rust-analyzer's lexer panicked on it.
        for code in ["----A@{\n\n--", "---\n", "---", "  ---x\n---\nfn f() {}"] {
            assert!(nesting(code).unwrap() < 20, "{code:?}");
        }
    }

    #[test]
    fn code_at_the_limit_is_measured_exactly_enough() {
        // A sum of n terms is a tree about n deep: the limit lands between 500 and 2000 terms.
        let sum = |n: usize| nesting(&format!("let a = 1{};", "+1".repeat(n))).unwrap();
        assert!(sum(500) <= MAX_DEPTH, "{}", sum(500));
        assert!(sum(2000) > MAX_DEPTH, "{}", sum(2000));
    }

    #[test]
    fn long_but_shallow_code_is_read() {
        // A large matrix literal and many small statements nest little.
        let matrix = format!("let m = [{}];", "[-1.0, 2.0], ".repeat(100_000));
        assert!(nesting(&matrix).unwrap() <= MAX_DEPTH);
        let statements = "let a = -x.f(1) + 2 * y;\n".repeat(20_000);
        assert!(nesting(&statements).unwrap() <= MAX_DEPTH);
        let items = "pub fn f(a: i32) -> i32 { a + 1 }\n".repeat(1_000);
        assert!(nesting(&items).unwrap() <= MAX_DEPTH);
    }

    #[test]
    fn operators_in_strings_and_comments_do_not_count() {
        let code = format!(
            "let s = \"{}\"; // {}",
            "+".repeat(50_000),
            "-".repeat(50_000)
        );
        assert!(token_depth(&code) < 10, "{}", token_depth(&code));
    }

    #[test]
    fn the_tokens_depth_is_within_a_small_factor_of_the_trees() {
        for code in [
            "let a = -(1 + 2) * x.f(y.g(3)).h;",
            "fn f() -> Option<Vec<i32>> { if a { b } else if c { d } else { return None } }",
            "let c = |x| move |y| x + y; let r = &&&&a;",
        ] {
            let (tokens, tree) = (token_depth(code), tree_depth(code));
            assert!(
                tree <= 6 * tokens + 16 && tokens <= tree,
                "{code}: {tokens} {tree}"
            );
        }
    }
}
