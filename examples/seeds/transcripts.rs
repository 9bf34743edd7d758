//! What each seed document's code prints, computed with attention-lab and printed with its
//! `np` module. Shared by the `seeds` example and the tests/seed_text.rs check, which compares
//! every byte with NumPy's transcripts in tests/data/transcripts/.

use std::error::Error;
use std::fmt::Write;

use attention_lab::prelude::*;

/// A transcript, or the first error met while computing it.
pub type Transcript = Result<String, Box<dyn Error>>;

/// Computes and prints one seed document.
pub type Maker = fn() -> Transcript;

/// The seeds that print something, with their transcript makers.
pub const SEEDS: [(&str, Maker); 4] = [("000", t000), ("001", t001), ("003", t003), ("004", t004)];

/// Python's `print(label, a)`: the label, a space, then `str(a)`.
fn print(out: &mut String, label: &str, a: &Array2<f64>, opts: &PrintOptions) {
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{label} {}", array_str(a, opts));
}

/// Seed 000: the two-head worked example (stable softmax, weights rounded to 3 decimals).
pub fn t000() -> Transcript {
    let opts = PrintOptions::default();
    let mut out = String::new();
    let x = array![[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]];
    let wq_1 = array![
        [0.1, 0.2, 0.3],
        [0.4, 0.5, 0.6],
        [0.7, 0.8, 0.9],
        [1.0, 1.1, 1.2]
    ];
    let wk_1 = array![
        [0.3, 0.2, 0.1],
        [0.6, 0.5, 0.4],
        [0.9, 0.8, 0.7],
        [1.2, 1.1, 1.0]
    ];
    let wv_1 = array![
        [0.7, 0.8, 0.9],
        [0.4, 0.5, 0.6],
        [0.1, 0.2, 0.3],
        [1.3, 1.4, 1.5]
    ];
    let wq_2 = array![
        [0.2, 0.3, 0.4],
        [0.5, 0.6, 0.7],
        [0.8, 0.9, 1.0],
        [1.1, 1.2, 1.3]
    ];
    let wk_2 = array![
        [0.4, 0.3, 0.2],
        [0.7, 0.6, 0.5],
        [1.0, 0.9, 0.8],
        [1.3, 1.2, 1.1]
    ];
    let wv_2 = array![
        [0.9, 1.0, 1.1],
        [0.6, 0.7, 0.8],
        [0.3, 0.4, 0.5],
        [1.4, 1.5, 1.6]
    ];
    let projections = [[&wq_1, &wk_1, &wv_1], [&wq_2, &wk_2, &wv_2]];
    for (i, ws) in projections.iter().enumerate() {
        for (name, w) in ["WQ", "WK", "WV"].iter().zip(ws) {
            print(&mut out, &format!("{name}_{}:\n", i + 1), w, &opts);
        }
    }
    let wo = Array2::from_shape_fn((6, 4), |(r, c)| ((r * 4 + c + 1) as f64) / 10.0);
    let heads = projections
        .iter()
        .map(|[wq, wk, wv]| Head::new((*wq).clone(), (*wk).clone(), (*wv).clone()))
        .collect::<Result<Vec<_>, _>>()?;
    let layer = MultiHead::new(heads, Some(wo))?.forward(&x, &Attend::new())?;
    for (i, h) in layer.heads.iter().enumerate() {
        let n = i + 1;
        print(&mut out, &format!("Head {n} - Q_{n}:\n"), &h.q, &opts);
        print(&mut out, &format!("Head {n} - K_{n}:\n"), &h.k, &opts);
        print(&mut out, &format!("Head {n} - V_{n}:\n"), &h.v, &opts);
    }
    for (i, h) in layer.heads.iter().enumerate() {
        print(
            &mut out,
            &format!("Head {} - Attention Scores:\n", i + 1),
            &h.scores,
            &opts,
        );
    }
    for (i, h) in layer.heads.iter().enumerate() {
        let label = format!("Head {} - Softmax Attention Weights:\n", i + 1);
        print(&mut out, &label, &np::round(&h.weights, 3), &opts);
    }
    for (i, h) in layer.heads.iter().enumerate() {
        let n = i + 1;
        print(
            &mut out,
            &format!("Head {n} - Weighted Sum (Z_{n}):\n"),
            &h.z,
            &opts,
        );
    }
    print(
        &mut out,
        "Multi-Headed Attention Output (Z):\n",
        &layer.concat,
        &opts,
    );
    writeln!(out, "{}", shape_repr(layer.concat.shape()))?;
    print(
        &mut out,
        "Result after multiplication with W_0:\n",
        layer.result(),
        &opts,
    );
    Ok(out)
}

/// Seed 001 with `np.random.seed(0)`: per-token and matrix forms, four heads, a random W_O.
pub fn t001() -> Transcript {
    let opts = PrintOptions::default();
    let mut out = String::new();
    let mut rs = RandomState::new(0);
    let tokens: Vec<Array2<f64>> = (0..3).map(|_| rs.rand((5, 1))).collect::<Result<_, _>>()?;
    for (i, w) in tokens.iter().enumerate() {
        writeln!(out, "w{}={}\n", i + 1, array_str(w, &opts))?;
    }
    let (wq, wk, wv) = (rs.rand((5, 3))?, rs.rand((5, 3))?, rs.rand((5, 3))?);
    for (name, m) in [("WQ", &wq), ("WK", &wk), ("WV", &wv)] {
        writeln!(out, "\n{name}={}\n", array_str(m, &opts))?;
    }
    for (name, m) in [("q", &wq), ("k", &wk), ("v", &wv)] {
        for (i, w) in tokens.iter().enumerate() {
            writeln!(out, "{name}{}={}\n", i + 1, array_str(&w.t().dot(m), &opts))?;
        }
    }
    let columns: Vec<_> = tokens.iter().map(|w| w.view()).collect();
    let w = concatenate(Axis(1), &columns)?.reversed_axes();
    writeln!(out, "\nW={}\n", array_str(&w, &opts))?;
    let head = Head::new(wq, wk, wv)?.forward(&w, &Attend::new())?;
    for (name, m) in [("Q", &head.q), ("K", &head.k), ("V", &head.v)] {
        writeln!(out, "\n{name}={}\n", array_str(m, &opts))?;
    }
    writeln!(out, "\nattention={}\n", array_str(&head.z, &opts))?;
    let heads = (0..4)
        .map(|_| {
            Ok(Head::new(
                rs.rand((5, 3))?,
                rs.rand((5, 3))?,
                rs.rand((5, 3))?,
            )?)
        })
        .collect::<Result<Vec<_>, Box<dyn Error>>>()?;
    let z = MultiHead::new(heads, None)?
        .forward(&w, &Attend::new())?
        .concat;
    writeln!(out, "{}", shape_repr(z.shape()))?;
    let wo = rs.rand((z.ncols(), 3))?;
    writeln!(out, "\nmultihead={}\n", array_str(&z.dot(&wo), &opts))?;
    Ok(out)
}

/// Seed 003: column-split heads (H=1, H=3), naive softmax, `precision=1`, then the same
/// after swapping the first two tokens.
pub fn t003() -> Transcript {
    let opts = PrintOptions {
        precision: 1,
        ..Default::default()
    };
    let mut out = String::new();
    let mut x = array![
        [0.7, -0.8, -1.2, -1., -0., -0.3],
        [2.7, 0.1, 1.6, 1.8, 1.5, 0.3],
        [0.1, 2.6, -0.1, -1.3, -0.5, -0.7],
        [1.1, 1.5, 1., -0.5, 0.4, 0.4],
        [-0.7, -0.7, 0.7, -1.5, -0.8, 1.]
    ];
    let wq = array![
        [-1.7, 1.6, 0.9, -0.5, 0.4, -1.],
        [-0.4, 1., -0.3, 1., 0.5, 1.1],
        [0.4, -0.9, -1., 0.5, -1.4, 0.],
        [0.3, 1.4, -1.2, 0.2, 0.1, 1.6],
        [-0.8, 0.8, -0.7, -1.3, 0.3, 0.8],
        [1.1, 0.3, -1.5, -2.3, 2.2, -0.7]
    ];
    let wk = array![
        [0.3, -0.4, -1.3, 0.3, -1.7, 1.1],
        [-2.3, -1.1, 0.6, -1.2, 2.2, 0.3],
        [1.1, -0.4, -0.5, 1.9, -1.1, -1.2],
        [-0.4, 1., -1.7, 0., -3.3, -1.4],
        [-0.9, -1.1, -1., 1.4, 1.3, 1.2],
        [-0.7, 0.4, 0.4, -1.4, -0.2, -0.5]
    ];
    let wv = array![
        [-0.1, 0.7, 1., -0.1, 1.6, 0.9],
        [0.4, -1., -0.7, -0.6, -0.9, -0.1],
        [-0.4, 0.5, -1.4, 0.1, 0.6, 0.4],
        [1.4, -1.3, -1.3, -0.6, 1.6, -0.2],
        [-0.4, -0.6, -1.4, -1., 0.4, -0.8],
        [0.2, 0.5, 0.4, -0.5, 1.4, 2.3]
    ];
    let layer = |h| {
        Ok::<_, AttentionError>(
            MultiHead::split(&wq, &wk, &wv, h, None)?.with_softmax(Softmax::Naive),
        )
    };
    let show = |out: &mut String, x: &Array2<f64>, h: usize| -> Result<(), Box<dyn Error>> {
        let result = layer(h)?.forward(x, &Attend::new())?;
        print(out, "Self-Attention Output:\n", result.result(), &opts);
        writeln!(out, "Self-Attention Weights:")?;
        for (i, head) in result.heads.iter().enumerate() {
            writeln!(
                out,
                "Head {}\n {}\n",
                i + 1,
                array_str(&head.weights, &opts)
            )?;
        }
        Ok(())
    };
    let single = layer(1)?.forward(&x, &Attend::new())?;
    print(&mut out, "Self-Attention Output:\n", single.result(), &opts);
    print(
        &mut out,
        "Self-Attention Matrix:\n",
        &single.heads[0].weights,
        &opts,
    );
    show(&mut out, &x, 3)?;
    print(&mut out, "X\n", &x, &opts);
    x = x.select(Axis(0), &[1, 0, 2, 3, 4]);
    print(&mut out, "X after permutation\n", &x, &opts);
    show(&mut out, &x, 1)?;
    show(&mut out, &x, 3)?;
    Ok(out)
}

/// Seed 004: the 2x2 integer example with two heads, naive softmax and a 4x2 W_O.
pub fn t004() -> Transcript {
    let opts = PrintOptions::default();
    let mut out = String::new();
    let x = array![[1.0, 2.0], [3.0, 4.0]];
    let (eye, swap) = (Array2::eye(2), array![[0.0, 1.0], [1.0, 0.0]]);
    let head_1 = Head::new(eye.clone(), swap.clone(), array![[1.0, 0.0], [0.0, -1.0]])?;
    let head_2 = Head::new(swap, eye, array![[0.0, 1.0], [-1.0, 0.0]])?;
    let wo = array![[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]];
    let heads = vec![head_1, head_2];
    let m = MultiHead::new(heads, Some(wo))?
        .with_softmax(Softmax::Naive)
        .forward(&x, &Attend::new())?;
    writeln!(out, "Head 1 Output:\n{}", array_str(&m.heads[0].z, &opts))?;
    writeln!(out, "\nHead 2 Output:\n{}", array_str(&m.heads[1].z, &opts))?;
    writeln!(
        out,
        "\nConcatenated Heads:\n{}",
        array_str(&m.concat, &opts)
    )?;
    writeln!(
        out,
        "\nFinal Multi-Head Self-Attention Output (M):\n{}",
        array_str(m.result(), &opts)
    )?;
    Ok(out)
}
