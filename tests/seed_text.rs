//! Every seed document's printed output, computed with the library and printed with `np`,
//! equals NumPy's transcript (tests/data/transcripts/, from scripts/seed_transcripts.py)
//! byte for byte; seed 001 uses `RandomState::new(0)` as NumPy's `np.random.seed(0)`.

#[path = "../examples/seeds/transcripts.rs"]
mod transcripts;

#[test]
fn transcripts_equal_numpy_byte_for_byte() {
    for (name, make) in transcripts::SEEDS {
        let ours = make().unwrap_or_else(|e| panic!("seed {name}: {e}"));
        let path = format!(
            "{}/tests/data/transcripts/{name}.txt",
            env!("CARGO_MANIFEST_DIR")
        );
        let numpy = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        if ours != numpy {
            let line = ours.lines().zip(numpy.lines()).position(|(a, b)| a != b);
            panic!("seed {name} differs from NumPy at line {line:?}:\n--- ours\n{ours}\n--- NumPy\n{numpy}");
        }
    }
}
