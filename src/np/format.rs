//! Non-generic core of NumPy's array printing: element formatters and the line layout of
//! `numpy/_core/arrayprint.py` (legacy=False). Generic entry points convert to [`NpData`] first
//! so this code is compiled once, not in every notebook cell.

use super::dragon4::{
    decompose_f32, decompose_f64, positional, scientific, Decomposed, FloatOptions, Trim,
};
use super::options::PrintOptions;

/// Flattened (row-major) element values of one array.
pub enum Values {
    F64(Vec<f64>),
    F32(Vec<f32>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    Bool(Vec<bool>),
}

/// An array reduced to what printing needs: its shape and its values in logical order.
pub struct NpData {
    pub shape: Vec<usize>,
    pub values: Values,
}

impl NpData {
    fn size(&self) -> usize {
        self.shape.iter().product()
    }

    fn dtype(&self) -> &'static str {
        match self.values {
            Values::F64(_) => "float64",
            Values::F32(_) => "float32",
            Values::I64(_) => "int64",
            Values::I32(_) => "int32",
            Values::Bool(_) => "bool",
        }
    }

    /// NumPy omits the dtype from a repr when the values imply it.
    fn dtype_implied(&self) -> bool {
        matches!(
            self.values,
            Values::F64(_) | Values::I64(_) | Values::Bool(_)
        )
    }
}

/// One float prepared for formatting, independent of its width.
#[derive(Clone, Copy)]
struct Fl {
    d: Decomposed,
    neg: bool,
    nan: bool,
    inf: bool,
}

impl Fl {
    fn from_f64(x: f64) -> Fl {
        Fl {
            d: decompose_f64(x),
            neg: x.is_sign_negative(),
            nan: x.is_nan(),
            inf: x.is_infinite(),
        }
    }

    fn from_f32(x: f32) -> Fl {
        Fl {
            d: decompose_f32(x),
            neg: x.is_sign_negative(),
            nan: x.is_nan(),
            inf: x.is_infinite(),
        }
    }

    fn finite(&self) -> bool {
        !self.nan && !self.inf
    }
}

/// NumPy's FloatingFormat after `fillFormat`: the notation, and the keyword arguments every
/// element of the array is formatted with.
struct FloatFormat {
    exp: bool,
    opts: FloatOptions,
}

impl FloatFormat {
    fn new(vals: &[Fl], exp: bool, precision: usize) -> FloatFormat {
        let finite: Vec<&Fl> = vals.iter().filter(|v| v.finite()).collect();
        let mut opts = FloatOptions {
            precision: Some(precision),
            trim: Trim::Zeros,
            pad_left: Some(0),
            pad_right: Some(0),
            ..FloatOptions::default()
        };
        // Each value alone, as fillFormat first formats it to measure the widths.
        let alone = FloatOptions {
            precision: Some(precision),
            trim: Trim::Zeros,
            ..FloatOptions::default()
        };
        if finite.is_empty() {
            // Nothing to measure; only the nan/inf widths below apply.
        } else if exp {
            let (mut int_w, mut frac_w, mut exp_w) = (0, 0, 0);
            for v in &finite {
                let s = scientific(v.d, v.neg, &alone);
                let (mant, e) = s.split_once('e').unwrap_or((&s, ""));
                let (i, fr) = mant.split_once('.').unwrap_or((mant, ""));
                int_w = int_w.max(i.len());
                frac_w = frac_w.max(fr.len());
                exp_w = exp_w.max(e.len());
            }
            let exp_size = exp_w.saturating_sub(1);
            opts = FloatOptions {
                precision: Some(frac_w),
                min_digits: Some(frac_w),
                trim: Trim::Keep,
                pad_left: Some(int_w),
                pad_right: Some(exp_size + 2 + frac_w),
                exp_digits: Some(exp_size),
            };
        } else {
            let (mut int_w, mut frac_w) = (0, 0);
            for v in &finite {
                let s = positional(v.d, v.neg, &alone);
                let (i, fr) = s.split_once('.').unwrap_or((&s, ""));
                int_w = int_w.max(i.len());
                frac_w = frac_w.max(fr.len());
            }
            opts.pad_left = Some(int_w);
            opts.pad_right = Some(frac_w);
            opts.min_digits = Some(0);
        }
        if finite.len() != vals.len() {
            // Room for "nan", "inf" or "-inf" in the whole width.
            let neginf = vals.iter().any(|v| v.inf && v.neg) as usize;
            let offset = opts.pad_right.unwrap_or(0) + 1;
            let need = (3 + neginf).saturating_sub(offset);
            opts.pad_left = opts.pad_left.map(|p| p.max(need));
        }
        FloatFormat { exp, opts }
    }

    fn format(&self, v: &Fl) -> String {
        if !v.finite() {
            let s = if v.nan {
                "nan"
            } else if v.neg {
                "-inf"
            } else {
                "inf"
            };
            let width = self.opts.pad_left.unwrap_or(0) + self.opts.pad_right.unwrap_or(0) + 1;
            return format!("{s:>width$}");
        }
        if self.exp {
            scientific(v.d, v.neg, &self.opts)
        } else {
            positional(v.d, v.neg, &self.opts)
        }
    }
}

/// NumPy's switch to scientific notation, on the abs of finite nonzero values. For float32
/// NumPy divides in f32 and its large cutoff is 1e6; the f64 copies of f32 values are exact.
fn exp_format(vals: impl Iterator<Item = f64>, suppress: bool, is_f32: bool) -> bool {
    let mut it = vals.filter(|x| x.is_finite() && *x != 0.0).map(f64::abs);
    let Some(first) = it.next() else { return false };
    let (mut max, mut min) = (first, first);
    for x in it {
        max = max.max(x);
        min = min.min(x);
    }
    let (upper, small, ratio) = if is_f32 {
        (1e6, 1e-4f32 as f64, (max as f32 / min as f32) as f64)
    } else {
        (1e8, 1e-4, max / min)
    };
    max >= upper || (!suppress && (min < small || ratio > 1e3))
}

/// Element formatter for the selected positions (flat offsets) of the array.
fn element_formatter<'a>(
    data: &'a NpData,
    picked: &[usize],
    opts: &PrintOptions,
) -> Box<dyn Fn(usize) -> String + 'a> {
    let precision = opts.precision;
    match &data.values {
        Values::F64(v) => {
            let sel: Vec<f64> = picked.iter().map(|&i| v[i]).collect();
            let fls: Vec<Fl> = sel.iter().map(|&x| Fl::from_f64(x)).collect();
            let f = FloatFormat::new(
                &fls,
                exp_format(sel.iter().copied(), opts.suppress, false),
                precision,
            );
            Box::new(move |i| f.format(&Fl::from_f64(v[i])))
        }
        Values::F32(v) => {
            let sel: Vec<f32> = picked.iter().map(|&i| v[i]).collect();
            let fls: Vec<Fl> = sel.iter().map(|&x| Fl::from_f32(x)).collect();
            let f = FloatFormat::new(
                &fls,
                exp_format(sel.iter().map(|&x| x as f64), opts.suppress, true),
                precision,
            );
            Box::new(move |i| f.format(&Fl::from_f32(v[i])))
        }
        Values::I64(v) => {
            let sel: Vec<i64> = picked.iter().map(|&i| v[i]).collect();
            let w = int_width(sel.iter().copied());
            Box::new(move |i| format!("{:>w$}", v[i]))
        }
        Values::I32(v) => {
            let sel: Vec<i64> = picked.iter().map(|&i| v[i] as i64).collect();
            let w = int_width(sel.iter().copied());
            Box::new(move |i| format!("{:>w$}", v[i]))
        }
        Values::Bool(v) => {
            // NumPy pads True to the width of False, except in 0-d arrays.
            let t = if data.shape.is_empty() {
                "True"
            } else {
                " True"
            };
            Box::new(move |i| {
                if v[i] {
                    t.to_string()
                } else {
                    "False".to_string()
                }
            })
        }
    }
}

fn int_width(it: impl Iterator<Item = i64>) -> usize {
    let (mut max, mut min) = (i64::MIN, i64::MAX);
    let mut any = false;
    for x in it {
        any = true;
        max = max.max(x);
        min = min.min(x);
    }
    if !any {
        return 0;
    }
    max.to_string().len().max(min.to_string().len())
}

/// Indices shown along one axis; `a[:e]` and `a[-e:]` as NumPy's `_leading_trailing` takes them.
fn shown_indices(len: usize, edge: usize, summary: bool) -> Vec<usize> {
    if summary && len > edge.saturating_mul(2) && edge > 0 {
        (0..edge).chain(len - edge..len).collect()
    } else {
        (0..len).collect()
    }
}

/// Flat offsets of every element NumPy uses to fix the common format.
fn picked_offsets(shape: &[usize], edge: usize, summary: bool) -> Vec<usize> {
    let mut offsets = vec![0usize];
    for &len in shape {
        let idx = shown_indices(len, edge, summary);
        let mut next = Vec::with_capacity(offsets.len() * idx.len());
        for &o in &offsets {
            for &i in &idx {
                next.push(o * len + i);
            }
        }
        offsets = next;
    }
    offsets
}

/// Layout state for NumPy's `_formatArray`.
struct Layout<'a> {
    shape: &'a [usize],
    strides: Vec<usize>,
    fmt: Box<dyn Fn(usize) -> String + 'a>,
    separator: &'a str,
    edge: usize,
    summary: bool,
}

/// NumPy's `_extendLine`: wrap before `word` if it would pass the width and wrapping helps.
fn extend_line(s: &mut String, line: &mut String, word: &str, width: i64, prefix: &str) {
    let needs_wrap = (line.len() + word.len()) as i64 > width && line.len() > prefix.len();
    if needs_wrap {
        s.push_str(line.trim_end());
        s.push('\n');
        line.clear();
        line.push_str(prefix);
    }
    line.push_str(word);
}

impl Layout<'_> {
    fn rec(&self, offset: usize, axis: usize, hanging: &str, width: i64) -> String {
        let axes_left = self.shape.len() - axis;
        if axes_left == 0 {
            return (self.fmt)(offset);
        }
        let next_hanging = format!("{hanging} ");
        let next_width = width - 1;
        let len = self.shape[axis];
        let stride = self.strides[axis];
        let show_summary = self.summary && self.edge.saturating_mul(2) < len;
        let (leading, trailing) = if show_summary {
            (self.edge, self.edge)
        } else {
            (0, len)
        };
        let sep_trim = self.separator.trim_end();
        let mut s = String::new();
        if axes_left == 1 {
            let elem_width = width - sep_trim.len().max(1) as i64;
            let mut line = hanging.to_string();
            for i in 0..leading {
                let word = self.rec(offset + i * stride, axis + 1, &next_hanging, next_width);
                extend_line(&mut s, &mut line, &word, elem_width, hanging);
                line.push_str(self.separator);
            }
            if show_summary {
                extend_line(&mut s, &mut line, "...", elem_width, hanging);
                line.push_str(self.separator);
            }
            for i in (2..=trailing).rev() {
                let word = self.rec(
                    offset + (len - i) * stride,
                    axis + 1,
                    &next_hanging,
                    next_width,
                );
                extend_line(&mut s, &mut line, &word, elem_width, hanging);
                line.push_str(self.separator);
            }
            let word = self.rec(
                offset + (len - 1) * stride,
                axis + 1,
                &next_hanging,
                next_width,
            );
            extend_line(&mut s, &mut line, &word, elem_width, hanging);
            s.push_str(&line);
        } else {
            let line_sep = format!("{sep_trim}{}", "\n".repeat(axes_left - 1));
            for i in 0..leading {
                s.push_str(hanging);
                s.push_str(&self.rec(offset + i * stride, axis + 1, &next_hanging, next_width));
                s.push_str(&line_sep);
            }
            if show_summary {
                s.push_str(hanging);
                s.push_str("...");
                s.push_str(&line_sep);
            }
            for i in (2..=trailing).rev() {
                s.push_str(hanging);
                s.push_str(&self.rec(
                    offset + (len - i) * stride,
                    axis + 1,
                    &next_hanging,
                    next_width,
                ));
                s.push_str(&line_sep);
            }
            s.push_str(hanging);
            s.push_str(&self.rec(
                offset + (len - 1) * stride,
                axis + 1,
                &next_hanging,
                next_width,
            ));
        }
        format!("[{}]", &s[hanging.len()..])
    }
}

/// NumPy's `array2string` for a non-empty array.
fn array2string(
    data: &NpData,
    opts: &PrintOptions,
    separator: &str,
    prefix_len: usize,
    width: i64,
) -> String {
    let summary = data.size() > opts.threshold;
    let picked = picked_offsets(&data.shape, opts.edgeitems, summary);
    let fmt = element_formatter(data, &picked, opts);
    let mut strides = vec![1usize; data.shape.len()];
    for k in (0..data.shape.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * data.shape[k + 1];
    }
    let layout = Layout {
        shape: &data.shape,
        strides,
        fmt,
        separator,
        edge: opts.edgeitems,
        summary,
    };
    let prefix = " ".repeat(prefix_len + 1);
    layout.rec(0, 0, &prefix, width)
}

/// `str(x)` of a NumPy float scalar: shortest digits, scientific outside `[1e-4, upper)`
/// (NumPy's upper cutoff is 1e16 for float64, 1e6 for float32).
fn scalar_float_str(v: &Fl, abs: f64, upper: f64) -> String {
    if v.nan {
        return "nan".into();
    }
    if v.inf {
        return if v.neg { "-inf" } else { "inf" }.into();
    }
    if abs == 0.0 || (1e-4..upper).contains(&abs) {
        let trim = Trim::LeaveOneZero;
        positional(
            v.d,
            v.neg,
            &FloatOptions {
                trim,
                ..FloatOptions::default()
            },
        )
    } else {
        let trim = Trim::DptZeros;
        scientific(
            v.d,
            v.neg,
            &FloatOptions {
                trim,
                ..FloatOptions::default()
            },
        )
    }
}

/// `repr(x)` of a Python float.
pub fn float_str(x: f64) -> String {
    scalar_float_str(&Fl::from_f64(x), x.abs(), 1e16)
}

/// `str(a)`.
pub fn array_str(data: &NpData, opts: &PrintOptions) -> String {
    if data.shape.is_empty() {
        // A 0-d array prints as its scalar, ignoring the precision option.
        return match &data.values {
            Values::F64(v) => v.first().map_or(String::new(), |&x| float_str(x)),
            Values::F32(v) => v.first().map_or(String::new(), |&x| {
                scalar_float_str(&Fl::from_f32(x), x.abs() as f64, 1e6)
            }),
            Values::I64(v) => v.first().map_or(String::new(), |x| x.to_string()),
            Values::I32(v) => v.first().map_or(String::new(), |x| x.to_string()),
            Values::Bool(v) => v.first().map_or(String::new(), |&b| {
                if b { "True" } else { "False" }.to_string()
            }),
        };
    }
    if data.size() == 0 {
        return "[]".into();
    }
    array2string(
        data,
        opts,
        " ",
        0,
        opts.linewidth.min(i64::MAX as usize) as i64,
    )
}

/// `repr(a)`: `array([...])` plus the shape and dtype NumPy adds when they are not implied.
pub fn array_repr(data: &NpData, opts: &PrintOptions) -> String {
    let size = data.size();
    let width = opts.linewidth.min(i64::MAX as usize) as i64;
    let lst = if size == 0 {
        "[]".to_string()
    } else {
        array2string(data, opts, ", ", "array(".len(), width - 1)
    };
    let mut extras = Vec::new();
    if (size == 0 && data.shape != [0]) || size > opts.threshold {
        extras.push(format!("shape={}", shape_repr(&data.shape)));
    }
    if !data.dtype_implied() || size == 0 {
        extras.push(format!("dtype={}", data.dtype()));
    }
    if extras.is_empty() {
        return format!("array({lst})");
    }
    let arr_str = format!("array({lst},");
    let extra_str = format!("{})", extras.join(", "));
    let last_line_len = arr_str.len() - arr_str.rfind('\n').map_or(0, |p| p + 1);
    let spacer = if (last_line_len + extra_str.len() + 1) as i64 > width {
        "\n      "
    } else {
        " "
    };
    format!("{arr_str}{spacer}{extra_str}")
}

/// Python's repr of a shape tuple.
pub fn shape_repr(shape: &[usize]) -> String {
    match shape {
        [] => "()".into(),
        [n] => format!("({n},)"),
        _ => {
            let parts: Vec<String> = shape.iter().map(|n| n.to_string()).collect();
            format!("({})", parts.join(", "))
        }
    }
}

/// One formatted element per cell, for the HTML view of a notebook output.
pub fn html_table(data: &NpData, opts: &PrintOptions) -> String {
    let size = data.size();
    let escaped = crate::html::escape;
    if data.shape.len() > 2 || size > opts.threshold || size == 0 {
        return format!("<pre>{}</pre>", escaped(&array_repr(data, opts)));
    }
    let all: Vec<usize> = (0..size).collect();
    let fmt = element_formatter(data, &all, opts);
    let cols = data.shape.last().copied().unwrap_or(1).max(1);
    let mut html = String::from("<table>");
    for row in 0..size / cols {
        html.push_str("<tr>");
        for c in 0..cols {
            html.push_str("<td>");
            html.push_str(&escaped(fmt(row * cols + c).trim()));
            html.push_str("</td>");
        }
        html.push_str("</tr>");
    }
    html.push_str("</table>");
    html
}
