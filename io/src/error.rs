//! The command line's one error type, its exit statuses, and the writes to stdout and stderr
//! that must never panic (a closed pipe, a full disk, a closed stderr). The classroom tools and
//! the Jupyter side return it; the binaries turn it into one line and a status ([`finish`]).

use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

/// Exit status when a subcommand's check fails (`replay` mismatches, `grade` ungraded work).
///
/// ```
/// assert_eq!(attention_lab_io::error::EXIT_CHECK_FAILED, 1);
/// ```
pub const EXIT_CHECK_FAILED: u8 = 1;
/// Exit status for bad input, as clap uses for bad arguments.
///
/// ```
/// use attention_lab_io::error::{Error, EXIT_BAD_INPUT};
/// assert_eq!(Error::at("--x", "not a matrix").status(), EXIT_BAD_INPUT);
/// ```
pub const EXIT_BAD_INPUT: u8 = 2;

/// A failure of a subcommand, reported as one line on stderr.
///
/// ```
/// use attention_lab_io::error::Error;
/// let e = Error::at("x.npy", "not a .npy file");
/// assert_eq!(e.to_string(), "x.npy: not a .npy file");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Bad input: the message names the file or flag and the problem. Exit status 2.
    Input(String),
    /// A file the user named could not be read, written or created. Exit status 2.
    Io {
        /// The file or folder as the user wrote it.
        path: String,
        /// What was tried: "read", "write", "create".
        action: &'static str,
        /// Why it failed.
        source: io::Error,
    },
    /// Writing the result to stdout failed. A closed pipe ends quietly with status 0, as in
    /// ripgrep (`attention-lab show a.npy | head -1`); anything else (a full disk) is status 2.
    Stdout(io::Error),
}

/// The result of every fallible step of a subcommand.
///
/// ```
/// fn parse(flag: &str) -> attention_lab_io::error::Result<u8> {
///     flag.parse().map_err(|_| attention_lab_io::problem!("{flag}: not a number"))
/// }
/// assert!(parse("x").is_err());
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An [`Error::Input`] from `format!` arguments: `problem!("{flag}: not a number")`.
///
/// ```
/// let flag = "--seed";
/// let e = attention_lab_io::problem!("{flag}: not a number");
/// assert_eq!(e.to_string(), "--seed: not a number");
/// ```
#[macro_export]
macro_rules! problem {
    ($($arg:tt)*) => {
        $crate::error::Error::Input(format!($($arg)*))
    };
}

impl Error {
    /// An error about `what` (a file name or a flag), e.g. `--wq: not a number`.
    pub fn at(what: impl fmt::Display, problem: impl fmt::Display) -> Error {
        Error::Input(format!("{what}: {problem}"))
    }

    /// A failed `action` ("read", "write", "create") on the file the user called `path`.
    pub fn io(path: impl fmt::Display, action: &'static str, source: io::Error) -> Error {
        Error::Io {
            path: path.to_string(),
            action,
            source,
        }
    }

    /// The exit status this error ends the program with.
    pub fn status(&self) -> u8 {
        match self {
            Error::Stdout(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
            _ => EXIT_BAD_INPUT,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Input(message) => f.write_str(message),
            Error::Io {
                path,
                action,
                source,
            } => write!(f, "{path}: cannot {action}: {}", io_text(source)),
            Error::Stdout(source) => write!(f, "stdout: {}", io_text(source)),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Input(_) => None,
            Error::Io { source, .. } | Error::Stdout(source) => Some(source),
        }
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Error {
        Error::Input(message.to_owned())
    }
}

impl From<String> for Error {
    fn from(message: String) -> Error {
        Error::Input(message)
    }
}

/// An I/O error as a person reads it: lower case, without Rust's " (os error N)" suffix.
///
/// ```
/// let e = std::io::Error::from(std::io::ErrorKind::NotFound);
/// assert!(!attention_lab_io::error::io_text(&e).contains("os error"));
/// ```
pub fn io_text(e: &io::Error) -> String {
    crate::describe(e)
}

/// `cannot {action}: {why}`, for a message that names its file itself.
///
/// ```
/// let e = std::io::Error::from(std::io::ErrorKind::NotFound);
/// assert!(attention_lab_io::error::io_problem("read", &e).starts_with("cannot read: "));
/// ```
pub fn io_problem(action: &str, e: &io::Error) -> String {
    format!("cannot {action}: {}", io_text(e))
}

/// Writes `text` to stdout and flushes it.
///
/// ```
/// attention_lab_io::error::print("[[1. 2.]]\n").unwrap();
/// ```
///
/// # Errors
/// [`Error::Stdout`] when stdout is closed or full.
pub fn print(text: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(Error::Stdout)
}

/// Writes a file the user named (`--output`, `--out`, `--json`, `--update`) with the one
/// writer, [`crate::write`]: atomically, through symlinks, keeping its mode.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// attention_lab_io::error::write_file(dir.path().join("sheet.md"), b"# Sheet\n").unwrap();
/// let e = attention_lab_io::error::write_file(dir.path().join("no/such.md"), b"").unwrap_err();
/// assert!(e.to_string().contains("no/such.md: cannot write"));
/// ```
///
/// # Errors
/// [`Error::Io`] naming `path`: a missing folder, a read-only file, a folder given as a file.
pub fn write_file(path: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    let path = path.as_ref();
    crate::write(path, bytes).map_err(|e| Error::io(path.display(), "write", e))
}

/// Writes one line to stderr; a closed or failing stderr is ignored (there is nowhere left to
/// say anything), where `eprintln!` would panic.
///
/// ```
/// attention_lab_io::error::warn("note: pdflatex is not on PATH");
/// ```
pub fn warn(line: &str) {
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// Prints `error` as one line (`error: ...`, a multi-line message joined) unless it is a closed
/// stdout, which ends quietly; returns the exit status.
///
/// ```
/// use attention_lab_io::error::{report, Error};
/// let status = report(&Error::at("--x", "not a matrix")); // prints "error: --x: not a matrix"
/// assert_eq!(status, std::process::ExitCode::from(2));
/// ```
pub fn report(error: &Error) -> ExitCode {
    let quiet = matches!(error, Error::Stdout(e) if e.kind() == io::ErrorKind::BrokenPipe);
    if !quiet {
        // A message may quote a file's bytes or a JSON error; keep it to one line.
        warn(&format!(
            "error: {}",
            error.to_string().replace(['\n', '\r'], " ")
        ));
    }
    ExitCode::from(error.status())
}

/// Ends `main`: the subcommand's own status, or the error's.
///
/// ```
/// use attention_lab_io::error::finish;
/// assert_eq!(finish(Ok(1)), std::process::ExitCode::from(1));
/// ```
pub fn finish(result: Result<u8>) -> ExitCode {
    match result {
        Ok(status) => ExitCode::from(status),
        Err(error) => report(&error),
    }
}

/// Makes sure file descriptors 0, 1 and 2 are open (on /dev/null when they were closed, as
/// with `2>&-`): otherwise the next file we open becomes "stderr", and a message meant for the
/// terminal lands in it, or its failed write aborts the program.
///
/// ```
/// attention_lab_io::error::open_standard_streams();
/// ```
#[cfg(unix)]
pub fn open_standard_streams() {
    for fd in 0..=2 {
        // SAFETY: fcntl(F_GETFD) only queries the descriptor.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            // SAFETY: a NUL-terminated path; open returns the lowest free descriptor, this one.
            let opened = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
            if opened != fd && opened >= 0 {
                // SAFETY: closing the descriptor we just opened.
                unsafe { libc::close(opened) };
            }
        }
    }
}

/// Nothing to do where descriptors cannot be closed by the caller.
#[cfg(not(unix))]
pub fn open_standard_streams() {}

/// clap's message up to its first blank line, on one line: `error: invalid value 'x' for
/// '--seed <S>': invalid digit found in string` (the usage and the `--help` tip are dropped).
///
/// ```
/// let clap = "error: unexpected argument '--x' found\n\n  tip: ...\n\nUsage: attention-lab";
/// assert_eq!(attention_lab_io::error::one_line(clap), "error: unexpected argument '--x' found");
/// ```
pub fn one_line(message: &str) -> String {
    message
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A bug (ours or evcxr's) should give one line, not a backtrace, even though
/// RUST_BACKTRACE may be set; a closed stderr must not turn it into an abort.
///
/// ```
/// attention_lab_io::error::install_panic_hook();
/// ```
pub fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_owned());
        let location = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("unnamed");
        warn(&format!(
            "internal error in thread {name}: {payload}{location}"
        ));
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn os_error_text_is_readable() {
        let e = io::Error::from_raw_os_error(28);
        assert_eq!(io_text(&e), "no space left on device");
        assert_eq!(
            Error::Stdout(e).to_string(),
            "stdout: no space left on device"
        );
        let e = io::Error::from_raw_os_error(libc::ENOTDIR);
        assert_eq!(
            Error::io("out/x.md", "write", e).to_string(),
            "out/x.md: cannot write: not a directory"
        );
    }

    #[test]
    fn closed_pipe_is_quiet_and_successful() {
        let e = Error::Stdout(io::Error::from(io::ErrorKind::BrokenPipe));
        assert_eq!(e.status(), 0);
        assert_eq!(Error::Stdout(io::Error::from_raw_os_error(28)).status(), 2);
        assert_eq!(Error::at("--x", "not a number").status(), 2);
    }
}
