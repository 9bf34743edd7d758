//! The cache's key, proved with the real rustc: a cell compiled as cargo compiles evcxr's (a
//! `cdylib` named `ctx` that names a compiled dependency), answered by [`Cache::compile`].
//! Each library is loaded and called, so a hit is also shown to be the right library.
//!
//! - misses: a changed dependency, a changed earlier cell (the source), a changed rustc flag,
//!   another toolchain;
//! - hits: the same cell again, and the same cell in another user's kernel (another build
//!   folder, the first user's store shared with it).

mod common;

use attention_lab_cells::{store::Store, Cache, How};
use common::{answer, Lab, Text, COMPILED};

#[test]
fn the_same_cell_hits_and_loads_the_same_library() {
    let lab = Lab::new();
    let cache = lab.cache("ann");
    let cell = lab.cell("ann", &[]);
    let first = cache.compile(&lab.rustc, &cell);
    assert_eq!(first.how, COMPILED, "{}", first.stderr_text());
    let compiled = lab.library(&cell);
    assert_eq!(answer(&lab.library_path(&cell)), 1);
    std::fs::remove_file(lab.library_path(&cell)).unwrap();
    let second = cache.compile(&lab.rustc, &cell);
    assert_eq!(second.how, lab.loaded("ann"));
    assert_eq!(second.status, 0);
    assert!(second.trouble.is_empty(), "{:?}", second.trouble);
    assert_eq!(lab.library(&cell), compiled);
    assert_eq!(answer(&lab.library_path(&cell)), 1);
    // What cargo reads: the artefact messages name this folder's files.
    assert!(second
        .stderr_text()
        .contains(&lab.library_path(&cell).display().to_string()));
    assert!(lab
        .dep_info(&cell)
        .contains(&cell.build.display().to_string()));
}

#[test]
fn the_same_cell_in_another_users_kernel_hits() {
    let lab = Lab::new();
    let ann = lab.cache("ann");
    let cell = lab.cell("ann", &[]);
    assert_eq!(lab.how(&ann, &cell), COMPILED);
    // Ben's kernel: another build folder, his own store, Ann's (a teacher's) shared.
    let ben = Cache::new(
        Some(Store::new(lab.store_dir("ben"))),
        vec![Store::new(lab.store_dir("ann"))],
        1 << 30,
    );
    let his = lab.cell("ben", &[]);
    let outcome = ben.compile(&lab.rustc, &his);
    assert_eq!(outcome.how, lab.loaded("ann"), "{:?}", outcome.trouble);
    assert_eq!(answer(&lab.library_path(&his)), 1);
    assert!(
        !lab.dep_info(&his).contains("/ann/"),
        "{}",
        lab.dep_info(&his)
    );
}

#[test]
fn a_changed_dependency_misses() {
    let lab = Lab::new();
    let cache = lab.cache("ann");
    let cell = lab.cell("ann", &[]);
    assert_eq!(lab.how(&cache, &cell), COMPILED);
    // The dependency rebuilt from a changed source, at the same path (as cargo does).
    lab.dependency("ann", 2);
    let outcome = cache.compile(&lab.rustc, &cell);
    assert_eq!(outcome.how, COMPILED);
    assert_eq!(answer(&lab.library_path(&cell)), 2);
}

#[test]
fn a_changed_earlier_cell_misses() {
    let lab = Lab::new();
    let cache = lab.cache("ann");
    let cell = lab.cell("ann", &[]);
    assert_eq!(lab.how(&cache, &cell), COMPILED);
    // evcxr writes an earlier cell's items into every later cell's source.
    lab.write_source("ann", "pub const EARLIER: i32 = 10;\n");
    let outcome = cache.compile(&lab.rustc, &cell);
    assert_eq!(outcome.how, COMPILED);
    assert_eq!(answer(&lab.library_path(&cell)), 11);
}

#[test]
fn a_changed_rustc_flag_misses() {
    let lab = Lab::new();
    let cache = lab.cache("ann");
    assert_eq!(lab.how(&cache, &lab.cell("ann", &[])), COMPILED);
    let optimised = lab.cell("ann", &["-C", "opt-level=1"]);
    assert_eq!(lab.how(&cache, &optimised), COMPILED);
    let checked = lab.cell("ann", &["-C", "overflow-checks=off"]);
    assert_eq!(lab.how(&cache, &checked), COMPILED);
    assert_eq!(lab.how(&cache, &optimised), lab.loaded("ann"));
}

#[test]
fn another_toolchain_misses() {
    let lab = Lab::new();
    let cache = lab.cache("ann");
    let cell = lab.cell("ann", &[]);
    assert_eq!(lab.how(&cache, &cell), COMPILED);
    // The same compiler under another version (as a second toolchain would report itself).
    let other = lab.toolchain("rustc 1.96.0-nightly (0000000 2026-12-01)");
    let outcome = cache.compile(&other, &cell);
    assert_eq!(outcome.how, COMPILED, "{}", outcome.stderr_text());
    assert_eq!(lab.how(&cache, &cell), lab.loaded("ann"));
}

#[test]
fn a_file_the_source_includes_is_part_of_the_entry() {
    let lab = Lab::new();
    let cache = lab.cache("ann");
    std::fs::write(lab.build("ann").join("src/extra.txt"), "5").unwrap();
    lab.write_source("ann", "pub const EARLIER: i32 = include!(\"extra.txt\");\n");
    let cell = lab.cell("ann", &[]);
    assert_eq!(lab.how(&cache, &cell), COMPILED);
    assert_eq!(answer(&lab.library_path(&cell)), 6);
    std::fs::write(lab.build("ann").join("src/extra.txt"), "7").unwrap();
    let outcome = cache.compile(&lab.rustc, &cell);
    assert!(
        matches!(outcome.how, How::Compiled { .. }),
        "{:?}",
        outcome.how
    );
    assert_eq!(answer(&lab.library_path(&cell)), 8);
}

#[test]
fn a_cell_whose_own_code_fails_is_stored_with_its_errors() {
    let lab = Lab::new();
    let cache = lab.cache("ann");
    lab.write_source("ann", "pub const EARLIER: i32 = \"not a number\";\n");
    let cell = lab.cell("ann", &[]);
    let first = cache.compile(&lab.rustc, &cell);
    assert_eq!((first.status, &first.how), (1, &COMPILED));
    let second = cache.compile(&lab.rustc, &cell);
    assert_eq!((second.status, &second.how), (1, &lab.loaded("ann")));
    assert_eq!(second.stderr_text(), first.stderr_text());
    assert!(
        second.stderr_text().contains("E0308"),
        "{}",
        second.stderr_text()
    );
}

#[test]
fn a_failure_outside_the_source_is_never_stored() {
    let lab = Lab::new();
    let cache = lab.cache("ann");
    // A linker that is not there: rustc fails, with no error in the source.
    let cell = lab.cell("ann", &["-C", "linker=/nonexistent/cc"]);
    let outcome = cache.compile(&lab.rustc, &cell);
    assert_eq!(outcome.status, 1, "{}", outcome.stderr_text());
    assert_eq!(outcome.how, How::Compiled { stored: false });
    assert_eq!(lab.how(&cache, &cell), How::Compiled { stored: false });
}

#[test]
fn a_failure_is_loaded_only_for_the_source_in_the_same_order() {
    let lab = Lab::new();
    let cache = lab.cache("ann");
    let (a, b) = (
        "pub const A: i32 = 1;\n",
        "pub const EARLIER: i32 = \"x\";\n",
    );
    lab.write_source("ann", &format!("{a}{b}"));
    let cell = lab.cell("ann", &[]);
    assert_eq!(lab.how(&cache, &cell), COMPILED);
    assert_eq!(lab.how(&cache, &cell), lab.loaded("ann"));
    // The same items in the other order: the same library, but errors on other lines.
    lab.write_source("ann", &format!("{b}{a}"));
    let outcome = cache.compile(&lab.rustc, &cell);
    assert_eq!((outcome.status, outcome.how), (1, COMPILED));
    // Fixed, in both orders: one library.
    lab.write_source("ann", &format!("{a}pub const EARLIER: i32 = 2;\n"));
    assert_eq!(lab.how(&cache, &cell), COMPILED);
    lab.write_source("ann", &format!("pub const EARLIER: i32 = 2;\n{a}"));
    assert_eq!(lab.how(&cache, &cell), lab.loaded("ann"));
    assert_eq!(answer(&lab.library_path(&cell)), 3);
}
