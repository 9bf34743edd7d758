//! The viridis colour map: matplotlib's table at its ends and between, clamping, and colours
//! that grow lighter from low to high values. The heads' colours, apart with colour blindness
//! too, and the lines' opacity.

use attention_lab_plot::{head_colour, line_opacity, viridis};

/// Entries 0, 32, …, 224 and 255 of matplotlib's 256-entry viridis table (`_viridis_data` in
/// matplotlib/_cm_listed.py, CC0), for t = index / 255.
const MATPLOTLIB: [(usize, [f64; 3]); 9] = [
    (0, [0.267004, 0.004874, 0.329415]),
    (32, [0.278826, 0.175490, 0.483397]),
    (64, [0.229739, 0.322361, 0.545706]),
    (96, [0.172719, 0.448791, 0.557885]),
    (128, [0.127568, 0.566949, 0.550556]),
    (160, [0.157851, 0.683765, 0.501686]),
    (192, [0.369214, 0.788888, 0.382914]),
    (224, [0.678489, 0.863742, 0.189503]),
    (255, [0.993248, 0.906157, 0.143936]),
];

#[test]
fn viridis_is_within_4_of_255_of_matplotlibs_table_ends_included() {
    for (index, want) in MATPLOTLIB {
        let (r, g, b) = viridis(index as f64 / 255.0);
        for (got, want) in [r, g, b].into_iter().zip(want) {
            let off = (got as f64 - want * 255.0).abs();
            assert!(
                off <= 4.0,
                "entry {index}: {:?} against {want:?}",
                (r, g, b)
            );
        }
    }
    // The ends: dark purple and yellow.
    assert_eq!(viridis(0.0), (71, 1, 85));
    assert_eq!(viridis(1.0), (252, 231, 33));
}

#[test]
fn values_outside_0_1_are_clamped_and_nan_is_the_low_end() {
    for t in [-0.001, -1.0, -1e300, f64::NEG_INFINITY, f64::NAN] {
        assert_eq!(viridis(t), viridis(0.0), "{t}");
    }
    for t in [1.001, 2.0, 1e300, f64::INFINITY] {
        assert_eq!(viridis(t), viridis(1.0), "{t}");
    }
}

#[test]
fn higher_values_are_lighter() {
    // Luma of the sRGB bytes (Rec. 709 weights).
    let luma = |(r, g, b): (u8, u8, u8)| 0.2126 * r as f64 + 0.7152 * g as f64 + 0.0722 * b as f64;
    // Over 128 steps (twice the colour bar's 64 strips) each colour is lighter than the last;
    // finer steps can repeat a byte.
    let steps: Vec<(u8, u8, u8)> = (0..128).map(|k| viridis(k as f64 / 127.0)).collect();
    for pair in steps.windows(2) {
        assert!(
            luma(pair[1]) > luma(pair[0]),
            "{:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
    // Green never falls, at any step.
    let fine: Vec<u8> = (0..=1000).map(|k| viridis(k as f64 / 1000.0).1).collect();
    assert!(fine.windows(2).all(|p| p[1] >= p[0]));
    assert_eq!((fine[0], fine[1000]), (1, 231));
}

/// sRGB bytes to linear light.
fn linear(c: u8) -> f64 {
    let c = c as f64 / 255.0;
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

/// Linear RGB to CIELAB (D65).
fn lab([r, g, b]: [f64; 3]) -> [f64; 3] {
    let x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047;
    let y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
    let z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
    let f = |t: f64| {
        if t > 216.0 / 24389.0 {
            t.cbrt()
        } else {
            (24389.0 / 27.0 * t + 16.0) / 116.0
        }
    };
    [
        116.0 * f(y) - 16.0,
        500.0 * (f(x) - f(y)),
        200.0 * (f(y) - f(z)),
    ]
}

/// Colour vision as a matrix on linear RGB: normal, and Machado, Oliveira and Fernandes'
/// (2009) simulations of full protanopia, deuteranopia and tritanopia.
const VISIONS: [(&str, [[f64; 3]; 3]); 4] = [
    (
        "normal",
        [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
    ),
    (
        "protanopia",
        [
            [0.152286, 1.052583, -0.204868],
            [0.114503, 0.786281, 0.099216],
            [-0.003882, -0.048116, 1.051998],
        ],
    ),
    (
        "deuteranopia",
        [
            [0.367322, 0.860646, -0.227968],
            [0.280085, 0.672501, 0.047413],
            [-0.011820, 0.042940, 0.968881],
        ],
    ),
    (
        "tritanopia",
        [
            [1.255528, -0.076749, -0.178779],
            [-0.078411, 0.930809, 0.147602],
            [0.004733, 0.691367, 0.303900],
        ],
    ),
];

/// How a colour looks with a kind of colour vision, in CIELAB.
fn seen((r, g, b): (u8, u8, u8), m: &[[f64; 3]; 3]) -> [f64; 3] {
    let c = [linear(r), linear(g), linear(b)];
    let row = |i: usize| (m[i][0] * c[0] + m[i][1] * c[1] + m[i][2] * c[2]).clamp(0.0, 1.0);
    lab([row(0), row(1), row(2)])
}

#[test]
fn twelve_head_colours_stay_apart_with_each_kind_of_colour_blindness() {
    let colours: Vec<(u8, u8, u8)> = (0..12).map(head_colour).collect();
    for (name, m) in &VISIONS {
        for a in 0..12 {
            for b in a + 1..12 {
                let (p, q) = (seen(colours[a], m), seen(colours[b], m));
                let de =
                    ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt();
                assert!(
                    de >= 20.0,
                    "heads {} and {} are {de:.1} ΔE apart with {name}",
                    a + 1,
                    b + 1
                );
            }
        }
    }
    // Every colour shows as a thin line on white: CIELAB lightness at most 72.
    for c in &colours {
        assert!(seen(*c, &VISIONS[0].1)[0] <= 72.0, "{c:?}");
    }
    // The old palette of seven repeated its colours from head 8 on; this one from head 13.
    assert_eq!(head_colour(7), head_colour(7 + 12));
    assert_ne!(head_colour(0), head_colour(7));
}

#[test]
fn line_opacity_rises_with_the_weight_from_a_floor_and_falls_with_the_heads_shown() {
    let weights: Vec<f64> = (0..=1000).map(|k| k as f64 / 1000.0).collect();
    for shown in [1, 2, 3, 12] {
        let o: Vec<f64> = weights.iter().map(|&w| line_opacity(w, shown)).collect();
        assert_eq!(o[0], 0.0, "a weight of 0 draws nothing");
        let floor = 0.08 / (shown as f64).sqrt();
        assert!(o[1..].iter().all(|x| (floor..=1.0).contains(x)));
        assert!(
            o[1..].windows(2).all(|p| p[1] > p[0]),
            "rising with the weight"
        );
    }
    for w in [1e-300, 1e-62, 1e-9, 1.0 / 510.0, 0.077, 0.5, 1.0] {
        let by_heads: Vec<f64> = (1..=12).map(|n| line_opacity(w, n)).collect();
        assert!(
            by_heads.windows(2).all(|p| p[1] < p[0]),
            "fainter with more heads: {w}"
        );
        assert!(by_heads[11] >= 0.08 / 12f64.sqrt());
    }
    // The finding of issue 33: weights under 1/510 are no longer rounded away, and a diffuse
    // head (1/13 everywhere) shows at a third of full strength alone; twelve heads shown at
    // once keep more than a tenth of it.
    assert!(line_opacity(1.0 / 600.0, 1) > 0.08);
    assert!(line_opacity(1.0 / 13.0, 1) > 0.3);
    assert!(line_opacity(1.0 / 13.0, 12) > 0.09);
    for bad in [f64::NAN, -0.5, f64::INFINITY, f64::NEG_INFINITY] {
        assert_eq!(line_opacity(bad, 1), 0.0, "{bad}");
    }
}
