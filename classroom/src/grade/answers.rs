//! A sheet's key and a student's submission, as `grade` reads them.

use crate::answers::Answers;
use crate::matrices::{matrix, matrix_from_json};
use crate::problem::Problem;
use attention_lab::prelude::{HeadOutput, Mask, MultiHeadOutput};
use attention_lab_io::error::{Error, Result};
use attention_lab_io::problem;
use serde_json::Value;
use std::path::Path;

use super::M;

/// One sheet's key: the given matrices and the decimals the answers are asked in.
#[derive(Debug, Clone)]
pub struct Key {
    /// The student's id.
    pub student: String,
    /// The student's name, possibly empty.
    pub name: String,
    /// Decimals of the answers (the tolerance is `10^-precision`).
    pub precision: usize,
    /// The input.
    pub x: M,
    /// Per head projections.
    pub wq: Vec<M>,
    /// Per head.
    pub wk: Vec<M>,
    /// Per head.
    pub wv: Vec<M>,
    /// Output projection.
    pub wo: M,
    /// A masked sheet's mask, the matrix added to the scores (`"mask"` in the key).
    pub mask: Option<M>,
    /// A backward sheet's `G = dL/d(Z W_O)` (`"g"` in the key).
    pub g: Option<M>,
}

/// A field of a JSON object, named in the error.
fn field<'a>(obj: &'a Value, name: &str) -> Result<&'a Value> {
    obj.get(name)
        .ok_or_else(|| problem!("\"{name}\" is missing"))
}

fn json_matrix_field(obj: &Value, name: &str) -> Result<M> {
    matrix_from_json(field(obj, name)?).map_err(|e| problem!("\"{name}\": {e}"))
}

fn json_matrices_field(obj: &Value, name: &str) -> Result<Vec<M>> {
    field(obj, name)?
        .as_array()
        .ok_or_else(|| problem!("\"{name}\": expected a list of matrices, one per head"))?
        .iter()
        .enumerate()
        .map(|(i, m)| {
            matrix_from_json(m).map_err(|e| problem!("\"{name}\" of head {}: {e}", i + 1))
        })
        .collect()
}

impl Key {
    /// Parses a key written by `exercise --roster`.
    ///
    /// # Errors
    /// What is missing or wrong in the JSON.
    pub fn parse(text: &str) -> Result<Key> {
        let json: Value = serde_json::from_str(text).map_err(|e| problem!("invalid JSON: {e}"))?;
        let text_of = |name: &str| -> Result<String> {
            Ok(field(&json, name)?
                .as_str()
                .ok_or_else(|| problem!("\"{name}\" is not a string"))?
                .to_string())
        };
        let precision = field(&json, "precision")?
            .as_u64()
            .filter(|&p| p <= 16)
            .ok_or("\"precision\" is not a whole number from 0 to 16")?
            as usize;
        let key = Key {
            student: text_of("student")?,
            name: text_of("name")?,
            precision,
            x: json_matrix_field(&json, "x")?,
            wq: json_matrices_field(&json, "wq")?,
            wk: json_matrices_field(&json, "wk")?,
            wv: json_matrices_field(&json, "wv")?,
            wo: json_matrix_field(&json, "wo")?,
            mask: json
                .get("mask")
                .map(|_| json_matrix_field(&json, "mask"))
                .transpose()?,
            g: json
                .get("g")
                .map(|_| json_matrix_field(&json, "g"))
                .transpose()?,
        };
        let solution = key.solution()?;
        // A backward sheet's G must fit its output once here, not fail every submission.
        if let Some(g) = &key.g {
            let result = solution.result();
            if g.dim() != result.dim() {
                return Err(problem!(
                    "\"g\" is {}x{} but the sheet's output Z W_O is {}x{}: G is dL/d(output)",
                    g.nrows(),
                    g.ncols(),
                    result.nrows(),
                    result.ncols()
                ));
            }
        }
        Ok(key)
    }

    /// The key's answers, as `solve` computes them.
    ///
    /// # Errors
    /// The library's shape message when the key's matrices do not fit together.
    pub fn solution(&self) -> Result<MultiHeadOutput> {
        self.problem().solution()
    }

    /// The key's problem: its matrices, mask and `G`.
    pub fn problem(&self) -> Problem {
        Problem {
            x: self.x.clone(),
            wq: self.wq.clone(),
            wk: self.wk.clone(),
            wv: self.wv.clone(),
            wo: self.wo.clone(),
            mask: self.mask.clone().map(Mask::additive_from),
            g: self.g.clone(),
        }
    }
}

/// A student's submission, in the solution's layout.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The student's id (the JSON's `"student"`, else the file or folder name).
    pub student: String,
    /// The answers.
    pub answers: MultiHeadOutput,
    /// The backward pass's answers, when handed in (`"backward"`).
    pub backward: Option<BackwardAnswers>,
}

/// A submission's backward pass, in `solve --backward --json`'s layout: `"backward":
/// {"dwo": ..., "heads": [{"dz", "dweights", "dscores", "dq", "dk", "dv", "dwq", "dwk",
/// "dwv"}, ...]}` (other keys, such as `"dconcat"`, are not read). As `.npy` files:
/// `dwo.npy` and `NAME_i.npy` for each head.
#[derive(Debug, Clone)]
pub struct BackwardAnswers {
    /// `dL/dW_O`.
    pub dwo: M,
    /// Each head's gradients, in the order of [`BACKWARD_FIELDS`].
    pub heads: Vec<Vec<M>>,
}

/// The names of a head's backward answers (JSON keys; `NAME_i.npy` files), in the order a
/// student works them out.
pub const BACKWARD_FIELDS: [&str; 9] = [
    "dz", "dweights", "dscores", "dq", "dk", "dv", "dwq", "dwk", "dwv",
];

/// The names of a head's six matrices in a submission (JSON keys; `NAME_i.npy` files).
const HEAD_FIELDS: [&str; 6] = ["q", "k", "v", "scores", "weights", "z"];

/// The file stem of `path`, as a student id.
pub(super) fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

impl Submission {
    /// Parses a JSON submission; `fallback_id` names the student when it has no `"student"`.
    ///
    /// # Errors
    /// What is missing or not a matrix of numbers.
    pub fn parse_json(text: &str, fallback_id: &str) -> Result<Submission> {
        let Answers {
            student,
            heads,
            concat,
            output,
            backward,
            mask: _,
        } = Answers::parse(text)?;
        let output = output.ok_or("\"output\": expected a matrix, not null")?;
        let backward = backward
            .map(|b| {
                let dwo = b
                    .dwo
                    .ok_or("\"backward\": \"dwo\": expected a matrix, not null")?;
                // In the order of BACKWARD_FIELDS, as the judging reads them.
                let heads = b
                    .heads
                    .into_iter()
                    .map(|h| {
                        vec![
                            h.dz, h.dweights, h.dscores, h.dq, h.dk, h.dv, h.dwq, h.dwk, h.dwv,
                        ]
                    })
                    .collect();
                Ok::<_, Error>(BackwardAnswers { dwo, heads })
            })
            .transpose()?;
        Ok(Submission {
            student: student.unwrap_or_else(|| fallback_id.to_string()),
            answers: MultiHeadOutput {
                heads: heads.into_iter().map(HeadOutput::from).collect(),
                concat,
                output: Some(output),
            },
            backward,
        })
    }

    /// Reads a folder of .npy files: `q_1.npy` ... `z_H.npy` for each head, `concat.npy` and
    /// `output.npy`; the folder's name is the student's id.
    ///
    /// # Errors
    /// The first file that is missing or not a 2-D matrix.
    pub fn read_npy_dir(dir: &Path) -> Result<Submission> {
        let read = |name: &str| -> Result<M> {
            let path = dir.join(format!("{name}.npy"));
            if !path.exists() {
                return Err(problem!("{name}.npy is missing"));
            }
            matrix(name, &path.to_string_lossy()).map_err(|e| {
                // The flag-like prefix is the file's own name; keep the message short.
                let text = e.to_string();
                Error::Input(
                    text.strip_prefix(&format!("{name}: "))
                        .unwrap_or(&text)
                        .to_string(),
                )
            })
        };
        let mut heads = Vec::new();
        for i in 1.. {
            if !dir.join(format!("q_{i}.npy")).exists() && i > 1 {
                break;
            }
            let m = |f: &str| read(&format!("{f}_{i}"));
            heads.push(HeadOutput {
                q: m("q")?,
                k: m("k")?,
                v: m("v")?,
                scores: m("scores")?,
                weights: m("weights")?,
                z: m("z")?,
            });
        }
        let backward = if dir.join("dwo.npy").exists() {
            let heads = (1..=heads.len())
                .map(|i| {
                    BACKWARD_FIELDS
                        .iter()
                        .map(|f| read(&format!("{f}_{i}")))
                        .collect::<Result<Vec<M>>>()
                })
                .collect::<Result<Vec<_>>>()?;
            Some(BackwardAnswers {
                dwo: read("dwo")?,
                heads,
            })
        } else {
            None
        };
        Ok(Submission {
            student: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            answers: MultiHeadOutput {
                heads,
                concat: read("concat")?,
                output: Some(read("output")?),
            },
            backward,
        })
    }

    /// Every matrix's shape agrees with the key's solution, but the output's: an output of
    /// another shape is judged (wrong), not refused, so that the parts before it keep their
    /// marks and a concatenation handed in as the output is named (W_O not applied).
    ///
    /// # Errors
    /// The first matrix whose shape differs, or a different number of heads.
    pub fn check_shapes(&self, solution: &MultiHeadOutput) -> Result<()> {
        let (mine, want) = (&self.answers, solution);
        if mine.heads.len() != want.heads.len() {
            return Err(problem!(
                "{} heads answered, the sheet has {}",
                mine.heads.len(),
                want.heads.len()
            ));
        }
        let shape = |m: &M| format!("({}, {})", m.nrows(), m.ncols());
        let mut pairs: Vec<(String, &M, &M)> = Vec::new();
        for (i, (h, w)) in mine.heads.iter().zip(&want.heads).enumerate() {
            let a = [&h.q, &h.k, &h.v, &h.scores, &h.weights, &h.z];
            let b = [&w.q, &w.k, &w.v, &w.scores, &w.weights, &w.z];
            for (n, name) in HEAD_FIELDS.iter().enumerate() {
                pairs.push((format!("head {}: \"{name}\"", i + 1), a[n], b[n]));
            }
        }
        pairs.push(("\"concat\"".into(), &mine.concat, &want.concat));
        for (name, a, b) in pairs {
            if a.dim() != b.dim() {
                return Err(problem!(
                    "{name} has shape {}, the sheet's is {}",
                    shape(a),
                    shape(b)
                ));
            }
        }
        Ok(())
    }
}
