//! The wire format against Jupyter's own client (tests/data/messages.json, written by
//! scripts/wire_goldens.py with jupyter_client), and what a hostile sender can put on a port.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is the test failing, as a failed assert is"
)]

use attention_lab_wire::{Key, Message, Session, WireError, DELIMITER};
use proptest::prelude::*;
use serde_json::{json, Value};

fn goldens() -> Vec<Value> {
    let text = include_str!("data/messages.json");
    serde_json::from_str::<Value>(text)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

fn frames(case: &Value) -> Vec<Vec<u8>> {
    case["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| hex::decode(f.as_str().unwrap()).unwrap())
        .collect()
}

#[test]
fn messages_jupyter_client_signed_are_read_with_their_parts() {
    for case in goldens() {
        let key = Key::new(case["key"].as_str().unwrap().as_bytes());
        let message = Message::decode(&frames(&case), &key).unwrap();
        for part in ["header", "parent_header", "metadata", "content"] {
            let got = match part {
                "header" => &message.header,
                "parent_header" => &message.parent_header,
                "metadata" => &message.metadata,
                _ => &message.content,
            };
            assert_eq!(got, &case[part], "{part} of {}", case["header"]["msg_type"]);
        }
        let identities: Vec<Vec<u8>> = case["identities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i.as_str().unwrap().as_bytes().to_vec())
            .collect();
        assert_eq!(message.identities, identities);
    }
}

#[test]
fn our_signature_of_jupyter_client_s_parts_is_its_signature() {
    for case in goldens() {
        let key = Key::new(case["key"].as_str().unwrap().as_bytes());
        let frames = frames(&case);
        let at = frames.iter().position(|f| f == DELIMITER).unwrap();
        let parts = [
            &frames[at + 2],
            &frames[at + 3],
            &frames[at + 4],
            &frames[at + 5],
        ]
        .map(|p| &p[..]);
        assert_eq!(key.sign(parts).as_bytes(), &frames[at + 1][..]);
    }
}

#[test]
fn a_message_signed_with_another_key_or_none_is_refused() {
    for case in goldens() {
        let key = case["key"].as_str().unwrap();
        if key.is_empty() {
            continue;
        }
        let frames = frames(&case);
        assert_eq!(
            Message::decode(&frames, &Key::new(b"guess")),
            Err(WireError::BadSignature)
        );
        assert_eq!(
            Message::decode(&frames, &Key::new(b"")),
            Err(WireError::BadSignature)
        );
        // The same parts with the signature left out, as a forger without the key sends them.
        let mut unsigned = frames.clone();
        let at = unsigned.iter().position(|f| f == DELIMITER).unwrap();
        unsigned[at + 1].clear();
        assert_eq!(
            Message::decode(&unsigned, &Key::new(key.as_bytes())),
            Err(WireError::BadSignature)
        );
    }
}

#[test]
fn what_is_wrong_is_named() {
    let key = Key::new(b"k");
    assert_eq!(
        Message::decode(&[b"x".to_vec()], &key),
        Err(WireError::NoDelimiter)
    );
    assert_eq!(
        Message::decode(&[DELIMITER.to_vec(), b"00".to_vec()], &key),
        Err(WireError::TooFewFrames(1))
    );
    let signed = |parts: [&[u8]; 4]| {
        let mut f = vec![DELIMITER.to_vec(), key.sign(parts).into_bytes()];
        f.extend(parts.iter().map(|p| p.to_vec()));
        f
    };
    let err = Message::decode(&signed([b"{", b"{}", b"{}", b"{}"]), &key).unwrap_err();
    assert!(
        matches!(err, WireError::Json { part: "header", .. }),
        "{err}"
    );
    assert_eq!(
        Message::decode(&signed([b"{}", b"{}", b"{}", b"[]"]), &key),
        Err(WireError::NoMsgType)
    );
    assert_eq!(
        Message::decode(&signed([br#"{"msg_type":"x"}"#, b"{}", b"{}", b"7"]), &key),
        Err(WireError::NotAnObject("content"))
    );
}

#[test]
fn a_reply_goes_back_to_the_request_s_identities_and_reads_back() {
    let key = Key::new(b"k");
    let session = Session::new("kernel");
    let mut request = Message::new(&session, "execute_request", json!({"code": "1"}));
    request.identities = vec![b"peer".to_vec(), b"router".to_vec()];
    let reply = request.reply(&session, "execute_reply", json!({"status": "ok"}));
    let read = Message::decode(&reply.encode(&key), &key).unwrap();
    assert_eq!(read.identities, request.identities);
    assert_eq!(read.parent_header, request.header);
    assert_eq!(read, reply);
}

proptest! {
    // Anything at all on a port: never a panic.
    #[test]
    fn arbitrary_frames_never_panic(frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..9), delimiter_at in 0usize..9) {
        let mut frames = frames;
        if delimiter_at < frames.len() {
            frames[delimiter_at] = DELIMITER.to_vec();
        }
        let _ = Message::decode(&frames, &Key::new(b"k"));
        let _ = Message::decode(&frames, &Key::new(b""));
    }

    // Any one byte changed in a signed message's parts or signature is refused.
    #[test]
    fn one_changed_byte_is_refused(part in 1usize..6, at in any::<prop::sample::Index>(), bit in 0u8..8) {
        // Bit 5 turns a hex letter's case, which names the same signature.
        prop_assume!(!(part == 1 && bit == 5));
        let key = Key::new(b"secret");
        let session = Session::new("k");
        let mut frames = Message::new(&session, "kernel_info_request", json!({"a": 1})).encode(&key);
        let frame = &mut frames[part];
        let i = at.index(frame.len());
        frame[i] ^= 1 << bit;
        prop_assert!(Message::decode(&frames, &key).is_err());
    }
}
