//! Trains notebook 010's model as the notebook does (tests/common/trained_010.rs: the same
//! seeds, batches and AdamW steps) and writes its weights to
//! tests/data/probe/attention_only_010/, the model scripts/probe_goldens.py probes with torch
//! and tests/probe.rs checks the library on.
//!
//! `cargo run --release --features learn --example trained_010_weights` (5 CPU seconds);
//! `-- FOLDER` writes elsewhere. Rerunning writes the same bytes.

#[cfg(feature = "learn")]
#[path = "../tests/common/trained_010.rs"]
mod trained_010;

#[cfg(feature = "learn")]
fn main() -> std::process::ExitCode {
    let folder = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/probe/attention_only_010"
        )
        .into()
    });
    match write(std::path::Path::new(&folder)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("trained_010_weights: {folder}: {e}");
            std::process::ExitCode::from(2)
        }
    }
}

#[cfg(not(feature = "learn"))]
fn main() -> std::process::ExitCode {
    eprintln!("trained_010_weights: needs the feature learn (--features learn)");
    std::process::ExitCode::from(2)
}

/// Writes the weights (`embed`, `pos`, `<layer>.wq` ... `<layer>.wo`, `unembed`, each in the
/// library's layout: x W) and config.json (the settings and every step's loss).
#[cfg(feature = "learn")]
fn write(folder: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    use ndarray_npy::write_npy;
    use trained_010::*;

    let (model, losses) = train()?;
    std::fs::create_dir_all(folder)?;
    write_npy(folder.join("embed.npy"), &model.embed)?;
    write_npy(folder.join("pos.npy"), &model.pos)?;
    for (l, weights) in model.layers.iter().enumerate() {
        for (name, w) in ["wq", "wk", "wv", "wo"].iter().zip(weights) {
            write_npy(folder.join(format!("{l}.{name}.npy")), w)?;
        }
    }
    write_npy(folder.join("unembed.npy"), &model.unembed)?;
    let (vocab, context, width, heads, layers) = SIZES;
    // `{:?}`: the shortest text that reads back as the same f64.
    let losses: Vec<String> = losses.iter().map(|l| format!("{l:?}")).collect();
    let config = format!(
        "{{\n \"notebook\": \"notebooks/010_attention_that_learns.ipynb\",\n \
         \"vocab\": {vocab},\n \"context\": {context},\n \"width\": {width},\n \
         \"heads\": {heads},\n \"layers\": {layers},\n \"model_seed\": {},\n \
         \"data_seed\": {},\n \"repeat\": [{}, {}],\n \"batch\": {BATCH},\n \
         \"steps\": {STEPS},\n \"lr\": {LR:?},\n \"losses\": [{}]\n}}\n",
        SEEDS.0,
        SEEDS.1,
        REPEAT.0,
        REPEAT.1,
        losses.join(", ")
    );
    std::fs::write(folder.join("config.json"), config)?;
    Ok(())
}
