//! The revision `deepsolve --version` prints: `DEEPSOLVE_REVISION` (`git abc123def456`).
//!
//! From `git` when these sources are a checkout of the deepsolve repository; from the
//! `DEEPSOLVE_REVISION` variable when set (a packager building from a tarball can name it);
//! else `revision unknown`. A tarball unpacked inside some other repository is not mistaken
//! for a checkout: the manifest must be a file git tracks.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=DEEPSOLVE_REVISION");
    let revision = match std::env::var("DEEPSOLVE_REVISION") {
        Ok(given) if !given.trim().is_empty() => given.trim().to_string(),
        _ => git_revision().map_or_else(|| "revision unknown".into(), |rev| format!("git {rev}")),
    };
    println!("cargo:rustc-env=DEEPSOLVE_REVISION={revision}");
}

fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// The short hash of `HEAD`, and a rebuild whenever `HEAD` moves.
fn git_revision() -> Option<String> {
    git(&["ls-files", "--error-unmatch", "Cargo.toml"])?;
    let head = git(&["rev-parse", "--short=12", "HEAD"])?;
    // HEAD itself (a checkout), the branch it points at (a commit), packed refs (a gc).
    for path in ["HEAD", "packed-refs"] {
        watch(git(&["rev-parse", "--git-path", path]));
    }
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(git(&["rev-parse", "--git-path", &branch]));
    }
    Some(head)
}

fn watch(path: Option<String>) {
    let Some(path) = path else { return };
    let path = match Path::new(&path).is_absolute() {
        true => Path::new(&path).to_path_buf(),
        // Relative to the directory git ran in.
        false => match std::env::var("CARGO_MANIFEST_DIR") {
            Ok(dir) => Path::new(&dir).join(path),
            Err(_) => return,
        },
    };
    // A path that does not exist would make cargo run this script on every build.
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
