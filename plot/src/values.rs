//! Numbers as text: the values written in the cells and the colour bar's ticks.

/// At most this many colour bar ticks, at round values.
const BAR_TICKS: usize = 5;

/// NumPy-like short text for a value: `decimals` decimals, `nan`, `inf`, `-inf`, no `-0.00`,
/// and scientific notation from 1e6 on.
pub(crate) fn format_value(v: f64, decimals: usize) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v.abs() >= 1e6 {
        return format!("{v:.1e}");
    }
    let s = format!("{v:.decimals$}");
    match s.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
        _ => s,
    }
}

/// Colour bar ticks for the range `lo..hi`, top (high) to bottom: fraction from the bottom
/// and label with `decimals` decimals.
pub(crate) fn ticks(lo: f64, hi: f64, decimals: usize) -> Vec<(f64, String)> {
    // The finest step of 1, 2, 2.5 or 5 times a power of ten with at most 5 ticks.
    let magnitude = 10f64.powf(((hi - lo) / 5.0).log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|step| (hi / step + 1e-9).floor() - (lo / step - 1e-9).ceil() < BAR_TICKS as f64)
        .unwrap_or(hi - lo);
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    (first..=last)
        .rev()
        .map(|k| {
            let v = k as f64 * step;
            ((v - lo) / (hi - lo), format_value(v, decimals))
        })
        .collect()
}
