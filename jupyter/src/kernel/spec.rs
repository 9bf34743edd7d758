//! What Jupyter knows the kernel by: its kernelspec's names and its language, as the
//! kernelspec, the kernel's `kernel_info_reply` and the notebooks' metadata give them.

/// The kernelspec's folder name: our own, so evcxr's `rust` kernelspec is never touched.
pub const KERNEL_NAME: &str = "attention-lab-rust";
/// What Jupyter shows in its launcher.
pub const DISPLAY_NAME: &str = "Rust (attention-lab)";
/// The kernelspec's language, as the kernel's `language_info` names it.
pub const LANGUAGE: &str = "Rust";

/// The `metadata.kernelspec` that Jupyter writes into a notebook run in this kernel (from the
/// kernelspec: its folder name, display name and language). The notebooks store it, so that
/// opening one in `lab` changes nothing; `replay --update` writes it.
///
/// ```
/// let spec = attention_lab_jupyter::kernel::notebook_kernelspec();
/// assert_eq!(spec["name"], "attention-lab-rust");
/// ```
pub fn notebook_kernelspec() -> serde_json::Value {
    serde_json::json!({
        "display_name": DISPLAY_NAME,
        "language": LANGUAGE,
        "name": KERNEL_NAME,
    })
}

/// The `language_info` of the kernel's `kernel_info_reply`, which Jupyter copies into a
/// notebook's metadata when the kernel starts.
///
/// ```
/// assert_eq!(attention_lab_jupyter::kernel::language_info()["name"], "Rust");
/// ```
pub fn language_info() -> serde_json::Value {
    serde_json::json!({
        "codemirror_mode": "rust",
        "file_extension": ".rs",
        "mimetype": "text/rust",
        "name": LANGUAGE,
        "pygment_lexer": "rust",
        "version": "",
    })
}
