//! What the marks give: each part's points, the gradebook's columns, a student's feedback.

use std::fmt::Write as _;

use super::answers::Key;
use super::mark::{Mark, Verdict};

/// The gradebook's part columns for `heads` heads: `a1..aH, b1..bH, c, d`.
pub fn part_columns(heads: usize) -> Vec<String> {
    let mut cols: Vec<String> = (1..=heads).map(|i| format!("a{i}")).collect();
    cols.extend((1..=heads).map(|i| format!("b{i}")));
    cols.extend(["c".to_string(), "d".to_string()]);
    cols
}

/// The gradebook's columns of a backward sheet's parts, after `d`: `e, f1..fH, g1..gH`.
///
/// ```
/// use attention_lab_classroom::grade::backward_columns;
/// assert_eq!(backward_columns(2), ["e", "f1", "f2", "g1", "g2"]);
/// ```
pub fn backward_columns(heads: usize) -> Vec<String> {
    let mut cols = vec!["e".to_string()];
    cols.extend((1..=heads).map(|i| format!("f{i}")));
    cols.extend((1..=heads).map(|i| format!("g{i}")));
    cols
}

/// Points as the gradebook writes them: `3`, `2.5`.
pub(super) fn points(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// The points of each part column.
pub fn part_points(marks: &[Mark], columns: &[String]) -> Vec<f64> {
    columns
        .iter()
        .map(|c| {
            marks
                .iter()
                .filter(|m| &m.part == c)
                .map(|m| m.verdict.points())
                .sum()
        })
        .collect()
}

/// `S_1:no-sqrt-dk A_2:unknown`: each wrong matrix with its mistake's code.
pub(super) fn mistake_codes(marks: &[Mark]) -> String {
    marks
        .iter()
        .filter_map(|m| match m.verdict {
            Verdict::Mistake(x) => Some(format!("{}:{}", m.matrix.replace(' ', ""), x.code())),
            Verdict::Unexplained => Some(format!("{}:unknown", m.matrix.replace(' ', ""))),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The student's feedback text.
pub fn feedback(student: &str, name: &str, key: &Key, marks: &[Mark]) -> String {
    let total: f64 = marks.iter().map(|m| m.verdict.points()).sum();
    let who = if name.is_empty() {
        student.to_string()
    } else {
        format!("{name} ({student})")
    };
    let mut text = format!(
        "{who}: {} of {} points.\nA number counts as right within {} of the key.\n",
        points(total),
        marks.len(),
        format_tolerance(key.precision)
    );
    let mut columns = part_columns(key.wq.len());
    if key.g.is_some() {
        columns.extend(backward_columns(key.wq.len()));
    }
    for column in &columns {
        let in_part: Vec<&Mark> = marks.iter().filter(|m| &m.part == column).collect();
        let got: f64 = in_part.iter().map(|m| m.verdict.points()).sum();
        let _ = write!(text, "\n({column}) {} of {}", points(got), in_part.len());
        if in_part.iter().all(|m| m.verdict == Verdict::Right) {
            let names: Vec<&str> = in_part.iter().map(|m| m.matrix.as_str()).collect();
            let _ = writeln!(text, ": {} right.", names.join(", "));
            continue;
        }
        text.push_str(":\n");
        for m in in_part {
            let line = match m.verdict {
                Verdict::Right => "right.".to_string(),
                Verdict::CarriedForward => format!(
                    "differs from the key, but it is right for your own {} (an earlier error \
                     carried forward): half a point.",
                    m.inputs
                ),
                Verdict::Mistake(x) => format!("wrong: {}.", x.describe()),
                Verdict::Unexplained => {
                    "wrong, and none of the usual mistakes explains it; check this step by hand."
                        .to_string()
                }
            };
            let _ = writeln!(text, "  {}: {line}", m.matrix);
        }
    }
    text
}

/// `0.0001` for 4 decimals.
fn format_tolerance(precision: usize) -> String {
    format!("{:.precision$}", 10f64.powi(-(precision as i32)))
}
