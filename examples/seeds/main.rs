//! Prints what each seed document's code prints, computed and printed by attention-lab.
//!
//! `cargo run --example seeds` prints every seed; `cargo run --example seeds -- 003` one.

mod transcripts;

use std::process::ExitCode;

fn main() -> ExitCode {
    let wanted: Vec<String> = std::env::args().skip(1).collect();
    if let Some(bad) = wanted
        .iter()
        .find(|w| !transcripts::SEEDS.iter().any(|(name, _)| name == w))
    {
        let names: Vec<&str> = transcripts::SEEDS.iter().map(|(name, _)| *name).collect();
        eprintln!(
            "seeds: no seed {bad:?}; the seeds that print are {}",
            names.join(", ")
        );
        return ExitCode::from(2);
    }
    for (name, make) in transcripts::SEEDS {
        if !wanted.is_empty() && !wanted.iter().any(|w| w == name) {
            continue;
        }
        match make() {
            Ok(text) => {
                if wanted.len() != 1 {
                    println!("==> seed {name}");
                }
                print!("{text}");
            }
            Err(e) => {
                eprintln!("seeds: seed {name}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
