//! A model file that cannot be used is a named error before llama.cpp sees it. The files are
//! made here (a GGUF header written by hand; a sparse file for the one too large for memory),
//! so no weights are needed.

use std::path::Path;

use deepsolve_local::{LocalConfig, LocalError, LocalModel};

/// A GGUF v3 file: `kv` string/u32 metadata and one F32 tensor of `elements`, its data
/// present when `with_data` (else the file ends after the header).
fn gguf(kv: &[(&str, Meta)], elements: u64, with_data: bool) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"GGUF");
    out.extend_from_slice(&3u32.to_le_bytes());
    out.extend_from_slice(&1u64.to_le_bytes());
    out.extend_from_slice(&(kv.len() as u64).to_le_bytes());
    let string = |out: &mut Vec<u8>, s: &str| {
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    for (key, value) in kv {
        string(&mut out, key);
        match value {
            Meta::Str(s) => {
                out.extend_from_slice(&8u32.to_le_bytes());
                string(&mut out, s);
            }
            Meta::U32(n) => {
                out.extend_from_slice(&4u32.to_le_bytes());
                out.extend_from_slice(&n.to_le_bytes());
            }
        }
    }
    string(&mut out, "token_embd.weight");
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(&elements.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes()); // F32
    out.extend_from_slice(&0u64.to_le_bytes()); // offset in the data section
    while !out.len().is_multiple_of(32) {
        out.push(0);
    }
    if with_data {
        out.resize(out.len() + elements as usize * 4, 0);
    }
    out
}

enum Meta {
    Str(&'static str),
    U32(u32),
}

fn load(path: &Path, context: u32) -> LocalError {
    let mut config = LocalConfig::new(path);
    config.context = context;
    LocalModel::load(&config).unwrap_err()
}

#[test]
fn a_missing_file_is_named_with_the_way_to_fetch_one() {
    let dir = tempfile::tempdir().unwrap();
    let err = load(&dir.path().join("none.gguf"), 1024);
    assert!(matches!(err, LocalError::Missing { .. }), "{err}");
    assert!(err.to_string().contains("scripts/fetch-model"), "{err}");
}

#[test]
fn a_file_that_is_not_gguf_says_what_it_starts_with() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.gguf");
    std::fs::write(&path, b"<!DOCTYPE html>").unwrap();
    let err = load(&path, 1024);
    assert!(matches!(err, LocalError::NotGguf { .. }), "{err}");
    assert!(err.to_string().contains("<!DO"), "{err}");
    std::fs::write(&path, b"").unwrap();
    assert!(load(&path, 1024).to_string().contains("empty"));
}

#[test]
fn a_truncated_file_gives_both_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.gguf");
    let meta = [("general.architecture", Meta::Str("llama"))];
    std::fs::write(&path, gguf(&meta, 1024, false)).unwrap();
    let err = load(&path, 1024);
    let LocalError::Truncated {
        actual, expected, ..
    } = err
    else {
        panic!("{err}");
    };
    assert_eq!(expected, actual + 4096);
}

#[test]
fn a_model_without_a_chat_template_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("base.gguf");
    let meta = [("general.architecture", Meta::Str("llama"))];
    std::fs::write(&path, gguf(&meta, 16, true)).unwrap();
    let err = load(&path, 1024);
    assert!(matches!(err, LocalError::NoChatTemplate { .. }), "{err}");
}

#[test]
fn a_context_beyond_the_trained_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("short.gguf");
    let meta = [
        ("general.architecture", Meta::Str("llama")),
        ("llama.context_length", Meta::U32(2048)),
        ("tokenizer.chat_template", Meta::Str("{{ messages }}")),
    ];
    std::fs::write(&path, gguf(&meta, 16, true)).unwrap();
    let err = load(&path, 4096);
    let LocalError::ContextTooLong { asked, trained, .. } = err else {
        panic!("{err}");
    };
    assert_eq!((asked, trained), (4096, 2048));
}

#[test]
fn a_model_larger_than_memory_is_refused() {
    let Some(available) = deepsolve_local::available_memory() else {
        println!("SKIP a_model_larger_than_memory_is_refused: available memory unknown");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.gguf");
    let meta = [
        ("general.architecture", Meta::Str("llama")),
        ("tokenizer.chat_template", Meta::Str("{{ messages }}")),
    ];
    // A header describing twice the available memory, the rest of the file sparse.
    let elements = available / 2 + (1 << 20);
    let header = gguf(&meta, elements, false);
    let file = std::fs::File::create(&path).unwrap();
    std::io::Write::write_all(&mut &file, &header).unwrap();
    file.set_len(header.len() as u64 + elements * 4).unwrap();
    let err = load(&path, 1024);
    assert!(matches!(err, LocalError::TooLarge { .. }), "{err}");
    assert!(err.to_string().contains("MiB are available"), "{err}");
}

#[test]
fn bad_settings_are_named() {
    let mut config = LocalConfig::new("/nonexistent.gguf");
    config.parallel = 0;
    let err = LocalModel::load(&config).unwrap_err();
    assert!(err.to_string().contains("llm.local.parallel"), "{err}");
}
