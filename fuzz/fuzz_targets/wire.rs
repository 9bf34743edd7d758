//! The kernel's message reader on any frames: a message or one error, never a panic; a message
//! it accepts was signed with the key, and signing its parts again reads back the same message.
#![no_main]

use attention_lab_wire::{Key, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: (bool, Vec<Vec<u8>>)| {
    let (keyed, frames) = input;
    let key = Key::new(if keyed { b"fuzz key" } else { b"" });
    let Ok(message) = Message::decode(&frames, &key) else {
        return;
    };
    let again = Message::decode(&message.encode(&key), &key).expect("re-encoded message reads");
    assert_eq!(again, message);
});
