//! The in-process model through the real binary, without weights: a model file that cannot be
//! used is one line on stderr naming the file and the problem (exit 2, nothing loaded), the
//! default file in the model cache is the embedded default when no endpoint is configured, and
//! an endpoint still wins. The files are made here (a GGUF header written by hand).

use std::path::Path;

use deepsolve_testkit::*;

use crate::support::Isolated as Env;

/// A GGUF v3 file: string/u32 metadata and one F32 tensor of `elements`, its data present when
/// `with_data` (else the file ends after the header: truncated).
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

const ARCH: (&str, Meta) = ("general.architecture", Meta::Str("llama"));

/// `deepsolve solve` on the in-process model `path`: exit code and stderr.
fn solve_local(env: &Env, path: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = env
        .command()
        .args(["solve", "--set", "llm.provider=local", "--set"])
        .arg(format!("llm.local.model={}", path.display()))
        .args(extra)
        .arg("What is 2 + 2?")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One line on stderr, exit 2, naming the file.
fn assert_refused(code: Option<i32>, stderr: &str, path: &Path) {
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
}

#[test]
fn a_missing_model_file_is_named_with_the_way_to_fetch_one() {
    let env = Env::new();
    let path = env.path().join("absent.gguf");
    let (code, stderr) = solve_local(&env, &path, &[]);
    assert_refused(code, &stderr, &path);
    assert!(stderr.contains("no model file at"), "{stderr}");
    assert!(stderr.contains("scripts/fetch-model"), "{stderr}");
}

#[test]
fn a_truncated_model_file_gives_both_sizes() {
    let env = Env::new();
    let path = env.path().join("cut.gguf");
    std::fs::write(&path, gguf(&[ARCH], 1024, false)).unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    let (code, stderr) = solve_local(&env, &path, &[]);
    assert_refused(code, &stderr, &path);
    assert!(stderr.contains("is truncated"), "{stderr}");
    assert!(stderr.contains(&format!("it has {size} bytes")), "{stderr}");
    assert!(
        stderr.contains(&format!("describes {}", size + 4096)),
        "{stderr}"
    );
}

#[test]
fn a_file_that_is_not_a_model_a_base_model_and_a_context_too_long_are_named() {
    let env = Env::new();
    let html = env.path().join("page.gguf");
    std::fs::write(&html, b"<!DOCTYPE html><html>").unwrap();
    let (code, stderr) = solve_local(&env, &html, &[]);
    assert_refused(code, &stderr, &html);
    assert!(stderr.contains("is not a GGUF model"), "{stderr}");

    let base = env.path().join("base.gguf");
    std::fs::write(&base, gguf(&[ARCH], 16, true)).unwrap();
    let (code, stderr) = solve_local(&env, &base, &[]);
    assert_refused(code, &stderr, &base);
    assert!(stderr.contains("has no chat template"), "{stderr}");

    let short = env.path().join("short.gguf");
    let meta = [
        ARCH,
        ("llama.context_length", Meta::U32(2048)),
        ("tokenizer.chat_template", Meta::Str("{{ messages }}")),
    ];
    std::fs::write(&short, gguf(&meta, 16, true)).unwrap();
    let (code, stderr) = solve_local(&env, &short, &["--set", "llm.local.context=4096"]);
    assert_refused(code, &stderr, &short);
    assert!(
        stderr.contains("llm.local.context is 4096 tokens") && stderr.contains("at most 2048"),
        "{stderr}"
    );
}

#[test]
fn with_no_endpoint_the_default_model_in_the_cache_is_used_and_an_endpoint_wins() {
    let env = Env::new();
    std::fs::create_dir_all(env.models()).unwrap();
    let default = env.models().join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
    // A truncated default: reaching its check proves the default was chosen.
    std::fs::write(&default, gguf(&[ARCH], 1024, false)).unwrap();
    let out = env.command().args(["solve", "x"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_refused(out.status.code(), &stderr, &default);
    assert!(stderr.contains("is truncated"), "{stderr}");

    let server = MockServer::policy(WellBehaved::new(1));
    let out = env.solve(&server).arg("x").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.assert_clean();
}

#[test]
fn with_neither_an_endpoint_nor_a_local_model_the_error_names_both_ways() {
    let env = Env::new();
    let out = env.command().args(["solve", "x"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--base-url"), "{stderr}");
    assert!(stderr.contains("scripts/fetch-model"), "{stderr}");
}
