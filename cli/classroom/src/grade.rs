//! The flags of `grade`.

use attention_lab_classroom::grade::Options;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `attention-lab grade`.
#[derive(Debug, Args)]
#[command(
    after_help = "Example (a class made with exercise --roster roster.csv --out class):\n  \
    attention-lab grade --key class/keys --answers submissions/ --out marks\n\n\
    KEY is one key (.json, from exercise --roster) or the folder of a class's keys, found by\n\
    student id. PATH is a submission (ID.json, or a folder ID/ of .npy files) or a folder of\n\
    them. With --out, DIR/gradebook.csv has one row per student and one column per part, and\n\
    DIR/feedback/ID.txt a short text for each student. Exit status: 0 when every submission\n\
    was graded, 1 when some could not be (each is reported in one line), 2 for bad arguments."
)]
pub struct GradeArgs {
    /// The key of one sheet (ID.json) or a folder of keys, one per student id.
    #[arg(long, value_name = "KEY")]
    pub key: PathBuf,
    /// Submissions: ID.json files, ID/ folders of .npy files, or folders holding them.
    #[arg(long, value_name = "PATH", required = true, num_args = 1..)]
    pub answers: Vec<PathBuf>,
    /// Write DIR/gradebook.csv and DIR/feedback/ID.txt (DIR is created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

impl From<GradeArgs> for Options {
    fn from(args: GradeArgs) -> Options {
        let GradeArgs { key, answers, out } = args;
        Options { key, answers, out }
    }
}
