//! A student of a class: the id that names the student's files, the roster that lists them,
//! and the seed of the student's sheet. Below `roster` (which writes a class's sheets) and
//! `grade` (which marks them), so neither imports the other.
//!
//! Each student's seed is `HMAC-SHA256(secret, "attention-lab exercise seed\0" + id)`, its
//! first four bytes read as a big-endian u32: without the course secret, a student's id does
//! not give the seed, so another student's key cannot be rebuilt.

use attention_lab_io::error::{Error, Result};
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::path::Path;

/// What the HMAC signs before the id, so the secret's use here is its own.
const SEED_CONTEXT: &[u8] = b"attention-lab exercise seed\0";

/// One student of the roster.
///
/// ```
/// use attention_lab_classroom::student::Student;
/// let s = Student { id: "s01".into(), name: "Ada".into() };
/// assert_eq!(s.id, "s01");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Student {
    /// The id: letters, digits, `-`, `_`, `.`; it names the student's files.
    pub id: String,
    /// The name, possibly empty.
    pub name: String,
}

/// The seed of a student's sheet, from the course secret and the id.
///
/// ```
/// use attention_lab_classroom::student::student_seed;
/// let seed = student_seed(b"course secret", "s01");
/// assert_eq!(seed, student_seed(b"course secret", "s01"));
/// assert_ne!(seed, student_seed(b"other secret", "s01"));
/// ```
pub fn student_seed(secret: &[u8], id: &str) -> u32 {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes keys of any length");
    mac.update(SEED_CONTEXT);
    mac.update(id.as_bytes());
    let digest = mac.finalize().into_bytes();
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

/// Reads the roster: a header with a column `id` (any case) and optionally `name`.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let csv = dir.path().join("class.csv");
/// std::fs::write(&csv, "id,name\ns01,Ada\ns02,Alan\n").unwrap();
/// let students = attention_lab_classroom::student::read_roster(&csv).unwrap();
/// assert_eq!(students[1].name, "Alan");
/// std::fs::write(&csv, "id\n../x\n").unwrap();
/// let error = attention_lab_classroom::student::read_roster(&csv).unwrap_err();
/// assert!(error.to_string().contains("line 2"));
/// ```
///
/// # Errors
/// One line naming the file and, for a bad row, its line number.
pub fn read_roster(path: &Path) -> Result<Vec<Student>> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| Error::io(&shown, "read", e))?;
    let mut reader = csv::ReaderBuilder::new()
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(&bytes[..]);
    let headers = reader
        .headers()
        .map_err(|e| Error::at(&shown, format!("not a CSV file: {e}")))?
        .clone();
    let column = |name: &str| headers.iter().position(|h| h.eq_ignore_ascii_case(name));
    let id_col = column("id").ok_or_else(|| {
        Error::at(
            &shown,
            format!(
                "no column named id (the header line is: {})",
                headers.iter().collect::<Vec<_>>().join(",")
            ),
        )
    })?;
    let name_col = column("name");
    let mut students: Vec<Student> = Vec::new();
    let mut lines = std::collections::BTreeMap::new();
    for record in reader.records() {
        let record = record.map_err(|e| Error::at(&shown, format!("not a CSV file: {e}")))?;
        let line = record.position().map_or(0, |p| p.line());
        let at = |problem: String| Error::at(format!("{shown}: line {line}"), problem);
        if record.iter().all(str::is_empty) {
            continue;
        }
        let id = record.get(id_col).unwrap_or("").to_string();
        if id.is_empty() {
            return Err(at("the id is empty".into()));
        }
        if !safe_id(&id) {
            return Err(at(format!(
                "id {id:?} may only hold letters, digits, '-', '_' and '.' (not first), \
                 at most 100 characters, since it names the student's files"
            )));
        }
        if let Some(first) = lines.insert(id.clone(), line) {
            return Err(at(format!("id {id:?} again (first on line {first})")));
        }
        let name = name_col
            .and_then(|c| record.get(c))
            .unwrap_or("")
            .to_string();
        students.push(Student { id, name });
    }
    if students.is_empty() {
        return Err(Error::at(&shown, "no students (only a header line)"));
    }
    Ok(students)
}

/// Letters, digits, `-`, `_` and `.` (not first), at most 100: safe as a file name everywhere.
///
/// ```
/// use attention_lab_classroom::student::safe_id;
/// assert!(safe_id("s01.b"));
/// assert!(!safe_id("../x") && !safe_id(".hidden") && !safe_id("a b") && !safe_id(""));
/// ```
pub fn safe_id(id: &str) -> bool {
    !id.is_empty()
        && !id.starts_with('.')
        && id.len() <= 100
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}
