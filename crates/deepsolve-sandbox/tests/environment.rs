//! No secret of ours reaches sandboxed code. This binary holds one test so it can put secrets
//! in its own environment before any other thread exists.

mod common;

use std::time::Duration;

use common::*;

const SECRETS: [(&str, &str); 4] = [
    ("DEEPSOLVE_API_KEY", "sk-deepsolve-test-secret-1"),
    ("OPENAI_API_KEY", "sk-openai-test-secret-2"),
    ("AWS_SECRET_ACCESS_KEY", "aws-test-secret-3"),
    ("PYTHONSTARTUP", "/tmp/not-a-real-startup-file.py"),
];

#[test]
fn no_api_key_or_other_secret_reaches_the_sandbox() {
    for (key, value) in SECRETS {
        // SAFETY: the only test of this binary, before the runtime (or any thread) starts.
        unsafe { std::env::set_var(key, value) };
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let sb = sandbox().await;
        let (_d, ws) = workspace();
        let mut py = python(&sb, &ws).await;
        let seen = cell(
            &mut py,
            "import os\nprint(repr(dict(os.environ)))\nprint(open('/proc/self/environ', 'rb').read())\nprint(open('/proc/1/environ', 'rb').read() if os.access('/proc/1/environ', os.R_OK) else '')",
        )
        .await;
        let shell = sh(&sb, &ws, "env; cat /proc/*/environ 2>/dev/null", Duration::from_secs(10)).await;
        for (key, value) in SECRETS {
            for text in [&seen.stdout.text, &shell.stdout.text] {
                assert!(!text.contains(value), "{key}'s value leaked: {text}");
                assert!(!text.contains(key), "{key} leaked: {text}");
            }
        }
        assert!(seen.stdout.text.contains("MPLBACKEND"), "{seen:?}");
    });
}
