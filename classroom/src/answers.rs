//! The answers JSON, owned here: what `solve --json` prints, what a roster's key holds under
//! `"solution"`, and what `grade` reads from a student. One typed struct ([`Answers`]), one
//! writer ([`Answers::to_json`], and [`matrix_json`] for a lone matrix) and one reader by
//! field names ([`Answers::parse`], [`Answers::read`]).
//!
//! The layout: `{"student", "mask", "heads": [{"q", "k", "v", "scores", "weights", "z"}],
//! "concat", "output", "backward"}`, keys in that order, `"student"`, `"mask"` and
//! `"backward"` only when there is one, `"output"` null without W_O. Separators are `", "` and
//! `": "` (Python's `json.dumps`); numbers are the shortest digits that read back as the same
//! f64; NaN and the infinities, which JSON cannot hold, are the strings `"NaN"`, `"Infinity"`
//! and `"-Infinity"`. A reader takes the fields in any order and ignores others.
//!
//! Here and not in the core library: the reader needs serde, which a notebook's first cell
//! should not compile. A notebook writes the same layout with `attention_lab::answers_json`
//! (no JSON dependency); the tests below read its files back through [`Answers::parse`].

use crate::matrices::matrix_from_json;
use attention_lab::prelude::{HeadOutput, Mask, MultiHeadOutput};
use attention_lab_io::error::{Error, Result};
use attention_lab_io::problem;
use ndarray::{Array1, Array2, ArrayView1};
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use std::fmt;
use std::path::Path;

/// A matrix of the answers.
type M = Array2<f64>;

/// Every intermediate of a multi-head forward pass, and optionally its backward pass.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_classroom::answers::Answers;
///
/// let w = Array2::<f64>::eye(1);
/// let out = MultiHead::new(vec![Head::new(w.clone(), w.clone(), w)?], None)?
///     .forward(&array![[2.0]], &Attend::new())?;
/// let json = Answers::new(&out).to_json()?;
/// assert_eq!(
///     json,
///     r#"{"heads": [{"q": [[2.0]], "k": [[2.0]], "v": [[2.0]], "scores": [[4.0]], "weights": [[1.0]], "z": [[2.0]]}], "concat": [[2.0]], "output": null}"#
/// );
/// assert_eq!(Answers::parse(&json)?, Answers::new(&out));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answers {
    /// The student's id; a file without it is named by its file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub student: Option<String>,
    /// A masked problem's mask: the matrix added to the scores (0, or -inf where blocked).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "maybe_grid")]
    pub mask: Option<M>,
    /// Each head's intermediates, in order.
    pub heads: Vec<HeadAnswers>,
    /// The heads' outputs side by side.
    #[serde(with = "grid")]
    pub concat: M,
    /// `concat W_O`; null without W_O, but never missing.
    #[serde(with = "maybe_grid")]
    pub output: Option<M>,
    /// The backward pass (`solve --backward`, a backward sheet's answers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backward: Option<BackwardAnswers>,
}

/// One head's intermediates: `"q"`, `"k"`, `"v"`, `"scores"`, `"weights"`, `"z"`.
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_classroom::answers::HeadAnswers;
///
/// let m = array![[1.0]];
/// let head = HeadAnswers { q: m.clone(), k: m.clone(), v: m.clone(), scores: m.clone(), weights: m.clone(), z: m };
/// assert_eq!(HeadOutput::from(head.clone()).z, head.z);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)] // each field is the `HeadOutput` field of its name
pub struct HeadAnswers {
    #[serde(with = "grid")]
    pub q: M,
    #[serde(with = "grid")]
    pub k: M,
    #[serde(with = "grid")]
    pub v: M,
    #[serde(with = "grid")]
    pub scores: M,
    #[serde(with = "grid")]
    pub weights: M,
    #[serde(with = "grid")]
    pub z: M,
}

/// The backward pass: `{"dresult", "dconcat", "dwo", "dbo", "heads": [...], "dx"}`. `solve`
/// writes every field (`"dwo"` null without W_O, `"dbo"` only with b_O); a student hands in
/// at least `"dwo"` and the heads, so the others may be missing when read.
///
/// ```
/// use attention_lab_classroom::answers::Answers;
///
/// let text = r#"{"heads": [], "concat": [[1]], "output": [[1]], "backward": {"dwo": [[0.5]], "heads": []}}"#;
/// let backward = Answers::parse(text)?.backward.unwrap();
/// assert_eq!(backward.dwo.unwrap()[[0, 0]], 0.5);
/// assert!(backward.dx.is_none());
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackwardAnswers {
    /// `G = dL/d(result)`, the gradient the pass starts from.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "maybe_grid")]
    pub dresult: Option<M>,
    /// `dL/dZ` of the concatenation.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "maybe_grid")]
    pub dconcat: Option<M>,
    /// `dL/dW_O`; null without W_O, but never missing.
    #[serde(with = "maybe_grid")]
    pub dwo: Option<M>,
    /// `dL/db_O`, when the layer has b_O.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "maybe_row")]
    pub dbo: Option<Array1<f64>>,
    /// Each head's gradients, in order.
    pub heads: Vec<HeadGradients>,
    /// `dL/dX`.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "maybe_grid")]
    pub dx: Option<M>,
}

/// One head's gradients, in the order a student works them out; the biases' only when the
/// head has biases.
///
/// ```
/// use attention_lab_classroom::answers::HeadGradients;
/// # let m = ndarray::array![[1.0]];
/// # let g = HeadGradients { dz: m.clone(), dweights: m.clone(), dscores: m.clone(), dq: m.clone(), dk: m.clone(), dv: m.clone(), dwq: m.clone(), dwk: m.clone(), dwv: m, dbq: None, dbk: None, dbv: None };
/// assert!(g.dbq.is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)] // each field is `dL/d` of the matrix it names
pub struct HeadGradients {
    #[serde(with = "grid")]
    pub dz: M,
    #[serde(with = "grid")]
    pub dweights: M,
    #[serde(with = "grid")]
    pub dscores: M,
    #[serde(with = "grid")]
    pub dq: M,
    #[serde(with = "grid")]
    pub dk: M,
    #[serde(with = "grid")]
    pub dv: M,
    #[serde(with = "grid")]
    pub dwq: M,
    #[serde(with = "grid")]
    pub dwk: M,
    #[serde(with = "grid")]
    pub dwv: M,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "maybe_row")]
    pub dbq: Option<Array1<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "maybe_row")]
    pub dbk: Option<Array1<f64>>,
    #[serde(default, skip_serializing_if = "Option::is_none", with = "maybe_row")]
    pub dbv: Option<Array1<f64>>,
}

impl From<&HeadOutput> for HeadAnswers {
    fn from(h: &HeadOutput) -> HeadAnswers {
        HeadAnswers {
            q: h.q.clone(),
            k: h.k.clone(),
            v: h.v.clone(),
            scores: h.scores.clone(),
            weights: h.weights.clone(),
            z: h.z.clone(),
        }
    }
}

impl From<HeadAnswers> for HeadOutput {
    fn from(h: HeadAnswers) -> HeadOutput {
        HeadOutput {
            q: h.q,
            k: h.k,
            v: h.v,
            scores: h.scores,
            weights: h.weights,
            z: h.z,
        }
    }
}

impl Answers {
    /// The answers of the forward pass `out`: no student, mask or backward pass.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_classroom::answers::Answers;
    ///
    /// let w = Array2::<f64>::eye(1);
    /// let out = MultiHead::new(vec![Head::new(w.clone(), w.clone(), w)?], None)?
    ///     .forward(&array![[2.0]], &Attend::new())?;
    /// assert_eq!(Answers::new(&out).heads[0].z, array![[2.0]]);
    /// # Ok::<(), AttentionError>(())
    /// ```
    pub fn new(out: &MultiHeadOutput) -> Answers {
        Answers {
            student: None,
            mask: None,
            heads: out.heads.iter().map(HeadAnswers::from).collect(),
            concat: out.concat.clone(),
            output: out.output.clone(),
            backward: None,
        }
    }

    /// These answers with `mask`'s matrix (added to the scores) as `"mask"`.
    ///
    /// ```
    /// use attention_lab::prelude::*;
    /// use attention_lab_classroom::answers::Answers;
    ///
    /// let w = Array2::<f64>::eye(1);
    /// let out = MultiHead::new(vec![Head::new(w.clone(), w.clone(), w)?], None)?
    ///     .forward(&array![[2.0]], &Attend::new())?;
    /// let json = Answers::new(&out).with_mask(Some(&Mask::causal(1))).to_json()?;
    /// assert!(json.starts_with(r#"{"mask": [[0.0]], "heads""#));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_mask(self, mask: Option<&Mask>) -> Answers {
        Answers {
            mask: mask.map(|m| m.additive().clone()),
            ..self
        }
    }

    /// The forward pass these answers give; `None` for the output when it is null.
    ///
    /// ```
    /// use attention_lab_classroom::answers::Answers;
    ///
    /// let out = Answers::parse(r#"{"heads": [], "concat": [[1]], "output": null}"#)?.into_output();
    /// assert!(out.output.is_none());
    /// # Ok::<(), attention_lab_io::error::Error>(())
    /// ```
    pub fn into_output(self) -> MultiHeadOutput {
        MultiHeadOutput {
            heads: self.heads.into_iter().map(HeadOutput::from).collect(),
            concat: self.concat,
            output: self.output,
        }
    }

    /// The answers as one line of JSON (no newline), in the module's layout.
    ///
    /// ```
    /// use attention_lab_classroom::answers::Answers;
    ///
    /// let text = r#"{"heads": [], "concat": [[1.0, "NaN"]], "output": null}"#;
    /// assert_eq!(Answers::parse(text)?.to_json()?, text);
    /// # Ok::<(), attention_lab_io::error::Error>(())
    /// ```
    ///
    /// # Errors
    /// None in practice: serde_json fails only on a writer's error or a map with keys that
    /// are not strings, and these answers write to memory and have no map.
    pub fn to_json(&self) -> Result<String> {
        json(self)
    }

    /// Reads answers by field names, in any order; other fields are ignored.
    ///
    /// ```
    /// use attention_lab_classroom::answers::Answers;
    ///
    /// let e = Answers::parse(r#"{"heads": [], "concat": [[1]]}"#).unwrap_err();
    /// assert_eq!(e.to_string(), "\"output\" is missing");
    /// # Ok::<(), attention_lab_io::error::Error>(())
    /// ```
    ///
    /// # Errors
    /// One line: invalid JSON, or the field that is missing or bad, with its head
    /// (`head 2: "weights": element [0][1] is not a number: "0.5x"`).
    pub fn parse(text: &str) -> Result<Answers> {
        let value: Value = serde_json::from_str(text).map_err(|e| problem!("invalid JSON: {e}"))?;
        Answers::deserialize(Named(value)).map_err(|e| Error::Input(e.0))
    }

    /// Reads the answers file `path`, as [`Answers::parse`].
    ///
    /// ```
    /// use attention_lab_classroom::answers::Answers;
    ///
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("ada.json");
    /// std::fs::write(&path, r#"{"heads": [], "concat": [[1]]}"#)?;
    /// assert!(Answers::read(&path).unwrap_err().to_string().ends_with("ada.json: \"output\" is missing"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// The file cannot be read, or [`Answers::parse`]'s error, each naming the file.
    pub fn read(path: &Path) -> Result<Answers> {
        let shown = path.display();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(&shown, "read", e))?;
        Answers::parse(&text).map_err(|e| Error::at(&shown, e))
    }
}

/// A matrix as JSON, as [`Answers::to_json`] writes each: `[[1.0, 2.5], [3.0, "NaN"]]`.
///
/// ```
/// use attention_lab_classroom::answers::matrix_json;
/// assert_eq!(matrix_json(&ndarray::array![[1.0, 2.5], [f64::NEG_INFINITY, 1e-7]])?, r#"[[1.0, 2.5], ["-Infinity", 1e-7]]"#);
/// # Ok::<(), attention_lab_io::error::Error>(())
/// ```
///
/// # Errors
/// None in practice, as [`Answers::to_json`].
pub fn matrix_json(m: &M) -> Result<String> {
    struct Grid<'a>(&'a M);
    impl Serialize for Grid<'_> {
        fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
            grid::serialize(self.0, s)
        }
    }
    json(&Grid(m))
}

/// The one writer: serde_json with Python's separators.
fn json(value: &impl Serialize) -> Result<String> {
    let mut bytes = Vec::new();
    let mut writer = serde_json::Serializer::with_formatter(&mut bytes, Spaced);
    value
        .serialize(&mut writer)
        .map_err(|e| problem!("cannot write JSON: {e}"))?;
    String::from_utf8(bytes).map_err(|e| problem!("cannot write JSON: {e}"))
}

/// `", "` between items and `": "` after keys, as Python's `json.dumps` and NumPy's goldens;
/// numbers as serde_json's (ryu's shortest round-trip digits).
struct Spaced;

impl serde_json::ser::Formatter for Spaced {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.begin_array_value(w, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// A number, or the string JSON needs for NaN and the infinities.
struct Number(f64);

impl Serialize for Number {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let x = self.0;
        match () {
            _ if x.is_finite() => s.serialize_f64(x),
            _ if x.is_nan() => s.serialize_str("NaN"),
            _ if x > 0.0 => s.serialize_str("Infinity"),
            _ => s.serialize_str("-Infinity"),
        }
    }
}

/// One row of numbers.
struct Row<'a>(ArrayView1<'a, f64>);

impl Serialize for Row<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|&x| Number(x)))
    }
}

/// A matrix field: rows of numbers.
mod grid {
    use super::{matrix_from_json, Row, Value, M};
    use serde::{de, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &M, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.rows().into_iter().map(Row))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<M, D::Error> {
        matrix_from_json(&Value::deserialize(d)?).map_err(de::Error::custom)
    }
}

/// A matrix field that may be null.
mod maybe_grid {
    use super::{matrix_from_json, Value, M};
    use serde::{de, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &Option<M>, s: S) -> Result<S::Ok, S::Error> {
        match m {
            Some(m) => super::grid::serialize(m, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<M>, D::Error> {
        Option::<Value>::deserialize(d)?
            .map(|v| matrix_from_json(&v).map_err(de::Error::custom))
            .transpose()
    }
}

/// A bias's gradient: one flat row of numbers, `[0.5, 1.0]`.
mod maybe_row {
    use super::{matrix_from_json, Row, Value};
    use ndarray::Array1;
    use serde::{de, Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Array1<f64>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => Row(v.view()).serialize(s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Array1<f64>>, D::Error> {
        let Some(row) = Option::<Value>::deserialize(d)? else {
            return Ok(None);
        };
        let m = matrix_from_json(&Value::Array(vec![row])).map_err(de::Error::custom)?;
        Ok(Some(m.row(0).to_owned()))
    }
}

/// A read's error: one line, the path of what failed first (`head 2: "z" is missing`).
#[derive(Debug)]
struct Bad(String);

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Bad {}

impl de::Error for Bad {
    fn custom<T: fmt::Display>(msg: T) -> Bad {
        Bad(msg.to_string())
    }

    fn missing_field(field: &'static str) -> Bad {
        Bad(format!("\"{field}\" is missing"))
    }
}

/// What a JSON value is, for an error.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "true or false",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A parsed value that serde reads field by field, each error led by the field's name (or
/// the head's number) so that the message says where it is; serde_json's own reader says only
/// a line and column. A struct is read from an object only, never by position from a list.
struct Named(Value);

impl Named {
    /// Itself when `is` holds, else the error saying what was `want`ed and what is there.
    fn of(self, is: fn(&Value) -> bool, want: &str) -> std::result::Result<Named, Bad> {
        if is(&self.0) {
            Ok(self)
        } else {
            Err(Bad(format!("expected {want}, not {}", kind(&self.0))))
        }
    }
}

impl<'de> Deserializer<'de> for Named {
    type Error = Bad;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> std::result::Result<V::Value, Bad> {
        match self.0 {
            Value::Object(map) => visitor.visit_map(Fields {
                fields: map.into_iter(),
                next: None,
            }),
            Value::Array(items) => visitor.visit_seq(Heads(items.into_iter().enumerate())),
            other => other
                .deserialize_any(visitor)
                .map_err(|e| Bad(e.to_string())),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> std::result::Result<V::Value, Bad> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            other => visitor.visit_some(Named(other)),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> std::result::Result<V::Value, Bad> {
        self.of(Value::is_object, "an object of named fields")?
            .deserialize_any(visitor)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> std::result::Result<V::Value, Bad> {
        self.of(Value::is_array, "a list of heads")?
            .deserialize_any(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> std::result::Result<V::Value, Bad> {
        self.of(Value::is_string, "a string")?
            .deserialize_any(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> std::result::Result<V::Value, Bad> {
        self.deserialize_str(visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf unit
        unit_struct newtype_struct tuple tuple_struct map enum identifier ignored_any
    }
}

/// An object's fields; a bad value's error is led by its key.
struct Fields {
    fields: serde_json::map::IntoIter,
    next: Option<(String, Value)>,
}

impl<'de> MapAccess<'de> for Fields {
    type Error = Bad;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> std::result::Result<Option<K::Value>, Bad> {
        let Some((key, value)) = self.fields.next() else {
            return Ok(None);
        };
        let read = seed.deserialize(key.as_str().into_deserializer()).map(Some);
        self.next = Some((key, value));
        read
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> std::result::Result<V::Value, Bad> {
        let (key, value) = self
            .next
            .take()
            .ok_or_else(|| Bad("a value without its key".into()))?;
        seed.deserialize(Named(value)).map_err(|e| {
            // A head's error already says `head 2:`; `"heads": head 2:` would say it twice.
            if key == "heads" && e.0.starts_with("head ") {
                e
            } else {
                Bad(format!("\"{key}\": {e}"))
            }
        })
    }
}

/// A list's items (the heads), each error led by `head N`, counted from 1 as on the sheet.
struct Heads(std::iter::Enumerate<std::vec::IntoIter<Value>>);

impl<'de> SeqAccess<'de> for Heads {
    type Error = Bad;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> std::result::Result<Option<T::Value>, Bad> {
        let Some((i, value)) = self.0.next() else {
            return Ok(None);
        };
        seed.deserialize(Named(value))
            .map(Some)
            .map_err(|e| Bad(format!("head {}: {e}", i + 1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use attention_lab::prelude::*;

    /// A two-head layer's answers with a mask and numbers that JSON cannot hold.
    fn answers() -> Answers {
        let w = Array2::<f64>::eye(2);
        let layer = MultiHead::split(&w, &w, &w, 2, Some(w.clone())).unwrap();
        let out = layer
            .forward(&array![[1.0, 1e-5], [0.0, 1.0]], &Attend::new().causal())
            .unwrap();
        Answers {
            student: Some("ada".into()),
            ..Answers::new(&out).with_mask(Some(&Mask::causal(2)))
        }
    }

    #[test]
    fn fields_in_another_order_read_the_same() {
        let want = answers();
        let json: Value = serde_json::from_str(&want.to_json().unwrap()).unwrap();
        // serde_json's map sorts its keys: "concat", "heads", "mask", "output", "student";
        // each head's likewise ("k", "q", "scores", "v", "weights", "z").
        let sorted = json.to_string();
        assert!(sorted.starts_with("{\"concat\":"), "{sorted}");
        assert_eq!(Answers::parse(&sorted).unwrap(), want);
    }

    #[test]
    fn a_missing_field_is_named() {
        let mut json: Value = serde_json::from_str(&answers().to_json().unwrap()).unwrap();
        json["heads"][1].as_object_mut().unwrap().remove("weights");
        let e = Answers::parse(&json.to_string()).unwrap_err();
        assert_eq!(e.to_string(), "head 2: \"weights\" is missing");
        let mut json: Value = serde_json::from_str(&answers().to_json().unwrap()).unwrap();
        json.as_object_mut().unwrap().remove("concat");
        let e = Answers::parse(&json.to_string()).unwrap_err();
        assert_eq!(e.to_string(), "\"concat\" is missing");
    }

    #[test]
    fn a_bad_field_is_named() {
        let bad = |text: &str| Answers::parse(text).unwrap_err().to_string();
        let head = r#"{"q": [[1]], "k": [[1]], "v": [[1]], "scores": [[1]], "weights": [[1, "x"]], "z": [[1]]}"#;
        assert_eq!(
            bad(&format!(
                r#"{{"heads": [{head}], "concat": [[1]], "output": [[1]]}}"#
            )),
            "head 1: \"weights\": element [0][1] is not a number: \"x\""
        );
        assert_eq!(
            bad(r#"{"student": 5, "heads": [], "concat": [[1]], "output": null}"#),
            "\"student\": expected a string, not a number"
        );
        assert_eq!(
            bad(r#"{"heads": [[1]], "concat": [[1]], "output": null}"#),
            "head 1: expected an object of named fields, not a list"
        );
        assert_eq!(
            bad(r#"{"heads": {}, "concat": [[1]], "output": null}"#),
            "\"heads\": expected a list of heads, not an object"
        );
        assert_eq!(
            bad("[[], [[1]], [[1]]]"),
            "expected an object of named fields, not a list"
        );
        assert!(bad("{\"heads\": [").starts_with("invalid JSON: EOF"));
    }

    #[test]
    fn the_notebook_writer_writes_the_same_bytes() {
        let w = Array2::<f64>::eye(2);
        let layer = MultiHead::split(&w, &w, &w, 2, Some(w.clone() * 0.3)).unwrap();
        let x = array![[1.0, 0.5], [-2.0, 1e-7]];
        let out = layer.forward(&x, &Attend::new().causal()).unwrap();
        let owner = Answers {
            student: Some("ada \"a\"".into()),
            ..Answers::new(&out)
        };
        assert_eq!(
            attention_lab::answers::answers_json("ada \"a\"", &out),
            format!("{}\n", owner.to_json().unwrap())
        );
    }

    #[test]
    fn the_notebook_writer_reads_back_exactly() {
        let want = answers();
        let out = want.clone().into_output();
        let text = attention_lab::answers::answers_json("ada", &out);
        let read = Answers::parse(&text).unwrap();
        assert_eq!(read.student.as_deref(), Some("ada"));
        let bits = |a: &Answers| {
            let o = a.clone().into_output();
            let mut all: Vec<u64> = o.concat.iter().map(|x| x.to_bits()).collect();
            for h in &o.heads {
                for m in [&h.q, &h.k, &h.v, &h.scores, &h.weights, &h.z] {
                    all.extend(m.iter().map(|x| x.to_bits()));
                }
            }
            all.extend(o.result().iter().map(|x| x.to_bits()));
            all
        };
        assert_eq!(bits(&read), bits(&want));
    }
}
