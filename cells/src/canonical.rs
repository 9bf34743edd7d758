//! The source of a cell as the key sees it: evcxr writes the same cell in another order in
//! each kernel, and this puts the parts whose order means nothing in one order.
//!
//! evcxr keeps earlier cells' items, crate attributes and variables in hash maps, whose order
//! changes from process to process. So the same cell, after the same earlier cells, comes as a
//! source whose top-level items (and inner attributes) and whose lines that check, take or
//! store variables stand in another order in every kernel. None of these orders changes what
//! the library does: items in a crate may stand in any order, and each of those lines moves
//! one variable of its own in or out of evcxr's store. The canonical form sorts them (each item
//! with the comments and blank lines before it), and the library compiled from any one order
//! stands for all of them. The one trace of the order in a library is the line number of code
//! inside an earlier cell's item (a panic's location there): evcxr itself gives that a
//! different number in each kernel. The line numbers of the cell's own code are the same in
//! every order (the items before it take the same lines, in whatever order).
//!
//! Everything else stays as written. A source that does not parse, or nests too deeply to
//! parse safely, is taken as it is (it then hits only when written in the same order).

use ra_ap_syntax::{ast, AstNode, Edition, NodeOrToken, SourceFile, SyntaxKind};

/// The three lines evcxr writes per variable, one variable each.
const VARIABLE_LINES: [(&str, &str); 3] = [
    ("vars_ok &= evcxr_variable_store.check_variable::<", ");"),
    ("evcxr_variable_store.put_variable::<", ");"),
    ("let ", " = evcxr_variable_store.take_variable::<"),
];

/// Past this depth of brackets, a source is not parsed (the parser recurses).
const MAX_DEPTH: usize = 256;

/// The canonical form of a cell's generated source (see the module's documentation).
///
/// ```
/// use attention_lab_cells::canonical::canonical;
/// let a = "use a::*;\nfn f() {}\nfn run() {\nevcxr_variable_store.put_variable::<i32>(stringify!(y), y);\nevcxr_variable_store.put_variable::<i32>(stringify!(x), x);\n}\n";
/// let b = "fn f() {}\nuse a::*;\nfn run() {\nevcxr_variable_store.put_variable::<i32>(stringify!(x), x);\nevcxr_variable_store.put_variable::<i32>(stringify!(y), y);\n}\n";
/// assert_eq!(canonical(a), canonical(b));
/// assert_ne!(canonical(a), canonical(&a.replace("fn f() {}", "fn g() {}")));
/// ```
pub fn canonical(source: &str) -> String {
    let lines = sort_variable_lines(source);
    if depth(&lines) > MAX_DEPTH {
        return lines;
    }
    let parsed = SourceFile::parse(&lines, Edition::Edition2024);
    if !parsed.errors().is_empty() {
        return lines;
    }
    // Inner attributes are nodes too; every top-level node is an item or one of them.
    let all_movable = parsed
        .syntax_node()
        .children()
        .all(|node| ast::Item::can_cast(node.kind()) || node.kind() == SyntaxKind::ATTR);
    if !all_movable {
        return lines;
    }
    // Each top-level node with the comments before it (blank lines aside), and where it starts.
    let mut parts: Vec<(usize, String)> = Vec::new();
    let mut pending = String::new();
    for child in parsed.syntax_node().children_with_tokens() {
        match child {
            NodeOrToken::Token(token) if token.kind().is_trivia() => pending.push_str(token.text()),
            other => {
                let start = usize::from(other.text_range().start());
                pending.push_str(&other.to_string());
                parts.push((start, std::mem::take(&mut pending).trim_start().to_owned()));
            }
        }
    }
    // The cell's own function, which evcxr writes last, stays last with its first line: its
    // code is then on the same lines in every order of the items before it.
    let Some((start, last)) = parts.pop() else {
        return lines;
    };
    let first_line = lines[..start].matches('\n').count();
    let mut sorted: Vec<String> = parts.into_iter().map(|(_, text)| text).collect();
    sorted.sort();
    sorted.push(format!("line {first_line}\n{last}"));
    sorted.join("\n\u{0}\n")
}

/// `source` with each run of consecutive variable lines of one kind in sorted order.
fn sort_variable_lines(source: &str) -> String {
    let kind = |line: &str| {
        VARIABLE_LINES
            .iter()
            .position(|(start, has)| line.starts_with(start) && line.contains(has))
    };
    let mut out = String::with_capacity(source.len());
    let mut run: Vec<&str> = Vec::new();
    let mut run_kind = None;
    let flush = |run: &mut Vec<&str>, out: &mut String| {
        run.sort_unstable();
        for line in run.drain(..) {
            out.push_str(line);
        }
    };
    for line in source.split_inclusive('\n') {
        let this = kind(line.trim_end_matches('\n'));
        if this != run_kind || this.is_none() || !line.ends_with('\n') {
            flush(&mut run, &mut out);
        }
        run_kind = this;
        match this {
            Some(_) if line.ends_with('\n') => run.push(line),
            _ => out.push_str(line),
        }
    }
    flush(&mut run, &mut out);
    out
}

/// The deepest nesting of brackets in `text` (strings and comments counted too: an
/// overestimate only means a source is taken as it is).
fn depth(text: &str) -> usize {
    let (mut now, mut most) = (0usize, 0usize);
    for byte in text.bytes() {
        match byte {
            b'(' | b'[' | b'{' => {
                now += 1;
                most = most.max(now);
            }
            b')' | b']' | b'}' => now = now.saturating_sub(1),
            _ => {}
        }
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variable_lines_are_sorted_within_their_run_only() {
        let put =
            |v: &str| format!("evcxr_variable_store.put_variable::<f64>(stringify!({v}), {v});\n");
        let take = |v: &str| {
            format!("let {v} = evcxr_variable_store.take_variable::<f64>(stringify!({v}));\n")
        };
        let a = format!(
            "{}{}user();\n{}{}",
            take("b"),
            take("a"),
            put("d"),
            put("c")
        );
        let b = format!(
            "{}{}user();\n{}{}",
            take("a"),
            take("b"),
            put("c"),
            put("d")
        );
        assert_eq!(sort_variable_lines(&a), b);
        // Across the user's line, nothing moves.
        let c = format!("{}user();\n{}", put("b"), put("a"));
        assert_eq!(sort_variable_lines(&c), c);
        assert_eq!(
            sort_variable_lines("no newline at the end"),
            "no newline at the end"
        );
    }

    #[test]
    fn items_and_inner_attributes_move_but_nothing_else_changes() {
        let a = "#![allow(dead_code)]\n#![allow(unused)]\nuse x::*;\n/// doc\nfn f() { 1 }\nstruct S;\nfn run() {}\n";
        let b = "#![allow(unused)]\n#![allow(dead_code)]\nstruct S;\n/// doc\nfn f() { 1 }\nuse x::*;\nfn run() {}\n";
        assert_eq!(canonical(a), canonical(b));
        assert_ne!(canonical(a), canonical(&a.replace("{ 1 }", "{ 2 }")));
        assert_ne!(canonical(a), canonical(&a.replace("/// doc", "/// other")));
        // A comment before an item moves with it, and changes the key; so does a line that
        // moves the cell's own function.
        assert_ne!(
            canonical(a),
            canonical(&a.replace("struct S;", "// note\nstruct S;"))
        );
        assert_ne!(
            canonical(a),
            canonical(&a.replace("struct S;", "\nstruct S;"))
        );
        assert_eq!(
            canonical(a),
            canonical(&format!("{a}\n// after everything\n"))
        );
        // A source that does not parse is kept as written.
        assert_eq!(canonical("fn f( {"), "fn f( {");
    }

    #[test]
    fn deep_sources_are_kept_as_written_without_parsing() {
        let deep = format!(
            "fn f() {{ {}{} }}",
            "(".repeat(100_000),
            ")".repeat(100_000)
        );
        assert_eq!(canonical(&deep), deep);
    }
}
