//! The `grade` command: keys and submissions found, each graded, the gradebook written.

use crate::student::safe_id;
use attention_lab_io::error::{io_problem, warn, write_file, Error, Result, EXIT_CHECK_FAILED};
use attention_lab_io::problem;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::answers::{stem, Key, Submission};
use super::mark::{Mark, Verdict};
use super::report::{backward_columns, feedback, mistake_codes, part_columns, part_points, points};
use super::sheet::{grade, grade_solved};
use attention_lab::prelude::MultiHeadOutput;

/// What `grade` marks: the keys, the submissions, and where the gradebook goes.
///
/// ```no_run
/// use attention_lab_classroom::grade::{run, Options};
/// let options = Options {
///     key: "class/keys".into(),
///     answers: vec!["submissions".into()],
///     out: Some("marks".into()),
/// };
/// let status = run(options)?; // 0, or 1 when a submission could not be graded
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The key of one sheet (ID.json) or a folder of keys, one per student id.
    pub key: PathBuf,
    /// Submissions: ID.json files, ID/ folders of .npy files, or folders holding them.
    pub answers: Vec<PathBuf>,
    /// Write DIR/gradebook.csv and DIR/feedback/ID.txt (DIR is created if missing).
    pub out: Option<PathBuf>,
}

/// The keys to grade with: one for everybody, or a class's folder of `ID.json`, each file
/// read once (by its name's id).
enum Keys {
    One(Box<Key>),
    Folder {
        dir: PathBuf,
        keys: std::collections::BTreeMap<String, Key>,
    },
}

impl Keys {
    fn open(path: &Path) -> Result<Keys> {
        if !path.is_dir() {
            return read_key(path).map(|k| Keys::One(Box::new(k)));
        }
        let entries = std::fs::read_dir(path).map_err(|e| Error::io(path.display(), "read", e))?;
        let keys = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|e| e == "json"))
            .filter_map(|path| Some((stem(&path), read_key(&path).ok()?)))
            .collect();
        Ok(Keys::Folder {
            dir: path.to_path_buf(),
            keys,
        })
    }

    fn for_student(&self, id: &str) -> Result<Key> {
        match self {
            Keys::One(key) => Ok((**key).clone()),
            Keys::Folder { dir, keys } => match keys.get(id) {
                Some(key) => Ok(key.clone()),
                None => {
                    let path = dir.join(format!("{id}.json"));
                    if !path.is_file() {
                        return Err(problem!("no key for student {id:?} in {}", dir.display()));
                    }
                    // Read again only to say what is wrong with it.
                    read_key(&path)
                }
            },
        }
    }

    /// Every key of a class's folder that can be read and solved, with its solution (none
    /// for one key): a submission that misses its own sheet is tried against the others.
    fn others(&self) -> Vec<(Key, MultiHeadOutput)> {
        let Keys::Folder { keys, .. } = self else {
            return Vec::new();
        };
        let mut solved: Vec<(Key, MultiHeadOutput)> = keys
            .values()
            .filter_map(|key| Some((key.clone(), key.solution().ok()?)))
            .collect();
        solved.sort_by(|a, b| a.0.student.cmp(&b.0.student));
        solved
    }
}

/// The student whose sheet `sub`'s answers fit, every part right, when they do not fit the
/// student's own: answers copied from a classmate.
fn fits_another(
    sub: &Submission,
    own: &Key,
    marks: &[Mark],
    others: &[(Key, MultiHeadOutput)],
) -> Option<String> {
    let all_right = |marks: &[Mark]| marks.iter().all(|m| m.verdict == Verdict::Right);
    if all_right(marks) {
        return None;
    }
    others
        .iter()
        .filter(|(key, _)| key.student != own.student)
        .find(|(key, solution)| {
            grade_solved(key, solution, sub).is_ok_and(|marks| all_right(&marks))
        })
        .map(|(key, _)| key.student.clone())
}

fn read_key(path: &Path) -> Result<Key> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(&shown, "read", e))?;
    Key::parse(&text).map_err(|e| Error::at(&shown, e))
}

/// One submission found under a PATH, not yet read.
enum Found {
    Json(PathBuf),
    NpyDir(PathBuf),
}

impl Found {
    fn path(&self) -> &Path {
        match self {
            Found::Json(p) | Found::NpyDir(p) => p,
        }
    }

    fn read(&self) -> Result<Submission> {
        match self {
            Found::Json(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| io_problem("read", &e))?;
                Submission::parse_json(&text, &stem(path))
            }
            Found::NpyDir(dir) => Submission::read_npy_dir(dir),
        }
    }
}

fn has_npy(dir: &Path) -> bool {
    dir.join("q_1.npy").exists()
}

/// The submissions under `path`, in name order: a file, an .npy folder, or a folder of them.
fn find(path: &Path) -> Vec<Found> {
    if !path.is_dir() {
        return vec![Found::Json(path.to_path_buf())];
    }
    if has_npy(path) {
        return vec![Found::NpyDir(path.to_path_buf())];
    }
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(path) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => return vec![Found::Json(path.to_path_buf())],
    };
    entries.sort();
    entries
        .into_iter()
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .filter_map(|p| {
            if p.is_dir() {
                Some(Found::NpyDir(p))
            } else if p.extension().is_some_and(|e| e == "json") {
                Some(Found::Json(p))
            } else {
                None
            }
        })
        .collect()
}

/// One student's outcome.
struct Outcome {
    student: String,
    name: String,
    heads: usize,
    result: Result<Vec<Mark>>,
    key: Option<Key>,
    /// Another student whose sheet these answers fit.
    fits: Option<String>,
}

fn grade_one(keys: &Keys, others: &[(Key, MultiHeadOutput)], found: &Found) -> Outcome {
    let fallback = match found {
        Found::Json(p) => stem(p),
        Found::NpyDir(p) => p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let sub = match found.read() {
        Ok(sub) => sub,
        Err(e) => {
            // The gradebook still shows the student's name when the key is there.
            let name = keys
                .for_student(&fallback)
                .map(|k| k.name)
                .unwrap_or_default();
            return Outcome {
                student: fallback,
                name,
                heads: 0,
                result: Err(e),
                key: None,
                fits: None,
            };
        }
    };
    // The id names files (a key, a feedback text): only plain ids are taken.
    let key = match Some(&sub.student)
        .filter(|id| safe_id(id))
        .ok_or_else(|| {
            problem!(
                "the student id {:?} may only hold letters, digits, '-', '_' and '.'",
                sub.student
            )
        })
        .and_then(|id| keys.for_student(id))
    {
        Ok(key) => key,
        Err(e) => {
            return Outcome {
                student: sub.student,
                name: String::new(),
                heads: 0,
                result: Err(e),
                key: None,
                fits: None,
            }
        }
    };
    // One key for a whole class carries one student's name: show names only from own keys.
    let name = if key.student == sub.student {
        key.name.clone()
    } else {
        String::new()
    };
    let result = grade(&key, &sub);
    let fits = result
        .as_ref()
        .ok()
        .and_then(|marks| fits_another(&sub, &key, marks, others));
    Outcome {
        student: sub.student.clone(),
        name,
        heads: key.wq.len(),
        result,
        key: Some(key),
        fits,
    }
}

/// The gradebook: `student,name,a1..,b1..,c,d,total,max,mistakes`.
fn gradebook(outcomes: &[Outcome]) -> Result<String> {
    let heads = outcomes.iter().map(|o| o.heads).max().unwrap_or(0);
    let mut columns = part_columns(heads);
    // A backward sheet's columns, when some submission was graded on one.
    let backward = |o: &Outcome| {
        o.result
            .as_ref()
            .is_ok_and(|marks| marks.iter().any(|m| m.part == "e"))
    };
    if outcomes.iter().any(backward) {
        columns.extend(backward_columns(heads));
    }
    let mut csv = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    let mut header = vec!["student".to_string(), "name".to_string()];
    header.extend(columns.iter().cloned());
    header.extend(["total", "max", "mistakes"].map(String::from));
    csv.write_record(&header)
        .map_err(|e| Error::Input(e.to_string()))?;
    for o in outcomes {
        let mut row = vec![o.student.clone(), o.name.clone()];
        match &o.result {
            Ok(marks) => {
                let got = part_points(marks, &columns);
                let mut mine = part_columns(o.heads);
                if backward(o) {
                    mine.extend(backward_columns(o.heads));
                }
                row.extend(columns.iter().zip(&got).map(|(c, &g)| {
                    if mine.contains(c) {
                        points(g)
                    } else {
                        String::new()
                    }
                }));
                row.push(points(marks.iter().map(|m| m.verdict.points()).sum()));
                row.push(marks.len().to_string());
                row.push(mistake_codes(marks));
            }
            Err(_) => {
                row.extend(columns.iter().map(|_| String::new()));
                row.extend([String::new(), String::new(), "not-graded".to_string()]);
            }
        }
        csv.write_record(&row)
            .map_err(|e| Error::Input(e.to_string()))?;
    }
    let bytes = csv.into_inner().map_err(|e| Error::Input(e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| Error::Input(e.to_string()))
}

/// Runs `grade`; returns the exit status: 0 every submission graded, 1 some could not be.
///
/// # Errors
/// An unreadable key, no submissions, an output file that cannot be written, a failing stdout.
pub fn run(args: Options) -> Result<u8> {
    let keys = Keys::open(&args.key).map_err(|e| Error::at("--key", e))?;
    let found: Vec<Found> = args.answers.iter().flat_map(|p| find(p)).collect();
    if found.is_empty() {
        return Err(Error::at(
            "--answers",
            "no submissions found (ID.json files or ID/ folders of .npy files)",
        ));
    }
    let others = keys.others();
    let mut outcomes: Vec<Outcome> = found.iter().map(|f| grade_one(&keys, &others, f)).collect();
    // A second submission for the same student is not graded: say so rather than guess.
    let mut seen = std::collections::BTreeSet::new();
    for (o, f) in outcomes.iter_mut().zip(&found) {
        if o.result.is_ok() && !seen.insert(o.student.clone()) {
            o.result = Err(problem!(
                "a second submission for student {:?} ({})",
                o.student,
                f.path().display()
            ));
        }
    }
    let mut failed = false;
    let mut stdout_error = None;
    for (o, f) in outcomes.iter().zip(&found) {
        match &o.result {
            Ok(marks) => {
                let total: f64 = marks.iter().map(|m| m.verdict.points()).sum();
                let codes = mistake_codes(marks);
                // A closed pipe (`grade ... | head`) ends the listing quietly; the files of
                // --out are still written.
                let line = writeln!(
                    std::io::stdout(),
                    "{}: {} of {}{}{}",
                    o.student,
                    points(total),
                    marks.len(),
                    if codes.is_empty() {
                        String::new()
                    } else {
                        format!(" ({codes})")
                    },
                    fits_text(o)
                );
                if let Err(e) = line {
                    stdout_error.get_or_insert(e);
                }
            }
            Err(e) => {
                failed = true;
                warn(&format!(
                    "error: {}: student {:?} not graded: {}",
                    f.path().display(),
                    o.student,
                    e.to_string().replace(['\n', '\r'], " ")
                ));
            }
        }
    }
    if let Some(out) = &args.out {
        write_out(out, &outcomes)?;
    }
    if let Some(e) = stdout_error.filter(|e| e.kind() != std::io::ErrorKind::BrokenPipe) {
        return Err(Error::Stdout(e));
    }
    Ok(if failed { EXIT_CHECK_FAILED } else { 0 })
}

/// What the listing says of answers that fit another student's sheet.
fn fits_text(o: &Outcome) -> String {
    o.fits
        .as_ref()
        .map(|other| format!("; these answers fit the sheet of {other}"))
        .unwrap_or_default()
}

fn write_out(out: &Path, outcomes: &[Outcome]) -> Result<()> {
    let shown = out.display().to_string();
    let feedback_dir = out.join("feedback");
    std::fs::create_dir_all(&feedback_dir).map_err(|e| Error::io(&shown, "create", e))?;
    let book = gradebook(outcomes).map_err(|e| Error::at(&shown, e))?;
    let path = out.join("gradebook.csv");
    write_file(&path, book.as_bytes())?;
    for o in outcomes {
        let text = match (&o.result, &o.key) {
            (Ok(marks), Some(key)) => {
                let mut text = feedback(&o.student, &o.name, key, marks);
                if let Some(other) = &o.fits {
                    text += &format!("These answers fit the sheet of {other}, not this one.\n");
                }
                text
            }
            (Err(e), _) => format!("{}: not graded: {e}\n", o.student),
            (Ok(_), None) => continue,
        };
        // Ids from submissions may hold anything; only plain ones name a file.
        if !safe_id(&o.student) {
            continue;
        }
        let path = feedback_dir.join(format!("{}.txt", o.student));
        write_file(&path, text.as_bytes())?;
    }
    Ok(())
}
