//! The NumPy printer on any small array of each dtype, with any print options: it must not panic.
#![no_main]

use arbitrary::Arbitrary;
use attention_lab::np::{float_str, NpArray, PrintOptions};
use libfuzzer_sys::fuzz_target;
use ndarray::{ArrayD, IxDyn};

#[derive(Debug, Arbitrary)]
enum Values {
    F64(Vec<f64>),
    F32(Vec<f32>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    Bool(Vec<bool>),
}

#[derive(Debug, Arbitrary)]
struct Input {
    /// Up to four axes of up to 7 items each (small, so one run prints many arrays).
    shape: Vec<u8>,
    values: Values,
    precision: u8,
    suppress: bool,
    linewidth: u8,
    threshold: u16,
    edgeitems: u8,
}

/// An array of `shape`, cycling through `values` (or all defaults when there are none).
fn fill<T: Clone + Default>(shape: &[usize], values: &[T]) -> ArrayD<T> {
    let len: usize = shape.iter().product();
    let data = (0..len)
        .map(|i| values.get(i % values.len().max(1)).cloned().unwrap_or_default())
        .collect();
    ArrayD::from_shape_vec(IxDyn(shape), data).expect("the data has the shape's length")
}

fuzz_target!(|input: Input| {
    let shape: Vec<usize> = input.shape.iter().take(4).map(|&n| usize::from(n % 8)).collect();
    let array = match &input.values {
        Values::F64(v) => {
            v.iter().for_each(|&x| drop(float_str(x)));
            NpArray::from(fill(&shape, v))
        }
        Values::F32(v) => NpArray::from(fill(&shape, v)),
        Values::I64(v) => NpArray::from(fill(&shape, v)),
        Values::I32(v) => NpArray::from(fill(&shape, v)),
        Values::Bool(v) => NpArray::from(fill(&shape, v)),
    };
    let opts = PrintOptions {
        precision: usize::from(input.precision),
        suppress: input.suppress,
        linewidth: usize::from(input.linewidth),
        threshold: usize::from(input.threshold),
        edgeitems: usize::from(input.edgeitems % 8),
    };
    let text = array.array_str(&opts);
    let repr = array.array_repr(&opts);
    // Every element is shown, or the array is summarised with "...".
    assert!(!text.is_empty() && repr.starts_with("array("));
});
