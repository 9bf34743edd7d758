//! The benchmark's inputs, shared by `examples/attention_forward` and `benches/attention.rs`.

use attention_lab::prelude::*;

/// NumPy's `np.random.seed(0)` stream, as `scripts/bench_attention.py` draws it for NumPy and
/// PyTorch: x = rand(N, D), then W_Q, W_K, W_V, W_O each rand(D, D) / D, split into `h` heads.
pub fn inputs(n: usize, d: usize, h: usize) -> Result<(Array2<f64>, MultiHead), String> {
    let mut rs = np::RandomState::new(0);
    let mut draw = |rows, cols| -> Result<Array2<f64>, String> {
        rs.rand([rows, cols])
            .map_err(|e| e.to_string())?
            .into_dimensionality()
            .map_err(|e| e.to_string())
    };
    let x = draw(n, d)?;
    let scale = d.max(1) as f64;
    let (wq, wk, wv, wo) = (
        draw(d, d)? / scale,
        draw(d, d)? / scale,
        draw(d, d)? / scale,
        draw(d, d)? / scale,
    );
    let layer = MultiHead::split(&wq, &wk, &wv, h, Some(wo)).map_err(|e| e.to_string())?;
    Ok((x, layer))
}
