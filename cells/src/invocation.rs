//! One rustc command line as cargo hands it to its rustc wrapper, read for what the cache
//! needs: whether it compiles a cell, where the outputs go, the source, the dependencies.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The crate evcxr compiles each cell into.
pub const CELL_CRATE: &str = "ctx";

/// What every path below the build folder becomes in a key, a stored file or a message.
pub const BLANK: &str = "<build>";

/// A rustc command line that compiles a cell: the crate `ctx`, a `cdylib`, with its outputs
/// below the build folder.
///
/// ```
/// use attention_lab_cells::invocation::Invocation;
/// use std::ffi::OsString;
/// let args: Vec<OsString> = ["--crate-name", "ctx", "--crate-type", "cdylib", "src/lib.rs",
///     "--out-dir", "/b/target/debug/deps", "--extern", "ndarray=/b/target/debug/deps/libndarray-1.rlib"]
///     .map(OsString::from).to_vec();
/// let cell = Invocation::parse(&args, "/b".as_ref()).unwrap();
/// assert_eq!(cell.source, std::path::Path::new("/b/src/lib.rs"));
/// assert_eq!(cell.blanked_args()[6], "<build>/target/debug/deps");
/// assert!(Invocation::parse(&args, "/elsewhere".as_ref()).is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// rustc's arguments, as given.
    pub args: Vec<String>,
    /// The folder cargo runs rustc in: evcxr's build folder, which holds `src/` and `target/`.
    pub build: PathBuf,
    /// Where rustc writes the library (`--out-dir`).
    pub out_dir: PathBuf,
    /// The crate's root source file.
    pub source: PathBuf,
    /// Each `--extern NAME=PATH`: the compiled dependencies the cell names.
    pub externs: Vec<(String, PathBuf)>,
}

/// rustc's options that take their value as the next argument.
const TAKES_VALUE: [&str; 23] = [
    "--crate-name",
    "--crate-type",
    "--edition",
    "--emit",
    "--print",
    "--out-dir",
    "-o",
    "--target",
    "--cfg",
    "--check-cfg",
    "-L",
    "-l",
    "--extern",
    "--cap-lints",
    "-C",
    "--codegen",
    "-W",
    "-A",
    "-D",
    "-F",
    "--remap-path-prefix",
    "-Z",
    "--sysroot",
];

impl Invocation {
    /// Reads `args` (rustc's, without the wrapper's own) run in the folder `build`; `None`
    /// when they do not compile a cell: another crate, a probe such as `-vV`, several source
    /// files, outputs outside `build`, or arguments that are not UTF-8.
    pub fn parse(args: &[OsString], build: &Path) -> Option<Invocation> {
        let args: Vec<String> = args
            .iter()
            .map(|a| a.to_str().map(str::to_owned))
            .collect::<Option<_>>()?;
        let build_text = build.to_str()?;
        if build_text.is_empty() || !build.is_absolute() {
            return None;
        }
        let (mut name, mut cdylib, mut out_dir) = (None, false, None);
        let (mut sources, mut externs) = (Vec::new(), Vec::new());
        let mut i = 0;
        while i < args.len() {
            let arg = args[i].as_str();
            let value = args.get(i + 1).map(String::as_str);
            if TAKES_VALUE.contains(&arg) {
                let value = value?;
                match arg {
                    "--crate-name" => name = Some(value),
                    "--crate-type" => cdylib |= value == "cdylib",
                    "--out-dir" => out_dir = Some(PathBuf::from(value)),
                    "--extern" => {
                        if let Some((crate_name, path)) = value.split_once('=') {
                            externs.push((crate_name.to_owned(), PathBuf::from(path)));
                        }
                    }
                    _ => {}
                }
                i += 2;
                continue;
            }
            if let Some(value) = arg.strip_prefix("--crate-type=") {
                cdylib |= value == "cdylib";
            } else if !arg.starts_with('-') {
                sources.push(arg);
            }
            i += 1;
        }
        let out_dir = out_dir?;
        let [source] = sources[..] else {
            return None;
        };
        if name != Some(CELL_CRATE) || !cdylib || !out_dir.starts_with(build) {
            return None;
        }
        Some(Invocation {
            source: build.join(source),
            externs,
            out_dir,
            build: build.to_owned(),
            args,
        })
    }

    /// The arguments with the build folder written as [`BLANK`]: what two kernels in two
    /// folders compiling the same cell have in common.
    pub fn blanked_args(&self) -> Vec<String> {
        self.args.iter().map(|a| self.blank(a)).collect()
    }

    /// `text` with this build folder written as [`BLANK`].
    pub fn blank(&self, text: &str) -> String {
        text.replace(self.build.to_str().unwrap_or(BLANK), BLANK)
    }

    /// `text` with [`BLANK`] written as this build folder.
    pub fn unblank(&self, text: &str) -> String {
        text.replace(BLANK, self.build.to_str().unwrap_or(BLANK))
    }
}

/// The arguments of this process as cargo's rustc wrapper: `(rustc, rustc's arguments)`.
pub fn wrapper_args(args: &[OsString]) -> Option<(OsString, Vec<OsString>)> {
    let rustc = args.get(1)?.clone();
    Some((rustc, args.get(2..)?.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    const CELL: [&str; 12] = [
        "--crate-name",
        "ctx",
        "--edition=2024",
        "src/lib.rs",
        "--crate-type",
        "cdylib",
        "-C",
        "incremental=/b/target/x/debug/incremental",
        "--out-dir",
        "/b/target/x/debug/deps",
        "--extern",
        "attention_lab=/b/target/x/debug/deps/libattention_lab-1.rlib",
    ];

    #[test]
    fn a_cell_is_read_whole() {
        let cell = Invocation::parse(&os(&CELL), Path::new("/b")).unwrap();
        assert_eq!(cell.source, Path::new("/b/src/lib.rs"));
        assert_eq!(cell.out_dir, Path::new("/b/target/x/debug/deps"));
        assert_eq!(
            cell.externs,
            [(
                "attention_lab".to_owned(),
                PathBuf::from("/b/target/x/debug/deps/libattention_lab-1.rlib")
            )]
        );
        let blanked = cell.blanked_args();
        assert_eq!(blanked[7], "incremental=<build>/target/x/debug/incremental");
        assert_eq!(cell.unblank(&blanked[9]), CELL[9]);
    }

    #[test]
    fn other_crates_and_probes_are_not_cells() {
        let build = Path::new("/b");
        let mut other = CELL;
        other[1] = "ndarray";
        assert!(Invocation::parse(&os(&other), build).is_none());
        let mut rlib = CELL;
        rlib[5] = "lib";
        assert!(Invocation::parse(&os(&rlib), build).is_none());
        assert!(Invocation::parse(&os(&["-vV"]), build).is_none());
        let mut two_sources = os(&CELL);
        two_sources.push("src/other.rs".into());
        assert!(Invocation::parse(&two_sources, build).is_none());
        assert!(Invocation::parse(&os(&CELL), Path::new("relative")).is_none());
        let mut dangling = os(&CELL);
        dangling.push("--extern".into());
        assert!(Invocation::parse(&dangling, build).is_none());
    }

    #[cfg(unix)]
    #[test]
    fn arguments_that_are_not_utf8_are_not_cells() {
        use std::os::unix::ffi::OsStringExt;
        let mut args = os(&CELL);
        args.push(OsString::from_vec(vec![0xff, 0xfe]));
        assert!(Invocation::parse(&args, Path::new("/b")).is_none());
    }
}
