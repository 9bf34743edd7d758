//! Pictures at a projector's size for the browser test e2e/fit.test.mjs: a layer grid as
//! notebook 008 draws it (12 heads over 13 tokens, six panels a row asked) and one head's
//! heatmap, both with `.scale(1.5)`, each written as the notebook shows it (an `<img>` of the
//! SVG) to target/e2e/fit-pages/. The weights are made up; the sizes are 008's.
//!
//! `cargo run -p attention-lab-plot --example fit_pages`

use attention_lab::prelude::*;
use attention_lab_plot::*;
use base64::Engine as _;

const TOKENS: [&str; 13] = [
    "[CLS]", "the", "cat", "sat", "on", "the", "mat", "because", "it", "was", "tired", ".", "[SEP]",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = TOKENS.len();
    let x = Array2::from_shape_fn((n, n), |(i, j)| ((i * 7 + j * 3) % 5) as f64 / 5.0);
    let heads = (0..12)
        .map(|h| {
            let q = Array2::from_shape_fn((n, n), |(i, j)| 4.0 * (((i + j + h) % 3) as f64 - 1.0));
            Head::new(q, Array2::eye(n), Array2::eye(n))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let out = MultiHead::new(heads, None)?.forward(&x, &Attend::new())?;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/e2e/fit-pages");
    std::fs::create_dir_all(&dir)?;
    let grid = heads_grid(&out, &TOKENS)
        .columns(6)
        .title("layer 0")
        .scale(1.5);
    let head = heatmap(&out.heads[2].weights)
        .labels(&TOKENS)
        .title("layer 0, head 2: previous token 0.412")
        .scale(1.5);
    for (name, svg) in [("layer-grid", grid.to_svg()), ("heatmap", head.to_svg())] {
        let img = format!(
            "<img class=\"alab-figure\" alt=\"figure\" src=\"data:image/svg+xml;base64,{}\"/>",
            base64::engine::general_purpose::STANDARD.encode(svg.trim_end())
        );
        std::fs::write(dir.join(format!("{name}-150.html")), img)?;
    }
    println!("{}", dir.display());
    Ok(())
}
