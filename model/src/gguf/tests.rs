//! Unit tests of the module: hostile inputs and edge cases.

use super::*;

/// A GGUF file from its pieces, for hostile variations.
fn file(kv: &[(&str, u32, Vec<u8>)], tensors: &[(&str, &[u64], u32, u64)], data: &[u8]) -> Vec<u8> {
    let mut out = b"GGUF".to_vec();
    out.extend(3u32.to_le_bytes());
    out.extend((tensors.len() as u64).to_le_bytes());
    out.extend((kv.len() as u64).to_le_bytes());
    let string = |out: &mut Vec<u8>, s: &str| {
        out.extend((s.len() as u64).to_le_bytes());
        out.extend(s.as_bytes());
    };
    for (key, kind, value) in kv {
        string(&mut out, key);
        out.extend(kind.to_le_bytes());
        out.extend(value);
    }
    for (name, dims, kind, offset) in tensors {
        string(&mut out, name);
        out.extend((dims.len() as u32).to_le_bytes());
        for d in *dims {
            out.extend(d.to_le_bytes());
        }
        out.extend(kind.to_le_bytes());
        out.extend(offset.to_le_bytes());
    }
    out.resize(out.len().next_multiple_of(32), 0);
    out.extend(data);
    out
}

fn parse(bytes: Vec<u8>) -> Result<Gguf, String> {
    Gguf::from_bytes("t.gguf", bytes).map_err(|e| e.to_string())
}

#[test]
fn a_mapped_file_reads_as_the_same_bytes_in_memory() {
    let bytes = file(
        &[("n", 4, 7u32.to_le_bytes().to_vec())],
        &[("w", &[32], 8, 0)],
        &[1; 34],
    );
    let tmp = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tmp.path(), &bytes).unwrap();
    let mapped = Gguf::open(tmp.path()).unwrap();
    let read = parse(bytes).unwrap();
    assert_eq!(mapped.metadata(), read.metadata());
    assert_eq!(
        mapped.matrix("w").unwrap().row(0),
        read.matrix("w").unwrap().row(0)
    );
    let empty = tempfile::NamedTempFile::new().unwrap();
    let err = Gguf::open(empty.path()).unwrap_err().to_string();
    assert!(
        err.contains("truncated") || err.contains("cannot read"),
        "{err}"
    );
}

#[test]
fn reads_metadata_and_a_tensor() {
    let mut data = vec![0u8; 34];
    data[..2].copy_from_slice(&half::f16::from_f32(0.5).to_bits().to_le_bytes());
    data[2] = 4;
    let bytes = file(
        &[
            (
                "general.architecture",
                8,
                [5u64.to_le_bytes().to_vec(), b"llama".to_vec()].concat(),
            ),
            ("n", 4, 7u32.to_le_bytes().to_vec()),
        ],
        &[("w", &[32, 1], 8, 0)],
        &data,
    );
    let g = parse(bytes).unwrap();
    assert_eq!(g.string("general.architecture").unwrap(), "llama");
    assert_eq!(g.usize("n").unwrap(), 7);
    let w = g.matrix("w").unwrap();
    assert_eq!(w.row(0)[0], 2.0);
}

#[test]
fn hostile_headers_are_one_line_errors() {
    let ok_kv = ("n", 4u32, 7u32.to_le_bytes().to_vec());
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"GGUX\x03\0\0\0".to_vec(), "not a GGUF file"),
        (b"GG".to_vec(), "truncated"),
        (
            file(std::slice::from_ref(&ok_kv), &[], &[])[..30].to_vec(),
            "truncated",
        ),
        (
            {
                let mut b = file(&[], &[], &[]);
                b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
                b
            },
            "metadata pairs cannot fit",
        ),
        (
            {
                let mut b = file(&[], &[], &[]);
                b[8..16].copy_from_slice(&(1u64 << 40).to_le_bytes());
                b
            },
            "tensors cannot fit",
        ),
        (
            file(&[("s", 8, u64::MAX.to_le_bytes().to_vec())], &[], &[]),
            "bytes of a string cannot fit",
        ),
        (
            file(
                &[(
                    "a",
                    9,
                    [
                        4u32.to_le_bytes().to_vec(),
                        (1u64 << 50).to_le_bytes().to_vec(),
                    ]
                    .concat(),
                )],
                &[],
                &[],
            ),
            "array values cannot fit",
        ),
        (
            file(&[], &[("w", &[32, 1], 8, 4096)], &[0; 34]),
            "past the file's end",
        ),
        (
            file(&[], &[("w", &[32, 1 << 40], 8, 0)], &[0; 34]),
            "past the file's end",
        ),
        (
            file(&[], &[("w", &[32, u64::MAX / 2], 8, 0)], &[0; 34]),
            "overflows",
        ),
        (file(&[], &[("w", &[32, 0], 8, 0)], &[0; 34]), "at least 1"),
        (Vec::new(), "truncated"),
        (file(&[], &[("w", &[32, 2], 8, 0)], &[0; 34]), "truncated"),
        (
            file(&[], &[("w", &[31, 1], 8, 0)], &[0; 34]),
            "whole Q8_0 blocks",
        ),
        (file(&[], &[("w", &[32], 99, 0)], &[0; 34]), "ggml type 99"),
        (
            file(&[], &[("w", &[32], 8, 3)], &[0; 34]),
            "not a multiple of the alignment",
        ),
        (file(&[("v", 42, vec![])], &[], &[]), "value type 42"),
    ];
    for (bytes, want) in cases {
        let err = parse(bytes).unwrap_err();
        assert!(err.contains(want), "{err:?} should say {want:?}");
        assert!(!err.contains('\n'), "{err:?}");
    }
    // Found by the fuzzer: a key holding a newline, in a message that must stay one line.
    let err = parse(file(&[("gener\nal.x", 2149, vec![])], &[], &[])).unwrap_err();
    assert!(
        err.contains("metadata gener\\nal.x: value type 2149"),
        "{err}"
    );
    let mut bytes = file(&[], &[], &[]);
    bytes[4..8].copy_from_slice(&4u32.to_le_bytes());
    assert!(parse(bytes).unwrap_err().contains("GGUF version 4"));
}
