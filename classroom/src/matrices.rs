//! Matrix input shared by `show`, `solve` and `exercise`: reading .npy files of any supported
//! dtype, parsing inline JSON matrices, and the one-line error every subcommand reports.

use attention_lab::np::NpArray;
use attention_lab::prelude::Mask;
use attention_lab_io::error::{Error, Result};
use attention_lab_io::problem;
use ndarray::{Array1, Array2, ArrayD, Ix2};
use ndarray_npy::{ReadNpyError, ReadNpyExt};
use std::path::Path;

/// The first bytes of every .npy file.
const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// Reads a .npy file of dtype float64, float32, int64, int32 or bool (either byte order,
/// C or Fortran order, any number of dimensions).
///
/// Like `np.load`, it ignores bytes after the declared data and reads any non-zero byte of a
/// bool array as `True`.
///
/// # Errors
/// A [`Error`] naming `path` when the file cannot be read, is not a .npy file, has another
/// dtype, or is truncated.
pub fn read_npy(path: &Path) -> Result<NpArray> {
    let (mut bytes, data_start) = read_bounded(path)?;
    let path = path.display();
    // ndarray-npy reads one element type at a time; try each until the descriptor matches.
    let problem = |e: ReadNpyError| match e {
        ReadNpyError::WrongDescriptor(descr) => Error::at(
            path,
            format!("unsupported dtype {descr} (supported: float64, float32, int64, int32, bool)"),
        ),
        other => Error::at(path, format!("not a valid .npy file: {other}")),
    };
    macro_rules! attempt {
        ($t:ty, $variant:ident) => {
            match ArrayD::<$t>::read_npy(&bytes[..]) {
                Ok(a) => return Ok(NpArray::$variant(a)),
                Err(ReadNpyError::WrongDescriptor(_)) => {}
                Err(e) => return Err(problem(e)),
            }
        };
    }
    attempt!(f64, F64);
    attempt!(f32, F32);
    attempt!(i64, I64);
    attempt!(i32, I32);
    // ndarray-npy accepts only 0 and 1; NumPy views the bytes, so 2 is True too.
    for b in &mut bytes[data_start..] {
        *b = u8::from(*b != 0);
    }
    match ArrayD::<bool>::read_npy(&bytes[..]) {
        Ok(a) => Ok(NpArray::Bool(a)),
        Err(e) => Err(problem(e)),
    }
}

/// Headers longer than this are refused (NumPy writes a few hundred bytes at most).
const NPY_MAX_HEADER: usize = 1 << 20;

/// The file's bytes up to the end of the data its header declares, and where the data
/// starts: `/dev/zero`, a FIFO, or a header that claims 10^12 elements in a 136-byte file end
/// in one error instead of an unbounded read or allocation.
fn read_bounded(path: &Path) -> Result<(Vec<u8>, usize)> {
    use std::io::Read;
    let file = std::fs::File::open(path);
    // Messages name the file as the user typed it; `display` keeps non-UTF-8 names readable.
    let path = &path.display();
    let not_npy = || {
        Error::at(
            path,
            "not a .npy file (it does not start with the NumPy magic string)",
        )
    };
    let file = file.map_err(|e| Error::io(path, "read", e))?;
    let size = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let mut file = std::io::BufReader::new(file);
    let mut bytes = Vec::new();
    let mut take = |bytes: &mut Vec<u8>, n: u64| -> Result<usize> {
        (&mut file)
            .take(n)
            .read_to_end(bytes)
            .map_err(|e| Error::io(path, "read", e))
    };
    take(&mut bytes, 8)?;
    if !bytes.starts_with(NPY_MAGIC) || bytes.len() < 8 {
        return Err(not_npy());
    }
    // Version 1 stores the header's length in 2 bytes, versions 2 and 3 in 4.
    let width = if bytes[6] == 1 { 2 } else { 4 };
    take(&mut bytes, width)?;
    let Some(len_bytes) = bytes.get(8..8 + width as usize) else {
        return Err(Error::at(path, "not a valid .npy file: truncated header"));
    };
    let header_len = len_bytes
        .iter()
        .rev()
        .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
    if header_len > NPY_MAX_HEADER {
        return Err(Error::at(
            path,
            format!("not a valid .npy file: a header of {header_len} bytes"),
        ));
    }
    take(&mut bytes, header_len as u64)?;
    let header = String::from_utf8_lossy(&bytes[8 + width as usize..]).into_owned();
    let data = declared_data_len(&header).map_err(|e| Error::at(path, e))?;
    let have = bytes.len() as u64;
    if let Some(size) = size {
        if size < have + data {
            return Err(Error::at(
                path,
                format!(
                    "its header declares {data} bytes of data but the file holds only {}",
                    size.saturating_sub(have)
                ),
            ));
        }
    }
    let data_start = bytes.len();
    take(&mut bytes, data)?;
    Ok((bytes, data_start))
}

/// The number of data bytes a .npy header (`{'descr': '<f8', 'fortran_order': False,
/// 'shape': (2, 3), }`) declares: the shape's product times the item size.
///
/// # Errors
/// The shape cannot be read, or its size does not fit in memory's address range.
fn declared_data_len(header: &str) -> std::result::Result<u64, String> {
    let shape_text = header
        .split_once("'shape'")
        .and_then(|(_, rest)| rest.split_once('('))
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(inside, _)| inside)
        .ok_or("not a valid .npy file: no shape in its header")?;
    let shape: Vec<u64> = shape_text
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| t.parse::<u64>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| format!("not a valid .npy file: shape ({shape_text})"))?;
    // Every supported dtype is at most 8 bytes; others are refused later by name.
    let item: u64 = header
        .split_once("'descr'")
        .and_then(|(_, rest)| rest.split('\'').nth(1))
        .and_then(|d| d.trim_start_matches(['<', '>', '|', '=']).get(1..))
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let too_large = || format!("shape ({shape_text}) is too large for this machine");
    // ndarray needs the product of the non-zero lengths to fit an isize, even when one is 0.
    shape
        .iter()
        .filter(|&&n| n != 0)
        .try_fold(1u64, |acc, &n| acc.checked_mul(n))
        .filter(|&n| n <= isize::MAX as u64)
        .ok_or_else(too_large)?;
    shape
        .iter()
        .try_fold(item, |acc, &n| acc.checked_mul(n))
        .filter(|&n| n <= isize::MAX as u64)
        .ok_or_else(too_large)
}

/// Splits a flag's value into matrices at top-level commas, so that
/// `a.npy,[[1,2],[3,4]]` is a path and an inline JSON matrix.
pub fn split_list(value: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i64, 0);
    for (i, c) in value.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(value[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(value[start..].trim());
    items
}

/// One matrix given to `flag`: inline JSON when `value` starts with `[`, else a .npy path.
///
/// # Errors
/// A [`Error`] naming the flag (and the file) when the value is not a readable 2-D
/// matrix of numbers.
pub fn matrix(flag: &str, value: &str) -> Result<Array2<f64>> {
    if value.starts_with('[') {
        return json_matrix(value).map_err(|problem| Error::at(flag, problem));
    }
    two_d(flag, value, npy(flag, value)?.to_f64())
}

/// The .npy file given to `flag`, refusing an empty value.
fn npy(flag: &str, value: &str) -> Result<NpArray> {
    if value.is_empty() {
        return Err(Error::at(
            flag,
            "empty value (expected a .npy path or a JSON matrix)",
        ));
    }
    read_npy(Path::new(value)).map_err(|e| Error::at(flag, e))
}

/// `a` as a matrix, or the error naming the flag, the file and its shape.
fn two_d<T>(flag: &str, value: &str, a: ArrayD<T>) -> Result<Array2<T>> {
    let shape = a.shape().to_vec();
    a.into_dimensionality::<Ix2>().map_err(|_| {
        Error::at(
            format!("{flag}: {value}"),
            format!(
                "expected a 2-D matrix, got shape {}",
                attention_lab::np::shape_repr(&shape)
            ),
        )
    })
}

/// A mask given to `flag` (`solve --mask`): booleans, where `true` means *blocked* as in
/// `nn.MultiheadAttention` (`[[false, true], [false, false]]` or a bool .npy), or floats
/// added to the scores (`[[0, "-Infinity"], [0, -1.5]]` or a float64/float32 .npy).
///
/// ```
/// use attention_lab_classroom::matrices::mask;
/// assert!(mask("--mask", "[[false, true]]").unwrap().is_blocked(0, 1));
/// assert_eq!(mask("--mask", "[[0, -1.5]]").unwrap().additive()[[0, 1]], -1.5);
/// ```
///
/// # Errors
/// A [`Error`] naming the flag when the value is not a 2-D matrix of booleans or of numbers,
/// or is an integer .npy (which PyTorch refuses too: 1 could mean blocked or added).
pub fn mask(flag: &str, value: &str) -> Result<Mask> {
    if value.starts_with('[') {
        let json: serde_json::Value = serde_json::from_str(value)
            .map_err(|e| Error::at(flag, format!("invalid JSON: {e}")))?;
        let booleans = json
            .get(0)
            .and_then(|row| row.get(0))
            .is_some_and(serde_json::Value::is_boolean);
        return if booleans {
            grid_from_json(&json, serde_json::Value::as_bool, "true or false")
                .map(|blocked| Mask::from_blocked(&blocked))
        } else {
            matrix_from_json(&json).map(Mask::additive_from)
        }
        .map_err(|problem| Error::at(flag, problem));
    }
    match npy(flag, value)? {
        NpArray::Bool(blocked) => Ok(Mask::from_blocked(&two_d(flag, value, blocked)?)),
        a @ (NpArray::F64(_) | NpArray::F32(_)) => {
            Ok(Mask::additive_from(two_d(flag, value, a.to_f64())?))
        }
        a => Err(Error::at(
            format!("{flag}: {value}"),
            format!(
                "a mask of dtype {} is ambiguous: give bool (True = blocked) or float (added \
                 to the scores)",
                a.dtype()
            ),
        )),
    }
}

/// A key padding mask given to `flag` (`solve --padding`): one boolean per key token, `true`
/// for padding, as a row of PyTorch's `key_padding_mask` (`[false, false, true]` or a 1-D
/// bool .npy).
///
/// ```
/// use attention_lab_classroom::matrices::padding;
/// assert_eq!(padding("--padding", "[false, true]").unwrap(), vec![false, true]);
/// assert!(padding("--padding", "[0, 1]").is_err());
/// ```
///
/// # Errors
/// A [`Error`] naming the flag when the value is not a list of booleans.
pub fn padding(flag: &str, value: &str) -> Result<Vec<bool>> {
    let expected = "expected a list of booleans, one per key token (true = padding)";
    if value.starts_with('[') {
        let json: serde_json::Value = serde_json::from_str(value)
            .map_err(|e| Error::at(flag, format!("invalid JSON: {e}")))?;
        let list = json.as_array().ok_or_else(|| Error::at(flag, expected))?;
        return list
            .iter()
            .enumerate()
            .map(|(j, v)| {
                v.as_bool()
                    .ok_or_else(|| Error::at(flag, format!("{expected}, but element [{j}] is {v}")))
            })
            .collect();
    }
    match npy(flag, value)? {
        NpArray::Bool(a) if a.ndim() == 1 => Ok(a.iter().copied().collect()),
        a => Err(Error::at(
            format!("{flag}: {value}"),
            format!(
                "{expected}; got dtype {} and shape {}",
                a.dtype(),
                attention_lab::np::shape_repr(a.shape())
            ),
        )),
    }
}

/// A bias given to `flag` (`solve --bq`): a JSON list of numbers (`[0.1, -0.2]`), a matrix of
/// one row, or a .npy file of either shape.
///
/// ```
/// use attention_lab_classroom::matrices::vector;
/// assert_eq!(vector("--bq", "[0.5, 1]").unwrap().to_vec(), vec![0.5, 1.0]);
/// assert_eq!(vector("--bq", "[[0.5, 1]]").unwrap().len(), 2);
/// ```
///
/// # Errors
/// A [`Error`] naming the flag when the value is not one row of numbers.
pub fn vector(flag: &str, value: &str) -> Result<Array1<f64>> {
    let row = if value.starts_with('[') {
        let json: serde_json::Value = serde_json::from_str(value)
            .map_err(|e| Error::at(flag, format!("invalid JSON: {e}")))?;
        // A flat list is one row.
        let flat = json
            .as_array()
            .is_some_and(|l| l.first().is_some_and(|v| !v.is_array()));
        let json = if flat {
            serde_json::Value::Array(vec![json])
        } else {
            json
        };
        matrix_from_json(&json).map_err(|problem| Error::at(flag, problem))?
    } else {
        let a = npy(flag, value)?.to_f64();
        let a = if a.ndim() == 1 {
            a.insert_axis(ndarray::Axis(0))
        } else {
            a
        };
        two_d(flag, value, a)?
    };
    if row.nrows() != 1 {
        return Err(Error::at(
            flag,
            format!(
                "a bias is one row of numbers, but this is {}x{}",
                row.nrows(),
                row.ncols()
            ),
        ));
    }
    Ok(row.row(0).to_owned())
}

/// Parses `[[1, 2], [3, 4]]` into a matrix; the error says which element or row is wrong.
///
/// ```
/// use attention_lab_classroom::matrices::json_matrix;
/// assert_eq!(json_matrix("[[1, 2], [3, 4]]").unwrap()[[1, 0]], 3.0);
/// assert!(json_matrix("[[1, 2], [3]]").is_err());
/// ```
///
/// # Errors
/// Invalid JSON, a row that is not a list, an element that is not a number, ragged rows.
pub fn json_matrix(value: &str) -> Result<Array2<f64>> {
    let json: serde_json::Value =
        serde_json::from_str(value).map_err(|e| problem!("invalid JSON: {e}"))?;
    matrix_from_json(&json)
}

/// A matrix from parsed JSON: a list of equally long rows of numbers, where the strings
/// `"NaN"`, `"Infinity"` and `"-Infinity"` (which `solve --json` writes) stand for themselves.
///
/// # Errors
/// Which element or row is wrong, or that the matrix is empty.
pub fn matrix_from_json(json: &serde_json::Value) -> Result<Array2<f64>> {
    let number = |v: &serde_json::Value| {
        v.as_f64().or_else(|| match v.as_str() {
            Some("NaN") => Some(f64::NAN),
            Some("Infinity") => Some(f64::INFINITY),
            Some("-Infinity") => Some(f64::NEG_INFINITY),
            _ => None,
        })
    };
    grid_from_json(json, number, "a number")
}

/// A matrix from parsed JSON rows whose every element `element` reads (`what` names what it
/// reads, for the error).
fn grid_from_json<T>(
    json: &serde_json::Value,
    element: impl Fn(&serde_json::Value) -> Option<T>,
    what: &str,
) -> Result<Array2<T>> {
    let rows = json.as_array().ok_or("expected a JSON list of rows")?;
    let mut flat = Vec::new();
    let mut cols = None;
    for (i, row) in rows.iter().enumerate() {
        let row = row
            .as_array()
            .ok_or_else(|| problem!("expected a 2-D matrix, but row {i} is not a list: {row}"))?;
        if *cols.get_or_insert(row.len()) != row.len() {
            return Err(problem!(
                "row {i} has {} numbers but row 0 has {}",
                row.len(),
                cols.unwrap_or(0)
            ));
        }
        for (j, v) in row.iter().enumerate() {
            let x = element(v).ok_or_else(|| problem!("element [{i}][{j}] is not {what}: {v}"))?;
            flat.push(x);
        }
    }
    let cols = cols.unwrap_or(0);
    if rows.is_empty() || cols == 0 {
        return Err("the matrix is empty".into());
    }
    Ok(Array2::from_shape_vec((rows.len(), cols), flat).expect("rows checked to be equal"))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A number reads as the f64 its shortest text names, as NumPy's key would be read.
        #[test]
        fn json_numbers_read_exactly(
            x in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO
        ) {
            let read = json_matrix(&format!("[[{x:e}, {x:?}]]")).unwrap();
            proptest::prop_assert_eq!(read[[0, 0]].to_bits(), x.to_bits());
            proptest::prop_assert_eq!(read[[0, 1]].to_bits(), x.to_bits());
        }
    }

    #[test]
    fn split_list_keeps_json_whole() {
        assert_eq!(
            split_list("a.npy,[[1,2],[3,4]], b.npy"),
            vec!["a.npy", "[[1,2],[3,4]]", "b.npy"]
        );
    }

    #[test]
    fn json_matrix_errors_name_the_element() {
        assert_eq!(
            json_matrix("[[1, \"a\"]]").unwrap_err().to_string(),
            "element [0][1] is not a number: \"a\""
        );
        assert_eq!(
            json_matrix("[[1, 2], [3]]").unwrap_err().to_string(),
            "row 1 has 1 numbers but row 0 has 2"
        );
    }
}
