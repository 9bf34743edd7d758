//! Colours: the viridis colour map, the colours of non-finite cells, and the text colour that
//! reads on a cell.

use plotters::style::RGBColor;

/// Cells holding NaN, cells holding ±inf, text and lines, and the background.
pub(crate) const NAN_COLOUR: RGBColor = RGBColor(200, 200, 200);
pub(crate) const INF_COLOUR: RGBColor = RGBColor(228, 26, 28);
pub(crate) const INK: RGBColor = RGBColor(0, 0, 0);
pub(crate) const BACKGROUND: RGBColor = RGBColor(255, 255, 255);
/// Grid lines behind line plots.
pub(crate) const GRID: RGBColor = RGBColor(225, 225, 225);

/// The colours of line plots' series, in turn: matplotlib's `tab10` palette.
pub(crate) const SERIES: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The viridis colour map (perceptually uniform, dark purple to yellow) at `t` in [0, 1]
/// (clamped; NaN gives the low end), as sRGB bytes.
///
/// A degree-6 polynomial fit of matplotlib's table (within 4/255 of it per channel).
///
/// ```
/// use attention_lab::prelude::*;
/// use attention_lab_plot::*;
///
/// assert_eq!(viridis(0.0), (71, 1, 85)); // dark purple
/// assert_eq!(viridis(0.5), (31, 144, 139)); // teal (matplotlib: 33, 145, 140)
/// assert_eq!(viridis(1.0), (252, 231, 33)); // yellow
/// ```
pub fn viridis(t: f64) -> (u8, u8, u8) {
    const C: [[f64; 3]; 7] = [
        [
            0.277_727_327_223_417_7,
            0.005_407_344_544_966_578,
            0.334_099_805_335_306_1,
        ],
        [
            0.105_093_043_108_577_4,
            1.404_613_529_898_575,
            1.384_590_162_594_685,
        ],
        [
            -0.330_861_828_725_556_3,
            0.214_847_559_468_213,
            0.095_095_163_028_236_59,
        ],
        [
            -4.634_230_498_983_486,
            -5.799_100_973_351_585,
            -19.332_440_956_279_87,
        ],
        [
            6.228_269_936_347_081,
            14.179_933_366_805_09,
            56.690_552_600_681_05,
        ],
        [
            4.776_384_997_670_288,
            -13.745_145_377_746_01,
            -65.353_032_633_372_34,
        ],
        [
            -5.435_455_855_934_631,
            4.645_852_612_178_535,
            26.312_435_249_583_2,
        ],
    ];
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let channel = |i: usize| {
        let v = C.iter().rev().fold(0.0, |acc, c| acc * t + c[i]);
        (v.clamp(0.0, 1.0) * 255.0).round() as u8
    };
    (channel(0), channel(1), channel(2))
}

/// The colour of a cell holding `v` when the colour range is `lo..=hi`: viridis for finite
/// values, its own colour for NaN and for infinities.
pub(crate) fn cell_colour(v: f64, lo: f64, hi: f64) -> RGBColor {
    if v.is_nan() {
        NAN_COLOUR
    } else if v.is_infinite() {
        INF_COLOUR
    } else {
        let (r, g, b) = viridis((v - lo) / (hi - lo));
        RGBColor(r, g, b)
    }
}

/// Black or white, whichever contrasts more with `fill` (WCAG relative luminance).
pub(crate) fn text_colour(fill: RGBColor) -> RGBColor {
    let lin = |c: u8| {
        let c = c as f64 / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    };
    let l = 0.2126 * lin(fill.0) + 0.7152 * lin(fill.1) + 0.0722 * lin(fill.2);
    if l > 0.179 {
        INK
    } else {
        BACKGROUND
    }
}

/// One colour a head, twelve apart (an encoder layer's heads): Okabe-Ito's blue and orange,
/// then ten colours picked one at a time, each the farthest (CIELAB ΔE) from those before it
/// with normal vision and under protanopia, deuteranopia and tritanopia (Machado et al. 2009),
/// among sRGB colours of lightness 25 to 72 and chroma 30 or more (visible as thin lines on
/// white, and on black once a dark theme inverts them). Any two of the twelve are at least
/// 20 ΔE apart with each kind of vision (`tests/colormap.rs` checks it); the first heads get
/// the most distinct colours. Heads past the twelfth take the colours again; the legend names
/// each.
pub(crate) const HEADS: [RGBColor; 12] = [
    RGBColor(0x00, 0x72, 0xb2),
    RGBColor(0xe6, 0x9f, 0x00),
    RGBColor(0x44, 0x44, 0x00),
    RGBColor(0x88, 0x00, 0xff),
    RGBColor(0x99, 0xbb, 0x77),
    RGBColor(0x88, 0x22, 0x44),
    RGBColor(0x55, 0xbb, 0xee),
    RGBColor(0x33, 0x22, 0xaa),
    RGBColor(0xbb, 0x55, 0xff),
    RGBColor(0x99, 0x77, 0x22),
    RGBColor(0x66, 0x22, 0x66),
    RGBColor(0xdd, 0x55, 0x88),
];

/// The colour of head `h` (from 0) in the views, as sRGB bytes: twelve colours told apart
/// with normal vision and the three kinds of colour blindness, then the same again.
///
/// ```
/// use attention_lab_plot::*;
///
/// assert_eq!(head_colour(0), (0, 114, 178)); // Okabe-Ito's blue
/// assert_eq!(head_colour(1), (230, 159, 0)); // and orange
/// let twelve: std::collections::BTreeSet<_> = (0..12).map(head_colour).collect();
/// assert_eq!(twelve.len(), 12);
/// assert_eq!(head_colour(12), head_colour(0));
/// ```
pub fn head_colour(h: usize) -> (u8, u8, u8) {
    let c = head_rgb(h);
    (c.0, c.1, c.2)
}

/// [`head_colour`] as plotters' colour.
pub(crate) fn head_rgb(h: usize) -> RGBColor {
    HEADS[h % HEADS.len()]
}

/// The least opacity of a line or box of a weight above 0: the faintest weight still shows.
pub(crate) const FLOOR: f64 = 0.08;

/// How strongly lines show when `shown` heads are shown at once: one head at full strength,
/// more heads each fainter (1/√shown), so that many heads' lines add up to about one head's
/// ink instead of a dark fan (bertviz divides by the number of heads).
pub(crate) fn fade(shown: usize) -> f64 {
    1.0 / (shown.max(1) as f64).sqrt()
}

/// The opacity of a weight's line when `shown` heads are shown: 0 for a weight that draws
/// nothing (0, negative or not a number), else at least [`FLOOR`] (0.08) with one head shown,
/// rising with the square root of the weight (so that a diffuse head, whose weights are all
/// near 1 / tokens, stays visible) to 1 for a weight of 1; with more heads shown every line
/// is fainter by 1/√shown (the per-head boxes shown on hover keep one head's opacity). The
/// exact weight is in the view's tooltips.
///
/// ```
/// use attention_lab_plot::*;
///
/// assert_eq!(line_opacity(1.0, 1), 1.0);
/// assert_eq!(line_opacity(0.0, 1), 0.0); // masked: no line
/// assert_eq!(line_opacity(1e-62, 1), 0.08); // the floor: never erased
/// assert!((line_opacity(0.25, 1) - 0.54).abs() < 1e-12); // 0.08 + 0.92 × √0.25
/// assert!((line_opacity(1.0, 4) - 0.5).abs() < 1e-12); // four heads: each half as strong
/// assert!((line_opacity(1e-62, 4) - 0.04).abs() < 1e-12);
/// ```
pub fn line_opacity(w: f64, shown: usize) -> f64 {
    if drawn(w) {
        (FLOOR + strength(w)) * fade(shown)
    } else {
        0.0
    }
}

/// Whether a weight draws anything: above 0 (not masked) and finite.
pub(crate) fn drawn(w: f64) -> bool {
    w > 0.0 && w.is_finite()
}

/// The part of a weight's opacity above the floor with one head shown: (1 − floor) × √w.
pub(crate) fn strength(w: f64) -> f64 {
    (1.0 - FLOOR) * w.clamp(0.0, 1.0).sqrt()
}

/// A diverging colour for `t` in [-1, 1] (clamped; NaN is grey): blue below 0, white at 0,
/// orange above, the two ends of Okabe-Ito's blue and orange.
pub(crate) fn diverging(t: f64) -> RGBColor {
    if t.is_nan() {
        return NAN_COLOUR;
    }
    let t = t.clamp(-1.0, 1.0);
    let (r, g, b) = if t < 0.0 {
        (0.0, 114.0, 178.0)
    } else {
        (230.0, 159.0, 0.0)
    };
    let a = t.abs();
    let mix = |c: f64| (255.0 + (c - 255.0) * a).round() as u8;
    RGBColor(mix(r), mix(g), mix(b))
}
