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
    ticks_at(lo, hi, tick_step(lo, hi), decimals)
}

/// The finest step of 1, 2, 2.5 or 5 times a power of ten with at most 5 ticks in `lo..hi`.
pub(crate) fn tick_step(lo: f64, hi: f64) -> f64 {
    let magnitude = 10f64.powf(((hi - lo) / 5.0).log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|step| (hi / step + 1e-9).floor() - (lo / step - 1e-9).ceil() < BAR_TICKS as f64)
        .unwrap_or(hi - lo)
}

/// The ticks at the multiples of `step` in `lo..hi`, top (high) to bottom.
pub(crate) fn ticks_at(lo: f64, hi: f64, step: f64, decimals: usize) -> Vec<(f64, String)> {
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

/// The fewest decimals that write every multiple of `step` exactly (0 for 10, 1 for 0.5,
/// 2 for 0.25), at most 10.
pub(crate) fn step_decimals(step: f64) -> usize {
    (0..10)
        .find(|&d| {
            let scaled = step * 10f64.powi(d as i32);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.abs().max(1.0)
        })
        .unwrap_or(10)
}

/// The smallest and largest finite values, or `None` when there are none; equal ones are
/// widened by 0.5 each side so that they span a range.
pub(crate) fn finite_span(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo > hi {
        None
    } else if lo == hi {
        Some((lo - 0.5, hi + 0.5))
    } else {
        Some((lo, hi))
    }
}

/// How many PNG pixels a picture's pixel is: `png_scale` times `scale`, rounded, at least 1.
pub(crate) fn zoom(png_scale: u32, scale: f64) -> u32 {
    (f64::from(png_scale) * scale).round().max(1.0) as u32
}

#[cfg(test)]
mod tests {
    use super::{finite_span, format_value, step_decimals, tick_step, ticks};

    #[test]
    fn values_are_written_as_python_formats_them_without_negative_zero() {
        // Expected: Python's "%.2f" % v (and "%.0f", "%.3f"), but "-0.00" is "0.00".
        let cases: [(f64, usize, &str); 16] = [
            (0.7, 2, "0.70"),
            (0.001, 2, "0.00"),
            (0.999, 2, "1.00"),
            (0.125, 2, "0.12"),
            (0.375, 2, "0.38"),
            (1.005, 2, "1.00"),
            (0.005, 2, "0.01"),
            (-0.005, 2, "-0.01"),
            (-1.5, 2, "-1.50"),
            (999_999.0, 2, "999999.00"),
            (0.125, 3, "0.125"),
            (2.5, 0, "2"),
            (-1.5, 0, "-2"),
            (-0.0001, 2, "0.00"),
            (-0.0, 2, "0.00"),
            (-0.4, 0, "0"),
        ];
        for (v, decimals, want) in cases {
            assert_eq!(
                format_value(v, decimals),
                want,
                "{v} with {decimals} decimals"
            );
        }
    }

    #[test]
    fn non_finite_and_large_values_have_short_forms() {
        assert_eq!(format_value(f64::NAN, 2), "nan");
        assert_eq!(format_value(f64::INFINITY, 2), "inf");
        assert_eq!(format_value(f64::NEG_INFINITY, 5), "-inf");
        assert_eq!(format_value(1e6, 2), "1.0e6");
        assert_eq!(format_value(-2.5e7, 4), "-2.5e7");
        assert_eq!(format_value(f64::MAX, 2), "1.8e308");
        assert_eq!(format_value(f64::MIN_POSITIVE, 2), "0.00");
    }

    #[test]
    fn weights_get_quarter_ticks_and_scores_whole_ones() {
        let labels = |t: Vec<(f64, String)>| t.into_iter().map(|(_, s)| s).collect::<Vec<_>>();
        assert_eq!(
            ticks(0.0, 1.0, 2),
            [
                (1.0, "1.00"),
                (0.75, "0.75"),
                (0.5, "0.50"),
                (0.25, "0.25"),
                (0.0, "0.00")
            ]
            .map(|(f, s)| (f, s.to_string()))
        );
        assert_eq!(
            labels(ticks(-1.5, 2.5, 2)),
            ["2.00", "1.00", "0.00", "-1.00"]
        );
        assert_eq!(
            labels(ticks(-2.0, 2.0, 1)),
            ["2.0", "1.0", "0.0", "-1.0", "-2.0"]
        );
        assert_eq!(labels(ticks(3.0, 7.0, 0)), ["7", "6", "5", "4", "3"]);
        assert_eq!(
            labels(ticks(0.0, 0.001, 5)),
            ["0.00100", "0.00075", "0.00050", "0.00025", "0.00000"]
        );
    }

    #[test]
    fn ticks_are_two_to_five_evenly_spaced_points_inside_the_range_top_first() {
        for lo_k in -20..20 {
            for width_k in 1..60 {
                let lo = lo_k as f64 * 0.37;
                let hi = lo + width_k as f64 * 0.173;
                let t = ticks(lo, hi, 2);
                assert!((2..=5).contains(&t.len()), "{lo}..{hi}: {t:?}");
                for (f, _) in &t {
                    assert!((-1e-9..=1.0 + 1e-9).contains(f), "{lo}..{hi}: {t:?}");
                }
                let gaps: Vec<f64> = t.windows(2).map(|w| w[0].0 - w[1].0).collect();
                for g in &gaps {
                    assert!(*g > 0.0 && (g - gaps[0]).abs() < 1e-9, "{lo}..{hi}: {t:?}");
                }
            }
        }
    }

    #[test]
    fn steps_get_the_decimals_that_write_them_exactly() {
        let cases = [
            (10.0, 0),
            (1.0, 0),
            (0.5, 1),
            (0.25, 2),
            (2.5, 1),
            (0.001, 3),
            (2e-4, 4),
        ];
        for (step, want) in cases {
            assert_eq!(step_decimals(step), want, "{step}");
        }
        // Every tick step of a range: its labels written with its decimals are all different.
        for width_k in 1..200 {
            let step = tick_step(0.0, width_k as f64 * 0.0137);
            let d = step_decimals(step);
            let labels: Vec<String> = (0..5).map(|k| format_value(k as f64 * step, d)).collect();
            let mut unique = labels.clone();
            unique.dedup();
            assert_eq!(unique, labels, "step {step}, {d} decimals");
        }
    }

    #[test]
    fn spans_skip_non_finite_values_and_widen_single_ones() {
        let span = |v: &[f64]| finite_span(v.iter().copied());
        assert_eq!(
            span(&[3.0, f64::NAN, -1.0, f64::INFINITY]),
            Some((-1.0, 3.0))
        );
        assert_eq!(span(&[2.0, 2.0]), Some((1.5, 2.5)));
        assert_eq!(span(&[f64::NAN]), None);
        assert_eq!(span(&[]), None);
    }
}
