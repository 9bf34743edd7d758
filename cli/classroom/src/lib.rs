//! The command line of the classroom tools: the flags of `show`, `solve`, `exercise` and
//! `grade` (each module turns its own into the library's options), and the parsing both
//! binaries share: `attention-lab` (`attention-lab-cli`) and `attention-lab-classroom` (this
//! package's). The work is `attention-lab-classroom`'s; no flag lives there.
//!
//! ```
//! use attention_lab_classroom_cli::Command;
//! use clap::Parser;
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(subcommand)]
//!     command: Command,
//! }
//! let cli = Cli::try_parse_from(["attention-lab", "exercise", "--seed", "7"]).unwrap();
//! assert!(matches!(cli.command, Command::Exercise(_)));
//! ```

pub mod exercise;
pub mod grade;
pub mod show;
pub mod solve;

use attention_lab_classroom as classroom;
use attention_lab_io::error::{self, Result, EXIT_BAD_INPUT};
use exercise::ExerciseArgs;
use grade::GradeArgs;
use show::ShowArgs;
use solve::SolveArgs;
use std::process::ExitCode;

/// The classroom subcommands, as `attention-lab` and `attention-lab-classroom` offer them.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Print .npy files exactly as NumPy's print(a) or repr(a) would.
    Show(ShowArgs),
    /// Solve a multi-head self-attention problem step by step, as a NumPy worked example.
    Solve(SolveArgs),
    /// Make a new multi-head self-attention problem sheet (Markdown or LaTeX) from a seed.
    Exercise(ExerciseArgs),
    /// Mark students' answers against their keys and name the mistake of each wrong part.
    Grade(GradeArgs),
}

/// Runs one classroom subcommand; returns its exit status (0 ok, 1 a check failed).
///
/// ```no_run
/// use attention_lab_classroom_cli::{exercise::ExerciseArgs, run, Command};
/// use clap::Parser;
/// #[derive(Parser)]
/// struct Sheet {
///     #[command(flatten)]
///     args: ExerciseArgs,
/// }
/// let sheet = Sheet::try_parse_from(["exercise", "--seed", "7"]).unwrap();
/// assert_eq!(run(Command::Exercise(sheet.args)).unwrap(), 0);
/// ```
///
/// # Errors
/// The subcommand's error: bad input, an unreadable or unwritable file, a failing stdout.
pub fn run(command: Command) -> Result<u8> {
    match command {
        Command::Show(args) => classroom::show::run(args.into()),
        Command::Solve(args) => classroom::solve::run(args.into()),
        Command::Exercise(args) => classroom::make_sheets(&args.into()).map(|()| 0),
        Command::Grade(args) => classroom::grade::run(args.into()),
    }
}

/// Parses the process's arguments as `C`, the way both binaries do: `--help` and `--version`
/// print and end with 0 (a closed pipe is no error), a bad command line is clap's message on
/// one line with status 2.
///
/// ```no_run
/// #[derive(clap::Parser)]
/// struct Cli {
///     #[command(subcommand)]
///     command: attention_lab_classroom_cli::Command,
/// }
/// let cli: Cli = match attention_lab_classroom_cli::parse() {
///     Ok(cli) => cli,
///     Err(status) => return,
/// };
/// ```
///
/// # Errors
/// The status to end with when the arguments were not a command to run.
pub fn parse<C: clap::Parser>() -> std::result::Result<C, ExitCode> {
    match C::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            Err(ExitCode::SUCCESS)
        }
        Err(e) => {
            // clap answers a missing subcommand with the whole help, whose first line is only
            // the description: say what is missing instead.
            let line = (e.kind()
                == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand)
                .then(|| missing_subcommand(&C::command(), std::env::args_os().skip(1)))
                .flatten()
                .unwrap_or_else(|| error::one_line(&e.render().to_string()));
            error::warn(&line);
            Err(ExitCode::from(EXIT_BAD_INPUT))
        }
    }
}

/// The line for a command line that stops before a subcommand: the deepest command that `args`
/// names, and the subcommands it offers; `None` when that command has none.
///
/// ```
/// use attention_lab_classroom_cli::missing_subcommand;
/// let cli = clap::Command::new("tool").subcommand(clap::Command::new("show"));
/// assert_eq!(
///     missing_subcommand(&cli, std::iter::empty::<&str>()).unwrap(),
///     "error: tool: a subcommand is missing: show (tool --help says more)"
/// );
/// ```
pub fn missing_subcommand<I, A>(cli: &clap::Command, args: I) -> Option<String>
where
    I: IntoIterator<Item = A>,
    A: AsRef<std::ffi::OsStr>,
{
    let mut command = cli;
    let mut path = vec![cli.get_name().to_string()];
    for arg in args {
        let Some(sub) = arg
            .as_ref()
            .to_str()
            .and_then(|a| command.find_subcommand(a))
        else {
            continue;
        };
        path.push(sub.get_name().to_string());
        command = sub;
    }
    let names: Vec<&str> = command
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set())
        .map(clap::Command::get_name)
        .collect();
    let path = path.join(" ");
    (!names.is_empty()).then(|| {
        format!(
            "error: {path}: a subcommand is missing: {} ({path} --help says more)",
            names.join(", ")
        )
    })
}
