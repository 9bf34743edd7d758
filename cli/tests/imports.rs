//! No import circle between the modules of any crate of the workspace (cargo already refuses
//! one between crates): each `crate::a::b` or `super::b` path outside a file's `mod tests`, and
//! each bare path whose first segment is one of the module's own children (`server::serve` in
//! `kernel/mod.rs`), is an edge from the file's module to the deepest module it names, and the
//! graph must be acyclic.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every module of the crate whose sources are in `src`: `a::b` for `a/b.rs` or `a/b/mod.rs`,
/// `(root)` for lib.rs and main.rs; with its file.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    let mut folders = vec![src.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = relative
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            let name = match parts.as_slice() {
                [one] if one == "lib" || one == "main" => "(root)".to_owned(),
                _ => parts.join("::"),
            };
            found.insert(name, path);
        }
    }
    found
}

/// Whether `prefix` is a child module's `name::`, not `crate::` or `super::`.
fn is_child_prefix(prefix: &str) -> bool {
    !matches!(prefix, "crate::" | "super::")
}

/// The paths after each `crate::` and `super::` (or a child's `name::`) in `text`: `a::b::c`;
/// a group (`crate::{a, b::{c, d}}`) gives each of its paths. A bare child's name counts only
/// where it starts a path (not `other::name::`).
fn paths_after<'t>(text: &'t str, prefix: &str) -> Vec<Vec<&'t str>> {
    let bare = is_child_prefix(prefix);
    let mut paths = Vec::new();
    for (at, _) in text.match_indices(prefix) {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || (bare && c == ':'))
        {
            continue; // `$crate::` in a macro, or a longer name ending in "crate"
        }
        expand(&text[at + prefix.len()..], Vec::new(), &mut paths);
    }
    paths
}

/// Adds the path at the start of `rest`, after `head`, to `paths`; each path of a group.
fn expand<'t>(rest: &'t str, mut head: Vec<&'t str>, paths: &mut Vec<Vec<&'t str>>) {
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(rest.len());
    head.extend(rest[..end].split("::").filter(|s| !s.is_empty()));
    // A group follows `crate::` itself or a path ending in `::`.
    let group = rest[end..].starts_with('{') && (end == 0 || rest[..end].ends_with("::"));
    if !group {
        paths.push(head);
        return;
    }
    // The group's items, split at its own commas.
    let (mut depth, mut start) = (0, end + 1);
    for (i, c) in rest.char_indices().skip(end) {
        match c {
            '{' => depth += 1,
            '}' | ',' if depth == 1 => {
                let item = rest[start..i].trim_start();
                if !item.is_empty() {
                    expand(item, head.clone(), paths);
                }
                start = i + 1;
                if c == '}' {
                    return;
                }
            }
            '}' => depth -= 1,
            _ => {}
        }
    }
}

/// The module graph of the crate in `src`: module -> the modules it imports.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules(src);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, file) in &modules {
        let text = std::fs::read_to_string(file).unwrap();
        // Unit tests may reach anywhere; they sit at the end of a file.
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let code: String = code
            .lines()
            .map(|l| l.split("//").next().unwrap())
            .collect::<Vec<_>>()
            .join("\n");
        let here: Vec<&str> = match module.as_str() {
            "(root)" => Vec::new(),
            m => m.split("::").collect(),
        };
        // `super` of a/b.rs and of a/b/mod.rs (both module a::b) is a.
        let parent = &here[..here.len().saturating_sub(1)];
        let children: Vec<(Vec<&str>, String)> = modules
            .keys()
            .filter_map(|m| {
                let parts: Vec<&str> = m.split("::").collect();
                let child = parts.len() == here.len() + 1 && parts.starts_with(&here);
                (child && m != "(root)")
                    .then(|| (parts.clone(), format!("{}::", parts[here.len()])))
            })
            .collect();
        let mut prefixes = vec![
            (&[][..], "crate::".to_owned()),
            (parent, "super::".to_owned()),
        ];
        prefixes.extend(
            children
                .iter()
                .map(|(parts, name)| (&parts[..], name.clone())),
        );
        // A parent's `pub use child::X;` is its face, not a use: the child's re-exports do not
        // count as the parent's edges to it.
        let without_faces = without_re_exports(&code);
        for (start, prefix) in prefixes {
            let bare = is_child_prefix(&prefix);
            let text = if bare { &without_faces } else { &code };
            for path in paths_after(text, &prefix) {
                // A child's bare path names at least the child (`crate::` and `super::`
                // paths name a module only through their segments, as before).
                let mut target = Some(start.join("::")).filter(|_| bare);
                for n in 1..=path.len() {
                    let candidate = [start, &path[..n]].concat().join("::");
                    if modules.contains_key(&candidate) {
                        target = Some(candidate);
                    }
                }
                if let Some(target) = target.filter(|t| t != module) {
                    edges.entry(module.clone()).or_default().insert(target);
                }
            }
        }
    }
    edges
}

/// `code` without its `pub use ...;` and `pub(crate) use ...;` statements.
fn without_re_exports(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    loop {
        let at = ["pub use ", "pub(crate) use "]
            .iter()
            .filter_map(|p| rest.find(p))
            .min();
        let Some(at) = at else {
            out.push_str(rest);
            return out;
        };
        out.push_str(&rest[..at]);
        rest = rest[at..].find(';').map_or("", |end| &rest[at + end + 1..]);
    }
}

/// A circle of `edges`, if there is one: `[a, b, a]`.
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut circle = stack[at..].to_vec();
            circle.push(node.to_owned());
            return Some(circle);
        }
        if !done.insert(node.to_owned()) {
            return None;
        }
        stack.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, edges, done, stack) {
                return Some(circle);
            }
        }
        stack.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut done, &mut Vec::new()))
}

/// The source folders of the workspace's members, as the root Cargo.toml lists them: a member
/// added later is scanned without anyone remembering to add it here.
fn member_sources(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members = ["))
        .expect("the workspace's members on one line");
    let list = &line[line.find('[').unwrap() + 1..line.rfind(']').unwrap()];
    list.split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| {
            if m == "." {
                "src".to_owned()
            } else {
                format!("{m}/src")
            }
        })
        .collect()
}

#[test]
fn no_crate_of_the_workspace_has_an_import_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let sources = member_sources(&root);
    for member in ["src", "cells/src", "hub/src", "model/src", "jupyter/src"] {
        assert!(
            sources.iter().any(|s| s == member),
            "{member} not found in {sources:?}"
        );
    }
    for src in &sources {
        let edges = graph(&root.join(src));
        assert!(
            edges.values().map(BTreeSet::len).sum::<usize>() > 0
                // One module (wire): nothing of its own to import.
                || edges.len() <= 1
                || src.starts_with("cli")
                || src.starts_with("io"),
            "{src}: no imports found; the scan is broken"
        );
        if let Some(circle) = circle(&edges) {
            panic!("{src}: import circle {}", circle.join(" -> "));
        }
    }
}

#[test]
fn the_scan_finds_a_circle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("replay")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "pub mod a;\npub mod b;\npub mod replay;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("a.rs"),
        "use crate::{replay::{engine::Session, batch}, b};\n",
    )
    .unwrap();
    std::fs::write(src.join("b.rs"), "").unwrap();
    std::fs::write(
        src.join("replay/mod.rs"),
        "pub mod batch;\npub mod engine;\n",
    )
    .unwrap();
    std::fs::write(src.join("replay/engine.rs"), "use super::batch;\n").unwrap();
    std::fs::write(
        src.join("replay/batch.rs"),
        "use super::engine::Session; // a comment: crate::a\n#[cfg(test)]\nmod tests {\n    use crate::a;\n}\n",
    )
    .unwrap();
    let edges = graph(src);
    assert_eq!(
        edges["a"],
        BTreeSet::from([
            "b".to_owned(),
            "replay::batch".to_owned(),
            "replay::engine".to_owned()
        ]),
        "{edges:?}"
    );
    // Comments and unit tests do not count.
    assert_eq!(
        edges["replay::batch"],
        BTreeSet::from(["replay::engine".to_owned()])
    );
    let circle = circle(&edges).expect("a circle");
    assert_eq!(circle.first(), circle.last());
    assert_eq!(
        circle.iter().cloned().collect::<BTreeSet<_>>(),
        BTreeSet::from(["replay::batch".to_owned(), "replay::engine".to_owned()])
    );
}

/// The circle of jupyter before issue 44: `kernel/mod.rs` calls its child `server::serve` by a
/// bare path, the server calls replay's runner, and the runner calls back into `kernel`. A
/// bare path that only ends in a child's name (`other::server::`) is no edge.
#[test]
fn the_scan_finds_a_circle_through_a_child_named_by_a_bare_path() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    for folder in ["kernel", "replay"] {
        std::fs::create_dir(src.join(folder)).unwrap();
    }
    let files = [
        (
            "lib.rs",
            "pub mod kernel;\npub mod replay;\npub mod other;\n",
        ),
        (
            "kernel/mod.rs",
            "pub mod server;\npub fn run() { server::serve() }\npub fn cache_dir() {}\n",
        ),
        (
            "kernel/server.rs",
            "pub fn serve() { crate::replay::runner::outcome() }\n",
        ),
        ("replay/mod.rs", "pub mod runner;\n"),
        (
            "replay/runner.rs",
            "pub fn outcome() { crate::kernel::cache_dir() }\n",
        ),
        ("other.rs", "pub mod server {}\nfn f() { x::server::g() }\n"),
    ];
    for (name, text) in files {
        std::fs::write(src.join(name), text).unwrap();
    }
    let edges = graph(src);
    assert_eq!(
        edges["kernel"],
        BTreeSet::from(["kernel::server".to_owned()]),
        "{edges:?}"
    );
    assert!(!edges.contains_key("other"), "{edges:?}");
    let circle = circle(&edges).expect("a circle");
    assert_eq!(
        circle.iter().cloned().collect::<BTreeSet<_>>(),
        BTreeSet::from([
            "kernel".to_owned(),
            "kernel::server".to_owned(),
            "replay::runner".to_owned()
        ])
    );
}

/// Flags live in the command line's packages (`cli/`, `cli/classroom/`): a library crate takes
/// typed options and never depends on clap, as ripgrep's library crates do not.
#[test]
fn no_library_crate_depends_on_clap() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let depends = |member: &str| {
        let manifest = std::fs::read_to_string(root.join(member).join("Cargo.toml")).unwrap();
        // In a section of the crate's own dependencies, not [workspace.dependencies].
        let mut section = "";
        manifest.lines().map(str::trim_start).any(|l| {
            if l.starts_with('[') {
                section = l;
            }
            let own = section == "[dependencies]" || section == "[build-dependencies]";
            own && (l.starts_with("clap ") || l.starts_with("clap=") || l.starts_with("clap."))
        })
    };
    let members: Vec<String> = member_sources(&root)
        .iter()
        .map(|src| {
            src.strip_suffix("src")
                .unwrap()
                .trim_end_matches('/')
                .to_owned()
        })
        .map(|m| if m.is_empty() { ".".to_owned() } else { m })
        .collect();
    assert!(
        depends("cli") && depends("cli/classroom"),
        "the scan is broken"
    );
    for member in members.iter().filter(|m| !m.starts_with("cli")) {
        assert!(!depends(member), "{member}/Cargo.toml depends on clap");
        for (module, file) in modules(&root.join(member).join("src")) {
            let text = std::fs::read_to_string(&file).unwrap();
            let code = text.lines().filter(|l| !l.trim_start().starts_with("//"));
            assert!(
                !code.into_iter().any(|l| l.contains("clap::")),
                "{member}: module {module} uses clap"
            );
        }
    }
}

/// The library's `unsafe` lives in one wing, `src/fast/` (the vector paths, the streaming
/// kernel, the products), where each block has its SAFETY line: a reader auditing it reads one
/// folder.
#[test]
fn the_library_has_unsafe_code_only_in_its_fast_wing() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../src");
    let mut in_fast = 0;
    for (module, file) in modules(&src) {
        let text = std::fs::read_to_string(&file).unwrap();
        let code: Vec<&str> = text
            .lines()
            .map(|l| l.split("//").next().unwrap())
            .filter(|l| l.contains("unsafe ") || l.contains("unsafe{"))
            .collect();
        if module == "fast" || module.starts_with("fast::") {
            in_fast += code.len();
        } else {
            assert!(
                code.is_empty(),
                "src module {module} has unsafe code: {code:?}"
            );
        }
    }
    assert!(
        in_fast > 0,
        "no unsafe found in src/fast/: the scan is broken"
    );
}

/// The house rules are the compiler's for every member: each Cargo.toml inherits the
/// workspace's `[lints]` table, so a crate added later cannot leave them out unnoticed.
#[test]
fn every_member_uses_the_workspace_lints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for src in member_sources(&root) {
        let member = src.strip_suffix("src").unwrap();
        let manifest = root.join(member).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        let inherits = text
            .split("\n[")
            .any(|section| section.starts_with("lints]") && section.contains("workspace = true"));
        assert!(
            inherits,
            "{} has no [lints] workspace = true",
            manifest.display()
        );
    }
}
