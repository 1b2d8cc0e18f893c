//! The committed TypeScript definitions are exactly what the generator prints: they cannot
//! drift from the Rust types.

use std::path::PathBuf;

const REGENERATE: &str =
    "cargo run -q -p deepsolve-protocol --example typescript > web/src/protocol.ts";

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../web/src/protocol.ts")
}

#[test]
fn the_committed_typescript_matches_the_generator() {
    let path = committed_path();
    let committed = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} unreadable ({e}); run `{REGENERATE}`", path.display()));
    let generated = deepsolve_protocol::schema::typescript();
    if committed != generated {
        let first_difference = committed
            .lines()
            .zip(generated.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .map(|(i, (a, b))| format!("line {}:\n  committed: {a}\n  generated: {b}", i + 1))
            .unwrap_or_else(|| "one is a prefix of the other".into());
        panic!("web/src/protocol.ts is stale ({first_difference}); run `{REGENERATE}`");
    }
}

#[test]
fn the_typescript_declares_every_wire_type() {
    let ts = deepsolve_protocol::schema::typescript();
    for declaration in [
        "export type TurnEvent = {",
        "export type EventKind =",
        "export type WarningKind =",
        "export type ErrorKind =",
        "export type StopReason =",
        "export interface TurnView {",
        "export interface CreateTurn {",
        "export interface ErrorBody {",
        "export type ApiErrorCode =",
        "export type ContentPart =",
        "export interface Source {",
    ] {
        assert!(ts.contains(declaration), "missing `{declaration}`");
    }
    assert!(ts.contains("type: \"turn_finished\";"));
    // Only free-form JSON (tool arguments, OpenAI message content) is left untyped: a schema
    // the converter could not read would show up here as another `unknown`.
    let untyped: Vec<&str> = ts
        .lines()
        .filter(|l| l.ends_with(": unknown;"))
        .map(|l| {
            l.trim()
                .trim_end_matches(": unknown;")
                .trim_end_matches('?')
        })
        .collect();
    assert!(
        untyped
            .iter()
            .all(|name| ["args", "content"].contains(name)),
        "untyped fields: {untyped:?}"
    );
}
