//! The Jupyter side of attention-lab: the notebook model (`replay::notebook`), `replay` and
//! its two engines behind one seam (`replay::engine`: the batch engine compiles a notebook as
//! one program, `runner` drives evcxr cell by cell, `launch` picks one), the Rust kernel
//! (`kernel`: the project's own Jupyter protocol side, `kernel::server`, driving evcxr behind
//! that same seam, `kernel::context`, with its tuning) and `lab` (JupyterLab with that kernel).
//! The one crate of the project that depends on evcxr (feature `evcxr`, on by default; without
//! it, the readers, the seam and the protocol side, whose tests need no evcxr).
//!
//! A binary that uses it calls [`runtime_hook`] first in `main`: evcxr re-runs the binary as
//! the child process that executes cells.
//!
//! ```
//! use attention_lab_jupyter::replay::notebook::Notebook;
//! let nb = Notebook::parse(r#"{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}"#).unwrap();
//! assert!(nb.cells.is_empty());
//! ```

#[cfg(feature = "evcxr")]
pub mod build;
#[cfg(feature = "evcxr")]
mod cell;
#[cfg(feature = "evcxr")]
mod environment;
#[cfg(feature = "evcxr")]
pub mod kernel;
#[cfg(feature = "evcxr")]
pub mod lab;
#[cfg(all(feature = "evcxr", unix))]
pub mod priority;
#[cfg(all(feature = "evcxr", unix))]
pub mod process;
#[cfg(feature = "evcxr")]
pub mod replay;
#[cfg(all(feature = "evcxr", unix))]
pub mod supervise;
#[cfg(feature = "evcxr")]
pub mod wrapper;
/// Without the `evcxr` feature (the fuzz targets' build, which would otherwise compile evcxr
/// and rust-analyzer with sanitizers): replay's readers and its engines' seam only, and its
/// depth check with `parse`.
#[cfg(not(feature = "evcxr"))]
pub mod replay {
    #[path = "compare.rs"]
    pub mod compare;
    #[cfg(feature = "parse")]
    #[path = "depth.rs"]
    pub mod depth;
    #[path = "engine.rs"]
    pub mod engine;
    #[path = "notebook.rs"]
    pub mod notebook;
}
/// Without the `evcxr` feature: the kernel's protocol side, whose tests drive it with an
/// engine of their own, and what Jupyter knows the kernel by.
#[cfg(not(feature = "evcxr"))]
pub mod kernel {
    #[path = "server.rs"]
    pub mod server;
    #[path = "spec.rs"]
    pub mod spec;
    pub use spec::{language_info, notebook_kernelspec, DISPLAY_NAME, KERNEL_NAME, LANGUAGE};
}

/// evcxr's hook: in the child process that evcxr starts from this same binary to run cells
/// (and as its rustc wrapper, where a cell's library may come from the compiled-cell cache,
/// `attention_lab_cells`), it runs that role and never returns; elsewhere it returns at once.
/// Call it first in `main`.
///
/// ```no_run
/// attention_lab_jupyter::runtime_hook(); // first, in `main`
/// // ... the program
/// ```
#[cfg(feature = "evcxr")]
pub fn runtime_hook() {
    wrapper::remap_build_folder();
    wrapper::serve_cells();
    evcxr::runtime_hook();
}
