//! The GGUF reader on any bytes: a file it reads, or one line naming what is wrong; never a
//! panic and never an allocation the file's own length does not pay for. What it reads, it
//! can expand: every matrix's first and last rows dequantise.
#![no_main]

use attention_lab_model::gguf::Gguf;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let file = match Gguf::from_bytes("fuzz.gguf", bytes.to_vec()) {
        Ok(file) => file,
        Err(e) => {
            assert!(!e.to_string().contains('\n'), "{e}");
            return;
        }
    };
    for t in file.tensors() {
        assert_eq!(file.data(t).len(), t.len);
        if let Ok(m) = file.matrix(&t.name) {
            assert_eq!(m.row(0).len(), m.cols());
            assert_eq!(m.row(m.rows() - 1).len(), m.cols());
        }
    }
    let _ = attention_lab_model::LlamaConfig::read(&file);
});
