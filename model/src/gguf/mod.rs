//! GGUF (version 3), llama.cpp's model file: a header, metadata as typed key/value pairs, a
//! table of tensors, then their data, aligned. The file is mapped, not read, so every process
//! on a machine that opens it shares one copy of its pages.
//!
//! A small reader of our own: the GGUF crates on crates.io either come inside a whole
//! inference framework (candle) or do not dequantise; this one reads the header with every
//! count and offset checked against the file's length before anything is allocated, so a
//! truncated or hostile file gets one line naming what is wrong, never a huge allocation.
//!
//! Layout (little-endian): magic `GGUF`, version (u32), tensor count (u64), metadata count
//! (u64); each metadata pair as a string key, a type (u32) and a value; each tensor as its
//! name, its number of dimensions (u32), the dimensions (u64 each, the fastest-varying
//! first), its type (u32) and its offset (u64) from the start of the data, which begins at
//! the next multiple of `general.alignment` (32 by default).

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::chat::GgufVocab;
use crate::error::ModelError;
use crate::quant::{BlockType, Bytes, QuantMatrix};

/// The most dimensions a GGUF tensor has (ggml's `GGML_MAX_DIMS`).
const MAX_DIMS: u32 = 4;

/// A metadata value.
///
/// ```
/// use attention_lab_model::gguf::Value;
/// assert_eq!(Value::U32(30).as_usize(), Some(30));
/// assert_eq!(Value::String("llama".into()).as_str(), Some("llama"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `uint8`.
    U8(u8),
    /// `int8`.
    I8(i8),
    /// `uint16`.
    U16(u16),
    /// `int16`.
    I16(i16),
    /// `uint32`.
    U32(u32),
    /// `int32`.
    I32(i32),
    /// `float32`.
    F32(f32),
    /// `bool`.
    Bool(bool),
    /// A UTF-8 string.
    String(String),
    /// An array of values of one type.
    Array(Vec<Value>),
    /// `uint64`.
    U64(u64),
    /// `int64`.
    I64(i64),
    /// `float64`.
    F64(f64),
}

impl Value {
    /// A non-negative integer of any width, as `usize`.
    ///
    /// ```
    /// use attention_lab_model::gguf::Value;
    /// assert_eq!(Value::I32(-1).as_usize(), None);
    /// assert_eq!(Value::U64(7).as_usize(), Some(7));
    /// ```
    pub fn as_usize(&self) -> Option<usize> {
        let n: i128 = match *self {
            Value::U8(v) => v.into(),
            Value::I8(v) => v.into(),
            Value::U16(v) => v.into(),
            Value::I16(v) => v.into(),
            Value::U32(v) => v.into(),
            Value::I32(v) => v.into(),
            Value::U64(v) => v.into(),
            Value::I64(v) => v.into(),
            _ => return None,
        };
        usize::try_from(n).ok()
    }

    /// A float of either width, as `f64` (exactly: an `f32` widens without rounding).
    ///
    /// ```
    /// use attention_lab_model::gguf::Value;
    /// assert_eq!(Value::F32(1e-5).as_f64(), Some(f64::from(1e-5f32)));
    /// ```
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    /// A string's text.
    ///
    /// ```
    /// use attention_lab_model::gguf::Value;
    /// assert_eq!(Value::Bool(true).as_str(), None);
    /// ```
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// A boolean.
    ///
    /// ```
    /// use attention_lab_model::gguf::Value;
    /// assert_eq!(Value::Bool(false).as_bool(), Some(false));
    /// ```
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// An array's values.
    ///
    /// ```
    /// use attention_lab_model::gguf::Value;
    /// assert_eq!(Value::Array(vec![Value::I32(1)]).as_array().map(<[_]>::len), Some(1));
    /// ```
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(v) => Some(v),
            _ => None,
        }
    }
}

/// One tensor of the table: where its data is and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// Its name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Its dimensions as GGUF gives them, the fastest-varying first: a matrix of `rows` rows of
    /// `cols` values is `[cols, rows]`.
    pub dims: Vec<usize>,
    /// How its values are stored.
    pub kind: BlockType,
    /// Where its data starts in the file.
    pub start: usize,
    /// Its data's length in bytes.
    pub len: usize,
}

impl TensorInfo {
    /// Its values' count.
    ///
    /// ```
    /// use attention_lab_model::gguf::TensorInfo;
    /// use attention_lab_model::quant::BlockType;
    /// let t = TensorInfo { name: "w".into(), dims: vec![32, 3], kind: BlockType::Q8_0, start: 0, len: 102 };
    /// assert_eq!(t.count(), 96);
    /// ```
    pub fn count(&self) -> usize {
        self.dims.iter().product()
    }
}

/// An open GGUF file: its metadata and its tensors, the data mapped.
///
/// ```no_run
/// use attention_lab_model::gguf::Gguf;
///
/// let file = Gguf::open("SmolLM2-135M-Instruct.Q4_1.gguf".as_ref())?;
/// assert_eq!(file.string("general.architecture")?, "llama");
/// println!("{} tensors", file.tensors().len());
/// # Ok::<(), attention_lab_model::ModelError>(())
/// ```
#[derive(Clone)]
pub struct Gguf {
    path: PathBuf,
    bytes: Bytes,
    metadata: BTreeMap<String, Value>,
    tensors: Vec<TensorInfo>,
}

impl std::fmt::Debug for Gguf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gguf")
            .field("path", &self.path)
            .field("metadata", &self.metadata.len())
            .field("tensors", &self.tensors.len())
            .finish()
    }
}

impl Gguf {
    /// Maps the file and reads its header, metadata and tensor table, every count and
    /// offset checked against the file's length.
    ///
    /// ```
    /// use attention_lab_model::gguf::Gguf;
    /// let err = Gguf::open("/no/such/file.gguf".as_ref()).unwrap_err();
    /// assert!(err.to_string().starts_with("/no/such/file.gguf: cannot read:"));
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Read`] when the file cannot be opened or mapped; [`ModelError::Content`]
    /// when it is not GGUF version 2 or 3, is truncated, or holds a count, a size, a type or an
    /// offset that does not fit the file.
    pub fn open(path: &Path) -> Result<Gguf, ModelError> {
        let file = File::open(path).map_err(|e| ModelError::read(path, e))?;
        // SAFETY: the map is read-only and private to this process. Its pages follow the
        // file: a file changed while mapped changes what is read (and a file cut short ends
        // the process with SIGBUS), as for any reader of a memory-mapped model. The installed
        // model is a package's file that nothing writes.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| ModelError::read(path, e))?;
        Gguf::parse(path, Arc::new(map))
    }

    /// A GGUF file already in memory; `name` stands for its path in messages.
    ///
    /// ```
    /// use attention_lab_model::gguf::Gguf;
    /// let err = Gguf::from_bytes("x.gguf", b"GGUF".to_vec()).unwrap_err();
    /// assert!(err.to_string().starts_with("x.gguf: truncated"));
    /// ```
    ///
    /// # Errors
    /// As [`Gguf::open`], but for reading.
    pub fn from_bytes(name: impl AsRef<Path>, bytes: Vec<u8>) -> Result<Gguf, ModelError> {
        Gguf::parse(name.as_ref(), Arc::new(bytes))
    }

    fn parse(path: &Path, bytes: Bytes) -> Result<Gguf, ModelError> {
        let bad = |problem: String| ModelError::content(path, problem);
        let all: &[u8] = (*bytes).as_ref();
        let mut r = Reader { bytes: all, at: 0 };
        let magic = r.take(4).map_err(&bad)?;
        if magic != b"GGUF" {
            return Err(bad(format!(
                "not a GGUF file: it starts with {magic:02x?}, not the magic \"GGUF\""
            )));
        }
        let version = r.u32().map_err(&bad)?;
        if !(2..=3).contains(&version) {
            return Err(bad(format!(
                "GGUF version {version}: this reader reads versions 2 and 3"
            )));
        }
        let tensor_count = r.u64().map_err(&bad)?;
        let kv_count = r.u64().map_err(&bad)?;
        let mut metadata = BTreeMap::new();
        // Each pair takes at least 8 + 4 + 1 bytes, so a count the file cannot hold is caught
        // before the loop allocates anything for it.
        r.fits(kv_count, 13, "metadata pairs").map_err(&bad)?;
        for _ in 0..kv_count {
            let key = r.string().map_err(&bad)?;
            let kind = r.u32().map_err(&bad)?;
            let value = r
                .value(kind, 0)
                .map_err(|e| bad(format!("metadata {}: {e}", shown(&key))))?;
            metadata.insert(key, value);
        }
        let alignment = match metadata.get("general.alignment") {
            None => 32,
            Some(v) => v
                .as_usize()
                .filter(|a| a.is_power_of_two())
                .ok_or_else(|| {
                    bad(format!(
                        "general.alignment is {v:?}: it must be a power of two"
                    ))
                })?,
        };
        r.fits(tensor_count, 8 + 4 + 4 + 8, "tensors")
            .map_err(&bad)?;
        let mut table = Vec::new();
        for _ in 0..tensor_count {
            let name = r.string().map_err(&bad)?;
            let n_dims = r.u32().map_err(&bad)?;
            if n_dims == 0 || n_dims > MAX_DIMS {
                return Err(bad(format!(
                    "tensor {}: {n_dims} dimensions; GGUF tensors have 1 to {MAX_DIMS}",
                    shown(&name)
                )));
            }
            let dims = (0..n_dims)
                .map(|_| r.u64().map_err(&bad))
                .collect::<Result<Vec<u64>, _>>()?;
            let kind = r.u32().map_err(&bad)?;
            let offset = r.u64().map_err(&bad)?;
            table.push((name, dims, kind, offset));
        }
        let data_start = r.at.next_multiple_of(alignment);
        let mut tensors = Vec::with_capacity(table.len());
        for (name, dims, kind, offset) in table {
            let tensor = locate(&name, &dims, kind, offset, data_start, alignment, all.len())
                .map_err(|e| bad(format!("tensor {}: {e}", shown(&name))))?;
            tensors.push(tensor);
        }
        Ok(Gguf {
            path: path.to_owned(),
            bytes,
            metadata,
            tensors,
        })
    }

    /// The file's path.
    ///
    /// ```no_run
    /// # use attention_lab_model::gguf::Gguf;
    /// let file = Gguf::open("model.gguf".as_ref())?;
    /// assert_eq!(file.path(), std::path::Path::new("model.gguf"));
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every metadata pair, by key.
    ///
    /// ```no_run
    /// # use attention_lab_model::gguf::Gguf;
    /// let file = Gguf::open("model.gguf".as_ref())?;
    /// for (key, value) in file.metadata() { println!("{key}: {value:?}"); }
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn metadata(&self) -> &BTreeMap<String, Value> {
        &self.metadata
    }

    /// The tensor table, in the file's order.
    ///
    /// ```no_run
    /// # use attention_lab_model::gguf::Gguf;
    /// let file = Gguf::open("model.gguf".as_ref())?;
    /// let bytes: usize = file.tensors().iter().map(|t| t.len).sum();
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// A metadata value.
    ///
    /// ```no_run
    /// # use attention_lab_model::gguf::Gguf;
    /// let file = Gguf::open("model.gguf".as_ref())?;
    /// let layers = file.get("llama.block_count")?.as_usize();
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Content`] naming the key when the file does not have it.
    pub fn get(&self, key: &str) -> Result<&Value, ModelError> {
        self.metadata
            .get(key)
            .ok_or_else(|| ModelError::content(&self.path, format!("no metadata {key}")))
    }

    /// A metadata integer.
    ///
    /// ```no_run
    /// # use attention_lab_model::gguf::Gguf;
    /// let file = Gguf::open("model.gguf".as_ref())?;
    /// let layers = file.usize("llama.block_count")?;
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Content`] naming the key when it is missing or not a non-negative
    /// integer.
    pub fn usize(&self, key: &str) -> Result<usize, ModelError> {
        let v = self.get(key)?;
        v.as_usize()
            .ok_or_else(|| self.wrong(key, v, "a non-negative integer"))
    }

    /// A metadata float, as `f64`.
    ///
    /// ```no_run
    /// # use attention_lab_model::gguf::Gguf;
    /// let file = Gguf::open("model.gguf".as_ref())?;
    /// let theta = file.f64("llama.rope.freq_base")?;
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Content`] naming the key when it is missing or not a float.
    pub fn f64(&self, key: &str) -> Result<f64, ModelError> {
        let v = self.get(key)?;
        v.as_f64().ok_or_else(|| self.wrong(key, v, "a float"))
    }

    /// A metadata string.
    ///
    /// ```no_run
    /// # use attention_lab_model::gguf::Gguf;
    /// let file = Gguf::open("model.gguf".as_ref())?;
    /// assert_eq!(file.string("general.architecture")?, "llama");
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Content`] naming the key when it is missing or not a string.
    pub fn string(&self, key: &str) -> Result<&str, ModelError> {
        let v = self.get(key)?;
        v.as_str().ok_or_else(|| self.wrong(key, v, "a string"))
    }

    /// A metadata array of strings.
    ///
    /// ```no_run
    /// # use attention_lab_model::gguf::Gguf;
    /// let file = Gguf::open("model.gguf".as_ref())?;
    /// let tokens = file.strings("tokenizer.ggml.tokens")?;
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Content`] naming the key when it is missing or not an array of strings.
    pub fn strings(&self, key: &str) -> Result<Vec<String>, ModelError> {
        let v = self.get(key)?;
        v.as_array()
            .and_then(|a| a.iter().map(|s| s.as_str().map(str::to_owned)).collect())
            .ok_or_else(|| self.wrong(key, v, "an array of strings"))
    }

    /// The tokenizer's metadata (`tokenizer.ggml.*` and `tokenizer.chat_template`), for
    /// [`ChatTokenizer::from_vocab`](crate::chat::ChatTokenizer::from_vocab).
    ///
    /// ```no_run
    /// # use attention_lab_model::gguf::Gguf;
    /// let vocab = Gguf::open("model.gguf".as_ref())?.vocab()?;
    /// assert_eq!((vocab.model.as_str(), vocab.pre.as_str()), ("gpt2", "smollm"));
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Content`] naming the key when the tokens, the merges or the model are
    /// missing, or a value has the wrong type.
    pub fn vocab(&self) -> Result<GgufVocab, ModelError> {
        let has = |key: &str| self.metadata.contains_key(key);
        let id = |key: &str| -> Result<Option<u32>, ModelError> {
            if !has(key) {
                return Ok(None);
            }
            let n = self.usize(key)?;
            u32::try_from(n).map(Some).map_err(|_| {
                ModelError::content(
                    &self.path,
                    format!("metadata {key} is {n}: past any vocabulary"),
                )
            })
        };
        let flag = |key: &str| -> Result<bool, ModelError> {
            match self.metadata.get(key) {
                None => Ok(false),
                Some(v) => v.as_bool().ok_or_else(|| self.wrong(key, v, "a bool")),
            }
        };
        let token_types = match self.metadata.get("tokenizer.ggml.token_type") {
            None => Vec::new(),
            Some(v) => v
                .as_array()
                .and_then(|a| {
                    a.iter()
                        .map(|t| match t {
                            Value::I32(t) => Some(*t),
                            _ => None,
                        })
                        .collect()
                })
                .ok_or_else(|| self.wrong("tokenizer.ggml.token_type", v, "an array of int32"))?,
        };
        Ok(GgufVocab {
            tokens: self.strings("tokenizer.ggml.tokens")?,
            token_types,
            merges: self.strings("tokenizer.ggml.merges")?,
            model: self.string("tokenizer.ggml.model")?.to_owned(),
            // llama.cpp's name for a file without the key: GPT-2's split.
            pre: match has("tokenizer.ggml.pre") {
                true => self.string("tokenizer.ggml.pre")?.to_owned(),
                false => "default".to_owned(),
            },
            bos: id("tokenizer.ggml.bos_token_id")?,
            eos: id("tokenizer.ggml.eos_token_id")?,
            unk: id("tokenizer.ggml.unknown_token_id")?,
            pad: id("tokenizer.ggml.padding_token_id")?,
            add_bos: flag("tokenizer.ggml.add_bos_token")?,
            add_eos: flag("tokenizer.ggml.add_eos_token")?,
            chat_template: match has("tokenizer.chat_template") {
                true => Some(self.string("tokenizer.chat_template")?.to_owned()),
                false => None,
            },
        })
    }

    fn wrong(&self, key: &str, v: &Value, want: &str) -> ModelError {
        let shown = match v {
            Value::Array(a) => format!("an array of {}", a.len()),
            Value::String(s) if s.len() > 40 => "a long string".to_owned(),
            other => format!("{other:?}"),
        };
        ModelError::content(
            &self.path,
            format!("metadata {key} is {shown}: it must be {want}"),
        )
    }

    /// The tensor of that name.
    ///
    /// ```no_run
    /// # use attention_lab_model::gguf::Gguf;
    /// let file = Gguf::open("model.gguf".as_ref())?;
    /// assert_eq!(file.tensor("token_embd.weight")?.dims, [576, 49152]);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Tensor`] when the file has no tensor of that name.
    pub fn tensor(&self, name: &str) -> Result<&TensorInfo, ModelError> {
        self.tensors
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| self.tensor_error(name, "not in the file"))
    }

    /// A tensor's raw bytes, as stored.
    ///
    /// ```no_run
    /// # use attention_lab_model::gguf::Gguf;
    /// let file = Gguf::open("model.gguf".as_ref())?;
    /// let t = file.tensor("output_norm.weight")?;
    /// assert_eq!(file.data(t).len(), t.len);
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    pub fn data(&self, tensor: &TensorInfo) -> &[u8] {
        &(*self.bytes).as_ref()[tensor.start..tensor.start + tensor.len]
    }

    /// A tensor of one or two dimensions as a matrix of `dims[1]` rows of `dims[0]` values
    /// (a vector is one row), its data shared with the map, not copied.
    ///
    /// ```no_run
    /// # use attention_lab_model::gguf::Gguf;
    /// let file = Gguf::open("model.gguf".as_ref())?;
    /// let q = file.matrix("blk.0.attn_q.weight")?;
    /// assert_eq!((q.rows(), q.cols()), (576, 576));
    /// # Ok::<(), attention_lab_model::ModelError>(())
    /// ```
    ///
    /// # Errors
    /// [`ModelError::Tensor`] when the file has no such tensor, or it has more than two
    /// dimensions.
    pub fn matrix(&self, name: &str) -> Result<QuantMatrix, ModelError> {
        let t = self.tensor(name)?;
        let (cols, rows) = match t.dims[..] {
            [cols] => (cols, 1),
            [cols, rows] => (cols, rows),
            _ => {
                return Err(self.tensor_error(
                    name,
                    &format!("{} dimensions; a matrix has 1 or 2", t.dims.len()),
                ))
            }
        };
        Ok(QuantMatrix::new(
            self.bytes.clone(),
            t.start,
            t.kind,
            rows,
            cols,
        ))
    }

    pub(crate) fn tensor_error(&self, name: &str, problem: &str) -> ModelError {
        ModelError::Tensor {
            path: self.path.clone(),
            name: shown(name),
            problem: problem.to_owned(),
        }
    }
}

/// A name from the file as a message shows it: control characters escaped, so that a key or
/// a tensor name cannot break the message's one line.
fn shown(name: &str) -> String {
    name.chars()
        .flat_map(|c| match c.is_control() {
            true => c.escape_default().collect::<Vec<_>>(),
            false => vec![c],
        })
        .collect()
}

/// Where a tensor's data lies, checked: a known type, whole blocks a row, a size that does
/// not overflow, an aligned offset, and data that ends inside the file.
fn locate(
    name: &str,
    dims: &[u64],
    kind: u32,
    offset: u64,
    data_start: usize,
    alignment: usize,
    file_len: usize,
) -> Result<TensorInfo, String> {
    let kind = BlockType::from_ggml(kind).ok_or_else(|| {
        format!("ggml type {kind} is not one this reader dequantises (F32, F16, Q4_0, Q4_1, Q8_0)")
    })?;
    let dims: Vec<usize> = dims
        .iter()
        .map(|&d| usize::try_from(d).ok().filter(|&d| d > 0))
        .collect::<Option<_>>()
        .ok_or_else(|| format!("dimensions {dims:?}: each must be at least 1"))?;
    let count = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| format!("dimensions {dims:?}: their product overflows"))?;
    if !dims[0].is_multiple_of(kind.block_values()) {
        return Err(format!(
            "a row of {} values is not whole {} blocks of {}",
            dims[0],
            kind.name(),
            kind.block_values()
        ));
    }
    let len = (count / kind.block_values())
        .checked_mul(kind.block_bytes())
        .ok_or_else(|| format!("dimensions {dims:?}: their size overflows"))?;
    let offset =
        usize::try_from(offset).map_err(|_| format!("offset {offset} is past the file"))?;
    if offset % alignment != 0 {
        return Err(format!(
            "offset {offset} is not a multiple of the alignment {alignment}"
        ));
    }
    let start = data_start
        .checked_add(offset)
        .filter(|&s| s <= file_len)
        .ok_or_else(|| format!("offset {offset} is past the file's end ({file_len} bytes)"))?;
    if len > file_len - start {
        return Err(format!(
            "its {len} bytes at {start} run past the file's end ({file_len} bytes): the file is truncated"
        ));
    }
    Ok(TensorInfo {
        name: name.to_owned(),
        dims,
        kind,
        start,
        len,
    })
}

/// A cursor over the header; every read checks the bytes are there.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| {
                format!(
                    "truncated: {n} bytes wanted at byte {}, the file has {}",
                    self.at,
                    self.bytes.len()
                )
            })?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn u32(&mut self) -> Result<u32, String> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Result<u64, String> {
        self.array().map(u64::from_le_bytes)
    }

    /// Whether `count` items of at least `min` bytes each fit in what is left of the file.
    fn fits(&self, count: u64, min: u64, what: &str) -> Result<(), String> {
        let left = (self.bytes.len() - self.at) as u64;
        if count.saturating_mul(min) > left {
            return Err(format!(
                "{count} {what} cannot fit in the {left} bytes left at byte {}: the file is \
                 truncated or the count is wrong",
                self.at
            ));
        }
        Ok(())
    }

    fn string(&mut self) -> Result<String, String> {
        let len = self.u64()?;
        self.fits(len, 1, "bytes of a string")?;
        let at = self.at;
        let bytes = self.take(len as usize)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| format!("the string at byte {at} is not UTF-8"))
    }

    fn value(&mut self, kind: u32, depth: usize) -> Result<Value, String> {
        Ok(match kind {
            0 => Value::U8(self.array::<1>()?[0]),
            1 => Value::I8(i8::from_le_bytes(self.array()?)),
            2 => Value::U16(u16::from_le_bytes(self.array()?)),
            3 => Value::I16(i16::from_le_bytes(self.array()?)),
            4 => Value::U32(self.u32()?),
            5 => Value::I32(i32::from_le_bytes(self.array()?)),
            6 => Value::F32(f32::from_le_bytes(self.array()?)),
            7 => match self.array::<1>()?[0] {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(format!("a bool of {b}")),
            },
            8 => Value::String(self.string()?),
            9 if depth == 0 => {
                let inner = self.u32()?;
                let len = self.u64()?;
                self.fits(len, value_size(inner)?, "array values")?;
                let mut values = Vec::with_capacity(len as usize);
                for _ in 0..len {
                    values.push(self.value(inner, depth + 1)?);
                }
                Value::Array(values)
            }
            9 => return Err("an array of arrays (this reader reads arrays of values)".into()),
            10 => Value::U64(self.u64()?),
            11 => Value::I64(i64::from_le_bytes(self.array()?)),
            12 => Value::F64(f64::from_le_bytes(self.array()?)),
            other => return Err(format!("value type {other} is not a GGUF type (0 to 12)")),
        })
    }
}

/// The fewest bytes a value of that type takes in the file.
fn value_size(kind: u32) -> Result<u64, String> {
    Ok(match kind {
        0 | 1 | 7 => 1,
        2 | 3 => 2,
        4..=6 => 4,
        8 | 10..=12 => 8,
        9 => return Err("an array of arrays (this reader reads arrays of values)".into()),
        other => return Err(format!("value type {other} is not a GGUF type (0 to 12)")),
    })
}

#[cfg(test)]
mod tests;
