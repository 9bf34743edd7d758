//! The kernel's ZMTP reader on any bytes a peer can send: a greeting, then messages and
//! commands until one error, never a panic; no message it hands on is over the cap, and every
//! READY it reads has properties that fit inside the command.
#![no_main]

use attention_lab_wire::zmtp::frame::{encode_message, properties, Incoming, Reader};
use libfuzzer_sys::fuzz_target;

const CAP: u64 = 4096;

fuzz_target!(|bytes: &[u8]| {
    let mut reader = Reader::new(bytes, CAP);
    if reader.greeting().is_err() {
        return;
    }
    while let Ok(incoming) = reader.incoming() {
        match incoming {
            Incoming::Message(frames) => {
                let total: usize = frames.iter().map(Vec::len).sum();
                assert!(total as u64 <= CAP);
                // What was read writes back as frames the reader reads the same.
                let again = Reader::new(&encode_message(&frames)[..], CAP).message();
                assert_eq!(again.ok(), Some(frames));
            }
            Incoming::Command { data, .. } => {
                if let Ok(props) = properties(&data) {
                    let inside: usize = props.iter().map(|(n, v)| 5 + n.len() + v.len()).sum();
                    assert_eq!(inside, data.len());
                }
            }
        }
    }
});
