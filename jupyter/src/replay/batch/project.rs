//! The program's cargo project, in a build folder of its own, and its build.

use super::Fallback;
use crate::replay::engine::first_line;
use regex::Regex;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::program::Program;
use super::run::{run_until, RunError};
use super::BUILD_TIMEOUT;

/// The notebook's build folder: `replay-batch/STEM-HASH` under the cache, the hash of its
/// canonical path keeping two notebooks of one name apart.
pub(super) fn project_folder(path: &Path) -> Result<PathBuf, Fallback> {
    let cache =
        crate::kernel::cache_dir().map_err(|error| Fallback::Environment(error.to_string()))?;
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
fn write_if_changed(path: &Path, text: &str) -> Result<(), Fallback> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|error| {
            Fallback::Environment(format!("cannot create {}: {error}", parent.display()))
        })?;
    }
    std::fs::write(path, text)
        .map_err(|error| Fallback::Environment(format!("cannot write {}: {error}", path.display())))
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
    let path = PATH
        .get_or_init(|| Regex::new("path *= *\"([^\"]+)\"").expect("a constant, valid pattern"));
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
pub(super) fn build(program: &mut Program, project: &Path) -> Result<PathBuf, Fallback> {
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
            RunError::TimedOut => {
                Fallback::TimedOut(format!("the build ran past {} s", BUILD_TIMEOUT.as_secs()))
            }
            RunError::Start(error) => Fallback::Environment(format!("cannot run cargo: {error}")),
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
                .ok_or_else(|| Fallback::Environment("cargo named no executable".into()));
        }
        let errors = compile_errors(&messages);
        let Some(first) = errors.first() else {
            let text = String::from_utf8_lossy(&finished.stderr);
            return Err(Fallback::Build(format!(
                "the build failed: {}",
                text.lines()
                    .find(|l| l.starts_with("error"))
                    .unwrap_or(text.trim())
            )));
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
        return Err(Fallback::Compile {
            place,
            message: message.clone(),
        });
    }
    Err(Fallback::Build("the build failed twice".into()))
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
