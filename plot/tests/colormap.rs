//! The viridis colour map: matplotlib's table at its ends and between, clamping, and colours
//! that grow lighter from low to high values.

use attention_lab_plot::viridis;

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
