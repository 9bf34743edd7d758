//! `show`'s .npy path on any bytes: a file that starts like a .npy file but is anything at
//! all must print or be one error, never a panic, an abort or an allocation of its declared
//! size before the data is there.
#![no_main]

use attention_lab::np::PrintOptions;
use attention_lab_classroom::matrices::read_npy;
use libfuzzer_sys::fuzz_target;
use std::io::Write;

fuzz_target!(|data: &[u8]| {
    // Mostly valid-looking files: the magic string, then the fuzzer's bytes.
    let mut bytes = b"\x93NUMPY".to_vec();
    bytes.extend_from_slice(data);
    let mut file = tempfile::NamedTempFile::new().expect("a temporary file");
    file.write_all(&bytes).expect("written");
    if let Ok(array) = read_npy(file.path()) {
        let opts = PrintOptions::default();
        assert!(!array.array_str(&opts).is_empty());
        assert!(!array.array_repr(&opts).is_empty());
    }
});
