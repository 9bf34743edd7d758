//! The command line's one error type, its exit statuses, and the writes to stdout and stderr
//! that must never panic (a closed pipe, a full disk, a closed stderr).

use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

/// Exit status when a subcommand's check fails (`replay` mismatches, `grade` ungraded work).
pub const EXIT_CHECK_FAILED: u8 = 1;
/// Exit status for bad input, as clap uses for bad arguments.
pub const EXIT_BAD_INPUT: u8 = 2;

/// A failure of a subcommand, reported as one line on stderr.
#[derive(Debug)]
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
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An [`Error::Input`] from `format!` arguments: `problem!("{flag}: not a number")`.
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
pub fn io_text(e: &io::Error) -> String {
    attention_lab_io::describe(e)
}

/// `cannot {action}: {why}`, for a message that names its file itself.
pub fn io_problem(action: &str, e: &io::Error) -> String {
    format!("cannot {action}: {}", io_text(e))
}

/// Writes `text` to stdout and flushes it.
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
/// writer, [`attention_lab_io::write`]: atomically, through symlinks, keeping its mode.
///
/// # Errors
/// [`Error::Io`] naming `path`: a missing folder, a read-only file, a folder given as a file.
pub fn write_file(path: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    let path = path.as_ref();
    attention_lab_io::write(path, bytes).map_err(|e| Error::io(path.display(), "write", e))
}

/// Writes one line to stderr; a closed or failing stderr is ignored (there is nowhere left to
/// say anything), where `eprintln!` would panic.
pub fn warn(line: &str) {
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// Prints `error` as one line (`error: ...`, a multi-line message joined) unless it is a closed
/// stdout, which ends quietly; returns the exit status.
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
pub fn finish(result: Result<u8>) -> ExitCode {
    match result {
        Ok(status) => ExitCode::from(status),
        Err(error) => report(&error),
    }
}

/// Makes sure file descriptors 0, 1 and 2 are open (on /dev/null when they were closed, as
/// with `2>&-`): otherwise the next file we open becomes "stderr", and a message meant for the
/// terminal lands in it, or its failed write aborts the program.
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
